"""Agreement statistics against independent implementations (scikit-learn, statsmodels, krippendorff)
and small hand-computed cases."""

from __future__ import annotations

import itertools
from collections import Counter

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from evalign.errors import InputError
from evalign.meta.agreement import (
    aggregate_ratings,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    letter_to_number,
    majority_vote,
    mean_pairwise_kendall,
)

# ------------------------------------------------------------------------------------------------
# Majority vote and aggregation
# ------------------------------------------------------------------------------------------------


def test_majority_vote_hand_cases() -> None:
    labels = np.array(
        [
            [1, 1, -1],
            [1, -1, 0],  # no majority -> tie
            [0, 0, 1],
            [np.nan, -1, np.nan],
            [np.nan, np.nan, np.nan],
            [1, -1, np.nan],  # 1-1 -> tie
        ]
    )
    out = majority_vote(labels)
    assert out[:4].tolist() == [1.0, 0.0, 0.0, -1.0]
    assert np.isnan(out[4])
    assert out[5] == 0.0
    assert np.isnan(majority_vote(labels, fallback=np.nan)[1])
    # plurality vs strict majority
    four = np.array([[1, 1, -1, 0]])
    assert majority_vote(four)[0] == 1.0
    assert majority_vote(four, strict=True, fallback=9.0)[0] == 9.0


def test_majority_vote_random_against_loop() -> None:
    rng = np.random.default_rng(0)
    labels = rng.choice([1.0, 2.0, 3.0, np.nan], size=(300, 5), p=[0.3, 0.3, 0.3, 0.1])
    out = majority_vote(labels, fallback=-7.0)
    for row, got in zip(labels.tolist(), out.tolist(), strict=True):
        votes = [v for v in row if v == v]
        counts = {v: votes.count(v) for v in set(votes)}
        top = max(counts.values())
        winners = [v for v, c in counts.items() if c == top]
        assert got == (winners[0] if len(winners) == 1 else -7.0)


def test_aggregate_ratings() -> None:
    r = np.array([[1.0, 2.0, 4.0], [3.0, np.nan, 3.0], [np.nan, np.nan, np.nan], [2.0, 2.0, 5.0]])
    mean = aggregate_ratings(r, "mean")
    assert mean[:2].tolist() == [7 / 3, 3.0] and np.isnan(mean[2]) and mean[3] == 3.0
    med = aggregate_ratings(r, "median")
    assert med[[0, 1, 3]].tolist() == [2.0, 3.0, 2.0] and np.isnan(med[2])
    maj = aggregate_ratings(r, "majority")
    assert np.isnan(maj[0]) and maj[1] == 3.0 and maj[3] == 2.0
    assert aggregate_ratings(r, "majority", fallback=0.0)[0] == 0.0
    with pytest.raises(InputError, match="how"):
        aggregate_ratings(r, "mode")  # type: ignore[arg-type]


def test_letter_to_number() -> None:
    res = letter_to_number(["A", " b", "D", None, "c", float("nan"), ""])
    assert res.values[[0, 1, 2, 4]].tolist() == [1.0, 2.0, 4.0, 3.0]
    assert np.isnan(res.values[[3, 5, 6]]).all()
    assert res.higher_is_better is False
    custom = letter_to_number(["good", "bad"], mapping={"good": 1.0, "bad": 0.0})
    assert custom.values.tolist() == [1.0, 0.0] and custom.higher_is_better is True
    with pytest.raises(InputError, match="position 1"):
        letter_to_number(["A", "E"])


# ------------------------------------------------------------------------------------------------
# Cohen's kappa vs scikit-learn
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn(weights: str | None) -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(5, 60))
        a = rng.integers(1, 6, size=n)
        b = np.where(rng.random(n) < 0.6, a, rng.integers(1, 6, size=n))
        want = cohen_kappa_score(a, b, weights=weights)
        assert cohen_kappa(a, b, weights=weights) == pytest.approx(want, abs=1e-12)  # type: ignore[arg-type]


def test_cohen_kappa_missing_strings_and_labels() -> None:
    a = np.array([1.0, 2.0, np.nan, 3.0, 1.0, 2.0])
    b = np.array([1.0, 2.0, 2.0, np.nan, 2.0, 2.0])
    keep = [0, 1, 4, 5]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a[keep], b[keep]))
    x = ["yes", "no", "yes", "yes", None]
    y = ["yes", "no", "no", "yes", "no"]
    assert cohen_kappa(np.array(x, dtype=object), np.array(y, dtype=object)) == pytest.approx(
        cohen_kappa_score(x[:4], y[:4])
    )
    lab = [1, 2, 3, 4]
    aa, bb = [1, 2, 4, 4, 1], [1, 4, 4, 2, 1]
    assert cohen_kappa(aa, bb, weights="linear", labels=lab) == pytest.approx(
        cohen_kappa_score(aa, bb, weights="linear", labels=lab)
    )
    # hand case: po = 0.5, pe = 0.5 -> kappa 0
    assert cohen_kappa([1, 1, 2, 2], [1, 2, 1, 2]) == 0.0
    assert np.isnan(cohen_kappa([1, 1], [1, 1]))


# ------------------------------------------------------------------------------------------------
# Fleiss' kappa vs statsmodels
# ------------------------------------------------------------------------------------------------


def test_fleiss_kappa_matches_statsmodels() -> None:
    rng = np.random.default_rng(2)
    for _ in range(40):
        n, k = int(rng.integers(3, 40)), int(rng.integers(2, 7))
        truth = rng.integers(0, 4, size=(n, 1))
        ratings = np.where(rng.random((n, k)) < 0.5, truth, rng.integers(0, 4, size=(n, k))).astype(float)
        table, _ = aggregate_raters(ratings.astype(int))
        assert fleiss_kappa(ratings) == pytest.approx(sm_fleiss_kappa(table, method="fleiss"), abs=1e-12)


def test_fleiss_kappa_hand_case_and_errors() -> None:
    # Fleiss (1971)-style small table: 3 raters, perfect agreement -> 1
    assert fleiss_kappa(np.array([[1, 1, 1], [2, 2, 2], [3, 3, 3]])) == pytest.approx(1.0)
    # two raters always disagreeing over two balanced categories: Pbar = 0, Pe = 0.5 -> -1
    assert fleiss_kappa(np.array([[1, 2], [2, 1]])) == pytest.approx(-1.0)
    with pytest.raises(InputError, match="same number"):
        fleiss_kappa(np.array([[1, 2, np.nan], [1, 1, 1]]))


# ------------------------------------------------------------------------------------------------
# Krippendorff's alpha vs the krippendorff package
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_matches_package(level: str) -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        k, n = int(rng.integers(2, 6)), int(rng.integers(4, 40))
        truth = rng.integers(1, 6, size=(1, n))
        data = np.where(rng.random((k, n)) < 0.6, truth, rng.integers(1, 6, size=(k, n))).astype(float)
        data[rng.random((k, n)) < 0.2] = np.nan
        if np.unique(data[~np.isnan(data)]).size < 2 or ((~np.isnan(data)).sum(axis=0) < 2).all():
            continue
        want = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert krippendorff_alpha(data, level=level) == pytest.approx(want, abs=1e-10)  # type: ignore[arg-type]


def test_krippendorff_hand_case() -> None:
    # Krippendorff (2011), nominal example with missing values: alpha = 0.743
    data = np.array(
        [
            [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
            [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
        ]
    )
    assert krippendorff_alpha(data, level="nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, level="interval") == pytest.approx(0.849, abs=5e-4)
    for level in ("nominal", "interval"):
        assert krippendorff_alpha(data, level=level) == pytest.approx(
            krippendorff.alpha(reliability_data=data, level_of_measurement=level), abs=1e-12
        )
    with pytest.raises(InputError, match="level"):
        krippendorff_alpha(data, level="cardinal")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# Mean pairwise Kendall
# ------------------------------------------------------------------------------------------------


def test_mean_pairwise_kendall_against_scipy_loop() -> None:
    rng = np.random.default_rng(4)
    ratings = rng.integers(1, 6, size=(30, 4)).astype(float)
    ratings[rng.random(ratings.shape) < 0.15] = np.nan
    taus = []
    for i, j in itertools.combinations(range(4), 2):
        both = ~(np.isnan(ratings[:, i]) | np.isnan(ratings[:, j]))
        taus.append(stats.kendalltau(ratings[both, i], ratings[both, j]).statistic)
    assert mean_pairwise_kendall(ratings) == pytest.approx(np.mean(taus), abs=1e-12)
    with pytest.raises(InputError, match="two annotators"):
        mean_pairwise_kendall(ratings[:, :1])


def test_majority_vote_matches_a_vote_count_row_by_row() -> None:
    """The vectorised vote (a category at a time) against counting each row's votes in Python."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        n, k, c = (int(x) for x in (rng.integers(1, 40), rng.integers(2, 7), rng.integers(1, 6)))
        arr = rng.integers(0, c, size=(n, k)).astype(float) * 0.5 - 1.0
        arr[rng.random((n, k)) < rng.random() * 0.5] = np.nan
        for strict in (False, True):
            want = []
            for row in arr:
                votes = Counter(float(v) for v in row if not np.isnan(v))
                if not votes:
                    want.append(np.nan)
                    continue
                (top, m), *rest = votes.most_common()
                unique = not rest or rest[0][1] < m
                want.append(top if unique and (not strict or 2 * m > sum(votes.values())) else 7.0)
            np.testing.assert_array_equal(majority_vote(arr, fallback=7.0, strict=strict), np.array(want))
