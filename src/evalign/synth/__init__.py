"""Generating judge training data the way Prometheus made its Feedback Collection (``evalign synth``).

:func:`run_synth` runs the four steps (rubric brainstorming and paraphrasing, instructions with score-5
reference answers, a response and feedback per score 1-5, filters and balance) with any judge backend
as the teacher; :func:`relative_instances` builds pairwise rows from absolute ones (Prometheus 2).
Importing this package does not import httpx, torch or transformers.
"""

from __future__ import annotations

from evalign.synth.filters import balance, novel
from evalign.synth.pipeline import (
    COLUMNS,
    FILTERS,
    SynthResult,
    SynthSettings,
    SynthSummary,
    arun_synth,
    load_seed_rubrics,
    run_synth,
)
from evalign.synth.relative import relative_instances

__all__ = [
    "COLUMNS",
    "FILTERS",
    "SynthResult",
    "SynthSettings",
    "SynthSummary",
    "arun_synth",
    "balance",
    "load_seed_rubrics",
    "novel",
    "relative_instances",
    "run_synth",
]
