"""The length-controlled win rate of alpaca_eval (Dubois et al. 2024).

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy import sparse

from evalign.errors import InputError
from evalign.rank.battles import A_WINS, B_WINS, SWAP_CODE, TIE, BattleArrays, as_battle_arrays
from evalign.rank.bradley_terry import one_blas_thread
from evalign.rank.l1_logistic import glm_fits_cv, sigmoid


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
    # sufficient statistics: battles and summed targets per (system, item) pair
    pair, inv = np.unique(sys_i * ni + item, return_inverse=True)
    p_sys, p_item = pair // ni, pair % ni
    n_pair, y_pair = np.bincount(inv, minlength=pair.size).astype(np.float64), np.bincount(inv, y, pair.size)
    # the system-item block of the Hessian (minus), its sparsity fixed: data[k] belongs to pair order[k]
    V = sparse.csr_matrix((np.arange(1.0, pair.size + 1.0), (p_sys, p_item)), shape=(ns, ni))
    order = V.data.astype(np.int64) - 1
    params = np.zeros(ns + ni)
    with one_blas_thread():
        for _ in range(100):
            step = _difficulty_step(params, ns, p_sys, p_item, n_pair, y_pair, V, order, prior)
            params += step
            if np.max(np.abs(step)) < 1e-12:
                break
    return dict(zip(items.tolist(), params[ns:].tolist(), strict=True))


def _difficulty_step(
    params: np.ndarray, ns: int, p_sys: np.ndarray, p_item: np.ndarray, n_pair: np.ndarray, y_pair: np.ndarray,
    V: sparse.csr_matrix, order: np.ndarray, prior: float,
) -> np.ndarray:
    """One Newton step of :func:`fit_instruction_difficulty` (``params`` = systems' theta then items'
    gamma), the Hessian ridged by 1e-12 as the dense solve it replaces. The Hessian's system block and
    item block are diagonal, so the step solves the ``ns x ns`` Schur complement of the item block
    (``diag(a) - V diag(1 / d) V'``, V the per-pair weights, written into ``V.data`` in the order
    ``order``) and then the items one by one:
    ``O(pairs + ns^3)`` instead of ``O((ns + ni)^3)``."""
    ni = params.size - ns
    q = sigmoid(params[p_sys] - params[ns + p_item])
    r = y_pair - n_pair * q
    v = n_pair * q * (1 - q)
    g_s = np.bincount(p_sys, r, ns)
    g_i = -np.bincount(p_item, r, ni) - prior * params[ns:]
    a = np.bincount(p_sys, v, ns) + 1e-12
    d = np.bincount(p_item, v, ni) + prior + 1e-12
    V.data = v[order]
    schur = np.diag(a) - (V @ sparse.diags(1.0 / d) @ V.T).toarray()
    x_s = np.linalg.solve(schur, g_s + V @ (g_i / d))
    return np.concatenate([x_s, (g_i + V.T @ x_s) / d])


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


def _baseline_rows(
    ba: BattleArrays, base: int, source: str, diff_map: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The battles between the baseline and another system, grouped by that system (battle order kept
    within a system): their row numbers, the other system, and the instruction difficulty of each
    (looked up once per item id; ``"fitted"``: an item without a resolved battle against the baseline
    has the prior's mean, 0). A missing difficulty is an error naming the first such id."""
    rows = np.flatnonzero((ba.a == base) != (ba.b == base))
    other = np.where(ba.a[rows] == base, ba.b[rows], ba.a[rows])
    order = np.argsort(other, kind="stable")
    rows, other = rows[order], other[order]
    if source == "zero":
        return rows, other, np.zeros(rows.size)
    codes, uniques = pd.factorize(ba.ids[rows])  # type: ignore[index]
    if source == "fitted":
        values = [float(diff_map.get(i, 0.0)) for i in uniques]
    else:
        missing = [i for i in uniques if i not in diff_map]
        if missing:
            raise InputError(f"no instruction difficulty for id {missing[0]!r}", field="id")
        values = [float(diff_map[i]) for i in uniques]
    return rows, other, np.asarray(values, dtype=np.float64)[codes]


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
    rows_all, m_all, dif_all = _baseline_rows(ba, base, source, diff_map)
    fitted: list[int] = []  # the systems with enough rows for the GLM, their data and difficulties
    data: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    difs: list[np.ndarray] = []
    bounds = np.concatenate([[0], np.cumsum(np.bincount(m_all, minlength=k))])
    for m in range(k):
        if m == base or bounds[m] == bounds[m + 1]:
            continue
        rows, dif = rows_all[bounds[m]:bounds[m + 1]], dif_all[bounds[m]:bounds[m + 1]]
        m_first = ba.a[rows] == m
        code = np.where(m_first, ba.code[rows], SWAP_CODE[ba.code[rows]])
        y = np.where(code == A_WINS, 1.0, np.where(code == TIE, 0.5, np.where(code == B_WINS, 0.0, np.nan)))
        len_m = np.where(m_first, ba.len_a[rows], ba.len_b[rows])
        len_base = np.where(m_first, ba.len_b[rows], ba.len_a[rows])
        delta = len_base - len_m
        sd = np.std(delta, ddof=1) if delta.size > 1 else np.nan
        std_delta = delta / sd if sd > 0 else np.zeros_like(delta)
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
        fitted.append(m)
        data.append((Xt, yt, wt))
        difs.append(dif)
    for m, dif, (beta, C) in zip(fitted, difs, glm_fits_cv(data, s.cs, s.n_splits, s.tol), strict=True):
        pred = sigmoid(beta[1] * dif + beta[2])
        rate[m] = float(pred.mean())
        se[m] = float(pred.std(ddof=1) / math.sqrt(pred.size)) if pred.size > 1 else np.nan
        weights[m], cs[m] = beta, C
    return LCWinRates(baseline, ba.systems, rate, se, weights, cs, source)
