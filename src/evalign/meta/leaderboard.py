"""From pairwise verdicts to a leaderboard: win rates, length-controlled win rates, Bradley-Terry
scores with bootstrap intervals, order pooling, judge panels and the self-preference guard.

All functions are pure (no I/O) and seeded where they resample. Results are small frozen dataclasses.

Conventions
-----------
* **Battles** are rows of a DataFrame with ``system_a``, ``system_b`` and a verdict column (default
  ``verdict``) holding ``A`` (system_a wins), ``B`` (system_b wins), ``tie`` or ``unparseable``; a
  missing verdict (None / NaN / empty: the judge was skipped or its backend failed) is *missing*.
  Case and surrounding spaces are ignored, and Chatbot Arena's ``model_a`` / ``model_b`` /
  ``tie (bothbad)`` are read as ``A`` / ``B`` / ``tie``. Optional columns: ``id`` (the item; needed
  for order pooling, clustered bootstrap and the LC win rate's instruction difficulty), ``task``, and
  the response lengths ``len_a`` / ``len_b`` (else computed as ``len(response_a)`` in characters,
  when those columns exist, as alpaca_eval does).
* **Scores** of a battle: win 1, tie 1/2, loss 0 (ties count half). ``unparseable`` and missing
  verdicts are excluded from every statistic and counted (``n_unparseable``, ``n_missing``).
* **Win rates** are proportions in [0, 1] (alpaca_eval prints percentages: multiply by 100).
* **Both presentation orders.** When the judge saw a pair in both orders, the table has two rows with
  the same ``id`` and swapped systems. By default (``orders="pool"``) both rows are battles, as
  arena-hard-auto counts its two games per pair; ``orders="combine"`` first merges each matched pair
  into one battle with :func:`combine_orders` (agreeing verdicts kept, disagreeing ones a tie, an
  order without a verdict leaves the pair unparseable: evalign's own rule for order-swapped judging).
  :func:`position_agreement` reports how often the two orders agree.
* **Bradley-Terry** (Bradley & Terry 1952; Zermelo 1929): ``P(i beats j) = 1 / (1 + 10 ** ((R_j -
  R_i) / scale))``. Strengths are the maximum-likelihood estimate over all resolved battles with ties
  as half a win for each side, i.e. the logistic regression of arena-hard-auto's ``show_result.py``
  (``compute_mle_elo``) and FastChat's ``fastchat/serve/monitor/elo_analysis.py``
  (``compute_elo_mle_with_tie``): ratings ``R = scale / ln(base) * theta + init_rating`` with
  ``scale = 400``, ``base = 10``, ``init_rating = 1000``, shifted so that the ``anchor`` system has
  ``anchor_rating`` (without an anchor: the mean rating is ``init_rating``, which is where an
  unregularised fit started at zero lands). Intervals: percentile bootstrap over battles (arena-hard's
  ``battles.sample(frac=1, replace=True)``) or, with ``cluster=True``, over items (all battles of a
  resampled ``id`` come along), each resample anchored the same way. See :func:`bradley_terry` for
  the algorithm and the significance clusters.
* **Length-controlled win rate** (Dubois, Galambosi, Liang & Hashimoto 2024, "Length-Controlled
  AlpacaEval: A Simple Way to Debias Automatic Evaluators"), exactly as alpaca_eval's
  ``src/alpaca_eval/metrics/glm_winrate.py`` (``length_controlled_v1``); see :func:`lc_win_rates`.

References: Bradley, R. A. & Terry, M. E. (1952), Biometrika 39(3/4); Hunter, D. R. (2004), "MM
algorithms for generalized Bradley-Terry models", Annals of Statistics 32(1); Chiang et al. (2024),
"Chatbot Arena", ICML; Li et al. (2024), "From Crowdsourced Data to High-Quality Benchmarks:
Arena-Hard and BenchBuilder Pipeline"; Zheng et al. (2023), "Judging LLM-as-a-Judge with MT-Bench and
Chatbot Arena" (position bias, self-enhancement bias); Efron & Tibshirani (1993), An Introduction to
the Bootstrap.
"""

from __future__ import annotations

import fnmatch
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from evalign.errors import InputError
from evalign.meta.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha, majority_vote
from evalign.meta.significance import significance_clusters

#: verdict codes (the order of :data:`VERDICTS`); MISSING = no verdict at all
A_WINS, B_WINS, TIE, UNPARSEABLE, MISSING = 0, 1, 2, 3, 4
VERDICTS = ("A", "B", "tie", "unparseable")
_SPELLINGS = {
    "a": A_WINS,
    "model_a": A_WINS,
    "b": B_WINS,
    "model_b": B_WINS,
    "tie": TIE,
    "tie (bothbad)": TIE,
    "unparseable": UNPARSEABLE,
    "": MISSING,
}
_SWAP_CODE = np.array([B_WINS, A_WINS, TIE, UNPARSEABLE, MISSING], dtype=np.int8)
_LN10 = math.log(10.0)


# --- reading battles ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BattleArrays:
    """Battles as integer arrays (the form every statistic below works on).

    Attributes:
        systems: sorted system names; ``a`` / ``b`` index into it.
        a, b: ``(n,)`` system indices of the first / second response.
        code: ``(n,)`` verdict codes (:data:`A_WINS`, :data:`B_WINS`, :data:`TIE`, :data:`UNPARSEABLE`,
            :data:`MISSING`).
        ids: ``(n,)`` item ids as strings, or None without an ``id`` column.
        len_a, len_b: ``(n,)`` response lengths (NaN where unknown), or None.
    """

    systems: tuple[str, ...]
    a: np.ndarray = field(repr=False)
    b: np.ndarray = field(repr=False)
    code: np.ndarray = field(repr=False)
    ids: np.ndarray | None = field(default=None, repr=False)
    len_a: np.ndarray | None = field(default=None, repr=False)
    len_b: np.ndarray | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return int(self.code.size)

    def index(self, system: str, what: str = "system") -> int:
        """Position of ``system`` in :attr:`systems` (InputError naming the known systems if absent)."""
        try:
            return self.systems.index(system)
        except ValueError:
            known = ", ".join(self.systems[:10]) + (" ..." if len(self.systems) > 10 else "")
            raise InputError(f"{what} {system!r} is not one of the systems ({known})", field=what) from None

    def resolved(self) -> np.ndarray:
        """Mask of battles with a verdict A, B or tie."""
        return self.code <= TIE


def read_verdicts(values: object, name: str = "verdict") -> np.ndarray:
    """Verdict codes of a column (see the module conventions); InputError naming the first bad row."""
    s = pd.Series(values, dtype=object)
    miss = s.isna().to_numpy()
    text = s.where(~miss, "").astype(str).str.strip().str.lower()
    codes = text.map(_SPELLINGS)
    bad = codes.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"verdict {s.iloc[i]!r} is not one of A, B, tie, unparseable", line=i + 1, field=name, line_word="row"
        )
    return codes.to_numpy(dtype=np.int8)


def battle_arrays(battles: pd.DataFrame, *, verdict: str = "verdict", systems: Sequence[str] | None = None) -> BattleArrays:
    """Encode a battle table (see the module conventions) as :class:`BattleArrays`."""
    for col in ("system_a", "system_b", verdict):
        if col not in battles.columns:
            raise InputError("battle table has no such column", field=col)
    sa = battles["system_a"].astype(str).to_numpy()
    sb = battles["system_b"].astype(str).to_numpy()
    same = np.flatnonzero(sa == sb)
    if same.size:
        raise InputError("a system battles itself", line=int(same[0]) + 1, field="system_b", line_word="row")
    names = tuple(sorted(set(sa) | set(sb))) if systems is None else tuple(systems)
    lookup = {s: i for i, s in enumerate(names)}
    try:
        a = np.fromiter((lookup[x] for x in sa), dtype=np.int64, count=sa.size)
        b = np.fromiter((lookup[x] for x in sb), dtype=np.int64, count=sb.size)
    except KeyError as exc:
        raise InputError(f"system {exc.args[0]!r} is not in systems", field="system_a") from None
    ids = battles["id"].astype(str).to_numpy() if "id" in battles.columns else None
    len_a = len_b = None
    if "len_a" in battles.columns and "len_b" in battles.columns:
        len_a = pd.to_numeric(battles["len_a"], errors="coerce").to_numpy(dtype=np.float64)
        len_b = pd.to_numeric(battles["len_b"], errors="coerce").to_numpy(dtype=np.float64)
    elif "response_a" in battles.columns and "response_b" in battles.columns:
        len_a = battles["response_a"].map(lambda t: len(t) if isinstance(t, str) else np.nan).to_numpy(np.float64)
        len_b = battles["response_b"].map(lambda t: len(t) if isinstance(t, str) else np.nan).to_numpy(np.float64)
    return BattleArrays(names, a, b, read_verdicts(battles[verdict].to_numpy(), verdict), ids, len_a, len_b)


def _as_arrays(battles: pd.DataFrame | BattleArrays, verdict: str) -> BattleArrays:
    return battles if isinstance(battles, BattleArrays) else battle_arrays(battles, verdict=verdict)


def judge_battles(table: pd.DataFrame, judge: str, *, orders: Literal["both", "combined"] = "both") -> pd.DataFrame:
    """Battle rows from the output of ``evalign judge`` in relative mode (one row per pair).

    ``table`` has ``system_a``, ``system_b``, optional ``id`` / ``response_a`` / ``response_b`` /
    ``len_a`` / ``len_b`` / ``task``, and the judge's columns: ``<judge>`` (the pair's verdict, both
    orders resolved), ``<judge>.ab`` and ``<judge>.ba`` (each order's verdict, mapped back to the
    pair's orientation; None without a verdict). ``orders="combined"``: one battle per pair with the
    ``<judge>`` verdict. ``orders="both"`` (when ``<judge>.ba`` exists and has a verdict somewhere):
    two battles per pair, the A-first one with the ``.ab`` verdict and the B-first one with systems,
    responses and lengths swapped and the ``.ba`` verdict as the judge gave it in that order (so
    :func:`position_agreement` can match them); an order without a verdict is ``unparseable`` when
    the other order has one, else the pair's own verdict column decides (missing or unparseable).
    Rows without an ``id`` get their row number as id.
    """
    if judge not in table.columns:
        raise InputError("no such judge column", field=judge)
    keep = [c for c in ("id", "system_a", "system_b", "response_a", "response_b", "len_a", "len_b", "task")
            if c in table.columns]
    base = table[keep].copy()
    if "id" not in base.columns:
        base.insert(0, "id", [str(i) for i in range(len(base))])
    ab_col, ba_col = f"{judge}.ab", f"{judge}.ba"
    if orders == "combined" or ba_col not in table.columns or table[ba_col].isna().all():
        return base.assign(verdict=table[judge].to_numpy()).reset_index(drop=True)
    pair = table[judge].astype(object).where(table[judge].notna(), None).to_numpy()

    def one(col: str) -> np.ndarray:
        v = table[col].astype(object).where(table[col].notna(), None).to_numpy() if col in table.columns else None
        out = np.empty(len(table), dtype=object)
        for i in range(len(table)):
            x = None if v is None else v[i]
            out[i] = x if x is not None else ("unparseable" if pair[i] is not None else None)
        return out

    first = base.assign(verdict=one(ab_col))
    second = base.copy()
    for x, y in (("system_a", "system_b"), ("response_a", "response_b"), ("len_a", "len_b")):
        if x in second.columns:
            second[[x, y]] = base[[y, x]].to_numpy()
    second["verdict"] = [{"A": "B", "B": "A"}.get(v, v) if isinstance(v, str) else v for v in one(ba_col)]
    return pd.concat([first, second], ignore_index=True)


# --- win rates ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WinRates:
    """Win rates of every system against one baseline system (ties count half).

    Arrays are aligned with :attr:`systems` (the baseline included: its win rate against itself is
    0.5 by definition, with zero battles). ``win_rate = (wins + ties / 2) / (wins + losses + ties)``;
    ``standard_error`` is the standard error of the mean of the per-battle scores (1, 1/2, 0), as
    alpaca_eval's ``standard_error``; unparseable and missing verdicts are excluded and counted.
    """

    baseline: str
    systems: tuple[str, ...]
    win_rate: np.ndarray
    standard_error: np.ndarray
    n_wins: np.ndarray
    n_losses: np.ndarray
    n_ties: np.ndarray
    n_unparseable: np.ndarray
    n_missing: np.ndarray

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({
            "system": self.systems, "win_rate": self.win_rate, "standard_error": self.standard_error,
            "n_wins": self.n_wins, "n_losses": self.n_losses, "n_ties": self.n_ties,
            "n_unparseable": self.n_unparseable, "n_missing": self.n_missing,
        })


def _oriented(ba: BattleArrays, focus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every battle, the (focus-side system, other system, code from the focus side's view)
    rows; battles not involving a focus system are dropped. ``focus``: boolean mask over systems."""
    rows_a = focus[ba.a]
    rows_b = focus[ba.b]
    me = np.concatenate([ba.a[rows_a], ba.b[rows_b]])
    other = np.concatenate([ba.b[rows_a], ba.a[rows_b]])
    code = np.concatenate([ba.code[rows_a], _SWAP_CODE[ba.code[rows_b]]])
    return me, other, code


def win_rates(
    battles: pd.DataFrame | BattleArrays, baseline: str, *, verdict: str = "verdict"
) -> WinRates:
    """Win rate of every system against ``baseline`` (battles between the two, either order)."""
    ba = _as_arrays(battles, verdict)
    k = len(ba.systems)
    base = ba.index(baseline, "baseline")
    keep = (ba.a == base) | (ba.b == base)
    me = np.where(ba.a[keep] == base, ba.b[keep], ba.a[keep])
    code = np.where(ba.a[keep] == base, _SWAP_CODE[ba.code[keep]], ba.code[keep])
    counts = np.zeros((k, 5), dtype=np.int64)
    np.add.at(counts, (me, code.astype(np.int64)), 1)
    w, lo, t = counts[:, A_WINS], counts[:, B_WINS], counts[:, TIE]
    n = w + lo + t
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (w + 0.5 * t) / n
        # sample variance of scores x in {1, 1/2, 0}: (sum x^2 - n mean^2) / (n - 1)
        var = (w + 0.25 * t - n * rate**2) / (n - 1)
        se = np.sqrt(np.maximum(var, 0.0) / n)
    rate[base], se[base] = 0.5, np.nan
    return WinRates(baseline, ba.systems, rate, se, w, lo, t, counts[:, UNPARSEABLE], counts[:, MISSING])


@dataclass(frozen=True)
class WinRateMatrix:
    """Head-to-head results of every pair of systems.

    ``score[i, j]`` = wins of system i over j plus half their ties; ``n[i, j]`` = resolved battles
    between i and j (symmetric); ``rate[i, j] = score[i, j] / n[i, j]`` (NaN without battles and on
    the diagonal), so ``rate[i, j] + rate[j, i] = 1``.
    """

    systems: tuple[str, ...]
    score: np.ndarray = field(repr=False)
    n: np.ndarray = field(repr=False)

    @property
    def rate(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            r = self.score / self.n
        r[self.n == 0] = np.nan
        return r

    def frame(self) -> pd.DataFrame:
        """The rate matrix as a DataFrame (rows: the system, columns: its opponent)."""
        return pd.DataFrame(self.rate, index=list(self.systems), columns=list(self.systems))


def _score_matrix(a: np.ndarray, b: np.ndarray, code: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``W[i, j]`` = (weighted) wins of i over j + half the ties, from resolved battles."""
    w = np.ones(a.size) if weights is None else weights
    win_a = np.where(code == A_WINS, 1.0, np.where(code == TIE, 0.5, 0.0)) * w
    win_b = np.where(code == B_WINS, 1.0, np.where(code == TIE, 0.5, 0.0)) * w
    flat = np.bincount(a * k + b, win_a, k * k) + np.bincount(b * k + a, win_b, k * k)
    return flat.reshape(k, k)


def win_rate_matrix(battles: pd.DataFrame | BattleArrays, *, verdict: str = "verdict") -> WinRateMatrix:
    """The win-rate matrix of every pair of systems (ties count half; see :class:`WinRateMatrix`)."""
    ba = _as_arrays(battles, verdict)
    k = len(ba.systems)
    r = ba.resolved()
    score = _score_matrix(ba.a[r], ba.b[r], ba.code[r], k)
    return WinRateMatrix(ba.systems, score, score + score.T)


# --- both presentation orders -------------------------------------------------------------------


@dataclass(frozen=True)
class PositionAgreement:
    """Agreement of a judge with itself when the two responses are shown in the other order.

    Pairs are two rows with the same ``id`` and swapped systems (the *n*-th A-first row of an item
    and pair of systems is matched with its *n*-th B-first row). ``agreement``: share of matched pairs
    with both verdicts resolved (A / B / tie) whose verdicts are the same once mapped back to one
    orientation; ``per_system[s]``: the same over the pairs involving system s (NaN when none);
    ``first_position_rate``: share of the resolved non-tie verdicts of matched rows that chose the
    response shown first (0.5 = no position preference; Zheng et al. 2023).
    """

    agreement: float
    n_pairs: int
    n_unmatched: int
    first_position_rate: float
    systems: tuple[str, ...]
    per_system: np.ndarray = field(repr=False)


def _match_orders(ba: BattleArrays) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(first, second)`` of the matched order-swapped pairs (see PositionAgreement)."""
    if ba.ids is None:
        raise InputError("matching the two presentation orders needs an 'id' column", field="id")
    lo, hi = np.minimum(ba.a, ba.b), np.maximum(ba.a, ba.b)
    frame = pd.DataFrame({"id": ba.ids, "lo": lo, "hi": hi, "fwd": ba.a < ba.b, "row": np.arange(ba.n)})
    frame["nth"] = frame.groupby(["id", "lo", "hi", "fwd"], sort=False).cumcount()
    fwd, bwd = frame[frame["fwd"]], frame[~frame["fwd"]]
    m = fwd.merge(bwd, on=["id", "lo", "hi", "nth"], suffixes=("_f", "_b"))
    return m["row_f"].to_numpy(np.int64), m["row_b"].to_numpy(np.int64)


def position_agreement(battles: pd.DataFrame | BattleArrays, *, verdict: str = "verdict") -> PositionAgreement:
    """How often the judge gives the same verdict in both presentation orders (see the class)."""
    ba = _as_arrays(battles, verdict)
    k = len(ba.systems)
    f, s = _match_orders(ba)
    cf, cs = ba.code[f], _SWAP_CODE[ba.code[s]]  # both from system_a-of-row-f's view
    both = (cf <= TIE) & (cs <= TIE)
    agree = (cf == cs) & both
    per_n = np.bincount(ba.a[f][both], minlength=k) + np.bincount(ba.b[f][both], minlength=k)
    per_agree = np.bincount(ba.a[f][agree], minlength=k) + np.bincount(ba.b[f][agree], minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = per_agree / per_n
    per = np.where(per_n > 0, per, np.nan)
    raw = np.concatenate([ba.code[f], ba.code[s]])
    decided = (raw == A_WINS) | (raw == B_WINS)
    n_both = int(both.sum())
    return PositionAgreement(
        agreement=float(agree.sum() / n_both) if n_both else float("nan"),
        n_pairs=n_both,
        n_unmatched=int(ba.n - 2 * f.size),
        first_position_rate=float((raw == A_WINS).sum() / decided.sum()) if decided.any() else float("nan"),
        systems=ba.systems,
        per_system=per,
    )


def combine_orders(battles: pd.DataFrame, *, verdict: str = "verdict") -> pd.DataFrame:
    """One battle per order-swapped pair: the A-first row keeps its systems, and its verdict becomes
    the agreed verdict (same in both orders), ``tie`` (the orders disagree) or ``unparseable`` (an
    order without a resolved verdict). Rows without a partner are kept as they are."""
    ba = battle_arrays(battles, verdict=verdict)
    f, s = _match_orders(ba)
    cf, cs = ba.code[f], _SWAP_CODE[ba.code[s]]
    out_code = np.where((cf <= TIE) & (cs <= TIE), np.where(cf == cs, cf, TIE), UNPARSEABLE)
    out = battles.copy()
    col = out[verdict].astype(object).to_numpy(copy=True)
    col[f] = np.array(VERDICTS, dtype=object)[out_code]
    out[verdict] = col  # the lengths of the A-first row are the pair's lengths
    return out.drop(index=out.index[s]).reset_index(drop=True)


# --- Bradley-Terry --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BTSettings:
    """Settings of :func:`bradley_terry` (arena-hard-auto's defaults).

    Attributes:
        scale, base, init_rating: the Elo-like scale, ``R = scale / ln(base) * theta + init_rating``.
        anchor: system whose rating is set to ``anchor_rating`` (full fit and every resample);
            None: the mean rating is ``init_rating``.
        anchor_rating: the anchor's rating.
        n_bootstrap: bootstrap resamples (0: no intervals, no clusters).
        cluster: resample items (``id``) instead of battles.
        confidence: central interval level (0.95 -> 2.5th and 97.5th percentiles).
        seed: seed of ``numpy.random.default_rng`` (None: fresh entropy).
        clusters: ``"paired"``: mt-metrics-eval's AssignRanks rule (as the trust table) on two-sided
            paired bootstrap p-values of the rating differences; ``"overlap"``: intervals. See
            :func:`bradley_terry`.
        alpha: significance level of the paired rule.
        tol, max_iter: Newton convergence (max absolute step in ``theta``) and iteration cap. A
            resample whose maximum does not exist (a system that won or lost all its resampled
            battles) moves its ratings out by at most ``2 * scale / ln(base)`` per iteration until the
            cap, like arena-hard's lbfgs stopping far out; such resamples are counted in
            ``BTResult.n_nonconverged`` and the leaderboard notes them.
    """

    scale: float = 400.0
    base: float = 10.0
    init_rating: float = 1000.0
    anchor: str | None = None
    anchor_rating: float = 1000.0
    n_bootstrap: int = 1000
    cluster: bool = False
    confidence: float = 0.95
    seed: int | None = 0
    clusters: Literal["paired", "overlap"] = "paired"
    alpha: float = 0.05
    tol: float = 1e-10
    max_iter: int = 50

    def __post_init__(self) -> None:
        if self.n_bootstrap < 0:
            raise InputError("n_bootstrap must be >= 0", field="n_bootstrap")
        if not 0 < self.confidence < 1:
            raise InputError("confidence must be in (0, 1)", field="confidence")
        if self.clusters not in ("paired", "overlap"):
            raise InputError(f"unknown clusters rule {self.clusters!r}; choose paired or overlap", field="clusters")


@dataclass(frozen=True)
class BTResult:
    """Bradley-Terry ratings on the Elo-like scale (see :class:`BTSettings`).

    Attributes:
        systems: system names (arrays below are aligned with them).
        rating: full-data maximum-likelihood ratings (NaN for a system without resolved battles).
        ci_low, ci_high: percentile bootstrap interval (NaN without bootstrap).
        rank: 1 = best (by rating; ties share the smaller rank).
        cluster: significance cluster (1 = not distinguishable from the best; 0 without bootstrap).
        boot: ``(n_bootstrap, k)`` resampled ratings.
        converged: whether the full-data fit converged to a finite maximum (it does not exist when a
            system won or lost every battle, or the comparison graph is not connected).
        n_nonconverged: resamples whose fit hit ``max_iter``.
        settings: the settings used.
    """

    systems: tuple[str, ...]
    rating: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rank: np.ndarray
    cluster: np.ndarray
    boot: np.ndarray = field(repr=False)
    converged: bool
    n_nonconverged: int
    settings: BTSettings

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({
            "system": self.systems, "rank": self.rank, "cluster": self.cluster, "bt_score": self.rating,
            "bt_low": self.ci_low, "bt_high": self.ci_high,
        }).sort_values(["rank", "system"], kind="stable").reset_index(drop=True)


def _bt_newton(
    W: np.ndarray, theta: np.ndarray, tol: float, max_iter: int, precond: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise ``sum_ij W[r,i,j] log sigmoid(theta_i - theta_j)`` for every resample r by Newton's
    method, batched over the leading axis.

    ``W``: ``(R, k, k)`` score matrices; ``theta``: ``(R, k)`` start (warm start). The Hessian is a
    weighted graph Laplacian; its null direction (a common shift) is removed by adding ``11'/k``.
    Without ``precond`` the Newton system is solved directly; with it (the inverse of the full-data
    Hessian at the full-data fit), by preconditioned conjugate gradients with batched matrix-vector
    products, which is much cheaper than a batched factorisation when the resamples' Hessians are close
    to the full-data one (a bootstrap warm-started at the full-data fit). Steps are capped at 2
    (natural-log units) per coordinate so that fits whose maximum is at infinity move out slowly
    instead of overflowing. Returns ``(theta, converged)``, ``theta`` centred (mean 0) per resample.
    """
    R, k, _ = W.shape
    N = W + W.transpose(0, 2, 1)
    wins = W.sum(axis=2)
    J = np.full((k, k), 1.0 / k) + 1e-12 * np.eye(k)
    theta = theta - theta.mean(axis=1, keepdims=True)
    active = np.ones(R, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        th = theta[idx]
        d = th[:, :, None] - th[:, None, :]
        p = 0.5 * (1.0 + np.tanh(0.5 * d))  # sigmoid, no overflow
        Nn = N[idx]
        grad = wins[idx] - np.einsum("rij,rij->ri", Nn, p)
        h = Nn * p * (1.0 - p)
        if precond is None or k < _PCG_MIN_K:
            H = -h
            diag = np.einsum("rii->ri", H)
            diag += h.sum(axis=2)
            H += J
            step = np.linalg.solve(H, grad[:, :, None])[:, :, 0]
        else:
            step = _pcg(h, grad, precond)  # k >= _PCG_MIN_K
        big = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, 2.0 / np.maximum(big, 1e-300))[:, None]
        step -= step.mean(axis=1, keepdims=True)
        theta[idx] = th + step
        active[idx[big < tol]] = False
    return theta, ~active


def _pcg(h: np.ndarray, g: np.ndarray, M: np.ndarray, rtol: float = 1e-13) -> np.ndarray:
    """Solve ``(L(h_r) + 11'/k) x_r = g_r`` for every r by conjugate gradients preconditioned with
    ``M`` (``L(h)`` = diag(row sums of h) - h)."""
    k = g.shape[1]
    deg = h.sum(axis=2)

    def matvec(x: np.ndarray) -> np.ndarray:
        return deg * x - np.einsum("rij,rj->ri", h, x) + x.sum(axis=1, keepdims=True) / k

    x = np.zeros_like(g)
    r = g.copy()
    z = np.einsum("ri,ij->rj", r, M)  # no BLAS: threads cost more than they save on small products
    p = z.copy()
    rz = np.einsum("ri,ri->r", r, z)
    stop = rtol * np.maximum(np.linalg.norm(g, axis=1), 1e-300)
    for _ in range(min(4 * k, 200)):
        live = np.linalg.norm(r, axis=1) > stop
        if not live.any():
            break
        Ap = matvec(p)
        pAp = np.einsum("ri,ri->r", p, Ap)
        alpha = np.where(live, rz / np.where(pAp > 0, pAp, 1.0), 0.0)
        x += alpha[:, None] * p
        r -= alpha[:, None] * Ap
        z = np.einsum("ri,ij->rj", r, M)
        rz_new = np.einsum("ri,ri->r", r, z)
        beta = np.where(live, rz_new / np.where(rz > 0, rz, 1.0), 0.0)
        p = z + beta[:, None] * p
        rz = rz_new
    return x


def _ratings(theta: np.ndarray, fitted: np.ndarray, anchor: int | None, s: BTSettings) -> np.ndarray:
    """theta (natural-log units, any shift) -> ratings; ``fitted`` masks systems with battles."""
    th = np.where(fitted, theta, np.nan)
    th = th - np.nanmean(th, axis=-1, keepdims=True)
    r = s.scale / math.log(s.base) * th + s.init_rating
    if anchor is not None:
        r = r + (s.anchor_rating - r[..., anchor : anchor + 1])
    return r


#: below this many systems a batched direct solve is cheaper than conjugate gradients
_PCG_MIN_K = 48
_CHUNK = 128  # resamples per batch: bounds memory at about 10 * _CHUNK * k * k floats


def bradley_terry(
    battles: pd.DataFrame | BattleArrays, *, settings: BTSettings = BTSettings(), verdict: str = "verdict"
) -> BTResult:
    """Bradley-Terry ratings from all resolved battles, with bootstrap intervals and clusters.

    Algorithm: the battles are aggregated into the score matrix ``W`` (wins plus half ties per
    ordered pair), and the MLE is found by Newton's method (the log-likelihood is concave; the
    Hessian is a weighted graph Laplacian). This is the same estimate as arena-hard-auto's
    ``LogisticRegression(fit_intercept=False, penalty=None)`` on ``+-ln(base)`` design rows with ties
    duplicated as half wins, without building the design matrix. The bootstrap draws, per resample,
    the multinomial counts of the distinct (system_a, system_b, verdict) cells (the counts a resample
    of battles with replacement gives; with ``cluster=True``, multinomial counts of items, each item
    bringing all its battles), builds the resample's ``W`` and refits by Newton warm-started from the
    full-data fit, batched over resamples. Intervals are percentiles of the resampled ratings.

    Significance clusters (``settings.clusters``):

    * ``"paired"`` (default): for two systems, the two-sided paired bootstrap p-value of their rating
      difference, ``p = min(1, 2 * min(P*(d <= 0), P*(d >= 0)))`` over the resamples; clusters by
      :func:`evalign.meta.significance.significance_clusters` (mt-metrics-eval AssignRanks, as in the
      trust table): walking down the ratings, a system opens a new cluster when a better system of the
      current cluster is significantly better (``p <= alpha``).
    * ``"overlap"``: walking down the ratings, a system opens a new cluster when its upper bound is
      below the lower bound of the first (best) system of the current cluster; cluster 1 = systems
      whose interval overlaps the best system's.

    Systems without a resolved battle get NaN ratings and the last cluster.
    """

    s = settings
    ba = _as_arrays(battles, verdict)
    k = len(ba.systems)
    anchor = ba.index(s.anchor, "anchor") if s.anchor is not None else None
    r = ba.resolved()
    a, b, code = ba.a[r], ba.b[r], ba.code[r]
    if a.size == 0:
        raise InputError("no resolved battle (every verdict is unparseable or missing)", field=verdict)
    W = _score_matrix(a, b, code, k)
    fitted = (W + W.T).sum(axis=1) > 0
    if anchor is not None and not fitted[anchor]:
        raise InputError(f"anchor {s.anchor!r} has no resolved battle", field="anchor")
    theta, conv = _bt_newton(W[None], np.zeros((1, k)), s.tol, s.max_iter)
    theta0 = theta[0]
    rating = _ratings(theta0, fitted, anchor, s)
    converged = bool(conv[0]) and _mle_exists(W, fitted)

    boot = np.empty((0, k))
    n_bad = 0
    lo = hi = np.full(k, np.nan)
    if s.n_bootstrap:
        boot, n_bad = _bt_bootstrap(ba, r, k, theta0, fitted, anchor, s)
        q = (1.0 - s.confidence) / 2.0
        with np.errstate(all="ignore"):
            lo, hi = np.nanquantile(boot, [q, 1.0 - q], axis=0)
    order_vals = np.where(np.isfinite(rating), rating, -np.inf)
    rank = np.array([1 + int(np.sum(order_vals > v)) for v in order_vals])
    cluster = np.zeros(k, dtype=np.int64)
    if s.n_bootstrap:
        names = list(ba.systems)
        pos = {n: i for i, n in enumerate(names)}
        if s.clusters == "paired":

            def pval(x: str, y: str) -> float:
                d = boot[:, pos[x]] - boot[:, pos[y]]
                d = d[np.isfinite(d)]
                if d.size == 0:
                    return 1.0
                return float(min(1.0, 2.0 * min(np.mean(d <= 0), np.mean(d >= 0))))

            cl = significance_clusters(({n: float(rating[i]) for i, n in enumerate(names)}, pval), alpha=s.alpha)
            cluster = np.array([cl[n] for n in names], dtype=np.int64)
        else:
            cluster = _overlap_clusters(rating, lo, hi)
    return BTResult(ba.systems, rating, lo, hi, rank, cluster, boot, converged, n_bad, s)


def _mle_exists(W: np.ndarray, fitted: np.ndarray) -> bool:
    """The BT MLE is finite iff the directed "i beat j" graph (score > 0) of the fitted systems is
    strongly connected (Zermelo 1929; Hunter 2004, Assumption 1)."""

    sub = W[np.ix_(fitted, fitted)] > 0
    n_comp, _ = connected_components(sub, directed=True, connection="strong")
    return n_comp == 1


def _overlap_clusters(rating: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    k = rating.size
    order = sorted(range(k), key=lambda i: (0, -rating[i], i) if np.isfinite(rating[i]) else (1, 0.0, i))
    out = np.zeros(k, dtype=np.int64)
    current, head = 1, None
    for i in order:
        if not np.isfinite(rating[i]):
            out[i] = current + (head is not None)
            continue
        if head is not None and hi[i] < lo[head]:
            current, head = current + 1, i
        if head is None:
            head = i
        out[i] = current
    return out


def _bt_bootstrap(
    ba: BattleArrays,
    resolved: np.ndarray,
    k: int,
    theta0: np.ndarray,
    fitted: np.ndarray,
    anchor: int | None,
    s: BTSettings,
) -> tuple[np.ndarray, int]:
    """Resampled ratings ``(n_bootstrap, k)`` and the number of resamples that did not converge."""

    a, b, code = ba.a[resolved], ba.b[resolved], ba.code[resolved].astype(np.int64)
    flip = a > b  # one cell per unordered pair and outcome, seen from the lower index
    a, b, code = np.where(flip, b, a), np.where(flip, a, b), np.where(flip, _SWAP_CODE[code], code)
    cell = (a * k + b) * 3 + code  # A_WINS, B_WINS, TIE are 0, 1, 2
    cells, inv = np.unique(cell, return_inverse=True)
    ca, rest = np.divmod(cells, 3 * k)
    cb, cc = np.divmod(rest, 3)
    # sparse map cell counts -> flattened score matrix
    win_a = np.where(cc == A_WINS, 1.0, np.where(cc == TIE, 0.5, 0.0))
    win_b = np.where(cc == B_WINS, 1.0, np.where(cc == TIE, 0.5, 0.0))
    rows = np.concatenate([ca * k + cb, cb * k + ca])
    cols = np.concatenate([np.arange(cells.size)] * 2)
    S = sparse.csr_matrix((np.concatenate([win_a, win_b]), (rows, cols)), shape=(k * k, cells.size))
    rng = np.random.default_rng(s.seed)
    if s.cluster:
        if ba.ids is None:
            raise InputError("the clustered bootstrap needs an 'id' column", field="id")
        items, item_of = np.unique(ba.ids[resolved], return_inverse=True)
        M = sparse.csr_matrix(
            (np.ones(inv.size), (item_of, inv)), shape=(items.size, cells.size)
        )  # items x cells counts
        n_units, p_units = items.size, np.full(items.size, 1.0 / items.size)
    else:
        M = None
        n_units = int(a.size)
        p_units = np.bincount(inv, minlength=cells.size) / a.size
    out = np.empty((s.n_bootstrap, k))
    n_bad = 0
    W0 = np.asarray(S @ np.bincount(inv, minlength=cells.size).astype(np.float64)).reshape(k, k)
    d0 = theta0[:, None] - theta0[None, :]
    p0 = 0.5 * (1.0 + np.tanh(0.5 * d0))
    h0 = (W0 + W0.T) * p0 * (1.0 - p0)
    precond = np.linalg.inv(np.diag(h0.sum(axis=1)) - h0 + np.full((k, k), 1.0 / k) + 1e-12 * np.eye(k))
    for start in range(0, s.n_bootstrap, _CHUNK):
        R = min(_CHUNK, s.n_bootstrap - start)
        counts = rng.multinomial(n_units, p_units, size=R).astype(np.float64)  # (R, units)
        if M is not None:
            counts = np.asarray((M.T @ counts.T).T)
        Wb = np.asarray((S @ counts.T).T).reshape(R, k, k)
        th, conv = _bt_newton(Wb, np.repeat(theta0[None], R, axis=0), s.tol, s.max_iter, precond)
        n_bad += int((~conv).sum())
        present = (Wb + Wb.transpose(0, 2, 1)).sum(axis=2) > 0
        out[start : start + R] = _ratings(np.where(present, th, np.nan), fitted, anchor, s)
    return out, n_bad


# --- length-controlled win rate -----------------------------------------------------------------


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
    ba = _as_arrays(battles, verdict)
    if ba.ids is None:
        raise InputError("fitting instruction difficulty needs an 'id' column", field="id")
    base = ba.index(baseline, "baseline")
    keep = ((ba.a == base) | (ba.b == base)) & ba.resolved()
    me = np.where(ba.a[keep] == base, ba.b[keep], ba.a[keep])
    code = np.where(ba.a[keep] == base, _SWAP_CODE[ba.code[keep]], ba.code[keep])
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
    ba = _as_arrays(battles, verdict)
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
        code = np.where(m_first, ba.code[rows], _SWAP_CODE[ba.code[rows]])
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


# --- per-system counts and the leaderboard ------------------------------------------------------


def system_counts(battles: pd.DataFrame | BattleArrays, *, verdict: str = "verdict") -> pd.DataFrame:
    """Per system: ``n_battles`` (every row it is in), ``n_wins``, ``n_losses``, ``n_ties``,
    ``n_unparseable``, ``n_missing``, and ``mean_length``: the mean length of its responses, each
    (``id``, system) response counted once when there is an ``id`` column (else once per battle)."""
    ba = _as_arrays(battles, verdict)
    k = len(ba.systems)
    me, _, code = _oriented(ba, np.ones(k, dtype=bool))
    counts = np.zeros((k, 5), dtype=np.int64)
    np.add.at(counts, (me, code.astype(np.int64)), 1)
    mean_len = np.full(k, np.nan)
    if ba.len_a is not None and ba.len_b is not None:
        lens = pd.DataFrame({
            "s": np.concatenate([ba.a, ba.b]),
            "len": np.concatenate([ba.len_a, ba.len_b]),
            "id": np.concatenate([ba.ids, ba.ids]) if ba.ids is not None else np.arange(2 * ba.n),
        })
        per = lens.dropna(subset=["len"]).drop_duplicates(["s", "id"]).groupby("s")["len"].mean()
        mean_len[per.index.to_numpy()] = per.to_numpy()
    return pd.DataFrame({
        "system": ba.systems, "n_battles": counts.sum(axis=1), "n_wins": counts[:, A_WINS],
        "n_losses": counts[:, B_WINS], "n_ties": counts[:, TIE], "n_unparseable": counts[:, UNPARSEABLE],
        "n_missing": counts[:, MISSING], "mean_length": mean_len,
    })


@dataclass(frozen=True)
class LeaderboardSettings:
    """Settings of :func:`leaderboard`.

    Attributes:
        baseline: system for ``win_rate`` / ``lc_win_rate`` (None: no win-rate columns).
        orders: ``"pool"`` (both presentation orders are battles) or ``"combine"`` (one battle per
            order-swapped pair, :func:`combine_orders`).
        bt: Bradley-Terry settings (anchor, bootstrap, clusters).
        lc: length-controlled win rate settings; None: no ``lc_win_rate`` column.
        judges: the judge model names (or glob patterns) behind the verdicts, for the self-preference
            check (:func:`self_preference`): a note when a judge is one of the systems.
        skip_self: drop those battles (``--skip-self``) instead of only warning.
    """

    baseline: str | None = None
    orders: Literal["pool", "combine"] = "pool"
    bt: BTSettings = BTSettings()
    lc: LCSettings | None = LCSettings()
    judges: tuple[str, ...] = ()
    skip_self: bool = False


@dataclass(frozen=True)
class Leaderboard:
    """A system table and the results behind it.

    ``table`` columns: ``rank, cluster, system, bt_score, bt_low, bt_high, win_rate, win_rate_se,
    lc_win_rate, n_battles, n_wins, n_losses, n_ties, n_unparseable, n_missing, mean_length,
    position_agreement`` (sorted by rank). ``notes``: what the reader must know (non-existent MLE,
    resamples that did not converge, LC skipped and why, ...).
    """

    table: pd.DataFrame
    matrix: WinRateMatrix
    bt: BTResult
    win_rates: WinRates | None
    lc: LCWinRates | None
    positions: PositionAgreement | None
    notes: tuple[str, ...]
    settings: LeaderboardSettings


def leaderboard(
    battles: pd.DataFrame,
    *,
    settings: LeaderboardSettings = LeaderboardSettings(),
    difficulty: Mapping[str, float] | None = None,
    verdict: str = "verdict",
) -> Leaderboard:
    """The leaderboard of a battle table: BT scores with intervals and clusters, win rates and LC
    win rates against the baseline, counts, mean lengths and position agreement (module doc)."""
    notes: list[str] = []
    positions = None
    if settings.judges:
        sp = self_preference(battles, settings.judges)
        if sp.n_battles:
            if settings.skip_self:
                battles = battles[~sp.mask].reset_index(drop=True)
                notes.append(f"self-preference: {sp.n_battles} battles including a judge's own outputs dropped")
            else:
                notes.append(sp.warning)
    raw = battle_arrays(battles, verdict=verdict)
    if raw.ids is not None:
        positions = position_agreement(raw)
        if positions.n_pairs == 0:
            positions = None
    if settings.orders == "combine":
        if positions is None:
            notes.append("orders='combine': no order-swapped pairs found; battles used as they are")
        battles = combine_orders(battles, verdict=verdict)
    ba = battle_arrays(battles, verdict=verdict, systems=raw.systems)
    bt = bradley_terry(ba, settings=settings.bt)
    if not bt.converged:
        notes.append(
            "the Bradley-Terry maximum does not exist (a system won or lost every battle, or the systems "
            "are not all connected by wins and losses): ratings are large and finite only by the iteration cap"
        )
    if bt.n_nonconverged:
        notes.append(f"{bt.n_nonconverged} of {settings.bt.n_bootstrap} bootstrap fits did not converge")
    table = system_counts(ba).merge(bt.frame(), on="system")
    wr = lc = None
    if settings.baseline is not None:
        wr = win_rates(ba, settings.baseline)
        table["win_rate"] = table["system"].map(dict(zip(wr.systems, wr.win_rate, strict=True)))
        table["win_rate_se"] = table["system"].map(dict(zip(wr.systems, wr.standard_error, strict=True)))
        if settings.lc is not None:
            if ba.len_a is None:
                notes.append("no lc_win_rate: the battles have no len_a / len_b or response_a / response_b")
            elif ba.ids is None and settings.lc.difficulty != "zero" and difficulty is None:
                notes.append("no lc_win_rate: instruction difficulty needs an 'id' column")
            else:
                lc = lc_win_rates(ba, settings.baseline, difficulty=difficulty, settings=settings.lc)
                if _has_lc_values(lc, settings.baseline):
                    table["lc_win_rate"] = table["system"].map(dict(zip(lc.systems, lc.lc_win_rate, strict=True)))
                    notes.append(f"lc_win_rate: instruction difficulty {lc.difficulty_source}")
                else:
                    lc = None
                    notes.append(f"no lc_win_rate: no system has a resolved battle against {settings.baseline}")
    if positions is not None:
        table["position_agreement"] = table["system"].map(
            dict(zip(positions.systems, positions.per_system, strict=True))
        )
    lead = ["rank", "cluster", "system", "bt_score", "bt_low", "bt_high"]
    optional = ["win_rate", "win_rate_se", "lc_win_rate"]
    rest = [c for c in table.columns if c not in lead and c not in optional]
    cols = lead + [c for c in optional if c in table.columns] + rest
    table = table[cols].sort_values(["rank", "system"], kind="stable").reset_index(drop=True)
    return Leaderboard(table, win_rate_matrix(ba), bt, wr, lc, positions, tuple(notes), settings)


def _has_lc_values(lc: LCWinRates, baseline: str) -> bool:
    """Whether some system other than the baseline (always 0.5 against itself) has an LC win rate."""
    return any(s != baseline and np.isfinite(v) for s, v in zip(lc.systems, lc.lc_win_rate, strict=True))


# --- judge panels ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PanelResult:
    """Several judges combined into one, with their agreement.

    Attributes:
        combined: the panel's verdicts (``"A"``, ``"B"``, ``"tie"``, ``"unparseable"``) for
            ``how="majority"``, or mean scores (NaN when no member scored) for ``how="mean"``.
        members: the member columns.
        fleiss_kappa: over the rows every member resolved (verdicts; NaN for scores).
        krippendorff_alpha: all rows, missing allowed (nominal for verdicts, interval for scores).
        cohen_kappa: ``{(m1, m2): kappa}`` for every pair of members (unweighted for verdicts,
            quadratic weights for scores), over the rows both resolved.
        mean_cohen_kappa: mean of the pairwise kappas that are defined.
        n_complete: rows every member resolved.
    """

    combined: np.ndarray = field(repr=False)
    members: tuple[str, ...]
    how: str
    fleiss_kappa: float
    krippendorff_alpha: float
    cohen_kappa: Mapping[tuple[str, str], float]
    mean_cohen_kappa: float
    n_complete: int


_PANEL_CODE = {A_WINS: 1.0, B_WINS: -1.0, TIE: 0.0}


def judge_panel(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    how: Literal["majority", "mean"] = "majority",
    tie_rule: Literal["tie", "unparseable", "first"] = "tie",
    strict: bool = False,
) -> PanelResult:
    """Combine several judges' columns into one panel judge and measure their agreement.

    ``how="majority"``: verdict columns (module conventions); each row's panel verdict is the
    plurality verdict among the members that resolved it (``strict=True``: more than half of them);
    without a winner ``tie_rule`` decides: ``"tie"``, ``"unparseable"``, or ``"first"`` (the first
    member's resolved verdict, in ``columns`` order). A row no member resolved is ``unparseable``.
    ``how="mean"``: numeric score columns, the mean of the present scores. Agreement uses
    :func:`evalign.meta.agreement.fleiss_kappa`, :func:`~evalign.meta.agreement.cohen_kappa` and
    :func:`~evalign.meta.agreement.krippendorff_alpha` (verdict codes A = +1, tie = 0, B = -1).
    """
    cols = list(columns)
    if len(cols) < 2:
        raise InputError("a panel needs at least two judge columns", field="columns")
    for c in cols:
        if c not in frame.columns:
            raise InputError("no such judge column", field=c)
    if how == "majority":
        mat = np.full((len(frame), len(cols)), np.nan)
        for j, c in enumerate(cols):
            code = read_verdicts(frame[c].to_numpy(), c)
            mat[:, j] = np.array([_PANEL_CODE.get(int(x), np.nan) for x in code])
        voted = majority_vote(mat, fallback=np.inf, strict=strict)
        out = np.empty(len(frame), dtype=object)
        names = {1.0: "A", -1.0: "B", 0.0: "tie"}
        for i, v in enumerate(voted):
            if np.isnan(v):
                out[i] = "unparseable"
            elif np.isinf(v):
                if tie_rule == "first":
                    present = mat[i][~np.isnan(mat[i])]
                    out[i] = names[float(present[0])]
                else:
                    out[i] = tie_rule
            else:
                out[i] = names[float(v)]
        level: Literal["nominal", "interval"] = "nominal"
        weights = None
        combined: np.ndarray = out
    elif how == "mean":
        mat = np.column_stack([pd.to_numeric(frame[c], errors="coerce").to_numpy(np.float64) for c in cols])
        present = ~np.isnan(mat)
        with np.errstate(invalid="ignore"):
            combined = np.where(present.any(axis=1), np.nansum(mat, axis=1) / present.sum(axis=1), np.nan)
        level, weights = "interval", "quadratic"
    else:
        raise InputError(f"unknown panel rule {how!r}; choose majority or mean", field="how")
    complete = ~np.isnan(mat).any(axis=1)
    fk = fleiss_kappa(mat[complete]) if how == "majority" and complete.any() else float("nan")
    ka = krippendorff_alpha(mat.T, level=level)
    pairs: dict[tuple[str, str], float] = {}
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            pairs[(cols[i], cols[j])] = cohen_kappa(mat[:, i], mat[:, j], weights=weights)  # type: ignore[arg-type]
    defined = [v for v in pairs.values() if math.isfinite(v)]
    return PanelResult(
        combined=combined,
        members=tuple(cols),
        how=how,
        fleiss_kappa=float(fk),
        krippendorff_alpha=float(ka),
        cohen_kappa=pairs,
        mean_cohen_kappa=float(np.mean(defined)) if defined else float("nan"),
        n_complete=int(complete.sum()),
    )


# --- self-preference ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfPreference:
    """Battles in which a judge model is one of the two systems.

    ``mask``: ``(n,)`` True for those battles (drop them as ``--skip-self`` does); ``pairs``: the
    (judge, system) name pairs that matched; ``warning``: one line for the leaderboard header, empty
    when nothing matched.
    """

    mask: np.ndarray = field(repr=False)
    pairs: tuple[tuple[str, str], ...]
    n_battles: int
    warning: str


def self_preference(battles: pd.DataFrame, judges: str | Sequence[str]) -> SelfPreference:
    """Find the battles where a judge is one of the ranked systems (self-enhancement bias: Zheng et
    al. 2023; the SemScore paper leaves GPT-4's own outputs out of its G-Eval ranking).

    ``judges``: judge model names or glob patterns. A system matches a judge when it matches, case
    insensitively (:func:`fnmatch.fnmatchcase` on lower-cased names), the judge's name or the last
    ``/``-separated component of it: the matching of evalign's ``--skip-self``.
    """
    names = [judges] if isinstance(judges, str) else list(judges)
    pats: list[tuple[str, str]] = []
    for j in names:
        if j:
            for p in {j.lower(), j.rstrip("/").rsplit("/", 1)[-1].lower()}:
                pats.append((j, p))
    systems = sorted(set(battles["system_a"].astype(str)) | set(battles["system_b"].astype(str)))
    hit: dict[str, list[str]] = {}
    for sname in systems:
        for j, p in pats:
            if fnmatch.fnmatchcase(sname.lower(), p):
                hit.setdefault(sname, [])
                if j not in hit[sname]:
                    hit[sname].append(j)
    matched = set(hit)
    mask = (battles["system_a"].astype(str).isin(matched) | battles["system_b"].astype(str).isin(matched)).to_numpy()
    pairs = tuple((j, sname) for sname in sorted(hit) for j in hit[sname])
    n = int(mask.sum())
    warning = ""
    if n:
        who = "; ".join(f"judge {j!r} is system {sname!r}" for j, sname in pairs)
        warning = (
            f"self-preference: {who}: {n} of {len(battles)} battles include the judge's own outputs "
            "(LLM judges favour their own answers); drop them with --skip-self"
        )
    return SelfPreference(mask, pairs, n, warning)


__all__ = [
    "A_WINS",
    "B_WINS",
    "MISSING",
    "TIE",
    "UNPARSEABLE",
    "VERDICTS",
    "BTResult",
    "BTSettings",
    "BattleArrays",
    "LCSettings",
    "LCWinRates",
    "Leaderboard",
    "LeaderboardSettings",
    "PanelResult",
    "PositionAgreement",
    "SelfPreference",
    "WinRateMatrix",
    "WinRates",
    "battle_arrays",
    "bradley_terry",
    "combine_orders",
    "fit_instruction_difficulty",
    "judge_battles",
    "judge_panel",
    "lc_win_rates",
    "leaderboard",
    "position_agreement",
    "read_verdicts",
    "self_preference",
    "system_counts",
    "win_rate_matrix",
    "win_rates",
]
