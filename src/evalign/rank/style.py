"""Style control: Bradley-Terry with the responses' length and markdown (headers, lists, bold) as
covariates, so that a system's rating no longer carries what its style alone wins (arrays in, a frozen
result out, no I/O).

The features and their scaling are arena-hard-auto's (``utils/add_markdown_info.py`` and
``show_result.py``'s ``print_leaderboard_with_style_features``; its issue #51), generalised from
"each system against the baseline" to any battles:

* per response, with fenced code blocks removed first: its length, the number of markdown headers
  (``^#{1,6}\\s``), list items (``^\\s*\\d+\\.\\s`` and ``^\\s*[-*+]\\s``) and bold spans
  (``\\*\\*[^*\\n]+\\*\\*`` and ``__[^_\\n]+__``). arena-hard counts the length in tiktoken tokens; evalign
  counts whitespace-separated words (``length_unit="words"``, no tokenizer download) or characters;
* per battle: the length feature ``(len_A - len_B) / (len_A + len_B)`` and, per markdown element with
  density ``d = count / length``, ``(d_A - d_B) / (d_A + d_B + 1)``;
* each feature standardised over the battles (mean 0, sample standard deviation 1; a constant feature
  is left at 0 and named in ``constant``).

The model: ``logit P(A beats B) = theta_A - theta_B + gamma . z`` (ties half a win, no intercept, no
penalty), fitted by Newton's method; ratings on the Elo-like scale of :mod:`evalign.rank.bradley_terry`
(``R = scale / ln(base) * theta``, the anchor at ``anchor_rating`` or the mean at ``init_rating``), with
Wald intervals from the inverse Hessian, or, with ``n_bootstrap`` resamples, percentile intervals of battle
resamples (:func:`style_bootstrap`). The same fit without ``z`` gives the plain ratings; a system's
``style_effect`` is its plain rating minus its style-controlled one: the part of its rating its style wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evalign.rank.battles import BattleArrays
from evalign.rank.bradley_terry import BTSettings, one_blas_thread
from evalign.rank.ppi import z_value
from evalign.rank.ppi_board import scores

#: the style features, in the order of the covariates
FEATURES = ("length", "headers", "lists", "bold")
_CODE = re.compile(r"```[^`]*```")
# every pattern linear in the text: the indentation before a list marker is ``[^\S\n]*`` (white space on
# the same line), not ``\s*``, which on a run of blank lines backtracks from every line start (quadratic)
_PATTERNS = {
    "headers": [re.compile(r"^#{1,6}\s", re.MULTILINE)],
    "lists": [re.compile(r"^[^\S\n]*\d+\.\s", re.MULTILINE), re.compile(r"^[^\S\n]*[-*+]\s", re.MULTILINE)],
    "bold": [re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__")],
}


def style_counts(text: str, length_unit: str = "words") -> tuple[float, float, float, float]:
    """``(length, headers, lists, bold)`` of one response (code blocks removed before counting markdown;
    ``length_unit``: ``"words"`` or ``"chars"``)."""
    text = text if isinstance(text, str) else ""
    length = float(len(text.split()) if length_unit == "words" else len(text))
    bare = _CODE.sub("``````", text)  # one pass (a replace per block is quadratic in the blocks)
    counts = [float(sum(len(p.findall(bare)) for p in _PATTERNS[k])) for k in FEATURES[1:]]
    return length, counts[0], counts[1], counts[2]


def style_covariates(counts_a: np.ndarray, counts_b: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """The standardised battle features (n x 4) from per-response counts ``(n, 4)`` of A and B (module
    doc), and the names of the constant features (left at 0)."""
    a, b = np.asarray(counts_a, dtype=np.float64), np.asarray(counts_b, dtype=np.float64)
    la, lb = a[:, :1], b[:, :1]
    with np.errstate(invalid="ignore", divide="ignore"):
        length = np.where(la + lb > 0, (la - lb) / (la + lb), 0.0)
        da, db = np.where(la > 0, a[:, 1:] / la, 0.0), np.where(lb > 0, b[:, 1:] / lb, 0.0)
    raw = np.hstack([length, (da - db) / (da + db + 1.0)])
    mean, sd = raw.mean(axis=0), raw.std(axis=0, ddof=1) if raw.shape[0] > 1 else np.zeros(raw.shape[1])
    constant = tuple(f for f, s in zip(FEATURES, sd, strict=True) if not s > 0)
    z = np.where(sd > 0, (raw - mean) / np.where(sd > 0, sd, 1.0), 0.0)
    return z, constant


def fit_logistic(X: np.ndarray, y: np.ndarray, *, tol: float = 1e-12, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray, bool]:
    """The unpenalised logistic-regression MLE (no intercept; ``y`` in [0, 1]) by Newton's method with
    step halving: ``(coef, covariance = inverse Hessian, converged)``."""
    d = X.shape[1]
    th = np.zeros(d)

    def nll(t: np.ndarray) -> float:
        z = X @ t
        return float(np.sum(np.logaddexp(0.0, z) - y * z))

    f, converged = nll(th), False
    hess = np.eye(d)
    for _ in range(max_iter):
        mu = np.exp(-np.logaddexp(0.0, -(X @ th)))
        grad = X.T @ (mu - y)
        hess = (X.T * (mu * (1 - mu))) @ X
        step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        t = 1.0
        while nll(th - t * step) > f + 1e-12 * abs(f) and t > 1e-8:
            t /= 2
        th = th - t * step
        f = nll(th)
        if np.max(np.abs(t * step)) < tol:
            converged = True
            break
    # a separated sample (a system that always wins) has no finite MLE: Newton stalls where every fitted
    # probability is 1 within rounding and calls that a step below ``tol``; a real optimum needs about
    # e**30 battles to fit a probability that extreme
    finite = bool(np.max(np.abs(th), initial=0.0) < 50) and bool(np.max(np.abs(X @ th), initial=0.0) < 30)
    return th, np.linalg.pinv(hess), converged and finite


def fit_style_bt(a: np.ndarray, b: np.ndarray, y: np.ndarray, z: np.ndarray, k: int, *, ref: int = 0,
                 weights: np.ndarray | None = None, start: np.ndarray | None = None, tol: float = 1e-10,
                 max_iter: int = 100, covariance: bool = True) -> tuple[np.ndarray, np.ndarray, bool]:
    """The style-controlled Bradley-Terry MLE of battles ``a`` vs ``b`` (system indices, ``y`` in [0, 1]:
    1 = a wins, 0.5 = tie) with covariates ``z`` (n x d), each battle counted ``weights`` times (None: once):
    ``(coef, covariance = inverse Hessian, converged)``, ``coef`` the k-1 system strengths (system ``ref``
    at 0, the others in index order) then the d covariate coefficients: the parametrisation of
    :func:`fit_logistic` on the design ``[e_a - e_b without column ref, z]``, so the same estimate.

    Newton's method on the structured Hessian: the strength block is the graph Laplacian of the
    battles' weights ``w p (1 - p)`` (a bincount over pairs), the strength-covariate block and the
    gradient are bincounts per system, so an iteration costs ``O(n d)`` (never the n x k design);
    ``start`` warm-starts it (a bootstrap resample from the full fit). Steps are capped at 2 per
    coordinate, as for plain Bradley-Terry. ``covariance=False`` returns the Hessian in its place (no
    pseudo-inverse: a bootstrap resample needs the coefficients only)."""
    n, d = z.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    keep = np.delete(np.arange(k), ref)
    coef = np.zeros(k - 1 + d) if start is None else np.array(start, dtype=np.float64)
    with one_blas_thread():  # small solves: BLAS threads cost far more than they save
        return _style_newton(a, b, y, z, k, keep, w, coef, tol, max_iter, covariance)


def _style_newton(a: np.ndarray, b: np.ndarray, y: np.ndarray, z: np.ndarray, k: int, keep: np.ndarray,
                  w: np.ndarray, coef: np.ndarray, tol: float, max_iter: int,
                  covariance: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """The Newton iterations of :func:`fit_style_bt`."""
    d = z.shape[1]
    pairs = a * k + b
    H = np.eye(coef.size)
    converged = False
    for _ in range(max_iter):
        theta = np.zeros(k)
        theta[keep] = coef[: k - 1]
        mu = 0.5 * (1.0 + np.tanh(0.5 * (theta[a] - theta[b] + z @ coef[k - 1:])))  # sigmoid, no overflow
        r, s = w * (y - mu), w * mu * (1.0 - mu)
        grad = np.concatenate([(np.bincount(a, r, k) - np.bincount(b, r, k))[keep], z.T @ r])
        pair = np.bincount(pairs, s, k * k).reshape(k, k)
        pair = pair + pair.T
        lap = np.diag(pair.sum(axis=1)) - pair
        cross = np.stack([np.bincount(a, s * z[:, j], k) - np.bincount(b, s * z[:, j], k) for j in range(d)], axis=1)
        H = np.block([[lap[np.ix_(keep, keep)], cross[keep]], [cross[keep].T, (z.T * s) @ z]])
        try:
            step = np.linalg.solve(H, grad)
        except np.linalg.LinAlgError:  # systems not connected by battles: the least-squares step
            step = np.linalg.lstsq(H, grad, rcond=None)[0]
        step *= min(1.0, 2.0 / max(float(np.abs(step).max(initial=0.0)), 1e-300))
        coef = coef + step
        if np.abs(step).max(initial=0.0) < tol:
            converged = True
            break
    finite = bool(np.max(np.abs(coef), initial=0.0) < 50)
    return coef, np.linalg.pinv(H) if covariance else H, converged and finite


def style_bootstrap(a: np.ndarray, b: np.ndarray, y: np.ndarray, z: np.ndarray, k: int, *, ref: int = 0,
                    n_bootstrap: int = 100, seed: int | None = 0, start: np.ndarray | None = None) -> np.ndarray:
    """Bootstrap coefficients ``(n_bootstrap, k - 1 + d)`` of :func:`fit_style_bt`: each resample draws n
    battles with replacement (``Generator.integers(0, n, n)``, arena-hard-auto's draw), counted as weights
    of the battles (the features stay per battle), and is fitted warm-started from ``start`` (the
    full-data fit; None: fitted here)."""
    n = y.size
    if start is None:
        start = fit_style_bt(a, b, y, z, k, ref=ref)[0]
    rng = np.random.default_rng(seed)
    out = np.empty((n_bootstrap, start.size))
    for i in range(n_bootstrap):
        counts = np.bincount(rng.integers(0, n, n), minlength=n)
        drawn = np.flatnonzero(counts)  # a battle not drawn adds nothing: about 37% fewer rows to fit
        out[i] = fit_style_bt(a[drawn], b[drawn], y[drawn], z[drawn], k, ref=ref, weights=counts[drawn].astype(np.float64),
                              start=start, covariance=False)[0]
    return out


@dataclass(frozen=True)
class StyleControl:
    """The style-controlled leaderboard.

    ``table`` columns: ``system, bt, bt_style, bt_style_low, bt_style_high, style_effect, rank, rank_style``
    (plain and style-controlled ratings; ``style_effect = bt - bt_style``). ``coefficients``: per feature
    its coefficient on the logit scale with Wald ``low`` / ``high`` and ``mean_abs`` of its raw value
    (``feature, coef, low, high``). ``constant``: features left at 0. ``converged``: whether both fits
    reached a finite optimum. With ``settings.n_bootstrap > 0`` the intervals are bootstrap percentiles
    instead of Wald's (``intervals``).
    """

    table: pd.DataFrame
    coefficients: pd.DataFrame
    constant: tuple[str, ...]
    converged: bool
    n_battles: int
    length_unit: str
    settings: BTSettings = field(repr=False)
    #: how ``bt_style_low`` / ``bt_style_high`` and the coefficients' ``low`` / ``high`` were found: ``"wald"``
    #: (the inverse Hessian, ``settings.n_bootstrap == 0``) or ``"bootstrap"`` (percentiles of
    #: ``settings.n_bootstrap`` battle resamples, :func:`style_bootstrap`)
    intervals: str = "wald"


def _ratings(theta: np.ndarray, cov: np.ndarray, k: int, ref: int, anchor: int | None, bt: BTSettings) -> tuple[np.ndarray, np.ndarray]:
    """Ratings and their standard errors from the k-1 coefficients (the reference system's is 0)."""
    W = np.delete(np.eye(k), ref, axis=1)
    offset = bt.anchor_rating if anchor is not None else bt.init_rating
    if anchor is None:
        W = W - W.mean(axis=0, keepdims=True)
    c = bt.scale / math.log(bt.base)
    se = c * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", W, cov, W), 0.0))
    return c * (W @ theta) + offset, se


def style_control(ba: BattleArrays, responses_a: Sequence[str], responses_b: Sequence[str], *,
                  settings: BTSettings = BTSettings(n_bootstrap=0), alpha: float = 0.05,
                  length_unit: str = "words") -> StyleControl:
    """Bradley-Terry with and without the style covariates over the resolved battles of ``ba``
    (``responses_a`` / ``responses_b``: the texts, aligned with the battles; module doc)."""
    if length_unit not in ("words", "chars"):
        raise ValueError(f"length_unit must be 'words' or 'chars', got {length_unit!r}")
    r = ba.resolved()
    y = scores(ba.code)[r]
    k = len(ba.systems)
    anchor = ba.index(settings.anchor, "anchor") if settings.anchor is not None else None
    ref = anchor if anchor is not None else 0
    X = np.zeros((int(r.sum()), k))
    X[np.arange(X.shape[0]), ba.a[r]] = 1.0
    X[np.arange(X.shape[0]), ba.b[r]] -= 1.0
    X = np.delete(X, ref, axis=1)
    ca = np.array([style_counts(t, length_unit) for t, keep in zip(responses_a, r, strict=True) if keep]).reshape(-1, 4)
    cb = np.array([style_counts(t, length_unit) for t, keep in zip(responses_b, r, strict=True) if keep]).reshape(-1, 4)
    z, constant = style_covariates(ca, cb)
    plain, plain_cov, ok1 = fit_logistic(X, y)
    full, full_cov, ok2 = fit_logistic(np.hstack([X, z]), y)
    m = k - 1
    bt_plain, _ = _ratings(plain, plain_cov, k, ref, anchor, settings)
    bt_style, se = _ratings(full[:m], full_cov[:m, :m], k, ref, anchor, settings)
    q = z_value(alpha)
    lo, hi = bt_style - q * se, bt_style + q * se
    gse = np.sqrt(np.maximum(np.diag(full_cov)[m:], 0.0))
    glo, ghi = full[m:] - q * gse, full[m:] + q * gse
    if settings.n_bootstrap > 0:  # percentile intervals of battle resamples, each warm-started from the full fit
        boot = style_bootstrap(ba.a[r], ba.b[r], y, z, k, ref=ref, n_bootstrap=settings.n_bootstrap, seed=settings.seed,
                               start=full)
        rated = _ratings(boot[:, :m].T, np.zeros((m, m)), k, ref, anchor, settings)[0].T  # (resamples, k)
        with np.errstate(all="ignore"):
            lo, hi = np.nanquantile(rated, [alpha / 2, 1 - alpha / 2], axis=0)
            glo, ghi = np.nanquantile(boot[:, m:], [alpha / 2, 1 - alpha / 2], axis=0)
    table = pd.DataFrame({"system": ba.systems, "bt": bt_plain, "bt_style": bt_style, "bt_style_low": lo,
                          "bt_style_high": hi, "style_effect": bt_plain - bt_style})
    table["rank"] = table["bt"].rank(ascending=False, method="min").astype(int)
    table["rank_style"] = table["bt_style"].rank(ascending=False, method="min").astype(int)
    coefs = pd.DataFrame({"feature": FEATURES, "coef": full[m:], "low": glo, "high": ghi})
    return StyleControl(table.sort_values("bt_style", ascending=False, kind="stable").reset_index(drop=True), coefs,
                        constant, ok1 and ok2, int(r.sum()), length_unit, settings,
                        "bootstrap" if settings.n_bootstrap > 0 else "wald")


__all__ = ["FEATURES", "StyleControl", "fit_logistic", "fit_style_bt", "style_bootstrap", "style_control", "style_counts",
           "style_covariates"]
