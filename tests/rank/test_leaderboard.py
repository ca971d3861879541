"""Leaderboard statistics: hand-computed toy cases, an independent scikit-learn Bradley-Terry fit, and
parity of the length-controlled win rate with alpaca_eval's own function."""

from __future__ import annotations

import importlib.metadata
import math
import sys
import types
import warnings

import numpy as np
import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.rank import (
    BTSettings,
    LCSettings,
    LeaderboardSettings,
    battle_arrays,
    bradley_terry,
    combine_orders,
    judge_battles,
    judge_panel,
    lc_win_rates,
    leaderboard,
    position_agreement,
    self_preference,
    system_counts,
    win_rate_matrix,
    win_rates,
)

ELO = 400.0 / math.log(10.0)


def battles(rows: list[tuple[str, str, str]], **extra: list) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["system_a", "system_b", "verdict"])
    for k, v in extra.items():
        df[k] = v
    return df


# X beats Y 2-1 with 2 ties (and one unparseable); Y beats Z 3-1; X and Z never meet: a chain, so the
# BT maximum fits each pair exactly: theta_X - theta_Y = ln(3/2), theta_Y - theta_Z = ln 3.
TOY = battles([
    ("X", "Y", "A"), ("Y", "X", "B"), ("X", "Y", "B"), ("X", "Y", "tie"), ("Y", "X", "tie"),
    ("X", "Y", "unparseable"),
    ("Y", "Z", "A"), ("Z", "Y", "B"), ("Y", "Z", "a"), ("Z", "Y", "A"), ("Y", "Z", None),
])


def test_win_rates_by_hand():
    wr = win_rates(TOY, "Y")
    got = dict(zip(wr.systems, wr.win_rate, strict=True))
    assert got["X"] == pytest.approx((2 + 2 / 2) / 5)  # 0.6
    assert got["Z"] == pytest.approx(1 / 4)
    assert got["Y"] == 0.5
    i = wr.systems.index("X")
    assert (wr.n_wins[i], wr.n_losses[i], wr.n_ties[i], wr.n_unparseable[i], wr.n_missing[i]) == (2, 1, 2, 1, 0)
    j = wr.systems.index("Z")
    assert (wr.n_wins[j], wr.n_losses[j], wr.n_missing[j]) == (1, 3, 1)
    # standard error of the mean of scores (1, 1, 0, .5, .5)
    assert wr.standard_error[i] == pytest.approx(np.std([1, 1, 0, 0.5, 0.5], ddof=1) / math.sqrt(5))

    m = win_rate_matrix(TOY).frame()
    assert m.loc["X", "Y"] == pytest.approx(0.6) and m.loc["Y", "X"] == pytest.approx(0.4)
    assert m.loc["Y", "Z"] == pytest.approx(0.75) and m.loc["Z", "Y"] == pytest.approx(0.25)
    assert np.isnan(m.loc["X", "Z"]) and np.isnan(m.loc["X", "X"])


def test_bradley_terry_by_hand():
    r = bradley_terry(TOY, settings=BTSettings(anchor="Z", n_bootstrap=0))
    got = dict(zip(r.systems, r.rating, strict=True))
    assert got["Z"] == pytest.approx(1000.0, abs=1e-9)
    assert got["Y"] == pytest.approx(1000.0 + 400 * math.log10(3), abs=1e-9)
    assert got["X"] == pytest.approx(1000.0 + 400 * math.log10(3) + 400 * math.log10(1.5), abs=1e-9)
    assert r.converged and list(r.rank[[r.systems.index(s) for s in "XYZ"]]) == [1, 2, 3]
    free = bradley_terry(TOY, settings=BTSettings(n_bootstrap=0))  # no anchor: mean rating 1000
    assert free.rating.mean() == pytest.approx(1000.0, abs=1e-9)
    assert free.rating - free.rating[2] == pytest.approx(r.rating - 1000.0, abs=1e-9)


def test_counts_and_lengths():
    df = TOY.assign(id=[str(i) for i in range(len(TOY))], len_a=np.arange(len(TOY)) + 10.0, len_b=100.0)
    c = system_counts(df).set_index("system")
    assert c.loc["X", ["n_battles", "n_wins", "n_losses", "n_ties", "n_unparseable", "n_missing"]].tolist() == [
        6, 2, 1, 2, 1, 0]
    assert c.loc["Y", ["n_battles", "n_wins", "n_losses", "n_ties", "n_unparseable", "n_missing"]].tolist() == [
        11, 4, 3, 2, 1, 1]  # vs X: 1 win, 2 losses; vs Z: 3 wins, 1 loss
    # X's responses: as system_a in rows 0, 2, 3, 5 (len 10, 12, 13, 15) and system_b in rows 1, 4 (100)
    assert c.loc["X", "mean_length"] == pytest.approx((10 + 12 + 13 + 15 + 100 + 100) / 6)


def random_battles(k: int, n: int, seed: int, tie: float = 0.15) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    s = rng.normal(size=k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1 / (1 + np.exp(-(s[a] - s[b])))
    u = rng.random(n)
    v = np.where(u < p * (1 - tie), "A", np.where(u < 1 - tie, "B", "tie"))
    return pd.DataFrame({
        "system_a": [f"m{i}" for i in a], "system_b": [f"m{i}" for i in b], "verdict": v,
        "id": [str(i // 3) for i in range(n)],
    })


def arena_hard_mle(df: pd.DataFrame, scale: float = 400, base: float = 10, init: float = 1000) -> pd.Series:
    """arena-hard-auto ``show_result.py`` ``compute_mle_elo``, written from its definition: design rows
    +-ln(base), a-wins and b-wins weighted 2, ties once for each side; an unregularised logistic
    regression without intercept (scikit-learn)."""
    from sklearn.linear_model import LogisticRegression

    df = df[df["verdict"].isin(["A", "B", "tie"])]
    a_win = pd.pivot_table(df[df["verdict"] == "A"], index="system_a", columns="system_b", aggfunc="size", fill_value=0)
    tie = pd.pivot_table(df[df["verdict"] == "tie"], index="system_a", columns="system_b", aggfunc="size", fill_value=0)
    b_win = pd.pivot_table(df[df["verdict"] == "B"], index="system_a", columns="system_b", aggfunc="size", fill_value=0)
    models = sorted(set(df["system_a"]) | set(df["system_b"]))

    def full(t: pd.DataFrame) -> pd.DataFrame:
        return t.reindex(index=models, columns=models, fill_value=0)

    tie = full(tie)
    win = full(a_win) * 2 + full(b_win).T * 2 + tie + tie.T
    X, Y, w = [], [], []
    for i, ma in enumerate(models):
        for j, mb in enumerate(models):
            if i == j:
                continue
            row = np.zeros(len(models))
            row[i], row[j] = math.log(base), -math.log(base)
            X += [row, row]
            Y += [1.0, 0.0]
            w += [win.loc[ma, mb], win.loc[mb, ma]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # penalty=None is deprecated in scikit-learn 1.8
        lr = LogisticRegression(fit_intercept=False, penalty=None, solver="newton-cg", tol=1e-14, max_iter=10000)
        lr.fit(np.array(X), np.array(Y), sample_weight=np.array(w))
    return pd.Series(scale * lr.coef_[0] + init, index=models)


def test_bradley_terry_equals_independent_logistic_regression():
    pytest.importorskip("sklearn")
    df = random_battles(k=7, n=2000, seed=3)
    ours = bradley_terry(df, settings=BTSettings(n_bootstrap=0))
    ref = arena_hard_mle(df)
    ref = ref - ref.mean() + 1000.0  # sklearn started at 0 keeps the mean at init; recentre exactly
    assert ours.converged
    np.testing.assert_allclose(ours.rating, ref.loc[list(ours.systems)].to_numpy(), atol=1e-6, rtol=0)
    anchored = bradley_terry(df, settings=BTSettings(n_bootstrap=0, anchor="m3", anchor_rating=1114.0))
    np.testing.assert_allclose(anchored.rating, (ref - ref["m3"] + 1114.0).loc[list(ours.systems)], atol=1e-6, rtol=0)


def test_bootstrap_reproducible_at_a_seed_and_sensible():
    df = random_battles(k=6, n=3000, seed=5)
    s = BTSettings(n_bootstrap=200, seed=7)
    r1, r2 = bradley_terry(df, settings=s), bradley_terry(df, settings=s)
    np.testing.assert_array_equal(r1.boot, r2.boot)
    np.testing.assert_array_equal(r1.ci_low, r2.ci_low)
    np.testing.assert_array_equal(r1.cluster, r2.cluster)
    other = bradley_terry(df, settings=BTSettings(n_bootstrap=200, seed=8))
    assert not np.array_equal(r1.boot, other.boot)
    assert np.all(r1.ci_low < r1.rating) and np.all(r1.rating < r1.ci_high)
    assert r1.boot.shape == (200, 6) and r1.n_nonconverged == 0
    # every resample is a fit: each resample's mean rating is init_rating (no anchor)
    np.testing.assert_allclose(r1.boot.mean(axis=1), 1000.0, atol=1e-8)
    # the same distribution as arena-hard's route (refit on battles.sample(frac=1, replace=True)):
    # bootstrap standard deviations agree within the Monte Carlo error of 100 brute-force refits
    idx = np.random.default_rng(7).integers(0, len(df), (100, len(df)))
    brute = np.array([bradley_terry(df.iloc[i], settings=BTSettings(n_bootstrap=0)).rating for i in idx])
    assert np.all(np.abs(np.std(r1.boot, axis=0) / np.std(brute, axis=0) - 1) < 0.35)


def test_clustered_bootstrap_and_clusters():
    df = random_battles(k=5, n=1500, seed=11)
    r = bradley_terry(df, settings=BTSettings(n_bootstrap=300, cluster=True, seed=1))
    again = bradley_terry(df, settings=BTSettings(n_bootstrap=300, cluster=True, seed=1))
    np.testing.assert_array_equal(r.boot, again.boot)
    best = int(np.argmax(r.rating))
    assert r.cluster[best] == 1 and r.rank[best] == 1
    assert np.all(np.diff(r.cluster[np.argsort(-r.rating)]) >= 0)  # clusters follow the ratings
    ov = bradley_terry(df, settings=BTSettings(n_bootstrap=300, cluster=True, seed=1, clusters="overlap"))
    order = np.argsort(-ov.rating)
    head = order[0]
    for i in order:  # cluster 1 = intervals overlapping the best's
        if ov.cluster[i] == 1:
            assert ov.ci_high[i] >= ov.ci_low[head]
    with pytest.raises(InputError, match="id"):
        bradley_terry(df.drop(columns="id"), settings=BTSettings(n_bootstrap=10, cluster=True))


# --- both orders ------------------------------------------------------------------------------


ORDERS = battles(
    [
        ("X", "Y", "A"), ("Y", "X", "B"),  # id 1: X wins in both orders: agree
        ("X", "Y", "A"), ("Y", "X", "A"),  # id 2: first position wins twice: disagree
        ("X", "Y", "tie"), ("Y", "X", "tie"),  # id 3: agree
        ("X", "Y", "B"), ("Y", "X", "unparseable"),  # id 4: not both resolved
        ("X", "Z", "A"),  # id 5: one order only
    ],
    id=["1", "1", "2", "2", "3", "3", "4", "4", "5"],
)


def test_position_agreement_by_hand():
    pa = position_agreement(ORDERS)
    assert pa.agreement == pytest.approx(2 / 3) and pa.n_pairs == 3 and pa.n_unmatched == 1
    assert pa.first_position_rate == pytest.approx(3 / 5)  # A, B, A, A, B: the first shown won 3 of 5
    per = dict(zip(pa.systems, pa.per_system, strict=True))
    assert per["X"] == pytest.approx(2 / 3) and per["Y"] == pytest.approx(2 / 3) and np.isnan(per["Z"])


def test_combine_orders_by_hand():
    out = combine_orders(ORDERS)
    assert out["verdict"].tolist() == ["A", "tie", "tie", "unparseable", "A"]
    assert out["id"].tolist() == ["1", "2", "3", "4", "5"]
    assert out["system_a"].tolist() == ["X", "X", "X", "X", "X"]


def test_leaderboard_table_pools_orders():
    board = leaderboard(ORDERS, settings=LeaderboardSettings(baseline="X", bt=BTSettings(n_bootstrap=50), lc=None))
    t = board.table.set_index("system")
    assert t.loc["Y", "n_battles"] == 8 and t.loc["X", "n_battles"] == 9
    # pooled: Y vs X over the 7 resolved rows: Y won rows 4 (A as system_a) and 7 (B): 2 wins, 3 losses, 2 ties
    assert t.loc["Y", "win_rate"] == pytest.approx((2 + 1) / 7)
    assert t.loc["X", "position_agreement"] == pytest.approx(2 / 3)
    combined = leaderboard(
        ORDERS, settings=LeaderboardSettings(baseline="X", orders="combine", bt=BTSettings(n_bootstrap=0), lc=None)
    )
    ty = combined.table.set_index("system")
    assert ty.loc["Y", "win_rate"] == pytest.approx((0 + 2 * 0.5) / 3)  # A (X wins), tie, tie
    assert list(board.table.columns[:6]) == ["rank", "cluster", "system", "bt_score", "bt_low", "bt_high"]


def test_judge_output_to_battles_always_first_judge():
    """A judge that always answers "Output (a)" (base SmolLM2): every pair is a tie once both
    orders are resolved; pooled, every system wins as often as it loses and the orders never agree."""
    out = pd.DataFrame({
        "id": ["1", "2", "3"], "system_a": ["X", "X", "Y"], "system_b": ["Y", "Z", "Z"],
        "response_a": ["aa", "aaaa", "b"], "response_b": ["bbb", "c", "cc"],
        "j": ["tie", "tie", "unparseable"], "j.ab": ["A", "A", None], "j.ba": ["B", "B", None],
    })
    both = judge_battles(out, "j")
    assert both["verdict"].tolist() == ["A", "A", "unparseable", "A", "A", "unparseable"]
    assert both["system_a"].tolist() == ["X", "X", "Y", "Y", "Z", "Z"]
    assert both["response_a"].tolist()[3:] == ["bbb", "c", "cc"]
    board = leaderboard(both, settings=LeaderboardSettings(baseline="X", bt=BTSettings(n_bootstrap=20), lc=None))
    t = board.table.set_index("system")
    assert t.loc["Y", "win_rate"] == 0.5 and t.loc["Z", "win_rate"] == 0.5
    np.testing.assert_allclose(t["bt_score"], 1000.0, atol=1e-9)
    assert board.positions.agreement == 0.0 and board.positions.first_position_rate == 1.0
    assert t.loc["Z", "n_unparseable"] == 2 and t.loc["X", "mean_length"] == pytest.approx(3.0)
    combined = judge_battles(out, "j", orders="combined")
    assert combined["verdict"].tolist() == ["tie", "tie", "unparseable"]


# --- judge panels -------------------------------------------------------------------------------


PANEL = pd.DataFrame({
    "j1": ["A", "A", "B", "tie", "B", "A", "A"],
    "j2": ["A", "B", "B", "tie", "A", "A", "B"],
    "j3": ["A", "A", "B", "B", "B", "unparseable", "tie"],
})


def test_panel_majority_and_agreement_by_hand():
    p = judge_panel(PANEL, ["j1", "j2", "j3"])
    assert list(p.combined) == ["A", "A", "B", "tie", "B", "A", "tie"]
    assert list(judge_panel(PANEL, ["j1", "j2", "j3"], tie_rule="first").combined)[-1] == "A"
    assert list(judge_panel(PANEL, ["j1", "j2", "j3"], tie_rule="unparseable").combined)[-1] == "unparseable"
    # Cohen's kappa j1 vs j2 (all 7 rows): p_o = 4/7; marginals A 4/3, B 2/3, tie 1/1 -> p_e = 19/49
    assert p.cohen_kappa[("j1", "j2")] == pytest.approx((4 / 7 - 19 / 49) / (1 - 19 / 49))  # 0.3
    assert p.cohen_kappa[("j1", "j2")] == pytest.approx(0.3)
    # Fleiss' kappa over the 6 rows all three resolved: P_i = 1, 1/3, 1, 1/3, 1/3, 0 -> P_bar = 1/2;
    # category totals A 7, B 8, tie 3 of 18 -> P_e = (49 + 64 + 9) / 324
    pe = (49 + 64 + 9) / 324
    assert p.fleiss_kappa == pytest.approx((0.5 - pe) / (1 - pe))  # 20/101
    assert p.fleiss_kappa == pytest.approx(20 / 101)
    assert p.n_complete == 6
    assert p.mean_cohen_kappa == pytest.approx(np.mean(list(p.cohen_kappa.values())))
    assert -1 <= p.krippendorff_alpha <= 1


def test_panel_of_scores_and_unanimous_judges():
    scores = pd.DataFrame({"s1": [1, 2, 3, 4], "s2": [1, 2, 3, 5], "s3": [np.nan, 2, 3, 3]})
    p = judge_panel(scores, ["s1", "s2", "s3"], how="mean")
    np.testing.assert_allclose(p.combined, [1.0, 2.0, 3.0, 4.0])
    same = judge_panel(pd.DataFrame({"a": ["A", "B", "tie"], "b": ["A", "B", "tie"]}), ["a", "b"])
    assert same.cohen_kappa[("a", "b")] == pytest.approx(1.0) and same.fleiss_kappa == pytest.approx(1.0)
    assert same.krippendorff_alpha == pytest.approx(1.0)


def test_self_preference():
    df = battles([("gpt-4-0613", "llama", "A"), ("llama", "mistral", "B"), ("mistral", "GPT-4-0613", "B")])
    sp = self_preference(df, ["openai/gpt-4*"])
    assert sp.mask.tolist() == [True, False, True] and sp.n_battles == 2
    assert sp.pairs == (("openai/gpt-4*", "GPT-4-0613"), ("openai/gpt-4*", "gpt-4-0613"))
    assert "2 of 3 battles" in sp.warning and "--skip-self" in sp.warning
    warned = leaderboard(df, settings=LeaderboardSettings(bt=BTSettings(n_bootstrap=0), judges=("openai/gpt-4*",)))
    assert any("self-preference" in n and "2 of 3" in n for n in warned.notes)
    assert warned.table["n_battles"].sum() == 6
    skipped = leaderboard(
        df, settings=LeaderboardSettings(bt=BTSettings(n_bootstrap=0), judges=("openai/gpt-4*",), skip_self=True)
    )
    assert skipped.table["system"].tolist() == ["mistral", "llama"] and skipped.table["n_battles"].sum() == 2
    none = self_preference(df, "prometheus-7b")
    assert not none.mask.any() and none.warning == ""


def test_bad_inputs():
    with pytest.raises(InputError, match="row 2"):
        battle_arrays(battles([("X", "Y", "A"), ("X", "Y", "maybe")]))
    with pytest.raises(InputError, match="baseline"):
        win_rates(TOY, "W")
    with pytest.raises(InputError, match="resolved"):
        bradley_terry(battles([("X", "Y", "unparseable")]), settings=BTSettings(n_bootstrap=0))


def test_nonexistent_mle_is_reported():
    df = battles([("X", "Y", "A"), ("X", "Y", "A"), ("Y", "Z", "A"), ("Z", "Y", "B")])  # X never loses
    r = bradley_terry(df, settings=BTSettings(n_bootstrap=0, max_iter=30))
    assert not r.converged
    assert r.rating[0] > r.rating[1] > r.rating[2]


# --- length-controlled win rate: parity with alpaca_eval -------------------------------------------


def _alpaca_glm(monkeypatch: pytest.MonkeyPatch, gamed_csv: str):
    """alpaca_eval's glm_winrate module with the hub download stubbed; skips if alpaca-eval is absent."""
    try:
        import pkg_resources  # noqa: F401  (alpaca_eval.utils imports it; setuptools >= 81 dropped it)
    except ImportError:
        from packaging.version import parse

        stub = types.ModuleType("pkg_resources")
        stub.parse_version = parse  # type: ignore[attr-defined]
        stub.get_distribution = lambda name: types.SimpleNamespace(version=importlib.metadata.version(name))  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pkg_resources", stub)
    glm = pytest.importorskip(
        "alpaca_eval.metrics.glm_winrate", reason="alpaca-eval is not installed (pip install alpaca-eval)"
    )
    monkeypatch.setattr(glm, "hf_hub_download", lambda **kw: gamed_csv)
    return glm


def _lc_data(n: int, seed: int) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Synthetic AlpacaEval-style data: df_gamed (two gamed baselines, the first rows in index
    order, as alpaca_eval's lookup by row label needs), and per model its annotations against the
    baseline (preference 1 = baseline wins, 2 = model wins, 0 = draw)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=n)
    gamed = pd.DataFrame({
        "model": np.repeat(["gamed_verbose", "gamed_concise"], n),
        "index": np.tile(np.arange(n), 2),
        "preference": rng.random(2 * n).round(2),
        "std_delta_len": np.concatenate([rng.normal(-1, 1, n), rng.normal(1, 1, n)]),
        "instruction_difficulty": np.tile(difficulty, 2),
        "not_gamed_baseline": False,
    })
    annotations = {}
    for m, (skill, verbosity) in {"model_long": (0.2, 600), "model_short": (0.6, -300)}.items():
        len_base = rng.integers(100, 1500, n)
        len_m = np.maximum(len_base + verbosity + rng.integers(-400, 400, n), 5)
        logit = skill + 0.9 * np.tanh((len_m - len_base) / 500) - 0.7 * difficulty
        p = 1 / (1 + np.exp(-logit))
        u = rng.random(n)
        pref = np.where(u < 0.9 * p, 2.0, np.where(u < 0.9 * p + 0.1, 0.0, 1.0))
        annotations[m] = pd.DataFrame({
            "preference": pref, "output_1": ["b" * int(x) for x in len_base], "output_2": ["m" * int(x) for x in len_m],
            "index": np.arange(n), "generator_1": "baseline", "generator_2": m, "annotator": "judge",
        })
    return gamed, annotations


def _as_battles(annotations: dict[str, pd.DataFrame], swap_every: int = 2) -> pd.DataFrame:
    """The same annotations as evalign battles; every other row shown in the other order."""
    parts = []
    for m, ann in annotations.items():
        verdict = ann["preference"].map({2.0: "A", 1.0: "B", 0.0: "tie"})
        df = pd.DataFrame({
            "id": ann["index"].astype(str), "system_a": m, "system_b": "baseline", "verdict": verdict,
            "response_a": ann["output_2"], "response_b": ann["output_1"],
        })
        flip = np.arange(len(df)) % swap_every == 1
        df.loc[flip, ["system_a", "system_b"]] = df.loc[flip, ["system_b", "system_a"]].to_numpy()
        df.loc[flip, ["response_a", "response_b"]] = df.loc[flip, ["response_b", "response_a"]].to_numpy()
        df.loc[flip, "verdict"] = df.loc[flip, "verdict"].map({"A": "B", "B": "A", "tie": "tie"})
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("glm_name", ["length_controlled_v1", "length_controlled_noreg"])
def test_lc_win_rate_parity_with_alpaca_eval(monkeypatch, tmp_path, glm_name):
    gamed, annotations = _lc_data(n=160, seed=0)
    path = tmp_path / "df_gamed.csv"
    gamed.to_csv(path, index=False)
    glm = _alpaca_glm(monkeypatch, str(path))
    settings = LCSettings(regularize_to_baseline_lambda=glm.GLM_INFO[glm_name]["regularize_to_baseline_lambda"])
    ours = lc_win_rates(_as_battles(annotations), "baseline", gamed=pd.read_csv(path), settings=settings)
    assert ours.difficulty_source == "gamed"
    for m, ann in annotations.items():
        i = ours.systems.index(m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = glm.get_length_controlled_winrate(ann.copy(), glm_name=glm_name, save_weights_dir=None)
            tight_info = {**glm.GLM_INFO[glm_name], "kwargs": {"n_splits": 5, "tol": 1e-12, "max_iter": 100000}}
            tight = glm.get_length_controlled_winrate(ann.copy(), save_weights_dir=None, glm_info=tight_info)
        # the definitions agree to the solver's precision: exact solver vs liblinear run to tol 1e-12
        assert ours.lc_win_rate[i] * 100 == pytest.approx(tight["length_controlled_winrate"], abs=1e-6)
        assert ours.lc_standard_error[i] * 100 == pytest.approx(tight["lc_standard_error"], abs=1e-6)
        # alpaca_eval at its own defaults: liblinear stops at tol 1e-4, which moves its figure by up to
        # about 0.15 points on these data (the difference is the peer's solver, not the definition)
        assert ours.lc_win_rate[i] * 100 == pytest.approx(theirs["length_controlled_winrate"], abs=0.3)
        # and the plain win rate is alpaca_eval's win_rate
        wr = win_rates(_as_battles(annotations), "baseline")
        assert wr.win_rate[wr.systems.index(m)] * 100 == pytest.approx(theirs["win_rate"], abs=1e-9)
        assert wr.standard_error[wr.systems.index(m)] * 100 == pytest.approx(theirs["standard_error"], abs=1e-9)


def test_lc_win_rate_outside_alpaca_eval():
    _, annotations = _lc_data(n=120, seed=4)
    df = _as_battles(annotations)
    fitted = lc_win_rates(df, "baseline")
    zero = lc_win_rates(df, "baseline", settings=LCSettings(difficulty="zero"))
    assert fitted.difficulty_source == "fitted" and zero.difficulty_source == "zero"
    raw = win_rates(df, "baseline")
    for r in (fitted, zero):
        i, j = r.systems.index("model_long"), r.systems.index("model_short")
        # the verbose model loses win rate once length is controlled; the concise one gains
        assert r.lc_win_rate[i] < raw.win_rate[i] and r.lc_win_rate[j] > raw.win_rate[j]
        assert r.lc_win_rate[r.systems.index("baseline")] == 0.5
    assert np.all(zero.weights[:, 1] == 0)  # no difficulty term
    given = lc_win_rates(df, "baseline", difficulty={str(i): 0.0 for i in range(120)}, settings=LCSettings())
    np.testing.assert_allclose(given.lc_win_rate, zero.lc_win_rate, atol=1e-12)
    board = leaderboard(df, settings=LeaderboardSettings(baseline="baseline", bt=BTSettings(n_bootstrap=20)))
    assert "lc_win_rate" in board.table.columns
    assert board.table.set_index("system").loc["model_long", "lc_win_rate"] == pytest.approx(fitted.lc_win_rate[i])


def test_lc_note_only_when_lc_values_exist():
    # the baseline x meets y only in unparseable battles; y and z fight: no LC win rate exists
    rows, ids, len_a, len_b = [], [], [], []
    for i in range(8):
        rows += [("x", "y", "unparseable"), ("y", "z", "A" if i % 3 else "B")]
        ids += [f"q{i}", f"q{i}"]
        len_a += [10, 10 + i]
        len_b += [20 + i, 20]
    df = battles(rows, id=ids, len_a=len_a, len_b=len_b)
    board = leaderboard(df, settings=LeaderboardSettings(baseline="x", bt=BTSettings(n_bootstrap=0)))
    assert "lc_win_rate" not in board.table.columns and board.lc is None
    assert "no lc_win_rate: no system has a resolved battle against x" in board.notes
    assert not any(n.startswith("lc_win_rate:") for n in board.notes)
    # y's battles against x resolved: y's LC win rate exists (z's not), and the note names the difficulty
    df.loc[df["system_a"] == "x", "verdict"] = ["A", "B", "B", "tie", "B", "A", "B", "B"]
    board = leaderboard(df, settings=LeaderboardSettings(baseline="x", bt=BTSettings(n_bootstrap=0)))
    lc = board.table.set_index("system")["lc_win_rate"]
    assert lc["x"] == 0.5 and np.isfinite(lc["y"]) and np.isnan(lc["z"])
    assert "lc_win_rate: instruction difficulty fitted" in board.notes


def test_fitted_difficulty_of_an_item_without_a_resolved_baseline_battle_is_the_prior_mean():
    _, annotations = _lc_data(n=60, seed=5)
    df = _as_battles(annotations)
    first = df.index[df["id"] == df["id"].iloc[0]]
    df.loc[first, "verdict"] = "unparseable"  # this item has no resolved battle against the baseline any more
    fitted = lc_win_rates(df, "baseline")  # was: "no instruction difficulty for id ..."
    given = lc_win_rates(df, "baseline", difficulty={**_fitted_map(df), str(df["id"].iloc[0]): 0.0})
    np.testing.assert_allclose(fitted.lc_win_rate, given.lc_win_rate, atol=1e-12)


def _fitted_map(df: pd.DataFrame) -> dict[str, float]:
    from evalign.rank import fit_instruction_difficulty

    return fit_instruction_difficulty(df, "baseline")


def test_judge_with_the_b_first_order_only_ranks_that_order():
    """Issue 32: ``j.ba`` without ``j.ab`` made every A-first battle "unparseable"; the order that was
    judged is ranked alone."""
    out = pd.DataFrame({"id": ["1", "2"], "system_a": ["X", "X"], "system_b": ["Y", "Z"], "j": ["A", "B"],
                        "j.ba": ["A", "B"]})
    both = judge_battles(out, "j")
    assert both["system_a"].tolist() == ["Y", "Z"] and both["verdict"].tolist() == ["B", "A"]


def test_skip_self_that_drops_every_battle_says_so():
    df = battles([("gpt-4", "llama", "A"), ("llama", "gpt-4", "B")])
    settings = LeaderboardSettings(bt=BTSettings(n_bootstrap=0), judges=("gpt-4",), skip_self=True)
    with pytest.raises(InputError, match=r"--skip-self leaves nothing to rank: each of the 2 battles includes a "
                                         r"judge's own outputs \(judge 'gpt-4' is system 'gpt-4'\)"):
        leaderboard(df, settings=settings)
