"""LLM-as-a-judge: Prometheus absolute and pairwise grading, G-Eval, a JSON criteria judge.

Judges are registered classes (:func:`get_judge`, :func:`list_judges`), built from a frozen
:class:`JudgeSpec` by :func:`make_judge` (the one way every command builds one); prompts and rubrics are data
files (:func:`load_template`, :func:`load_rubric`); :func:`parse_grade` reads a grade or says why it
cannot; :func:`run_judge` grades a table against a backend (``evalign.backends``) with a cache,
resume, and a bias audit. Importing this package does not import httpx, torch or transformers.
"""

from __future__ import annotations

from evalign.judges.base import (
    MODE_ALIASES,
    Judge,
    judge_class,
    list_judges,
    register_judge,
    resolve_orders,
)
from evalign.judges.bias import length_bias, order_swap_agreement, pairwise_length_bias
from evalign.judges.modes.geval import logprob_weighted_score
from evalign.judges.parsing import REASONS, ParseResult, parse_grade
from evalign.judges.prompts import Rubric, Template, list_rubrics, list_templates, load_rubric, load_template
from evalign.judges.runner import JudgeRun, read_pairs, run_judge
from evalign.judges.spec import JudgeSpec, get_judge, make_judge

__all__ = [
    "MODE_ALIASES",
    "REASONS",
    "Judge",
    "JudgeRun",
    "JudgeSpec",
    "ParseResult",
    "Rubric",
    "Template",
    "get_judge",
    "judge_class",
    "length_bias",
    "list_judges",
    "list_rubrics",
    "list_templates",
    "load_rubric",
    "load_template",
    "logprob_weighted_score",
    "make_judge",
    "order_swap_agreement",
    "pairwise_length_bias",
    "parse_grade",
    "read_pairs",
    "register_judge",
    "resolve_orders",
    "run_judge",
]
