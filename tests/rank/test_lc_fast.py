"""The length-controlled win rate's batched solver equals the one-fit-at-a-time code it replaced
(``lc_reference.py``, the module as of commit cd61692) on random inputs: the sign-pattern solve, each
proximal Newton fit, the cross-validated choice of C, the fitted instruction difficulty (a Schur
complement instead of the dense solve) and the whole ``lc_win_rates`` result, to 1e-9."""

from __future__ import annotations

import itertools

import lc_reference as ref
import numpy as np
import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.rank import LCSettings, battle_arrays, fit_instruction_difficulty, lc_win_rates
from evalign.rank import l1_logistic as l1_module
from evalign.rank.bradley_terry import one_blas_thread
from evalign.rank.l1_logistic import glm_fits_cv, l1_logistic, l1_quadratic


def _one_fit(X: np.ndarray, p: np.ndarray, w: np.ndarray, C: float, tol: float) -> np.ndarray:
    """The reference's ``_l1_logistic`` signature on the batched solver (one fit)."""
    with one_blas_thread():
        return l1_logistic(X, p, w, np.zeros(p.size, dtype=np.int64), np.array([C]), tol)[0]


def _design(rng: np.random.Generator, n: int, zero_difficulty: bool = False) -> np.ndarray:
    dif = np.zeros(n) if zero_difficulty else rng.normal(size=n)
    return np.column_stack([np.tanh(rng.normal(size=n)), dif, np.ones(n)])


def test_sign_pattern_solve_equals_one_pattern_at_a_time():
    # the Hessians the solver meets: C * X' diag(v) X over a few rows (one or two rows: rank-deficient,
    # LAPACK-singular supports skipped), a difficulty column of zeros, steps from zero and from elsewhere
    rng = np.random.default_rng(0)
    g, H, beta = [], [], []
    for i in range(300):
        n = int(rng.choice([1, 2, 3, 8, 40]))
        X = _design(rng, n, zero_difficulty=i % 5 == 2)
        v = rng.uniform(0.01, 0.25, n)
        C = float(rng.choice(np.logspace(-4, 4, 10)))
        b = rng.normal(size=3) * (i % 3 != 0) * (X.any(axis=0))
        g.append(C * X.T @ (v * rng.normal(size=n)))
        H.append(C * (X.T * v) @ X)
        beta.append(b)
    g, H, beta = np.array(g), np.array(H), np.array(beta)
    ours = l1_quadratic(g, H, beta)
    theirs = np.array([ref._l1_quadratic(g[i], H[i], beta[i]) for i in range(len(g))])
    # where a support's system is singular in exact arithmetic but LU finds no exact zero pivot
    # (condition ~1e16), both codes return rounding noise (coordinates ~1e15): compared elsewhere only
    determined = np.array([_determined(h) for h in H])
    np.testing.assert_allclose(ours[determined], theirs[determined], rtol=1e-9, atol=1e-9)
    assert determined.sum() > 150 and (~determined).sum() > 5
    assert (ours == 0).all(axis=1).any() and (ours != 0).all(axis=1).any()  # both ends of the L1 path


def _determined(h: np.ndarray) -> bool:
    """Whether every principal submatrix of ``h`` is either well conditioned or skipped by the solver
    (a zero diagonal, or an exact zero pivot)."""
    for s in range(1, 4):
        for S in itertools.combinations(range(3), s):
            sub = h[np.ix_(S, S)]
            if np.any(np.diag(sub) <= 1e-300) or np.linalg.slogdet(sub)[0] == 0:
                continue
            if np.linalg.cond(sub) > 1e10:
                return False
    return True


def test_batched_proximal_newton_equals_each_fit_alone():
    rng = np.random.default_rng(1)
    fits, cells = [], []
    for j in range(40):
        n = int(rng.integers(4, 30))
        X = _design(rng, n, zero_difficulty=j % 7 == 0)
        p = rng.choice([0.0, 0.5, 1.0, 0.3], n)
        w = np.where(rng.random(n) < 0.2, 0.1, 1.0)
        C = float(np.logspace(-4, 4, 10)[j % 10])
        fits.append((X, p, w, C))
        cells.append(np.full(n, j))
    X = np.concatenate([f[0] for f in fits])
    p = np.concatenate([f[1] for f in fits])
    w = np.concatenate([f[2] for f in fits])
    with one_blas_thread():
        ours = l1_logistic(X, p, w, np.concatenate(cells), np.array([f[3] for f in fits]), 1e-12)
    theirs = np.array([ref._l1_logistic(*f, 1e-12) for f in fits])
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)
    assert (np.abs(theirs) > 1e-3).sum() > 40  # not all shrunk to zero


def test_cross_validated_fits_equal_the_reference(monkeypatch):
    # the reference's folds, scores and refit, with its solver swapped for the one pinned above
    monkeypatch.setattr(ref, "_l1_logistic", _one_fit)
    rng = np.random.default_rng(2)
    s = LCSettings()
    data = []
    for j in range(6):
        n = int(rng.integers(5, 30))
        X = _design(rng, n, zero_difficulty=j % 6 == 0)
        p = np.clip(0.5 + 0.4 * X[:, 0] - 0.3 * X[:, 1] + rng.normal(scale=0.3, size=n), 0, 1).round(1)
        w = np.concatenate([np.full(n // 4, 0.1), np.ones(n - n // 4)]) if j % 3 == 0 else np.ones(n)
        data.append((X, p, w))
    ours = glm_fits_cv(data, s.cs, s.n_splits, s.tol)
    for (X, p, w), (beta, C) in zip(data, ours, strict=True):
        ref_beta, ref_C = ref._glm_fit(X, p, w, s)
        assert ref_C == C
        np.testing.assert_allclose(beta, ref_beta, rtol=1e-9, atol=1e-9)
    assert len({C for _, C in ours}) >= 2  # different C chosen across the data sets
    # in batches of a few cells (a large input's path): the same fits
    monkeypatch.setattr(l1_module, "_BATCH_CELLS", 37)
    for (beta, C), (beta_b, C_b) in zip(ours, glm_fits_cv(data, s.cs, s.n_splits, s.tol), strict=True):
        assert C_b == C
        np.testing.assert_allclose(beta_b, beta, rtol=1e-12, atol=1e-12)


def _battles(k: int, n: int, seed: int, n_items: int) -> pd.DataFrame:
    """Random battles among ``k`` systems, most against the baseline ``m0``; some unparseable, some
    systems that win every battle (their difficulty fit diverges), lengths in characters."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(size=k) * 1.5
    a = np.where(rng.random(n) < 0.7, 0, rng.integers(0, k, n))
    b = (a + rng.integers(1, k, n)) % k
    flip = rng.random(n) < 0.5
    a, b = np.where(flip, b, a), np.where(flip, a, b)
    len_a, len_b = rng.integers(20, 2000, n), rng.integers(20, 2000, n)
    logit = skill[a] - skill[b] + 0.8 * np.tanh((len_a - len_b) / 600)
    u = rng.random(n)
    verdict = np.where(u < 0.85 / (1 + np.exp(-logit)), "A", np.where(u < 0.85, "B", np.where(u < 0.96, "tie", "unparseable")))
    return pd.DataFrame({"id": rng.integers(0, n_items, n).astype(str), "system_a": [f"m{i}" for i in a],
                         "system_b": [f"m{i}" for i in b], "verdict": verdict, "len_a": len_a, "len_b": len_b})


def _assert_same(ours, theirs) -> None:
    assert ours.systems == theirs.systems and ours.difficulty_source == theirs.difficulty_source
    np.testing.assert_array_equal(ours.c, theirs.c)
    for name in ("lc_win_rate", "lc_standard_error", "weights"):
        np.testing.assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-9, atol=1e-9)


def test_fitted_difficulty_equals_the_dense_newton():
    for seed, k, n, items in ((3, 6, 300, 40), (4, 12, 200, 150), (5, 3, 60, 10)):
        ba = battle_arrays(_battles(k, n, seed, items))
        with one_blas_thread():  # the reference's dense solves, on one thread (same numbers, less waiting)
            theirs = ref.fit_instruction_difficulty(ba, "m0")
        ours = fit_instruction_difficulty(ba, "m0")
        assert ours.keys() == theirs.keys()
        np.testing.assert_allclose([ours[i] for i in theirs], list(theirs.values()), rtol=1e-9, atol=1e-9)
        assert np.ptp(list(ours.values())) > 0.1


def _cv_fit(X: np.ndarray, p: np.ndarray, w: np.ndarray, s: LCSettings) -> tuple[np.ndarray, float]:
    """The reference's ``_glm_fit`` signature on :func:`glm_fits_cv` (pinned to it above)."""
    return glm_fits_cv([(X, p, w)], s.cs, s.n_splits, s.tol)[0]


def test_lc_win_rates_equal_the_reference(monkeypatch):
    # the rows, targets, lengths, difficulties and averages of the reference; its fit as pinned above
    monkeypatch.setattr(ref, "_glm_fit", _cv_fit)
    for seed in range(2):
        df = _battles(6, 300, seed, 50)
        for settings in (LCSettings(), LCSettings(difficulty="zero")):
            ours = lc_win_rates(df, "m0", settings=settings)
            _assert_same(ours, ref.lc_win_rates(df, "m0", settings=settings))
            assert np.isfinite(ours.lc_win_rate).sum() >= 5
        given = {str(i): float(np.sin(i)) for i in range(50)}
        _assert_same(lc_win_rates(df, "m0", difficulty=given), ref.lc_win_rates(df, "m0", difficulty=given))


def test_lc_win_rates_equal_the_unpatched_reference():
    df = _battles(3, 40, 9, 12)  # small: the reference solves its 26 sign patterns one by one
    _assert_same(lc_win_rates(df, "m0"), ref.lc_win_rates(df, "m0"))


def test_a_missing_given_difficulty_names_the_same_id():
    df = _battles(5, 200, 7, 30)
    given = {str(i): 0.1 * i for i in range(30) if i not in (3, 17)}
    with pytest.raises(InputError) as ours:
        lc_win_rates(df, "m0", difficulty=given)
    with pytest.raises(InputError) as theirs:
        ref.lc_win_rates(df, "m0", difficulty=given)
    assert str(ours.value) == str(theirs.value) and "no instruction difficulty for id" in str(ours.value)
