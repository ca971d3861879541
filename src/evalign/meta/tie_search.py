"""Exact tie calibration without visiting every pair (for groups of tens of thousands of items).

The accuracy of tie calibration (Deutsch et al., 2023) at an epsilon ``t`` is a sum over the pairs
with ``|m_i - m_j| <= t``: +1 for a human tie, -1 for a concordant pair (it stops being counted as
correct), plus the weight of all concordant pairs. Those three counts at one ``t`` need no pair loop:

* pairs with ``d <= t``: for every item, the first item of its group (sorted by metric) whose float
  difference exceeds ``t`` (one ``searchsorted`` plus an exact correction on the float difference);
* human ties with ``d <= t``: the same inside each run of equal human scores;
* concordant pairs with ``0 < d <= t``: for every item, the items in a range of positions with a
  higher human score, counted by a wavelet matrix over the human ranks (``O(log H)`` per item).

So the accuracy at any ``t`` costs ``O(n log n)``. The best epsilon is then found by branch and bound
over intervals of epsilon (bisected in the float64 bit order): an interval ``(a, b]`` cannot beat
``min(acc(a) + human ties in it, acc(b) + concordant pairs in it)``; intervals that cannot reach the best
value found are dropped, and the pairs of the few that are left are enumerated and swept exactly. The
result (epsilon, accuracy, tie counts) is identical to sweeping every pair: the same float
differences, the same integer counts; only the listed curve points differ (they are the evaluated
epsilons and the enumerated candidates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: elements per evaluation chunk (thresholds x items)
_CHUNK = 2_000_000
#: intervals with at most this many pairs are no longer bisected but enumerated
LEAF_PAIRS = 20_000
#: enumerate everything that is left once the remaining intervals hold at most this many pairs
ENUM_PAIRS = 1_000_000

_HTIE, _CONC = 1, 2


@dataclass(frozen=True)
class SearchCurve:
    """Exact points of the accuracy-vs-epsilon curve found by :func:`search_curve`.

    Attributes:
        epsilons: increasing epsilons (0 first); values: accuracy units (weighted correct pairs) at
            each; ties: metric ties (pairs with difference <= epsilon) at each; n_human_ties: pairs
            with equal human scores.
    """

    epsilons: np.ndarray
    values: np.ndarray
    ties: np.ndarray
    n_human_ties: int


class _Wavelet:
    """Wavelet matrix over small non-negative integers: counts of values > v in position ranges."""

    def __init__(self, values: np.ndarray) -> None:
        top = int(values.max()) if values.size else 0
        self.levels = max(1, top.bit_length())
        self.ones: list[np.ndarray] = []
        self.zeros: list[int] = []
        cur = values.astype(np.int64)
        for lev in range(self.levels):
            bit = (cur >> (self.levels - 1 - lev)) & 1
            self.ones.append(np.r_[0, np.cumsum(bit)].astype(np.int64))
            self.zeros.append(int(cur.size - bit.sum()))
            cur = np.concatenate([cur[bit == 0], cur[bit == 1]])

    def count_greater(self, s: np.ndarray, e: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Per query, the number of positions in ``[s, e)`` holding a value > ``v``."""
        s, e = s.astype(np.int64), e.astype(np.int64)
        out = np.zeros(s.shape, dtype=np.int64)
        for lev in range(self.levels):
            ones = self.ones[lev]
            os_, oe = ones[s], ones[e]
            bit = ((v >> (self.levels - 1 - lev)) & 1).astype(bool)
            zero = ~bit
            out[zero] += (oe - os_)[zero]
            s = np.where(bit, self.zeros[lev] + os_, s - os_)
            e = np.where(bit, self.zeros[lev] + oe, e - oe)
        return out


@dataclass
class _View:
    """Items in one order (group-major, metric ascending inside every run of equal ``run`` keys)."""

    m: np.ndarray  # metric at each position
    key: np.ndarray  # increasing int64 key: run * (D + 1) + metric rank
    run_base: np.ndarray  # run * (D + 1) at each position
    run_end: np.ndarray  # first position after the run of each position

    def first_above(self, pos: np.ndarray, t: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """For each (position, threshold): the first position of the run whose float difference to the
        item at ``pos`` exceeds ``t`` (the predicate ``m[q] - m[pos] <= t`` is monotone in ``q``)."""
        mi = self.m[pos]
        cnt = np.searchsorted(vals, mi + t, side="right")
        p = np.searchsorted(self.key, self.run_base[pos] + cnt, side="left")
        end = self.run_end[pos]
        last = self.m.size - 1
        while True:
            right = (p < end) & ((self.m[np.minimum(p, last)] - mi) <= t)
            left = (p > pos + 1) & ((self.m[np.maximum(p - 1, 0)] - mi) > t)
            if not (right.any() or left.any()):
                return p
            if right.any():
                p[right] = np.searchsorted(self.key, self.key[p[right]] + 1, side="left")
            if left.any():
                p[left] = np.searchsorted(self.key, self.key[p[left] - 1], side="left")


class _Layout:
    """Both orders of the items, their ranks and the wavelet matrix for the concordant counts."""

    def __init__(self, human: np.ndarray, metric: np.ndarray, sizes: np.ndarray, weights: np.ndarray) -> None:
        g = len(sizes)
        self.starts = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        mask = np.arange(metric.shape[1])[None, :] < sizes[:, None]
        self.m = metric[mask]
        h = human[mask]
        gid = np.repeat(np.arange(g, dtype=np.int64), sizes)
        self.gid = gid
        self.weights = weights
        self.vals = np.unique(self.m)
        span = np.int64(self.vals.size + 1)
        mrank = np.searchsorted(self.vals, self.m)
        hvals = np.unique(h)
        hrank = np.searchsorted(hvals, h).astype(np.int64)
        self.hrank = hrank
        key1 = gid * span + mrank
        self.v1 = _View(self.m, key1, gid * span, self.starts[1:][gid])
        run = np.unique(gid * np.int64(hvals.size) + hrank, return_inverse=True)[1].astype(np.int64)  # keys < n^2
        order2 = np.lexsort((mrank, run))
        key2 = run[order2] * span + mrank[order2]
        base2 = run[order2] * span
        run_end2 = np.searchsorted(key2, base2 + span, side="left")
        self.v2 = _View(self.m[order2], key2, base2, run_end2)
        self.z = np.searchsorted(key1, key1 + 1, side="left")  # end of each item's equal-metric run
        self.wavelet = _Wavelet(hrank)
        self.n = self.m.size

    def counts(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per threshold and group: pairs with d <= t, human ties among them, concordant among them."""
        k, n, g = ts.size, self.n, len(self.starts) - 1
        tt, hh, cc = (np.zeros((k, g), dtype=np.int64) for _ in range(3))
        step = max(1, _CHUNK // max(n, 1))
        pos = np.arange(n, dtype=np.int64)
        seg = self.starts[:-1]
        for a in range(0, k, step):
            t = ts[a : a + step]
            kk = t.size
            P = np.tile(pos, kk)
            T = np.repeat(t, n)
            p1 = self.v1.first_above(P, T, self.vals)
            q2 = self.v2.first_above(P, T, self.vals)
            conc = self.wavelet.count_greater(np.tile(self.z, kk), p1, np.tile(self.hrank, kk))
            tt[a : a + kk] = np.add.reduceat((p1 - P - 1).reshape(kk, n), seg, axis=1)
            hh[a : a + kk] = np.add.reduceat((q2 - P - 1).reshape(kk, n), seg, axis=1)
            cc[a : a + kk] = np.add.reduceat(conc.reshape(kk, n), seg, axis=1)
        return tt, hh, cc

    def sample_differences(self, lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One pair difference drawn uniformly from the pairs with ``lo_k < d <= hi_k``, per interval."""
        pos = np.arange(self.n, dtype=np.int64)
        out = np.empty(lo.size)
        for k, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            pa = self.v1.first_above(pos, np.full(self.n, a), self.vals)
            pb = self.v1.first_above(pos, np.full(self.n, b), self.vals)
            cum = np.cumsum(pb - pa)
            r = int(rng.integers(int(cum[-1])))
            i = int(np.searchsorted(cum, r, side="right"))
            j = int(pa[i] + r - (cum[i] - (pb[i] - pa[i])))
            out[k] = (self.m[j] - self.m[i]) + 0.0
        return out

    def enumerate_pairs(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(d, code, pair weight) of every pair with ``lo_k < d <= hi_k`` for the intervals k."""
        pos = np.arange(self.n, dtype=np.int64)
        ds, codes, ws = [], [], []
        for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
            pa = self.v1.first_above(pos, np.full(self.n, a), self.vals)
            pb = self.v1.first_above(pos, np.full(self.n, b), self.vals)
            c = pb - pa
            i = np.repeat(pos, c)
            j = pa[i] + (np.arange(i.size) - np.repeat(np.cumsum(c) - c, c))
            d = self.m[j] - self.m[i]
            d += 0.0
            hi_, hj = self.hrank[i], self.hrank[j]
            code = np.where(hi_ == hj, _HTIE, np.where((hj > hi_) & (d > 0), _CONC, 0)).astype(np.int8)
            ds.append(d)
            codes.append(code)
            ws.append(self.weights[self.gid[i]])
        if not ds:
            return np.empty(0), np.empty(0, dtype=np.int8), np.empty(0)
        return np.concatenate(ds), np.concatenate(codes), np.concatenate(ws)


def _prev_float(x: float) -> float:
    return float(np.nextafter(x, 0.0)) if x > 0 else 0.0


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).view(np.int64)


class _Points:
    """Evaluated epsilons with exact values, tie counts and weighted human-tie / concordant sums."""

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout
        self.t = np.empty(0)
        self.val = np.empty(0)
        self.ties = np.empty(0, dtype=np.int64)
        self.htw = np.empty(0)
        self.cw = np.empty(0)
        self.base = 0.0

    def add(self, ts: np.ndarray) -> None:
        tt, hh, cc = self.layout.counts(ts)
        w = self.layout.weights
        htw, cw = hh.astype(np.float64) @ w, cc.astype(np.float64) @ w
        self.t = np.r_[self.t, ts]
        self.ties = np.r_[self.ties, tt.sum(axis=1)]
        self.htw = np.r_[self.htw, htw]
        self.cw = np.r_[self.cw, cw]
        self.val = np.r_[self.val, self.base + htw - cw]

    def sorted(self) -> None:
        o = np.argsort(self.t, kind="stable")
        self.t, self.val, self.ties, self.htw, self.cw = (x[o] for x in (self.t, self.val, self.ties, self.htw, self.cw))


def _bound(pts: _Points, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """Upper bound of the accuracy units inside the intervals (t[ia], t[ib]]."""
    from_left = pts.val[ia] + (pts.htw[ib] - pts.htw[ia])
    from_right = pts.val[ib] + (pts.cw[ib] - pts.cw[ia])
    return np.minimum(from_left, from_right)


def _survivors(pts: _Points, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals between neighbouring evaluated points that may hold the smallest best epsilon."""
    pts.sorted()
    ia = np.arange(pts.t.size - 1)
    ib = ia + 1
    best = pts.val.max()
    leftmost = pts.t[np.flatnonzero(pts.val >= best - tol)[0]]
    ub = _bound(pts, ia, ib)
    pairs = pts.ties[ib] - pts.ties[ia]
    wide = (_bits(pts.t[ib]) - _bits(pts.t[ia])) > 1
    keep = (pairs > 0) & wide & (ub >= best - tol) & ~((pts.t[ia] >= leftmost) & (ub <= best + tol))
    return ia[keep], ib[keep]


def search_curve(
    human: np.ndarray, metric: np.ndarray, sizes: np.ndarray, weights: np.ndarray, tol: float
) -> SearchCurve:
    """Exact tie-calibration curve points for groups given as rows sorted by metric (NaN padded).

    Args:
        human, metric: ``(G, width)`` rows, the first ``sizes[g]`` values of row g present and the
            row sorted by metric; weights: accuracy units of one pair of each group; tol: tolerance when
            the weights are not integers (0 when they are: all comparisons exact).

    Returns:
        :class:`SearchCurve` whose points include 0 and the smallest epsilon with the highest value.
    """
    layout = _Layout(human, metric, sizes, weights)
    pts = _Points(layout)
    m, st = layout.m, layout.starts
    dmax = float(np.max(m[st[1:] - 1] - m[st[:-1]]))
    gaps = np.diff(m)
    same = np.diff(layout.gid) == 0
    pos_gaps = gaps[same & (gaps > 0)]
    first = [0.0]
    if pos_gaps.size:
        first += [_prev_float(float(pos_gaps.min())), dmax]
    pts.add(np.array([dmax]))
    pts.base = float(pts.cw[0])  # all concordant pairs
    n_ht = int(layout.counts(np.array([dmax]))[1].sum())
    pts.t, pts.val, pts.ties, pts.htw, pts.cw = (np.empty(0), np.empty(0), np.empty(0, dtype=np.int64),
                                                np.empty(0), np.empty(0))
    pts.add(np.unique(np.array(first)))
    rng = np.random.default_rng(0)  # only picks split points: the result does not depend on it
    while True:
        ia, ib = _survivors(pts, tol)
        pairs = pts.ties[ib] - pts.ties[ia]
        if pairs.sum() <= ENUM_PAIRS:
            break
        split = pairs > LEAF_PAIRS
        if not split.any():  # many small intervals: keep splitting them all (bounded enumeration)
            split = pairs > 0
        # split at a random pair difference d of the interval and just below it: (prev(d), d] holds
        # one float value, so clusters of equal or nearly equal differences are resolved at once
        d = layout.sample_differences(pts.t[ia[split]], pts.t[ib[split]], rng)
        new = np.unique(np.r_[d, np.nextafter(d, 0.0)])
        pts.add(new[~np.isin(new, pts.t)])
    return _sweep(pts, layout, ia, ib, n_ht)


def _sweep(pts: _Points, layout: _Layout, ia: np.ndarray, ib: np.ndarray, n_ht: int) -> SearchCurve:
    """Enumerate the pairs of the surviving intervals and add every candidate inside them."""
    eps_parts, val_parts, tie_parts = [pts.t], [pts.val], [pts.ties]
    if ia.size:
        d, code, w = layout.enumerate_pairs(pts.t[ia], pts.t[ib])
        # intervals are disjoint: one sort by d keeps each interval's pairs together, in order
        order = np.argsort(d, kind="stable")
        d, code, w = d[order], code[order], w[order]
        k = np.searchsorted(pts.t[ib], d, side="left")  # interval of each pair
        contrib = np.where(code == _HTIE, w, np.where(code == _CONC, -w, 0.0))
        cum = np.cumsum(contrib)
        first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        lens = np.diff(np.r_[first, d.size])
        start_cum = np.repeat(cum[first] - contrib[first], lens)
        start_pos = np.repeat(first, lens)
        last = np.flatnonzero(np.r_[d[1:] != d[:-1], True])
        eps_parts.append(d[last])
        val_parts.append(pts.val[ia[k[last]]] + cum[last] - start_cum[last])
        tie_parts.append(pts.ties[ia[k[last]]] + (last + 1 - start_pos[last]))
    eps = np.concatenate(eps_parts)
    val = np.concatenate(val_parts)
    ties = np.concatenate(tie_parts)
    order = np.argsort(eps, kind="stable")
    eps, val, ties = eps[order], val[order], ties[order]
    keep = np.r_[True, eps[1:] != eps[:-1]]
    return SearchCurve(eps[keep], val[keep], ties[keep], n_ht)


def counts_at(
    human: np.ndarray, metric: np.ndarray, sizes: np.ndarray, epsilon: float
) -> tuple[np.ndarray, int, int]:
    """Correct pairs per group at ``epsilon``, metric ties and human ties over all pairs (no pair loop)."""
    layout = _Layout(human, metric, sizes, np.ones(len(sizes)))
    m, st = layout.m, layout.starts
    dmax = float(np.max(m[st[1:] - 1] - m[st[:-1]]))
    tt, hh, cc = layout.counts(np.array([float(epsilon), max(dmax, float(epsilon))]))
    correct = hh[0] + (cc[1] - cc[0])
    return correct, int(tt[0].sum()), int(hh[1].sum())
