"""Reference for tests/rank/test_lc_fast.py: src/evalign/rank/length_controlled.py as of commit cd61692
(one L1 fit at a time, 26 sign patterns solved one by one, the dense difficulty Newton), verbatim but for
this docstring. The new module must give the same LC win rates, weights, chosen C and difficulties.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.rank.battles import A_WINS, B_WINS, SWAP_CODE, TIE, BattleArrays, as_battle_arrays


@dataclass(frozen=True)
class LCSettings:
    """Settings of :func:`lc_win_rates` (alpaca_eval ``length_controlled_v1``'s defaults).

    Attributes:
        regularize_to_baseline_lambda: weight (halved, as alpaca_eval) of the ``gamed`` rows in the fit;
            used only when ``gamed`` annotations are given (alpaca_eval's ``df_gamed.csv``). Without
            them the fit is alpaca_eval's ``length_controlled_noreg``.
        n_splits: folds of the grouped cross-validation choosing the L1 strength ``C``.
        cs: the grid of ``C`` (alpaca_eval: scikit-learn's ``Cs=10``, ``logspace(-4, 4, 10)``).
        difficulty: instruction difficulty when no ``difficulty`` mapping is given: ``"fitted"`` (see
            :func:`fit_instruction_difficulty`) or ``"zero"`` (no difficulty term).
        difficulty_prior: L2 strength of the fitted difficulties (a standard-normal prior at 1).
        tol: convergence of the exact L1 solver (max absolute Newton step).
    """

    regularize_to_baseline_lambda: float | None = 0.2
    n_splits: int = 5
    cs: tuple[float, ...] = tuple(np.logspace(-4, 4, 10).tolist())
    difficulty: Literal["fitted", "zero"] = "fitted"
    difficulty_prior: float = 1.0
    tol: float = 1e-12


@dataclass(frozen=True)
class LCWinRates:
    """Length-controlled win rates against ``baseline`` (proportions; alpaca_eval prints x100).

    Arrays aligned with :attr:`systems`: ``lc_win_rate`` (the baseline: 0.5 by construction; NaN for a
    system without battles against the baseline), ``lc_standard_error`` (standard error of the mean of
    the per-instruction predictions, alpaca_eval's ``lc_standard_error``), ``weights[i]`` the GLM
    coefficients ``(length, difficulty, system)`` of system i, ``c[i]`` the chosen L1 ``C``.
    ``difficulty_source``: ``"given"``, ``"gamed"``, ``"fitted"`` or ``"zero"``.
    """

    baseline: str
    systems: tuple[str, ...]
    lc_win_rate: np.ndarray
    lc_standard_error: np.ndarray
    weights: np.ndarray = field(repr=False)
    c: np.ndarray = field(repr=False)
    difficulty_source: str = "fitted"


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _l1_logistic(X: np.ndarray, p: np.ndarray, w: np.ndarray, C: float, tol: float) -> np.ndarray:
    """Exact minimiser of ``||beta||_1 + C * sum_r w_r * CE(p_r, sigmoid(X_r beta))`` (soft labels p):
    liblinear's L1 logistic objective on alpaca_eval's duplicated rows, solved by proximal Newton with
    an exact coordinate-descent inner solve and a backtracking line search."""
    d = X.shape[1]
    beta = np.zeros(d)

    def objective(bt: np.ndarray) -> float:
        z = X @ bt
        ce = p * np.logaddexp(0.0, -z) + (1 - p) * np.logaddexp(0.0, z)
        return float(np.abs(bt).sum() + C * np.sum(w * ce))

    f = objective(beta)
    for _ in range(200):
        q = _sigmoid(X @ beta)
        g = C * X.T @ (w * (q - p))
        H = C * (X.T * (w * q * (1 - q))) @ X
        new = _l1_quadratic(g, H, beta)
        step = new - beta
        if np.max(np.abs(step)) < tol:
            break
        delta = g @ step + np.abs(new).sum() - np.abs(beta).sum()
        t = 1.0
        while t > 1e-10:
            cand = beta + t * step
            fc = objective(cand)
            if fc <= f + 0.01 * t * delta or abs(fc - f) < 1e-15 * max(1.0, abs(f)):
                break
            t *= 0.5
        beta, f = cand, fc
    return beta


def _l1_quadratic(g: np.ndarray, H: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """Exact minimiser x of ``g'(x - beta) + (x - beta)'H(x - beta)/2 + ||x||_1`` for a few
    coordinates: every sign pattern (-, 0, + per coordinate) gives a linear system on its non-zero
    coordinates; the best sign-consistent solution is the minimum (the problem is convex)."""
    d = beta.size
    c = g - H @ beta  # the model is c'x + x'Hx/2 + |x|_1 + const
    best, best_f = np.zeros(d), 0.0
    for pattern in itertools.product((-1.0, 0.0, 1.0), repeat=d):
        sg = np.array(pattern)
        S = np.flatnonzero(sg)
        if S.size == 0:
            continue
        Hs = H[np.ix_(S, S)]
        if np.any(np.diag(Hs) <= 1e-300):  # a feature that is zero on every row stays at 0
            continue
        try:
            xs = np.linalg.solve(Hs, -(c[S] + sg[S]))
        except np.linalg.LinAlgError:
            continue
        if np.any(xs * sg[S] <= 0):
            continue
        x = np.zeros(d)
        x[S] = xs
        f = float(c @ x + 0.5 * x @ H @ x + np.abs(x).sum())
        if f < best_f:
            best, best_f = x, f
    return best


def _glm_fit(X: np.ndarray, p: np.ndarray, w: np.ndarray, s: LCSettings) -> tuple[np.ndarray, float]:
    """alpaca_eval's ``fit_LogisticRegressionCV(is_ytrue_proba=True)``: ``C`` chosen on ``s.cs`` by
    ``GroupKFold(n_splits)`` (scikit-learn's deterministic assignment of equal-size groups: row g of
    n goes to fold ``(n - 1 - g) % n_splits``) scored by the weighted mean soft-label log loss with
    predictions clipped to [1e-15, 1 - 1e-15], the first best ``C`` (sum of fold scores), then a refit
    on all rows."""
    n = p.size
    fold = (n - 1 - np.arange(n)) % s.n_splits
    scores = np.zeros(len(s.cs))
    for f in range(s.n_splits):
        tr, te = fold != f, fold == f
        for ci, C in enumerate(s.cs):
            beta = _l1_logistic(X[tr], p[tr], w[tr], C, s.tol)
            q = np.clip(_sigmoid(X[te] @ beta), 1e-15, 1 - 1e-15)
            scores[ci] += np.mean(w[te] * (p[te] * np.log(q) + (1 - p[te]) * np.log(1 - q)))
    best = float(s.cs[int(np.argmax(scores))])
    return _l1_logistic(X, p, w, best, s.tol), best


def fit_instruction_difficulty(
    battles: pd.DataFrame | BattleArrays, baseline: str, *, prior: float = 1.0, verdict: str = "verdict"
) -> dict[str, float]:
    """Instruction difficulty for instructions outside AlpacaEval, estimated from the battles.

    AlpacaEval's ``instruction_difficulty`` is a per-instruction term fitted once over the annotations
    of many leaderboard models against the baseline (Dubois et al. 2024). Here the same is fitted on
    the battles given: the logistic model ``logit P(system m beats the baseline on item x) = theta_m -
    gamma_x`` over every non-baseline system, ties as half wins, with an L2 penalty ``prior / 2 *
    sum gamma_x^2`` (a normal prior keeps items that every system won or lost finite); ``theta`` is
    unpenalised. Returns ``gamma`` (higher = harder for the systems) by item id, for the items with a
    resolved battle against the baseline (for the others the prior's mean, 0, is the estimate).
    """
    ba = as_battle_arrays(battles, verdict)
    if ba.ids is None:
        raise InputError("fitting instruction difficulty needs an 'id' column", field="id")
    base = ba.index(baseline, "baseline")
    keep = ((ba.a == base) | (ba.b == base)) & ba.resolved()
    me = np.where(ba.a[keep] == base, ba.b[keep], ba.a[keep])
    code = np.where(ba.a[keep] == base, SWAP_CODE[ba.code[keep]], ba.code[keep])
    y = np.where(code == A_WINS, 1.0, np.where(code == TIE, 0.5, 0.0))
    items, item = np.unique(ba.ids[keep], return_inverse=True)
    systems, sys_i = np.unique(me, return_inverse=True)
    ns, ni = systems.size, items.size
    if ni == 0:
        return {}
    params = np.zeros(ns + ni)
    for _ in range(100):
        z = params[sys_i] - params[ns + item]
        q = _sigmoid(z)
        r = y - q
        g = np.concatenate([np.bincount(sys_i, r, ns), -np.bincount(item, r, ni)])
        g[ns:] -= prior * params[ns:]
        v = q * (1 - q)
        H = np.zeros((ns + ni, ns + ni))
        np.add.at(H, (sys_i, sys_i), v)
        np.add.at(H, (ns + item, ns + item), v)
        np.add.at(H, (sys_i, ns + item), -v)
        np.add.at(H, (ns + item, sys_i), -v)
        H[np.arange(ns, ns + ni), np.arange(ns, ns + ni)] += prior
        step = np.linalg.solve(H + 1e-12 * np.eye(ns + ni), g)
        params += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return dict(zip(items.tolist(), params[ns:].tolist(), strict=True))


def _difficulty(
    ba: BattleArrays, baseline: str, difficulty: Mapping[str, float] | None, gamed: pd.DataFrame | None,
    s: LCSettings,
) -> tuple[str, Mapping[str, float]]:
    """The instruction difficulty's source (given / gamed / fitted / zero) and its values by item id."""
    if difficulty is not None:
        source, diff_map = "given", difficulty
    elif gamed is not None:
        first = gamed.drop_duplicates("index")
        diff_map = dict(zip(first["index"].astype(str), first["instruction_difficulty"].astype(float), strict=True))
        source = "gamed"
    else:
        source = s.difficulty
        diff_map = fit_instruction_difficulty(ba, baseline, prior=s.difficulty_prior) if s.difficulty == "fitted" else {}
    if ba.ids is None and source != "zero":
        raise InputError("instruction difficulty needs an 'id' column (or settings.difficulty='zero')", field="id")
    return source, diff_map


def _gamed_rows(gamed: pd.DataFrame | None, s: LCSettings) -> tuple[np.ndarray, np.ndarray] | None:
    """alpaca_eval's regularisation rows (features, targets), or None without ``gamed`` or lambda."""
    if gamed is None or not s.regularize_to_baseline_lambda:
        return None
    features = np.column_stack([
        np.tanh(gamed["std_delta_len"].to_numpy(np.float64)),
        gamed["instruction_difficulty"].to_numpy(np.float64),
        np.zeros(len(gamed)),
    ])
    return features, gamed["preference"].to_numpy(np.float64)


def lc_win_rates(
    battles: pd.DataFrame | BattleArrays,
    baseline: str,
    *,
    difficulty: Mapping[str, float] | None = None,
    gamed: pd.DataFrame | None = None,
    settings: LCSettings = LCSettings(),
    verdict: str = "verdict",
) -> LCWinRates:
    """Length-controlled win rate of every system against ``baseline`` (Dubois et al. 2024), defined
    as alpaca_eval's ``get_length_controlled_winrate`` (``glm_name="length_controlled_v1"``).

    For each system m, on its battles against the baseline (either order; alpaca_eval's
    ``output_1`` = the baseline, ``output_2`` = m):

    * target ``y`` = 1 (m wins), 0.5 (tie), 0 (baseline wins); unparseable / missing verdicts are
      left out of the fit (alpaca_eval drops NaN preferences) but, as in alpaca_eval, still count in
      the prediction average and the length scale;
    * features ``tanh(std_delta_len)`` with ``std_delta_len = (len_baseline - len_m) /
      std(len_baseline - len_m)`` (sample std over m's battles, lengths in characters), the
      instruction difficulty of the battle's ``id``, and a system term (1 for m's rows; 0 for the
      ``gamed`` regularisation rows, whose weight is ``regularize_to_baseline_lambda / 2``); no
      intercept;
    * fit: L1-penalised logistic regression with soft labels, ``C`` chosen by grouped 5-fold
      cross-validation on the log loss (alpaca_eval's ``fit_LogisticRegressionCV``: scikit-learn
      ``LogisticRegressionCV(penalty="l1", solver="liblinear")``), solved here exactly (liblinear
      stops at its tolerance, so the two agree to the solver's precision);
    * ``lc_win_rate`` = mean over m's battles of ``sigmoid(w_difficulty * difficulty + w_system)``,
      the prediction with the length term set to zero.

    Instruction difficulty: ``difficulty`` (item id -> value; AlpacaEval's own
    ``instruction_difficulty.csv`` for AlpacaEval instructions); else the ``gamed`` table's
    ``instruction_difficulty`` (alpaca_eval's source, first row per ``index``); else, for
    instructions outside AlpacaEval, ``settings.difficulty``: ``"fitted"`` by
    :func:`fit_instruction_difficulty` on all systems' battles against the baseline, or ``"zero"``
    (the difficulty term drops out and the model has the length and system terms only).
    """
    s = settings
    ba = as_battle_arrays(battles, verdict)
    k = len(ba.systems)
    base = ba.index(baseline, "baseline")
    if ba.len_a is None or ba.len_b is None:
        raise InputError("the length-controlled win rate needs len_a / len_b (or response_a / response_b)",
                         field="len_a")
    source, diff_map = _difficulty(ba, baseline, difficulty, gamed, s)
    g_rows = _gamed_rows(gamed, s)
    rate = np.full(k, np.nan)
    se = np.full(k, np.nan)
    weights = np.full((k, 3), np.nan)
    cs = np.full(k, np.nan)
    rate[base], weights[base] = 0.5, 0.0
    for m in range(k):
        if m == base:
            continue
        rows = np.flatnonzero(((ba.a == m) & (ba.b == base)) | ((ba.a == base) & (ba.b == m)))
        if rows.size == 0:
            continue
        m_first = ba.a[rows] == m
        code = np.where(m_first, ba.code[rows], SWAP_CODE[ba.code[rows]])
        y = np.where(code == A_WINS, 1.0, np.where(code == TIE, 0.5, np.where(code == B_WINS, 0.0, np.nan)))
        len_m = np.where(m_first, ba.len_a[rows], ba.len_b[rows])
        len_base = np.where(m_first, ba.len_b[rows], ba.len_a[rows])
        delta = len_base - len_m
        sd = np.std(delta, ddof=1) if delta.size > 1 else np.nan
        std_delta = delta / sd if sd > 0 else np.zeros_like(delta)
        if source == "zero":
            dif = np.zeros(rows.size)
        else:
            ids = ba.ids[rows]  # type: ignore[index]
            try:  # fitted: an item without a resolved battle against the baseline has the prior's mean, 0
                dif = np.array([float(diff_map.get(i, 0.0) if source == "fitted" else diff_map[i]) for i in ids])
            except KeyError as exc:
                raise InputError(f"no instruction difficulty for id {exc.args[0]!r}", field="id") from None
        X = np.column_stack([np.tanh(std_delta), dif, np.ones(rows.size)])
        ok = ~np.isnan(y)
        Xt, yt, wt = X[ok], y[ok], np.ones(int(ok.sum()))
        if g_rows is not None:
            lam = float(s.regularize_to_baseline_lambda or 0.0)
            Xt = np.vstack([g_rows[0], Xt])
            yt = np.concatenate([g_rows[1], yt])
            wt = np.concatenate([np.full(g_rows[1].size, lam / 2.0), wt])
        if yt.size < s.n_splits:
            continue
        beta, C = _glm_fit(Xt, yt, wt, s)
        pred = _sigmoid(beta[1] * dif + beta[2])
        rate[m] = float(pred.mean())
        se[m] = float(pred.std(ddof=1) / math.sqrt(pred.size)) if pred.size > 1 else np.nan
        weights[m], cs[m] = beta, C
    return LCWinRates(baseline, ba.systems, rate, se, weights, cs, source)
