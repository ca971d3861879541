"""Baselines of a trust table: what a metric must beat to be worth anything.

* ``always_tie`` (pairwise and preference accuracy): calls every pair a tie (epsilon 0). Its
  accuracy is the share of human ties (per group, averaged over groups).
* ``always_a`` / ``always_b`` (pair tables): always prefers response A / B.
* ``random``: a uniform random predictor over the outcomes the human labels of the table contain, by
  its exact expectation: with human ties it picks A, B or tie (1/3 of the pairs right, with or
  without the human ties counted); without any human tie it picks A or B (1/2 right; a predicted
  tie would score as wrong). 0 for a correlation. Per unit (item, pair) its expected value, so it
  can be tested like a metric.
* ``longer_is_better``: the response length in characters used as a metric (tie-calibrated like
  one; its system score is the mean length).
* ``human_ceiling`` (several annotators): the agreement of one annotator with another on the same
  statistic - not a trivial baseline, never in ``beats_baselines``.

Every baseline except ``human_ceiling`` is *trivial*; a metric or judge ``beats_baselines`` when
it is significantly better than the best trivial baseline of its table (see
:func:`evalign.meta.trust.rank_predictors`).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalign.meta.agreement import majority_vote
from evalign.meta.correlation import correlation
from evalign.meta.pairwise import pairwise_accuracy
from evalign.meta.significance import CORRELATIONS, Statistic
from evalign.meta.trust import Predictor

ACCURACIES = ("pairwise_accuracy", "preference_accuracy", "preference_accuracy_no_ties")
#: the exact expected accuracy of the uniform random predictor: over A / B / tie, over A / B
RANDOM_ACCURACY = 1.0 / 3.0
RANDOM_ACCURACY_NO_TIES = 1.0 / 2.0


def random_accuracy(labels_have_ties: bool) -> float:
    """The expected accuracy of a uniform random predictor over the outcomes the labels contain:
    1/3 over A, B and tie when the labels have ties, 1/2 over A and B when they have none."""
    return RANDOM_ACCURACY if labels_have_ties else RANDOM_ACCURACY_NO_TIES


def _has_duplicates(values: np.ndarray) -> bool:
    v = values[np.isfinite(values)]
    return bool(v.size != np.unique(v).size)


def human_ties(human: np.ndarray, *, level: str, grouping: str, is_pairs: bool) -> bool:
    """Whether the human labels of a table contain a tie among the pairs its accuracy compares: a
    pair table's majority label 0 (annotators x pairs); in an item table (systems x items) two equal
    values within an item (grouping ``item``), a system (``system``), anywhere (``none``), or two
    systems with the same mean at system level."""
    h = np.asarray(human, dtype=float)
    if is_pairs:
        label = majority_vote(h.T, fallback=0.0)
        return bool(np.any(label[np.isfinite(label)] == 0))
    if h.ndim == 1 or level == "system":
        if h.ndim == 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                h = np.nanmean(h, axis=1)
        return _has_duplicates(h)
    if grouping == "item":
        return any(_has_duplicates(h[:, j]) for j in range(h.shape[1]))
    if grouping == "system":
        return any(_has_duplicates(h[i]) for i in range(h.shape[0]))
    return _has_duplicates(h.ravel())


def definitions(statistic: str, labels_have_ties: bool, rater: str = "human") -> dict[str, str]:
    """What each baseline row of a table ranked by ``statistic`` is (the JSON's ``definition`` and
    the legend under a table); ``rater``: who gave the labels (``human``, or a grader such as ``GPT-4``)."""
    if statistic in CORRELATIONS:
        rnd = "random scores: expected correlation 0"
    elif labels_have_ties:
        rnd = "uniform random choice of A, B or tie (the labels have ties): exact expectation 1/3"
    else:
        rnd = ("uniform random choice of A or B (the labels have no tie; a predicted tie is wrong): "
               "exact expectation 1/2")
    return {
        "always_tie": f"calls every pair a tie (its accuracy is the share of {rater} ties)",
        "always_a": "always prefers response A",
        "always_b": "always prefers response B",
        "random": rnd,
        "longer_is_better": "the response length in characters used as a metric",
        "human_ceiling": ("agreement of one annotator with another (not a trivial baseline)" if rater == "human" else
                          f"agreement of one {rater} grade with another of the same item (not a trivial baseline; "
                          "model grades, not human)"),
    }


def lengths_items(table: pd.DataFrame, systems: Sequence[str], items: Sequence[str]) -> np.ndarray | None:
    """``systems x items`` response lengths in characters (None without a ``response`` column)."""
    if "response" not in table.columns:
        return None
    lens = table["response"].map(lambda t: float(len(t)) if isinstance(t, str) else np.nan)
    wide = pd.Series(lens.to_numpy(), index=pd.MultiIndex.from_arrays(
        [table["system"].astype(str), table["id"].astype(str)])).unstack()
    return wide.reindex(index=list(systems), columns=list(items)).to_numpy(dtype=float)


def lengths_pairs(pairs: pd.DataFrame) -> np.ndarray | None:
    """``2 x pairs`` lengths of response A and B in characters (None without the responses)."""
    if "response_a" not in pairs.columns or "response_b" not in pairs.columns:
        return None
    return np.vstack([pairs[c].map(lambda t: float(len(t)) if isinstance(t, str) else np.nan).to_numpy(dtype=float)
                      for c in ("response_a", "response_b")])


def _item_units(value: float) -> Statistic:
    def units(h: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        den = (np.sum(np.isfinite(h), axis=0) >= 2).astype(float)
        return value * den, den

    return Statistic("random", "units", units=units, discrete=True)


def _pair_units(value: float, with_ties: bool) -> Statistic:
    def units(h: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        label = majority_vote(np.asarray(h, dtype=float).T, fallback=0.0)
        den = np.isfinite(label) & ((label != 0) if not with_ties else True)
        return value * den.astype(float), den.astype(float)

    return Statistic("random", "units", units=units, discrete=True)


def random_statistic(statistic: str, level: str, grouping: str, is_pairs: bool,
                     labels_have_ties: bool = True) -> Statistic:
    """The exact expectation of the uniform random predictor for ``statistic`` as a Statistic (see
    :func:`random_accuracy`)."""
    value = 0.0 if statistic in CORRELATIONS else random_accuracy(labels_have_ties)
    if is_pairs:
        return _pair_units(value, statistic != "preference_accuracy_no_ties")
    if level == "system":
        return Statistic("random", "system", fn=lambda h, m: value)
    if grouping == "item":
        return _item_units(value)
    return Statistic("random", "generic", fn=lambda h, m: value)


def trivial_baselines(
    statistics: Sequence[str],
    shape: tuple[int, ...],
    *,
    level: str,
    grouping: str,
    is_pairs: bool,
    lengths: np.ndarray | None,
    present: np.ndarray | None = None,
    labels_have_ties: bool = True,
) -> list[Predictor]:
    """The trivial baselines of a table whose ranking statistic is ``statistics[0]`` (the others
    are shown beside it). ``shape``: the shape of a metric's data; ``present``: the aligned cells
    (baselines are evaluated on the same cells as the metrics); ``labels_have_ties``: whether the
    human labels contain a tie (see :func:`human_ties`; the random predictor's outcomes)."""
    ranking = statistics[0]
    out: list[Predictor] = []

    def masked(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float).copy()
        if present is not None:
            x[..., ~present] = np.nan
        return x

    if ranking in ACCURACIES:
        out.append(Predictor("always_tie", masked(np.zeros(shape)), kind="baseline", epsilon=0.0))
        if is_pairs:
            out.append(Predictor("always_a", masked(np.vstack([np.ones(shape[-1]), np.zeros(shape[-1])])),
                                 kind="baseline", epsilon=0.0))
            out.append(Predictor("always_b", masked(np.vstack([np.zeros(shape[-1]), np.ones(shape[-1])])),
                                 kind="baseline", epsilon=0.0))
    rnd = {s: random_statistic(s, level, grouping, is_pairs, labels_have_ties) for s in statistics}
    out.append(Predictor("random", masked(np.zeros(shape)), kind="baseline", statistics=rnd))
    if lengths is not None:
        out.append(Predictor("longer_is_better", masked(lengths), kind="baseline"))
    return out


def human_ceiling_pairs(prefs: np.ndarray, statistic: str) -> float:
    """Agreement of one annotator with another on a pair table (``annotators x pairs`` codes):
    over every ordered pair of annotators and every pair both labelled, the share where the second
    annotator's label equals the first's (``preference_accuracy``), or, for
    ``preference_accuracy_no_ties``, the same over the pairs the first annotator did not call a tie.
    This pools the annotator pairs, each weighted by the pairs they share; NaN with fewer than two
    annotators or no shared pair."""
    k = prefs.shape[0]
    hits = total = 0
    for i, j in itertools.permutations(range(k), 2):
        both = np.isfinite(prefs[i]) & np.isfinite(prefs[j])
        if statistic == "preference_accuracy_no_ties":
            both &= prefs[i] != 0
        hits += int(np.sum(prefs[i][both] == prefs[j][both]))
        total += int(both.sum())
    return hits / total if total else float("nan")


def human_ceiling_items(annotators: Sequence[np.ndarray], statistic: str, level: str, grouping: str) -> float:
    """Agreement of one annotator column with another (``systems x items`` each, NaN = not rated)
    on ``statistic``: pairwise accuracy (epsilon 0: an annotator's tie is equality) pooled over every
    ordered pair of annotator columns, weighted by their pairs; a correlation averaged over the
    ordered pairs where it is defined. NaN when undefined."""
    vals: list[float] = []
    weights: list[float] = []
    for a, b in itertools.permutations(range(len(annotators)), 2):
        x, y = annotators[a], annotators[b]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if statistic == "pairwise_accuracy":
                g = "none" if level == "system" else grouping
                r = pairwise_accuracy(x, y, grouping=g, epsilon=0.0)  # type: ignore[arg-type]
                if r.n_pairs and np.isfinite(r.accuracy):
                    vals.append(r.accuracy)
                    weights.append(float(r.n_pairs))
            elif statistic in CORRELATIONS:
                v = float(correlation(x, y, statistic, level, grouping if level == "item" else "none").value)  # type: ignore[arg-type]
                if np.isfinite(v):
                    vals.append(v)
                    weights.append(1.0)
    if not vals:
        return float("nan")
    return float(np.average(vals, weights=weights))
