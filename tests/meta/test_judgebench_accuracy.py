"""JudgeBench's accuracy (:mod:`evalign.meta.judgebench`) on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalign.meta.judgebench import judgebench_accuracy, judgebench_accuracy_by

NAN = float("nan")


def test_points_per_game_and_the_sum_rule() -> None:
    # label A (+1) on every pair; games: (A, A) +2, (A, tie) +1, (A, none) +1, (A, B) 0, (tie, tie) 0,
    # (B, none) -1, (B, B) -2
    label = [1, 1, 1, 1, 1, 1, 1]
    g1 = [1, 1, 1, 1, 0, -1, -1]
    g2 = [1, 0, NAN, -1, 0, NAN, -1]
    r = judgebench_accuracy(label, g1, g2)
    assert (r.n, r.n_correct, r.n_incorrect, r.n_undecided) == (7, 3, 2, 2)
    assert r.accuracy == pytest.approx(3 / 7)


def test_label_b_is_mirrored() -> None:
    r = judgebench_accuracy([-1, -1, -1], [-1, 1, 0], [0, -1, 1])
    # (B, tie) +1 -> right; (A, B) 0 -> not; (tie, A) -1 -> wrong
    assert (r.n_correct, r.n_incorrect, r.n_undecided) == (1, 1, 1)
    assert r.accuracy == pytest.approx(1 / 3)


def test_groups_and_all() -> None:
    out = judgebench_accuracy_by([1, -1, 1, -1], [1, 1, -1, -1], [1, 1, -1, NAN], ["x", "y", "x", "y"])
    assert list(out) == ["(all)", "x", "y"]
    assert out["(all)"].accuracy == pytest.approx(2 / 4)
    assert out["x"].accuracy == pytest.approx(1 / 2) and out["x"].n_incorrect == 1
    assert out["y"].accuracy == pytest.approx(1 / 2) and out["y"].n_incorrect == 1


def test_no_pairs_and_bad_labels() -> None:
    assert math.isnan(judgebench_accuracy([], [], []).accuracy)
    with pytest.raises(ValueError, match="no ties"):
        judgebench_accuracy([1, 0], [1, 1], [1, 1])
    with pytest.raises(ValueError, match="one length"):
        judgebench_accuracy(np.ones(3), np.ones(2), np.ones(3))
