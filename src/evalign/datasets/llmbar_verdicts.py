"""The published verdicts of LLMBar's LLM evaluators as judge columns of the LLMBar pair table.

LLMBar (Zeng et al. 2024, ICLR, MIT) released every verdict of its evaluators (GPT-4, ChatGPT,
ChatGPT-0301, LLaMA2-70B-chat, Falcon-180B-chat, PaLM2) under up to 15 prompting strategies, each
item judged in both presentation orders. evalign ships the parsed verdicts compactly
(``data/llmbar/verdicts.csv.gz``, built by ``scripts/build_llmbar_verdicts.py``; see
``data/llmbar/VERDICTS.md``); the raw judge texts stay in the data folder.

Each (evaluator, strategy) becomes the judge column ``judge:<evaluator>/<strategy>`` in lower case
(``judge:gpt-4/vanilla``, ``judge:chatgpt-0301/metrics_reference``), in ``evalign judge``'s own
layout for a pairwise judge run in both orders (:class:`evalign.judges.grading.PrometheusRelative`):

* ``J.ab``: the verdict with the outputs shown in the original order (output_1 first),
  ``J.ba``: with them shown reversed, mapped back to the original orientation; ``"A"`` = output_1
  (the pair table's response_a) better, ``"B"`` = output_2 better, None = upstream could not parse.
* ``J``: the verdict resolved over both orders as ``resolve_orders`` does: the same verdict in both
  orders -> that verdict; different -> ``"tie"``; an order without a verdict -> ``"unparseable"``,
  which ``evalign meta`` counts as wrong (a null upstream verdict is a failed parse, not an abstention).
* ``J.status``: ``scored`` / ``unscored`` (no verdict) / ``skipped`` (the configuration did not judge
  this row's set, e.g. ``vanilla_1shot`` on the Processed sets); ``J.reason``: ``no_score`` when unscored.

Rating strategies (``rating``, ``rating_norules``, ``rating_metrics``, ``rating_reference``,
``rating_metrics_reference``; GPT-4 and ChatGPT on the five LLMBar sets) fit the same shape: each
output is scored alone, and upstream's two "orders" are its two tie-breaks (equal scores: output 2
in the first, output 1 in the second). So ``J`` is ``A`` / ``B`` when the scores differ and ``tie``
when they are equal; when a score is not an integer, upstream's ``.ab`` / ``.ba`` (1 / 2) are kept
and ``J`` is ``unparseable``. For these, the order diagnostics read upstream's tie-break, not a
position bias: ``position_agreement`` is the share of pairs with different scores, and a tie counts
as a pick of the output shown second in both "orders", so ``prefers_first`` < 0.5 when ties occur.

The trust table of ``evalign meta`` ranks ``J``, which is right only when both orders are right
(a tie is wrong against LLMBar's gold, which has no ties): that is ``accuracy_both``, not the
average of the two orders (``accuracy_mean``) that LLMBar reports; the diagnostics give both.

**Positional agreement, as upstream counts it**: the two orders agree when their verdicts are
equal, and two null verdicts count as equal (upstream's ``equal += output_True == output_False``
with ``None == None``). Counting pairs with a null as disagreeing changes the figure in 39
configurations. :func:`evalign.meta.order_diagnostics.order_diagnostics` follows upstream by
default (``nulls_agree=True``). Accuracy in one order is ``winner == label`` with a null wrong; it
reproduces upstream's reported accuracy for all 349 configurations.
"""

from __future__ import annotations

import csv
import functools
import gzip
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.base import bundled_path
from evalign.errors import InputError

#: where the compact verdicts live in the package data
VERDICTS_FILE = ("llmbar", "verdicts.csv.gz")
CITATION = (
    "Zeng et al. 2024, Evaluating Large Language Models at Evaluating Instruction Following, "
    "ICLR 2024, arXiv 2310.07641 (judge verdicts: princeton-nlp/LLMBar, MIT)."
)
LICENCE = "MIT"
#: upstream set name (``set`` of the verdicts file) -> the LLMBar adapter's subset name (``task``)
SET_NAMES = {
    "LLMBar/Natural": "Natural",
    "LLMBar/Adversarial/Neighbor": "Adversarial/Neighbor",
    "LLMBar/Adversarial/GPTInst": "Adversarial/GPTInst",
    "LLMBar/Adversarial/GPTOut": "Adversarial/GPTOut",
    "LLMBar/Adversarial/Manual": "Adversarial/Manual",
    "Processed/FairEval": "Processed/FairEval",
    "Processed/LLMEval2": "Processed/LLMEval2",
    "Processed/MT-Bench": "Processed/MT-Bench",
}
#: the order of the judge columns: evaluators and strategies as in the paper's tables
EVALUATORS = ("GPT-4", "ChatGPT", "ChatGPT-0301", "LLaMA2", "PaLM2", "Falcon")
STRATEGIES = (
    "Vanilla", "Vanilla_NoRules", "Vanilla_1shot", "Vanilla_2shot", "CoT", "Metrics", "Reference",
    "Metrics_Reference", "Swap", "Swap_CoT", "Rating", "Rating_NoRules", "Rating_Metrics",
    "Rating_Reference", "Rating_Metrics_Reference",
)
#: the columns of the verdicts file
COLUMNS = ("set", "evaluator", "strategy", "index", "label", "winner_swap_false", "winner_swap_true",
           "score_1", "score_2")
#: the column suffixes written per judge, in order
SUFFIXES = ("", ".ab", ".ba", ".status", ".reason")
_WINNER = {"1": "A", "2": "B"}


def judge_name(evaluator: str, strategy: str) -> str:
    """The judge column of a configuration: ``judge:<evaluator>/<strategy>`` in lower case."""
    return f"judge:{evaluator.lower()}/{strategy.lower()}"


def is_rating(strategy: str) -> bool:
    """Whether a strategy scores each output alone (upstream's ``Rating*``)."""
    return strategy.lower().startswith("rating")


@functools.lru_cache(maxsize=4)
def load_verdicts(path: str | None = None) -> pd.DataFrame:
    """The compact verdicts table (see ``data/llmbar/VERDICTS.md``): ``set`` (upstream name),
    ``subset`` (the adapter's name), ``evaluator``, ``strategy``, ``column`` (the judge column),
    ``index``, ``label`` (1 / 2), ``winner_swap_false`` / ``winner_swap_true`` (``"1"`` / ``"2"`` /
    None), ``score_1`` / ``score_2`` (rating strategies; NaN otherwise or when unreadable).
    Cached: do not modify the returned frame."""
    p = Path(path) if path else bundled_path(*VERDICTS_FILE)
    with gzip.open(p, "rt", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = tuple(next(reader, ()))
        if header != COLUMNS:
            raise InputError(f"expected the columns {', '.join(COLUMNS)}", file=str(p), line=1)
        rows = list(reader)
    if any(len(r) != len(COLUMNS) for r in rows):
        bad = next(i for i, r in enumerate(rows) if len(r) != len(COLUMNS))
        raise InputError(f"expected {len(COLUMNS)} fields", file=str(p), line=bad + 2)
    raw = dict(zip(COLUMNS, (list(c) for c in zip(*rows, strict=True)), strict=True)) if rows else \
        {c: [] for c in COLUMNS}
    unknown = sorted(set(raw["set"]) - set(SET_NAMES))
    if unknown:
        raise InputError(f"unknown LLMBar set(s) {unknown}", file=str(p), field="set")
    for c in ("winner_swap_false", "winner_swap_true"):
        for i, v in enumerate(raw[c]):
            if v not in ("1", "2", ""):
                raise InputError(f"winner must be 1, 2 or empty, got {v!r}", file=str(p), line=i + 2, field=c)
    names = {et: judge_name(*et) for et in set(zip(raw["evaluator"], raw["strategy"], strict=True))}

    def obj(values: list[object]) -> pd.Series:
        return pd.Series(np.array(values, dtype=object), dtype=object)

    return pd.DataFrame({
        "set": obj(raw["set"]),
        "subset": obj([SET_NAMES[x] for x in raw["set"]]),
        "evaluator": obj(raw["evaluator"]),
        "strategy": obj(raw["strategy"]),
        "column": obj([names[et] for et in zip(raw["evaluator"], raw["strategy"], strict=True)]),
        "index": np.array(raw["index"], dtype=np.int64),
        "label": np.array(raw["label"], dtype=np.int64),
        "winner_swap_false": obj([v or None for v in raw["winner_swap_false"]]),
        "winner_swap_true": obj([v or None for v in raw["winner_swap_true"]]),
        "score_1": np.array([float(v) if v else np.nan for v in raw["score_1"]]),
        "score_2": np.array([float(v) if v else np.nan for v in raw["score_2"]]),
    })


def _order_key(evaluator: str, strategy: str) -> tuple[int, str, int, str]:
    e = EVALUATORS.index(evaluator) if evaluator in EVALUATORS else len(EVALUATORS)
    s = STRATEGIES.index(strategy) if strategy in STRATEGIES else len(STRATEGIES)
    return e, evaluator, s, strategy


def configurations(subsets: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """The (evaluator, strategy) pairs that judged any of ``subsets`` (adapter names, e.g.
    ``Natural``; default: all sets), in the paper's order."""
    df = load_verdicts()
    if subsets is not None:
        df = df[df["subset"].isin(list(subsets))]
    pairs = set(df[["evaluator", "strategy"]].drop_duplicates().itertuples(index=False, name=None))
    return sorted(pairs, key=lambda p: _order_key(*p))


def judge_columns(subsets: Iterable[str] | None = None) -> list[str]:
    """The judge column names (``judge:<evaluator>/<strategy>``) for ``subsets``, in order."""
    return [judge_name(e, s) for e, s in configurations(subsets)]


def resolve(ab: str | None, ba: str | None) -> str:
    """The verdict of a pair from its two orders (both in the original orientation), as
    ``evalign judge`` resolves them: the same -> that verdict, different -> ``"tie"``, an order
    without a verdict -> ``"unparseable"``."""
    if ab is None or ba is None:
        return "unparseable"
    return ab if ab == ba else "tie"


def _row_positions(pairs: pd.DataFrame) -> dict[str, int]:
    """``<subset>/<index>`` (the LLMBar adapter's id) -> row position in ``pairs``; checks that
    each id is ``<task>/<row>``."""
    for c in ("id", "task"):
        if c not in pairs.columns:
            raise InputError(f"the LLMBar pair table has no '{c}' column", field=c)
    out: dict[str, int] = {}
    ids = pairs["id"].astype(str).to_numpy(dtype=object)
    tasks = pairs["task"].astype(str).to_numpy(dtype=object)
    for pos, (pid, task) in enumerate(zip(ids, tasks, strict=True)):
        prefix, _, k = pid.rpartition("/")
        if prefix != task or not k.isdigit():
            raise InputError(f"id {pid!r} is not '<subset>/<row>' of subset {task!r}", line=pos + 1, field="id")
        out[pid] = pos
    return out


def verdict_columns(pairs: pd.DataFrame) -> pd.DataFrame:
    """The upstream judge columns for the rows of an LLMBar pair table (as
    ``load_dataset("llmbar", ...)`` returns it: ``task`` = subset, ``id`` = ``<subset>/<row>``).

    Returns a frame on ``pairs.index`` with, per configuration that judged any of the table's
    subsets (in the paper's order), the columns ``J``, ``J.ab``, ``J.ba``, ``J.status``,
    ``J.reason`` (see the module doc; object columns, a missing verdict is None). Rows of a subset
    the configuration did not judge are ``skipped`` (verdicts None). The table may hold only some
    rows of a set (a sample); verdicts of rows it lacks are left out. Raises InputError when a row
    of a set the configuration judged has no verdict (the set and the verdicts do not match).
    """
    positions = _row_positions(pairs)
    subsets = sorted({pid.rpartition("/")[0] for pid in positions})
    df = load_verdicts()
    df = df[df["subset"].isin(subsets)]
    sub = df["subset"].to_numpy(dtype=object)
    cols = df["column"].to_numpy(dtype=object)
    idx = df["index"].to_numpy()
    w0 = df["winner_swap_false"].to_numpy(dtype=object)
    w1 = df["winner_swap_true"].to_numpy(dtype=object)
    scored_ratings = np.isfinite(df["score_1"].to_numpy(dtype=float)) & np.isfinite(df["score_2"].to_numpy(dtype=float))
    rating = np.array([is_rating(t) for t in df["strategy"].to_numpy(dtype=object)], dtype=bool)
    rows: dict[str, list[int]] = {}
    for k, c in enumerate(cols):
        rows.setdefault(c, []).append(k)
    n = len(pairs)
    data: dict[str, pd.Series] = {}
    for evaluator, strategy in configurations(subsets):
        col = judge_name(evaluator, strategy)
        ks = rows[col]
        verdict = np.full(n, None, dtype=object)
        ab = np.full(n, None, dtype=object)
        ba = np.full(n, None, dtype=object)
        status = np.full(n, "skipped", dtype=object)
        reason = np.full(n, None, dtype=object)
        for k in ks:
            key = f"{sub[k]}/{idx[k]}"
            pos = positions.get(key)
            if pos is None:  # a table with some rows of a set (a sample) is fine
                continue
            a, b = _WINNER.get(w0[k]), _WINNER.get(w1[k])
            v = "unparseable" if rating[k] and not scored_ratings[k] else resolve(a, b)
            ab[pos], ba[pos], verdict[pos] = a, b, v
            if v == "unparseable":
                status[pos], reason[pos] = "unscored", "no_score"
            else:
                status[pos] = "scored"
        judged = {sub[k] for k in ks}
        missing = [pid for pid, pos in positions.items() if pid.rpartition("/")[0] in judged and status[pos] == "skipped"]
        if missing:
            raise InputError(f"{col}: no verdict for {len(missing)} row(s) of its sets, e.g. {missing[0]}")
        for suffix, values in zip(SUFFIXES, (verdict, ab, ba, status, reason), strict=True):
            # object columns: a missing verdict stays None (pandas >= 3 would infer str with NaN)
            data[col + suffix] = pd.Series(values, index=pairs.index, dtype=object)
    return pd.DataFrame(data)


def with_verdicts(pairs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``pairs`` with the upstream judge columns added (:func:`verdict_columns`) and the judge
    column names, for :class:`evalign.datasets.base.HumanDataset` ``judge_columns``. Columns of
    ``pairs`` with the same names (a table that has them already) are replaced."""
    cols = verdict_columns(pairs)
    names = [c for c in cols.columns if not c.endswith(SUFFIXES[1:])]
    base = pairs.drop(columns=[c for c in cols.columns if c in pairs.columns])
    return pd.concat([base, cols], axis=1), names
