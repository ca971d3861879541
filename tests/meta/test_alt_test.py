"""The Alt-Test: hand-computed small cases, the kernels against scipy / statsmodels, and parity with
upstream's ``alt_test()`` on all nine of its sets, all their judges and six epsilons: against the outputs
upstream's code returned, kept in the data folder (no upstream code runs here)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from evalign.errors import InputError
from evalign.meta.alt_test import (
    AltTestSettings,
    alt_test,
    alt_test_dicts,
    alt_test_many,
    benjamini_yekutieli,
    code_labels,
    epsilon_for,
    per_item_scorer,
    register_scoring,
    t_test_less,
)

ALTTEST = Path(os.environ["EVALIGN_DATA_DIR"]) / "alttest"
#: upstream's epsilon per set (SOURCE.md) and its scoring function
SETS = {
    "wax": (0.1, "accuracy"), "lgbteen": (0.2, "accuracy"), "mtbench": (0.2, "accuracy"),
    "framing": (0.15, "accuracy"), "cebab_aspects": (0.1, "accuracy"), "summeval": (0.2, "neg_rmse"),
    "10k_prompts": (0.15, "neg_rmse"), "cebab_stars": (0.1, "neg_rmse"), "lesion": (0.15, "neg_rmse"),
}  # fmt: skip
SMALL = {"min_items": 2}


def hand_t_p(d: list[float], eps: float) -> float:
    """The one-sided t-test p-value written out: t = (mean - eps) / (sd / sqrt(n)), P(T_{n-1} <= t)."""
    x = np.asarray(d, dtype=float)
    t = (x.mean() - eps) / (x.std(ddof=1) / np.sqrt(x.size))
    return float(stats.t.cdf(t, x.size - 1))


# ------------------------------------------------------------------------------------------------
# hand-computed cases


def test_hand_case_labels() -> None:
    # items x annotators (a, b, c) and the judge; worked out in the comments
    humans = [["x", "x", "y"], ["x", "y", "y"], ["y", "y", "y"], ["x", "x", "x"]]
    judge = ["x", "y", "x", "x"]
    r = alt_test(humans, judge, annotators=["a", "b", "c"], settings=AltTestSettings(epsilon=0.2, **SMALL))
    # leave out a: item 1 others {x, y}: a 1/2, judge 1/2 (both win); item 2 others {y, y}: a 0, judge 1;
    # item 3 others {y, y}: a 1, judge 0; item 4 others {x, x}: both 1 -> W^h - W^f = 0, -1, 1, 0
    # leave out b: 1/2 vs 1/2, 1/2 vs 1/2, 1 vs 0, 1 vs 1 -> 0, 0, 1, 0
    # leave out c: 0 vs 1, 1/2 vs 1/2, 1 vs 0, 1 vs 1 -> -1, 0, 1, 0
    assert r.scoring == "accuracy"
    assert [a.annotator for a in r.annotators] == ["a", "b", "c"]
    assert [a.advantage_probability for a in r.annotators] == [0.75, 0.75, 0.75]
    assert [a.human_advantage_probability for a in r.annotators] == [0.75, 1.0, 0.75]  # ties count for both
    expected = [hand_t_p([0, -1, 1, 0], 0.2), hand_t_p([0, 0, 1, 0], 0.2), hand_t_p([-1, 0, 1, 0], 0.2)]
    assert [a.p_value for a in r.annotators] == pytest.approx(expected, rel=1e-12)
    assert expected[0] == pytest.approx(0.3288, abs=1e-4) and expected[1] == pytest.approx(0.5729, abs=1e-4)
    # BY thresholds for m = 3: r / 3 * 0.05 / (1 + 1/2 + 1/3) = 0.0091, 0.0182, 0.0273: none rejected
    assert r.winning_rate == 0.0 and r.passed is False
    assert r.advantage_probability == 0.75
    assert r.n_items == 4 and r.dropped() == []


def test_hand_case_numbers_and_constant_samples() -> None:
    # every annotator and the judge agree on each of 40 items: every leave-one-out is a tie, so
    # W^h - W^f is 0 throughout: a constant sample below epsilon (t = -inf, p = 0, as scipy says)
    rng = np.random.default_rng(0)
    grade = rng.integers(1, 6, 40).astype(float)
    humans = np.column_stack([grade, grade, grade])
    r = alt_test(humans, grade, settings=AltTestSettings(epsilon=0.1))
    assert r.scoring == "neg_rmse"
    assert [a.p_value for a in r.annotators] == [0.0, 0.0, 0.0]
    assert r.winning_rate == 1.0 and r.advantage_probability == 1.0 and r.passed is True
    # a judge always one point off: the annotators win every item (W^h - W^f = 1 > epsilon: p = 1)
    r = alt_test(humans, grade + 1, settings=AltTestSettings(epsilon=0.1))
    assert [a.p_value for a in r.annotators] == [1.0, 1.0, 1.0]
    assert r.winning_rate == 0.0 and r.advantage_probability == 0.0


def test_neg_rmse_hand_case() -> None:
    humans = [[1, 2, 4], [3, 3, 5], [5, 4, 4]]
    judge = [2, 4, 4]
    r = alt_test(humans, judge, annotators=["a", "b", "c"], settings=AltTestSettings(epsilon=0.0, **SMALL))
    # leave out a: item 1 others {2, 4}: a 1 -> -sqrt((1 + 9) / 2), judge 2 -> -sqrt((0 + 4) / 2): judge wins;
    # item 2 others {3, 5}: a 3 -> -sqrt(2), judge 4 -> -1: judge wins; item 3 others {4, 4}: a 5 -> -1,
    # judge 4 -> 0: judge wins -> W^f = 1, 1, 1
    a = r.annotators[0]
    assert a.advantage_probability == 1.0 and a.human_advantage_probability == 0.0
    assert a.p_value == 0.0  # constant -1 < 0
    # leave out c: item 1 others {1, 2}: c 4 -> -sqrt((9 + 4) / 2), judge 2 -> -sqrt(1 / 2): judge wins;
    # item 2 {3, 3}: c 5 -> -2, judge 4 -> -1: judge; item 3 {5, 4}: c 4 -> -sqrt(1/2), judge 4: tie
    c = r.annotators[2]
    assert c.advantage_probability == 1.0 and c.human_advantage_probability == pytest.approx(1 / 3)
    assert c.p_value == pytest.approx(hand_t_p([-1, -1, 0], 0.0), rel=1e-12)


def test_minimums_are_applied_and_reported() -> None:
    n = 40
    rng = np.random.default_rng(1)
    humans = rng.integers(0, 3, (n, 4)).astype(object)
    humans[:, 3] = None
    humans[:5, 3] = 1  # annotator 3: 5 items only
    humans[30:33, 1:] = None  # items 30-32: one annotator
    judge = rng.integers(0, 3, n).astype(object)
    judge[35] = None  # no judge label
    r = alt_test(humans, judge, annotators=["a", "b", "c", "d"],
                 settings=AltTestSettings(epsilon=0.2, scoring="accuracy"))
    assert r.n_items_few_annotators == 3 and r.n_items_no_judge == 1 and r.n_items == 36
    assert r.dropped_annotators == (("d", 5),)
    assert [a.annotator for a in r.annotators] == ["a", "b", "c"]
    assert r.annotators[0].n_items == 36 and r.annotators[1].n_items == 36
    assert r.dropped() == ["3 item(s) with fewer than 2 annotators", "1 item(s) without a label of judge",
                           "1 annotator(s) with fewer than 30 items: d (5)"]


def test_no_annotator_left_is_a_reason_not_a_crash() -> None:
    humans = [["x", "y"], ["x", "x"]]
    r = alt_test(humans, ["x", "x"], settings=AltTestSettings())
    assert r.reason is not None and "30 items" in r.reason
    assert np.isnan(r.winning_rate) and r.passed is None


def test_labels_compare_as_python_compares_them() -> None:
    coded = code_labels([[1, 1.0], ["1", None]], {"j": [True, float("nan")]}, categorical=True)
    # 1, 1.0 and True are one label; "1" is another; None and NaN are no label
    assert coded.humans[0, 0] == coded.humans[0, 1] == coded.judges["j"][0]
    assert coded.humans[1, 0] != coded.humans[0, 0]
    assert np.isnan(coded.humans[1, 1]) and np.isnan(coded.judges["j"][1])
    with pytest.raises(InputError, match="numeric scoring needs numbers"):
        alt_test([["a", "b"]] * 3, ["a"] * 3, settings=AltTestSettings(scoring="neg_rmse", **SMALL))


def test_settings_are_checked() -> None:
    with pytest.raises(InputError, match="epsilon"):
        AltTestSettings(epsilon=1.5)
    with pytest.raises(InputError, match="scoring"):
        AltTestSettings(scoring="f1")
    with pytest.raises(InputError, match="min_items"):
        AltTestSettings(min_items=1)
    assert epsilon_for("experts")[0] == 0.2 and epsilon_for("Skilled")[0] == 0.15 and epsilon_for("crowd")[0] == 0.1
    assert epsilon_for(None)[0] == 0.1
    with pytest.raises(InputError, match="annotator kind"):
        epsilon_for("students")


# ------------------------------------------------------------------------------------------------
# kernels against the libraries


def test_t_test_matches_scipy_on_random_samples() -> None:
    rng = np.random.default_rng(2)
    for trial in range(300):
        n = int(rng.integers(2, 60))
        probs = rng.dirichlet([1, 1, 1])
        d = rng.choice([-1, 0, 1], size=n, p=probs)
        if trial % 10 == 0:
            d = np.full(n, rng.choice([-1, 0, 1]))  # constant samples
        eps = float(rng.choice([0.0, 0.1, 0.15, 0.2, 1.0]))
        ours = t_test_less(np.array([(d == 1).sum()]), np.array([(d == -1).sum()]), np.array([n]), eps)[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = stats.ttest_1samp(d, eps, alternative="less").pvalue
        if np.isnan(theirs):
            assert np.isnan(ours)
        else:
            assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-15)


def test_benjamini_yekutieli_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        m = int(rng.integers(1, 20))
        p = rng.beta(0.3, 1.0, m)
        for q in (0.05, 0.1):
            assert benjamini_yekutieli(p, q).tolist() == multipletests(p, alpha=q, method="fdr_by")[0].tolist()


# ------------------------------------------------------------------------------------------------
# parity with upstream: its outputs, computed from upstream's ``alt_test()`` and kept in the data folder
# (``alttest/reference/upstream_outputs.json``; no upstream code runs here)


@pytest.fixture(scope="module")
def upstream() -> dict:
    """What upstream's ``alt_test()`` returned on every set x judge x epsilon (see the file's ``about``)."""
    path = ALTTEST / "reference" / "upstream_outputs.json"
    if not path.is_file():
        pytest.fail(f"upstream's Alt-Test outputs are missing: expected {path} (see alttest/SOURCE.md)")
    return json.loads(path.read_text(encoding="utf-8"))


def _check(r: object, up: dict, what: str) -> None:
    """One evalign result against upstream's record: both return values exactly, every p-value to 1e-9."""
    assert (r.winning_rate, r.advantage_probability) == (up["winning_rate"], up["advantage_prob"]), what
    assert [t.annotator for t in r.annotators] == up["annotators"], what
    assert [t.n_items for t in r.annotators] == up["n_items"], what
    ours = np.array([t.p_value for t in r.annotators], dtype=float)
    theirs = np.array(up["p_values"], dtype=float)
    assert np.array_equal(np.isnan(ours), np.isnan(theirs)), what
    ok = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[ok], theirs[ok], rtol=1e-9, atol=1e-300, err_msg=what)
    assert r.n_items_few_annotators + r.n_items_no_judge == up["dropped_instances"], what
    assert [list(d) for d in r.dropped_annotators] == up["skipped_annotators"], what


def test_reference_covers_every_set_judge_and_epsilon(upstream: dict) -> None:
    assert set(upstream["sets"]) == set(SETS)
    assert upstream["epsilons"] == [0.0, 0.05, 0.1, 0.15, 0.2, 0.3]
    n = 0
    for name, (eps, scoring) in SETS.items():
        rec = upstream["sets"][name]
        assert (rec["epsilon"], rec["scoring"]) == (eps, scoring), name
        judges = json.loads((ALTTEST / name / "llm_annotations.json").read_text())
        assert list(rec["judges"]) == list(judges), name
        n += len(judges)
    assert n == 52  # 52 set x judge pairs


@pytest.mark.parametrize("name", list(SETS))
def test_parity_with_upstream_on_every_set_judge_and_epsilon(upstream: dict, name: str) -> None:
    rec = upstream["sets"][name]
    humans = json.loads((ALTTEST / name / "human_annotations.json").read_text())
    judges = json.loads((ALTTEST / name / "llm_annotations.json").read_text())
    assert len(judges) >= 4
    for eps in upstream["epsilons"]:
        ours = alt_test_dicts(humans, judges, settings=AltTestSettings(epsilon=eps))
        assert set(ours) == set(judges)
        for j in judges:
            assert ours[j].scoring == rec["scoring"]
            _check(ours[j], rec["judges"][j][repr(eps)], f"{name} / {j} / epsilon {eps}")


def test_parity_with_a_registered_scoring_function(upstream: dict) -> None:
    case = upstream["custom_scoring"][0]
    assert (case["set"], case["judge"], case["epsilon"]) == ("cebab_stars", "gpt-4o", 0.1)
    assert case["scoring"].startswith("neg_mae:")
    name = "neg_mae_test"

    @register_scoring(name)
    def neg_mae_scorer(pred: np.ndarray, others: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return per_item_scorer(lambda v, anns: -float(np.mean(np.abs(np.asarray(anns) - v))))(pred, others, mask)

    humans = json.loads((ALTTEST / "cebab_stars" / "human_annotations.json").read_text())
    judges = json.loads((ALTTEST / "cebab_stars" / "llm_annotations.json").read_text())
    table, judge, names = _table(humans, judges["gpt-4o"])
    ours = alt_test_many(table, judge, annotators=names, settings=AltTestSettings(epsilon=0.1, scoring=name))
    r = ours["gpt-4o"]
    assert r.scoring == name
    _check(r, case, "cebab_stars / gpt-4o / neg_mae")


def _table(humans: dict, llm: dict) -> tuple[np.ndarray, dict, list[str]]:
    items = sorted({i for anns in humans.values() for i in anns})
    table = np.array([[humans[h].get(i) for h in humans] for i in items], dtype=object)
    return table, {"gpt-4o": [llm.get(i) for i in items]}, list(humans)


def test_items_without_annotators_do_not_count(upstream: dict) -> None:
    humans = json.loads((ALTTEST / "mtbench" / "human_annotations.json").read_text())
    judges = json.loads((ALTTEST / "mtbench" / "llm_annotations.json").read_text())
    r = alt_test_dicts(humans, judges, settings=AltTestSettings(epsilon=0.2))["gpt-4o"]
    up = upstream["sets"]["mtbench"]["judges"]["gpt-4o"]["0.2"]
    # MT-Bench: 120 items, some labelled by one annotator only; upstream printed no 'Dropped' line
    assert r.n_items_few_annotators + r.n_items_no_judge == up["dropped_instances"]
    assert r.n_items + up["dropped_instances"] == 120
    # each annotator is tested on the items they labelled among those kept
    assert [a.n_items for a in r.annotators] == up["n_items"]
