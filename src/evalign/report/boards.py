"""How a leaderboard ranked from pairwise verdicts is shown (terminal and report): the title and the
lines under the table of :func:`evalign.rank.leaderboard_run.run_leaderboard`'s outcome, and the
tables of the prediction-powered and style-controlled boards. Formatting only: every number comes
from :mod:`evalign.rank`."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evalign.rank.leaderboard_run import LeaderboardOutcome
from evalign.rank.ppi_board import PPIBoard
from evalign.rank.style import StyleControl


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def outcome_title(o: LeaderboardOutcome) -> str:
    """One line naming the ranked column, the file and how the scores were computed."""
    b = o.board
    bt = b.bt.settings
    anchor = f"anchor {bt.anchor} = {bt.anchor_rating:g}" if bt.anchor else f"mean {bt.init_rating:g}"
    boot = (f"{bt.confidence:.0%} bootstrap over {'items' if bt.cluster else 'battles'}, {bt.n_bootstrap} resamples, "
            f"seed {bt.seed}" if bt.n_bootstrap else "no bootstrap")
    vs = f"; win % vs {b.settings.baseline}" if b.settings.baseline else ""
    return f"Leaderboard: {o.spec.column} on {o.source} ({o.n_rows} rows; Bradley-Terry, {anchor}; {boot}{vs})"


def outcome_lines(o: LeaderboardOutcome) -> list[str]:
    """What is printed under the table: clusters, position agreement, the panel's agreement, notes."""
    b = o.board
    lines = []
    if b.bt.settings.n_bootstrap:
        lines.append(f"cluster 1 = not significantly below the best (alpha {b.bt.settings.alpha:g}); "
                     f"bt_low..bt_high = the interval")
    if b.positions is not None:
        p = b.positions
        lines.append(f"position agreement {_pct(p.agreement)} over {p.n_pairs} order-swapped pairs; "
                     f"first position chosen {_pct(p.first_position_rate)} of decisive verdicts")
    if o.panel is not None:
        pa = o.panel
        lines.append(f"panel of {', '.join(pa.members)} ({pa.how}): Fleiss' kappa {pa.fleiss_kappa:.3f}, "
                     f"Krippendorff's alpha {pa.krippendorff_alpha:.3f}, mean Cohen's kappa {pa.mean_cohen_kappa:.3f} "
                     f"({pa.n_complete} rows all judged)")
        if pa.n_complete == 0:
            lines.append("note: no row was judged by every member of the panel, so their agreement is undefined; "
                         "each row's panel verdict comes from the members that judged it")
    lines.extend(f"note: {n}" for n in (*o.notes, *b.notes))
    return lines


def _pct_value(x: Any) -> str:
    return "-" if x is None or not math.isfinite(float(x)) else f"{100 * float(x):.1f}"


def _pct_interval(x: Any, low: Any, high: Any, note: Any) -> str:
    """``"50.0 [40.1, 59.9]"``; where the data cannot support an interval, its reason instead
    (``"100.0 [no interval: n < 2 (1 human labels)]"``); ``"-"`` without an estimate."""
    if x is None or not math.isfinite(float(x)):
        return "-"
    if isinstance(note, str):
        return f"{_pct_value(x)} [no interval: {note}]"
    return f"{_pct_value(x)} [{_pct_value(low)}, {_pct_value(high)}]"


def _num(x: Any, digits: int = 0) -> str:
    return "-" if x is None or not math.isfinite(float(x)) else f"{float(x):.{digits}f}"


def ppi_display(board: PPIBoard) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The win-rate and Bradley-Terry tables of the PPI leaderboard, formatted for the terminal."""
    w = board.win_rates
    wr = pd.DataFrame({
        "system": w["system"],
        "judge %": [_pct_interval(a, b, c, n) for a, b, c, n in
                    zip(w["judge"], w["judge_low"], w["judge_high"], w["judge_note"], strict=True)],
        "PPI %": [_pct_interval(a, b, c, n) for a, b, c, n in
                  zip(w["ppi"], w["ppi_low"], w["ppi_high"], w["ppi_note"], strict=True)],
        "humans only %": [_pct_interval(a, b, c, n) for a, b, c, n in
                          zip(w["humans"], w["humans_low"], w["humans_high"], w["humans_note"], strict=True)],
        "n": w["n_battles"], "n human": w["n_human"], "lambda": [_num(x, 2) for x in w["lam"]],
        "labels to halve": [_num(x) if math.isfinite(float(x)) else "more judge verdicts" if not math.isnan(float(x))
                            else "-" for x in w["n_to_halve"]],
    })  # fmt: skip
    if board.bt is None:
        return wr, None
    b = board.bt
    bt = pd.DataFrame({
        "system": b["system"], "judge BT": [_num(x) for x in b["judge_bt"]],
        "PPI BT": [f"{_num(a)} [no interval: {n}]" if isinstance(n, str) else f"{_num(a)} [{_num(lo)}, {_num(hi)}]"
                   for a, lo, hi, n in zip(b["ppi_bt"], b["ppi_low"], b["ppi_high"], b["ppi_note"], strict=True)],
        "humans only BT": [_num(x) for x in b["humans_bt"]],
        "labels to halve": [_num(x) if math.isfinite(float(x)) else ("-" if math.isnan(float(x)) else "more judge verdicts")
                            for x in b["n_to_halve"]],
    })  # fmt: skip
    return wr, bt


def style_display(s: StyleControl) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The style-controlled ratings and the style coefficients, formatted for the terminal."""
    t = s.table
    systems = pd.DataFrame({"system": t["system"], "BT": [_num(x) for x in t["bt"]], "rank": t["rank"],
                            "BT style-controlled": [f"{_num(a)} [{_num(lo)}, {_num(hi)}]" for a, lo, hi in
                                                    zip(t["bt_style"], t["bt_style_low"], t["bt_style_high"], strict=True)],
                            "rank (style)": t["rank_style"], "style effect": [_num(x) for x in t["style_effect"]]})
    c = s.coefficients
    coefs = pd.DataFrame({"feature": c["feature"], "coefficient": [_num(x, 3) for x in c["coef"]],
                          "interval": [f"[{_num(lo, 3)}, {_num(hi, 3)}]" for lo, hi in zip(c["low"], c["high"], strict=True)]})
    return systems, coefs


__all__ = ["outcome_lines", "outcome_title", "ppi_display", "style_display"]
