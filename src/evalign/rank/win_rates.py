"""Win rates from battles: each system's rate against a baseline (or all others) and the matrix of
head-to-head rates.

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evalign.rank.battles import (
    A_WINS,
    B_WINS,
    MISSING,
    SWAP_CODE,
    TIE,
    UNPARSEABLE,
    BattleArrays,
    as_battle_arrays,
)


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





def win_rates(
    battles: pd.DataFrame | BattleArrays, baseline: str, *, verdict: str = "verdict"
) -> WinRates:
    """Win rate of every system against ``baseline`` (battles between the two, either order)."""
    ba = as_battle_arrays(battles, verdict)
    k = len(ba.systems)
    base = ba.index(baseline, "baseline")
    keep = (ba.a == base) | (ba.b == base)
    me = np.where(ba.a[keep] == base, ba.b[keep], ba.a[keep])
    code = np.where(ba.a[keep] == base, SWAP_CODE[ba.code[keep]], ba.code[keep])
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


def score_matrix(a: np.ndarray, b: np.ndarray, code: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    """``W[i, j]`` = (weighted) wins of i over j + half the ties, from resolved battles."""
    w = np.ones(a.size) if weights is None else weights
    win_a = np.where(code == A_WINS, 1.0, np.where(code == TIE, 0.5, 0.0)) * w
    win_b = np.where(code == B_WINS, 1.0, np.where(code == TIE, 0.5, 0.0)) * w
    flat = np.bincount(a * k + b, win_a, k * k) + np.bincount(b * k + a, win_b, k * k)
    return flat.reshape(k, k)


def win_rate_matrix(battles: pd.DataFrame | BattleArrays, *, verdict: str = "verdict") -> WinRateMatrix:
    """The win-rate matrix of every pair of systems (ties count half; see :class:`WinRateMatrix`)."""
    ba = as_battle_arrays(battles, verdict)
    k = len(ba.systems)
    r = ba.resolved()
    score = score_matrix(ba.a[r], ba.b[r], ba.code[r], k)
    return WinRateMatrix(ba.systems, score, score + score.T)
