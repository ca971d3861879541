"""Grading modes: each a registered :class:`Judge` that turns rows into prompts and judge outputs
into columns of the table. This module re-exports them; each mode lives in its own module under
:mod:`evalign.judges.modes`, their base and registry in :mod:`evalign.judges.base`.

* ``prometheus_absolute`` (mode ``absolute``): Prometheus 2 direct assessment, 1-5 under a score rubric,
  with or without a reference answer. Output ``Feedback ... [RESULT] n``.
* ``prometheus_relative`` (mode ``relative`` / ``pairwise``): Prometheus 2 pairwise ranking of
  responses A and B of a pair table (``[RESULT] A|B``, optionally TIE). By default every pair is
  judged in both orders; the verdict is resolved from both: the same verdict in both orders -> that
  verdict; different verdicts -> tie (position bias cannot be told apart from a real preference); an
  order without a verdict leaves the pair unscored (one order alone would carry the position bias).
* ``geval`` (mode ``geval``): G-Eval style overall quality on the Self-Instruct 1-4 scale (1 best,
  so ``higher_is_better = False``). With top logprobs the score is the probability-weighted mean
  over the tokens ``"1".."4"`` at the score position (renormalised over those found); without,
  the grade of each sample, averaged over ``samples``.
* ``criteria`` (mode ``criteria``): the GPT-4 judge of Doostmohammadi et al. 2024 (Figure 6):
  reasons first, then rates naturalness, relatedness and correctness 1-3 in a JSON object. Each
  rating is a column; the score column is ``correctness`` (``score_criterion``); several samples are
  aggregated per criterion by majority vote with the neutral 2 as fallback.
* ``prometheus_ranking`` (``--mode absolute --ranking``): Prometheus' protocol for preference data:
  responses A and B of a pair are graded independently with the absolute prompt; while the scores
  are equal (or one is unparseable) both are graded again (temperature > 0) up to ``max_rounds``;
  then the pair is a tie (or unparseable).

Output columns (the one convention of every judge; ``J`` is the judge's column name):

* ``J``: item judges: the score (float; NaN when not scored; direction: ``higher_is_better`` of the
  judge, False for G-Eval, where 1 is best). Pair judges: the verdict ``"A"``, ``"B"``, ``"tie"``, or
  ``"unparseable"`` (outputs were read but gave no verdict); None when skipped or when the backend failed.
* ``J.status``: ``scored`` / ``unscored`` / ``skipped``; ``J.reason``: why not scored (a code of
  :data:`evalign.judges.parsing.REASONS`); ``J.feedback``: the judge's text; ``J.error``: the backend's
  error message (redacted) when a call failed.
* per mode: ``J.median``, ``J.std``, ``J.n`` (samples > 1); ``J.naturalness``, ``J.relatedness``,
  ``J.correctness`` (criteria); ``J.method`` (geval: ``logprobs`` / ``samples``); ``J.code`` (pairs:
  +1 = A better, -1 = B better, 0 = tie), ``J.ab``, ``J.ba``, ``J.consistent`` (relative);
  ``J.score_a``, ``J.score_b``, ``J.rounds`` (ranking).
"""

from __future__ import annotations

from evalign.judges.base import (
    JUDGES,
    MODE_ALIASES,
    PROMETHEUS_SAMPLING,
    SAMPLING_KEYS,
    STATUSES,
    SWAP_VERDICT,
    VERDICT_CODE,
    Judge,
    SingleJudge,
    all_references,
    first_reference,
    is_missing,
    join_instruction,
    judge_class,
    judge_names,
    list_judges,
    numeric_columns,
    pair_verdict,
    prompt_text,
    reason_of,
    register_judge,
    resolve_orders,
)
from evalign.judges.modes.absolute import PrometheusAbsolute
from evalign.judges.modes.criteria import CRITERIA_NEUTRAL, CriteriaJudge, majority_vote
from evalign.judges.modes.geval import (
    GEVAL_FALLBACKS,
    GEVAL_MIN_MASS,
    GEval,
    logprob_weighted_score,
    parse_geval,
    score_token_probabilities,
)
from evalign.judges.modes.ranking import RANKING_MAX_ROUNDS, PrometheusRanking
from evalign.judges.modes.relative import PrometheusRelative
from evalign.judges.spec import get_judge

__all__ = [
    "CRITERIA_NEUTRAL",
    "GEVAL_FALLBACKS",
    "GEVAL_MIN_MASS",
    "JUDGES",
    "MODE_ALIASES",
    "PROMETHEUS_SAMPLING",
    "RANKING_MAX_ROUNDS",
    "SAMPLING_KEYS",
    "STATUSES",
    "SWAP_VERDICT",
    "VERDICT_CODE",
    "CriteriaJudge",
    "GEval",
    "Judge",
    "PrometheusAbsolute",
    "PrometheusRanking",
    "PrometheusRelative",
    "SingleJudge",
    "all_references",
    "first_reference",
    "get_judge",
    "is_missing",
    "join_instruction",
    "judge_class",
    "judge_names",
    "list_judges",
    "logprob_weighted_score",
    "majority_vote",
    "numeric_columns",
    "pair_verdict",
    "parse_geval",
    "prompt_text",
    "reason_of",
    "register_judge",
    "resolve_orders",
    "score_token_probabilities",
]
