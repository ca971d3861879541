"""Meta-evaluation: how well metrics and judges agree with human ratings.

Pure statistics over ``systems x items`` arrays (NaN = missing): correlations, pairwise accuracy with
tie calibration, and inter-annotator agreement.
"""

from __future__ import annotations

from evalign.meta.agreement import (
    NumericGrades,
    aggregate_ratings,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    letter_to_number,
    majority_vote,
    mean_pairwise_kendall,
)
from evalign.meta.correlation import CorrelationResult, correlation, grouped_correlations, system_means
from evalign.meta.pairwise import (
    EpsilonCalibration,
    PairwiseAccuracyResult,
    PreferenceAccuracyResult,
    calibrate_epsilon,
    calibrate_epsilon_over,
    calibrate_preference_epsilon,
    pairwise_accuracy,
    pairwise_preference_accuracy,
)

__all__ = [
    "CorrelationResult",
    "EpsilonCalibration",
    "NumericGrades",
    "PairwiseAccuracyResult",
    "PreferenceAccuracyResult",
    "aggregate_ratings",
    "calibrate_epsilon",
    "calibrate_epsilon_over",
    "calibrate_preference_epsilon",
    "cohen_kappa",
    "correlation",
    "fleiss_kappa",
    "grouped_correlations",
    "krippendorff_alpha",
    "letter_to_number",
    "majority_vote",
    "mean_pairwise_kendall",
    "pairwise_accuracy",
    "pairwise_preference_accuracy",
    "system_means",
]
