"""Agreement against the human ceiling: every value against scikit-learn's Cohen's kappa, the
bootstrap against a loop over the same resamples, the rule on cases with a known answer."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from evalign.errors import InputError
from evalign.meta.agreement import cohen_kappa
from evalign.meta.ceiling import agreement_ceiling, resample_counts
from evalign.meta.resampling import Resampling


def _noisy(truth: np.ndarray, rng: np.random.Generator, flip: float, lo: int = 1, hi: int = 5) -> np.ndarray:
    out = truth.astype(float).copy()
    change = rng.random(truth.size) < flip
    out[change] = rng.integers(lo, hi + 1, change.sum())
    return out


def _sk(x: np.ndarray, y: np.ndarray, quadratic: bool) -> float:
    keep = ~(np.isnan(x) | np.isnan(y))
    return float(cohen_kappa_score(x[keep], y[keep], weights="quadratic" if quadratic else None,
                                   labels=list(range(1, 6)) if quadratic else None))


@pytest.mark.parametrize("statistic", ["kappa", "quadratic_kappa"])
def test_values_equal_scikit_learn(statistic: str) -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, 300)
    humans = np.column_stack([_noisy(truth, rng, 0.3) for _ in range(4)])
    humans[rng.random(humans.shape) < 0.15] = np.nan  # annotators label different subsets
    judges = {"good": _noisy(truth, rng, 0.1), "bad": rng.integers(1, 6, 300).astype(float)}
    r = agreement_ceiling(humans, judges, annotators=list("abcd"), statistic=statistic,
                          resampling=Resampling(n_resamples=200))
    quad = statistic == "quadratic_kappa"
    pairs = {(p.a, p.b): p.value for p in r.annotator_pairs}
    assert len(pairs) == 6
    for (a, b), v in pairs.items():
        assert v == pytest.approx(_sk(humans[:, "abcd".index(a)], humans[:, "abcd".index(b)], quad), abs=1e-12)
        assert v == pytest.approx(cohen_kappa(humans[:, "abcd".index(a)], humans[:, "abcd".index(b)],
                                              weights="quadratic" if quad else None,
                                              labels=list(range(1, 6)) if quad else None), abs=1e-12)
    assert r.ceiling == pytest.approx(np.mean(list(pairs.values())), abs=1e-12)
    for j in r.judges:
        per = [_sk(judges[j.judge], humans[:, i], quad) for i in range(4)]
        assert [p.value for p in j.with_annotators] == pytest.approx(per, abs=1e-12)
        assert j.value == pytest.approx(np.mean(per), abs=1e-12)
        assert j.difference == pytest.approx(j.value - r.ceiling, abs=1e-12)
    good, bad = r.judges
    assert good.verdict == "above" and good.difference_low > 0
    assert bad.verdict == "below" and bad.difference_high < 0 and abs(bad.value) < 0.15


def test_bootstrap_equals_a_loop_over_the_same_resamples() -> None:
    rng = np.random.default_rng(1)
    truth = rng.integers(1, 4, 60)
    humans = np.column_stack([_noisy(truth, rng, 0.4, 1, 3) for _ in range(3)])
    judge = _noisy(truth, rng, 0.3, 1, 3)
    units = np.repeat(np.arange(20), 3)  # 20 items x 3 systems: items are resampled
    rs = Resampling(n_resamples=40, seed=7, confidence=0.9)
    r = agreement_ceiling(humans, {"j": judge}, statistic="kappa", units=units, resampling=rs)
    draws = np.random.default_rng(7).integers(0, 20, (40, 20))  # the resamples, drawn as bootstrap_ci draws them
    counts = np.array([np.bincount(d, minlength=20) for d in draws])
    assert (resample_counts(20, 40, 7) == counts).all()
    diffs, judge_means = [], []
    for row in counts:
        idx = np.repeat(np.repeat(np.arange(20), row.astype(int)) * 3, 3) + np.tile(np.arange(3), int(row.sum()))
        h = humans[idx]
        ceil = np.mean([cohen_kappa_score(h[:, a], h[:, b]) for a, b in ((0, 1), (0, 2), (1, 2))])
        jm = np.mean([cohen_kappa_score(judge[idx], h[:, a]) for a in range(3)])
        diffs.append(jm - ceil)
        judge_means.append(jm)
    lo, hi = np.quantile(diffs, [0.05, 0.95])
    j = r.judges[0]
    assert (j.difference_low, j.difference_high) == pytest.approx((lo, hi), abs=1e-9)
    assert (j.low, j.high) == pytest.approx(tuple(np.quantile(judge_means, [0.05, 0.95])), abs=1e-9)


def test_fractional_scores_use_the_value_scale() -> None:
    # quadratic-weighted kappa with value distances = Lin's concordance correlation: 2 cov / (vx + vy + (mx - my)^2)
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 3.0])
    y = np.array([1.5, 2.25, 2.75, 4.5, 4.0, 3.5])
    r = agreement_ceiling(np.column_stack([x, x]), {"geval": y}, statistic="quadratic_kappa",
                          resampling=Resampling(n_resamples=10))
    cov = np.mean((x - x.mean()) * (y - y.mean()))
    ccc = 2 * cov / (x.var() + y.var() + (x.mean() - y.mean()) ** 2)
    assert r.judges[0].value == pytest.approx(ccc, abs=1e-12)
    assert r.ceiling == 1.0


def test_checks() -> None:
    with pytest.raises(InputError, match="at least 2 annotators"):
        agreement_ceiling(np.ones((5, 1)), {"j": np.ones(5)})
    with pytest.raises(InputError, match="statistic"):
        agreement_ceiling(np.ones((5, 2)), {"j": np.ones(5)}, statistic="alpha")
    # one label only: kappa undefined, said so
    r = agreement_ceiling(np.ones((5, 2)), {"j": np.ones(5)}, resampling=Resampling(n_resamples=5))
    assert np.isnan(r.ceiling) and r.judges[0].verdict == "undefined"
