"""What ``evalign leaderboard --human`` and ``--style-control`` add to a leaderboard: human verdicts on a
subset of the battles joined to the judge's (by ``id`` and the two systems, either order), the
prediction-powered leaderboard (:func:`evalign.rank.ppi_board.ppi_leaderboard`) and the
style-controlled Bradley-Terry ratings (:func:`evalign.rank.style.style_control`), with their JSON
forms (the terminal forms: :mod:`evalign.report.boards`). Errors name the file, line and field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError, UsageError
from evalign.io import read_battles
from evalign.rank import MISSING, BTSettings, battle_arrays, combine_orders, position_agreement, read_verdicts
from evalign.rank.battles import SWAP_CODE
from evalign.rank.ppi_board import PPIBoard, PPISettings, ppi_leaderboard
from evalign.rank.style import StyleControl, style_control


def ppi_battles(battles: pd.DataFrame) -> pd.DataFrame:
    """The battles PPI counts: one per pair (both presentation orders combined first, when the table has
    order-swapped pairs, so that a pair's two rows are not counted as two independent battles)."""
    ba = battle_arrays(battles)
    if ba.ids is not None and position_agreement(ba).n_pairs:
        return combine_orders(battles)
    return battles


def join_human(battles: pd.DataFrame, source: str | Path | pd.DataFrame, column: str = "verdict") -> tuple[np.ndarray, list[str]]:
    """The human verdict code of each battle (MISSING where none) from a file of human verdicts on some
    of the same battles (``id``, ``system_a``, ``system_b``, ``column``), matched by id and systems in
    either order (a swapped row's verdict is swapped). A human row that matches no battle is counted in
    the returned notes; two human rows for one battle, or a battle table without ``id``, is an error."""
    if "id" not in battles.columns:
        raise UsageError("--human joins human verdicts by battle id: the verdict file needs an 'id' column")
    human = read_battles(source, columns=[column])
    name, lines = str(human.attrs.get("source")), human.attrs.get("lines") or list(range(1, len(human) + 1))
    if "id" not in human.columns:
        raise InputError("no 'id' column (human verdicts are joined by battle id and systems)", file=name, field="id")
    try:
        codes = read_verdicts(human[column].to_numpy(), column)
    except InputError as e:  # name the human file and its line, not the row of a column
        row = e.line
        raise InputError(e.reason, file=name, line=lines[row - 1] if row else None, field=column,
                         line_word=human.attrs.get("line_word", "line")) from None
    where: dict[tuple[str, str, str], int] = {}
    for i, (bid, a, b) in enumerate(zip(battles["id"].astype(str), battles["system_a"].astype(str),
                                        battles["system_b"].astype(str), strict=True)):
        where.setdefault((bid, a, b), i)
    out = np.full(len(battles), MISSING, dtype=np.int8)
    taken: dict[int, int] = {}
    unmatched = 0
    for j, (bid, a, b) in enumerate(zip(human["id"].astype(str), human["system_a"].astype(str),
                                        human["system_b"].astype(str), strict=True)):
        i: int | None = where.get((bid, a, b))
        swapped = False
        if i is None:
            i, swapped = where.get((bid, b, a)), True
        if i is None:
            unmatched += 1
            continue
        if i in taken:
            raise InputError(f"a second human verdict for battle {bid!r} ({a} vs {b}; the first is on "
                             f"{human.attrs.get('line_word', 'line')} {taken[i]})", file=name, line=lines[j], field="id")
        taken[i] = lines[j]
        out[i] = SWAP_CODE[codes[j]] if swapped else codes[j]
    notes = [f"{unmatched} human verdicts of {name} match no battle (id and systems) and are left out"] if unmatched else []
    return out, notes


def ppi_board_of(battles: pd.DataFrame, human: str | Path | pd.DataFrame, *, column: str = "verdict",
                 baseline: str | None = None, alpha: float = 0.05, bt: BTSettings = BTSettings()) -> PPIBoard:
    """The prediction-powered leaderboard of a battle table (verdicts in ``verdict``) with the human
    verdicts of ``human`` (see :func:`join_human`)."""
    one = ppi_battles(battles)
    codes, notes = join_human(one, human, column)
    if not np.isin(codes, (0, 1, 2)).any():
        raise InputError("no human verdict matches a battle (by id and systems)", file=str(human) if not
                         isinstance(human, pd.DataFrame) else "<human table>", field="id")
    settings = PPISettings(baseline=baseline, alpha=alpha,
                           bt=BTSettings(scale=bt.scale, base=bt.base, init_rating=bt.init_rating, anchor=bt.anchor,
                                         anchor_rating=bt.anchor_rating, n_bootstrap=bt.n_bootstrap, seed=bt.seed))
    board = ppi_leaderboard(battle_arrays(one), codes, settings)
    extra = [f"PPI: {board.n_human} of {board.n_battles} battles have a human verdict"
             + ("; both orders of each pair combined into one battle" if len(one) < len(battles) else "")]
    return PPIBoard(board.win_rates, board.bt, board.target, board.n_battles, board.n_human,
                    tuple(extra + notes + list(board.notes)), settings)


def style_board_of(battles: pd.DataFrame, *, bt: BTSettings = BTSettings(), alpha: float = 0.05,
                   length_unit: str = "words", source: str = "<battles>") -> StyleControl:
    """Style-controlled Bradley-Terry ratings of a battle table with ``response_a`` / ``response_b``."""
    for col in ("response_a", "response_b"):
        if col not in battles.columns:
            raise InputError("--style-control needs the responses' texts (response_a, response_b)",
                             file=source, field=col)
    ba = battle_arrays(battles)
    used = ba.resolved()
    for col in ("response_a", "response_b"):  # a missing text is not an empty one: it would count as 0 words
        texts = battles[col].tolist()
        missing = [i for i, (t, keep) in enumerate(zip(texts, used, strict=True)) if keep and not isinstance(t, str)]
        if missing:
            raise InputError(f"{len(missing)} decided battle(s) have no response text (null); --style-control needs "
                             "both texts of every decided battle: fill them in or leave those battles out",
                             file=source, line=missing[0] + 1, line_word="row", field=col)
    settings = BTSettings(scale=bt.scale, base=bt.base, init_rating=bt.init_rating, anchor=bt.anchor,
                          anchor_rating=bt.anchor_rating, n_bootstrap=bt.n_bootstrap, seed=bt.seed)
    return style_control(ba, battles["response_a"].tolist(), battles["response_b"].tolist(), settings=settings,
                         alpha=alpha, length_unit=length_unit)


def _f(x: Any) -> Any:
    if isinstance(x, float | np.floating):
        return float(x) if math.isfinite(float(x)) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _records(df: pd.DataFrame | None) -> list[dict[str, Any]] | None:
    if df is None:
        return None
    return [{k: _f(v) for k, v in r.items()} for r in df.to_dict(orient="records")]


def ppi_dict(board: PPIBoard) -> dict[str, Any]:
    """The PPI leaderboard, JSON-ready."""
    return {"target": board.target, "alpha": board.settings.alpha, "n_battles": board.n_battles,
            "n_human": board.n_human, "win_rates": _records(board.win_rates), "bradley_terry": _records(board.bt),
            "notes": list(board.notes)}


def style_dict(s: StyleControl) -> dict[str, Any]:
    """The style-controlled ratings, JSON-ready."""
    return {"length_unit": s.length_unit, "n_battles": s.n_battles, "converged": s.converged, "intervals": s.intervals,
            "constant_features": list(s.constant), "systems": _records(s.table), "coefficients": _records(s.coefficients)}


__all__ = ["join_human", "ppi_battles", "ppi_board_of", "ppi_dict", "style_board_of", "style_dict"]
