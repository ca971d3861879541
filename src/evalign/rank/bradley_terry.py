"""Bradley-Terry strengths from battles, with bootstrap intervals and significance clusters.

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from threadpoolctl import ThreadpoolController

from evalign.errors import InputError
from evalign.meta.clusters import significance_clusters
from evalign.rank.battles import A_WINS, B_WINS, SWAP_CODE, TIE, BattleArrays, as_battle_arrays
from evalign.rank.bootstrap import bootstrap
from evalign.rank.win_rates import score_matrix


@dataclass(frozen=True)
class BTSettings:
    """Settings of :func:`bradley_terry` (arena-hard-auto's defaults).

    Attributes:
        scale, base, init_rating: the Elo-like scale, ``R = scale / ln(base) * theta + init_rating``.
        anchor: system whose rating is set to ``anchor_rating`` (full fit and every resample);
            None: the mean rating is ``init_rating``.
        anchor_rating: the anchor's rating.
        n_bootstrap: bootstrap resamples (0: no intervals, no clusters).
        cluster: resample items (``id``) instead of battles.
        confidence: central interval level (0.95 -> 2.5th and 97.5th percentiles).
        seed: seed of ``numpy.random.default_rng`` (None: fresh entropy).
        clusters: ``"paired"``: mt-metrics-eval's AssignRanks rule (as the trust table) on two-sided
            paired bootstrap p-values of the rating differences; ``"overlap"``: intervals. See
            :func:`bradley_terry`.
        alpha: significance level of the paired rule.
        tol, max_iter: Newton convergence (max absolute step in ``theta``) and iteration cap. A
            resample whose maximum does not exist (a system that won or lost all its resampled
            battles) moves its ratings out by at most ``2 * scale / ln(base)`` per iteration until the
            cap, like arena-hard's lbfgs stopping far out; such resamples are counted in
            ``BTResult.n_nonconverged`` and the leaderboard notes them.
    """

    scale: float = 400.0
    base: float = 10.0
    init_rating: float = 1000.0
    anchor: str | None = None
    anchor_rating: float = 1000.0
    n_bootstrap: int = 1000
    cluster: bool = False
    confidence: float = 0.95
    seed: int | None = 0
    clusters: Literal["paired", "overlap"] = "paired"
    alpha: float = 0.05
    tol: float = 1e-10
    max_iter: int = 50

    def __post_init__(self) -> None:
        if self.n_bootstrap < 0:
            raise InputError("n_bootstrap must be >= 0", field="n_bootstrap")
        if not 0 < self.confidence < 1:
            raise InputError("confidence must be in (0, 1)", field="confidence")
        if self.clusters not in ("paired", "overlap"):
            raise InputError(f"unknown clusters rule {self.clusters!r}; choose paired or overlap", field="clusters")


@dataclass(frozen=True)
class BTResult:
    """Bradley-Terry ratings on the Elo-like scale (see :class:`BTSettings`).

    Attributes:
        systems: system names (arrays below are aligned with them).
        rating: full-data maximum-likelihood ratings (NaN for a system without resolved battles).
        ci_low, ci_high: percentile bootstrap interval (NaN without bootstrap).
        rank: 1 = best (by rating; ties share the smaller rank).
        cluster: significance cluster (1 = not distinguishable from the best; 0 without bootstrap).
        boot: ``(n_bootstrap, k)`` resampled ratings.
        converged: whether the full-data fit converged to a finite maximum (it does not exist when a
            system won or lost every battle, or the comparison graph is not connected).
        n_nonconverged: resamples whose fit hit ``max_iter``.
        settings: the settings used.
    """

    systems: tuple[str, ...]
    rating: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rank: np.ndarray
    cluster: np.ndarray
    boot: np.ndarray = field(repr=False)
    converged: bool
    n_nonconverged: int
    settings: BTSettings

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({
            "system": self.systems, "rank": self.rank, "cluster": self.cluster, "bt_score": self.rating,
            "bt_low": self.ci_low, "bt_high": self.ci_high,
        }).sort_values(["rank", "system"], kind="stable").reset_index(drop=True)


def _bt_newton(
    W: np.ndarray, theta: np.ndarray, tol: float, max_iter: int, precond: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise ``sum_ij W[r,i,j] log sigmoid(theta_i - theta_j)`` for every resample r by Newton's
    method, batched over the leading axis.

    ``W``: ``(R, k, k)`` score matrices; ``theta``: ``(R, k)`` start (warm start). The Hessian is a
    weighted graph Laplacian; its null direction (a common shift) is removed by adding ``11'/k``.
    Without ``precond`` the Newton system is solved directly; with it (the inverse of the full-data
    Hessian at the full-data fit), by preconditioned conjugate gradients with batched matrix-vector
    products, which is much cheaper than a batched factorisation when the resamples' Hessians are close
    to the full-data one (a bootstrap warm-started at the full-data fit). Steps are capped at 2
    (natural-log units) per coordinate so that fits whose maximum is at infinity move out slowly
    instead of overflowing. Returns ``(theta, converged)``, ``theta`` centred (mean 0) per resample.
    """
    # small solves: BLAS threads cost far more than they save
    with one_blas_thread(), np.errstate(over="ignore"):
        return _newton_steps(W, theta, tol, max_iter, precond)


@cache
def _controller() -> ThreadpoolController:
    """The process's thread pools, inspected once (inspecting them costs about 15 ms a time)."""
    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[object]:
    """A context in which BLAS runs on one thread (small solves: on a shared 2-core machine OpenBLAS's
    threads made a 100 x 100 solve ~170 times slower); the thread pools are inspected once per process."""
    return _controller().limit(limits=1, user_api="blas")


def _newton_steps(
    W: np.ndarray, theta: np.ndarray, tol: float, max_iter: int, precond: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The iterations of :func:`_bt_newton`."""
    R, k, _ = W.shape
    N = W + W.transpose(0, 2, 1)
    wins = W.sum(axis=2)
    J = np.full((k, k), 1.0 / k) + 1e-12 * np.eye(k)
    theta = theta - theta.mean(axis=1, keepdims=True)
    active = np.ones(R, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        every = idx.size == R
        th = theta if every else theta[idx]
        p = np.subtract(th[:, None, :], th[:, :, None])  # sigmoid(theta_i - theta_j) = 1 / (1 + exp(theta_j - theta_i)),
        np.exp(p, out=p)  # in place, with numpy's vectorised exp (tanh and expit are several times slower);
        p += 1.0  # an overflow to inf gives p = 0, the limit
        np.reciprocal(p, out=p)
        Nn = N if every else N[idx]
        grad = (wins if every else wins[idx]) - np.einsum("rij,rij->ri", Nn, p)
        h = np.subtract(1.0, p)  # h = N p (1 - p), in place: these arrays are R x k x k
        h *= p
        h *= Nn
        if precond is None or k < _PCG_MIN_K:
            H = -h
            diag = np.einsum("rii->ri", H)
            diag += h.sum(axis=2)
            H += J
            step = np.linalg.solve(H, grad[:, :, None])[:, :, 0]
        else:
            # inexact Newton: a loose solve while far from the optimum, exact to 1e-13 near it
            step = _pcg(h, grad, precond, rtol=float(np.clip(np.abs(grad).max() * 1e-3, 1e-13, 1e-2)))
        big = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, 2.0 / np.maximum(big, 1e-300))[:, None]
        step -= step.mean(axis=1, keepdims=True)
        theta[idx] = th + step
        active[idx[big < tol]] = False
    return theta, ~active


def _pcg(h: np.ndarray, g: np.ndarray, M: np.ndarray, rtol: float = 1e-13) -> np.ndarray:
    """Solve ``(L(h_r) + 11'/k) x_r = g_r`` for every r by conjugate gradients preconditioned with
    ``M`` (``L(h)`` = diag(row sums of h) - h)."""
    k = g.shape[1]
    deg = h.sum(axis=2)

    def matvec(x: np.ndarray) -> np.ndarray:
        return deg * x - np.einsum("rij,rj->ri", h, x) + x.sum(axis=1, keepdims=True) / k

    x = np.zeros_like(g)
    r = g.copy()
    z = np.einsum("ri,ij->rj", r, M)  # no BLAS: threads cost more than they save on small products
    p = z.copy()
    rz = np.einsum("ri,ri->r", r, z)
    stop = rtol * np.maximum(np.linalg.norm(g, axis=1), 1e-300)
    for _ in range(min(4 * k, 200)):
        live = np.linalg.norm(r, axis=1) > stop
        if not live.any():
            break
        Ap = matvec(p)
        pAp = np.einsum("ri,ri->r", p, Ap)
        alpha = np.where(live, rz / np.where(pAp > 0, pAp, 1.0), 0.0)
        x += alpha[:, None] * p
        r -= alpha[:, None] * Ap
        z = np.einsum("ri,ij->rj", r, M)
        rz_new = np.einsum("ri,ri->r", r, z)
        beta = np.where(live, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        p = z + beta[:, None] * p
        rz = rz_new
    return x


def _ratings(theta: np.ndarray, fitted: np.ndarray, anchor: int | None, s: BTSettings) -> np.ndarray:
    """theta (natural-log units, any shift) -> ratings; ``fitted`` masks systems with battles."""
    th = np.where(fitted, theta, np.nan)
    th = th - np.nanmean(th, axis=-1, keepdims=True)
    r = s.scale / math.log(s.base) * th + s.init_rating
    if anchor is not None:
        r = r + (s.anchor_rating - r[..., anchor : anchor + 1])
    return r


#: below this many systems a batched direct solve is cheaper than conjugate gradients
_PCG_MIN_K = 48
_CHUNK = 32  # resamples per batch: bounds memory at about 10 * _CHUNK * k * k floats (32: the batch stays in cache)


def bradley_terry(
    battles: pd.DataFrame | BattleArrays, *, settings: BTSettings = BTSettings(), verdict: str = "verdict"
) -> BTResult:
    """Bradley-Terry ratings from all resolved battles, with bootstrap intervals and clusters.

    Algorithm: the battles are aggregated into the score matrix ``W`` (wins plus half ties per
    ordered pair), and the MLE is found by Newton's method (the log-likelihood is concave; the
    Hessian is a weighted graph Laplacian). This is the same estimate as arena-hard-auto's
    ``LogisticRegression(fit_intercept=False, penalty=None)`` on ``+-ln(base)`` design rows with ties
    duplicated as half wins, without building the design matrix. The bootstrap draws, per resample,
    the multinomial counts of the distinct (system_a, system_b, verdict) cells (the counts a resample
    of battles with replacement gives; with ``cluster=True``, multinomial counts of items, each item
    bringing all its battles), builds the resample's ``W`` and refits by Newton warm-started from the
    full-data fit, batched over resamples. Intervals are percentiles of the resampled ratings.

    Significance clusters (``settings.clusters``):

    * ``"paired"`` (default): for two systems, the two-sided paired bootstrap p-value of their rating
      difference, ``p = min(1, 2 * min(P*(d <= 0), P*(d >= 0)))`` over the resamples; clusters by
      :func:`evalign.meta.clusters.significance_clusters` (mt-metrics-eval AssignRanks, as in the
      trust table): walking down the ratings, a system opens a new cluster when a better system of the
      current cluster is significantly better (``p <= alpha``).
    * ``"overlap"``: walking down the ratings, a system opens a new cluster when its upper bound is
      below the lower bound of the first (best) system of the current cluster; cluster 1 = systems
      whose interval overlaps the best system's.

    Systems without a resolved battle get NaN ratings and the last cluster.
    """

    s = settings
    ba = as_battle_arrays(battles, verdict)
    k = len(ba.systems)
    anchor = ba.index(s.anchor, "anchor") if s.anchor is not None else None
    r = ba.resolved()
    a, b, code = ba.a[r], ba.b[r], ba.code[r]
    if a.size == 0:
        raise InputError("no resolved battle (every verdict is unparseable or missing)", field=verdict)
    W = score_matrix(a, b, code, k)
    fitted = (W + W.T).sum(axis=1) > 0
    if anchor is not None and not fitted[anchor]:
        raise InputError(f"anchor {s.anchor!r} has no resolved battle", field="anchor")
    theta, conv = _bt_newton(W[None], np.zeros((1, k)), s.tol, s.max_iter)
    theta0 = theta[0]
    rating = _ratings(theta0, fitted, anchor, s)
    converged = bool(conv[0]) and _mle_exists(W, fitted)

    boot = np.empty((0, k))
    n_bad = 0
    lo = hi = np.full(k, np.nan)
    if s.n_bootstrap:
        boot, n_bad = _bt_bootstrap(ba, r, k, theta0, fitted, anchor, s)
        q = (1.0 - s.confidence) / 2.0
        with np.errstate(all="ignore"):
            lo, hi = np.nanquantile(boot, [q, 1.0 - q], axis=0)
    order_vals = np.where(np.isfinite(rating), rating, -np.inf)
    rank = np.array([1 + int(np.sum(order_vals > v)) for v in order_vals])
    cluster = np.zeros(k, dtype=np.int64)
    if s.n_bootstrap:
        names = list(ba.systems)
        pos = {n: i for i, n in enumerate(names)}
        if s.clusters == "paired":

            def pval(x: str, y: str) -> float:
                d = boot[:, pos[x]] - boot[:, pos[y]]
                d = d[np.isfinite(d)]
                if d.size == 0:
                    return 1.0
                return float(min(1.0, 2.0 * min(np.mean(d <= 0), np.mean(d >= 0))))

            cl = significance_clusters(({n: float(rating[i]) for i, n in enumerate(names)}, pval), alpha=s.alpha)
            cluster = np.array([cl[n] for n in names], dtype=np.int64)
        else:
            cluster = _overlap_clusters(rating, lo, hi)
    return BTResult(ba.systems, rating, lo, hi, rank, cluster, boot, converged, n_bad, s)


def _mle_exists(W: np.ndarray, fitted: np.ndarray) -> bool:
    """The BT MLE is finite iff the directed "i beat j" graph (score > 0) of the fitted systems is
    strongly connected (Zermelo 1929; Hunter 2004, Assumption 1)."""

    sub = W[np.ix_(fitted, fitted)] > 0
    n_comp, _ = connected_components(sub, directed=True, connection="strong")
    return n_comp == 1


def _overlap_clusters(rating: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    k = rating.size
    order = sorted(range(k), key=lambda i: (0, -rating[i], i) if np.isfinite(rating[i]) else (1, 0.0, i))
    out = np.zeros(k, dtype=np.int64)
    current, head = 1, None
    for i in order:
        if not np.isfinite(rating[i]):
            out[i] = current + (head is not None)
            continue
        if head is not None and hi[i] < lo[head]:
            current, head = current + 1, i
        if head is None:
            head = i
        out[i] = current
    return out


def _bt_bootstrap(
    ba: BattleArrays,
    resolved: np.ndarray,
    k: int,
    theta0: np.ndarray,
    fitted: np.ndarray,
    anchor: int | None,
    s: BTSettings,
) -> tuple[np.ndarray, int]:
    """Resampled ratings ``(n_bootstrap, k)`` and the number of resamples that did not converge."""

    a, b, code = ba.a[resolved], ba.b[resolved], ba.code[resolved].astype(np.int64)
    flip = a > b  # one cell per unordered pair and outcome, seen from the lower index
    a, b, code = np.where(flip, b, a), np.where(flip, a, b), np.where(flip, SWAP_CODE[code], code)
    cell = (a * k + b) * 3 + code  # A_WINS, B_WINS, TIE are 0, 1, 2
    cells, inv = np.unique(cell, return_inverse=True)
    ca, rest = np.divmod(cells, 3 * k)
    cb, cc = np.divmod(rest, 3)
    # sparse map cell counts -> flattened score matrix
    win_a = np.where(cc == A_WINS, 1.0, np.where(cc == TIE, 0.5, 0.0))
    win_b = np.where(cc == B_WINS, 1.0, np.where(cc == TIE, 0.5, 0.0))
    rows = np.concatenate([ca * k + cb, cb * k + ca])
    cols = np.concatenate([np.arange(cells.size)] * 2)
    S = sparse.csr_matrix((np.concatenate([win_a, win_b]), (rows, cols)), shape=(k * k, cells.size))
    if s.cluster:
        if ba.ids is None:
            raise InputError("the clustered bootstrap needs an 'id' column", field="id")
        items, item_of = np.unique(ba.ids[resolved], return_inverse=True)
        M = sparse.csr_matrix(
            (np.ones(inv.size), (item_of, inv)), shape=(items.size, cells.size)
        )  # items x cells counts
        n_units, p_units = items.size, np.full(items.size, 1.0 / items.size)
    else:
        M = None
        n_units = int(a.size)
        p_units = np.bincount(inv, minlength=cells.size) / a.size
    n_bad = 0
    W0 = np.asarray(S @ np.bincount(inv, minlength=cells.size).astype(np.float64)).reshape(k, k)
    d0 = theta0[:, None] - theta0[None, :]
    p0 = 0.5 * (1.0 + np.tanh(0.5 * d0))
    h0 = (W0 + W0.T) * p0 * (1.0 - p0)
    precond = np.linalg.inv(np.diag(h0.sum(axis=1)) - h0 + np.full((k, k), 1.0 / k) + 1e-12 * np.eye(k))

    def fit(draws: np.ndarray) -> np.ndarray:
        """The anchored ratings of a batch of resamples (multinomial counts of the units)."""
        nonlocal n_bad
        R = draws.shape[0]
        counts = draws.astype(np.float64)  # (R, units)
        if M is not None:
            counts = np.asarray((M.T @ counts.T).T)
        Wb = np.asarray((S @ counts.T).T).reshape(R, k, k)
        th, conv = _bt_newton(Wb, np.repeat(theta0[None], R, axis=0), s.tol, s.max_iter, precond)
        n_bad += int((~conv).sum())
        present = (Wb + Wb.transpose(0, 2, 1)).sum(axis=2) > 0
        return _ratings(np.where(present, th, np.nan), fitted, anchor, s)

    out = bootstrap(n_units, fit, s.n_bootstrap, s.seed, p=p_units, draw="counts", chunk=_CHUNK)
    return out, n_bad
