"""The Prometheus-format MT-Bench and Vicuna-bench sets (Kim et al. 2023): 80 questions x 4 models,
each response with a reference answer, a 1-5 score rubric and THREE GPT-4 GRADES (not human
ratings; the targets the Prometheus paper correlates its judge against).

Not bundled (2.5 MB each): the adapter reads ``prometheus_eval_benchmarks/mt_bench_eval.json`` and
``vicuna_eval.json`` as published in GitHub ``prometheus-eval/prometheus-eval``
(``eval/benchmark/data/``) and cuts each absolute-grading prompt into instruction, response,
reference answer and rubric at its literal section headers (see :func:`split_prompt`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, register_dataset
from evalign.errors import InputError
from evalign.io import read_items
from evalign.io.data_dir import find_set_dir

CITATION = (
    "Kim et al. 2023, Prometheus: Inducing Fine-grained Evaluation Capability in Language Models, "
    "arXiv 2310.08491 (ICLR 2024); questions from Zheng et al. 2023 (MT-Bench, Vicuna-bench), arXiv 2306.05685."
)
WHERE = "https://github.com/prometheus-eval/prometheus-eval (eval/benchmark/data/{mt_bench,vicuna}_eval.json)"
FOLDER = "prometheus_eval_benchmarks"
#: section headers of a Prometheus absolute-grading prompt, in order, with the field each starts
HEADERS = (
    ("###The instruction to evaluate:", "instruction"),
    ("###Response to evaluate:", "response"),
    ("###Reference Answer (Score 5):", "reference"),
    ("###Score Rubrics:", "rubric"),
    ("###Feedback:", None),
)


def split_prompt(prompt: str, *, file: str = "<prompt>", line: int | None = None) -> dict[str, str]:
    """The instruction, response, reference answer and rubric of a Prometheus absolute-grading
    prompt (each stripped of surrounding whitespace). Raises InputError if a header is missing."""
    out: dict[str, str] = {}
    pos = 0
    starts = []
    for header, _ in HEADERS:
        at = prompt.find(header, pos)
        if at < 0:
            raise InputError(f"Prometheus prompt without the header {header!r}", file=file, line=line, field="instruction")
        starts.append((at, at + len(header)))
        pos = at + len(header)
    for k, (_, name) in enumerate(HEADERS[:-1]):
        assert name is not None
        out[name] = prompt[starts[k][1] : starts[k + 1][0]].strip()
    return out


def _load(file_name: str, name: str, description: str, data_dir: str | Path | None) -> HumanDataset:
    root = find_set_dir(FOLDER, [file_name], data_dir, where=WHERE)
    path = root / file_name
    try:
        data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=e.lineno) from e
    rows = []
    for k, r in enumerate(data):
        parts = split_prompt(r["instruction"], file=str(path), line=k + 1)
        scores = r.get("gpt4_score")
        if not isinstance(scores, list) or not scores or any(isinstance(s, bool) or not isinstance(s, int) for s in scores):
            raise InputError(f"must be a list of integers, got {scores!r:.60}", file=str(path), line=k + 1, field="gpt4_score")
        feedback = r.get("gpt4_feedback") or []
        row: dict[str, Any] = {
            "id": str(r["idx"]),
            "system": r["response_source"],
            "instruction": parts["instruction"],
            "input": "",
            "reference": parts["reference"],
            "response": parts["response"],
            "task": r["category"],
            "rubric": parts["rubric"],
            "gpt4_score": float(np.mean(scores)),
        }
        for j, s in enumerate(scores):
            row[f"gpt4_score_{j + 1}"] = float(s)
        for j, f in enumerate(feedback):
            row[f"gpt4_feedback_{j + 1}"] = f
        rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["source"] = str(path)
    score_cols = sorted(c for c in df.columns if c.startswith("gpt4_score"))
    items = read_items(df, human=score_cols, require_reference=True)
    return HumanDataset(
        name=name,
        description=description,
        licence="Apache-2.0",
        citation=CITATION,
        items=items,
        human_columns=["gpt4_score"],
        human_higher_is_better=True,
        annotator_columns=[c for c in score_cols if c != "gpt4_score"],
        label_source="model",
        label_name="GPT-4 grades",
    )


_PROMETHEUS_WHERE = "https://github.com/prometheus-eval/prometheus-eval (eval/benchmark/data/)"
_GPT4_GRADES = "GPT-4 grades 1-5 (3 per item; NOT human ratings); 320 items"
_GRADE_SETS = {"gpt4_grades": LabelSet("item", "GPT-4 grade 1-5 per response (the mean of 3; model grades, not human)",
                                       "3 GPT-4 grades per item", column="gpt4_score")}


@register_dataset("prometheus_mt_bench", entry=DatasetEntry(
    "prometheus_mt_bench",
    ("items",),
    _GPT4_GRADES,
    "Apache-2.0",
    False,
    where=_PROMETHEUS_WHERE + " mt_bench_eval.json",
    folder="prometheus_eval_benchmarks",
    label_sets=_GRADE_SETS,
    citation=CITATION,
    annotator_kind=None,
    annotator_basis="GPT-4 grades, not people",
))
def load_prometheus_mt_bench(data_dir: str | Path | None = None) -> HumanDataset:
    """MT-Bench in Prometheus format: 320 items (question ids 81-160 x chatgpt, llama2_chat_13b,
    vicuna_13b, wizardlm_13b), grading the SECOND turn (the instruction holds the first-turn
    dialogue). Columns: ``rubric``; ``gpt4_score_1..3`` (1-5) and their mean ``gpt4_score``;
    ``gpt4_feedback_1..3``. The scores are GPT-4 grades, NOT human ratings."""
    return _load(
        "mt_bench_eval.json",
        "prometheus_mt_bench",
        "MT-Bench (Prometheus format): 80 questions x 4 models, reference answer + 1-5 rubric; "
        "target columns are GPT-4 grades (3 per item, mean in gpt4_score), NOT human ratings",
        data_dir,
    )


@register_dataset("prometheus_vicuna", entry=DatasetEntry(
    "prometheus_vicuna",
    ("items",),
    _GPT4_GRADES,
    "Apache-2.0",
    False,
    where=_PROMETHEUS_WHERE + " vicuna_eval.json",
    folder="prometheus_eval_benchmarks",
    label_sets=_GRADE_SETS,
    citation=CITATION,
    annotator_kind=None,
    annotator_basis="GPT-4 grades, not people",
))
def load_prometheus_vicuna(data_dir: str | Path | None = None) -> HumanDataset:
    """Vicuna-bench in Prometheus format: 320 items (question ids 1-80 x chat_gpt, llama-2-chat,
    vicuna, wizard). Columns as in :func:`load_prometheus_mt_bench`. The scores are GPT-4 grades,
    NOT human ratings."""
    return _load(
        "vicuna_eval.json",
        "prometheus_vicuna",
        "Vicuna-bench (Prometheus format): 80 questions x 4 models, reference answer + 1-5 rubric; "
        "target columns are GPT-4 grades (3 per item, mean in gpt4_score), NOT human ratings",
        data_dir,
    )
