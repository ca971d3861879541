"""Prediction-powered inference (PPI++) of a mean and of logistic-regression coefficients: estimates and
normal intervals that use a judge's verdicts on every item and human labels on a subset, valid whatever
the judge's errors (arrays in, frozen results out, no I/O).

Angelopoulos, Bates, Fannjiang, Jordan & Zrnic (2023), "Prediction-powered inference", Science 382;
Angelopoulos, Duchi & Zrnic (2023), "PPI++: Efficient Prediction-Powered Inference", arXiv 2311.01453.
The computation is ppi-python's (``ppi_py``: ``ppi_mean_pointestimate`` / ``ppi_mean_ci`` and
``ppi_logistic_pointestimate`` / ``ppi_logistic_ci`` with ``lam=None``: power tuning, clipped to [0, 1];
unweighted, two-sided), step for step, so that the tests pin both to 1e-9 on random inputs. Notation:
``y`` human labels and ``yhat`` the judge's predictions on the ``n`` labelled items, ``yhat_unlabeled``
the judge's predictions on the ``N`` other items.

* Mean: ``theta = mean(lam * yhat_unlabeled) + mean(y - lam * yhat)``; ``lam`` from the ``lam = 1``
  estimate (PPI++ eq. for the mean); standard error ``sqrt(sd(lam * yhat_u)^2 / N + sd(y - lam * yhat)^2 / n)``
  (population sd).
* Logistic regression (no intercept; ``y`` in [0, 1], fractions allowed: a tie is half a win): the
  minimiser of the rectified loss ``lam * L_u(yhat_u) - lam * L_n(yhat) + L_n(y)`` (``L``: mean log-loss),
  found by Newton's method (the loss is convex for ``lam`` in [0, 1]); ``lam`` tuned at the ``lam = 1``
  fit, the estimate refitted, ``lam`` tuned again there, and the interval is that of the refit with
  the second ``lam`` (as ppi-python's ``ppi_logistic_ci`` does; its centre can differ slightly from
  :attr:`PPILogistic.coef`, which is ``ppi_logistic_pointestimate``'s estimate). Covariance
  ``H^-1 (n/N V_u + V_n) H^-1 / n`` (``V``: covariances of the gradients; ``H``: the Hessian over all items).
  Where ppi-python fails (the rectified loss at ``lam = 1`` has no finite minimum: a judge that errs a
  lot against few human labels; ppi-python's optimiser then runs off to ~1e26), evalign tunes ``lam`` at
  the humans-only fit instead, and falls back to ``lam = 0`` (the classical interval) when a tuned fit has
  no optimum either; :attr:`PPILogistic.fallback` says so.

Variance components are kept so that the number of human labels needed to halve an interval can be
read off (:func:`labels_to_halve`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm


def z_value(alpha: float) -> float:
    """The two-sided normal quantile ``Phi^-1(1 - alpha / 2)``."""
    return float(norm.ppf(1 - alpha / 2.0))


def labels_to_halve(rectifier_var: float, imputed_var: float, n: int, N: int) -> float:
    """Human labels needed for an interval half as wide, at the same variances and the same ``N`` judge-only
    items: the ``n'`` with ``rectifier_var / n' + imputed_var / N = V / 4`` (``V`` the variance now);
    ``inf`` when the judge-only part alone is above ``V / 4`` (more judge verdicts are needed too)."""
    judge_only = imputed_var / N if N else 0.0  # no judge-only item: the humans' part is all there is
    v = rectifier_var / n + judge_only
    room = v / 4.0 - judge_only
    if not np.isfinite(v) or room <= 0:
        return float("inf")
    return float(np.ceil(rectifier_var / room))


# --- the mean ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PPIMean:
    """A prediction-powered mean: ``estimate`` with the interval ``low``..``high`` at level ``1 - alpha``,
    the power-tuning ``lam`` in [0, 1], the standard error ``se`` and its parts (``rectifier_var``: the
    variance of ``y - lam * yhat``; ``imputed_var``: of ``lam * yhat_unlabeled``; ``se**2 =
    rectifier_var / n + imputed_var / N``), the classical (humans only) ``classical`` estimate and
    ``classical_se``, and ``n``, ``N``."""

    estimate: float
    low: float
    high: float
    lam: float
    se: float
    rectifier_var: float
    imputed_var: float
    classical: float
    classical_se: float
    n: int
    N: int
    alpha: float

    @property
    def n_to_halve(self) -> float:
        """Human labels for an interval half as wide (:func:`labels_to_halve`)."""
        return labels_to_halve(self.rectifier_var, self.imputed_var, self.n, self.N)

    @property
    def n_effective(self) -> float:
        """Human labels alone that would give the same standard error: ``n * classical_se**2 / se**2``."""
        return float(self.n * self.classical_se**2 / self.se**2) if self.se > 0 else float("inf")


def mean_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> float:
    """PPI++'s power-tuning parameter of a mean, clipped to [0, 1] (0 when the predictions are constant)."""
    n, N = y.size, yhat_unlabeled.size
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_unlabeled]), ddof=1))
    if not var > 0:
        return 0.0
    return float(np.clip(cov / ((1.0 + n / N) * var), 0.0, 1.0))


def ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, *, alpha: float = 0.05,
             lam: float | None = None) -> PPIMean:
    """The PPI++ estimate and interval of the mean of ``y`` (see the module doc); ``lam`` None: tuned."""
    y, yhat, yu = (np.asarray(a, dtype=np.float64).ravel() for a in (y, yhat, yhat_unlabeled))
    if y.size != yhat.size:
        raise ValueError(f"y and yhat differ in length ({y.size}, {yhat.size})")
    if y.size < 2 or yu.size < 2:
        raise ValueError(f"PPI needs at least 2 labelled and 2 unlabelled items, got {y.size} and {yu.size}")
    n, N = y.size, yu.size
    lam = mean_lambda(y, yhat, yu) if lam is None else float(lam)
    estimate = float(np.mean(lam * yu) + np.mean(y - lam * yhat))
    imputed_var = float(np.var(lam * yu))
    rectifier_var = float(np.var(y - lam * yhat))
    se = float(np.sqrt(imputed_var / N + rectifier_var / n))
    z = z_value(alpha)
    return PPIMean(estimate, estimate - z * se, estimate + z * se, lam, se, rectifier_var, imputed_var,
                   float(y.mean()), float(np.std(y) / np.sqrt(n)), n, N, alpha)


# --- logistic regression ------------------------------------------------------------------------------


def _expit(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def _rectified_fit(X: np.ndarray, y: np.ndarray, yhat: np.ndarray, Xu: np.ndarray, yhu: np.ndarray, lam: float,
                   theta: np.ndarray | None = None, tol: float = 1e-14, max_iter: int = 100,
                   w: np.ndarray | None = None, w_u: np.ndarray | None = None) -> np.ndarray:
    """The minimiser of the rectified logistic loss (module doc) by damped Newton steps; ``w`` / ``w_u``:
    how many items each labelled / unlabelled row stands for (None: one each)."""
    w = np.ones(X.shape[0]) if w is None else w
    w_u = np.ones(Xu.shape[0]) if w_u is None else w_u
    n, N, d = float(w.sum()), float(w_u.sum()), X.shape[1]
    th = np.zeros(d) if theta is None else theta.copy()
    wu = lam / N if N else 0.0  # the weight of the unlabelled items' loss (none: the humans-only fit)

    def loss(t: np.ndarray) -> float:
        zl, zu = X @ t, Xu @ t
        return float(wu * np.sum(w_u * (np.logaddexp(0.0, zu) - yhu * zu))
                     - lam / n * np.sum(w * (np.logaddexp(0.0, zl) - yhat * zl))
                     + 1.0 / n * np.sum(w * (np.logaddexp(0.0, zl) - y * zl)))

    f = loss(th)
    for _ in range(max_iter):
        mu, mu_u = _expit(X @ th), _expit(Xu @ th)
        grad = wu * Xu.T @ (w_u * (mu_u - yhu)) - lam / n * X.T @ (w * (mu - yhat)) + 1.0 / n * X.T @ (w * (mu - y))
        hess = wu * (Xu.T * (w_u * mu_u * (1 - mu_u))) @ Xu + (1 - lam) / n * (X.T * (w * mu * (1 - mu))) @ X
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            step = np.full(d, np.inf)
        if not np.all(np.isfinite(step)) or np.max(np.abs(th)) > 1e4:
            raise ValueError(f"the rectified logistic loss (lam = {lam:.3g}) has no finite minimum: the judge's "
                             "predictions and the human labels pull the fit apart (too few human labels, or "
                             "a system that wins or loses every battle)")
        t = 1.0
        while np.max(np.abs(grad)) > 1e-8:  # far from the optimum: halve the step until the loss falls;
            cand = th - t * step  # near it, full Newton steps (the loss no longer resolves the last digits)
            fc = loss(cand)
            if fc <= f + 1e-4 * t * float(grad @ -step) or t < 1e-10:
                break
            t /= 2
        th = th - t * step
        f = loss(th)
        if np.max(np.abs(t * step)) < tol:
            break
    return th


def _stats(theta: np.ndarray, X: np.ndarray, y: np.ndarray, yhat: np.ndarray, Xu: np.ndarray, yhu: np.ndarray,
           use_unlabeled: bool, w: np.ndarray | None = None, w_u: np.ndarray | None = None,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-row gradients (labelled with y, labelled with yhat, unlabelled with yhat) and the inverse Hessian
    (over all items when ``use_unlabeled``, else the labelled ones; a row counts ``w`` / ``w_u`` items), as
    ppi-python's ``_logistic_get_stats``; None: one item per row."""
    w = np.ones(X.shape[0]) if w is None else w
    w_u = np.ones(Xu.shape[0]) if w_u is None else w_u
    n, N = float(w.sum()), float(w_u.sum())
    mu, mu_u = _expit(X @ theta), _expit(Xu @ theta)
    if use_unlabeled:
        hess = ((Xu.T * (w_u * mu_u * (1 - mu_u))) @ Xu + (X.T * (w * mu * (1 - mu))) @ X) / (N + n)
        g_hat_u = Xu * (mu_u - yhu)[:, None]
    else:
        hess = (X.T * (w * mu * (1 - mu))) @ X / n
        g_hat_u = np.zeros(Xu.shape)
    return X * (mu - y)[:, None], X * (mu - yhat)[:, None], g_hat_u, np.linalg.inv(hess)


def _glm_lambda(g: np.ndarray, g_hat: np.ndarray, g_hat_u: np.ndarray, inv_h: np.ndarray, w: np.ndarray | None = None,
                w_u: np.ndarray | None = None) -> float:
    """PPI++'s power-tuning parameter of a GLM (total variance over the coordinates), clipped to [0, 1];
    a row stands for ``w`` / ``w_u`` items (integers; None: one each)."""
    w = np.ones(g.shape[0], dtype=np.int64) if w is None else w
    w_u = np.ones(g_hat_u.shape[0], dtype=np.int64) if w_u is None else w_u
    n, N, d = float(w.sum()), float(w_u.sum()), inv_h.shape[0]
    gc, ghc = g - w @ g / n, g_hat - w @ g_hat / n
    cov = (gc.T @ (w[:, None] * ghc) + ghc.T @ (w[:, None] * gc)) / n
    var = np.cov(np.concatenate([g_hat, g_hat_u], axis=0).T, fweights=np.concatenate([w, w_u])).reshape(d, d)
    num = float(np.trace(inv_h @ cov @ inv_h))
    den = float(2 * (1 + n / N) * np.trace(inv_h @ var @ inv_h))
    if not den > 0:
        return 0.0
    return float(np.clip(num / den, 0.0, 1.0))


def _fit_or_classical(X: np.ndarray, y: np.ndarray, yhat: np.ndarray, Xu: np.ndarray, yhu: np.ndarray, lam: float,
                      start: np.ndarray, w: np.ndarray, w_u: np.ndarray) -> tuple[np.ndarray, float, str]:
    """The rectified fit at ``lam``, or, when it has no finite optimum, the humans-only fit (``lam = 0``)."""
    try:
        return _rectified_fit(X, y, yhat, Xu, yhu, lam, start, w=w, w_u=w_u), lam, ""
    except ValueError:
        return (_rectified_fit(X, y, yhat, Xu, yhu, 0.0, w=w, w_u=w_u), 0.0,
                f"the lam = {lam:.3g} fit has no finite optimum: lam = 0")


@dataclass(frozen=True)
class PPILogistic:
    """Prediction-powered logistic-regression coefficients (module doc): ``coef`` (the point estimate),
    the interval ``low``..``high`` (centred at ``center``), ``lam`` of the estimate and ``lam_ci`` of the
    interval, the covariance ``cov`` of ``center`` and its parts (``cov = (imputed / N + rectifier / n)``,
    ``d x d`` each), ``n``, ``N``."""

    coef: np.ndarray
    center: np.ndarray
    low: np.ndarray
    high: np.ndarray
    lam: float
    lam_ci: float
    cov: np.ndarray = field(repr=False)
    rectifier: np.ndarray = field(repr=False)
    imputed: np.ndarray = field(repr=False)
    n: int = 0
    N: int = 0
    alpha: float = 0.05
    #: why the computation left ppi-python's path ("" when it did not; see :func:`ppi_logistic`)
    fallback: str = ""

    def n_to_halve(self, weights: np.ndarray) -> float:
        """Human labels for an interval half as wide for the linear combination ``weights @ coef``."""
        w = np.asarray(weights, dtype=np.float64)
        return labels_to_halve(float(w @ self.rectifier @ w), float(w @ self.imputed @ w), self.n, self.N)


def ppi_logistic(X: np.ndarray, y: np.ndarray, yhat: np.ndarray, X_unlabeled: np.ndarray,
                 yhat_unlabeled: np.ndarray, *, alpha: float = 0.05, weights: np.ndarray | None = None,
                 weights_unlabeled: np.ndarray | None = None) -> PPILogistic:
    """PPI++ estimate and intervals of logistic-regression coefficients (no intercept; see the module doc).
    ``weights`` / ``weights_unlabeled``: how many items (positive integers) each labelled / unlabelled row
    stands for, so that equal items can be given once with their count (None: one item per row); the
    result is that of the rows repeated (``n`` and ``N`` count items)."""
    X, Xu = (np.atleast_2d(np.asarray(a, dtype=np.float64)) for a in (X, X_unlabeled))
    y, yhat, yhu = (np.asarray(a, dtype=np.float64).ravel() for a in (y, yhat, yhat_unlabeled))
    d = X.shape[1]
    w = np.ones(X.shape[0], dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64).ravel()
    w_u = (np.ones(Xu.shape[0], dtype=np.int64) if weights_unlabeled is None
           else np.asarray(weights_unlabeled, dtype=np.int64).ravel())
    if not (y.size == yhat.size == w.size == X.shape[0] and yhu.size == w_u.size == Xu.shape[0] and Xu.shape[1] == d):
        raise ValueError("X, y, yhat, weights (labelled) and X_unlabeled, yhat_unlabeled, weights_unlabeled must "
                         "agree in shape")
    n, N = int(w.sum()), int(w_u.sum())
    wf, wf_u = w.astype(np.float64), w_u.astype(np.float64)
    if N == 0:  # every item labelled: nothing to predict, the humans-only fit (lam = 0) and its interval
        coef = _rectified_fit(X, y, yhat, Xu, yhu, 0.0, w=wf, w_u=wf_u)
        g, _, _, inv_h = _stats(coef, X, y, yhat, Xu, yhu, False, wf, wf_u)
        rectifier = inv_h @ np.cov(g.T, fweights=w).reshape(d, d) @ inv_h
        cov = rectifier / n
        se = np.sqrt(np.diag(cov))
        z = z_value(alpha)
        return PPILogistic(coef, coef, coef - z * se, coef + z * se, 0.0, 0.0, cov, rectifier, np.zeros((d, d)), n, N,
                           alpha, "every item has a human label: the humans-only fit (lam = 0)")
    fallback = ""
    # the point estimate: tune lam at the lam = 1 fit, refit (ppi_logistic_pointestimate)
    try:
        th1 = _rectified_fit(X, y, yhat, Xu, yhu, 1.0, w=wf, w_u=wf_u)
    except ValueError:  # plain PPI has no estimate here: tune lam at the humans-only fit instead
        th1 = _rectified_fit(X, y, yhat, Xu, yhu, 0.0, w=wf, w_u=wf_u)
        fallback = "the lam = 1 fit has no finite optimum: lam tuned at the humans-only fit"
    lam1 = _glm_lambda(*_stats(th1, X, y, yhat, Xu, yhu, True, wf, wf_u), w, w_u)
    coef, lam1, note = _fit_or_classical(X, y, yhat, Xu, yhu, lam1, th1, wf, wf_u)
    # the interval: tune lam again at that estimate, refit, and read the covariance there (ppi_logistic_ci)
    lam2 = _glm_lambda(*_stats(coef, X, y, yhat, Xu, yhu, True, wf, wf_u), w, w_u)
    center, lam2, note2 = _fit_or_classical(X, y, yhat, Xu, yhu, lam2, coef, wf, wf_u)
    fallback = "; ".join(x for x in (fallback, note or note2) if x)
    g, g_hat, g_hat_u, inv_h = _stats(center, X, y, yhat, Xu, yhu, lam2 != 0, wf, wf_u)
    v_u = np.cov((lam2 * g_hat_u).T, fweights=w_u).reshape(d, d)
    v_n = np.cov((g - lam2 * g_hat).T, fweights=w).reshape(d, d)
    imputed, rectifier = inv_h @ v_u @ inv_h, inv_h @ v_n @ inv_h
    cov = (n / N * imputed + rectifier) / n
    se = np.sqrt(np.diag(cov))
    z = z_value(alpha)
    return PPILogistic(coef, center, center - z * se, center + z * se, lam1, lam2, cov, rectifier, imputed, n, N, alpha,
                       fallback)


__all__ = ["PPILogistic", "PPIMean", "labels_to_halve", "mean_lambda", "ppi_logistic", "ppi_mean", "z_value"]
