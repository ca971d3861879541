"""Meta-evaluation: how well metrics and judges agree with human ratings.

Pure statistics over ``systems x items`` arrays (NaN = missing): correlations (Kendall variants with a
tie threshold, micro/macro averaging), pairwise accuracy with tie calibration, soft pairwise accuracy,
the Williams test, bootstrap intervals and permutation tests, and inter-annotator agreement.
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
from evalign.meta.breakdown import breakdown, item_arrays, pair_arrays, pair_scores
from evalign.meta.clusters import MetricComparison, compare_metrics, significance_clusters
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
    preference_units,
)
from evalign.meta.resampling import Resampling
from evalign.meta.significance import (
    BootstrapResult,
    PermutationResult,
    Statistic,
    bootstrap_ci,
    make_statistic,
    paired_permutation_test,
)
from evalign.meta.soft_pairwise import SoftPairwiseAccuracyResult, pairwise_p_values, soft_pairwise_accuracy
from evalign.meta.trust import TrustReport, trust_table_items, trust_table_pairs, trust_table_pairs_file
from evalign.meta.williams import WilliamsResult, williams_p_value, williams_test

__all__ = [
    "BootstrapResult",
    "CorrelationResult",
    "EpsilonCalibration",
    "MetricComparison",
    "NumericGrades",
    "PairwiseAccuracyResult",
    "PermutationResult",
    "PreferenceAccuracyResult",
    "Resampling",
    "SoftPairwiseAccuracyResult",
    "Statistic",
    "TrustReport",
    "WilliamsResult",
    "aggregate_ratings",
    "bootstrap_ci",
    "breakdown",
    "calibrate_epsilon",
    "calibrate_epsilon_over",
    "calibrate_preference_epsilon",
    "cohen_kappa",
    "compare_metrics",
    "correlation",
    "fleiss_kappa",
    "grouped_correlations",
    "item_arrays",
    "krippendorff_alpha",
    "letter_to_number",
    "majority_vote",
    "make_statistic",
    "mean_pairwise_kendall",
    "pair_arrays",
    "pair_scores",
    "paired_permutation_test",
    "pairwise_accuracy",
    "pairwise_p_values",
    "pairwise_preference_accuracy",
    "preference_units",
    "significance_clusters",
    "soft_pairwise_accuracy",
    "system_means",
    "trust_table_items",
    "trust_table_pairs",
    "trust_table_pairs_file",
    "williams_p_value",
    "williams_test",
]
