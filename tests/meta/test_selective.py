"""Selective judging with a guarantee (:mod:`evalign.meta.selective`): the bound against scipy,
thresholds on hand-computed cases, the three cases where evalign abstains, cascades, and parity
with upstream's rule (Trust or Escalate) on its three released calibration files."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import beta, binom, binomtest

from evalign.errors import InputError
from evalign.meta.selective import (
    SelectiveSettings,
    apply_thresholds,
    calibrate,
    calibrate_cascade,
    risk_upper_bound,
)

JUDGES = ("mistral-7b-instruct", "gpt-3.5-turbo", "gpt-4-turbo")
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


# ------------------------------------------------------------------------------------------------
# the bound


@pytest.mark.parametrize(("k", "n", "delta"), [(0, 30, 0.1), (3, 30, 0.1), (7, 40, 0.05), (29, 30, 0.2),
                                                (150, 1000, 0.1)])
def test_bound_is_the_clopper_pearson_upper_limit(k: int, n: int, delta: float) -> None:
    got = float(risk_upper_bound(k, n, delta))
    # one-sided upper limit at 1 - delta = the upper end of the two-sided exact interval at 1 - 2 delta
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - 2 * delta, method="exact")
    assert got == pytest.approx(ci.high, abs=1e-10)
    assert binom.cdf(k, n, got) == pytest.approx(delta, abs=1e-9)  # P(Bin(n, r) <= k) = delta
    assert got == pytest.approx(beta.ppf(1 - delta, k + 1, n - k), abs=1e-12)


def test_bound_edges_vectorised() -> None:
    got = risk_upper_bound(np.array([0, 5, 5, 0]), np.array([10, 5, 10, 0]), 0.1)
    assert got[0] == pytest.approx(1 - 0.1 ** (1 / 10), abs=1e-12)  # k = 0: 1 - delta^(1/n)
    assert got[1] == 1.0
    assert got[2] == pytest.approx(beta.ppf(0.9, 6, 5), abs=1e-12)
    assert math.isnan(got[3])


# ------------------------------------------------------------------------------------------------
# thresholds by hand


def _hand_case() -> tuple[np.ndarray, np.ndarray]:
    """40 items at confidence 0.95 all right, 20 at 0.65 of which 10 wrong, 40 at 0.35 of which 30 wrong."""
    c = np.r_[np.full(40, 0.95), np.full(20, 0.65), np.full(40, 0.35)]
    y = np.r_[np.ones(40), np.ones(10), np.zeros(10), np.ones(10), np.zeros(30)].astype(bool)
    return c, y


def test_threshold_hand_computed() -> None:
    c, y = _hand_case()
    s = SelectiveSettings(alpha=0.2, delta=0.1, grid=11)  # grid 0, 0.1, ..., 1
    # candidates with >= 30 items at or above: 0.0 ... 0.9 (0.9: 40 items); 1.0 has none.
    # 0.9..0.7: 0 of 40 wrong, bound 1 - 0.1^(1/40) = 0.0559 <= 0.2; 0.6..0.4: 10 of 60 wrong,
    # bound beta.ppf(0.9, 11, 50) = 0.2458 > 0.2: stop, keep 0.7.
    assert beta.ppf(0.9, 11, 50) > 0.2 > 1 - 0.1 ** (1 / 40)
    r = calibrate(c, y, s)
    assert r.threshold == pytest.approx(0.7)
    assert (r.n_decided, r.n_correct, r.n) == (40, 40, 100)
    assert r.coverage == 0.4 and r.selective_accuracy == 1.0
    assert r.risk_bound == pytest.approx(1 - 0.1 ** (1 / 40))
    assert r.reason is None and not r.abstains
    # at alpha 0.3 the 60-item set passes (0.2458); at 0.3 and below the 100-item set: 40 wrong, fails
    r = calibrate(c, y, SelectiveSettings(alpha=0.3, delta=0.1, grid=11))
    assert r.threshold == pytest.approx(0.4) and r.n_decided == 60 and r.selective_accuracy == pytest.approx(50 / 60)
    assert r.risk_bound == pytest.approx(beta.ppf(0.9, 11, 50))
    # alpha 0.5: every candidate passes (40 of 100 wrong: bound beta.ppf(0.9, 41, 60) = 0.465): threshold 0
    assert beta.ppf(0.9, 41, 60) < 0.5
    r = calibrate(c, y, SelectiveSettings(alpha=0.5, delta=0.1, grid=11))
    assert r.threshold == 0.0 and r.coverage == 1.0 and r.n_candidates == 10


def test_settings_positional_or_keyword_and_checked() -> None:
    c, y = _hand_case()
    s = SelectiveSettings(0.2, 0.1, 30, 11)
    assert calibrate(c, y, s).threshold == calibrate(c, y, settings=s).threshold
    for bad in ({"alpha": 0.0, "delta": 0.1}, {"alpha": 0.2, "delta": 1.0}, {"alpha": 0.2, "delta": 0.1, "grid": 1},
                {"alpha": 0.2, "delta": 0.1, "min_items": 0}, {"alpha": True, "delta": 0.1}):
        with pytest.raises(InputError):
            SelectiveSettings(**bad)
    with pytest.raises(AttributeError):
        s.alpha = 0.3  # type: ignore[misc]  # frozen


def test_confidence_outside_unit_interval_refused() -> None:
    s = SelectiveSettings(alpha=0.2, delta=0.1)
    for bad in (1.2, -0.01, float("nan")):
        with pytest.raises(InputError, match=r"field 'confidence'.*\[0, 1\]; item 2"):
            calibrate([0.5, bad, 0.7], [True, False, True], s)
    with pytest.raises(InputError, match="correct"):
        calibrate([0.5, 0.6], [1, 2], s)
    with pytest.raises(InputError, match="2 confidences but 3"):
        calibrate([0.5, 0.6], [1, 0, 1], s)


# ------------------------------------------------------------------------------------------------
# the three cases where evalign abstains


def test_abstains_when_the_highest_candidate_fails() -> None:
    c = np.linspace(0.5, 1.0, 100)
    y = np.arange(100) % 2 == 0  # half wrong everywhere
    r = calibrate(c, y, SelectiveSettings(alpha=0.15, delta=0.1))
    assert r.abstains and r.threshold == math.inf and r.coverage == 0.0 and r.n_decided == 0
    assert math.isnan(r.selective_accuracy)
    assert r.risk_bound > 0.15 and r.risk_bound == pytest.approx(float(r.bounds[0]))
    assert "highest candidate" in (r.reason or "") and "upstream keeps" in (r.reason or "")


def test_abstains_with_too_few_items() -> None:
    r = calibrate(np.full(29, 0.99), np.ones(29, dtype=bool), SelectiveSettings(alpha=0.15, delta=0.1))
    assert r.abstains and r.n_candidates == 0 and r.n == 29
    assert "fewer than 30 calibration items (29)" in (r.reason or "")
    assert "upstream accepts every verdict" in (r.reason or "")


def test_cascade_whose_second_judge_abstains() -> None:
    rng = np.random.default_rng(3)
    n = 200
    c1 = rng.uniform(0.5, 1.0, n)
    y1 = rng.uniform(size=n) < 0.4 + 0.6 * c1  # confident verdicts mostly right
    c2 = rng.uniform(0.5, 1.0, n)
    y2 = rng.uniform(size=n) < 0.5  # a second judge no better than a coin
    s = SelectiveSettings(alpha=0.2, delta=0.1)
    cas = calibrate_cascade({"a": (c1, y1), "b": (c2, y2)}, ["a", "b"], s)
    first = calibrate(c1, y1, s)
    assert cas.thresholds[0] == first.threshold and math.isfinite(first.threshold)
    assert cas.thresholds[1] == math.inf and cas.stages[1].abstains
    assert cas.decided == {"a": first.n_decided / n, "b": 0.0}
    assert cas.coverage == first.coverage and cas.selective_accuracy == first.selective_accuracy
    assert cas.stages[1].n == n - first.n_decided  # calibrated on what the first judge left
    assert cas.delta_union == pytest.approx(0.1)  # one stage gives verdicts
    assert cas.to_people == pytest.approx(1 - first.coverage)


def test_cascade_stage_with_too_few_items_left_abstains() -> None:
    c1 = np.r_[np.full(88, 0.95), np.full(12, 0.2)]
    y1 = np.r_[np.ones(88), np.zeros(12)].astype(bool)
    c2 = np.full(100, 0.99)
    y2 = np.ones(100, dtype=bool)
    cas = calibrate_cascade({"a": (c1, y1), "b": (c2, y2)}, ("a", "b"), SelectiveSettings(alpha=0.15, delta=0.1))
    assert cas.thresholds[0] == pytest.approx(np.linspace(0, 1, 5000)[np.searchsorted(np.linspace(0, 1, 5000), 0.2,
                                                                                      side="right")])
    assert cas.decided["a"] == 0.88 and cas.thresholds[1] == math.inf
    assert "fewer than 30 items left for this stage (12)" in (cas.stages[1].reason or "")
    assert "reuses the previous stage's threshold" in (cas.stages[1].reason or "")


def test_cascade_shares_add_up_and_apply_thresholds_agrees() -> None:
    rng = np.random.default_rng(7)
    n = 3000
    cs = [rng.uniform(0.5, 1.0, n) for _ in range(3)]
    ys = [rng.uniform(size=n) < c for c in cs]
    s = SelectiveSettings(alpha=0.15, delta=0.1)
    cas = calibrate_cascade({str(i): (c, y) for i, (c, y) in enumerate(zip(cs, ys, strict=True))}, "012", s)
    who = apply_thresholds(cs, cas.thresholds)
    for i in range(3):
        assert cas.decided[str(i)] == pytest.approx(np.mean(who == i))
    assert cas.coverage == pytest.approx(np.mean(who >= 0)) == pytest.approx(sum(cas.decided.values()))
    right = np.array([ys[w][k] for k, w in enumerate(who) if w >= 0])
    assert cas.selective_accuracy == pytest.approx(right.mean())
    with pytest.raises(InputError, match="no confidences for x"):
        calibrate_cascade({"0": (cs[0], ys[0])}, ["0", "x"], s)


# ------------------------------------------------------------------------------------------------
# parity with upstream's rule on its released files


def _upstream_threshold(c: np.ndarray, y: np.ndarray, alpha: float, delta: float) -> tuple[float, bool] | None:
    """Upstream's rule as its paper and README describe it, written out as a plain loop: candidates
    on a float32 ``linspace(0, 1, 5000)`` with >= 30 items at or above; the bound found by root
    search of ``P(Bin(n, r) <= k) = delta``; the highest candidate kept even when it fails (second
    value False); from the top, each candidate's next lower neighbour (``1 / #candidates`` below) is
    tested and the candidate returned when that one fails. None: no candidate."""
    c32 = c.astype(np.float32)
    grid = np.linspace(0, 1, 5000, dtype=np.float32)
    lams = [g for g in grid if (c32 >= g).sum() >= 30]
    if not lams:
        return None
    memo: dict[tuple[int, int], float] = {}

    def bound(lam: float) -> float:
        sel = c32 >= lam
        key = (int(sel.sum()), int((~y[sel]).sum()))
        if key not in memo:
            m, k = key
            memo[key] = brentq(lambda r: binom.cdf(k, m, r) - delta, 0, 0.9999)
        return memo[key]

    if bound(lams[-1]) > alpha:
        return float(lams[-1]), False
    step = 1 / len(lams)
    for lam in reversed(lams):
        if bound(float(lam) - step) > alpha:
            return float(lam), True
    return float(lams[0]), True


@pytest.fixture(scope="module")
def released() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    root = Path(os.environ["EVALIGN_DATA_DIR"]) if os.environ.get("EVALIGN_DATA_DIR") else SHARED
    folder = root / "selective"
    if not folder.is_dir():
        pytest.fail(f"the released Trust or Escalate files are missing: expected them in {folder}")
    out = {}
    for j in JUDGES:
        rows = [json.loads(line) for line in (folder / f"{j}.calibration.jsonl").read_text().splitlines()]
        p = np.array([r["probs"] for r in rows], dtype=float)
        human = np.array([r["preferences"]["human"] for r in rows]) - 1
        out[j] = (p.max(axis=1), p.argmax(axis=1) == human)
    return out


@pytest.mark.parametrize("alpha", [0.1, 0.15, 0.2, 0.25, 0.3])
def test_thresholds_equal_upstream_on_released_files(released: dict[str, Any], alpha: float) -> None:
    passed = 0
    for j in JUDGES:
        c, y = released[j]
        ours = calibrate(c, y, SelectiveSettings(alpha=alpha, delta=0.1))
        up = _upstream_threshold(c, y, alpha, 0.1)
        assert up is not None
        lam, ok = up
        if ok:
            passed += 1
            assert ours.threshold == pytest.approx(lam, abs=1e-4), j
            assert ours.n_decided == int((c.astype(np.float32) >= np.float32(lam)).sum())
        else:
            assert ours.abstains and "highest candidate" in (ours.reason or "")
    assert passed == {0.1: 1, 0.15: 2, 0.2: 2, 0.25: 2, 0.3: 3}[alpha]  # Mistral fails at the top below 0.3


def test_cascade_equals_upstream_where_every_stage_passes(released: dict[str, Any]) -> None:
    s = SelectiveSettings(alpha=0.2, delta=0.1)
    order = ("gpt-3.5-turbo", "gpt-4-turbo")
    cas = calibrate_cascade({j: released[j] for j in order}, order, s)
    assert cas.decided == {"gpt-3.5-turbo": 0.728, "gpt-4-turbo": 0.066}
    left = np.ones(500, dtype=bool)
    for j, t in zip(order, cas.thresholds, strict=True):
        c, y = released[j]
        up = _upstream_threshold(c[left], y[left], s.alpha, s.delta)
        assert up is not None and up[1]
        assert t == pytest.approx(up[0], abs=1e-4)
        left &= ~(c >= t)
    assert cas.coverage == pytest.approx(1 - left.mean())
    # the three judges: Mistral's highest candidate fails, so evalign's first stage abstains (upstream
    # keeps it and decides the items at or above it, with no guarantee)
    three = calibrate_cascade(released, JUDGES, s)
    assert three.thresholds[0] == math.inf and three.decided["mistral-7b-instruct"] == 0.0
    assert three.thresholds[1:] == cas.thresholds
    # at 0.15 GPT-4 abstains on what GPT-3.5 leaves: upstream's highest candidate fails there too
    at15 = calibrate_cascade(released, JUDGES, SelectiveSettings(alpha=0.15, delta=0.1))
    c, y = released["gpt-3.5-turbo"]
    rest = c < at15.thresholds[1]
    up = _upstream_threshold(released["gpt-4-turbo"][0][rest], released["gpt-4-turbo"][1][rest], 0.15, 0.1)
    assert up is not None and not up[1] and at15.thresholds[2] == math.inf
    assert at15.decided["gpt-3.5-turbo"] == 0.55 and at15.selective_accuracy == pytest.approx(0.88)
