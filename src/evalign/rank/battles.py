"""Reading battles: verdict codes, battle arrays, a judge's verdict columns as battles, both
presentation orders (position agreement, combining orders) and per-system counts.

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from evalign.errors import InputError

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
SWAP_CODE = np.array([B_WINS, A_WINS, TIE, UNPARSEABLE, MISSING], dtype=np.int8)
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
    try:  # each distinct value read once (a million verdicts hold a handful of spellings)
        which, distinct = pd.factorize(s, use_na_sentinel=True)
    except TypeError:  # unhashable values (lists): each one
        which, distinct = np.arange(len(s)), s.to_numpy()
        which[s.isna().to_numpy()] = -1
    spelled = [_SPELLINGS.get(str(v).strip().lower()) for v in list(distinct)]
    table = np.array([MISSING if c is None else c for c in spelled] + [MISSING], dtype=np.int8)
    bad_values = np.array([c is None for c in spelled] + [False])
    bad = bad_values[which]  # which == -1 (missing) reads the appended MISSING entry
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"verdict {s.iloc[i]!r} is not one of A, B, tie, unparseable", line=i + 1, field=name, line_word="row"
        )
    return table[which]


def battle_arrays(battles: pd.DataFrame, *, verdict: str = "verdict", systems: Sequence[str] | None = None) -> BattleArrays:
    """Encode a battle table (see the module conventions) as :class:`BattleArrays`."""
    for col in ("system_a", "system_b", verdict):
        if col not in battles.columns:
            raise InputError("battle table has no such column", field=col)
    # each distinct name read once: factorize each column, then place its names among the systems
    which_a, seen_a = pd.factorize(battles["system_a"], use_na_sentinel=False)
    which_b, seen_b = pd.factorize(battles["system_b"], use_na_sentinel=False)
    seen_a, seen_b = [str(v) for v in list(seen_a)], [str(v) for v in list(seen_b)]
    every = pd.Index(sorted(set(seen_a) | set(seen_b)), dtype=object)
    same = np.flatnonzero(every.get_indexer(seen_a)[which_a] == every.get_indexer(seen_b)[which_b])
    if same.size:
        raise InputError("a system battles itself", line=int(same[0]) + 1, field="system_b", line_word="row")
    names = tuple(every) if systems is None else tuple(systems)
    index = pd.Index(names, dtype=object)
    pos_a, pos_b = index.get_indexer(seen_a).astype(np.int64), index.get_indexer(seen_b).astype(np.int64)
    a, b = pos_a[which_a], pos_b[which_b]
    for seen, pos in ((seen_a, pos_a), (seen_b, pos_b)):
        if (pos < 0).any():
            raise InputError(f"system {seen[int(np.flatnonzero(pos < 0)[0])]!r} is not in systems", field="system_a")
    ids = battles["id"].astype(str).to_numpy() if "id" in battles.columns else None
    len_a = len_b = None
    if "len_a" in battles.columns and "len_b" in battles.columns:
        len_a = pd.to_numeric(battles["len_a"], errors="coerce").to_numpy(dtype=np.float64)
        len_b = pd.to_numeric(battles["len_b"], errors="coerce").to_numpy(dtype=np.float64)
    elif "response_a" in battles.columns and "response_b" in battles.columns:
        len_a = battles["response_a"].map(lambda t: len(t) if isinstance(t, str) else np.nan).to_numpy(np.float64)
        len_b = battles["response_b"].map(lambda t: len(t) if isinstance(t, str) else np.nan).to_numpy(np.float64)
    return BattleArrays(names, a, b, read_verdicts(battles[verdict].to_numpy(), verdict), ids, len_a, len_b)


def as_battle_arrays(battles: pd.DataFrame | BattleArrays, verdict: str) -> BattleArrays:
    return battles if isinstance(battles, BattleArrays) else battle_arrays(battles, verdict=verdict)


def judge_battles(table: pd.DataFrame, judge: str, *, orders: Literal["both", "combined"] = "both") -> pd.DataFrame:
    """Battle rows from the output of ``evalign judge`` in relative mode (one row per pair).

    ``table`` has ``system_a``, ``system_b``, optional ``id`` / ``response_a`` / ``response_b`` /
    ``len_a`` / ``len_b`` / ``task``, and the judge's columns: ``<judge>`` (the pair's verdict, both
    orders resolved), ``<judge>.ab`` and ``<judge>.ba`` (each order's verdict, mapped back to the
    pair's orientation; None without a verdict). ``orders="combined"``: one battle per pair with the
    ``<judge>`` verdict. ``orders="both"`` (when ``<judge>.ba`` exists and has a verdict somewhere):
    two battles per pair (the B-first one alone when ``<judge>.ab`` has no verdict anywhere: only
    that order was judged), the A-first one with the ``.ab`` verdict and the B-first one with systems,
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
    if orders == "combined" or not has_verdicts(table, ba_col):
        return base.assign(verdict=table[judge].to_numpy()).reset_index(drop=True)
    pair = table[judge].astype(object).where(table[judge].notna(), None).to_numpy()

    def one(col: str) -> np.ndarray:
        v = table[col].astype(object).where(table[col].notna(), None).to_numpy() if col in table.columns else None
        out = np.empty(len(table), dtype=object)
        for i in range(len(table)):
            x = None if v is None else v[i]
            out[i] = x if x is not None else ("unparseable" if pair[i] is not None else None)
        return out

    second = base.copy()
    for x, y in (("system_a", "system_b"), ("response_a", "response_b"), ("len_a", "len_b")):
        if x in second.columns:
            second[[x, y]] = base[[y, x]].to_numpy()
    second["verdict"] = [{"A": "B", "B": "A"}.get(v, v) if isinstance(v, str) else v for v in one(ba_col)]
    if not has_verdicts(table, ab_col):  # only the B-first order was judged: its battles alone
        return second.reset_index(drop=True)
    return pd.concat([base.assign(verdict=one(ab_col)), second], ignore_index=True)


def has_verdicts(table: pd.DataFrame, column: str) -> bool:
    """Whether ``table`` has ``column`` with a verdict on some row."""
    return column in table.columns and bool(table[column].notna().any())


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


def _id_codes(ba: BattleArrays) -> np.ndarray:
    """``(n,)`` int64 codes of the battles' item ids (equal ids, equal codes; order of first sight)."""
    if ba.ids is None:
        raise InputError("matching the two presentation orders needs an 'id' column", field="id")
    return pd.factorize(ba.ids)[0].astype(np.int64)


def _match_orders(ba: BattleArrays) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(first, second)`` of the matched order-swapped pairs (see PositionAgreement): within
    each (id, unordered pair of systems), the j-th A-first row (``a < b``) in row order is matched with
    the j-th B-first row; ``first`` ascending."""
    k = len(ba.systems)
    lo, hi = np.minimum(ba.a, ba.b).astype(np.int64), np.maximum(ba.a, ba.b).astype(np.int64)
    group = (_id_codes(ba) * k + lo) * k + hi  # one integer per (id, lo, hi)
    fwd = ba.a < ba.b
    order = np.argsort(group * 2 + fwd, kind="stable")  # per group: B-first rows, then A-first, each in row order
    g, fw = group[order], fwd[order]
    pos = np.arange(order.size)
    new_group = np.r_[True, g[1:] != g[:-1]] if g.size else np.zeros(0, dtype=bool)
    start = np.maximum.accumulate(np.where(new_group, pos, 0))  # first sorted position of each row's group
    starts = np.flatnonzero(new_group)
    n_bwd_group = np.add.reduceat(~fw, starts) if starts.size else np.zeros(0, dtype=np.int64)
    n_bwd = np.repeat(n_bwd_group, np.diff(np.r_[starts, order.size]))
    nth = pos - start - n_bwd  # rank of an A-first row among its group's A-first rows
    take = fw & (nth < n_bwd)
    first, second = order[take], order[start[take] + nth[take]]
    by_first = np.argsort(first, kind="stable")
    return first[by_first].astype(np.int64), second[by_first].astype(np.int64)


def position_agreement(battles: pd.DataFrame | BattleArrays, *, verdict: str = "verdict") -> PositionAgreement:
    """How often the judge gives the same verdict in both presentation orders (see the class)."""
    ba = as_battle_arrays(battles, verdict)
    k = len(ba.systems)
    f, s = _match_orders(ba)
    cf, cs = ba.code[f], SWAP_CODE[ba.code[s]]  # both from system_a-of-row-f's view
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
    cf, cs = ba.code[f], SWAP_CODE[ba.code[s]]
    out_code = np.where((cf <= TIE) & (cs <= TIE), np.where(cf == cs, cf, TIE), UNPARSEABLE)
    out = battles.copy()
    col = out[verdict].astype(object).to_numpy(copy=True)
    col[f] = np.array(VERDICTS, dtype=object)[out_code]
    out[verdict] = col  # the lengths of the A-first row are the pair's lengths
    return out.drop(index=out.index[s]).reset_index(drop=True)


# --- per-system counts and the leaderboard ------------------------------------------------------


def system_counts(battles: pd.DataFrame | BattleArrays, *, verdict: str = "verdict") -> pd.DataFrame:
    """Per system: ``n_battles`` (every row it is in), ``n_wins``, ``n_losses``, ``n_ties``,
    ``n_unparseable``, ``n_missing``, and ``mean_length``: the mean length of its responses, each
    (``id``, system) response counted once when there is an ``id`` column (else once per battle)."""
    ba = as_battle_arrays(battles, verdict)
    k = len(ba.systems)
    me, _, code = _oriented(ba, np.ones(k, dtype=bool))
    counts = np.bincount(me.astype(np.int64) * 5 + code.astype(np.int64), minlength=5 * k).reshape(k, 5)
    mean_len = np.full(k, np.nan)
    if ba.len_a is not None and ba.len_b is not None:
        sys_ = np.concatenate([ba.a, ba.b]).astype(np.int64)
        lens = np.concatenate([ba.len_a, ba.len_b]).astype(np.float64)
        ids = np.tile(_id_codes(ba), 2) if ba.ids is not None else np.arange(2 * ba.n, dtype=np.int64)
        keep = np.flatnonzero(~np.isnan(lens))
        _, first = np.unique(ids[keep] * k + sys_[keep], return_index=True)  # first (id, system) response
        rows = keep[np.sort(first)]
        per = pd.Series(lens[rows]).groupby(sys_[rows]).mean()
        mean_len[per.index.to_numpy()] = per.to_numpy()
    return pd.DataFrame({
        "system": ba.systems, "n_battles": counts.sum(axis=1), "n_wins": counts[:, A_WINS],
        "n_losses": counts[:, B_WINS], "n_ties": counts[:, TIE], "n_unparseable": counts[:, UNPARSEABLE],
        "n_missing": counts[:, MISSING], "mean_length": mean_len,
    })


def _oriented(ba: BattleArrays, focus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every battle, the (focus-side system, other system, code from the focus side's view)
    rows; battles not involving a focus system are dropped. ``focus``: boolean mask over systems."""
    rows_a = focus[ba.a]
    rows_b = focus[ba.b]
    me = np.concatenate([ba.a[rows_a], ba.b[rows_b]])
    other = np.concatenate([ba.b[rows_a], ba.a[rows_b]])
    code = np.concatenate([ba.code[rows_a], SWAP_CODE[ba.code[rows_b]]])
    return me, other, code
