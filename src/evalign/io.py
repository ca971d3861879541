"""Reading and writing the item table.

The item table is a pandas DataFrame with one row per item x system and the columns
``id``, ``system``, ``instruction``, ``input``, ``reference`` (a string or a list of strings),
``response``, optional ``task`` and ``language``, human rating columns, and one column per
metric. Readers validate every row; an error names the file, the line (1-based; for CSV the
header is line 1, for Parquet and DataFrames the row number) and the field. Writers are atomic:
after an error or Ctrl-C the output path holds either the old file or the complete new one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.errors import InputError

#: canonical columns of the item table, in output order
CORE_FIELDS = ("id", "system", "instruction", "input", "reference", "response", "task", "language")
TEXT_FIELDS = ("instruction", "input", "response", "task", "language")
FORMATS = ("jsonl", "csv", "parquet")


def detect_format(path: str | Path) -> str:
    """``jsonl``, ``csv`` or ``parquet`` from the file suffix (``.json`` counts as JSONL)."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in ("jsonl", "json", "ndjson"):
        return "jsonl"
    if suffix in ("csv", "tsv"):
        return "csv"
    if suffix in ("parquet", "pq"):
        return "parquet"
    raise InputError(f"unknown file type '.{suffix}' (use .jsonl, .csv or .parquet)", file=str(path))


def _iter_records(path: Path, fmt: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each record of a file."""
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if fmt == "jsonl":
        with path.open("r", encoding="utf-8") as fh:
            first = fh.read(1)
            fh.seek(0)
            if first == "[":  # a JSON list
                try:
                    data = json.load(fh)
                except json.JSONDecodeError as e:
                    raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=e.lineno) from e
                for i, rec in enumerate(data):
                    if not isinstance(rec, dict):
                        raise InputError("each element must be a JSON object", file=str(path), line=i + 1)
                    yield i + 1, rec
                return
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"malformed JSON ({e.msg} at column {e.colno})", file=str(path), line=lineno) from e
                if not isinstance(rec, dict):
                    raise InputError("each line must be a JSON object", file=str(path), line=lineno)
                yield lineno, rec
    elif fmt == "csv":
        sep = "\t" if path.suffix.lower() == ".tsv" else ","
        try:
            df = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)
        except Exception as e:  # pandas raises several types
            raise InputError(f"cannot parse CSV ({e})", file=str(path)) from e
        for i, rec in enumerate(df.to_dict("records")):
            yield i + 2, {k: _csv_value(v) for k, v in rec.items()}
    else:
        try:
            df = pd.read_parquet(path)
        except Exception as e:
            raise InputError(f"cannot read Parquet ({e})", file=str(path)) from e
        yield from _iter_frame(df)


def _iter_frame(df: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    for i, rec in enumerate(df.to_dict("records")):
        yield i + 1, {k: _unbox(v) for k, v in rec.items()}


def _unbox(v: Any) -> Any:
    if hasattr(v, "tolist") and not isinstance(v, str):
        return v.tolist()
    return v


def _csv_value(v: str) -> Any:
    # lists of references are written to CSV as JSON arrays
    if v.startswith("[") and v.endswith("]"):
        with contextlib.suppress(json.JSONDecodeError):
            parsed = json.loads(v)
            if isinstance(parsed, list):
                return parsed
    return v


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _validate(
    rec: dict[str, Any],
    *,
    file: str,
    line: int,
    fields: Mapping[str, str],
    human: Sequence[str],
    require_reference: bool,
    default_system: str | None,
    numeric_from_text: bool,
    frame: bool = False,
) -> dict[str, Any]:
    out = dict(rec)
    line_word = "row" if frame else "line"
    # rename source fields to canonical names
    for canon, src in fields.items():
        if src != canon and src in out:
            out[canon] = out.pop(src)

    def err(msg: str, field: str) -> InputError:
        return InputError(msg, file=file, line=line, field=fields.get(field, field), line_word=line_word)

    if _is_missing(out.get("system")) or out.get("system") == "":
        if default_system is None:
            raise err("missing field (or pass a default system name)", "system")
        out["system"] = default_system
    if _is_missing(out.get("id")) or out.get("id") == "":
        raise err("missing field", "id")
    if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
        raise err(f"must be a string or an integer, got {type(out['id']).__name__}", "id")
    out["id"] = str(out["id"])
    if not isinstance(out["system"], str):
        raise err(f"must be a string, got {type(out['system']).__name__}", "system")
    if "response" not in out or _is_missing(out["response"]):
        raise err("missing field", "response")
    for f in TEXT_FIELDS:
        if f in out and not _is_missing(out[f]) and not isinstance(out[f], str):
            raise err(f"must be a string, got {type(out[f]).__name__} ({out[f]!r:.40})", f)
    for f in ("instruction", "input"):
        if _is_missing(out.get(f)):
            out[f] = ""
    ref = out.get("reference")
    if _is_missing(ref):
        if require_reference:
            raise err("missing field", "reference")
        out["reference"] = None
    elif isinstance(ref, list):
        if not ref:
            raise err("empty list of references", "reference")
        for r in ref:
            if not isinstance(r, str):
                raise err(f"references must be strings, got {type(r).__name__}", "reference")
    elif not isinstance(ref, str):
        raise err(f"must be a string or a list of strings, got {type(ref).__name__}", "reference")
    for h in human:
        v = out.get(h)
        if h not in out:
            raise err("missing human rating field", h)
        if v is None or (frame and isinstance(v, float) and math.isnan(v)):
            out[h] = None
            continue  # a missing rating (null; NaN in a DataFrame or Parquet file)
        if numeric_from_text and isinstance(v, str):
            if v.strip() == "":
                out[h] = None
                continue
            try:
                v = float(v)
            except ValueError as e:
                raise err(f"must be a number, got {v!r:.40}", h) from e
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise err(f"must be a number, got {type(v).__name__} ({v!r:.40})", h)
        if isinstance(v, float) and not math.isfinite(v):
            raise err(f"must be a finite number, got {v}", h)
        out[h] = float(v)
    return out


def _records_to_table(
    records: Iterator[tuple[int, dict[str, Any]]],
    *,
    file: str,
    fields: Mapping[str, str] | None,
    human: Sequence[str],
    require_reference: bool,
    default_system: str | None,
    numeric_from_text: bool,
    frame: bool = False,
) -> pd.DataFrame:
    fmap = dict(fields or {})
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for line, rec in records:
        row = _validate(
            rec,
            file=file,
            line=line,
            fields=fmap,
            human=human,
            require_reference=require_reference,
            default_system=default_system,
            numeric_from_text=numeric_from_text,
            frame=frame,
        )
        key = (row["id"], row["system"])
        if key in seen:
            raise InputError(
                f"duplicate (id, system) = ({key[0]!r}, {key[1]!r}); first seen on line {seen[key]}",
                file=file,
                line=line,
                field=fmap.get("id", "id"),
                line_word="row" if frame else "line",
            )
        seen[key] = line
        rows.append(row)
    if not rows:
        raise InputError("no records", file=file)
    df = pd.DataFrame(rows)
    front = [c for c in CORE_FIELDS if c in df.columns]
    df = df[front + [c for c in df.columns if c not in front]]
    for h in human:
        df[h] = pd.to_numeric(df[h], errors="raise").astype(float)
    df.attrs["source"] = file
    return df.reset_index(drop=True)


def read_items(
    source: str | Path | pd.DataFrame,
    *,
    fields: Mapping[str, str] | None = None,
    human: Sequence[str] = (),
    require_reference: bool = False,
    default_system: str | None = None,
    format: str | None = None,
) -> pd.DataFrame:
    """Read and validate an item table from JSONL / JSON list / CSV / Parquet or a DataFrame.

    ``fields`` maps canonical names to source names (``{"response": "output"}``). ``human`` names
    numeric human rating columns (null = missing rating; NaN, text or bools are errors).
    ``require_reference`` makes a missing reference an error. ``default_system`` is used when a
    record has no ``system``. Raises :class:`~evalign.errors.InputError` naming file, line, field.
    """
    if isinstance(source, pd.DataFrame):
        name = str(source.attrs.get("source", "<DataFrame>"))
        return _records_to_table(
            _iter_frame(source),
            file=name,
            fields=fields,
            human=human,
            require_reference=require_reference,
            default_system=default_system,
            numeric_from_text=False,
            frame=True,
        )
    path = Path(source)
    fmt = format or detect_format(path)
    return _records_to_table(
        _iter_records(path, fmt),
        file=str(path),
        fields=fields,
        human=human,
        require_reference=require_reference,
        default_system=default_system,
        numeric_from_text=(fmt == "csv"),
        frame=(fmt == "parquet"),
    )


#: fields a pair table must have (see :func:`read_pairs`)
PAIR_REQUIRED = ("id", "instruction", "response_a", "response_b")


def read_pairs(source: str | Path | pd.DataFrame) -> pd.DataFrame:
    """Read and validate a pair table (JSONL / CSV / Parquet / DataFrame): columns ``id``,
    ``instruction``, ``response_a``, ``response_b``; optional ``input``, ``reference``,
    ``system_a`` / ``system_b`` (default ``"A"`` / ``"B"``) and any others (kept).
    Errors name the file, line and field."""
    if isinstance(source, pd.DataFrame):
        name = str(source.attrs.get("source", "<DataFrame>"))
        records = _iter_frame(source)
        word = "row"
    else:
        name = str(source)
        records = _iter_records(Path(source), detect_format(source))
        word = "row" if detect_format(source) == "parquet" else "line"
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for line, rec in records:
        out = dict(rec)
        for f in PAIR_REQUIRED:
            v = out.get(f)
            if f != "instruction" and (v is None or (isinstance(v, float) and math.isnan(v)) or (f == "id" and v == "")):
                raise InputError("missing field", file=name, line=line, line_word=word, field=f)
        if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
            raise InputError(f"must be a string or an integer, got {type(out['id']).__name__}", file=name,
                             line=line, line_word=word, field="id")
        out["id"] = str(out["id"])
        for f in ("instruction", "input", "response_a", "response_b", "system_a", "system_b"):
            v = out.get(f)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                out[f] = {"system_a": "A", "system_b": "B"}.get(f, "")
            elif not isinstance(v, str):
                raise InputError(f"must be a string, got {type(v).__name__}", file=name, line=line, line_word=word, field=f)
        ref = out.get("reference")
        if ref is not None and not (isinstance(ref, float) and math.isnan(ref)) and not isinstance(ref, str | list):
            raise InputError(f"must be a string or a list of strings, got {type(ref).__name__}", file=name,
                             line=line, line_word=word, field="reference")
        pid = str(out["id"])
        if pid in seen:
            raise InputError(f"duplicate id {pid!r}; first seen on line {seen[pid]}", file=name, line=line, line_word=word,
                             field="id")
        seen[pid] = line
        rows.append(out)
    if not rows:
        raise InputError("no records", file=name)
    df = pd.DataFrame(rows)
    df.attrs["source"] = name
    return df


def read_system_human(path: str | Path) -> dict[str, float]:
    """System-level human values from JSON (``{system: value}``, or an object whose one nested object
    is that mapping, e.g. ``{"description": ..., "ranks": {...}}``) or CSV
    (columns ``system`` and one numeric column)."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if path.suffix.lower() == ".json":
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=e.lineno) from e
        nested = [v for v in obj.values() if isinstance(v, Mapping)] if isinstance(obj, Mapping) else []
        if len(nested) == 1:  # e.g. {"description": ..., "ranks": {system: rank}}
            obj = nested[0]
        if not isinstance(obj, Mapping):
            raise InputError("expected an object {system: value}", file=str(path))
        out = {}
        for k, v in obj.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
                raise InputError(f"must be a finite number, got {v!r:.40}", file=str(path), field=str(k))
            out[str(k)] = float(v)
        return out
    df = pd.read_csv(path)
    if "system" not in df.columns:
        raise InputError("needs a 'system' column", file=str(path), field="system")
    value_cols = [c for c in df.columns if c != "system" and pd.api.types.is_numeric_dtype(df[c])]
    if len(value_cols) != 1:
        raise InputError(f"needs exactly one numeric column besides 'system', found {value_cols}", file=str(path))
    return {str(s): float(v) for s, v in zip(df["system"], df[value_cols[0]], strict=True)}


def references_of(df: pd.DataFrame) -> list[list[str]]:
    """The references of each row as a list of strings (empty list when there is none)."""
    if "reference" not in df.columns:
        return [[] for _ in range(len(df))]
    out: list[list[str]] = []
    for r in df["reference"].tolist():
        if r is None or (isinstance(r, float) and math.isnan(r)):
            out.append([])
        elif isinstance(r, str):
            out.append([r])
        else:
            out.append([str(x) for x in r])
    return out


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically,
    on any error (or Ctrl-C) it is removed and ``path`` is untouched."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write a text file atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write a JSON file atomically (indented, UTF-8, NaN written as null)."""
    write_text_atomic(path, json.dumps(_json_safe(obj), indent=2, ensure_ascii=False) + "\n")


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if not math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str):  # numpy scalars
        try:
            return _json_safe(obj.item())
        except (ValueError, AttributeError):
            return obj
    return obj


def write_table(df: pd.DataFrame, path: str | Path, format: str | None = None) -> None:
    """Write the item table atomically as JSONL, CSV or Parquet (by suffix unless ``format``)."""
    fmt = format or detect_format(path)
    with atomic_path(path) as tmp:
        if fmt == "jsonl":
            with tmp.open("w", encoding="utf-8") as fh:
                for rec in df.to_dict("records"):
                    fh.write(json.dumps(_json_safe({k: _unbox(v) for k, v in rec.items()}), ensure_ascii=False))
                    fh.write("\n")
        elif fmt == "csv":
            out = df.copy()
            for c in out.columns:
                if out[c].map(lambda v: isinstance(v, list | tuple | dict)).any():
                    out[c] = out[c].map(lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, list | tuple | dict) else v)
            out.to_csv(tmp, index=False)
        else:
            out = df.copy()
            for c in out.columns:
                col = out[c]
                has_list = col.map(lambda v: isinstance(v, list | tuple)).any()
                has_str = col.map(lambda v: isinstance(v, str)).any()
                if has_list and has_str:  # mixed str / list (e.g. reference): store all as lists
                    out[c] = col.map(lambda v: [v] if isinstance(v, str) else v)
            out.to_parquet(tmp, index=False)
