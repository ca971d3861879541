"""Reference-based metrics: a registry of :class:`Metric` classes, imported lazily."""

from evalign.metrics.base import (
    Metric,
    MetricResult,
    get_metric,
    list_metrics,
    metric_class,
    register_metric,
)

__all__ = ["Metric", "MetricResult", "get_metric", "list_metrics", "metric_class", "register_metric"]
