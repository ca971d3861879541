"""The rules of option values, shared by every command that takes them, so that a value one command
refuses every other refuses with the same words: a judge backend's options (:data:`BACKEND_RULES`:
``judge`` and ``probe``'s ``--concurrency``, ``--timeout``, ... and a ``bench`` judge spec's
``concurrency=...``; the sampling settings' rules are :data:`evalign.judges.prompts.SAMPLING_RULES`);
the command-line options of ``annotate``, ``meta``, ``report``, ``leaderboard``, ``demo``, ``probe``,
``escalate``, ``judge --cascade``, ``judge-data`` and ``score`` (:data:`OPTION_RULES`, checked by :func:`check_options`: a non-finite
number, a count below its least or a port outside 1-65535 is one usage error naming the option); and
the rule of the output constraint mode (:func:`check_constrain`), which every command and every judge
applies."""

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
    # batch mode (--batch-api): lines per provider batch, resubmissions of a failed line, how, poll interval
    "batch_max_requests": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "batch_retries": ("an integer >= 0", lambda v: _int(v) and v >= 0),
    "batch_retry": ("'batch' or 'sync'", lambda v: v in ("batch", "sync")),
    "batch_poll": ("> 0 seconds", _seconds),
    "prompt_cache": ("'auto', 'off', '5m' or '1h'", lambda v: v in ("auto", "off", "5m", "1h")),
    "service_tier": ("'auto', 'default', 'flex' or 'priority'", lambda v: v in ("auto", "default", "flex", "priority")),
}
#: the batch-mode options among :data:`BACKEND_RULES` (each ``--batch-...`` goes with ``--batch-api``)
BATCH_OPTIONS = ("batch_max_requests", "batch_retries", "batch_retry", "batch_poll")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _share(v: Any) -> bool:
    return _number(v) and 0 < v < 1


#: command-line option (its field name) -> (what it must be, the check of a value): the options of
#: ``annotate``, ``meta``, ``report``, ``leaderboard``, ``demo``, ``escalate``, ``judge --cascade`` and
#: ``judge-data``; every command that takes one checks it here (:func:`check_options`), so all refuse a
#: value alike (``leaderboard --bootstrap`` takes 0, for no intervals, and ``score --workers`` counts Ray's
#: CPUs, 0 not being every core: their own rules, not these)
OPTION_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "port": ("an integer in [1, 65535]", lambda v: _int(v) and 1 <= v <= 65535),
    "per_item": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "min_seconds": ("a finite number >= 0 (seconds; 0: off)", lambda v: _number(v) and v >= 0),
    "gold_rate": ("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1),
    "bootstrap": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "permutations": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "min_group_size": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "workers": ("an integer >= 0 (0: every core)", lambda v: _int(v) and v >= 0),
    "shard_rows": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "gpus_per_actor": ("a finite number >= 0", lambda v: _number(v) and v >= 0),
    "seed": ("an integer >= 0", lambda v: _int(v) and v >= 0),
    "top": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "confidence": ("a number strictly between 0 and 1", _share),
    "alpha": ("a number strictly between 0 and 1", _share),
    "risk": ("a number strictly between 0 and 1", _share),
    "delta": ("a number strictly between 0 and 1", _share),
    "holdout": ("a number strictly between 0 and 1", _share),
    "audit": ("a number in [0, 1)", lambda v: _number(v) and 0 <= v < 1),
    "held_out": ("a number in [0, 1]", lambda v: _number(v) and 0 <= v <= 1),
    "mix": ("a finite number >= 0", lambda v: _number(v) and v >= 0),
    "near_duplicate": ("a number in [0, 100]", lambda v: _number(v) and 0 <= v <= 100),
    "embedding_duplicate": ("a number in [-1, 1] (a cosine)", lambda v: _number(v) and -1 <= v <= 1),
}


def option_problem(key: str, value: Any) -> str | None:
    """What is wrong with the command-line option ``key`` (its field name: ``per_item``) = ``value``
    (None: nothing, not set, or an option without a rule in :data:`OPTION_RULES`)."""
    rule = OPTION_RULES.get(key)
    if rule is None or value is None or rule[1](value):
        return None
    return f"must be {rule[0]}, got {value!r}"


def check_options(**values: Any) -> None:
    """Check command-line options by :data:`OPTION_RULES` (``check_options(port=70000)``); the first
    bad one is a :class:`~evalign.errors.UsageError` naming the option: ``--port must be an integer in
    [1, 65535], got 70000``."""
    for key, value in values.items():
        problem = option_problem(key, value)
        if problem:
            raise UsageError(f"--{key.replace('_', '-')} {problem}")


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


__all__ = ["BACKEND_RULES", "BATCH_OPTIONS", "CONSTRAIN_MODES", "OPTION_RULES", "PANEL_RULES", "PANEL_RULE_NAMES",
           "PANEL_TIE_NAMES", "SAMPLES_VOTES", "backend_option_problem", "check_constrain", "check_options",
           "option_problem", "panel_option_problem"]
