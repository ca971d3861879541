"""Soft pairwise accuracy (SPA): Thompson, Mathur, Deutsch & Lau (2024), "Improving Statistical
Significance in Human Evaluation of Automatic Metrics via Soft Pairwise Accuracy", WMT.

For every pair of systems (i, j) a paired permutation test over items gives the p-value of "system i
is better than system j", once from the human scores and once from the metric scores. SPA is one
minus the mean absolute difference of the two p-values over all system pairs (1 - "pairwise
confidence error"): 1 when the metric is exactly as confident as the humans about every comparison.

The permutation test is mt-metrics-eval's ``pce.compute_pairwise_p_values``: system scores are sums
over items in float32; one matrix of +1/-1 signs, ``rint(default_rng(seed).random((P, items),
float32)) * 2 - 1``, serves every system pair and both score sources (seed 4 by default, as there);
the p-value is **one-sided without +1 correction**, ``#{null_delta >= observed_delta} / P``.
As there, the sums are float32: a null delta equal to the observed one (the all-+1 pattern, or
equal item scores) can fall on either side of ``>=`` after rounding; evalign computes in the same
order and memory layout, so the p-values equal mt-metrics-eval's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evalign.errors import InputError
from evalign.meta.correlation import paired_scores


@dataclass(frozen=True)
class SoftPairwiseAccuracyResult:
    """Soft pairwise accuracy of a metric against human scores.

    Attributes:
        value: 1 - mean over system pairs i < j of ``|p_human[i, j] - p_metric[i, j]|``, in [0, 1];
            NaN with fewer than two systems or no complete item.
        n_systems: systems compared; n_items: items with a human and a metric score for every system
            (the others are left out, counted in ``n_items_dropped``).
        n_permutations, seed: the permutation test's settings.
        human_p_values, metric_p_values: ``systems x systems``; ``[i, j]`` (i < j) is the one-sided
            p-value that system i is better than system j; NaN elsewhere.
    """

    value: float
    n_systems: int
    n_items: int
    n_items_dropped: int
    n_permutations: int
    seed: int
    human_p_values: np.ndarray = field(repr=False, compare=False)
    metric_p_values: np.ndarray = field(repr=False, compare=False)


def _signs(n_items: int, n_permutations: int, seed: int) -> np.ndarray:
    """(P x items) float32 matrix of +1/-1, drawn as mt-metrics-eval's ``compute_pairwise_p_values``."""
    rng = np.random.default_rng(seed)
    s = rng.random(size=(n_permutations, n_items), dtype=np.float32)
    np.rint(s, out=s, casting="same_kind")
    s *= 2.0
    s -= 1.0
    return s


def _p_values(scores: np.ndarray, signs: np.ndarray) -> np.ndarray:
    k = scores.shape[0]
    # C order as mt-metrics-eval's reshaped input: float32 sums of another layout can round differently
    seg = np.ascontiguousarray(scores, dtype=np.float32)
    sys_scores = np.sum(seg, axis=1)
    partial = np.matmul(signs, seg.T)
    out = np.full((k, k), np.nan)
    for i in range(k):
        for j in range(i + 1, k):
            out[i, j] = np.sum(partial[:, i] - partial[:, j] >= sys_scores[i] - sys_scores[j]) / signs.shape[0]
    return out


def pairwise_p_values(scores: object, n_permutations: int = 1000, seed: int = 4) -> np.ndarray:
    """One-sided paired-permutation p-values of "system i is better than system j" (higher = better).

    Args:
        scores: ``systems x items`` (no NaN).
        n_permutations: sign patterns drawn (>= 1).
        seed: seed of ``numpy.random.default_rng`` (mt-metrics-eval's default is 4).

    Returns:
        ``systems x systems`` array; entry ``[i, j]`` for i < j is ``#{null_delta >= delta} / P``
        (no +1 correction), NaN on and below the diagonal.
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or np.isnan(x).any():
        raise InputError("scores must be a systems x items array without missing values", field="scores")
    if n_permutations < 1:
        raise InputError(f"n_permutations must be at least 1, got {n_permutations}", field="n_permutations")
    return _p_values(x, _signs(x.shape[1], n_permutations, seed))


def soft_pairwise_accuracy(
    human: object, metric: object, n_permutations: int = 1000, seed: int = 4
) -> SoftPairwiseAccuracyResult:
    """Soft pairwise accuracy (Thompson et al., 2024; mt-metrics-eval ``PairwiseConfidenceError``).

    Args:
        human, metric: ``systems x items`` arrays, higher = better (negate ranks or error counts
            first); NaN = missing. Only items with both scores for every system are used.
        n_permutations: permutations of the paired tests (>= 1); seed: their seed (default 4, as
            mt-metrics-eval). The same sign matrix serves the human and the metric tests.

    Returns:
        :class:`SoftPairwiseAccuracyResult`.
    """
    h, m = paired_scores(human, metric)
    if h.ndim != 2:
        raise InputError("soft pairwise accuracy needs systems x items arrays", field="human")
    if n_permutations < 1:
        raise InputError(f"n_permutations must be at least 1, got {n_permutations}", field="n_permutations")
    complete = ~(np.isnan(h) | np.isnan(m)).any(axis=0)
    h, m = h[:, complete], m[:, complete]
    k, n = h.shape
    empty = np.full((k, k), np.nan)
    if k < 2 or n == 0:
        return SoftPairwiseAccuracyResult(float("nan"), k, n, int((~complete).sum()), n_permutations, seed,
                                          empty, empty.copy())
    signs = _signs(n, n_permutations, seed)
    ph, pm = _p_values(h, signs), _p_values(m, signs)
    iu = np.triu_indices(k, 1)
    value = 1.0 - float(np.mean(np.abs(ph - pm)[iu]))
    return SoftPairwiseAccuracyResult(value, k, n, int((~complete).sum()), n_permutations, seed, ph, pm)


__all__ = ["SoftPairwiseAccuracyResult", "pairwise_p_values", "soft_pairwise_accuracy"]
