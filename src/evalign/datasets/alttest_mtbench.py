"""MT-Bench human pairwise judgments, the Alt-Test's subset (Calderon et al. 2025): 120 per-turn
comparisons of two models' conversations on MT-Bench questions, each labelled by 2-3 of 3 annotators
(two of the MT-Bench authors and an expert), with the labels of the Alt-Test's six LLM judges.

Read from the data folder (the Alt-Test repository has no licence file; the MT-Bench human
judgments themselves are CC-BY-4.0, Zheng et al. 2023): ``alttest/mtbench/human_annotations.json``,
``llm_annotations.json`` and ``prompts.json`` (the two conversations of each item), and FastChat's
``fastchat_mt_bench/mt_bench/question.jsonl`` (Apache-2.0): each item's user turns must equal the
question's turns there (else the files do not belong together: an error), and it gives the
category (``task``) and the reference answer of the graded turn where MT-Bench has one.

Items are per turn (ids ``QID__MODEL_A__MODEL_B__TURN``): ``messages_a`` / ``messages_b`` hold the
conversation up to and including the graded turn (turn 1: 2 messages, turn 2: 4), ``instruction``
the last user turn, ``response_a`` / ``response_b`` the last assistant turn, ``turn`` (1 or 2).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.alttest import CITATION as ALTTEST_CITATION
from evalign.datasets.alttest import LLMS, WHERE, read_alttest, set_dir
from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, register_dataset
from evalign.errors import InputError
from evalign.io.data_dir import find_set_dir

CITATION = (
    f"{ALTTEST_CITATION}; MT-Bench human judgments: Zheng et al. 2023, Judging LLM-as-a-Judge with MT-Bench and "
    "Chatbot Arena, NeurIPS 2023, arXiv 2306.05685 (CC-BY-4.0)."
)
QUESTIONS = str(Path("mt_bench", "question.jsonl"))
FASTCHAT_WHERE = "https://github.com/lm-sys/FastChat (fastchat/llm_judge/data/mt_bench/question.jsonl)"
#: an Alt-Test label -> evalign's preference code (+1 A better, -1 B better, 0 tie) and verdict
_CODE = {"model_a": 1.0, "model_b": -1.0, "tie": 0.0}
_VERDICT = {"model_a": "A", "model_b": "B", "tie": "tie"}


def _conversation(text: str, *, file: str, item: str, field: str) -> list[dict[str, str]]:
    """A ``prompts.json`` conversation (a Python-literal list of ``{'content', 'role'}``) as
    messages; four turns user / assistant / user / assistant."""
    try:
        msgs = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise InputError(f"item {item}: not a Python-literal list of messages ({e})", file=file, field=field) from e
    roles = [m.get("role") if isinstance(m, dict) else None for m in msgs] if isinstance(msgs, list) else None
    if roles != ["user", "assistant", "user", "assistant"] or not all(isinstance(m.get("content"), str) for m in msgs):
        raise InputError(f"item {item}: expected user, assistant, user, assistant messages", file=file, field=field)
    return [{"role": m["role"], "content": m["content"]} for m in msgs]


def _questions(data_dir: str | Path | None, near: Path) -> tuple[dict[int, dict[str, Any]], Path]:
    """FastChat's MT-Bench questions by id (looked for beside the Alt-Test folder, else as usual)."""
    root = near / "fastchat_mt_bench"
    if not (root / QUESTIONS).is_file():
        root = find_set_dir("fastchat_mt_bench", [QUESTIONS], data_dir, where=FASTCHAT_WHERE)
    path = root / QUESTIONS
    out = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    q = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=lineno) from None
                for key in ("question_id", "turns", "category"):
                    if not isinstance(q, dict) or key not in q:
                        raise InputError("missing", file=str(path), line=lineno, field=key)
                try:
                    out[int(q["question_id"])] = q
                except (TypeError, ValueError):
                    raise InputError(f"must be an integer, got {q['question_id']!r}", file=str(path), line=lineno,
                                     field="question_id") from None
    return out, path


def _item_row(item: str, prompt: dict[str, Any], questions: dict[int, dict[str, Any]], file: str,
              qfile: Path) -> dict[str, Any]:
    parts = item.split("__")
    if len(parts) != 4 or parts[3] not in ("1", "2") or not parts[0].isdigit():
        raise InputError(f"item id {item!r} is not QID__MODEL_A__MODEL_B__TURN", file=file)
    qid, sys_a, sys_b, turn = int(parts[0]), parts[1], parts[2], int(parts[3])
    for key in ("conversation_a", "conversation_b"):
        if not isinstance(prompt, dict) or not isinstance(prompt.get(key), str):
            raise InputError(f"item {item}: missing (a Python-literal list of messages)", file=file, field=key)
    conv_a = _conversation(prompt["conversation_a"], file=file, item=item, field="conversation_a")
    conv_b = _conversation(prompt["conversation_b"], file=file, item=item, field="conversation_b")
    users = [m["content"] for m in conv_a if m["role"] == "user"]
    q = questions.get(qid)
    if q is None or users != [m["content"] for m in conv_b if m["role"] == "user"] or users != list(q["turns"]):
        raise InputError(f"item {item}: its user turns differ from MT-Bench question {qid} in {qfile}", file=file,
                         field="conversation_a")
    refs = q.get("reference") or []
    ref = refs[turn - 1] if len(refs) >= turn and refs[turn - 1] else None
    msgs_a, msgs_b = conv_a[: 2 * turn], conv_b[: 2 * turn]
    return {"id": item, "question_id": qid, "turn": turn, "instruction": msgs_a[-2]["content"], "input": "",
            "reference": ref, "system_a": sys_a, "system_b": sys_b, "response_a": msgs_a[-1]["content"],
            "response_b": msgs_b[-1]["content"], "messages_a": msgs_a, "messages_b": msgs_b, "task": q["category"]}


def _codes(labels: dict[str, Any], table: dict[str, Any], item_ids: list[str], *, file: str, who: str) -> list[Any]:
    out = []
    for i in item_ids:
        v = labels.get(i)
        if v is not None and v not in table:
            raise InputError(f"{who}, item {i}: unknown label {v!r} (expected model_a, model_b or tie)", file=file)
        out.append(None if v is None else table[v])
    return out


@register_dataset("alttest-mtbench", entry=DatasetEntry(
    "alttest-mtbench",
    ("pairs",),
    "120 MT-Bench per-turn pairs (60 turn 1, 60 turn 2; 42 questions), 2-3 of 3 annotators each (A / B / tie; "
    "author_0, author_4, expert_24); labels of the Alt-Test's six LLM judges (judge:<llm>)",
    "none (no licence file upstream: read from the data folder; MT-Bench human judgments CC-BY-4.0)",
    False,
    where=f"{WHERE.replace('<set>', 'mtbench')} and prompts.json + {FASTCHAT_WHERE} into fastchat_mt_bench/",
    folder="alttest",
    citation=CITATION,
    label_sets={"preference": LabelSet("pairs", "human preference A / B / tie",
                                       "3 annotator columns, 2 per pair (3 for 6 pairs)",
                                       pref=("pref_1", "pref_2", "pref_3"))},
    annotator_kind="experts",
    annotator_basis="two MT-Bench authors (author_0, author_4) and one of its expert labellers (expert_24; "
                    "graduate students, per the MT-Bench paper); the Alt-Test paper uses epsilon 0.2 (experts) here",
))
def load_alttest_mtbench(data_dir: str | Path | None = None) -> HumanDataset:
    """The Alt-Test's MT-Bench pairs as a pair table (see the module doc). Columns: ``id``,
    ``question_id``, ``turn``, ``instruction``, ``input`` (empty), ``reference`` (MT-Bench's reference
    answer of the turn, or None), ``system_a`` / ``system_b`` (the models), ``response_a`` /
    ``response_b``, ``messages_a`` / ``messages_b``, ``task`` (MT-Bench category), ``pref_1`` /
    ``pref_2`` / ``pref_3`` (annotators author_0, author_4, expert_24: +1 A better, -1 B better, 0
    tie, NaN not labelled), and per LLM judge ``judge:<llm>`` (A / B / tie, upstream's names:
    gemini_flash, gemini_pro, gpt-4o, llama-31, gpt-4o-mini, mistral-v03) with ``.status``."""
    folder = set_dir("mtbench", data_dir, extra=("prompts.json",))
    alt = read_alttest("mtbench", folder.parent.parent)
    prompts_path = folder / "prompts.json"
    try:
        prompts: dict[str, Any] = json.loads(prompts_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", file=str(prompts_path), line=e.lineno, column=e.colno) from None
    if not isinstance(prompts, dict):
        raise InputError("expected an object of items {id: {conversation_a, conversation_b}}", file=str(prompts_path))
    questions, qfile = _questions(data_dir, folder.parent.parent)
    rows = [_item_row(i, p, questions, str(prompts_path), qfile) for i, p in prompts.items()]
    pairs = pd.DataFrame(rows)
    ids = pairs["id"].tolist()
    human_file = str(folder / "human_annotations.json")
    annotators = list(alt.humans)
    for k, who in enumerate(annotators, start=1):
        pairs[f"pref_{k}"] = np.array(_codes(alt.humans[who], _CODE, ids, file=human_file, who=who), dtype=float)
    judges = []
    for llm in [m for m in LLMS if m in alt.llms] + [m for m in alt.llms if m not in LLMS]:
        col = f"judge:{llm}"
        verdicts = _codes(alt.llms[llm], _VERDICT, ids, file=str(folder / "llm_annotations.json"), who=llm)
        pairs[col] = pd.Series(verdicts, dtype=object)
        pairs[f"{col}.status"] = ["scored" if v is not None else "skipped" for v in verdicts]
        judges.append(col)
    return HumanDataset(
        name="alttest-mtbench",
        description="MT-Bench human judgments (Alt-Test subset): 120 per-turn pairs, 2-3 of 3 annotators, ties; "
                    "the conversations as messages",
        licence="none (no licence file upstream; read from the data folder)",
        citation=CITATION,
        pairs=pairs,
        pref_columns=[f"pref_{k}" for k in range(1, len(annotators) + 1)],
        judge_columns=judges,
    )
