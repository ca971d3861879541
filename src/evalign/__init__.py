"""evalign: score LLM responses, judge them with LLMs, and meta-evaluate metrics and judges
against human ratings.

Importing evalign is light: torch and model libraries are imported only when a model-based
metric or a local judge is used.
"""

from __future__ import annotations

from evalign.errors import EvalignError, InputError, ModelLoadError
from evalign.io import read_items, write_table
from evalign.metrics.base import get_metric, list_metrics
from evalign.scoring import score, system_scores

__version__ = "0.1.0"

__all__ = [
    "EvalignError",
    "InputError",
    "ModelLoadError",
    "__version__",
    "get_metric",
    "list_metrics",
    "read_items",
    "score",
    "system_scores",
    "write_table",
]
