"""The one bootstrap loop of ``evalign.rank`` (:func:`evalign.rank.bootstrap.bootstrap`): its draws are
exactly numpy's ``multinomial`` / ``choice`` from one seeded generator, batching does not change
them, a tuple of fitted arrays keeps each array's dtype, and the statistics built on it draw what
they drew before (Bradley-Terry's battle and item resamples, sacrebleu's paired bootstrap)."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest

from evalign.rank import BTSettings, bradley_terry
from evalign.rank.bootstrap import bootstrap
from evalign.rank.system_significance import (
    MetricStatistics,
    SignificanceSettings,
    compare_systems,
    mean_score_fn,
)


def test_counts_are_numpys_multinomial_draws_whatever_the_batch() -> None:
    p = np.array([0.5, 0.25, 0.125, 0.125])
    rng = np.random.default_rng(7)
    expected = np.concatenate([rng.multinomial(40, p, size=3), rng.multinomial(40, p, size=3),
                               rng.multinomial(40, p, size=1)])
    batches: list[int] = []

    def fit(draws: np.ndarray) -> np.ndarray:
        batches.append(len(draws))
        return draws

    got = bootstrap(40, fit, 7, 7, p=p, chunk=3)
    assert batches == [3, 3, 1]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(bootstrap(40, lambda d: d, 7, 7, p=p), expected)  # one batch, same draws
    assert got.sum(axis=1).tolist() == [40] * 7


def test_indices_are_sacrebleus_draws_and_fit_sees_them() -> None:
    expected = np.random.default_rng(12345).choice(9, size=(5, 9), replace=True)
    np.testing.assert_array_equal(bootstrap(9, lambda d: d, 5, 12345, draw="indices"), expected)
    values = np.arange(9.0) ** 2
    means = bootstrap(9, lambda idx: values[idx].mean(axis=1), 5, 12345, draw="indices")
    np.testing.assert_array_equal(means, values[expected].mean(axis=1))


def test_arena_hard_shape_mean_win_rate() -> None:
    """A fitting function of the resampled battles: the mean score of each resample, as a loop over
    rounds of ``battles.sample(frac=1, replace=True)`` computes it (here with numpy's draws)."""
    wins = np.array([1.0, 0.0, 0.5, 1.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0])
    got = bootstrap(len(wins), lambda idx: wins[idx].mean(axis=1), 200, 3, draw="indices")
    rng = np.random.default_rng(3)
    idx = rng.choice(len(wins), size=(200, len(wins)), replace=True)
    assert got.shape == (200,)
    np.testing.assert_array_equal(got, np.array([wins[i].mean() for i in idx]))
    assert abs(got.mean() - wins.mean()) < 0.05


def test_a_tuple_of_fitted_arrays_keeps_each_dtype() -> None:
    a, b = bootstrap(6, lambda idx: (idx.sum(axis=1).astype(np.float32), idx.max(axis=1)), 4, 1, draw="indices")
    assert a.dtype == np.float32 and a.shape == (4,) and b.shape == (4,)
    a2, b2 = bootstrap(6, lambda c: (c[:, :1].astype(np.float32), c[:, 1:]), 5, 1, chunk=2)
    assert a2.dtype == np.float32 and a2.shape == (5, 1) and b2.shape == (5, 5)


@pytest.mark.parametrize("bad", [dict(n_rounds=-1), dict(draw="other"), dict(draw="indices", p=np.ones(3) / 3)])
def test_bad_settings(bad: dict[str, object]) -> None:
    kw: dict[str, object] = {"n_rounds": 2, **bad}
    n_rounds = kw.pop("n_rounds")
    with pytest.raises(ValueError):
        bootstrap(3, lambda d: d, n_rounds, 0, **kw)  # type: ignore[arg-type]


def _battles() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    systems = ["a", "b", "c", "d"]
    rows = []
    for i in range(120):
        x, y = rng.choice(4, size=2, replace=False)
        rows.append({"id": f"q{i % 40}", "system_a": systems[x], "system_b": systems[y],
                     "verdict": rng.choice(["A", "B", "tie"], p=[0.3 + 0.1 * (x < y), 0.5 - 0.1 * (x < y), 0.2])})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("cluster", [False, True])
def test_bradley_terry_resamples_are_seeded_and_batch_free(cluster: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    bt = importlib.import_module("evalign.rank.bradley_terry")  # the package's name is the function

    s = BTSettings(n_bootstrap=300, seed=5, cluster=cluster)
    one = bradley_terry(_battles(), settings=s)
    monkeypatch.setattr(bt, "_CHUNK", 7)  # other batches, the same rounds
    other = bradley_terry(_battles(), settings=s)
    assert one.boot.shape == (300, 4)
    np.testing.assert_allclose(other.boot, one.boot, rtol=0, atol=1e-9)
    assert np.all(one.ci_low <= one.rating) and np.all(one.rating <= one.ci_high)


def test_system_significance_draws_every_system_on_the_same_resamples() -> None:
    rng = np.random.default_rng(1)
    vals = {s: rng.normal(size=30) + i for i, s in enumerate(["x", "y", "z"])}
    stats = {s: np.column_stack([v, np.ones_like(v)]) for s, v in vals.items()}
    ms = MetricStatistics("m", stats, mean_score_fn)
    res = compare_systems(ms, settings=SignificanceSettings(n_bootstrap=50, n_ar=50, seed=9))
    idx = np.random.default_rng(9).choice(30, size=(50, 30), replace=True)
    for r in res:
        boot = vals[r.system][idx].mean(axis=1)
        assert r.mean == pytest.approx(float(boot.mean()), abs=1e-12)
