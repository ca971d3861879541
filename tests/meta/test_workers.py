"""Results do not depend on the number of worker processes (``Resampling.workers``).

The thresholds above which work is shared out (``PARALLEL_MIN_WORK`` per resample, ``PARALLEL_MIN_ITEMS``
per predictor) are set to 0 here so small inputs really run in forked workers; the results with 1, 2
and 3 workers must be identical, bit for bit (``array_equal``, ``DataFrame.equals``).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import evalign.meta.significance as sig
import evalign.meta.trust as trust
from evalign.meta.resampling import Resampling
from evalign.meta.significance import bootstrap_ci, paired_permutation_test
from evalign.meta.trust import trust_table_items, trust_table_pairs
from evalign.meta.workers import can_fork, parallel_map, worker_count

pytestmark = pytest.mark.skipif(not can_fork(), reason="worker processes are forked (POSIX only)")


@pytest.fixture
def always_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sig, "PARALLEL_MIN_WORK", 0)
    monkeypatch.setattr(trust, "PARALLEL_MIN_ITEMS", 0)


def _pid_after(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_parallel_map_keeps_task_order_and_uses_processes() -> None:
    big = np.arange(1000.0)  # a closure over an array: inherited by the forked workers, not pickled

    def fn(i: int) -> tuple[float, int]:
        return float(big[i] * 2), os.getpid()

    out = parallel_map(fn, range(40), workers=2)
    assert [v for v, _ in out] == [2.0 * i for i in range(40)]
    pids = {p for _, p in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert parallel_map(_pid_after, [3, 1, 2], workers=1) == [(9, os.getpid()), (1, os.getpid()), (4, os.getpid())]
    assert worker_count(None) >= 1 and worker_count(0) == worker_count(None) and worker_count(3) == 3


def _items(seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(5, 40))
    return h, h + rng.normal(size=h.shape), h + 2 * rng.normal(size=h.shape)


@pytest.mark.usefixtures("always_parallel")
@pytest.mark.parametrize(("statistic", "level", "grouping"),
                         [("kendall", "system", "none"), ("pearson", "item", "none"), ("kendall", "item", "item")])
def test_kernels_give_the_same_results_with_any_number_of_workers(statistic: str, level: str, grouping: str) -> None:
    h, a, b = _items()
    runs = {}
    for w in (1, 2, 3):
        r = Resampling(n_resamples=60, n_permutations=60, seed=4, method="items", workers=w)
        ci = bootstrap_ci(statistic, h, a, resampling=r, level=level, grouping=grouping)
        pt = paired_permutation_test(statistic, h, a, b, resampling=r, level=level, grouping=grouping)
        cell = paired_permutation_test(statistic, h, a, b, resampling=r, level=level, grouping=grouping,
                                       scheme="cell")
        runs[w] = (ci, pt, cell)
    for w in (2, 3):
        assert np.array_equal(runs[w][0].distribution, runs[1][0].distribution, equal_nan=True)
        assert runs[w][0] == runs[1][0]
        assert runs[w][1] == runs[1][1] and runs[w][2] == runs[1][2]


def _pairs(n: int = 300) -> tuple[pd.DataFrame, list[str]]:
    rng = np.random.default_rng(7)
    truth = rng.choice([-1.0, 0.0, 1.0], size=n)
    cols: dict[str, object] = {"id": [f"p{i}" for i in range(n)],
                               "task": rng.choice(["qa", "code", "chat"], size=n)}
    for k in range(3):
        cols[f"pref_{k}"] = np.where(rng.random(n) < 0.7, truth, rng.choice([-1.0, 0.0, 1.0], size=n))
    names = []
    for i in range(4):
        cols[f"m{i}_a"] = np.round((1 - 0.2 * i) * truth + rng.normal(size=n), 1)
        cols[f"m{i}_b"] = np.round(rng.normal(size=n), 1)
        names.append(f"m{i}")
    return pd.DataFrame(cols), names


@pytest.mark.usefixtures("always_parallel")
@pytest.mark.parametrize("method", ["auto", "items"])
def test_trust_tables_are_the_same_with_any_number_of_workers(method: str) -> None:
    pairs, names = _pairs()
    tables = [trust_table_pairs(pairs, ["pref_0", "pref_1", "pref_2"], names, by="task", min_group_size=20,
                                resampling=Resampling(n_resamples=80, n_permutations=80, method=method, workers=w))
              for w in (1, 2, 3)]
    assert tables[0].resampling == ("sufficient" if method == "auto" else "items")
    for t in tables[1:]:
        assert t.table.equals(tables[0].table) and t.notes == tables[0].notes
    h, a, b = _items()
    items = pd.DataFrame([{"id": f"i{j}", "system": f"s{s}", "human": h[s, j], "m1": a[s, j], "m2": b[s, j]}
                          for s in range(5) for j in range(40)])
    item_tables = [trust_table_items(items, "human", ["m1", "m2"], resampling=Resampling(
        n_resamples=40, n_permutations=40, method=method, workers=w)) for w in (1, 2)]
    assert item_tables[1].table.equals(item_tables[0].table)
