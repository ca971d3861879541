"""``prometheus_absolute`` (mode ``absolute``): Prometheus 2 direct assessment, 1-5 under a score
rubric, with or without a reference answer. Output ``Feedback ... [RESULT] n``."""

from __future__ import annotations

from evalign.judges.base import SingleJudge, register_judge


@register_judge
class PrometheusAbsolute(SingleJudge):
    """Prometheus 2 absolute grading: a 1-5 score under a rubric (``[RESULT] n``)."""

    name = "prometheus_absolute"
    mode = "absolute"
    description = "Prometheus 2 direct assessment, 1-5 under a score rubric (higher is better)"
    uses_rubric = True
    default_template = "prometheus_absolute"
    default_rubric = "helpfulness"
