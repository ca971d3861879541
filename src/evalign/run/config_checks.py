"""The checks of a run config's values: where a value is (file, line, field) and what type it must
have; each failure a :class:`~evalign.errors.UsageError` naming the file, line and field."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalign.errors import UsageError, unknown_name
from evalign.io.yaml_files import MarkedList, MarkedMap


class Where:
    """Where a value is: the file, a section path and the marked container."""

    def __init__(self, file: str, section: str) -> None:
        self.file = file
        self.section = section

    def line_of(self, container: Any, key: Any) -> int | None:
        lines = getattr(container, "lines", None)
        if isinstance(container, MarkedMap) and lines is not None:
            return lines.get(key)
        if isinstance(container, MarkedList) and lines is not None and isinstance(key, int) and key < len(lines):
            return lines[key]
        return getattr(container, "line", None) or None

    def prefix(self, container: Any, key: Any = None) -> str:
        line = self.line_of(container, key)
        return f"{self.file}" + (f", line {line}" if line else "")

    def error(self, container: Any, key: Any, message: str) -> UsageError:
        name = f"{self.section}.{key}" if isinstance(key, str) and self.section else (
            key if isinstance(key, str) else f"{self.section}[{key + 1}]" if isinstance(key, int) else self.section)
        return UsageError(f"{self.prefix(container, key)}, field '{name}': {message}")

    def child(self, key: str | int) -> Where:
        part = f"[{key + 1}]" if isinstance(key, int) else (f".{key}" if self.section else key)
        return Where(self.file, f"{self.section}{part}")


def check_keys(m: Any, known: Sequence[str], where: Where) -> None:
    """Every key of mapping ``m`` must be one of ``known``: else a UsageError naming the file,
    line and key with a "did you mean"."""
    for key in m:
        if key not in known:
            err = unknown_name("key", key, known, where=where.prefix(m, key) + (
                f", in '{where.section}'" if where.section else ""))
            raise err


def mapping_of(v: Any, where: Where, parent: Any, key: Any) -> Mapping[str, Any]:
    """``v``, which must be a mapping."""
    if not isinstance(v, Mapping):
        raise where.error(parent, key, f"must be a mapping (key: value lines), got {kind_of(v)}")
    return v


def list_of(v: Any, where: Where, parent: Any, key: Any) -> Sequence[Any]:
    """``v``, which must be a list."""
    if not isinstance(v, list):
        raise where.error(parent, key, f"must be a list, got {kind_of(v)}")
    return v


def kind_of(v: Any) -> str:
    """What ``v`` is, in words (for a message)."""
    if v is None:
        return "nothing"
    return {dict: "a mapping", MarkedMap: "a mapping", list: "a list", MarkedList: "a list", bool: "true/false",
            int: "a number", float: "a number", str: f"the text {v!r:.40}"}.get(type(v), type(v).__name__)


def typed(m: Mapping[str, Any], key: str, types: tuple[type, ...], where: Where, default: Any = None,
           *, none_ok: bool = True) -> Any:
    """``m[key]`` (``default`` when absent), which must be one of ``types``."""
    if key not in m:
        return default
    v = m[key]
    if v is None and none_ok:
        return None
    ok = False if isinstance(v, bool) and bool not in types else isinstance(v, types)
    if not ok:
        want = " or ".join({str: "a text", int: "an integer", float: "a number", bool: "true or false",
                            dict: "a mapping", list: "a list"}.get(t, t.__name__) for t in types)
        raise where.error(m, key, f"must be {want}, got {kind_of(v)}")
    return v


def plain(v: Any) -> Any:
    """Marked containers as plain dicts and lists."""
    if isinstance(v, Mapping):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def path_of(v: str | None, base: Path) -> Path | None:
    """``v`` as a path, relative ones under ``base``."""
    if v is None:
        return None
    p = Path(os.path.expanduser(v))
    return (p if p.is_absolute() else base / p).resolve()


__all__ = ["Where", "check_keys", "kind_of", "list_of", "mapping_of", "path_of", "plain", "typed"]
