"""The trust report: which metric to trust, per task type, with intervals, clusters and cost.

For each group (the whole set, and each value of ``by`` when given) the metrics are ranked by
their agreement with humans; each value comes with a bootstrap confidence interval over items
(:func:`evalign.meta.significance.bootstrap_ci`), metrics are grouped into significance clusters
(paired permutation tests, :func:`evalign.meta.clusters.significance_clusters`; cluster 1 holds
the metrics not significantly worse than the best), and the cost of each metric is shown as seconds
per 1,000 items as measured in the scoring run (:attr:`evalign.scoring.MetricRun.seconds_per_1000`).

Two entry points, both pure functions (and :func:`trust_table_pairs_file`, the second on a Parquet file):

* :func:`trust_table_items` for item tables with item-level human ratings, or with system-level
  human values only (e.g. Self-Instruct's human ranks: system-level Kendall / Pearson / Spearman over
  the systems, items resampled on the metric side, the per-system metric score being its declared
  system score: the corpus score of ``bleu`` / ``chrf`` when the table has the texts, else the mean of
  its item scores, named ``bleu (mean of items)`` in ``system_labels`` and the notes);
* :func:`trust_table_pairs` for pair tables (e.g. PandaLM: preference accuracy with and without
  ties, each metric's tie threshold calibrated once on all pairs), counted chunk by chunk
  (:mod:`evalign.meta.pair_counts`, ranked by :func:`rank_counted`) unless resampled by items.

Both share one path (``_trust``) to :func:`rank_predictors`, the ranking used by
:func:`evalign.evaluate.evaluate` too. It runs in stages: **calibrate** each predictor's tie
threshold once on all data; then per group **resample** (a bootstrap interval per predictor),
**rank** (significance clusters, p-value against the best) and **guard** (``beats_baselines``:
significantly better than the best trivial baseline?). All resampling settings travel as one
:class:`~evalign.meta.resampling.Resampling`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.io.readers import parquet_columns, parquet_parts
from evalign.meta import pair_counts as PC
from evalign.meta.agreement import majority_vote
from evalign.meta.breakdown import (
    ALL,
    ItemArrays,
    PairArrays,
    calibrate_pool,
    group_index,
    item_arrays,
    pair_arrays,
)
from evalign.meta.clusters import significance_clusters
from evalign.meta.resampling import DEFAULT, Resampling, with_settings
from evalign.meta.significance import (
    CORRELATIONS,
    STATISTICS,
    BootstrapResult,
    Statistic,
    Units,
    bootstrap_ci,
    bootstrap_units,
    make_statistic,
    paired_bootstrap_distributions,
    paired_permutation_test,
    permutation_test_units,
    units_of,
)
from evalign.meta.system_level import (
    corpus_metric,
    corpus_statistic,
    corpus_stats,
    declares_corpus,
    index_array,
    system_label,
)
from evalign.meta.workers import parallel_map

#: the statistics of a pair table (the default ``also`` is the other one)
PREFERENCES = ("preference_accuracy", "preference_accuracy_no_ties")
COLUMNS = ("group", "n", "kind", "rank", "cluster", "metric", "value", "ci_low", "ci_high", "p_vs_best",
           "beats_baselines")


@dataclass(frozen=True)
class TrustReport:
    """Result of a trust table: ``table`` has one row per (group, metric) with the columns
    ``group, n, rank, cluster, metric, value, ci_low, ci_high, p_vs_best`` (two-sided permutation
    p-value against the top metric of the group), one column per extra statistic,
    ``epsilon`` and ``s_per_1000``; ``groups`` lists every group with its size and status;
    ``system_labels`` names each metric's system score at system level."""

    table: pd.DataFrame
    groups: pd.DataFrame
    statistic: str
    level: str
    confidence: float
    alpha: float
    n_resamples: int
    n_permutations: int
    seed: int
    notes: tuple[str, ...] = ()
    #: at system level, each metric's system score as computed: ``bleu (corpus)`` (recomputed from
    #: corpus statistics, as ``evalign meta`` does), ``bleu (mean of items)`` (only item scores given)
    system_labels: Mapping[str, str] = field(default_factory=dict)
    #: how the intervals and tests were drawn: ``sufficient``, ``items`` or ``sufficient+items``
    #: (:func:`resampling_label`)
    resampling: str = "items"

    def for_group(self, group: str = ALL) -> pd.DataFrame:
        """The ranked rows of one group."""
        return self.table[self.table["group"] == group].reset_index(drop=True)

    @property
    def rows(self) -> pd.DataFrame:
        """The ranking: the same as :attr:`table` (the name :class:`evalign.evaluate.TrustTable` uses)."""
        return self.table

    def to_pandas(self) -> pd.DataFrame:
        """The ranking as a DataFrame (a copy of :attr:`table`)."""
        return self.table.copy()


def _costs(costs: Mapping[str, float] | Sequence[Any] | None) -> dict[str, float]:
    if costs is None:
        return {}
    if isinstance(costs, Mapping):
        return {str(k): float(v) for k, v in costs.items()}
    return {str(r.column): float(r.seconds_per_1000) for r in costs}


@dataclass(frozen=True)
class Predictor:
    """One row of a trust table: a metric, a judge or a baseline, with its data.

    ``data``: ``systems x items`` (item tables) or ``2 x pairs`` (pair tables), higher = better.
    ``epsilon``: a fixed tie threshold; None calibrates it once on all data (statistics with a
    threshold). ``statistics``: ``name -> Statistic`` for statistics this predictor computes its own
    way (a baseline's exact expectation, a judge's verdicts, a corpus system score); other names
    are made by :func:`~evalign.meta.significance.make_statistic`. ``ranked``: False for rows shown
    beside the ranking without a rank (the human ceiling). ``cost``: seconds per 1,000 items.
    """

    name: str
    data: np.ndarray
    kind: str = "metric"
    epsilon: float | None = None
    statistics: Mapping[str, Statistic] = field(default_factory=dict)
    ranked: bool = True
    cost: float = float("nan")


#: the significance tests a trust table can use
TESTS = ("permutation", "bootstrap")
#: items from which each predictor's calibration and interval run in a process of their own
PARALLEL_MIN_ITEMS = 50_000
#: the note of a trust table resampled (partly) by sufficient statistics
SUFFICIENT_NOTE = ("resampling: accuracies by sufficient statistics (per bootstrap resample one multinomial draw "
                   "of how many items take each credit value; per permutation one binomial count of swapped items "
                   "per joint value): exact in distribution; same seed, different draws than the item-index path "
                   "(method 'items')")


def resampling_label(used: set[str] | frozenset[str]) -> str:
    """How a trust table's intervals and tests were drawn, for its signature: ``sufficient``,
    ``items``, or ``sufficient+items`` (each way for some statistics); ``none`` when nothing was."""
    return "+".join(m for m in ("sufficient", "items") if m in used) or "none"


def paired_bootstrap_p(dist_a: np.ndarray, dist_b: np.ndarray) -> float:
    """Two-sided paired bootstrap p-value of ``a - b`` from the two statistics' bootstrap
    distributions over the *same* resamples (the same seed and items): ``min(1, 2 * min(P(d <= 0),
    P(d >= 0)))`` with ``P(d <= 0) = (1 + #{d_b <= 0}) / (B + 1)`` over the B resamples where both
    are defined (Koehn 2004's paired bootstrap, two-sided with the +1 correction)."""
    d = np.asarray(dist_a, dtype=float) - np.asarray(dist_b, dtype=float)
    d = d[np.isfinite(d)]
    if d.size == 0:
        return float("nan")
    lo = (1 + int(np.sum(d <= 0))) / (d.size + 1)
    hi = (1 + int(np.sum(d >= 0))) / (d.size + 1)
    return float(min(1.0, 2 * min(lo, hi)))


def rank_predictors(
    human: np.ndarray,
    predictors: Sequence[Predictor],
    groups: Mapping[str, np.ndarray],
    *,
    statistic: str,
    also: Sequence[str] = (),
    level: str = "item",
    grouping: str = "item",
    variant: str | None = None,
    is_pairs: bool = False,
    resampling: Resampling = DEFAULT,
    min_group_size: int = 10,
    test: str = "permutation",
    undefined: Callable[[np.ndarray, Mapping[str, np.ndarray]], str | None] | None = None,
    progress: Callable[[str, int, int | None], None] | None = None,
    clusters: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...], str]:
    """The rows of a trust table: per group, every predictor's value with a bootstrap interval; the
    ranked predictors (metrics, judges, baselines with ``ranked``) sorted by value; metrics and
    judges get ranks and significance clusters among themselves, and ``beats_baselines``: whether
    each is significantly better (``test`` at ``resampling.alpha``) than the best *trivial* baseline of
    its group (every baseline row with ``ranked``). ``resampling``: the
    :class:`~evalign.meta.resampling.Resampling` settings of every interval and test. ``test``:
    ``permutation`` (:func:`~evalign.meta.significance.paired_permutation_test`) or ``bootstrap``
    (:func:`paired_bootstrap_p` on the interval's resamples). ``undefined(human, data)`` returns why
    the statistic is undefined in a group (then no rank, cluster or test; the reason is the group's
    status), or None. ``progress(stage, done, total)``: called after each bootstrap interval
    (``"bootstrap intervals"``, total known) and each paired test (``"permutation tests"`` or
    ``"bootstrap tests"``, total None). ``clusters``: False leaves out the significance clusters and
    the p-values against the best (ranks by value and ``beats_baselines`` only: far fewer tests).

    The stages, per group of at least ``min_group_size`` items: slice the data and ask why the
    statistic would be undefined; resample (an interval per predictor); rank (clusters and the
    p-value against the best); guard (``beats_baselines``); one row per predictor. From
    :data:`PARALLEL_MIN_ITEMS` items on, each predictor's calibration and interval run in their own
    process (``resampling.workers`` at a time; the results do not depend on how many). A pair
    table's annotator codes (``annotators x pairs``) are merged once by majority vote (no majority =
    tie); its statistics see the merged labels as one annotator (``1 x pairs``).

    Returns (rows, groups, notes, resampling). Row columns: ``group, n, kind, rank, cluster, metric,
    value, ci_low, ci_high, p_vs_best, beats_baselines``, one per ``also``, ``epsilon``,
    ``s_per_1000``. ``resampling``: how the intervals and tests were drawn (:func:`resampling_label`).
    """
    if test not in TESTS:
        raise InputError(f"unknown test {test!r} (use {' or '.join(TESTS)})", field="test")
    ranker = _Ranker(human, predictors, statistic=statistic, also=also, level=level, grouping=grouping,
                     variant=variant, is_pairs=is_pairs, resampling=resampling, test=test, progress=progress)
    return _rank_groups(ranker, groups, min_group_size=min_group_size, undefined=undefined, clusters=clusters)


@dataclass(frozen=True)
class CountedGroup:
    """One group of a trust table counted without its items (:mod:`evalign.meta.pair_counts`): ``n``
    items; ``units``: each predictor's :class:`~evalign.meta.significance.Units` of the ranking
    statistic (credits paired through their joint counts); ``also``: each predictor's extra statistics."""

    n: int
    units: Mapping[str, Units]
    also: Mapping[str, Mapping[str, float]]

    def __len__(self) -> int:
        return self.n


def rank_counted(
    predictors: Sequence[Predictor],
    groups: Mapping[str, CountedGroup],
    epsilons: Mapping[str, Sequence[float | None]],
    *,
    statistic: str,
    also: Sequence[str] = (),
    resampling: Resampling = DEFAULT,
    min_group_size: int = 10,
    test: str = "permutation",
    progress: Callable[[str, int, int | None], None] | None = None,
    clusters: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...], str]:
    """:func:`rank_predictors` of pair-table predictors whose statistics come as counts: ``groups``
    (name -> :class:`CountedGroup`), ``epsilons`` (predictor name -> its epsilon of ``statistic``
    and of each ``also``, calibrated on all data). The predictors' ``data`` is not read. Returns
    what :func:`rank_predictors` returns; with the same counts, the same rows."""
    if test not in TESTS:
        raise InputError(f"unknown test {test!r} (use {' or '.join(TESTS)})", field="test")
    ranker = _Ranker(np.empty((1, 0)), predictors, statistic=statistic, also=also, level="item", grouping="item",
                     variant=None, is_pairs=True, resampling=resampling, test=test, progress=progress,
                     epsilons=epsilons)
    return _rank_groups(ranker, groups, min_group_size=min_group_size, undefined=None, clusters=clusters)


def _rank_groups(
    ranker: _Ranker, groups: Mapping[str, np.ndarray] | Mapping[str, CountedGroup], *, min_group_size: int,
    undefined: Callable[[np.ndarray, Mapping[str, np.ndarray]], str | None] | None, clusters: bool,
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...], str]:
    """The stages of :func:`rank_predictors` over its groups (selections, or counted groups)."""
    ranker.clusters = clusters
    ranker.n_intervals = sum(len(ranker.preds) for sel in groups.values() if len(sel) >= min_group_size)
    rows: list[dict[str, Any]] = []
    group_rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for gname, sel in groups.items():
        if len(sel) < min_group_size:
            group_rows.append({"group": gname, "n": len(sel), "status": "too small"})
            continue
        rows += ranker.rank_group(gname, sel, undefined, group_rows, notes)
    if "sufficient" in ranker.used:
        _note(notes, SUFFICIENT_NOTE)
    cols = [*COLUMNS, *ranker.also, "epsilon", "s_per_1000"]
    return (pd.DataFrame(rows, columns=cols), pd.DataFrame(group_rows, columns=["group", "n", "status"]),
            tuple(notes), resampling_label(ranker.used))


def _order_key(values: Mapping[str, float]) -> Callable[[str], tuple[int, float, str]]:
    """Sort key: decreasing value, then name; undefined values last."""
    return lambda m: (0, -values[m], m) if math.isfinite(values[m]) else (1, 0.0, m)


def _note(notes: list[str], note: str) -> None:
    if note not in notes:
        notes.append(note)


class _Group:
    """One group of a trust table: its data, each predictor's statistic and interval, and the
    paired tests between predictors (each pair tested once, on demand)."""

    def __init__(self, ranker: _Ranker, name: str, sel: np.ndarray | CountedGroup) -> None:
        self.ranker, self.name, self.n = ranker, name, len(sel)
        self.counted = sel if isinstance(sel, CountedGroup) else None
        if isinstance(sel, CountedGroup):
            sel = np.arange(0)
        human = ranker.human
        n_all = max((p.data.shape[-1] for p in ranker.preds.values()), default=0)
        sel = np.asarray(sel)
        whole = sel.size == n_all and bool(np.array_equal(sel, np.arange(n_all)))  # every item in order: no copy
        self.h = human if (human.ndim == 1 and not ranker.is_pairs) or whole else human[..., sel]
        self.data = {name: p.data if whole else p.data[..., sel] for name, p in ranker.preds.items()}
        self.stats: dict[str, Statistic | None] = {}
        self.cis: dict[str, BootstrapResult] = {}
        self.values: dict[str, float] = {}
        self.also_values: dict[str, dict[str, float]] = {}
        #: the per-item credits of the predictors with a ratio statistic
        self.units: dict[str, Units] = {}
        self.tests: dict[tuple[str, str], float] = {}

    def resample(self) -> None:
        """Stage ``resample``: each predictor's statistic on the group with its bootstrap interval
        and its extra statistics. Per predictor (one process each on large groups): the extra
        statistics, and the per-item credits of a ratio statistic or the interval of another; then
        the ratio statistics' intervals together (one pass of draws for those resampled by items)."""
        r = self.ranker
        self.stats = {name: r.stat_of(p, r.statistic, r.eps[name]) for name, p in r.preds.items()}
        names = list(r.preds)

        def job(name: str) -> tuple[BootstrapResult | Units | None, dict[str, float]]:
            st, data = self.stats[name], self.data[name]
            bound = None if st is None else st.bind(self.h, data)
            if st is None or bound is None:
                out: BootstrapResult | Units | None = None
            elif bound.kind == "units":
                out = units_of(bound, self.h, data, r.resampling)
            else:
                out = bootstrap_ci(st, self.h, data, resampling=r.resampling)
            return out, r.also_values(r.preds[name], self.h, data)

        workers = r.resampling.workers if self.n >= PARALLEL_MIN_ITEMS else 1
        if self.counted is not None:  # counted without the items: the units and extra values as given
            c = self.counted
            outs: list[tuple[BootstrapResult | Units | None, dict[str, float]]] = [
                (c.units.get(name) if self.stats[name] is not None else None, dict(c.also[name])) for name in names]
        else:
            outs = parallel_map(job, names, workers)
        for name, (out, also) in zip(names, outs, strict=True):
            self.also_values[name] = also
            if isinstance(out, Units):
                self.units[name] = out
            elif out is not None:
                self.cis[name] = out
        self.cis.update(zip(self.units, bootstrap_units(list(self.units.values()), resampling=r.resampling),
                            strict=True))
        for name in names:
            if name in self.cis:
                r.used.add(self.cis[name].resampling)
                r.tick("intervals")
        self.values = {name: (self.cis[name].value if name in self.cis else float("nan")) for name in r.preds}

    def p_value(self, a: str, b: str) -> float:
        """The two-sided p-value of the paired test of ``a`` and ``b`` (computed once per pair)."""
        key = (min(a, b), max(a, b))
        if key not in self.tests:
            r = self.ranker
            sa, sb = self.stats[key[0]], self.stats[key[1]]
            if sa is None or sb is None:
                self.tests[key] = float("nan")
            else:
                self.tests[key] = self.test(key[0], key[1], sa, sb)
                r.tick("tests")
        return self.tests[key]


    def test(self, a: str, b: str, sa: Statistic, sb: Statistic) -> float:
        """The p-value of the paired test of ``a`` and ``b``: two ratio statistics from their credits
        (when either is resampled by items, every pair of ratio statistics of the group is tested at
        once, over one pass of the swap masks), others by :func:`paired_permutation_test`."""
        r = self.ranker
        if r.test == "bootstrap":
            ca, cb = self.cis[a], self.cis[b]
            r.used.add(ca.resampling)
            r.used.add(cb.resampling)
            return paired_bootstrap_p(*paired_bootstrap_distributions(ca, cb, resampling=r.resampling))
        if a in self.units and b in self.units:
            if self.units[a].credits is not None and self.units[b].credits is not None:
                pairs = [(a, b)]
            else:  # one pass of draws for every pair of the group that is tested by items
                pairs = [(x, y) for i, x in enumerate(self.units) for y in list(self.units)[i + 1:]
                         if (min(x, y), max(x, y)) not in self.tests]
            found = permutation_test_units([(self.units[x], self.units[y]) for x, y in pairs],
                                           resampling=r.resampling)
            for (x, y), t in zip(pairs, found, strict=True):
                self.tests[(min(x, y), max(x, y))] = t.p_value
                r.used.add(t.resampling)
            return self.tests[(min(a, b), max(a, b))]
        t = paired_permutation_test(sa, self.h, self.data[a], self.data[b], resampling=r.resampling, stat_b=sb)
        r.used.add(t.resampling)
        return t.p_value


class _Ranker:
    """The settings of :func:`rank_predictors` and its stages; tie thresholds are calibrated once on
    all data (stage ``calibrate``), then held in every group."""

    def __init__(
        self, human: np.ndarray, predictors: Sequence[Predictor], *, statistic: str, also: Sequence[str],
        level: str, grouping: str, variant: str | None, is_pairs: bool, resampling: Resampling, test: str,
        progress: Callable[[str, int, int | None], None] | None,
        epsilons: Mapping[str, Sequence[float | None]] | None = None,
    ) -> None:
        if is_pairs and human.ndim == 2 and human.shape[0] > 1:  # one majority vote for every statistic
            human = majority_vote(human.T, fallback=0.0)[None, :]  # one "annotator": its own majority
        self.human, self.statistic, self.also = human, statistic, also
        self.level, self.grouping, self.variant, self.is_pairs = level, grouping, variant, is_pairs
        self.resampling, self.test, self.progress = resampling, test, progress
        self.preds = {p.name: p for p in predictors}
        names = list(self.preds)

        def job(name: str) -> list[float | None]:
            return [self.calibrate(self.preds[name], s) for s in (statistic, *also)]

        big = max((p.data.shape[-1] for p in predictors), default=0) >= PARALLEL_MIN_ITEMS
        eps = ({name: list(epsilons[name]) for name in names} if epsilons is not None  # calibrated before
               else dict(zip(names, parallel_map(job, names, resampling.workers if big else 1), strict=True)))
        self.eps = {name: e[0] for name, e in eps.items()}
        self.also_eps = {s: {name: e[i + 1] for name, e in eps.items()} for i, s in enumerate(also)}
        self.n_intervals = 0
        self.done = {"intervals": 0, "tests": 0}
        self.clusters = True
        #: how intervals and tests were drawn ("sufficient", "items")
        self.used: set[str] = set()

    def calibrate(self, p: Predictor, statistic: str) -> float | None:
        """Stage ``calibrate``: a predictor's tie threshold for ``statistic`` on all data (None: none)."""
        if p.epsilon is not None or statistic in p.statistics:
            return p.epsilon
        return calibrate_pool(self.human, p.data, statistic, self.grouping, self.is_pairs)

    def stat_of(self, p: Predictor, name: str, e: float | None) -> Statistic | None:
        if name in p.statistics:
            return p.statistics[name]
        if name not in STATISTICS:
            return None
        return make_statistic(name, level=self.level, grouping=self.grouping, variant=self.variant, epsilon=e)

    def also_values(self, p: Predictor, h: np.ndarray, data: np.ndarray) -> dict[str, float]:
        """The extra statistics (``also``) of predictor ``p`` on one group's data (NaN when it has none)."""
        out = {}
        for s in self.also:
            st = self.stat_of(p, s, self.also_eps[s][p.name])
            out[s] = float(st(h, data)) if st is not None else float("nan")
        return out

    def tick(self, what: str) -> None:
        """Count a finished interval or test and report it to ``progress``."""
        self.done[what] += 1
        if self.progress is None:
            return
        if what == "intervals":
            self.progress("bootstrap intervals", self.done[what], self.n_intervals)
        else:
            self.progress("permutation tests" if self.test == "permutation" else "bootstrap tests", self.done[what],
                          None)

    def rank_group(
        self, gname: str, sel: np.ndarray | CountedGroup,
        undefined: Callable[[np.ndarray, Mapping[str, np.ndarray]], str | None] | None,
        group_rows: list[dict[str, Any]], notes: list[str],
    ) -> list[dict[str, Any]]:
        """The rows of one group (its status is added to ``group_rows``, its notes to ``notes``)."""
        g = _Group(self, gname, sel)
        reason = undefined(g.h, g.data) if undefined is not None else None
        group_rows.append({"group": gname, "n": g.n, "status": "ok" if reason is None else f"undefined: {reason}"})
        g.resample()
        contenders = [name for name, p in self.preds.items() if p.kind != "baseline"]
        clusters: dict[str, Any] = dict.fromkeys(self.preds)
        p_best = {name: float("nan") for name in self.preds}
        beats: dict[str, Any] = dict.fromkeys(self.preds)
        if reason is None and contenders:
            if self.clusters:
                self.rank(g, contenders, clusters, p_best, notes)
            self.guard(g, contenders, beats, notes)
        return self.rows(g, reason, clusters, p_best, beats)

    def rank(self, g: _Group, contenders: list[str], clusters: dict[str, Any], p_best: dict[str, float],
             notes: list[str]) -> None:
        """Stage ``rank``: the significance clusters of the contenders and each one's p-value against
        the best (only when every contender has a cluster)."""
        try:
            clusters.update(significance_clusters(({m: g.values[m] for m in contenders}, g.p_value),
                                                  alpha=self.resampling.alpha))
        except InputError as e:  # e.g. pairwise accuracy pooled over items with one epsilon per metric
            _note(notes, f"no significance clusters: {e}")
        order_c = sorted(contenders, key=_order_key(g.values))
        if all(isinstance(clusters[m], int) for m in contenders):
            for m in order_c[1:]:
                if math.isfinite(g.values[m]):
                    p_best[m] = g.p_value(order_c[0], m)

    def guard(self, g: _Group, contenders: list[str], beats: dict[str, Any], notes: list[str]) -> None:
        """Stage ``guard``: whether each contender is significantly better than the best trivial baseline."""
        trivial = [name for name, p in self.preds.items() if p.kind == "baseline" and p.ranked
                   and math.isfinite(g.values[name])]
        if not trivial:
            return
        best = max(trivial, key=lambda b: (g.values[b], b))
        for m in contenders:
            if not math.isfinite(g.values[m]):
                continue
            if g.values[m] <= g.values[best]:
                beats[m] = False
                continue
            try:
                beats[m] = bool(g.p_value(m, best) <= self.resampling.alpha)
            except InputError as e:
                _note(notes, f"no test against the baselines: {e}")

    def rows(self, g: _Group, reason: str | None, clusters: Mapping[str, Any], p_best: Mapping[str, float],
             beats: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One row per predictor, by decreasing value; contenders get ranks when the group is defined."""
        out = []
        rank = 0
        for m in sorted(self.preds, key=_order_key(g.values)):
            p = self.preds[m]
            ranked = p.kind != "baseline" and reason is None
            if ranked:
                rank += 1
            row: dict[str, Any] = {
                "group": g.name,
                "n": g.n,
                "kind": p.kind,
                "rank": rank if ranked else None,
                "cluster": clusters[m] if ranked else None,
                "metric": m,
                "value": g.values[m],
                "ci_low": g.cis[m].low if m in g.cis and p.ranked else float("nan"),
                "ci_high": g.cis[m].high if m in g.cis and p.ranked else float("nan"),
                "p_vs_best": p_best[m],
                "beats_baselines": beats[m],
            }
            row.update(g.also_values[m])
            e = self.eps[m]
            row["epsilon"] = float("nan") if e is None else e
            row["s_per_1000"] = p.cost
            out.append(row)
        return out


def trust_table_items(
    table: pd.DataFrame,
    human: str | Mapping[str, float],
    metric_cols: Sequence[str],
    *,
    statistic: str | None = None,
    also: Sequence[str] | None = None,
    level: str | None = None,
    grouping: str = "item",
    variant: str | None = None,
    by: str | None = None,
    resampling: Resampling | None = None,
    n_resamples: int | None = None,
    n_permutations: int | None = None,
    confidence: float | None = None,
    alpha: float | None = None,
    seed: int | None = None,
    min_group_size: int = 10,
    costs: Mapping[str, float] | Sequence[Any] | None = None,
    human_higher_is_better: bool = True,
    lower_is_better: Sequence[str] = (),
) -> TrustReport:
    """Trust table of an item table.

    ``human``: a human rating column, or ``{system: value}`` for system-level human data (then the
    defaults are ``level="system"``, ``statistic="kendall"``, ``also=("pearson", "spearman")``;
    otherwise ``level="item"``, ``statistic="pairwise_accuracy"`` with ``grouping``, ``also=("kendall",
    "pearson", "spearman")`` at the same level and grouping). ``costs``: ``{column: s/1000 items}`` or
    the :class:`~evalign.scoring.MetricRun` list of the scoring run. Human ranks: pass
    ``human_higher_is_better=False``. ``resampling``: the :class:`~evalign.meta.resampling.Resampling`
    settings (default 1000 resamples and permutations, confidence 0.95, alpha 0.05, seed 0);
    ``n_resamples``, ``n_permutations``, ``confidence``, ``alpha`` and ``seed`` given one by one replace
    its values.
    """
    system_human = not isinstance(human, str)
    level = level or ("system" if system_human else "item")
    if system_human and level != "system":
        raise InputError("system-level human values allow only level='system'", field="level")
    statistic = statistic or ("kendall" if level == "system" else "pairwise_accuracy")
    arrays = item_arrays(table, human, metric_cols, human_higher_is_better=human_higher_is_better,
                         lower_is_better=lower_is_better)
    ranking = _Ranking(statistic, _also(statistic, also, CORRELATIONS), level, grouping, variant, False, min_group_size)
    corpus = _corpus_predictors(table, arrays, ranking, lower_is_better) if level == "system" else {}
    labels = {m: system_label(m, "corpus" if m in corpus else "mean", declared_corpus=declares_corpus(m))
              for m in metric_cols}
    notes = []
    if level == "system":
        what = "system-level human values" if system_human else "human system means"
        notes.append(f"{what} over {len(arrays.systems)} systems; system scores: {', '.join(labels.values())}; "
                     "bootstrap over items on the metric side")
    resampling = with_settings(resampling, n_resamples=n_resamples, n_permutations=n_permutations,
                               confidence=confidence, alpha=alpha, seed=seed)
    return _trust(table, arrays, ranking, by=by, resampling=resampling, costs=costs, notes=tuple(notes),
                  corpus=corpus, system_labels=labels if level == "system" else {})


def _corpus_predictors(table: pd.DataFrame, arrays: ItemArrays, ranking: _Ranking,
                       lower_is_better: Sequence[str]) -> dict[str, Predictor]:
    """The predictors of the columns scored at system level by their declared corpus score
    (:func:`~evalign.meta.system_level.corpus_metric`: ``bleu``, ``chrf`` with the texts in the
    table), as ``evalign meta`` and :func:`evalign.meta_evaluate` score them; correlations only."""
    wanted = [ranking.statistic, *ranking.also]
    if not any(s in CORRELATIONS for s in wanted):
        return {}
    out = {}
    human_present = np.isfinite(arrays.human) if arrays.human.ndim == 2 else True
    for name, arr in arrays.metrics.items():
        metric = corpus_metric(name, table)
        if metric is None:
            continue
        present = np.isfinite(arr) & human_present
        cs = corpus_stats(table, metric, arrays.systems, arrays.items)
        sign = -1.0 if name in lower_is_better else 1.0
        idx = index_array(len(arrays.systems), len(arrays.items), present)
        out[name] = Predictor(name, idx, statistics={s: corpus_statistic(s, cs, sign) for s in wanted
                                                     if s in CORRELATIONS})
    return out


def trust_table_pairs(
    pairs_scored: pd.DataFrame,
    pref_columns: Sequence[str],
    metric_cols: Sequence[str],
    *,
    statistic: str = "preference_accuracy",
    also: Sequence[str] | None = None,
    by: str | None = None,
    resampling: Resampling | None = None,
    n_resamples: int | None = None,
    n_permutations: int | None = None,
    confidence: float | None = None,
    alpha: float | None = None,
    seed: int | None = None,
    min_group_size: int = 30,
    costs: Mapping[str, float] | Sequence[Any] | None = None,
    lower_is_better: Sequence[str] = (),
    chunk_rows: int = PC.CHUNK_ROWS,
) -> TrustReport:
    """Trust table of a pair table with ``<metric>_a`` / ``<metric>_b`` columns (see
    :func:`evalign.meta.breakdown.pair_scores`): preference accuracy with ties (ranking statistic)
    and without ties (``also``), each metric's epsilon calibrated once on all pairs. ``resampling``
    and the settings given one by one as for :func:`trust_table_items`.

    With ``resampling.method`` ``auto`` and preference statistics only, the table is counted chunk by
    chunk (:mod:`evalign.meta.pair_counts`: slices of ``chunk_rows`` pairs, read by
    ``resampling.workers`` processes; memory one slice per process plus counts, the same table as
    from the whole arrays); otherwise (method ``items``) every metric's arrays are resampled item by item."""
    ranking = _Ranking(statistic, _also(statistic, also, PREFERENCES), "item", "item", None, True, min_group_size)
    resampling = with_settings(resampling, n_resamples=n_resamples, n_permutations=n_permutations,
                               confidence=confidence, alpha=alpha, seed=seed)
    notes = (f"{len(pref_columns)} annotator column(s); pairs resampled; metric epsilon calibrated on all pairs",)
    if resampling.method == "auto" and {ranking.statistic, *ranking.also} <= set(PC.COUNTED):
        table = PC.PairTable(list(pref_columns), list(metric_cols), tuple(lower_is_better), by,
                             pairs_scored.attrs.get("source"))
        return _trust_counted(PC.frame_chunks(pairs_scored, chunk_rows), table, ranking, resampling=resampling,
                              costs=costs, notes=notes)
    arrays = pair_arrays(pairs_scored, pref_columns, metric_cols, lower_is_better=lower_is_better)
    return _trust(pairs_scored, arrays, ranking, by=by, resampling=resampling, costs=costs, notes=notes)


def trust_table_pairs_file(
    path: str | Path,
    pref_columns: Sequence[str],
    metric_cols: Sequence[str],
    *,
    statistic: str = "preference_accuracy",
    also: Sequence[str] | None = None,
    by: str | None = None,
    resampling: Resampling | None = None,
    min_group_size: int = 30,
    costs: Mapping[str, float] | Sequence[Any] | None = None,
    lower_is_better: Sequence[str] = (),
    chunk_rows: int = PC.CHUNK_ROWS,
) -> TrustReport:
    """:func:`trust_table_pairs` of a Parquet pair table, read ``chunk_rows`` rows at a time (twice:
    once to calibrate the epsilons, once to count the credits), only the columns it needs: memory
    is one chunk plus counts, whatever the file's length. The same table as
    :func:`trust_table_pairs` of the whole file (``resampling.method`` must be ``auto``; preference
    statistics only). Errors name the file, row and column."""
    path = Path(path)
    ranking = _Ranking(statistic, _also(statistic, also, PREFERENCES), "item", "item", None, True, min_group_size)
    resampling = with_settings(resampling)
    if not (resampling.method == "auto" and {ranking.statistic, *ranking.also} <= set(PC.COUNTED)):
        raise InputError("a pair table read in chunks is ranked by preference accuracies resampled by counts "
                         "(method 'auto'); read the file whole for others", file=str(path), field="statistic")
    table = PC.PairTable(list(pref_columns), list(metric_cols), tuple(lower_is_better), by, str(path))
    have = set(parquet_columns(path, str(path)))
    for c in table.columns():
        if c not in have:
            raise InputError(f"no column '{c}' (columns: {', '.join(sorted(have))})", file=str(path), field=c)
    notes = (f"{len(pref_columns)} annotator column(s); pairs resampled; metric epsilon calibrated on all pairs",)
    return _trust_counted(parquet_parts(path, str(path), table.columns(), chunk_rows), table, ranking,
                          resampling=resampling, costs=costs, notes=notes)


def _trust_counted(chunks: PC.Chunks, table: PC.PairTable, ranking: _Ranking, *, resampling: Resampling,
                   costs: Mapping[str, float] | Sequence[Any] | None, notes: tuple[str, ...]) -> TrustReport:
    """The trust table of a pair table counted over its chunks (two passes: epsilons, then counts)."""
    stats = list(dict.fromkeys([ranking.statistic, *ranking.also]))
    eps = PC.epsilons(chunks, table, stats, resampling.workers)
    metrics = list(table.metrics)
    groups = {g: CountedGroup(gc.n, PC.group_units(gc, eps, ranking.statistic, metrics),
                              {m: {s: PC.cell_value(gc.cells[s][m]) for s in ranking.also} for m in metrics})
              for g, gc in PC.count_groups(chunks, table, eps, ranking.statistic, resampling.workers).items()}
    cost = _costs(costs)
    preds = [Predictor(m, np.empty((2, 0)), cost=cost.get(m, float("nan"))) for m in metrics]
    rows, group_rows, extra, how = rank_counted(
        preds, groups, {m: [eps[s][m] for s in (ranking.statistic, *ranking.also)] for m in metrics},
        statistic=ranking.statistic, also=ranking.also, resampling=resampling, min_group_size=ranking.min_group_size)
    return _report(rows, group_rows, ranking, resampling, (*notes, *extra), how, {})


def _also(statistic: str, also: Sequence[str] | None, family: Sequence[str]) -> list[str]:
    """The extra statistics: ``also``, or by default the others of the ranking statistic's family."""
    return list(also) if also is not None else [s for s in family if s != statistic]


@dataclass(frozen=True)
class _Ranking:
    """What a trust table of :func:`trust_table_items` / :func:`trust_table_pairs` ranks by."""

    statistic: str
    also: list[str]
    level: str
    grouping: str
    variant: str | None
    is_pairs: bool
    min_group_size: int


def _trust(
    table: pd.DataFrame,
    arrays: ItemArrays | PairArrays,
    ranking: _Ranking,
    *,
    by: str | None,
    resampling: Resampling,
    costs: Mapping[str, float] | Sequence[Any] | None,
    notes: tuple[str, ...],
    corpus: Mapping[str, Predictor] | None = None,
    system_labels: Mapping[str, str] | None = None,
) -> TrustReport:
    """The steps shared by both trust tables: group, rank the metrics (a corpus metric by its
    ``corpus`` predictor), report."""
    cost = _costs(costs)
    if by == "system":
        raise InputError("a trust table cannot be split by system (use breakdown(by='system'))", field="by")
    groups = group_index(table, arrays, by, ranking.is_pairs)
    corpus = corpus or {}
    preds = [replace(corpus[m], cost=cost.get(m, float("nan"))) if m in corpus
             else Predictor(m, arr, cost=cost.get(m, float("nan"))) for m, arr in arrays.metrics.items()]
    rows, group_rows, extra, how = rank_predictors(
        arrays.human, preds, groups, statistic=ranking.statistic, also=ranking.also, level=ranking.level,
        grouping=ranking.grouping, variant=ranking.variant, is_pairs=ranking.is_pairs, resampling=resampling,
        min_group_size=ranking.min_group_size)
    return _report(rows, group_rows, ranking, resampling, (*notes, *extra), how, system_labels or {})


def _report(rows: pd.DataFrame, group_rows: pd.DataFrame, ranking: _Ranking, resampling: Resampling,
            notes: tuple[str, ...], how: str, system_labels: Mapping[str, str]) -> TrustReport:
    return TrustReport(
        table=rows.drop(columns=["kind", "beats_baselines"]),
        groups=group_rows,
        statistic=ranking.statistic,
        level=ranking.level,
        confidence=resampling.confidence,
        alpha=resampling.alpha,
        n_resamples=resampling.n_resamples,
        n_permutations=resampling.n_permutations,
        seed=resampling.seed,
        notes=notes,
        system_labels=dict(system_labels),
        resampling=how,
    )


__all__ = ["PARALLEL_MIN_ITEMS", "SUFFICIENT_NOTE", "CountedGroup", "Predictor", "TrustReport", "paired_bootstrap_p",
           "rank_counted", "rank_predictors", "resampling_label", "trust_table_items", "trust_table_pairs",
           "trust_table_pairs_file"]

