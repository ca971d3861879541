"""System-vs-system significance: paired bootstrap resampling and approximate randomization, as
sacrebleu does them (``sacrebleu.significance``; Koehn 2004; Riezler & Maxwell 2005).

Each system is compared with a baseline system on the same items. A metric is described by its
per-item *sufficient statistics* (an ``items x d`` array) and a function that turns summed
statistics into the corpus score: corpus BLEU / chrF are recomputed from their n-gram statistics
for every resample (the metric's ``score_from_stats`` hook: sacrebleu's corpus score); any other
metric has one statistic per item (its value) and its corpus score is the mean.

The procedures follow sacrebleu 2.x exactly:

* **Paired bootstrap** (``_paired_bs_test``): ``idx = default_rng(seed).choice(n, (n_resamples, n),
  replace=True)``; both systems are scored on every resample (statistics as float32 sums, as in
  sacrebleu); ``d = |sys - base|`` per resample, ``stats = d - mean(d)``; ``p = (1 + #{stats >
  |observed difference|}) / (n_resamples + 1)``. The mean and 95% half-width of each system's
  resampled scores are sacrebleu's ``estimate_ci`` (sorted scores, bounds at ``n // 40``).
* **Approximate randomization** (``_paired_ar_test``): ``swap = default_rng(seed).integers(2,
  (n_trials, n), dtype=bool)``; pseudo-system A takes the baseline's statistics where ``swap`` is
  true and the system's elsewhere, B the opposite; ``p = (1 + #{|A - B| > |observed|}) /
  (n_trials + 1)``.
* Defaults: 1,000 bootstrap resamples, 10,000 AR trials, seed 12,345 (``SACREBLEU_SEED``'s
  default). As in sacrebleu every comparison starts a fresh generator from the seed, so all
  systems see the same resamples.

Two deliberate departures from sacrebleu, both in degenerate cases only: seed 0 is a seed
(sacrebleu treats a falsy seed as "no seed"; ``seed=None`` draws fresh entropy here), and two
systems with identical statistics get ``p = 1`` from both tests (sacrebleu's strict ``>`` gives
them its smallest p-value, ``1 / (n + 1)``, i.e. calls a system significantly different from a
copy of itself).

All functions are pure (no I/O); :func:`metric_statistics` extracts the statistics of an evalign
metric from texts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalign.io import references_of
from evalign.rank.bootstrap import bootstrap

#: summed statistics (``k x d``) -> one corpus score per row (``k``)
ScoreFn = Callable[[np.ndarray], np.ndarray]

DEFAULT_SEED = 12345
DEFAULT_BOOTSTRAP = 1000
DEFAULT_AR_TRIALS = 10000


@dataclass(frozen=True)
class SignificanceSettings:
    """How many resamples / trials, and the seed (sacrebleu's defaults)."""

    n_bootstrap: int = DEFAULT_BOOTSTRAP
    n_ar: int = DEFAULT_AR_TRIALS
    seed: int | None = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.n_bootstrap < 1 or self.n_ar < 1:
            raise ValueError("n_bootstrap and n_ar must be at least 1")


@dataclass(frozen=True)
class MetricStatistics:
    """The per-item sufficient statistics of every system for one metric, on the same items.

    ``stats[system]`` is an ``items x d`` array (rows in the same item order for every system);
    ``score_fn`` maps summed statistics to corpus scores; ``scale`` names the kind of corpus score
    (``"corpus"`` for BLEU/chrF recomputed from statistics, ``"mean"`` otherwise).
    """

    metric: str
    stats: Mapping[str, np.ndarray]
    score_fn: ScoreFn
    scale: str = "mean"
    #: whether the statistics are integer counts: summed as float32 in the bootstrap and as int64 in
    #: approximate randomization, as sacrebleu does
    float32: bool = False


@dataclass(frozen=True)
class PairedResult:
    """One system compared with the baseline on one metric.

    ``score`` / ``baseline_score``: corpus scores on the compared items; ``bootstrap_p`` /
    ``ar_p``: p-values of the paired bootstrap and approximate randomization tests (in (0, 1]);
    ``mean`` / ``ci``: the mean of the system's bootstrap scores and the half-width of their 95%
    interval (sacrebleu's ``estimate_ci``); likewise ``baseline_mean`` / ``baseline_ci``.
    """

    metric: str
    system: str
    baseline: str
    n_items: int
    score: float
    baseline_score: float
    bootstrap_p: float
    ar_p: float
    mean: float
    ci: float
    baseline_mean: float
    baseline_ci: float

    @property
    def difference(self) -> float:
        """``score - baseline_score``."""
        return self.score - self.baseline_score


def estimate_ci(scores: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of the 95% interval of resampled scores (sacrebleu's ``estimate_ci``:
    the sorted scores' entries ``n // 40`` and ``n - n // 40 - 1``)."""
    s = np.sort(np.asarray(scores))  # the scores' own dtype (float32 for chrF, as in sacrebleu)
    lo = len(s) // 40
    hi = len(s) - lo - 1
    return float(s.mean()), float(0.5 * (s[hi] - s[lo]))


def p_value(sample_stats: np.ndarray, observed: float) -> float:
    """``(1 + #{sample_stats > observed}) / (len(sample_stats) + 1)`` (sacrebleu, after multeval:
    the strict ``>`` so a system compared with itself is never significant)."""
    c = int(np.sum(np.asarray(sample_stats) > observed))
    return (c + 1) / (len(sample_stats) + 1)


def bootstrap_indices(n_items: int, n_resamples: int, seed: int | None) -> np.ndarray:
    """The resampled item indices (``n_resamples x n_items``), drawn as sacrebleu draws them (the
    draws :func:`compare_systems` hands its fitting function: :func:`evalign.rank.bootstrap.bootstrap`)."""
    return np.asarray(bootstrap(n_items, lambda idx: idx, n_resamples, seed, draw="indices"))


def ar_swaps(n_items: int, n_trials: int, seed: int | None) -> np.ndarray:
    """The AR swap masks (``n_trials x n_items`` booleans), drawn as sacrebleu draws them."""
    rng = np.random.default_rng(seed)
    return rng.integers(2, size=(n_trials, n_items), dtype=bool)


def bootstrap_scores(stats: np.ndarray, idx: np.ndarray, score_fn: ScoreFn, *, float32: bool = False) -> np.ndarray:
    """Corpus scores of the resamples ``idx`` of one system's statistics."""
    arr = np.asarray(stats, dtype=np.float32 if float32 else np.float64)
    return np.asarray(score_fn(arr[idx].sum(axis=1)))


def paired_bootstrap_p(base_scores: np.ndarray, sys_scores: np.ndarray, observed: float) -> float:
    """The paired bootstrap p-value from both systems' scores on the same resamples."""
    d = np.abs(np.asarray(sys_scores) - np.asarray(base_scores))
    return p_value(d - d.mean(), abs(observed))


def approximate_randomization_p(
    base_stats: np.ndarray, sys_stats: np.ndarray, swaps: np.ndarray, score_fn: ScoreFn, observed: float,
    *, counts: bool = False,
) -> float:
    """The AR p-value: pseudo-systems mixing the two systems' statistics by ``swaps``
    (``counts``: the statistics are integer counts, summed as int64 as sacrebleu does)."""
    dtype = np.int64 if counts else np.float64
    b = np.asarray(base_stats, dtype=dtype)
    s = np.asarray(sys_stats, dtype=dtype)
    shuf_a = swaps @ b + (~swaps) @ s
    shuf_b = (~swaps) @ b + swaps @ s
    diffs = np.abs(np.asarray(score_fn(shuf_a)) - np.asarray(score_fn(shuf_b)))
    return p_value(diffs, abs(observed))


def corpus_score(stats: np.ndarray, score_fn: ScoreFn) -> float:
    """The corpus score of one system's statistics (exact sums)."""
    return float(np.asarray(score_fn(np.asarray(stats, dtype=np.float64).sum(axis=0)[None, :]))[0])


def compare_systems(
    ms: MetricStatistics,
    *,
    baseline: str | None = None,
    all_pairs: bool = False,
    settings: SignificanceSettings = SignificanceSettings(),
    on_progress: Callable[[int, int], None] | None = None,
) -> list[PairedResult]:
    """Each system against ``baseline`` (default: the first system of ``ms.stats``), or with
    ``all_pairs`` every ordered pair ``(baseline=a, system=b)`` with ``a`` before ``b`` in the
    order of ``ms.stats``. ``on_progress(done, total)`` is called after each comparison."""
    systems = list(ms.stats)
    if len(systems) < 2:
        raise ValueError(f"{ms.metric}: significance needs at least two systems, got {len(systems)}")
    n = {len(v) for v in ms.stats.values()}
    if len(n) != 1:
        raise ValueError(f"{ms.metric}: every system needs statistics on the same items")
    n_items = n.pop()
    if n_items < 1:
        raise ValueError(f"{ms.metric}: no items to compare")
    if all_pairs:
        pairs = list(itertools.combinations(systems, 2))
    else:
        base = baseline if baseline is not None else systems[0]
        if base not in ms.stats:
            raise ValueError(f"{ms.metric}: unknown baseline system '{base}' (systems: {', '.join(systems)})")
        pairs = [(base, s) for s in systems if s != base]

    def fit(idx: np.ndarray) -> tuple[np.ndarray, ...]:
        """Every system's corpus scores on the same resamples (each array in its own dtype)."""
        return tuple(bootstrap_scores(ms.stats[s], idx, ms.score_fn, float32=ms.float32) for s in systems)

    boot = dict(zip(systems, bootstrap(n_items, fit, settings.n_bootstrap, settings.seed, draw="indices"),
                    strict=True))
    swaps = ar_swaps(n_items, settings.n_ar, settings.seed)
    score = {s: corpus_score(ms.stats[s], ms.score_fn) for s in systems}
    ci = {s: estimate_ci(boot[s]) for s in systems}
    out = []
    for k, (b, s) in enumerate(pairs):
        observed = score[s] - score[b]
        same = np.array_equal(ms.stats[s], ms.stats[b])  # see the module doc: p = 1, not sacrebleu's floor
        out.append(
            PairedResult(
                metric=ms.metric,
                system=s,
                baseline=b,
                n_items=n_items,
                score=score[s],
                baseline_score=score[b],
                bootstrap_p=1.0 if same else paired_bootstrap_p(boot[b], boot[s], observed),
                ar_p=1.0 if same else approximate_randomization_p(ms.stats[b], ms.stats[s], swaps, ms.score_fn,
                                                                  observed, counts=ms.float32),
                mean=ci[s][0],
                ci=ci[s][1],
                baseline_mean=ci[b][0],
                baseline_ci=ci[b][1],
            )
        )
        if on_progress is not None:
            on_progress(k + 1, len(pairs))
    return out


# --- statistics of evalign metrics ------------------------------------------------------------


def mean_score_fn(sums: np.ndarray) -> np.ndarray:
    """Score function of a mean metric whose statistics are ``[value, 1]`` per item."""
    s = np.atleast_2d(sums)
    return s[:, 0] / s[:, 1]


def stats_score_fn(score_from_stats: Callable[[Any], Any]) -> ScoreFn:
    """Score function of a corpus metric: its ``score_from_stats`` hook (e.g. sacrebleu's corpus
    BLEU / chrF of summed statistics) applied to each row of summed statistics."""

    def fn(sums: np.ndarray) -> np.ndarray:
        rows = np.atleast_2d(sums)
        # a plain np.array of the scores, as sacrebleu builds it (float32 scores stay float32)
        return np.array([score_from_stats(r) for r in rows])

    return fn


def is_corpus(metric: Any) -> bool:
    """Whether ``metric`` declares a corpus system score (``system_level == "corpus"``: BLEU, chrF),
    recomputed here from its ``item_stats`` with its ``score_from_stats``."""
    return getattr(metric, "system_level", "mean") == "corpus"


def metric_statistics(
    metric: Any,
    responses: Mapping[str, Sequence[str]],
    references: Sequence[Sequence[str]],
    values: Mapping[str, np.ndarray] | None = None,
) -> MetricStatistics:
    """Sufficient statistics of every system for ``metric`` (an evalign :class:`Metric`).

    ``responses[system]`` are the system's responses on the same items in the same order;
    ``references[i]`` the references of item ``i`` (shared by all systems). For a corpus metric
    (``bleu`` / ``chrf``) the statistics are the metric's ``item_stats`` (sacrebleu's n-gram
    statistics against all the item's references; items must all have a reference) and its corpus
    score is its ``score_from_stats``. For other metrics ``values[system]`` (the item scores, no
    NaN) are used, with the mean as corpus score.
    """
    if is_corpus(metric):
        if any(len(r) == 0 for r in references):
            raise ValueError(f"{metric.column}: every compared item needs a reference")
        refs = [list(r) for r in references]
        stats = {s: np.asarray(metric.item_stats([str(h) for h in hyps], refs), dtype=np.float64)
                 for s, hyps in responses.items()}
        return MetricStatistics(metric.column, stats, stats_score_fn(metric.score_from_stats), scale="corpus",
                                float32=True)
    if values is None:
        raise ValueError(f"{metric.column}: item values are needed for a mean metric")
    stats = {}
    for s, v in values.items():
        v = np.asarray(v, dtype=np.float64)
        if not np.isfinite(v).all():
            raise ValueError(f"{metric.column}: system '{s}' has missing values on compared items")
        stats[s] = np.column_stack([v, np.ones_like(v)])
    return MetricStatistics(metric.column, stats, mean_score_fn, scale="mean")


def results_table(results: Sequence[PairedResult]) -> list[dict[str, Any]]:
    """The results as JSON-ready records."""
    return [
        {
            "metric": r.metric,
            "baseline": r.baseline,
            "system": r.system,
            "n_items": r.n_items,
            "score": r.score,
            "baseline_score": r.baseline_score,
            "difference": r.difference,
            "bootstrap_p": r.bootstrap_p,
            "ar_p": r.ar_p,
            "bootstrap_mean": r.mean,
            "bootstrap_ci95": r.ci,
            "baseline_bootstrap_mean": r.baseline_mean,
            "baseline_bootstrap_ci95": r.baseline_ci,
        }
        for r in results
    ]


@dataclass(frozen=True)
class TableStatistics:
    """:class:`MetricStatistics` built from a scored item table, with what was left out."""

    statistics: MetricStatistics
    #: the compared item ids (in the order of the statistics' rows)
    ids: tuple[str, ...]
    #: item ids left out because a system lacks them, a reference is missing or a value is NaN
    n_dropped: int


def table_statistics(table: Any, metric: Any, systems: Sequence[str] | None = None) -> TableStatistics:
    """Statistics of ``metric`` (an evalign :class:`Metric`) for the ``systems`` (default: all, in
    sorted order) of a scored item table (columns ``id``, ``system``, ``response``, ``reference``
    and, for mean metrics, the metric's column).

    Paired tests compare systems on the same items: only ids that every compared system has are
    kept, and of those only ids with a reference (corpus metrics) or with a finite value in every
    system (mean metrics). References are taken from the first system's rows.
    """
    names = sorted(map(str, table["system"].unique())) if systems is None else [str(s) for s in systems]
    missing = [s for s in names if s not in set(map(str, table["system"]))]
    if missing:
        raise ValueError(f"unknown system(s) {', '.join(missing)}")
    by_sys = {s: table[table["system"].astype(str) == s].assign(id=lambda d: d["id"].astype(str)).set_index("id")
              for s in names}
    all_ids = set().union(*(set(g.index) for g in by_sys.values()))
    common = [i for i in by_sys[names[0]].index if all(i in by_sys[s].index for s in names)]
    corpus = is_corpus(metric)
    if corpus:
        refs_all = dict(zip(by_sys[names[0]].index, references_of(by_sys[names[0]].reset_index()), strict=True))
        keep = [i for i in common if refs_all[i]]
    else:
        col = metric.column
        if col not in table.columns:
            raise ValueError(f"no column '{col}' in the scored table")
        keep = [i for i in common if all(np.isfinite(float(by_sys[s].at[i, col])) for s in names)]
    if not keep:
        raise ValueError(f"{metric.column}: no item that every compared system has (with a reference and a value)")
    responses = {s: [str(x) for x in by_sys[s].loc[keep, "response"]] for s in names}
    if corpus:
        ms = metric_statistics(metric, responses, [refs_all[i] for i in keep])
    else:
        values = {s: by_sys[s].loc[keep, metric.column].to_numpy(dtype=float) for s in names}
        ms = metric_statistics(metric, responses, [], values)
    return TableStatistics(ms, tuple(keep), len(all_ids) - len(keep))
