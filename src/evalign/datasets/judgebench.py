"""JudgeBench (Tan et al. 2025, ICLR): hard response pairs whose label is objective correctness
(the right answer of MMLU-Pro, LiveBench reasoning / math, LiveCodeBench questions; no ties), with
the published verdicts of the judges run on them.

Not bundled: the repository (``ScalerLab/JudgeBench``) has no licence file, so the adapter reads
``judgebench/`` in the data folder (see :mod:`evalign.io.data_dir`) and nothing of it is in
the package: ``data/dataset=judgebench,response_model=<M>.jsonl`` (the pairs) and every
``outputs/dataset=judgebench,response_model=<M>,judge_name=<J>,judge_model=<JM>.jsonl`` there (the
verdicts; the data folder holds o1-mini's and five reward models' on the GPT-4o pairs and
Claude-3-Haiku's on the Claude pairs, and upstream's other files are read the same way when added).

Each verdict file becomes the judge column ``judge:<model>[/<prompt>]`` (:func:`judge_name`) in
``evalign judge``'s layout for a pairwise judge run in both orders: ``J.ab`` = game 1's decision
(``A>B`` -> ``A``, ``B>A`` -> ``B``, ``A=B`` -> ``tie``, None -> None), ``J.ba`` = game 2's (the
responses were shown swapped) flipped back to the table's frame, ``J`` = both resolved as
``evalign judge`` does (the same -> that verdict, different -> ``tie``, a game without a decision
-> ``unparseable``), ``J.status``. A reward model's file also gives ``J.score_a`` / ``J.score_b``:
its scores of response A and B (game 2's flipped back; the mean of the two games, which agree in
every published file).

JudgeBench's own statistic (:mod:`evalign.meta.judgebench`: per pair +1 / -1 per game, correct
when the sum is > 0) is declared as the dataset statistic ``judgebench_accuracy``: ``evalign
meta`` shows it beside ``preference_accuracy`` of ``J`` for every judge, per category with
``--by category``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.base import (
    DatasetEntry,
    DatasetStatistic,
    HumanDataset,
    LabelSet,
    Variant,
    register_dataset,
)
from evalign.datasets.llmbar_verdicts import resolve
from evalign.errors import InputError
from evalign.io.data_dir import find_set_dir

CITATION = (
    "Tan et al. 2025, JudgeBench: A Benchmark for Evaluating LLM-based Judges, ICLR 2025, arXiv 2410.12784 "
    "(pairs and verdicts: github.com/ScalerLab/JudgeBench, no licence file: read from the data folder)."
)
FOLDER = "judgebench"
WHERE = "https://github.com/ScalerLab/JudgeBench (data/*.jsonl and outputs/*.jsonl)"
#: variant -> upstream response model (the part of the file names after ``response_model=``)
RESPONSE_MODELS = {"gpt-4o": "gpt-4o-2024-05-13", "claude": "claude-3-5-sonnet-20240620"}
#: upstream's source categories (a pair's ``source`` starts with one), the ``category`` column
CATEGORIES = ("mmlu-pro", "livebench-reasoning", "livebench-math", "livecodebench")
_LABELS = {"A>B": 1.0, "B>A": -1.0}
#: a game's decision in the frame it was shown in -> the verdict of the response shown first / second
_DECISION = {"A>B": "A", "B>A": "B", "A=B": "tie"}
_SWAP = {"A": "B", "B": "A", "tie": "tie"}
_FIELDS = ("pair_id", "original_id", "source", "question", "response_model", "response_A", "response_B", "label")


def judge_name(judge_model: str, judge_name: str) -> str:
    """The judge column of an upstream verdict file: ``judge:<model>[/<prompt>]`` in lower case; the
    model without its organisation prefix (``Skywork_``) and date (``-2024-09-12``, ``-20240307``),
    the prompt (upstream's ``judge_name``, ``_`` as ``-``) left out for reward models:
    ``judge:o1-mini/arena-hard``, ``judge:skywork-reward-gemma-2-27b``."""
    model = judge_model.split("_", 1)[1] if "_" in judge_model else judge_model
    model = re.sub(r"-(\d{4}-\d{2}-\d{2}|\d{8})$", "", model).lower()
    return f"judge:{model}" if judge_name == "reward_model" else f"judge:{model}/{judge_name.replace('_', '-')}"


def category_of(source: str) -> str:
    """Upstream's category of a pair's ``source`` (``mmlu-pro-law`` -> ``mmlu-pro``)."""
    return next((c for c in CATEGORIES if source.startswith(c)), source)


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append((lineno, json.loads(line)))
            except json.JSONDecodeError as e:
                raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=lineno) from e
    return out


def _pair_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for lineno, r in _read_jsonl(path):
        for f in _FIELDS:
            if f not in r:
                raise InputError("missing", file=str(path), line=lineno, field=f)
        if r["label"] not in _LABELS:
            raise InputError(f"must be A>B or B>A, got {r['label']!r}", file=str(path), line=lineno, field="label")
        rows.append({
            "id": str(r["pair_id"]), "original_id": str(r["original_id"]), "instruction": r["question"], "input": "",
            "reference": None, "system_a": "response_A", "system_b": "response_B",
            "response_a": r["response_A"], "response_b": r["response_B"], "task": r["source"],
            "category": category_of(r["source"]), "response_model": r["response_model"], "pref_1": _LABELS[r["label"]],
        })
    return rows


def _games(path: Path, lineno: int, r: dict[str, Any]) -> tuple[list[str | None], list[list[float] | None]]:
    """The two games' verdicts in the pair's frame and their scores [A, B] (None without)."""
    games = r.get("judgments")
    if not isinstance(games, list) or len(games) != 2:
        raise InputError("expected a list of two games", file=str(path), line=lineno, field="judgments")
    verdicts: list[str | None] = []
    scores: list[list[float] | None] = []
    for k, g in enumerate(games):
        decision = g.get("decision") if isinstance(g, dict) else None
        if decision is not None and decision not in _DECISION:
            raise InputError(f"unknown decision {decision!r}", file=str(path), line=lineno, field="judgments")
        v = _DECISION.get(decision) if decision is not None else None
        verdicts.append(_SWAP[v] if k == 1 and v is not None else v)
        s = (g.get("judgment") or {}).get("scores") if isinstance(g, dict) else None
        scores.append(None if s is None else ([float(s[0]), float(s[1])] if k == 0 else [float(s[1]), float(s[0])]))
    return verdicts, scores


def _verdict_columns(path: Path, ids: dict[str, int], n: int) -> tuple[str, dict[str, np.ndarray]]:
    """One verdict file as judge columns on the pair table's rows (rows it lacks are skipped)."""
    m = re.search(r"judge_name=(.+?),judge_model=(.+)\.jsonl$", path.name)
    if m is None:
        raise InputError("not an upstream verdict file name (…,judge_name=J,judge_model=M.jsonl)", file=str(path))
    col = judge_name(m.group(2), m.group(1))
    ab, ba, verdict = (np.full(n, None, dtype=object) for _ in range(3))
    status = np.full(n, "skipped", dtype=object)
    score_a, score_b = np.full(n, np.nan), np.full(n, np.nan)
    for lineno, r in _read_jsonl(path):
        pos = ids.get(str(r.get("pair_id")))
        if pos is None:
            continue
        (v1, v2), scores = _games(path, lineno, r)
        ab[pos], ba[pos], verdict[pos] = v1, v2, resolve(v1, v2)
        status[pos] = "scored" if verdict[pos] != "unparseable" else "unscored"
        if all(s is not None for s in scores):
            score_a[pos] = (scores[0][0] + scores[1][0]) / 2  # type: ignore[index]
            score_b[pos] = (scores[0][1] + scores[1][1]) / 2  # type: ignore[index]
    cols = {col: verdict, f"{col}.ab": ab, f"{col}.ba": ba, f"{col}.status": status}
    if np.isfinite(score_a).any():
        cols[f"{col}.score_a"], cols[f"{col}.score_b"] = score_a, score_b
    return col, cols


def judgebench_statistic(pairs: pd.DataFrame, column: str) -> float:
    """JudgeBench's accuracy (:func:`evalign.meta.judgebench.judgebench_accuracy`) of the judge
    ``column`` on the rows ``pairs`` (label ``pref_1``, games ``J.ab`` / ``J.ba``); NaN without them."""
    if f"{column}.ab" not in pairs.columns or f"{column}.ba" not in pairs.columns or "pref_1" not in pairs.columns:
        return float("nan")
    # evalign.meta loads scipy: not at every command's start
    from evalign.meta.judgebench import judgebench_accuracy
    from evalign.meta.order_diagnostics import as_codes

    return judgebench_accuracy(pairs["pref_1"].to_numpy(dtype=float), as_codes(pairs[f"{column}.ab"].tolist()),
                               as_codes(pairs[f"{column}.ba"].tolist())).accuracy


#: JudgeBench's statistic as ``evalign meta`` shows it
STATISTIC = DatasetStatistic(
    "judgebench_accuracy",
    "JudgeBench's own accuracy (upstream utils/metrics.py): per pair +1 per game right, -1 per game wrong "
    "(a tie or no decision 0), right when the sum > 0; evalign's preference_accuracy needs both games right",
    judgebench_statistic,
)


@register_dataset("judgebench", entry=DatasetEntry(
    "judgebench",
    ("pairs",),
    "350 GPT-4o pairs (default) or 270 Claude pairs, objective label (the correct response; no ties); published "
    "verdicts of o1-mini (Arena-Hard prompt) and five reward models (GPT-4o pairs), Claude-3-Haiku (Claude pairs), "
    "each in both orders (judge:<model>[/<prompt>]); JudgeBench's own accuracy beside evalign's",
    "none (no licence file upstream: read from the data folder, never bundled)",
    False,
    where=WHERE,
    folder=FOLDER,
    citation=CITATION,
    label_sets={"correctness": LabelSet("pairs", "the correct response (objective; no ties)",
                                        "1 label per pair (correctness from the source's answer, not annotators)",
                                        pref=("pref_1",))},
    variants={
        "gpt-4o": Variant("the 350 pairs of GPT-4o responses (the default; o1-mini and the reward models)",
                          {"response_model": "gpt-4o"}, needs_files=True),
        "claude": Variant("the 270 pairs of Claude-3.5-Sonnet responses (Claude-3-Haiku)",
                          {"response_model": "claude"}, needs_files=True),
    },
    annotator_kind=None,
    annotator_basis="no annotators: the label is the response that reaches the question's known answer",
))
def load_judgebench(response_model: str = "gpt-4o", data_dir: str | Path | None = None) -> HumanDataset:
    """JudgeBench's pairs of one response model (``gpt-4o``: 350, the paper's main set; ``claude``:
    270) as a pair table: ``id`` = upstream ``pair_id``, ``instruction`` = the question, ``system_a`` /
    ``system_b`` = ``response_A`` / ``response_B``, ``pref_1`` = +1 when A is correct (``A>B``), -1
    when B is (no ties), ``task`` = upstream ``source`` (``mmlu-pro-law``, ``livebench-math``, ...),
    ``category`` = its category (:data:`CATEGORIES`), ``original_id``, ``response_model``; and every
    verdict file of that response model as judge columns (see the module doc), named in
    ``judge_columns``."""
    if response_model not in RESPONSE_MODELS:
        raise InputError(f"unknown response model {response_model!r} (known: {', '.join(RESPONSE_MODELS)})",
                         field="response_model")
    full = RESPONSE_MODELS[response_model]
    data_file = str(Path("data", f"dataset=judgebench,response_model={full}.jsonl"))
    root = find_set_dir(FOLDER, [data_file], data_dir, where=WHERE)
    pairs = pd.DataFrame(_pair_rows(root / data_file))
    pairs["pref_1"] = pairs["pref_1"].astype(np.float64)
    ids = {pid: k for k, pid in enumerate(pairs["id"])}
    judges: list[str] = []
    columns: dict[str, Any] = {}
    for path in sorted((root / "outputs").glob(f"dataset=judgebench,response_model={full},judge_name=*.jsonl")):
        col, cols = _verdict_columns(path, ids, len(pairs))
        judges.append(col)
        columns.update(cols)
    judges.sort(key=lambda j: ("/" not in j, j))  # prompted judges, then reward models
    pairs = pd.concat([pairs, pd.DataFrame({k: pd.Series(v, dtype=object if v.dtype == object else float)
                                            for k, v in columns.items()})], axis=1)
    return HumanDataset(
        name="judgebench",
        description=f"JudgeBench: {len(pairs)} pairs of {full} responses, the objectively correct one marked "
                    "(no ties); verdicts of the judges upstream published for them",
        licence="none (no licence file upstream; read from the data folder)",
        citation=CITATION,
        pairs=pairs,
        pref_columns=["pref_1"],
        judge_columns=judges,
        label_name="the correct answers",
        statistics=(STATISTIC,),
    )
