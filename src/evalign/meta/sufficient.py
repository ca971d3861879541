"""Resampling a ratio of per-item credits from the counts of each credit value (sufficient statistics).

A ``units`` statistic (:class:`evalign.meta.significance.Statistic`) is ``sum(num) / sum(den)`` over
items, each item bringing one credit pair ``(num, den)``: preference accuracy gives ``(1, 1)``,
``(0, 1)`` or ``(0, 0)`` per pair, pairwise accuracy grouped by item gives ``(accuracy of the item,
1)`` with a handful of values. When the pairs take few distinct values (K "categories"), the
statistic of any multiset of items depends only on how many items of each category it holds, so
resampling needs the K counts, not the n items:

* **bootstrap** (n items drawn with replacement): the category counts of a resample are
  ``Multinomial(n, n_k / n)``; drawn as K - 1 conditional binomials (:func:`multinomial_counts`):
  ``c_k ~ Binomial(n - c_1 - ... - c_(k-1), n_k / (n_k + ... + n_K))``;
* **paired bootstrap** of two statistics on the same resamples: the same over the joint categories
  ``(category under a, category under b)`` (at most ``K_a x K_b`` of them, :func:`joint_counts`);
* **sign-flip permutation test** (each item's two credit pairs swapped with probability 1/2): in each
  joint category whose two sides differ, the number of swapped items is ``Binomial(n_c, 1/2)``,
  independently across categories (:func:`permutation_moves`).

Each is exactly the distribution of the item-index path (the resampled statistic is a function of
the category counts only, and these are the counts' distributions); the same seed gives different
draws, so results agree in distribution, not draw for draw. Time is ``O(n)`` once (the counts) plus
``O(R x K)`` for R resamples, memory ``O(n + R x K)``.

:func:`bootstrap_law` and :func:`permutation_law` give the exact distribution these samplers draw
from (as the samplers factor it: conditional binomials, exact rational probabilities), for checking
against an enumeration of every item resample on tiny inputs. Pure functions, no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

#: the most distinct credit pairs (or joint pairs of a paired comparison) resampled by their counts
MAX_CATEGORIES = 4096


class JointCounts:
    """The joint category counts of several :class:`Credits` on the same items, counted without
    keeping the items (e.g. chunk by chunk over a file): for two credits' keys ``(a, b)``, the
    ``K_a x K_b`` int64 matrix of how many items fall in category i under a and j under b. Filled by
    :meth:`add` (counts add up), read by :func:`joint_counts`."""

    def __init__(self) -> None:
        self._tables: dict[tuple[Hashable, Hashable], np.ndarray] = {}

    def add(self, a: Hashable, b: Hashable, counts: np.ndarray) -> None:
        """Add a ``K_a x K_b`` count matrix of the items under keys ``a`` and ``b``."""
        m = np.asarray(counts, dtype=np.int64)
        if (a, b) in self._tables:
            self._tables[(a, b)] = self._tables[(a, b)] + m
        else:
            self._tables[(a, b)] = m.copy()

    def matrix(self, a: Hashable, b: Hashable) -> np.ndarray:
        """The ``K_a x K_b`` joint counts of keys ``a`` and ``b`` (KeyError when never counted)."""
        if (a, b) in self._tables:
            return self._tables[(a, b)]
        return self._tables[(b, a)].T


@dataclass(frozen=True)
class Credits:
    """The per-item credits of a ratio statistic grouped by value.

    ``num``, ``den``: the K distinct credit pairs (float, finite); ``counts``: how many items take
    each (int64, all >= 1); ``codes``: the category of every item (length n, values in ``[0, K)``),
    or None for credits counted without their items: then ``key`` names them in ``joint``, the
    :class:`JointCounts` of every pair of credits on the same items (what paired draws need).
    The statistic of a multiset of items with category counts ``c`` is ``c @ num / (c @ den)``.
    """

    num: np.ndarray
    den: np.ndarray
    counts: np.ndarray
    codes: np.ndarray | None
    key: Hashable = None
    joint: JointCounts | None = field(default=None, repr=False, compare=False)

    @property
    def n(self) -> int:
        """Number of items."""
        return int(self.codes.size) if self.codes is not None else int(self.counts.sum())

    @property
    def k(self) -> int:
        """Number of categories."""
        return int(self.counts.size)


def _small_integer_codes(v: np.ndarray) -> np.ndarray | None:
    """``v`` as integer codes when every value is an integer in [0, 256) (0/1 credits): a fast unique."""
    if v.size == 0 or v.min() < 0 or v.max() >= 256:
        return None
    iv = v.astype(np.int64)
    return iv if np.array_equal(iv, v) else None


def _factor(v: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct values, index of each value) of a 1-D float array, or None with more than ``limit``."""
    iv = _small_integer_codes(v)
    if iv is not None:
        present = np.flatnonzero(np.bincount(iv))
        if present.size > limit:
            return None
        remap = np.zeros(int(iv.max()) + 1, dtype=np.int64)
        remap[present] = np.arange(present.size)
        return present.astype(np.float64), remap[iv]
    values, inverse = np.unique(v, return_inverse=True)
    if values.size > limit:
        return None
    return values, inverse.reshape(-1)


def credits(num: np.ndarray, den: np.ndarray, max_categories: int = MAX_CATEGORIES) -> Credits | None:
    """The credit pairs ``(num[i], den[i])`` grouped by value, or None when a value is not finite or
    they take more than ``max_categories`` distinct values (then resample items instead)."""
    num = np.asarray(num, dtype=np.float64).reshape(-1)
    den = np.asarray(den, dtype=np.float64).reshape(-1)
    if num.shape != den.shape or num.size == 0 or not (np.isfinite(num).all() and np.isfinite(den).all()):
        return None
    fn, fd = _factor(num + 0.0, max_categories), _factor(den + 0.0, max_categories)  # -0.0 -> 0.0
    if fn is None or fd is None:
        return None
    (vn, inv_n), (vd, inv_d) = fn, fd
    joint = inv_n * vd.size + inv_d
    full = np.bincount(joint, minlength=vn.size * vd.size)
    present = np.flatnonzero(full)
    if present.size > max_categories:
        return None
    remap = np.zeros(full.size, dtype=np.int64)
    remap[present] = np.arange(present.size)
    codes = remap[joint].astype(np.int16 if present.size < 2**15 else np.int32)
    return Credits(num=vn[present // vd.size], den=vd[present % vd.size], counts=full[present].astype(np.int64),
                   codes=codes)


def ratio(num_sums: np.ndarray | float, den_sums: np.ndarray | float) -> np.ndarray:
    """``num_sums / den_sums`` with NaN where the denominator is 0 (the statistic is undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(num_sums, dtype=np.float64) / np.asarray(den_sums, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# samplers


def multinomial_counts(counts: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``Multinomial(n, counts / n)`` (n = ``counts.sum()``) as ``(size, K)`` int64: the
    category counts of ``size`` bootstrap resamples of the n items. Drawn as K - 1 conditional
    binomials with exact integer remainders (:func:`bootstrap_law` is this factorisation's law)."""
    counts = np.asarray(counts, dtype=np.int64)
    k = counts.size
    out = np.empty((size, k), dtype=np.int64)
    left = np.full(size, int(counts.sum()), dtype=np.int64)  # items still to place, per resample
    rest = int(counts.sum())  # population of the categories not yet placed
    for j in range(k - 1):
        c = rng.binomial(left, int(counts[j]) / rest) if rest > 0 else np.zeros(size, dtype=np.int64)
        out[:, j] = c
        left -= c
        rest -= int(counts[j])
    if k:
        out[:, k - 1] = left
    return out


def bootstrap_sums(cr: Credits, n_resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(numerator sums, denominator sums) of ``n_resamples`` bootstrap resamples, each length ``n_resamples``."""
    c = multinomial_counts(cr.counts, n_resamples, rng).astype(np.float64)
    return c @ cr.num, c @ cr.den


def joint_counts(a: Credits, b: Credits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The joint categories of two statistics' credits on the same items: ``(category under a,
    category under b, count)`` of every pair of categories that some item has (int64 arrays), from
    the items' codes or, for credits counted without them, from their :class:`JointCounts`."""
    if a.n != b.n:
        raise ValueError(f"credits of {a.n} and {b.n} items cannot be paired")
    if a.codes is None or b.codes is None:  # counted without the items: their joint table
        if a.joint is None or a.joint is not b.joint:
            raise ValueError("credits counted without their items pair only through one JointCounts")
        full = a.joint.matrix(a.key, b.key).reshape(-1)
    else:
        full = np.bincount(a.codes.astype(np.int64) * b.k + b.codes.astype(np.int64), minlength=a.k * b.k)
    present = np.flatnonzero(full)
    return present // b.k, present % b.k, full[present].astype(np.int64)


def paired_bootstrap_sums(
    a: Credits, b: Credits, n_resamples: int, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The (numerator, denominator) sums of both statistics over the same ``n_resamples`` bootstrap
    resamples of the items: one multinomial draw over the joint categories per resample."""
    ka, kb, cnt = joint_counts(a, b)
    c = multinomial_counts(cnt, n_resamples, rng).astype(np.float64)
    return (c @ a.num[ka], c @ a.den[ka]), (c @ b.num[kb], c @ b.den[kb])


@dataclass(frozen=True)
class Moves:
    """The joint categories of a paired permutation test whose two sides differ: swapping one item
    of category j moves ``dnum[j]`` / ``dden[j]`` from b's sums to a's; ``counts[j]`` items each.
    ``static`` items have equal credits under both statistics (a swap changes nothing)."""

    dnum: np.ndarray
    dden: np.ndarray
    counts: np.ndarray
    static: int
    num_a: float
    den_a: float
    num_b: float
    den_b: float


def permutation_moves(a: Credits, b: Credits) -> Moves:
    """The :class:`Moves` of swapping the two statistics' credits item by item."""
    ka, kb, cnt = joint_counts(a, b)
    dnum, dden = b.num[kb] - a.num[ka], b.den[kb] - a.den[ka]
    moving = (dnum != 0) | (dden != 0)
    return Moves(dnum=dnum[moving], dden=dden[moving], counts=cnt[moving], static=int(cnt[~moving].sum()),
                 num_a=float(a.counts @ a.num), den_a=float(a.counts @ a.den), num_b=float(b.counts @ b.num),
                 den_b=float(b.counts @ b.den))


def permuted_deltas(mv: Moves, swapped: np.ndarray) -> np.ndarray:
    """``stat_a - stat_b`` after swapping ``swapped[p, j]`` items of each moving category j (rows = permutations)."""
    s = np.asarray(swapped, dtype=np.float64)
    moved_num, moved_den = s @ mv.dnum, s @ mv.dden
    return ratio(mv.num_a + moved_num, mv.den_a + moved_den) - ratio(mv.num_b - moved_num, mv.den_b - moved_den)


def permutation_deltas(mv: Moves, n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    """``n_permutations`` random sign-flip permutations: per moving category, ``Binomial(n_c, 1/2)``
    swapped items; returns the permuted differences ``stat_a - stat_b``."""
    swapped = rng.binomial(np.broadcast_to(mv.counts, (n_permutations, mv.counts.size)), 0.5)
    return permuted_deltas(mv, swapped)


def enumerated_deltas(mv: Moves) -> np.ndarray:
    """The permuted differences of all ``2**n`` swap patterns, as a multiset (each difference repeated
    as many times as patterns give it): the exact permutation distribution, for ``2**n`` small."""
    support = list(itertools.product(*(range(int(c) + 1) for c in mv.counts)))
    ways = np.array([math.prod(math.comb(int(c), s) for c, s in zip(mv.counts, row, strict=True)) for row in support],
                    dtype=np.int64) << mv.static
    deltas = permuted_deltas(mv, np.array(support, dtype=np.int64).reshape(len(support), mv.counts.size))
    return np.repeat(deltas, ways)


# --------------------------------------------------------------------------------------------
# exact laws (rational), as the samplers factor them


def _exact(x: float) -> Fraction:
    return Fraction(float(x))


def _value(num: Fraction, den: Fraction) -> Fraction | None:
    return num / den if den != 0 else None


def _compositions(n: int, k: int) -> Iterator[tuple[int, ...]]:
    """Every ``(c_1, ..., c_k)`` of non-negative integers summing to ``n``."""
    if k == 1:
        yield (n,)
        return
    for first in range(n + 1):
        for rest in _compositions(n - first, k - 1):
            yield (first, *rest)


def _binomial_pmf(trials: int, p: Fraction, x: int) -> Fraction:
    return math.comb(trials, x) * p**x * (1 - p) ** (trials - x)


def _integers(values: np.ndarray) -> tuple[list[int], int]:
    """Float values as exact integer multiples of ``1 / scale`` (a power of two): (integers, scale)."""
    exact = [_exact(v) for v in values]
    scale = max((f.denominator for f in exact), default=1)
    return [int(f * scale) for f in exact], scale


def bootstrap_law(cr: Credits) -> dict[Fraction | None, Fraction]:
    """The exact distribution of the bootstrap statistic drawn by :func:`bootstrap_sums`: value
    (an exact rational of the credits' float values; None = undefined) -> probability, with each
    composition's probability the product of :func:`multinomial_counts`' conditional binomials
    ``C(left, c) n_j^c (rest - n_j)^(left - c) / rest^left`` (integer arithmetic, one fraction at the
    end). Enumerates every composition of n into K parts: for tiny inputs only."""
    n, counts = cr.n, [int(c) for c in cr.counts]
    (nums, sn), (dens, sd) = _integers(cr.num), _integers(cr.den)
    law: dict[Fraction | None, Fraction] = {}
    for comp in _compositions(n, cr.k):
        top, bottom, left, rest = 1, 1, n, n
        for j in range(cr.k - 1):
            c = comp[j]
            top *= math.comb(left, c) * counts[j] ** c * (rest - counts[j]) ** (left - c)
            bottom *= rest**left
            left -= c
            rest -= counts[j]
        if top == 0:
            continue
        num = sum(c * v for c, v in zip(comp, nums, strict=True))
        den = sum(c * v for c, v in zip(comp, dens, strict=True))
        key = Fraction(num * sd, den * sn) if den else None
        law[key] = law.get(key, Fraction(0)) + Fraction(top, bottom)
    return law


def permutation_law(a: Credits, b: Credits) -> dict[Fraction | None, Fraction]:
    """The exact distribution of ``stat_a - stat_b`` under the sign-flip permutations drawn by
    :func:`permutation_deltas`: difference (exact rational of the credits' float values; None =
    undefined) -> probability, the product over the joint categories whose sides differ of
    ``Binomial(n_c, 1/2)`` swapped items. For tiny inputs only."""
    ka, kb, cnt = joint_counts(a, b)
    fa = [(_exact(a.num[i]), _exact(a.den[i])) for i in ka]
    fb = [(_exact(b.num[i]), _exact(b.den[i])) for i in kb]
    na = sum((int(c) * x[0] for c, x in zip(cnt, fa, strict=True)), Fraction(0))
    da = sum((int(c) * x[1] for c, x in zip(cnt, fa, strict=True)), Fraction(0))
    nb = sum((int(c) * x[0] for c, x in zip(cnt, fb, strict=True)), Fraction(0))
    db = sum((int(c) * x[1] for c, x in zip(cnt, fb, strict=True)), Fraction(0))
    moving = [(int(c), y[0] - x[0], y[1] - x[1]) for c, x, y in zip(cnt, fa, fb, strict=True) if x != y]
    # the moved sums' law: a convolution of one Binomial(n_c, 1/2) per moving category
    moved: dict[tuple[Fraction, Fraction], Fraction] = {(Fraction(0), Fraction(0)): Fraction(1)}
    for c, dn, dd in moving:
        step: dict[tuple[Fraction, Fraction], Fraction] = {}
        for (mn, md), p in moved.items():
            for sw in range(c + 1):
                sums = (mn + sw * dn, md + sw * dd)
                step[sums] = step.get(sums, Fraction(0)) + p * _binomial_pmf(c, Fraction(1, 2), sw)
        moved = step
    law: dict[Fraction | None, Fraction] = {}
    for (mn, md), p in moved.items():
        va, vb = _value(na + mn, da + md), _value(nb - mn, db - md)
        key = None if va is None or vb is None else va - vb
        law[key] = law.get(key, Fraction(0)) + p
    return law


__all__ = [
    "MAX_CATEGORIES",
    "Credits",
    "JointCounts",
    "Moves",
    "bootstrap_law",
    "bootstrap_sums",
    "credits",
    "enumerated_deltas",
    "joint_counts",
    "multinomial_counts",
    "paired_bootstrap_sums",
    "permutation_deltas",
    "permutation_law",
    "permutation_moves",
    "permuted_deltas",
    "ratio",
]
