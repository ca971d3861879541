"""The settings of every bootstrap interval and paired significance test, as one frozen object.

:class:`Resampling` travels whole from the evaluation spec (:class:`evalign.evaluate.EvalSpec`) down
to the trust table (:func:`evalign.meta.trust.rank_predictors`) and the resampling kernels
(:func:`evalign.meta.significance.bootstrap_ci`, :func:`~evalign.meta.significance.paired_permutation_test`),
as mt-metrics-eval passes ``PermutationSigDiffParams`` to ``PermutationSigDiff``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from evalign.errors import InputError

#: resampling methods: ``auto`` resamples a mean of per-item credits taking few values by the counts of
#: each value (sufficient statistics) and everything else by item indices; ``items`` always by item indices
METHODS = ("auto", "items")


#: the most resamples (or permutations) one evaluation draws: beyond any use, and the resample arrays of a
#: few hundred items would no longer fit in memory
MAX_RESAMPLES = 1_000_000


@dataclass(frozen=True)
class Resampling:
    """Settings of every bootstrap interval and significance test of one evaluation.

    ``n_resamples``: bootstrap resamples over items (>= 1); ``n_permutations``: permutations per
    paired test (>= 1); ``confidence``: level of the intervals, in (0, 1); ``alpha``: significance
    level of clusters and of ``beats_baselines``, in (0, 1); ``seed``: seed of all of them.
    ``method``: ``auto`` (default) resamples a statistic that is a ratio of per-item credits taking at
    most :data:`~evalign.meta.sufficient.MAX_CATEGORIES` values (preference accuracy, pairwise accuracy
    grouped by item, ...) by the counts of each value (:mod:`evalign.meta.sufficient`: exact in
    distribution, but the same seed gives other draws than the item-index path) and every other
    statistic by item indices; ``items`` resamples item indices always (the draws of
    :func:`scipy.stats.bootstrap`). ``workers``: processes for what is computed per item (one per
    metric, or per block of resamples); None or 0 = every available core, 1 = this process only. The
    results do not depend on ``workers`` (it is no part of the signature, nor of equality).
    """

    n_resamples: int = 1000
    n_permutations: int = 1000
    confidence: float = 0.95
    alpha: float = 0.05
    seed: int = 0
    method: str = "auto"
    workers: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in ("n_resamples", "n_permutations"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"must be an integer >= 1, got {v!r}", field=name)
            if v > MAX_RESAMPLES:
                raise InputError(f"must be at most {MAX_RESAMPLES:,}, got {v:,}", field=name)
        for name in ("confidence", "alpha"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 < float(v) < 1.0:
                raise InputError(f"must be between 0 and 1, got {v!r}", field=name)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InputError(f"must be an integer >= 0, got {self.seed!r}", field="seed")
        if self.method not in METHODS:
            raise InputError(f"must be one of {', '.join(METHODS)}, got {self.method!r}", field="method")
        w = self.workers
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 0):
            raise InputError(f"must be an integer >= 0 (0 = every core), got {w!r}", field="workers")


#: the defaults (every setting at its default value)
DEFAULT = Resampling()


def with_settings(resampling: Resampling | None, **given: Any) -> Resampling:
    """``resampling`` (default: :data:`DEFAULT`) with the settings given one by one (not None) put in.

    For the functions that still accept the settings one by one (``n_resamples=``, ``seed=``, ...):
    those values are not checked here but where they are used, by the kernels, with the same
    messages as when they were passed one by one (a seed may be anything numpy accepts)."""
    base = DEFAULT if resampling is None else resampling
    unknown = set(given) - {f.name for f in fields(Resampling)}
    if unknown:
        raise TypeError(f"unknown resampling settings: {', '.join(sorted(unknown))}")
    values = {f.name: getattr(base, f.name) for f in fields(Resampling)}
    values.update({k: v for k, v in given.items() if v is not None})
    if all(values[k] == getattr(base, k) and type(values[k]) is type(getattr(base, k)) for k in values):
        return base
    out = object.__new__(Resampling)  # unchecked: each value is checked where it is used (see above)
    for k, v in values.items():
        object.__setattr__(out, k, v)
    return out


__all__ = ["DEFAULT", "METHODS", "Resampling", "with_settings"]
