"""Resolving a metric name to an existing column of a scored table."""

from __future__ import annotations

import pytest

from evalign.columns import resolve_metric_column
from evalign.errors import EvalignError


def test_exact_name_wins() -> None:
    assert resolve_metric_column(["id", "semscore", "semscore[model=x]"], "semscore") == "semscore"


def test_one_column_with_options() -> None:
    cols = ["id", "response", "semscore[model=all-MiniLM-L6-v2]", "bertscore[model=y].precision"]
    assert resolve_metric_column(cols, "semscore") == "semscore[model=all-MiniLM-L6-v2]"
    # an extra column (``<column>.<suffix>``) is not the metric's column
    assert resolve_metric_column(cols, "bertscore") is None
    # a longer metric name with the same start does not match
    assert resolve_metric_column(["semscore_v2[model=z]"], "semscore") is None


def test_none_and_ambiguous() -> None:
    assert resolve_metric_column(["id", "bleu"], "semscore") is None
    with pytest.raises(EvalignError, match=r"semscore\[model=a\], semscore\[model=b\]"):
        resolve_metric_column(["semscore[model=a]", "semscore[model=b]"], "semscore")
