"""Declared metric options: their types and ranges, checked before any work.

Each metric class declares its constructor options once, as a class attribute::

    option_types: ClassVar[dict[str, OptionSpec]] = {
        "char_order": OptionSpec(int, min=1, help="character n-gram order"),
        "lowercase": OptionSpec(bool),
        "tokenize": OptionSpec(str, choices=("13a", "intl", "none")),
        "num_layers": OptionSpec(int, min=1, none_ok=True),
    }

:func:`evalign.metrics.get_metric` checks every option given in Python against the declaration
(:meth:`OptionSpec.check`) and the command line parses ``--option metric.key=value`` through it
(:meth:`OptionSpec.parse`), so ``chrf.char_order=-3`` or ``bleu.tokenise=intl`` is an error that
names the metric and the option before a file is read. A metric without a declaration (e.g. a
user's own) takes its options unchecked, as before. Options that only Python callers can pass
(a cache object, a progress callback) are declared with ``OptionSpec(object, cli=False)``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evalign.errors import UsageError, unknown_name

_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
_NONE = {"none", "null"}


@dataclass(frozen=True)
class OptionSpec:
    """One metric option: its type (``int``, ``float``, ``bool``, ``str`` or ``object``), an
    inclusive range (``min``/``max``, for numbers), allowed ``choices``, whether ``None`` is allowed,
    whether the command line may set it (``cli``) and a one-line ``help``."""

    type: type
    min: float | None = None
    max: float | None = None
    choices: tuple[Any, ...] | None = None
    none_ok: bool = False
    cli: bool = True
    help: str = ""

    def describe(self) -> str:
        """A short description of the allowed values, e.g. ``an integer >= 1``."""
        if self.choices is not None:
            text = "one of " + ", ".join(map(str, self.choices))
        else:
            text = {int: "an integer", float: "a number", bool: "true or false", str: "a text"}.get(self.type, "a value")
            if self.min is not None and self.max is not None:
                text += f" in [{self.min:g}, {self.max:g}]"
            elif self.min is not None:
                text += f" >= {self.min:g}"
            elif self.max is not None:
                text += f" <= {self.max:g}"
        return text + (" or none" if self.none_ok else "")

    def check(self, value: Any, where: str) -> Any:
        """``value`` if it is allowed (ints are accepted for floats), else :class:`UsageError`
        naming ``where`` (e.g. ``--option chrf.char_order``)."""
        if value is None:
            if self.none_ok:
                return None
            raise UsageError(f"{where}: must be {self.describe()}, got none")
        if self.type is object:
            return value
        if self.type is str and isinstance(value, os.PathLike):  # a model folder or file given as a Path
            value = os.fspath(value)
        ok = isinstance(value, self.type) and not (self.type is not bool and isinstance(value, bool))
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise UsageError(f"{where}: must be {self.describe()}, got {type(value).__name__} {value!r:.40}")
        if self.type is float and not math.isfinite(value):
            raise UsageError(f"{where}: must be {self.describe()}, got {value}")
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{where}: must be {self.describe()}, got {value!r:.40}")
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            raise UsageError(f"{where}: must be {self.describe()}, got {value}")
        return value

    def parse(self, text: str, where: str) -> Any:
        """The value of a command-line text (``"6"``, ``"true"``, ``"none"``), checked."""
        raw = text.strip()
        if not self.cli:
            raise UsageError(f"{where}: can only be set from Python")
        if self.none_ok and raw.lower() in _NONE:
            return self.check(None, where)
        value: Any = raw
        try:
            if self.type is int:
                value = int(raw)
            elif self.type is float:
                value = float(raw)
            elif self.type is bool:
                if raw.lower() not in _TRUE | _FALSE:
                    raise ValueError(raw)
                value = raw.lower() in _TRUE
        except ValueError:
            raise UsageError(f"{where}: must be {self.describe()}, got {text!r:.40}") from None
        return self.check(value, where)


def check_options(metric: str, specs: Mapping[str, OptionSpec], options: Mapping[str, Any]) -> dict[str, Any]:
    """Options given in Python, checked against a metric's declaration (unchanged when the metric
    declares none). Unknown keys are a :class:`UsageError` with a "did you mean"."""
    if not specs:
        return dict(options)
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in specs:
            raise unknown_name("option", key, specs, where=f"metric '{metric}'")
        out[key] = specs[key].check(value, f"option {metric}.{key}")
    return out
