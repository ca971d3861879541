"""evalign: score LLM responses, judge them with LLMs, and meta-evaluate metrics and judges
against human ratings.

Importing evalign is light (no numpy, pandas, scipy, torch...): every name below but the errors
and ``__version__`` loads its module on first use (``evalign.score`` imports the scoring code and
pandas when first used). When the process is the ``evalign`` command, the first instruction
makes Ctrl-C print one line and exit 130 from here on (see :mod:`evalign.interrupt`).
"""

from __future__ import annotations

from evalign import interrupt

if interrupt.is_command_line():
    interrupt.guard()

import importlib
from typing import TYPE_CHECKING, Any

from evalign.errors import EvalignError, InputError, ModelLoadError

if TYPE_CHECKING:  # the lazy names, for type checkers
    from evalign.io import read_items, read_pairs, write_table
    from evalign.metrics.base import get_metric, list_metrics
    from evalign.scoring import score, system_scores

#: the version of evalign (the package metadata reads it from here: pyproject's ``dynamic``)
__version__ = "0.2.0"

#: names loaded on first use: name -> module
_LAZY = {
    "read_items": "evalign.io",
    "read_pairs": "evalign.io",
    "write_table": "evalign.io",
    "get_metric": "evalign.metrics.base",
    "list_metrics": "evalign.metrics.base",
    "score": "evalign.scoring",
    "system_scores": "evalign.scoring",
    "run_judge": "evalign.judges",
    "get_judge": "evalign.judges",
    "parse_grade": "evalign.judges",
    "correlation": "evalign.meta",
    "pairwise_accuracy": "evalign.meta",
    "pairwise_preference_accuracy": "evalign.meta",
    "load_dataset": "evalign.datasets",
    "meta_evaluate": "evalign.evaluate.oneshot",
    "meta_evaluate_pairs": "evalign.evaluate.oneshot",
    "EvalResult": "evalign.evaluate",
    "TrustTable": "evalign.evaluate",
    "items_to_pairs": "evalign.datasets",
    "leaderboard": "evalign.rank",
    "LeaderboardSettings": "evalign.rank",
    "BTSettings": "evalign.rank",
    "LCSettings": "evalign.rank",
    "bradley_terry": "evalign.rank",
    "win_rates": "evalign.rank",
    "lc_win_rates": "evalign.rank",
    "judge_panel": "evalign.rank",
    "run_leaderboard": "evalign.rank.leaderboard_run",
    "LeaderboardSpec": "evalign.rank.leaderboard_run",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if not name.startswith("_"):  # a submodule not imported yet (``evalign.scoring``)
        try:
            return importlib.import_module(f"evalign.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"evalign.{name}":
                raise
    raise AttributeError(f"module 'evalign' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BTSettings",
    "EvalResult",
    "EvalignError",
    "InputError",
    "LCSettings",
    "LeaderboardSettings",
    "LeaderboardSpec",
    "ModelLoadError",
    "TrustTable",
    "__version__",
    "bradley_terry",
    "correlation",
    "get_judge",
    "get_metric",
    "items_to_pairs",
    "judge_panel",
    "lc_win_rates",
    "leaderboard",
    "list_metrics",
    "load_dataset",
    "meta_evaluate",
    "meta_evaluate_pairs",
    "pairwise_accuracy",
    "pairwise_preference_accuracy",
    "parse_grade",
    "read_items",
    "read_pairs",
    "run_judge",
    "run_leaderboard",
    "score",
    "system_scores",
    "win_rates",
    "write_table",
]
