"""Panel rules (evalign.rank.panel): hand-computed verdicts and confidences with ties, failures and
members below --panel-min; dawid-skene against crowd-kit (or a reference EM written from the paper);
early stopping's open items."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evalign.errors import UsageError
from evalign.rank.panel import (
    PanelSettings,
    add_panel_columns,
    calibration_weights,
    combine_votes,
    dawid_skene,
    judge_panel,
    parse_panel,
    samples_confidence,
    still_open,
)

N = np.nan
# A = +1, B = -1, tie = 0, NaN = the member failed / gave no verdict
VOTES = np.array([
    [1, 1, -1],   # 2-1 for A
    [1, -1, 0],   # three-way split: no plurality
    [1, -1, N],   # one failed, 1-1: no plurality
    [N, N, N],    # every member failed
    [N, -1, N],   # one vote only
    [0, 0, 1],    # 2-1 for tie
    [-1, -1, -1],  # unanimous
], dtype=float)


def _eq(a: np.ndarray, b: list[float]) -> None:
    np.testing.assert_array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


@pytest.mark.parametrize(("tie", "verdict", "confidence"), [
    ("tie", [1, 0, 0, N, -1, 0, -1], [2 / 3, 1 / 3, 0.0, N, 1, 2 / 3, 1]),
    ("abstain", [1, N, N, N, -1, 0, -1], [2 / 3, N, N, N, 1, 2 / 3, 1]),
    ("unparseable", [1, N, N, N, -1, 0, -1], [2 / 3, N, N, N, 1, 2 / 3, 1]),  # the API alias of abstain
    ("first", [1, 1, 1, N, -1, 0, -1], [2 / 3, 1 / 3, 1 / 2, N, 1, 2 / 3, 1]),
])
def test_majority_tie_rules_hand_computed(tie: str, verdict: list[float], confidence: list[float]) -> None:
    r = combine_votes(VOTES, PanelSettings(tie=tie))
    _eq(r.verdict, verdict)
    np.testing.assert_allclose(r.confidence, confidence, rtol=0, atol=1e-15)
    assert r.n_no_plurality == 2 and r.n_below_min == 0 and r.source == "votes"
    _eq(r.votes, [3, 3, 2, 0, 1, 3, 3])


def test_panel_min_counts_and_drops_items_with_too_few_votes() -> None:
    r = combine_votes(VOTES, PanelSettings(min_members=2))
    _eq(r.verdict, [1, 0, 0, N, N, 0, -1])  # the lone vote (row 5) gives no verdict
    assert r.n_below_min == 1
    r3 = combine_votes(VOTES, PanelSettings(min_members=3, tie="abstain"))
    _eq(r3.verdict, [1, N, N, N, N, 0, -1])
    assert r3.n_below_min == 2  # rows 3 and 5; row 4 had no vote at all: not counted as below min
    with pytest.raises(UsageError, match="--panel-min"):
        PanelSettings(min_members=0)


def test_strict_majority_needs_more_than_half() -> None:
    v = np.array([[1, 1, -1, 0], [1, 1, -1, -1], [1, -1, 0, N]], dtype=float)
    _eq(combine_votes(v, PanelSettings()).verdict, [1, 0, 0])
    _eq(combine_votes(v, PanelSettings(strict=True, tie="abstain")).verdict, [N, N, N])  # 2 of 4 is not > half


def test_weighted_hand_computed_and_weights_from_calibration() -> None:
    # member weights: log-odds of (correct + 1) / (n + 2): m0 4/4 right -> 5/6 -> log 5; m1 2/4 -> 0.5 -> 0;
    # m2 3/4 -> 4/6 -> log 2
    cal = np.array([[1, 1, 1], [-1, 1, -1], [1, -1, 1], [-1, -1, 1]], dtype=float)
    w = calibration_weights(cal, np.array([1, -1, 1, -1.0]), ["m0", "m1", "m2"])
    assert w == pytest.approx({"m0": math.log(5), "m1": 0.0, "m2": math.log(2)}, abs=1e-15)
    s = PanelSettings(rule="weighted", weights=w)
    r = combine_votes(np.array([[1, -1, -1], [-1, 1, 1], [N, 1, -1]], dtype=float), s, members=["m0", "m1", "m2"])
    _eq(r.verdict, [1, -1, -1])  # log 5 > log 2; m2 alone outweighs m1's zero weight
    total = math.log(5) + math.log(2)
    np.testing.assert_allclose(r.confidence, [math.log(5) / total, math.log(5) / total, 1.0], rtol=1e-14)
    assert r.source == "weighted_votes"
    assert calibration_weights(np.array([[1.0], [1.0]]), np.array([-1.0, -1.0]), ["bad"]) == {"bad": 0.0}
    with pytest.raises(UsageError, match="--panel-calibration"):
        combine_votes(VOTES, PanelSettings(rule="weighted"))


def test_mean_and_median_grades_with_failures() -> None:
    g = np.array([[1, 2, 4], [3, N, 5], [N, N, N], [2, 2, 5]], dtype=float)
    r = combine_votes(g, PanelSettings(rule="mean"))
    np.testing.assert_allclose(r.verdict, [7 / 3, 4, N, 3])
    np.testing.assert_allclose(r.confidence, [1 / 3, 0, N, 0])  # share of members on the rounded grade
    assert r.source == "grade_votes"
    m = combine_votes(g, PanelSettings(rule="median", min_members=3))
    np.testing.assert_allclose(m.verdict, [2, N, N, 2])
    np.testing.assert_allclose(m.confidence, [1 / 3, N, N, 2 / 3])
    assert m.n_below_min == 1


def test_soft_confidence_is_the_mean_probability_of_the_verdict() -> None:
    v = np.array([[1, 1, -1], [1, -1, N], [-1, -1, -1]], dtype=float)
    p = np.array([[0.9, 0.7, 0.2], [0.6, 0.3, N], [0.1, 0.2, 0.4]])
    r = combine_votes(v, PanelSettings(soft=True), p_a=p)
    _eq(r.verdict, [1, 0, -1])
    np.testing.assert_allclose(r.confidence, [0.6, N, 1 - 0.7 / 3], rtol=1e-14)  # a tie has no probability
    assert r.source == "mean_p"


def test_samples_votes_share() -> None:
    verdict, conf = samples_confidence(np.array([[1, 1, -1, 1, 1], [-1, 1, 1, -1, N], [N, N, N, N, N]]))
    _eq(verdict, [1, -1, N])  # a 2-2 split: the first sample's verdict
    np.testing.assert_allclose(conf, [0.8, 0.5, N])


def _reference_ds(votes: np.ndarray, max_iter: int = 100, tol: float = 1e-5) -> np.ndarray:
    """Dawid and Skene (1979), written from the paper item by item (no vectorising): start from the
    majority vote's shares, M-step (class priors; each member's confusion, clipped at machine epsilon as
    crowd-kit does), E-step (posterior by Bayes), stop when the evidence lower bound per vote gains < tol."""
    cats = sorted({x for x in votes.ravel() if not np.isnan(x)})
    n, k, c = votes.shape[0], votes.shape[1], len(cats)
    items = [i for i in range(n) if not np.isnan(votes[i]).all()]
    idx = {x: t for t, x in enumerate(cats)}
    T = {}
    for i in items:
        row = [0.0] * c
        for j in range(k):
            if not np.isnan(votes[i, j]):
                row[idx[votes[i, j]]] += 1
        T[i] = [x / sum(row) for x in row]

    def m_step(T):
        prior = [sum(T[i][t] for i in items) / len(items) for t in range(c)]
        pi = np.zeros((k, c, c))  # pi[j, true, observed]
        for j in range(k):
            for i in items:
                if not np.isnan(votes[i, j]):
                    for t in range(c):
                        pi[j, t, idx[votes[i, j]]] += T[i][t]
            pi[j] = np.maximum(pi[j], np.finfo(float).eps)
            pi[j] /= pi[j].sum(axis=1, keepdims=True)
        return prior, pi

    prior, pi = m_step(T)
    loss = -np.inf
    n_votes = int((~np.isnan(votes)).sum())
    for _ in range(max_iter):
        for i in items:
            logp = [math.log(prior[t]) + sum(math.log(pi[j, t, idx[votes[i, j]]]) for j in range(k)
                                             if not np.isnan(votes[i, j])) for t in range(c)]
            top = max(logp)
            e = [math.exp(x - top) for x in logp]
            T[i] = [x / sum(e) for x in e]
        prior, pi = m_step(T)
        elbo = 0.0
        for i in items:
            for t in range(c):
                if T[i][t] > 0:
                    ll = math.log(prior[t]) + sum(math.log(pi[j, t, idx[votes[i, j]]]) for j in range(k)
                                                  if not np.isnan(votes[i, j]))
                    elbo += T[i][t] * (ll - math.log(T[i][t]))
        if elbo / n_votes - loss < tol:
            break
        loss = elbo / n_votes
    out = np.full((n, c), np.nan)
    for i in items:
        out[i] = T[i]
    return out


def _noisy_votes(n: int = 300, k: int = 4, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.choice([1.0, -1.0, 0.0], n, p=[0.45, 0.45, 0.1])
    acc = np.array([0.9, 0.75, 0.6, 0.55])[:k]
    v = np.where(rng.random((n, k)) < acc, truth[:, None], rng.choice([1.0, -1.0, 0.0], (n, k)))
    v[rng.random((n, k)) < 0.1] = np.nan
    return v


def test_dawid_skene_matches_a_reference_em_from_the_paper() -> None:
    v = _noisy_votes()
    cats, post, it = dawid_skene(v)
    ref = _reference_ds(v)
    voted = ~np.isnan(v).all(axis=1)
    np.testing.assert_allclose(post[voted], ref[voted], rtol=0, atol=1e-10)
    assert it >= 2
    _eq(cats, [-1, 0, 1])


def test_dawid_skene_matches_crowd_kit() -> None:
    """The same posteriors as crowd-kit's DawidSkene after the same number of EM steps (its stopping rule's
    lower bound counts the prior once per vote, ours once per item, so with a tolerance the two may stop
    at different steps: the steps are fixed here by a tolerance no gain goes under)."""
    crowdkit = pytest.importorskip("crowdkit.aggregation", reason="crowd-kit (the test extra) is not installed")
    v = _noisy_votes(n=400, seed=5)
    i, j = np.nonzero(~np.isnan(v))
    long = pd.DataFrame({"task": i, "worker": j, "label": v[i, j]})
    for steps in (1, 5, 40):
        probas = crowdkit.DawidSkene(n_iter=steps, tol=-1e9).fit_predict_proba(long).sort_index()
        cats, post, it = dawid_skene(v, max_iter=steps, tol=-1e9)
        assert it == steps
        ours = pd.DataFrame(post, columns=cats).loc[probas.index, list(probas.columns)]
        np.testing.assert_allclose(ours.to_numpy(), probas.to_numpy(), rtol=0, atol=1e-9)
    r = combine_votes(v, PanelSettings(rule="dawid-skene", max_iter=40, tol=-1e9))
    np.testing.assert_allclose(r.confidence[probas.index], probas.to_numpy().max(axis=1), rtol=0, atol=1e-9)
    mv = crowdkit.MajorityVote().fit_predict_proba(long).sort_index()
    share = combine_votes(v, PanelSettings(tie="first")).confidence
    np.testing.assert_allclose(share[mv.index], mv.to_numpy().max(axis=1), rtol=0, atol=1e-12)


def test_dawid_skene_verdict_is_the_posterior_arg_max_and_confidence_the_posterior() -> None:
    v = _noisy_votes(n=200, seed=9)
    r = combine_votes(v, PanelSettings(rule="dawid-skene"))
    cats, post, _ = dawid_skene(v)
    voted = ~np.isnan(v).all(axis=1)
    _eq(r.verdict[voted], cats[np.argmax(post[voted], axis=1)])
    np.testing.assert_allclose(r.confidence[voted], post[voted].max(axis=1))
    assert np.isnan(r.verdict[~voted]).all() and r.source == "posterior"


def test_still_open_majority_of_three() -> None:
    first_two = np.array([[1, 1], [1, -1], [N, -1], [0, 0], [N, N]], dtype=float)
    _eq(still_open(first_two, [1.0], PanelSettings()), [0, 1, 1, 0, 1])  # the third only where it can matter
    _eq(still_open(first_two, [], PanelSettings()), [0, 0, 0, 0, 0])
    # with --panel-min 3 nothing is closed before the third vote
    _eq(still_open(first_two, [1.0], PanelSettings(min_members=3)), [1, 1, 1, 1, 1])
    # majority of five after three votes: 3-0 closed, 2-1 open
    _eq(still_open(np.array([[1, 1, 1], [1, 1, -1]], dtype=float), [1, 1], PanelSettings()), [0, 1])
    _eq(still_open(first_two, [1.0], PanelSettings(rule="dawid-skene")), [1, 1, 1, 1, 1])


def test_judge_panel_frame_keeps_the_old_api_and_adds_the_confidence() -> None:
    f = pd.DataFrame({"a": ["A", "A", "B", None], "b": ["A", "B", "B", "unparseable"], "c": ["B", "tie", "B", "A"]})
    res = judge_panel(f, ["a", "b", "c"], how="majority", tie_rule="unparseable")
    assert list(res.combined) == ["A", "unparseable", "B", "A"]
    np.testing.assert_allclose(res.confidence, [2 / 3, N, 1, 1])
    assert res.n_no_plurality == 1
    out, _ = add_panel_columns(f, parse_panel("p=a,b,c", PanelSettings(min_members=2)))
    assert list(out["p"]) == ["A", "tie", "B", "unparseable"]
    assert list(out["p.confidence_source"]) == ["votes", "votes", "votes", None]
    with pytest.raises(UsageError, match="--panel takes NAME=COL1"):
        parse_panel("a,b")
    with pytest.raises(UsageError, match="at least two"):
        parse_panel("p=a")


def test_one_judge_samples_vote_share_and_logprobs_win() -> None:
    from evalign.judges import get_judge
    from evalign.judges.logprobs import with_probability
    from evalign.judges.parsing import parse_grade
    from evalign.rank.panel import SAMPLES_SOURCE

    def g(v: str) -> object:
        return parse_grade(f"[RESULT] {v}", "relative")

    j = get_judge("pairwise", samples=4, temperature=0.8, both_orders=False)
    # samples: A, A, B, A -> A, 3 of 4 agree
    res = j.aggregate({(0, "ab"): g("A"), (1, "ab"): g("A"), (2, "ab"): g("B"), (3, "ab"): g("A")})
    assert res[""] == "A" and res["confidence"] == 0.75 and res["confidence_source"] == SAMPLES_SOURCE
    # A, B, A, B -> mean 0: tie, no sample said tie: share 0
    res = j.aggregate({(0, "ab"): g("A"), (1, "ab"): g("B"), (2, "ab"): g("A"), (3, "ab"): g("B")})
    assert res[""] == "tie" and res["confidence"] == 0.0
    # a logprob confidence (J.p_a) is never replaced by the vote share
    p = {(s, "ab"): with_probability(g("A"), 0.9) for s in range(4)}  # type: ignore[arg-type]
    res = j.aggregate(p)
    assert "p_a" in res and "confidence" not in res
    # temperature 0: the samples are one answer repeated: no vote share
    j0 = get_judge("pairwise", samples=4, temperature=0.0, both_orders=False)
    assert "confidence" not in j0.aggregate({(s, "ab"): g("A") for s in range(4)})


@pytest.mark.parametrize("rule", ["majority", "weighted"])
@pytest.mark.parametrize("tie", ["tie", "abstain", "first"])
def test_large_inputs_by_vote_patterns_equal_item_by_item(rule: str, tie: str) -> None:
    """Above 4096 items the verdicts are decided once per distinct vote pattern and looked up: the same
    verdicts, confidences and counts as deciding each item (chunks of 1000 take the item-by-item path)."""
    rng = np.random.default_rng(7)
    v = rng.choice([1.0, -1.0, 0.0, np.nan], (10_000, 5), p=[0.4, 0.35, 0.1, 0.15])
    s = PanelSettings(rule=rule, tie=tie, min_members=2, weights={f"m{j}": 0.5 + j for j in range(5)})
    names = [f"m{j}" for j in range(5)]
    whole = combine_votes(v, s, members=names)
    parts = [combine_votes(v[i:i + 1000], s, members=names) for i in range(0, 10_000, 1000)]
    np.testing.assert_array_equal(whole.verdict, np.concatenate([p.verdict for p in parts]))
    np.testing.assert_array_equal(whole.confidence, np.concatenate([p.confidence for p in parts]))
    assert whole.n_no_plurality == sum(p.n_no_plurality for p in parts) > 0
    assert whole.n_below_min == sum(p.n_below_min for p in parts) > 0
