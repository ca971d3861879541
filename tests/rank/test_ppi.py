"""PPI++ pinned to ppi-python (``ppi_py``) on many random inputs: the mean's estimate and interval, and
the logistic regression's (Bradley-Terry design, the form the leaderboard uses) estimate and interval,
to 1e-9. ppi-python's L-BFGS-B is asked to converge fully (``gtol`` 1e-14), else its own answer is only
good to ~1e-7 (its default stops on the loss' change); evalign's Newton fit reaches the optimum."""

from __future__ import annotations

import numpy as np
import ppi_py  # the test extra installs it (a missing one fails here, never skips)
import pytest

from evalign.rank.ppi import labels_to_halve, mean_lambda, ppi_logistic, ppi_mean

CONVERGED = {"ftol": 0.0, "gtol": 1e-14, "maxls": 200}


def mean_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    n, N = int(rng.integers(5, 300)), int(rng.integers(5, 3000))
    y = rng.integers(0, 3, n) / 2  # win / tie / loss scores
    noise = rng.random() * 0.8
    yhat = np.clip(y + rng.normal(0, noise, n), 0, 1) if seed % 2 else np.where(rng.random(n) < noise, 1 - y, y)
    yu = np.clip(rng.random(N) + rng.normal(0, 0.1, N), 0, 1)
    return y, yhat, yu, float(rng.choice([0.05, 0.1, 0.2]))


@pytest.mark.parametrize("seed", range(60))
def test_mean_matches_ppi_python(seed: int) -> None:
    y, yhat, yu, alpha = mean_data(seed)
    ours = ppi_mean(y, yhat, yu, alpha=alpha)
    est = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yu)))
    lo, hi = ppi_py.ppi_mean_ci(y, yhat, yu, alpha=alpha)
    assert ours.estimate == pytest.approx(est, abs=1e-9)
    assert ours.low == pytest.approx(float(np.squeeze(lo)), abs=1e-9)
    assert ours.high == pytest.approx(float(np.squeeze(hi)), abs=1e-9)
    assert 0 <= ours.lam <= 1


def bt_data(seed: int, err_max: float = 0.1) -> tuple[np.ndarray, ...]:
    """Battles among k systems: x = e_A - e_B without the first system's column; human labels from a
    Bradley-Terry model, the judge's a noisy (sometimes biased) copy that errs up to ``err_max``."""
    rng = np.random.default_rng(1000 + seed)
    k = int(rng.integers(3, 7))
    n, N = int(rng.integers(60, 250)), int(rng.integers(600, 3000))

    def design(m: int) -> np.ndarray:
        a = rng.integers(0, k, m)
        b = (a + rng.integers(1, k, m)) % k
        X = np.zeros((m, k))
        X[np.arange(m), a] = 1.0
        X[np.arange(m), b] -= 1.0
        return X[:, 1:]

    X, Xu = design(n), design(N)
    beta = rng.normal(0, 0.7, k - 1)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    err = rng.random() * err_max
    yhat = np.where(rng.random(n) < err, 1 - y, y)
    shift = rng.normal(0, err_max, k - 1)  # the judge's own idea of the strengths
    yhu = (rng.random(N) < 1 / (1 + np.exp(-Xu @ (beta + shift)))).astype(float)
    return X, y, yhat, Xu, yhu


def rectified_grad(theta: np.ndarray, X: np.ndarray, y: np.ndarray, yhat: np.ndarray, Xu: np.ndarray,
                   yhu: np.ndarray, lam: float) -> np.ndarray:
    """The gradient of the rectified logistic loss (written from its definition, PPI++ eq. 6)."""
    mu, mu_u = 1 / (1 + np.exp(-X @ theta)), 1 / (1 + np.exp(-Xu @ theta))
    n, N = y.size, yhu.size
    return lam / N * Xu.T @ (mu_u - yhu) - lam / n * X.T @ (mu - yhat) + X.T @ (mu - y) / n


@pytest.mark.parametrize("seed", range(10))
def test_logistic_statistics_match_ppi_python_at_the_same_fit(seed: int) -> None:
    """Given the same coefficients, the gradients, Hessian, power tuning and covariance are ppi-python's
    (``_logistic_get_stats``, ``_calc_lam_glm``, ``ppi_logistic_ci``'s covariance) to 1e-9."""
    from ppi_py.ppi import _calc_lam_glm, _logistic_get_stats

    from evalign.rank import ppi as P

    X, y, yhat, Xu, yhu = bt_data(seed)
    theta = P._rectified_fit(X, y, yhat, Xu, yhu, 1.0)
    theirs = _logistic_get_stats(theta, X, y, yhat, Xu, yhu, np.ones(y.size), np.ones(yhu.size))
    ours = P._stats(theta, X, y, yhat, Xu, yhu, True)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert P._glm_lambda(*ours) == pytest.approx(_calc_lam_glm(*theirs, clip=True), abs=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_logistic_matches_ppi_python(seed: int) -> None:
    """End to end. ppi-python minimises with L-BFGS-B on the loss' values, which stops within ~1e-8 of the
    optimum when its last step cannot lower the loss in floating point; where it stopped on its gradient
    criterion, the estimates and intervals agree to 1e-9; elsewhere to 1e-6, and evalign's Newton fit is
    the closer one to the optimum (a smaller gradient of the same loss)."""
    X, y, yhat, Xu, yhu = bt_data(seed)
    ours = ppi_logistic(X, y, yhat, Xu, yhu, alpha=0.1)
    assert ours.fallback == ""
    est = ppi_py.ppi_logistic_pointestimate(X, y, yhat, Xu, yhu, optimizer_options=dict(CONVERGED))
    lo, hi = ppi_py.ppi_logistic_ci(X, y, yhat, Xu, yhu, alpha=0.1, optimizer_options=dict(CONVERGED))
    for mine, theirs, lam, pairs in ((ours.coef, est, ours.lam, [(ours.coef, est)]),
                                     (ours.center, (lo + hi) / 2, ours.lam_ci, [(ours.low, lo), (ours.high, hi)])):
        g_ours = np.max(np.abs(rectified_grad(mine, X, y, yhat, Xu, yhu, lam)))
        g_theirs = np.max(np.abs(rectified_grad(theirs, X, y, yhat, Xu, yhu, lam)))
        assert g_ours < 1e-12
        tol = 1e-9 if g_theirs < 1e-11 else 1e-6
        if tol > 1e-9:
            assert g_ours < g_theirs
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=0, atol=tol)


def test_lambda_zero_is_the_classical_interval_and_one_is_plain_ppi() -> None:
    y, yhat, yu, _ = mean_data(3)
    classical = ppi_mean(y, yhat, yu, lam=0.0)
    assert classical.estimate == pytest.approx(y.mean())
    assert classical.se == pytest.approx(np.std(y) / np.sqrt(y.size))
    plain = ppi_mean(y, yhat, yu, lam=1.0)
    assert plain.estimate == pytest.approx(yu.mean() + (y - yhat).mean())
    # a perfect judge: lambda is (close to) 1 and the interval is the judge's own
    perfect = ppi_mean(y, y, np.concatenate([y, y]))
    assert perfect.lam == pytest.approx(1 / (1 + y.size / (2 * y.size)) * (np.var(y) / np.var(np.concatenate([y, y, y]), ddof=1)))
    assert mean_lambda(y, np.full(y.size, 0.5), np.full(10, 0.5)) == 0.0  # a constant judge carries nothing


def test_labels_to_halve() -> None:
    # variance 0.25/100 + 0.01/1000 = 0.00251; a quarter 0.0006275; minus 0.00001 -> 0.25 / 0.0006175
    assert labels_to_halve(0.25, 0.01, 100, 1000) == np.ceil(0.25 / (0.00251 / 4 - 0.00001))
    assert labels_to_halve(0.25, 0.0, 100, 1000) == 400  # without a judge: four times the labels
    assert labels_to_halve(0.001, 1.0, 100, 100) == float("inf")  # the judge-only part is the bottleneck
    r = ppi_mean(*mean_data(5)[:3])
    assert r.n_to_halve >= r.n and r.n_effective > 0


def test_where_ppi_python_runs_off_evalign_falls_back_and_says_so() -> None:
    """A judge that errs up to 30% against ~150 labels: at lam = 1 the rectified loss has no minimum
    (ppi-python's optimiser returns ~1e26); evalign tunes lam at the humans-only fit instead."""
    X, y, yhat, Xu, yhu = bt_data(1, err_max=0.3)
    assert np.max(np.abs(ppi_py.ppi_logistic_pointestimate(X, y, yhat, Xu, yhu, lam=1))) > 1e6
    r = ppi_logistic(X, y, yhat, Xu, yhu)
    assert "humans-only fit" in r.fallback and np.all(np.isfinite(r.low)) and np.all(np.isfinite(r.high))
    assert 0 <= r.lam <= 1 and np.max(np.abs(r.coef)) < 10


def test_fractional_labels_and_a_fit_without_optimum() -> None:
    X, y, yhat, Xu, yhu = bt_data(0)
    half = np.where(np.arange(y.size) % 5 == 0, 0.5, y)  # ties as half wins
    r = ppi_logistic(X, half, yhat, Xu, yhu)
    assert np.all(np.isfinite(r.coef)) and np.all(r.low <= r.center) and np.all(r.center <= r.high)
    # one system wins every labelled and every unlabelled battle: no finite optimum at any lam, said so
    with pytest.raises(ValueError, match="no finite minimum"):
        ppi_logistic(np.ones((10, 1)), np.ones(10), np.ones(10), np.ones((50, 1)), np.ones(50))


def test_every_item_labelled_is_the_humans_only_fit() -> None:
    # no item without a human label: nothing to predict; the estimate is the humans-only logistic fit
    # (statsmodels' maximum likelihood) with its sandwich interval, said in the note (was a ZeroDivisionError)
    import statsmodels.api as sm

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    y = (rng.random(300) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype(float)
    yhat = np.where(rng.random(300) < 0.8, y, 1 - y)
    r = ppi_logistic(X, y, yhat, np.zeros((0, 3)), np.zeros(0))
    fit = sm.Logit(y, X).fit(disp=0, cov_type="HC0")
    np.testing.assert_allclose(r.coef, fit.params, rtol=1e-6)
    np.testing.assert_allclose(np.sqrt(np.diag(r.cov)), fit.bse * np.sqrt(300 / 299), rtol=1e-4)
    assert r.lam == 0.0 and r.lam_ci == 0.0 and r.N == 0 and "humans-only" in r.fallback
