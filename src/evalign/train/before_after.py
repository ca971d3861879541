"""Before / after a fine-tune: a pairwise judge's order diagnostics, base vs trained, side by side.

A judge run on every pair in both orders (A shown first, then B shown first) gets one row of
:func:`before_after_table`: accuracy in each order, their mean (LLMBar's "average accuracy"), accuracy
in both orders, positional agreement (the two orders' verdicts equal) and the share of decided
verdicts that picked the output shown first (:mod:`evalign.meta.order_diagnostics`). Beside them:

* the **published judges** of the dataset (pair-table columns ``J`` with ``J.ab`` / ``J.ba``, e.g.
  LLMBar's ``judge:<evaluator>/<strategy>`` columns where the dataset ships them; found by
  :func:`~evalign.meta.order_diagnostics.both_order_judges`), kind ``published``;
* the **baselines**, kind ``baseline``: ``always_a`` (response A in both orders: the position-free
  majority guess), ``always_first`` (the output shown first: accuracy 0.5 per pair, positional
  agreement 0, what a judge with a pure position bias scores) and ``longer`` (the longer response).

Rows are ranked by the mean accuracy; a judge with no verdict at all (``n = 0``) is listed with a
note and never ranked. The change from ``before`` to ``after`` is tested on the per-pair score (the
mean of the two orders' correctness, a missing verdict counted wrong) with the paired permutation
test of :func:`evalign.meta.significance.paired_permutation_test` (each pair's two scores swapped
with probability 1/2; exact when the patterns are few), two-sided.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import EvalignError
from evalign.meta.order_diagnostics import as_codes, both_order_judges, order_diagnostics, text_lengths
from evalign.meta.significance import Statistic, paired_permutation_test

#: columns of :attr:`BeforeAfter.table`
COLUMNS = ("judge", "kind", "n", "accuracy_ab", "accuracy_ba", "accuracy_mean", "accuracy_both",
           "position_agreement", "prefers_first", "rank", "note")
BASELINES = ("always_a", "always_first", "longer")


@dataclass(frozen=True)
class PairedChange:
    """The paired test of ``after`` vs ``before`` on the per-pair score: the mean scores, their
    difference (after - before), the two-sided p-value, the number of pairs and whether
    ``p < alpha``. ``p_value`` is NaN (and ``significant`` False) when either judge has n = 0."""

    before: str
    after: str
    score_before: float
    score_after: float
    difference: float
    p_value: float
    n: int
    alpha: float
    significant: bool
    note: str = ""
    statistic: str = "mean accuracy"

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return dict(self.__dict__)

    def sentence(self) -> str:
        """One line saying whether the change is significant."""
        if not math.isfinite(self.p_value):
            return f"{self.after} vs {self.before}: no test ({self.note})"
        verdict = "significant" if self.significant else "not significant"
        return (f"{self.after} vs {self.before}: {self.statistic} {self.score_before:.3f} -> {self.score_after:.3f} "
                f"({self.difference:+.3f}), paired permutation p = {self.p_value:.4f} over {self.n} pairs: "
                f"{verdict} at alpha = {self.alpha}")


@dataclass(frozen=True)
class BeforeAfter:
    """The side-by-side table (columns :data:`COLUMNS`), the paired test (None without a before/after
    pair of judges) and notes."""

    table: pd.DataFrame
    change: PairedChange | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes None)."""
        rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                for r in self.table.to_dict("records")]
        return {"table": rows, "change": None if self.change is None else self.change.as_dict(),
                "notes": list(self.notes)}


def pair_scores(ab: Sequence[Any] | np.ndarray, ba: Sequence[Any] | np.ndarray,
                gold: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per labelled pair, the mean of the two orders' correctness (0, 0.5 or 1; a missing verdict is
    wrong). Verdicts in the original orientation (``A`` / ``B`` / codes), ``gold`` as +1 / -1 / 0 / NaN;
    unlabelled pairs are left out."""
    a, b = as_codes(list(ab)), as_codes(list(ba))
    g = np.asarray(gold, dtype=float)
    if not (a.size == b.size == g.size):
        raise EvalignError(f"verdicts and labels of different lengths: {a.size}, {b.size}, {g.size}")
    keep = np.isfinite(g)
    return (((a == g).astype(float) + (b == g).astype(float)) / 2)[keep]


def baseline_verdicts(name: str, n: int, length_a: np.ndarray | None = None,
                      length_b: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The (A-first, B-first) verdict codes of a baseline over ``n`` pairs, in the original
    orientation: ``always_a``, ``always_first``, ``longer`` (needs the lengths; equal lengths: no verdict)."""
    if name == "always_a":
        return np.ones(n), np.ones(n)
    if name == "always_first":
        return np.ones(n), -np.ones(n)
    if name == "longer":
        if length_a is None or length_b is None:
            raise EvalignError("the 'longer' baseline needs the responses' lengths")
        s = np.sign(np.asarray(length_a, dtype=float) - np.asarray(length_b, dtype=float))
        s[s == 0] = np.nan
        return s, s.copy()
    raise EvalignError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})")


def _row(name: str, kind: str, ab: np.ndarray, ba: np.ndarray, gold: np.ndarray, reason: str) -> dict[str, Any]:
    a, b = as_codes(list(ab)), as_codes(list(ba))
    judged = int((np.isfinite(gold) & (np.isfinite(a) | np.isfinite(b))).sum())
    if judged == 0:
        why = f" ({reason})" if reason else ""
        return {"judge": name, "kind": kind, "n": 0, **dict.fromkeys(COLUMNS[3:9], float("nan")), "rank": None,
                "note": f"n = 0: no verdict{why}; not ranked"}
    d = order_diagnostics(a, b, gold, nulls_agree=False)
    missing = int(np.isfinite(gold).sum()) - int((np.isfinite(gold) & np.isfinite(a) & np.isfinite(b)).sum())
    note = f"{missing} labelled pairs lack a verdict in at least one order (counted wrong)" if missing else ""
    return {"judge": name, "kind": kind, "n": judged, "accuracy_ab": d.accuracy_original,
            "accuracy_ba": d.accuracy_swapped, "accuracy_mean": d.accuracy_mean, "accuracy_both": d.accuracy_both,
            "position_agreement": d.position_agreement, "prefers_first": d.prefers_first, "rank": None,
            "note": note}


def before_after_table(
    verdicts: Mapping[str, tuple[Sequence[Any], Sequence[Any]]],
    gold: Sequence[float] | np.ndarray,
    *,
    before: str | None = None,
    after: str | None = None,
    published: Mapping[str, tuple[Sequence[Any], Sequence[Any]]] | None = None,
    length_a: Sequence[float] | np.ndarray | None = None,
    length_b: Sequence[float] | np.ndarray | None = None,
    reasons: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    n_permutations: int = 10000,
    seed: int = 0,
) -> BeforeAfter:
    """The before/after table of judges run in both orders (see the module doc).

    ``verdicts``: ``{judge: (A-first verdicts, B-first verdicts)}``, both in the original orientation
    (``A`` / ``B`` / ``tie`` / codes / None); ``gold``: +1 / -1 / 0 / NaN per pair; ``before`` /
    ``after``: the two judges to test (default: the first two of ``verdicts``); ``published``: more
    judges, shown as kind ``published``; ``length_a`` / ``length_b``: response lengths (the
    ``longer`` baseline is left out without them); ``reasons``: why a judge's verdicts are missing
    (shown for n = 0). Positional agreement counts a pair with a missing verdict as disagreeing.
    """
    g = np.asarray(gold, dtype=float)
    names = list(verdicts)
    if before is None and after is None and len(names) >= 2:
        before, after = names[0], names[1]
    for who in (before, after):
        if who is not None and who not in verdicts:
            raise EvalignError(f"no verdicts for judge {who!r} (have: {', '.join(names) or 'none'})")
    rows = [_row(k, "judge", np.asarray(as_codes(list(v[0]))), np.asarray(as_codes(list(v[1]))), g,
                 (reasons or {}).get(k, "")) for k, v in verdicts.items()]
    rows += [_row(k, "published", as_codes(list(v[0])), as_codes(list(v[1])), g, "")
             for k, v in (published or {}).items()]
    la = None if length_a is None else np.asarray(length_a, dtype=float)
    lb = None if length_b is None else np.asarray(length_b, dtype=float)
    for name in BASELINES:
        if name == "longer" and (la is None or lb is None):
            continue
        ab, ba = baseline_verdicts(name, g.size, la, lb)
        rows.append(_row(name, "baseline", ab, ba, g, ""))
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    ranked = table[table["n"] > 0].sort_values("accuracy_mean", ascending=False, kind="stable")
    table["rank"] = pd.Series(dtype="Int64")
    table.loc[ranked.index, "rank"] = ranked["accuracy_mean"].rank(ascending=False, method="min").astype(int)
    change = None
    if before is not None and after is not None:
        change = paired_change(verdicts[before], verdicts[after], g, before=before, after=after, alpha=alpha,
                               n_permutations=n_permutations, seed=seed)
    notes = ("accuracy: labelled pairs, a missing verdict counted wrong; positional agreement: a pair with a "
             "missing verdict disagrees; prefers_first: share of decided verdicts for the output shown first",
             "baselines: always_a = response A in both orders; always_first = the output shown first "
             "(pure position bias); longer = the longer response")
    return BeforeAfter(table, change, notes)


def paired_change(
    before_verdicts: tuple[Sequence[Any], Sequence[Any]],
    after_verdicts: tuple[Sequence[Any], Sequence[Any]],
    gold: Sequence[float] | np.ndarray,
    *,
    before: str = "before",
    after: str = "after",
    alpha: float = 0.05,
    n_permutations: int = 10000,
    seed: int = 0,
) -> PairedChange:
    """Paired permutation test of the per-pair scores (:func:`pair_scores`) of two judges on the same pairs."""
    g = np.asarray(gold, dtype=float)
    s0 = pair_scores(before_verdicts[0], before_verdicts[1], g)
    s1 = pair_scores(after_verdicts[0], after_verdicts[1], g)
    judged = [bool(np.isfinite(as_codes(list(v[0]))).any() or np.isfinite(as_codes(list(v[1]))).any())
              for v in (before_verdicts, after_verdicts)]
    return score_change(s0, s1, before=before, after=after, judged=(judged[0], judged[1]), alpha=alpha,
                        n_permutations=n_permutations, seed=seed)


def score_change(
    score_before: Sequence[float] | np.ndarray,
    score_after: Sequence[float] | np.ndarray,
    *,
    before: str = "before",
    after: str = "after",
    statistic: str = "mean accuracy",
    judged: tuple[bool, bool] = (True, True),
    alpha: float = 0.05,
    n_permutations: int = 10000,
    seed: int = 0,
) -> PairedChange:
    """Paired permutation test (two-sided, the two judges' scores swapped per unit) of the mean of
    per-unit scores of two judges on the same units, e.g. 1/0 for a correct verdict or a parsed
    grade; ``statistic`` names the mean in :meth:`PairedChange.sentence`. ``judged``: whether each
    judge gave anything at all (no test for a judge with n = 0)."""
    s0, s1 = np.asarray(score_before, dtype=float), np.asarray(score_after, dtype=float)
    n = int(s0.size)
    if n == 0 or not all(judged):
        empty = [w for w, ok in zip((before, after), judged, strict=True) if not ok]
        why = "no labelled pairs" if n == 0 else f"n = 0 for {', '.join(empty)}"
        return PairedChange(before, after, float("nan"), float("nan"), float("nan"), float("nan"), n, alpha,
                            False, why, statistic)
    res = paired_permutation_test(MEAN_SCORE, np.zeros(n), s1, s0, n_permutations=n_permutations, seed=seed)
    p = float(res.p_value)
    return PairedChange(before, after, float(s0.mean()), float(s1.mean()), float(s1.mean() - s0.mean()), p, n,
                        alpha, p < alpha, "", statistic)


def _mean_score(human: np.ndarray, metric: np.ndarray) -> float:
    return float(np.mean(metric))


#: the mean per-pair score, swapped as it is (not z-scored: both judges' scores are on one scale)
MEAN_SCORE = Statistic("mean_pair_score", "generic", fn=_mean_score, standardize=False)


def table_before_after(
    table: pd.DataFrame, judges: Sequence[str] | Mapping[str, str], gold: str, *,
    reasons: Mapping[str, str] | None = None, alpha: float = 0.05, n_permutations: int = 10000, seed: int = 0,
) -> BeforeAfter:
    """:func:`before_after_table` of a pair table: ``judges`` are columns ``J`` with ``J.ab`` / ``J.ba``
    (the first two tested, before then after), or ``{name shown: column J}``; every other such column of
    the table is a published judge; ``gold``: the label column (+1 / -1 / 0 / NaN); ``reasons`` by name;
    lengths from ``response_a`` / ``response_b``."""
    cols = dict(judges) if isinstance(judges, Mapping) else {j: j for j in judges}
    for name, j in cols.items():
        for c in (f"{j}.ab", f"{j}.ba"):
            if c not in table.columns:
                raise EvalignError(f"no column {c!r}: judge {name!r} was not run in both orders")
    published = {j: (table[f"{j}.ab"].tolist(), table[f"{j}.ba"].tolist())
                 for j in both_order_judges(table.columns) if j not in cols.values()}
    la = lb = None
    if "response_a" in table.columns and "response_b" in table.columns:
        la, lb = text_lengths(table["response_a"].tolist()), text_lengths(table["response_b"].tolist())
    return before_after_table({n: (table[f"{j}.ab"].tolist(), table[f"{j}.ba"].tolist()) for n, j in cols.items()},
                              table[gold].to_numpy(dtype=float), published=published, length_a=la, length_b=lb,
                              reasons=reasons, alpha=alpha, n_permutations=n_permutations, seed=seed)


# --- held-out sets: a judge against baselines and published judges --------------------------------

#: columns of :attr:`HeldOut.table`
HELD_OUT_COLUMNS = ("judge", "kind", "n", "accuracy", "ci_low", "ci_high", "accuracy_both", "difference", "p_value")


@dataclass(frozen=True)
class HeldOut:
    """One held-out set: every judge, published judge and baseline with its mean per-pair accuracy
    (:func:`pair_scores`: the mean of the two orders' correctness, a missing verdict wrong), a bootstrap
    interval, the accuracy resolved over both orders (right in both), and the paired permutation test
    of ``target`` against it (``difference`` = target - row, two-sided ``p_value``). ``beats``: the rows
    the target beats (difference > 0, p < alpha)."""

    table: pd.DataFrame
    target: str
    alpha: float
    beats: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes None)."""
        rows = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                for r in self.table.to_dict("records")]
        return {"table": rows, "target": self.target, "alpha": self.alpha, "beats": list(self.beats),
                "notes": list(self.notes)}


def held_out_table(
    verdicts: Mapping[str, tuple[Sequence[Any], Sequence[Any]]],
    gold: Sequence[float] | np.ndarray,
    *,
    target: str,
    published: Mapping[str, tuple[Sequence[Any], Sequence[Any]]] | None = None,
    length_a: Sequence[float] | np.ndarray | None = None,
    length_b: Sequence[float] | np.ndarray | None = None,
    alpha: float = 0.05,
    n_resamples: int = 1000,
    n_permutations: int = 10000,
    seed: int = 0,
) -> HeldOut:
    """The held-out table of ``target`` (a key of ``verdicts``) on one labelled set (see :class:`HeldOut`).

    ``verdicts`` / ``published``: ``{judge: (A-first verdicts, B-first verdicts)}`` in the original
    orientation (a judge that sees one response at a time, e.g. a reward model, gives the same
    verdicts twice); ``gold``: +1 / -1 per pair (NaN: unlabelled, left out). Baselines: ``random``
    (accuracy 1/2 on every pair, its exact expectation), ``always_a``, ``always_b`` and ``longer`` (the
    longer response; equal lengths: no verdict) when the lengths are given."""
    from evalign.meta.significance import bootstrap_ci

    if target not in verdicts:
        raise EvalignError(f"no verdicts for the target judge {target!r}")
    g = np.asarray(gold, dtype=float)
    rows: list[tuple[str, str, np.ndarray, float]] = []
    for kind, group in (("judge", verdicts), ("published", published or {})):
        for name, (ab, ba) in group.items():
            a, b = as_codes(list(ab)), as_codes(list(ba))
            both = float(np.mean(((a == g) & (b == g))[np.isfinite(g)])) if np.isfinite(g).any() else float("nan")
            rows.append((name, kind, pair_scores(a, b, g), both))
    n = int(np.isfinite(g).sum())
    rows.append(("random", "baseline", np.full(n, 0.5), 0.5))
    for name in ("always_a", "always_b", "longer"):
        if name == "longer" and (length_a is None or length_b is None):
            continue
        first, second = (-np.ones(g.size), -np.ones(g.size)) if name == "always_b" else baseline_verdicts(
            name, g.size, None if length_a is None else np.asarray(length_a, dtype=float),
            None if length_b is None else np.asarray(length_b, dtype=float))
        s = pair_scores(first, second, g)
        rows.append((name, "baseline", s, float(np.mean(s == 1)) if s.size else float("nan")))
    mine = next(s for name, _, s, _ in rows if name == target)
    out: list[dict[str, Any]] = []
    beats: list[str] = []
    for name, kind, s, both in rows:
        ci = bootstrap_ci(MEAN_SCORE, np.zeros(s.size), s, n_resamples=n_resamples, seed=seed) if s.size else None
        diff = p = float("nan")
        if name != target and s.size:
            ch = score_change(s, mine, before=name, after=target, n_permutations=n_permutations, seed=seed, alpha=alpha)
            diff, p = ch.difference, ch.p_value
            if ch.significant and diff > 0:
                beats.append(name)
        out.append({"judge": name, "kind": kind, "n": int(s.size), "accuracy": float(s.mean()) if s.size else float("nan"),
                    "ci_low": ci.low if ci else float("nan"), "ci_high": ci.high if ci else float("nan"),
                    "accuracy_both": both, "difference": diff, "p_value": p})
    notes = (f"accuracy: mean over pairs of the two orders' correctness (a missing verdict wrong); accuracy_both: "
             f"right in both orders; {int((1 - alpha) * 100)}% bootstrap interval ({n_resamples} resamples); p: "
             f"paired permutation test of {target} against the row ({n_permutations} permutations, two-sided)",)
    return HeldOut(pd.DataFrame(out, columns=list(HELD_OUT_COLUMNS)), target, alpha, tuple(beats), notes)
