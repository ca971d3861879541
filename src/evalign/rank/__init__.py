"""Ranking *systems* from pairwise verdicts (meta-evaluation ranks judges; this ranks systems): win rates, length-controlled win rates, Bradley-Terry
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

Modules: ``battles``, ``win_rates``, ``bradley_terry``, ``length_controlled`` (its GLM solver: ``l1_logistic``),
``board``, ``panel``, ``self_preference``,
``style`` (style control), ``ppi`` and ``ppi_board`` (prediction-powered boards), ``bootstrap`` (the one
bootstrap loop: resample, refit), ``leaderboard_run`` (a leaderboard from a file of verdicts),
``prediction_powered`` (``--human`` and ``--style-control`` from files) and ``system_significance``
(system-vs-system paired bootstrap and approximate randomization, as sacrebleu).
"""

from __future__ import annotations

from evalign.rank.battles import (
    A_WINS,
    B_WINS,
    MISSING,
    TIE,
    UNPARSEABLE,
    VERDICTS,
    BattleArrays,
    PositionAgreement,
    battle_arrays,
    combine_orders,
    has_verdicts,
    judge_battles,
    position_agreement,
    read_verdicts,
    system_counts,
)
from evalign.rank.board import Leaderboard, LeaderboardSettings, leaderboard
from evalign.rank.bradley_terry import BTResult, BTSettings, bradley_terry
from evalign.rank.length_controlled import LCSettings, LCWinRates, fit_instruction_difficulty, lc_win_rates
from evalign.rank.panel import PanelResult, judge_panel
from evalign.rank.self_preference import SelfPreference, self_preference
from evalign.rank.win_rates import WinRateMatrix, WinRates, win_rate_matrix, win_rates

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
    "has_verdicts",
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
