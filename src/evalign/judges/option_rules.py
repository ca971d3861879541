"""The rules of a judge backend's option values, shared by every command that takes them: ``judge`` and
``probe`` (``--concurrency``, ``--timeout``, ...) and a ``bench`` judge spec (``concurrency=...``), so
that a value one refuses the other refuses with the same words (the sampling settings' rules are
:data:`evalign.judges.prompts.SAMPLING_RULES`); and the rule of the output constraint mode
(:func:`check_constrain`), which every command and every judge applies."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from evalign.errors import UsageError

#: the values of a judge's output constraint mode (``constrain``; ``--constrain``): ``auto`` (where the
#: backend can, else one line and unconstrained), ``on`` (or stop), ``off``
CONSTRAIN_MODES = ("auto", "on", "off")


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _seconds(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


#: option -> (what it must be, the check of a value)
BACKEND_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "concurrency": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "batch_size": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "max_retries": ("an integer >= 0", lambda v: _int(v) and v >= 0),
    "timeout": ("> 0 seconds", _seconds),
    "connect_timeout": ("> 0 seconds", _seconds),
    "idle_timeout": ("> 0 seconds", _seconds),
    "n_ctx": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "threads": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "system_prompt": ("'role' or 'fold'", lambda v: v in ("role", "fold")),
    "constraint_format": ("'auto', 'llama.cpp', 'vllm' or 'openai'", lambda v: v in ("auto", "llama.cpp", "vllm", "openai")),
}


def backend_option_problem(key: str, value: Any) -> str | None:
    """What is wrong with the backend option ``key`` = ``value`` (None: nothing, or an option without a
    rule; None values are "not set")."""
    rule = BACKEND_RULES.get(key)
    if rule is None or value is None or rule[1](value):
        return None
    return f"must be {rule[0]}, got {value!r}"


#: the panel rules (``--panel-rule``; a bench panel's ``rule``) and tie rules (``--panel-tie``; ``tie``)
PANEL_RULE_NAMES = ("majority", "weighted", "mean", "median", "dawid-skene")
PANEL_TIE_NAMES = ("tie", "abstain", "first")
#: ``J.confidence_source`` of one judge's samples' vote share (``judge --samples N`` at temperature > 0, no logprobs)
SAMPLES_VOTES = "samples_votes"

#: a panel's settings: option -> (what it must be, the check of a value); ``--panel-<key>`` on the command
#: line (``meta``, ``leaderboard``, ``judge``), ``<key>`` in a bench panel's mapping
PANEL_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "rule": ("one of " + ", ".join(PANEL_RULE_NAMES), lambda v: v in PANEL_RULE_NAMES),
    "tie": ("one of " + ", ".join(PANEL_TIE_NAMES), lambda v: v in PANEL_TIE_NAMES),
    "min": ("an integer >= 1", lambda v: _int(v) and v >= 1),
}


def panel_option_problem(key: str, value: Any) -> str | None:
    """What is wrong with the panel option ``key`` = ``value`` (None: nothing), see :data:`PANEL_RULES`."""
    rule = PANEL_RULES.get(key)
    if rule is None or rule[1](value):
        return None
    return f"must be {rule[0]}, got {value!r}"


def check_constrain(value: Any, *, user_constraint: bool = False) -> None:
    """The one rule of the output constraint mode, whatever command or API call sets it: one of
    :data:`CONSTRAIN_MODES`, and not ``off`` with a user's grammar or JSON schema
    (``user_constraint``); a wrong one is a :class:`~evalign.errors.UsageError`."""
    if value not in CONSTRAIN_MODES:
        raise UsageError(f"--constrain (constrain) must be one of {', '.join(CONSTRAIN_MODES)}, got {value!r}")
    if value == "off" and user_constraint:
        raise UsageError("a grammar (--grammar) or JSON schema constrains the output: it does not go with "
                         "--constrain off")


__all__ = ["BACKEND_RULES", "CONSTRAIN_MODES", "PANEL_RULES", "PANEL_RULE_NAMES", "PANEL_TIE_NAMES", "SAMPLES_VOTES",
           "backend_option_problem", "check_constrain", "panel_option_problem"]
