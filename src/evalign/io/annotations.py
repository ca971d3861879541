"""Reading per-annotator labels in the Alt-Test's own format (Calderon et al. 2025's repository):
``{annotator: {item: label}}`` for the humans and ``{judge: {item: label}}`` (or one judge's
``{item: label}``) for the judges. A label is a string, a finite number or null (no label; NaN likewise); anything
else is an error naming the file and the field."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evalign.errors import InputError
from evalign.io.readers import json_loads


def _read(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", file=str(p)) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=str(p)) from None
    return json_loads(text, file=str(p), line=None)


def _labels(obj: Any, file: str, where: str) -> dict[str, Any]:
    """``{item: label}`` with every label a string, a number or null."""
    if not isinstance(obj, dict):
        raise InputError(f"expected an object {{item: label}}, got {type(obj).__name__}", file=file, field=where)
    for item, v in obj.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, str | int | float)):
            raise InputError(f"a label must be a string, a number or null, got {type(v).__name__}", file=file,
                             field=f"{where}.{item}" if where else str(item))
        if isinstance(v, float) and math.isinf(v):  # JSON's Infinity: not a rating (NaN reads as no label)
            raise InputError(f"a numeric label must be finite, got {v!r} (null: no label)", file=file,
                             field=f"{where}.{item}" if where else str(item))
    return obj


def read_annotations(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{annotator: {item: label}}`` from a JSON file (an annotator may label any subset of items)."""
    file = str(path)
    obj = _read(path)
    if not isinstance(obj, dict) or not obj:
        raise InputError("expected a JSON object {annotator: {item: label}}", file=file)
    return {str(a): _labels(v, file, str(a)) for a, v in obj.items()}


def read_judge_labels(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{judge: {item: label}}`` from a JSON file; a file holding one judge's ``{item: label}`` is
    that judge, named after the file (``gpt-4o.json`` -> ``gpt-4o``)."""
    file = str(path)
    obj = _read(path)
    if not isinstance(obj, dict) or not obj:
        raise InputError("expected a JSON object {judge: {item: label}} or {item: label}", file=file)
    nested = [isinstance(v, dict) for v in obj.values()]
    if all(nested):
        return {str(j): _labels(v, file, str(j)) for j, v in obj.items()}
    if any(nested):
        first = next(str(k) for k, v in obj.items() if not isinstance(v, dict))
        raise InputError("mixes judges ({judge: {item: label}}) and labels ({item: label})", file=file, field=first)
    return {Path(path).stem: _labels(obj, file, "")}


__all__ = ["read_annotations", "read_judge_labels"]
