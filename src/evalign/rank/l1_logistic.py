"""The exact L1-penalised logistic regression behind the length-controlled win rate, many fits at once.

alpaca_eval's GLM has three coefficients and picks the L1 strength ``C`` by grouped cross-validation:
5 folds x 10 values of ``C`` = 50 small fits per system, then a refit. Here the fits of every system
run as one batch: a fit is a set of "cells" (its rows, each with the fit's number), sums over a fit's
rows are ``bincount``s over the cells, and each proximal Newton iteration, line search and sign-pattern
solve is done for all the fits still iterating in a few array operations. Each fit follows its own path
as if run alone (started at zero, its own iteration count and line search), so the results are those of
one fit at a time up to the rounding of the sums (about 1e-15).

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

from functools import cache
from itertools import combinations, product

import numpy as np

from evalign.rank.bradley_terry import one_blas_thread

# rows x fits per batch: bounds the (rows, fits) work arrays to a few times 32 MB
_BATCH_CELLS = 1 << 22


def sigmoid(z: np.ndarray) -> np.ndarray:
    """The logistic function, computed without overflow."""
    return np.exp(-np.logaddexp(0.0, -z))


@cache
def _sign_patterns(d: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """The non-zero sign patterns of ``d`` coordinates grouped by support size ``s``: per group the
    supports ``S`` (m, s), the signs on a support (2**s, s) and each (support, signs)'s position in
    ``itertools.product((-1, 0, 1), repeat=d)`` (m, 2**s): the order in which ties are broken."""
    order = {p: i for i, p in enumerate(product((-1.0, 0.0, 1.0), repeat=d))}
    groups = []
    for s in range(1, d + 1):
        supports = list(combinations(range(d), s))
        signs = list(product((-1.0, 1.0), repeat=s))
        pos = np.empty((len(supports), len(signs)), dtype=np.int64)
        for i, sup in enumerate(supports):
            for j, sg in enumerate(signs):
                full = [0.0] * d
                for t, v in zip(sup, sg, strict=True):
                    full[t] = v
                pos[i, j] = order[tuple(full)]
        groups.append((np.array(supports), np.array(signs), pos))
    return tuple(groups)


def _usable(Hs: np.ndarray) -> np.ndarray:
    """Which of a stack of systems the one-at-a-time solver solved: no Hessian diagonal <= 1e-300 (a
    feature zero on every row stays at 0) and not singular to LAPACK (an exact zero pivot in the LU
    factorisation, where ``numpy.linalg.solve`` raises; ``slogdet``'s sign is then 0)."""
    usable = ~np.any(np.diagonal(Hs, axis1=-2, axis2=-1) <= 1e-300, axis=-1)
    sign, _ = np.linalg.slogdet(np.where(usable[..., None, None], Hs, np.eye(Hs.shape[-1])))
    return usable & (sign != 0)


def l1_quadratic(g: np.ndarray, H: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Exact minimisers x of ``g'(x - beta) + (x - beta)'H(x - beta)/2 + ||x||_1``, one per row of
    ``g`` (P, d), ``H`` (P, d, d), ``beta`` (P, d), for a few coordinates d: every sign pattern (-, 0,
    + per coordinate) gives a linear system on its non-zero coordinates; the best sign-consistent
    solution is the minimum (the problem is convex), the first in pattern order on a tie, and x = 0
    when none is better than 0. A coordinate whose Hessian diagonal is 0 (a feature zero on every row)
    stays at 0; a singular system is skipped."""
    P, d = beta.shape
    c = g - np.einsum("pij,pj->pi", H, beta)  # the model is c'x + x'Hx/2 + |x|_1 + const
    xs_all, f_all, pos_all = [], [], []
    for S, signs, pos in _sign_patterns(d):
        m, s = S.shape
        ns = signs.shape[0]
        Hs = H[:, S[:, :, None], S[:, None, :]]  # (P, m, s, s)
        usable = _usable(Hs)  # (P, m)
        Hs = np.where(usable[:, :, None, None], Hs, np.eye(s))  # a skipped system solved as identity
        rhs = -(c[:, S][:, :, :, None] + signs.T[None, None])  # (P, m, s, 2**s): one system, 2**s sign patterns
        xs = np.linalg.solve(Hs, rhs).swapaxes(2, 3)  # (P, m, 2**s, s)
        ok = usable[:, :, None] & np.all(xs * signs > 0, axis=3)
        full = np.zeros((P, m, ns, d))
        full[:, np.arange(m)[:, None, None], np.arange(ns)[None, :, None], S[:, None, :]] = xs
        x = full.reshape(P, m * ns, d)
        f = (x @ c[:, :, None])[..., 0] + 0.5 * np.sum((x @ H) * x, axis=2) + np.abs(x).sum(axis=2)
        xs_all.append(x)
        f_all.append(np.where(ok.reshape(P, -1), f, np.inf))
        pos_all.append(np.broadcast_to(pos.reshape(-1), (P, pos.size)))
    cand, score, pos_ = np.concatenate(xs_all, axis=1), np.concatenate(f_all, axis=1), np.concatenate(pos_all, axis=1)
    best_f = score.min(axis=1, keepdims=True)
    first = np.where(score == best_f, pos_, np.iinfo(np.int64).max).argmin(axis=1)
    out = cand[np.arange(P), first]
    out[best_f[:, 0] >= 0.0] = 0.0  # nothing better than x = 0 (f = 0)
    return out


def _per_fit(fit: np.ndarray, values: np.ndarray, n_fits: int) -> np.ndarray:
    """Sums of ``values`` (cells, k) over each fit's cells: (n_fits, k)."""
    return np.column_stack([np.bincount(fit, values[:, j], n_fits) for j in range(values.shape[1])])


def _objectives(X: np.ndarray, p: np.ndarray, w: np.ndarray, fit: np.ndarray, C: np.ndarray,
                B: np.ndarray) -> np.ndarray:
    """``||beta||_1 + C * sum_r w_r * CE(p_r, sigmoid(X_r beta))`` of each fit (cells' rows X, labels p,
    weights w, fit numbers ``fit`` into ``C`` and the rows of ``B``)."""
    z = np.einsum("ri,ri->r", X, B[fit])
    ce = p * np.logaddexp(0.0, -z) + (1 - p) * np.logaddexp(0.0, z)
    return np.abs(B).sum(axis=1) + C * np.bincount(fit, w * ce, C.size)


def l1_logistic(X: np.ndarray, p: np.ndarray, w: np.ndarray, fit: np.ndarray, C: np.ndarray,
                tol: float) -> np.ndarray:
    """Exact minimisers of ``||beta||_1 + C_j * sum_{r in fit j} w_r * CE(p_r, sigmoid(X_r beta))``, one
    per fit j: liblinear's L1 logistic objective on alpaca_eval's rows with soft labels. Cells: rows
    ``X`` (N, d), soft labels ``p`` in [0, 1], weights ``w`` >= 0, and the fit ``fit`` (N,) in
    ``range(len(C))`` that each belongs to. Each fit: proximal Newton from zero with an exact
    sign-pattern inner solve (:func:`l1_quadratic`), a backtracking line search (Armijo 0.01, halving
    down to 1e-10), stopping when the largest absolute Newton step is below ``tol`` or after 200
    iterations. Returns the coefficients, (len(C), d). Run it under
    :func:`evalign.rank.bradley_terry.one_blas_thread` (its solves are tiny)."""
    C = np.asarray(C, dtype=np.float64)
    d, P = X.shape[1], C.size
    beta = np.zeros((P, d))
    f = _objectives(X, p, w, fit, C, beta)
    idx = np.arange(P)  # the fits still iterating; their cells, numbered among them:
    Xc, pc, wc, fc_ = X, p, w, fit
    for _ in range(200):
        b, cc = beta[idx], C[idx]
        q = sigmoid(np.einsum("ri,ri->r", Xc, b[fc_]))
        g = cc[:, None] * _per_fit(fc_, Xc * (wc * (q - pc))[:, None], idx.size)
        v = wc * q * (1 - q)
        H = cc[:, None, None] * _per_fit(fc_, (Xc[:, :, None] * Xc[:, None, :]).reshape(-1, d * d) * v[:, None],
                                         idx.size).reshape(-1, d, d)
        new = l1_quadratic(g, H, b)
        step = new - b
        moving = np.max(np.abs(step), axis=1) >= tol
        if not moving.any():
            break
        if not moving.all():
            idx, b, step, new, g, cc = idx[moving], b[moving], step[moving], new[moving], g[moving], cc[moving]
            keep = moving[fc_]
            Xc, pc, wc, fc_ = Xc[keep], pc[keep], wc[keep], (np.cumsum(moving) - 1)[fc_[keep]]
        f0 = f[idx]
        delta = np.einsum("li,li->l", g, step) + np.abs(new).sum(axis=1) - np.abs(b).sum(axis=1)
        t = np.ones(idx.size)
        cand, fc = b.copy(), f0.copy()
        searching = np.ones(idx.size, dtype=bool)
        sx, sp, sw, sf = Xc, pc, wc, fc_  # the cells of the fits still searching
        while searching.any():
            who = np.flatnonzero(searching)
            cand[who] = b[who] + t[who, None] * step[who]
            fc[who] = _objectives(sx, sp, sw, (np.cumsum(searching) - 1)[sf], cc[who], cand[who])
            ok = (fc <= f0 + 0.01 * t * delta) | (np.abs(fc - f0) < 1e-15 * np.maximum(1.0, np.abs(f0)))
            t[searching & ~ok] *= 0.5
            still = searching & ~ok & (t > 1e-10)  # as one fit alone: the last candidate tried is taken
            if still.any() and not still[searching].all():
                sub = still[sf]
                sx, sp, sw, sf = sx[sub], sp[sub], sw[sub], sf[sub]
            searching = still
        beta[idx], f[idx] = cand, fc
    return beta


def _fits_on_ranges(
    X: np.ndarray, p: np.ndarray, w: np.ndarray, fold: np.ndarray, start: np.ndarray, length: np.ndarray,
    left_out: np.ndarray, C: np.ndarray, tol: float,
) -> np.ndarray:
    """:func:`l1_logistic` for fits j on the rows ``start[j] : start[j] + length[j]`` whose ``fold`` is not
    ``left_out[j]`` (-1: all of them), in batches of at most a few million cells."""
    out = np.zeros((C.size, X.shape[1]))
    ends = np.cumsum(length)
    s = 0
    while s < C.size:
        lo = ends[s - 1] if s else 0
        e = max(s + 1, int(np.searchsorted(ends, lo + _BATCH_CELLS, side="right")))
        counts = length[s:e]
        fit = np.repeat(np.arange(e - s), counts)
        row = np.repeat(start[s:e], counts) + np.arange(fit.size) - np.repeat(np.cumsum(counts) - counts, counts)
        keep = fold[row] != left_out[s:e][fit]
        row, fit = row[keep], fit[keep]
        out[s:e] = l1_logistic(X[row], p[row], w[row], fit, C[s:e], tol)
        s = e
    return out


def glm_fits_cv(
    data: list[tuple[np.ndarray, np.ndarray, np.ndarray]], cs: tuple[float, ...], n_splits: int, tol: float
) -> list[tuple[np.ndarray, float]]:
    """alpaca_eval's ``fit_LogisticRegressionCV(is_ytrue_proba=True)`` for each data set ``(X, p, w)``
    in ``data`` (features (n, d), soft labels and row weights (n,), n >= n_splits): ``C`` chosen on
    ``cs`` by ``GroupKFold(n_splits)`` (scikit-learn's deterministic assignment of equal-size groups:
    row g of n goes to fold ``(n - 1 - g) % n_splits``) scored by the weighted mean soft-label log loss
    with predictions clipped to [1e-15, 1 - 1e-15], the first best ``C`` (sum of fold scores), then a
    refit on all rows with that ``C``. Returns, per data set, the coefficients (d,) and the chosen ``C``.
    All data sets' fits run in one batch (:func:`l1_logistic`)."""
    if not data:
        return []
    nc, J = len(cs), len(data)
    sizes = np.array([x.shape[0] for x, _, _ in data])
    X = np.concatenate([x for x, _, _ in data])
    p = np.concatenate([y for _, y, _ in data])
    w = np.concatenate([v for _, _, v in data])
    ds = np.repeat(np.arange(J), sizes)
    row = np.arange(X.shape[0]) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # row number in its data set
    fold = (sizes[ds] - 1 - row) % n_splits
    start = np.cumsum(sizes) - sizes
    grid = np.asarray(cs, dtype=np.float64)
    # fit (data set j, fold f, C) trains on j's rows outside fold f
    f_ds = np.repeat(np.arange(J), n_splits * nc)
    f_fold = np.tile(np.repeat(np.arange(n_splits), nc), J)
    with one_blas_thread():
        betas = _fits_on_ranges(X, p, w, fold, start[f_ds], sizes[f_ds], f_fold, np.tile(grid, J * n_splits), tol)
    betas = betas.reshape(J, n_splits, nc, -1)
    # each row scores the fits of its own fold (its test fold), every C
    q = np.clip(sigmoid(np.einsum("ri,rci->rc", X, betas[ds, fold])), 1e-15, 1 - 1e-15)
    loss = w[:, None] * (p[:, None] * np.log(q) + (1 - p[:, None]) * np.log(1 - q))  # (n, nc)
    cell = ds * n_splits + fold
    sums = _per_fit(cell, loss, J * n_splits).reshape(J, n_splits, nc)
    means = sums / np.bincount(cell, minlength=J * n_splits).reshape(J, n_splits, 1)
    scores = np.zeros((J, nc))
    for f in range(n_splits):  # the folds' scores added in order, as one at a time
        scores += means[:, f]
    best = grid[np.argmax(scores, axis=1)]
    with one_blas_thread():
        final = _fits_on_ranges(X, p, w, fold, start, sizes, np.full(J, -1), best, tol)
    return [(final[j], float(best[j])) for j in range(J)]
