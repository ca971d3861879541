"""Style control: the markdown counts of arena-hard-auto's ``count_markdown_elements`` on real texts, the
battle features written from their definition, and the fit pinned to an independent logistic fit
(statsmodels' GLM with a binomial family: coefficients and standard errors); a length-loving judge's
lead shrinks once length is a covariate."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm

from evalign.rank.battles import A_WINS, B_WINS, TIE, BattleArrays
from evalign.rank.bradley_terry import BTSettings, bradley_terry
from evalign.rank.style import fit_logistic, style_control, style_counts, style_covariates

MD = """# Title
Some **bold** text and __more bold__.
## Part
1. first
2. second
- item
* other
```python
# not a header
- not a list
```
"""


def test_markdown_counts_as_arena_hard() -> None:
    length, headers, lists, bold = style_counts(MD)
    assert (headers, lists, bold) == (2, 4, 2)  # the code block's lines are not counted
    assert length == len(MD.split())
    assert style_counts(MD, "chars")[0] == len(MD)
    assert style_counts("", "words") == (0, 0, 0, 0)


def test_features_from_their_definition() -> None:
    a = np.array([[100, 2, 5, 0], [50, 0, 0, 1], [80, 1, 1, 1]], dtype=float)
    b = np.array([[50, 0, 5, 0], [50, 1, 0, 0], [20, 0, 4, 1]], dtype=float)
    z, constant = style_covariates(a, b)
    raw_len = (a[:, 0] - b[:, 0]) / (a[:, 0] + b[:, 0])
    da, db = a[:, 1:] / a[:, :1], b[:, 1:] / b[:, :1]
    raw = np.column_stack([raw_len, (da - db) / (da + db + 1)])
    expect = (raw - raw.mean(axis=0)) / raw.std(axis=0, ddof=1)
    np.testing.assert_allclose(z, expect, atol=1e-12)
    assert constant == ()
    z2, constant2 = style_covariates(a[:, [0, 1, 2, 3]] * [1, 0, 1, 1], b * [1, 0, 1, 1])
    assert constant2 == ("headers",) and np.all(z2[:, 1] == 0)


def battles(seed: int = 0, n: int = 1500) -> tuple[BattleArrays, list[str], list[str], np.ndarray]:
    """Four systems; system s writes answers of 20 + 30 s + U(0, 150) words (longer on average, varied
    within each system, so that length and system can be told apart); a judge that likes length."""
    rng = np.random.default_rng(seed)
    k = 4
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    quality = np.array([0.3, 0.0, -0.1, -0.2])
    la, lb = 20 + 30 * a + rng.integers(0, 150, n), 20 + 30 * b + rng.integers(0, 150, n)
    z = quality[a] - quality[b] + 2.0 * (la - lb) / (la + lb)
    p = 1 / (1 + np.exp(-z))
    u = rng.random(n)
    code = np.where(u < p - 0.05, A_WINS, np.where(u < p + 0.05, TIE, B_WINS)).astype(np.int8)
    texts_a = [" ".join(["w"] * int(x)) + ("\n- point" if i % 3 == 0 else "") for i, x in enumerate(la)]
    texts_b = [" ".join(["w"] * int(x)) + ("\n# Head" if i % 4 == 0 else "") for i, x in enumerate(lb)]
    return BattleArrays(("s0", "s1", "s2", "s3"), a, b, code), texts_a, texts_b, np.column_stack([la, lb])


def test_fit_matches_statsmodels_glm() -> None:
    ba, ta, tb, _ = battles()
    res = style_control(ba, ta, tb)
    # the same design written here: one-hot differences without s0, then the standardised features
    X = np.zeros((ba.n, 4))
    X[np.arange(ba.n), ba.a] = 1
    X[np.arange(ba.n), ba.b] -= 1
    ca = np.array([style_counts(t) for t in ta])
    cb = np.array([style_counts(t) for t in tb])
    z, _ = style_covariates(ca, cb)
    design = np.hstack([X[:, 1:], z])
    y = np.select([ba.code == A_WINS, ba.code == TIE], [1.0, 0.5], 0.0)
    glm = sm.GLM(y, design, family=sm.families.Binomial()).fit(tol=1e-14)
    coef, cov, ok = fit_logistic(design, y)
    assert ok
    np.testing.assert_allclose(coef, glm.params, atol=1e-8)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), glm.bse, rtol=1e-7)
    np.testing.assert_allclose(res.coefficients["coef"], glm.params[3:], atol=1e-8)
    # ratings: R = 400 / ln 10 * theta, centred at 1000 (theta of s0 = 0)
    theta = np.concatenate([[0.0], glm.params[:3]])
    expect = 400 / math.log(10) * (theta - theta.mean()) + 1000
    got = res.table.set_index("system").loc[["s0", "s1", "s2", "s3"], "bt_style"].to_numpy()
    np.testing.assert_allclose(got, expect, atol=1e-6)


def test_plain_ratings_are_evalign_bradley_terry_and_style_takes_the_length_lead() -> None:
    ba, ta, tb, _ = battles(1)
    res = style_control(ba, ta, tb)
    plain = bradley_terry(ba, settings=BTSettings(n_bootstrap=0))
    t = res.table.set_index("system")
    np.testing.assert_allclose(t.loc[list(plain.systems), "bt"].to_numpy(), plain.rating, atol=1e-6)
    # the judge loves length and s3 writes the longest answers: its plain lead is style
    assert t.loc["s3", "rank"] == 1 and t.loc["s3", "style_effect"] == t["style_effect"].max() > 30
    assert t.loc["s0", "rank_style"] == 1  # the best quality once length is held fixed
    assert res.coefficients.set_index("feature").loc["length", "low"] > 0
    anchored = style_control(ba, ta, tb, settings=BTSettings(n_bootstrap=0, anchor="s1", anchor_rating=1200))
    assert anchored.table.set_index("system").loc["s1", "bt_style"] == pytest.approx(1200)


def test_bootstrap_intervals_are_percentiles_of_style_bootstrap_and_near_wald() -> None:
    from evalign.rank.ppi_board import scores
    from evalign.rank.style import style_bootstrap

    ba, ta, tb, _ = battles(1)
    wald = style_control(ba, ta, tb)
    boot = style_control(ba, ta, tb, settings=BTSettings(n_bootstrap=200, seed=3))
    assert (wald.intervals, boot.intervals) == ("wald", "bootstrap")
    tw, tbt = wald.table.set_index("system"), boot.table.set_index("system")
    pd_cols = ["bt", "bt_style", "style_effect", "rank", "rank_style"]
    assert tw[pd_cols].equals(tbt[pd_cols])  # the point estimates are the same fit
    # the intervals: percentiles of the resampled ratings, one resample = one style_bootstrap row
    r = ba.resolved()
    z, _ = style_covariates(np.array([style_counts(t) for t, u in zip(ta, r, strict=True) if u]),
                            np.array([style_counts(t) for t, u in zip(tb, r, strict=True) if u]))
    k = len(ba.systems)
    X = np.zeros((int(r.sum()), k))
    X[np.arange(X.shape[0]), ba.a[r]] = 1.0
    X[np.arange(X.shape[0]), ba.b[r]] -= 1.0
    full = fit_logistic(np.hstack([np.delete(X, 0, axis=1), z]), scores(ba.code)[r])[0]
    coefs = style_bootstrap(ba.a[r], ba.b[r], scores(ba.code)[r], z, k, n_bootstrap=200, seed=3, start=full)
    theta = np.hstack([np.zeros((200, 1)), coefs[:, : k - 1]])
    ratings = 400 / math.log(10) * (theta - theta.mean(axis=1, keepdims=True)) + 1000
    lo, hi = np.quantile(ratings, [0.025, 0.975], axis=0)
    order = [list(ba.systems).index(s) for s in tbt.index]
    np.testing.assert_allclose(tbt["bt_style_low"].to_numpy(), lo[order], atol=1e-6)
    np.testing.assert_allclose(tbt["bt_style_high"].to_numpy(), hi[order], atol=1e-6)
    # and, on a well-conditioned sample, close to Wald's (within a fifth of its width)
    width = (tw["bt_style_high"] - tw["bt_style_low"]).to_numpy()
    assert np.all(np.abs(tbt["bt_style_low"] - tw["bt_style_low"]).to_numpy() < 0.2 * width)
    assert np.all(np.abs(tbt["bt_style_high"] - tw["bt_style_high"]).to_numpy() < 0.2 * width)
