"""Tulu-1 human evaluation ("How Far Can Camels Go?", Wang et al. 2023): 332 prompts, 4 models,
human *acceptability* per output (yes/no) and a human 5-point *preference* per pair.

Not bundled (4 MB): the adapter reads ``tulu1_human_eval/`` (from GitHub ``allenai/open-instruct``,
``human_eval/data/``; the annotations as the JSONL export of the xlsx sheet) and, for the GPT-4
references of Vicuna questions 61-70, ``fastchat_mt_bench/vicuna_bench/reference_answer/gpt-4.jsonl``
(GitHub ``lm-sys/FastChat``, ``fastchat/llm_judge/data/``). See :mod:`evalign.io.data_dir`
for where the files are looked for.

Quirk, handled explicitly: the annotation sheet went through Excel, which evaluated 6 responses that
start with ``=IF(`` as formulas (4 became ``"#ERROR!"``, 1 became ``"Other"`` and 1 an empty cell).
All response texts are therefore taken from ``eval_instances_tulu_1.jsonl`` (the texts the
annotators were shown), joined on ``instance_index`` and model name; the annotation rows are used
only for their labels.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.base import (
    DatasetEntry,
    HumanDataset,
    LabelSet,
    Variant,
    bundled_path,
    register_dataset,
)
from evalign.errors import InputError
from evalign.io import read_items
from evalign.io.data_dir import find_set_dir

CITATION = (
    "Wang et al. 2023, How Far Can Camels Go? Exploring the State of Instruction Tuning on Open "
    "Resources, NeurIPS 2023 Datasets and Benchmarks, arXiv 2306.04751. References: Self-Instruct "
    "(Wang et al. 2023, ACL) and FastChat GPT-4 answers (Zheng et al. 2023, arXiv 2306.05685)."
)
WHERE = (
    "https://github.com/allenai/open-instruct (human_eval/data/eval_instances_tulu_1.jsonl and "
    "eval_annotations_tulu_1.xlsx exported to eval_annotations_tulu_1.jsonl, one JSON object per row) and "
    "https://github.com/lm-sys/FastChat (fastchat/llm_judge/data/vicuna_bench/reference_answer/gpt-4.jsonl "
    "into fastchat_mt_bench/vicuna_bench/reference_answer/)"
)
INSTANCES = "eval_instances_tulu_1.jsonl"
ANNOTATIONS = "eval_annotations_tulu_1.jsonl"
VICUNA_REFS = Path("vicuna_bench", "reference_answer", "gpt-4.jsonl")

#: Tulu preference label -> (evalign code: +1 A better, -1 B better, 0 tie; strength 0-2)
PREFERENCE = {
    "a-is-better": (1.0, 2.0),
    "a-is-slightly-better": (1.0, 1.0),
    "tie": (0.0, 0.0),
    "b-is-slightly-better": (-1.0, 1.0),
    "b-is-better": (-1.0, 2.0),
}
_ACCEPT = {"yes": 1.0, "no": 0.0}
#: the model compared against the three others; always ``system_a`` of the pair table
ANCHOR = "tulu_65B"


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                out.append((lineno, json.loads(line)))
    return out


def _label(table: dict[str, Any], value: Any, *, file: Path, line: int, field: str) -> Any:
    if value not in table:
        raise InputError(f"unknown label {value!r} (expected one of {', '.join(table)})", file=str(file), line=line, field=field)
    return table[value]


_TULU_WHERE = (
    "https://github.com/allenai/open-instruct (human_eval/data/; the annotation xlsx exported to "
    "eval_annotations_tulu_1.jsonl) + https://github.com/lm-sys/FastChat "
    "(fastchat/llm_judge/data/vicuna_bench/reference_answer/gpt-4.jsonl into fastchat_mt_bench/)"
)


@register_dataset("tulu1", entry=DatasetEntry(
    "tulu1",
    ("items", "pairs"),
    "human acceptability per output (1,328 items) and 1-4 human 5-point preferences per pair (996 pairs)",
    "Apache-2.0",
    False,
    where=_TULU_WHERE,
    folder="tulu1_human_eval",
    label_sets={
        "acceptability": LabelSet("item", "human acceptability per output (share of annotators saying yes)",
                                  "1-6 annotators per item (1 for 869 of the 1,328 items)", column="acceptable"),
        "preference": LabelSet("pairs", "human 5-point preference per pair (as A / B / tie)",
                               "4 annotator columns, 1-4 annotators per pair (1 for 869 of the 996 pairs)",
                               pref=("pref_1", "pref_2", "pref_3", "pref_4")),
    },
    variants={
        "self_instruct": Variant("the 252 Self-Instruct prompts", tasks=("self_instruct",), needs_files=True),
        "vicuna": Variant("the 80 Vicuna prompts", tasks=("vicuna",), needs_files=True),
    },
    citation=CITATION,
    annotator_kind="experts",
    annotator_basis="expert annotators, researchers at AI2 and students at UW (Wang et al. 2023)",
))
def load_tulu1(data_dir: str | Path | None = None) -> HumanDataset:
    """Tulu-1 human evaluation as an item table and a pair table.

    Items (1,328 rows = 332 prompts x 4 models): ``id`` = prompt id (``user_oriented_task_N`` or
    ``vicuna_N``), ``system`` = model, ``task`` = ``self_instruct`` / ``vicuna``, ``category``
    (Self-Instruct ``motivation_app`` or Vicuna category), ``reference`` = the Self-Instruct expert
    answer, or FastChat's GPT-4 answer for Vicuna 61-70, else None. Human columns: ``acceptable``
    = share of annotations that call the output acceptable (0-1; 1/0 with a single annotation),
    ``acceptable_1 .. acceptable_6`` = the single annotations (1 yes / 0 no / NaN) in annotation
    order, ``n_acceptable`` = their number.

    Pairs (996 rows = 332 prompts x 3 model pairs): ``system_a`` is always ``tulu_65B`` (compared
    with each of the other three); each annotation's 5-point label is turned to that orientation
    and coded in ``pref_1 .. pref_4`` (+1 A better, -1 B better, 0 tie; in annotation order),
    ``strength_1 .. strength_4`` (2 = "is better", 1 = "slightly better", 0 = tie) and
    ``evaluator_1 .. evaluator_4`` (pseudonymous annotator code). ``id`` is the 0-based line of the
    instance file; ``source_id`` is the prompt id.
    """
    root = find_set_dir("tulu1_human_eval", [INSTANCES, ANNOTATIONS], data_dir, where=WHERE)
    inst_path = root / INSTANCES
    item_rows, pair_rows = _read_instances(inst_path, _prompts(root, data_dir))
    accept, prefs = _read_annotations(root / ANNOTATIONS, pair_rows)
    items = _item_table(item_rows, accept, inst_path)
    pairs = _pair_table(pair_rows, prefs)
    k_acc = max(len(v) for v in accept.values())
    k_pref = max(len(v) for v in prefs.values())
    return HumanDataset(
        name="tulu1",
        description=(
            "Tulu-1 human evaluation: 332 prompts (252 Self-Instruct, 80 Vicuna) x 4 models; items with human "
            "acceptability (0/1 per annotation, 'acceptable' = share of yes); 996 pairs (tulu_65B vs 3 others) "
            "with 1-4 human 5-point preferences (pref_k +1/-1/0, strength_k 0-2)"
        ),
        licence="Apache-2.0",
        citation=CITATION,
        items=items,
        human_columns=["acceptable"],
        human_higher_is_better=True,
        annotator_columns=[f"acceptable_{j + 1}" for j in range(k_acc)],
        pairs=pairs,
        pref_columns=[f"pref_{j + 1}" for j in range(k_pref)],
    )


def _prompts(root: Path, data_dir: str | Path | None) -> dict[str, Any]:
    """What the instances refer to: ``si_tasks`` (Self-Instruct tasks by id), ``vicuna_refs``
    (FastChat's GPT-4 answers by question) and ``vicuna_cat`` (Vicuna categories, when present)."""
    fastchat = root.parent / "fastchat_mt_bench"  # beside the Tulu folder, else searched like it
    if not (fastchat / VICUNA_REFS).is_file():
        fastchat = find_set_dir("fastchat_mt_bench", [str(VICUNA_REFS)], data_dir, where=WHERE)
    si_tasks = {
        r["id"]: r for _, r in _read_jsonl(bundled_path("self_instruct", "user_oriented_instructions.jsonl"))
    }
    vicuna_refs = {
        int(r["question_id"]): r["choices"][0]["turns"][0] for _, r in _read_jsonl(fastchat / VICUNA_REFS)
    }
    vicuna_questions = fastchat / "vicuna_bench" / "question.jsonl"
    vicuna_cat = (
        {int(r["question_id"]): r["category"] for _, r in _read_jsonl(vicuna_questions)}
        if vicuna_questions.is_file()
        else {}
    )
    return {"si_tasks": si_tasks, "vicuna_refs": vicuna_refs, "vicuna_cat": vicuna_cat}


def _prompt_fields(pid: str, r: dict[str, Any], prompts: dict[str, Any], inst_path: Path, lineno: int) -> dict[str, Any]:
    """The instruction, input, reference, task and category of the prompt ``pid``."""
    if pid.startswith("user_oriented_task_"):
        t = prompts["si_tasks"].get(pid)
        if t is None:
            raise InputError(f"unknown Self-Instruct id {pid!r}", file=str(inst_path), line=lineno, field="id")
        return {
            "instruction": t["instruction"],
            "input": t["instances"][0]["input"],
            "reference": t["instances"][0]["output"],
            "task": "self_instruct",
            "category": t["motivation_app"],
        }
    if pid.startswith("vicuna_"):
        q = int(pid.split("_", 1)[1])
        return {
            "instruction": r["prompt"].strip(),
            "input": "",
            "reference": prompts["vicuna_refs"].get(q),
            "task": "vicuna",
            "category": prompts["vicuna_cat"].get(q),
        }
    raise InputError(f"unknown prompt id {pid!r}", file=str(inst_path), line=lineno, field="id")


def _read_instances(
    inst_path: Path, prompts: dict[str, Any]
) -> tuple[dict[tuple[str, str], dict[str, Any]], list[dict[str, Any]]]:
    """The item rows (by prompt and model) and the pair rows (by instance line) of the instance file."""
    item_rows: dict[tuple[str, str], dict[str, Any]] = {}
    pair_rows: list[dict[str, Any]] = []
    for k, (lineno, r) in enumerate(_read_jsonl(inst_path)):
        pid = r["id"]
        base = _prompt_fields(pid, r, prompts, inst_path, lineno)
        comps = list(r["completions"])
        if len(comps) != 2:
            raise InputError("expected 2 completions", file=str(inst_path), line=lineno, field="completions")
        if comps[1]["model"] == ANCHOR:  # the compared model is always system_a
            comps.reverse()
        for c in comps:
            if not isinstance(c["completion"], str):
                raise InputError("completion must be a string", file=str(inst_path), line=lineno, field="completion")
            item_rows.setdefault((pid, c["model"]), {"id": pid, "system": c["model"], "response": c["completion"], **base})
        pair_rows.append(
            {
                "id": str(k),
                "source_id": pid,
                "instruction": base["instruction"],
                "input": base["input"],
                "reference": base["reference"],
                "system_a": comps[0]["model"],
                "system_b": comps[1]["model"],
                "response_a": comps[0]["completion"],
                "response_b": comps[1]["completion"],
                "task": base["task"],
                "category": base["category"],
            }
        )
    return item_rows, pair_rows


def _read_annotations(
    ann_path: Path, pair_rows: list[dict[str, Any]]
) -> tuple[dict[tuple[str, str], list[float]], dict[int, list[tuple[float, float, str]]]]:
    """The acceptability votes (by prompt and model) and the preferences (by pair, oriented to the
    pair) of the annotation file, in annotation order."""
    annotations = sorted(_read_jsonl(ann_path), key=lambda lr: lr[1]["id"])
    accept: dict[tuple[str, str], list[float]] = defaultdict(list)
    prefs: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for lineno, a in annotations:
        idx = a["instance_index"]
        if not isinstance(idx, int) or not 0 <= idx < len(pair_rows):
            raise InputError(f"no instance {idx!r}", file=str(ann_path), line=lineno, field="instance_index")
        pair = pair_rows[idx]
        if pair["source_id"] != a["instance_id"] or {a["model_a"], a["model_b"]} != {pair["system_a"], pair["system_b"]}:
            raise InputError("does not match its instance", file=str(ann_path), line=lineno, field="instance_index")
        for side in ("a", "b"):
            field = f"completion_{side}_is_acceptable"
            accept[(a["instance_id"], a[f"model_{side}"])].append(
                _label(_ACCEPT, a[field], file=ann_path, line=lineno, field=field)
            )
        code, strength = _label(PREFERENCE, a["preference"], file=ann_path, line=lineno, field="preference")
        if a["model_a"] != pair["system_a"]:  # shown in the other order: flip to the pair's orientation
            code = -code
        prefs[idx].append((code + 0.0, strength, str(a["evaluator"])))
    return accept, prefs


def _item_table(item_rows: dict[tuple[str, str], dict[str, Any]], accept: dict[tuple[str, str], list[float]],
                inst_path: Path) -> pd.DataFrame:
    items = pd.DataFrame(list(item_rows.values()))
    k_acc = max(len(v) for v in accept.values())
    votes = [accept.get((i, s), []) for i, s in zip(items["id"], items["system"], strict=True)]
    items["acceptable"] = [float(np.mean(v)) if v else np.nan for v in votes]
    for j in range(k_acc):
        items[f"acceptable_{j + 1}"] = [v[j] if j < len(v) else np.nan for v in votes]
    items["n_acceptable"] = [len(v) for v in votes]
    items.attrs["source"] = str(inst_path)
    return read_items(items, human=["acceptable"])


def _pair_table(pair_rows: list[dict[str, Any]], prefs: dict[int, list[tuple[float, float, str]]]) -> pd.DataFrame:
    pairs = pd.DataFrame(pair_rows)
    k_pref = max(len(v) for v in prefs.values())
    for j in range(k_pref):
        pairs[f"pref_{j + 1}"] = [prefs[i][j][0] if j < len(prefs[i]) else np.nan for i in range(len(pairs))]
        pairs[f"strength_{j + 1}"] = [prefs[i][j][1] if j < len(prefs[i]) else np.nan for i in range(len(pairs))]
        pairs[f"evaluator_{j + 1}"] = [prefs[i][j][2] if j < len(prefs[i]) else None for i in range(len(pairs))]
    return pairs
