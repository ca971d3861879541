"""The leaderboard: win rates, Bradley-Terry and the length-controlled win rate of every system in
one result.

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.rank.battles import (
    BattleArrays,
    PositionAgreement,
    battle_arrays,
    combine_orders,
    position_agreement,
    system_counts,
)
from evalign.rank.bradley_terry import BTResult, BTSettings, bradley_terry
from evalign.rank.length_controlled import LCSettings, LCWinRates, lc_win_rates
from evalign.rank.self_preference import self_preference
from evalign.rank.win_rates import WinRateMatrix, WinRates, win_rate_matrix, win_rates


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
    bt: BTSettings = BTSettings()  # noqa: RUF009 (frozen)
    lc: LCSettings | None = LCSettings()  # noqa: RUF009 (frozen)
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
                if sp.n_battles == len(battles):
                    who = "; ".join(f"judge {j!r} is system {s!r}" for j, s in sp.pairs)
                    raise InputError(f"--skip-self leaves nothing to rank: each of the {len(battles)} battles includes a "
                                     f"judge's own outputs ({who})")
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
    ba = _ranked(battles, raw, settings.orders, verdict)
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


def _ranked(battles: pd.DataFrame, raw: BattleArrays, orders: str, verdict: str) -> BattleArrays:
    """The battles ranked: ``raw`` itself when both orders are pooled, else the combined table encoded
    with ``raw``'s systems."""
    return battle_arrays(battles, verdict=verdict, systems=raw.systems) if orders == "combine" else raw


def _has_lc_values(lc: LCWinRates, baseline: str) -> bool:
    """Whether some system other than the baseline (always 0.5 against itself) has an LC win rate."""
    return any(s != baseline and np.isfinite(v) for s, v in zip(lc.systems, lc.lc_win_rate, strict=True))
