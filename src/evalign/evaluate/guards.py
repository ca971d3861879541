"""Guards: the conditions under which a ranking would mislead, each with the line that says so.

Pure functions returning a reason (a sentence) or None; :func:`evalign.evaluate.evaluate` turns
them into refusals (no ranking, exit code 1), notes and warnings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

#: a calibrated metric that calls more than this share of pairs ties is flagged
TIE_WARNING = 0.9
#: a system-level statistic needs at least this many systems
MIN_SYSTEMS = 3


def no_values_reason(source: str, columns: Sequence[str], has_references: bool, computed: Sequence[str]) -> str:
    """Why no column has a value: no references for computed reference-based metrics, or a generic line."""
    if not has_references and computed:
        return (f"{source} has no reference answers: reference-based metrics cannot be computed; "
                "judge it with `evalign judge` first")
    return f"{source}: no value of {', '.join(columns)} on any item with a human label: nothing to rank"


def undefined_items(human: np.ndarray, n_systems: int, n_items: int, level: str, grouping: str) -> str | None:
    """Why an item-table statistic is undefined (or None): constant human labels, too few systems
    for a system-level or per-item statistic, a single item."""
    vals = human[np.isfinite(human)]
    if vals.size == 0:
        return "no human label"
    if np.unique(vals).size < 2:
        return f"the human labels are constant (all {float(vals[0]):g}): agreement with them is undefined"
    if level == "system" and n_systems < MIN_SYSTEMS:
        return f"only {n_systems} system(s): a system-level statistic needs at least {MIN_SYSTEMS}"
    if level == "item" and grouping == "item" and n_systems < 2:
        return "only one system: a statistic within each item needs at least 2 systems"
    if n_items < 2:
        return "only one item: no interval or test, and no pair of items to compare"
    return None


def undefined_pairs(labels: np.ndarray) -> str | None:
    """Why a pair-table statistic is undefined (or None): no labelled pair."""
    if not np.isfinite(labels).any():
        return "no labelled pair"
    return None


def tie_warnings(tie_rates: Mapping[str, float], epsilons: Mapping[str, float], rater: str = "human") -> list[str]:
    """A warning per calibrated column that calls more than 90% of pairs ties (``rater``: who gave the labels)."""
    out = []
    for name, rate in tie_rates.items():
        if np.isfinite(rate) and rate > TIE_WARNING:
            out.append(f"{name} calls {100 * rate:.1f}% of pairs ties at its calibrated epsilon "
                       f"{epsilons.get(name, float('nan')):.3g}: its accuracy mostly counts the {rater} ties")
    return out


def baseline_warnings(beats: Mapping[str, bool | None], best: str, best_value: float, alpha: float,
                      statistic: str = "") -> list[str]:
    """A warning per metric or judge that does not beat the best trivial baseline, naming the
    statistic and that baseline's value in its table."""
    losers = [m for m, b in beats.items() if b is False]
    if not losers:
        return []
    on = f" on {statistic}" if statistic else ""
    return [f"{', '.join(losers)} {'does' if len(losers) == 1 else 'do'} not beat the best trivial baseline{on} "
            f"({best} = {best_value:.3f}) significantly at alpha {alpha:g}"]


def no_answer(beats: Mapping[str, bool | None]) -> bool:
    """True when the guard tested the metrics and judges against the baselines and none beats them
    (then their ranks and clusters would rank nothing, and are withheld)."""
    tested = [b for b in beats.values() if b is not None]
    return bool(tested) and not any(tested)


def no_answer_headline(statistic: str, best: str, best_value: float) -> str:
    """The one-line headline of a table whose metrics and judges all fail to beat the baselines."""
    return (f"No answer: no metric or judge beats the best trivial baseline on {statistic} "
            f"({best} = {best_value:.3f}); ranks and clusters withheld")
