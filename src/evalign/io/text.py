"""Measures of the item table's text columns, shared by the judges' bias audits and the order diagnostics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: the units a response length is counted in
LENGTH_UNITS = ("chars", "words")


def text_lengths(texts: Sequence[Any], unit: str = "chars") -> np.ndarray:
    """Length of each text in characters or whitespace-separated words (None / NaN -> NaN)."""
    if unit not in LENGTH_UNITS:
        raise ValueError(f"unit must be one of {LENGTH_UNITS}, got {unit!r}")
    out = np.full(len(texts), np.nan)
    for i, t in enumerate(texts):
        if t is None or (isinstance(t, float) and math.isnan(t)):
            continue
        s = str(t)
        out[i] = len(s) if unit == "chars" else len(s.split())
    return out


def join_instruction(instruction: Any, input_: Any) -> str:
    """The instruction text a judge sees: the instruction, then a blank line and the input when
    there is one (Prometheus: "an instruction (might include an Input inside it)")."""
    from evalign.io.readers import is_missing

    ins = "" if is_missing(instruction) else str(instruction)
    inp = "" if is_missing(input_) else str(input_)
    return f"{ins}\n\n{inp}" if inp.strip() else ins

