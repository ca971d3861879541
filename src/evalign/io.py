"""Reading and writing the item table.

The item table is a pandas DataFrame with one row per item x system and the columns
``id``, ``system``, ``instruction``, ``input``, ``reference`` (a string or a list of strings),
``response``, optional ``task`` and ``language``, human rating columns, and one column per
metric. Readers validate every row; an error names the file, the line (1-based; for CSV the
header is line 1; ``record N`` for the N-th element of a JSON list; ``row N`` for Parquet files
and DataFrames), the 1-based character column where it helps, and the field.

What the readers accept and how they decide:

* **Formats by suffix**: ``.jsonl`` / ``.json`` / ``.ndjson`` (one object per line, or one JSON
  list of objects, or one object holding the list, see below), ``.csv``, ``.tsv`` (tab-separated),
  ``.parquet`` / ``.pq``. ``-`` reads JSONL from standard input.
* **Text**: UTF-8 only; a UTF-8 byte-order mark is skipped; invalid UTF-8 is an error naming the
  line and column. A lone UTF-16 surrogate (e.g. the JSON escape ``"\\ud800"``) is not text and
  is **rejected** with its place: evalign never replaces characters silently.
* **A JSON object that holds the records** (``{"items": [{...}, ...]}``): when the whole file is
  one object, has none of the fields ``id``/``system``/``response``, and exactly one of its keys
  holds a list of objects, the records are read from that key (``attrs["json_key"]`` says which);
  with several such keys the error names them.
* **Missing is never a value**: ``null``, an empty CSV cell, a cell absent from a short CSV row,
  and NaN / ``pd.NA`` / ``None`` / ``NaT`` in a DataFrame are all *missing*; a required field that
  is missing is an error (or the row is skipped and counted with ``on_invalid="skip"``).
  Booleans are not numbers and numbers are not text.
* **Field mappings** (``fields={"response": "output"}``) read only the named source field: a
  record without ``output`` has a missing response even if it has a ``response`` field.

Writers are atomic: after an error, Ctrl-C or SIGTERM (the command line turns SIGTERM into an
exit) the output path holds either the old file or the complete new one. A new file gets the
permissions of the user's umask; an overwritten file keeps its mode. Errors name the output
path, never the temporary file. ``-`` writes JSONL to standard output.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import datetime as _dt
import decimal
import json
import math
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

from evalign.errors import InputError, OutputError, UsageError, did_you_mean

#: canonical columns of the item table, in output order
CORE_FIELDS = ("id", "system", "instruction", "input", "reference", "response", "task", "language")
TEXT_FIELDS = ("instruction", "input", "response", "task", "language")
FORMATS = ("jsonl", "csv", "tsv", "parquet")
#: the path that means standard input (readers) or standard output (writers)
STDIO = "-"

_SURROGATE = re.compile("[\ud800-\udfff]")


def detect_format(path: str | Path, *, output: bool = False) -> str:
    """``jsonl``, ``csv``, ``tsv`` or ``parquet`` from the file suffix (``.json`` and ``.ndjson``
    count as JSONL; ``-`` is JSONL on standard input or output). Unknown suffix: :class:`UsageError`."""
    if str(path) == STDIO:
        return "jsonl"
    if not output and Path(path).is_dir():
        raise InputError("is a directory, not a file", file=str(path))
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix in ("jsonl", "json", "ndjson"):
        return "jsonl"
    if suffix in ("csv", "tsv"):
        return suffix
    if suffix in ("parquet", "pq"):
        return "parquet"
    what = "output" if output else "file"
    shown = f"'.{suffix}'" if suffix else "(no suffix)"
    raise UsageError(f"{path}: unknown {what} type {shown} (use .jsonl, .json, .csv, .tsv or .parquet, or - for "
                     f"{'standard output' if output else 'standard input'})")


def _check_text(s: str, *, file: str, line: int, field: str, line_word: str) -> None:
    """Reject a lone surrogate in ``s`` (it is not Unicode text and cannot be written as UTF-8)."""
    if s.isascii():
        return
    m = _SURROGATE.search(s)
    if m is not None:
        raise InputError(f"lone surrogate {m.group()!a} at character {m.start() + 1} is not valid Unicode text "
                         "(evalign does not replace it; fix the text)", file=file, line=line, field=field,
                         line_word=line_word)


def _check_value_text(v: Any, *, file: str, line: int, field: str, line_word: str) -> None:
    """:func:`_check_text` on every string inside ``v`` (lists and dicts walked without recursion)."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            _check_text(x, file=file, line=line, field=field, line_word=line_word)
        elif isinstance(x, dict):
            for k, y in x.items():
                if isinstance(k, str):
                    _check_text(k, file=file, line=line, field=field, line_word=line_word)
                stack.append(y)
        elif isinstance(x, list | tuple):
            stack.extend(x)


def _binary_stream(path: Path) -> IO[bytes]:
    if str(path) == STDIO:
        return sys.stdin.buffer
    if path.is_dir():
        raise InputError("is a directory, not a file", file=str(path))
    if not path.exists():
        raise InputError("no such file", file=str(path))
    try:
        return path.open("rb")
    except OSError as e:
        raise InputError(f"cannot open ({e.strerror})", file=str(path)) from None


def decoded_lines(fh: IO[bytes], file: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of a UTF-8 stream; the BOM is skipped; invalid UTF-8 is an
    :class:`InputError` naming the line and the 1-based character column."""
    for lineno, raw in enumerate(fh, start=1):
        if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as e:
            col = len(raw[: e.start].decode("utf-8")) + 1
            raise InputError(f"not valid UTF-8 (byte 0x{raw[e.start]:02x}); evalign reads UTF-8 text only",
                             file=file, line=lineno, column=col) from None


def json_loads(text: str, *, file: str, line: int | None) -> Any:
    try:
        return json.loads(text if line is None else text.rstrip("\r\n"))
    except json.JSONDecodeError as e:
        if line is None:  # a whole document: the decoder's own line and column
            raise InputError(f"malformed JSON ({e.msg})", file=file, line=e.lineno, column=e.colno) from None
        raise InputError(f"malformed JSON ({e.msg})", file=file, line=line, column=e.pos + 1) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", file=file, line=line) from None


def _unwrap_object(obj: dict[str, Any], file: str) -> tuple[str, list[Any]] | None:
    """The records of a ``{"<key>": [{...}, ...]}`` file, or None when ``obj`` looks like a record."""
    if any(k in obj for k in ("id", "system", "response", "response_a")):
        return None
    keys = [k for k, v in obj.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
    if len(keys) == 1:
        return keys[0], obj[keys[0]]
    if len(keys) > 1:
        raise InputError(f"one JSON object holding several lists of records ({', '.join(map(repr, keys))}); "
                         "write the records of one of them as JSONL or as a JSON list", file=file)
    return None


def _iter_json(fh: IO[bytes], file: str, meta: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Records of a JSONL stream, a JSON list, or a JSON object holding the list."""
    lines = decoded_lines(fh, file)
    buffered: list[tuple[int, str]] = []
    first = ""
    for lineno, text in lines:
        buffered.append((lineno, text))
        if text.strip():
            first = text.lstrip()[0]
            break
    if not first:
        return
    if first == "[" or (first == "{" and not complete_json_line(buffered[-1][1])):
        # one JSON document (a list, or an object over several lines)
        doc_text = "".join(t for _, t in buffered) + "".join(t for _, t in lines)
        doc = json_loads(doc_text, file=file, line=None)
        if isinstance(doc, dict):
            unwrapped = _unwrap_object(doc, file)
            if unwrapped is None:
                yield buffered[-1][0], doc
                return
            meta["json_key"], doc = unwrapped
        if not isinstance(doc, list):
            raise InputError(f"expected JSON objects (one per line) or a JSON list of objects, got {type(doc).__name__}",
                             file=file, line=buffered[-1][0])
        meta["line_word"] = "record"
        for i, rec in enumerate(doc, start=1):
            if not isinstance(rec, dict):
                raise InputError(f"each element must be a JSON object, got {type(rec).__name__}", file=file, line=i,
                                 line_word="record")
            yield i, rec
        return
    pending: tuple[int, dict[str, Any]] | None = None
    n = 0
    for lineno, text in _chain(buffered, lines):
        if not text.strip():
            continue
        rec = json_loads(text, file=file, line=lineno)
        if not isinstance(rec, dict):
            raise InputError(f"each line must be a JSON object, got {type(rec).__name__}", file=file, line=lineno)
        n += 1
        if n == 1:  # held back: a file of one object may be {"items": [...]}
            pending = (lineno, rec)
            continue
        if pending is not None:
            yield pending
            pending = None
        yield lineno, rec
    if pending is not None:
        unwrapped = _unwrap_object(pending[1], file) if n == 1 else None
        if unwrapped is None:
            yield pending
            return
        meta["json_key"], records = unwrapped
        meta["line_word"] = "record"
        yield from enumerate(records, start=1)


def _chain(first: list[tuple[int, str]], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield from first
    yield from rest


def complete_json_line(text: str) -> bool:
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text.rstrip().endswith("}")  # a broken one-line record: report it as JSONL
    return True


def iter_csv(fh: IO[bytes], file: str, sep: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Records of a CSV/TSV stream: empty cells and cells absent from short rows are missing (None);
    a row with more cells than the header is an error."""
    csv.field_size_limit(2**31 - 1)
    lines = decoded_lines(fh, file)
    state = {"line": 0}

    def text_lines() -> Iterator[str]:
        for lineno, text in lines:
            state["line"] = lineno
            yield text

    reader = csv.reader(text_lines(), delimiter=sep)
    header: list[str] | None = None
    start = 1
    try:
        for row in reader:
            row_line, start = start, state["line"] + 1
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if header is None:
                header = [h.strip() for h in row]
                seen: set[str] = set()
                for i, h in enumerate(header, start=1):
                    if not h:
                        raise InputError(f"empty column name in the header (column {i})", file=file, line=row_line)
                    if h in seen:
                        raise InputError(f"duplicate column name '{h}' in the header", file=file, line=row_line)
                    seen.add(h)
                continue
            if len(row) > len(header):
                raise InputError(f"{len(row)} cells but the header has {len(header)} columns", file=file,
                                 line=row_line)
            rec = {h: (row[i] if i < len(row) and row[i] != "" else None) for i, h in enumerate(header)}
            yield row_line, rec
    except csv.Error as e:
        raise InputError(f"cannot parse CSV ({e})", file=file, line=state["line"]) from None


def iter_records(path: Path, fmt: str, meta: dict[str, Any] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each record of a file (``-`` = standard input, JSONL).
    ``meta`` receives ``line_word`` (how positions are named) and ``json_key`` where it applies."""
    meta = {} if meta is None else meta
    file = "<stdin>" if str(path) == STDIO else str(path)
    if fmt == "parquet":
        meta["line_word"] = "row"
        _binary_stream(path).close()
        try:
            df = pd.read_parquet(path)
        except Exception as e:  # pyarrow raises several types
            raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=file) from None
        yield from _iter_frame(df)
        return
    fh = _binary_stream(path)
    try:
        if fmt == "jsonl":
            yield from _iter_json(fh, file, meta)
        else:
            yield from iter_csv(fh, file, "\t" if fmt == "tsv" else ",")
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def _iter_frame(df: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    if df.columns.duplicated().any():
        dup = str(df.columns[df.columns.duplicated()][0])
        raise InputError(f"duplicate column '{dup}'", file=str(df.attrs.get("source", "<DataFrame>")))
    cols = [str(c) for c in df.columns]
    for i, values in enumerate(df.itertuples(index=False, name=None), start=1):
        yield i, {c: unbox(v) for c, v in zip(cols, values, strict=True)}


def unbox(v: Any) -> Any:
    """A DataFrame cell as a plain Python value; NaN, ``pd.NA``, ``NaT`` and None are None."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if isinstance(v, str | int | bool):
        return v
    if hasattr(v, "tolist") and not isinstance(v, str):
        v = v.tolist()
        if isinstance(v, float) and math.isnan(v):
            return None
        return v
    return v


def _csv_value(v: Any) -> Any:
    """A CSV cell of a column that may hold lists (references, extra columns): the writers store
    lists as JSON arrays. Text fields (response, instruction, ...) are never parsed."""
    if not isinstance(v, str):
        return v
    if v.startswith("[") and v.endswith("]"):
        with contextlib.suppress(json.JSONDecodeError, RecursionError):
            parsed = json.loads(v)
            if isinstance(parsed, list):
                return parsed
    return v


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and math.isnan(v))


@dataclass(frozen=True)
class _Where:
    """Where a record was read (its errors name the file, line and source field)."""

    rec: Mapping[str, Any]
    file: str
    line: int
    fields: Mapping[str, str]
    line_word: str = "line"

    def err(self, msg: str, field: str) -> InputError:
        return InputError(msg, file=self.file, line=self.line, field=self.fields.get(field, field),
                          line_word=self.line_word)

    def missing(self, field: str, extra: str = "") -> InputError:
        src = self.fields.get(field, field)
        rec, fields = self.rec, self.fields
        return self.err(f"missing{extra}{did_you_mean(src, [k for k in rec if k not in fields.values()]) if src not in rec else ''}",
                        field)


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
    line_word: str = "line",
    check_text: bool = True,
) -> dict[str, Any]:
    where = _Where(rec, file, line, fields, line_word)
    out = dict(rec)
    # rename source fields to canonical names; a mapped field that is absent is missing
    for canon, src in fields.items():
        if src != canon:
            out.pop(canon, None)  # only the named source field is read
            out[canon] = out.pop(src, None)
    if numeric_from_text:  # CSV: lists were written as JSON arrays, except in the text fields
        for k, v in out.items():
            if k not in TEXT_FIELDS and k not in ("id", "system") and k not in human:
                out[k] = _csv_value(v)
    if check_text:
        for k, v in out.items():
            if not isinstance(v, int | float | bool) and v is not None:
                _check_value_text(v, file=file, line=line, field=fields.get(k, k), line_word=line_word)
    _validate_core(out, where, default_system)
    _validate_reference(out, where, require_reference)
    for h in human:
        if h not in out:
            raise where.err(f"missing human rating field{did_you_mean(h, rec)}", h)
        if line_word != "row" and isinstance(out[h], float) and math.isnan(out[h]):  # JSON's NaN literal
            raise where.err("must be a finite number, got nan (write null for a missing rating)", h)
        out[h] = parse_number(out[h], from_text=numeric_from_text, file=file, line=line, field=h, line_word=line_word)
    return out


def _validate_core(out: dict[str, Any], where: _Where, default_system: str | None) -> None:
    """``system``, ``id``, ``response`` and the text fields of a renamed record, checked (in place)."""
    if _is_missing(out.get("system")) or out.get("system") == "":
        if default_system is None:
            raise where.missing("system", " (or pass a default system name)")
        out["system"] = default_system
    if _is_missing(out.get("id")) or out.get("id") == "":
        raise where.missing("id")
    if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
        raise where.err(f"must be a string or an integer, got {type(out['id']).__name__}", "id")
    out["id"] = str(out["id"])
    if not isinstance(out["system"], str):
        raise where.err(f"must be a string, got {type(out['system']).__name__}", "system")
    if _is_missing(out.get("response")):
        raise where.missing("response")
    for f in TEXT_FIELDS:
        if f in out and not _is_missing(out[f]) and not isinstance(out[f], str):
            raise where.err(f"must be a string, got {type(out[f]).__name__} ({out[f]!r:.40})", f)
    for f in ("instruction", "input"):
        if _is_missing(out.get(f)):
            out[f] = ""
    for f in ("task", "language"):
        if f in out and _is_missing(out[f]):
            out[f] = None


def _validate_reference(out: dict[str, Any], where: _Where, require_reference: bool) -> None:
    """``reference``: a string or a non-empty list of strings (None when missing and not required)."""
    ref = out.get("reference")
    if _is_missing(ref):
        if require_reference:
            raise where.missing("reference")
        out["reference"] = None
    elif isinstance(ref, list):
        if not ref:
            raise where.err("empty list of references", "reference")
        for r in ref:
            if not isinstance(r, str):
                raise where.err(f"references must be strings, got {type(r).__name__}", "reference")
    elif not isinstance(ref, str):
        raise where.err(f"must be a string or a list of strings, got {type(ref).__name__}", "reference")


def parse_number(
    v: Any,
    *,
    from_text: bool = False,
    file: str | None = None,
    line: int | None = None,
    field: str | None = None,
    line_word: str = "line",
) -> float:
    """A human rating or metric value as a float: None / NaN / ``pd.NA`` (and an empty text when
    ``from_text``) are missing (NaN); ints and finite floats are taken; numeric text only when
    ``from_text`` (CSV cells). Booleans, other text and infinities raise :class:`InputError` naming
    ``file``, ``line`` and ``field``."""

    def bad(msg: str) -> InputError:
        return InputError(msg, file=file, line=line, field=field, line_word=line_word)

    if _is_missing(v):
        return math.nan
    if from_text and isinstance(v, str):
        if not v.strip():
            return math.nan
        try:
            v = float(v)
        except ValueError:
            raise bad(f"must be a number, got {v!r:.40}") from None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise bad(f"must be a number, got {type(v).__name__} ({v!r:.40})")
    if isinstance(v, float) and not math.isfinite(v):
        raise bad(f"must be a finite number, got {v}")
    return float(v)


def records_to_table(
    records: Iterable[tuple[int, dict[str, Any]]],
    *,
    file: str,
    fields: Mapping[str, str] | None,
    human: Sequence[str],
    require_reference: bool,
    default_system: str | None,
    numeric_from_text: bool,
    meta: dict[str, Any],
    on_invalid: str = "error",
) -> pd.DataFrame:
    if on_invalid not in ("error", "skip"):
        raise ValueError(f"on_invalid must be 'error' or 'skip', not {on_invalid!r}")
    fmap = dict(fields or {})
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for line, rec in records:
        word = meta.get("line_word", "line")
        try:
            row = _validate(rec, file=file, line=line, fields=fmap, human=human, require_reference=require_reference,
                            default_system=default_system, numeric_from_text=numeric_from_text, line_word=word)
            key = (row["id"], row["system"])
            if key in seen:
                raise InputError(f"duplicate (id, system) = ({key[0]!r}, {key[1]!r}); first seen on {word} {seen[key]}",
                                 file=file, line=line, field=fmap.get("id", "id"), line_word=word)
        except InputError as e:
            if on_invalid == "error":
                raise
            skipped.append(str(e))
            continue
        seen[key] = line
        rows.append(row)
    if not rows:
        raise InputError("no records" + (f" ({len(skipped)} invalid ones skipped; first: {skipped[0]})" if skipped else ""),
                         file=file)
    df = pd.DataFrame(rows)
    front = [c for c in CORE_FIELDS if c in df.columns]
    df = df[front + [c for c in df.columns if c not in front]]
    for h in human:
        df[h] = df[h].astype(float)
    df = df.reset_index(drop=True)
    df.attrs["source"] = file
    df.attrs["skipped"] = skipped
    if "json_key" in meta:
        df.attrs["json_key"] = meta["json_key"]
    return df


def read_items(
    source: str | Path | pd.DataFrame,
    *,
    fields: Mapping[str, str] | None = None,
    human: Sequence[str] = (),
    require_reference: bool = False,
    default_system: str | None = None,
    format: str | None = None,
    on_invalid: str = "error",
) -> pd.DataFrame:
    """Read and validate an item table from JSONL / JSON list / CSV / TSV / Parquet, standard input
    (``"-"``, JSONL) or a DataFrame (see the module docstring for what is accepted).

    ``fields`` maps canonical names to source names (``{"response": "output"}``). ``human`` names
    numeric human rating columns (missing = NaN; text, booleans and infinities are errors).
    ``require_reference`` makes a missing reference an error. ``default_system`` is used when a
    record has no ``system``. ``on_invalid="skip"`` leaves out rows that fail validation instead of
    raising; their messages are in ``df.attrs["skipped"]``. Raises
    :class:`~evalign.errors.InputError` naming file, line, field.
    """
    meta: dict[str, Any] = {}
    if isinstance(source, pd.DataFrame):
        meta["line_word"] = "row"
        return records_to_table(_iter_frame(source), file=str(source.attrs.get("source", "<DataFrame>")), fields=fields,
                                 human=human, require_reference=require_reference, default_system=default_system,
                                 numeric_from_text=False, meta=meta, on_invalid=on_invalid)
    path = Path(source) if str(source) != STDIO else Path(STDIO)
    fmt = format or detect_format(source)
    return records_to_table(iter_records(path, fmt, meta), file=_display(source), fields=fields, human=human,
                             require_reference=require_reference, default_system=default_system,
                             numeric_from_text=fmt in ("csv", "tsv"), meta=meta, on_invalid=on_invalid)


def _display(source: str | Path) -> str:
    return "<stdin>" if str(source) == STDIO else str(source)


#: fields a pair table must have (see :func:`read_pairs`)
PAIR_REQUIRED = ("id", "instruction", "response_a", "response_b")
#: text fields of a pair table (never parsed as JSON in CSV files)
PAIR_TEXT_FIELDS = ("id", "instruction", "input", "response_a", "response_b", "system_a", "system_b")

_PREF_TEXT = {"+1": 1.0, "1": 1.0, "a": 1.0, "-1": -1.0, "2": -1.0, "b": -1.0, "0": 0.0, "tie": 0.0}


def parse_preference(v: Any) -> float:
    """A human preference label as evalign's code: +1 (A better), -1 (B better), 0 (tie), NaN
    (missing: None, NaN, empty text). Accepted: the numbers +1 / -1 / 0, the numbers 1 / 2 / 0
    (1 = A, 2 = B, 0 = tie), and the texts ``"+1"``, ``"1"``, ``"-1"``, ``"2"``, ``"0"``, ``"A"``,
    ``"B"``, ``"tie"`` (case and surrounding spaces ignored). Anything else (``"yes"``, 0.5, a
    boolean) raises :class:`ValueError`."""
    if _is_missing(v) or (isinstance(v, str) and not v.strip()):
        return math.nan
    if isinstance(v, bool):
        raise ValueError(f"a preference must be +1/-1/0, 1/2/0 or A/B/tie, got {v}")
    if isinstance(v, int | float):
        if v in (1, -1, 0, 2):
            return {1: 1.0, -1: -1.0, 0: 0.0, 2: -1.0}[int(v)]
    elif isinstance(v, str) and v.strip().lower() in _PREF_TEXT:
        return _PREF_TEXT[v.strip().lower()]
    raise ValueError(f"a preference must be +1/-1/0, 1/2/0 or A/B/tie, got {v!r:.40}")


def _validate_pair(rec: dict[str, Any], *, file: str, line: int, word: str, from_text: bool,
                   pref: Sequence[str]) -> dict[str, Any]:
    """One record of a pair table, checked and completed (see :func:`read_pairs`)."""

    def err(msg: str, field: str) -> InputError:
        return InputError(msg, file=file, line=line, line_word=word, field=field)

    out = dict(rec)
    if from_text:  # CSV: lists were written as JSON arrays, except in the text fields
        for k, v in out.items():
            if k not in PAIR_TEXT_FIELDS and k not in pref:
                out[k] = _csv_value(v)
    for k, v in out.items():
        if not isinstance(v, int | float | bool) and v is not None:
            _check_value_text(v, file=file, line=line, field=k, line_word=word)
    for f in PAIR_REQUIRED:
        v = out.get(f)
        if f != "instruction" and (_is_missing(v) or (f == "id" and v == "")):
            unused = [k for k in rec if k not in PAIR_REQUIRED]  # never suggest a field that is itself used
            raise err(f"missing{did_you_mean(f, unused) if f not in rec else ''}", f)
    if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
        raise err(f"must be a string or an integer, got {type(out['id']).__name__}", "id")
    out["id"] = str(out["id"])
    for f in ("instruction", "input", "response_a", "response_b", "system_a", "system_b"):
        v = out.get(f)
        if _is_missing(v):
            out[f] = {"system_a": "A", "system_b": "B"}.get(f, "")
        elif not isinstance(v, str):
            raise err(f"must be a string, got {type(v).__name__}", f)
    _pair_reference_and_preferences(out, rec, pref, err)
    return out


def _pair_reference_and_preferences(out: dict[str, Any], rec: Mapping[str, Any], pref: Sequence[str],
                                    err: Callable[[str, str], InputError]) -> None:
    """A pair's optional ``reference`` and its preference columns, checked and parsed (in place)."""
    ref = out.get("reference")
    if _is_missing(ref):
        out["reference"] = None
    elif not isinstance(ref, str | list) or (isinstance(ref, list) and not all(isinstance(r, str) for r in ref)):
        raise err(f"must be a string or a list of strings, got {type(ref).__name__}", "reference")
    for p in pref:
        if p not in out:
            raise err(f"missing preference column{did_you_mean(p, rec)}", p)
        try:
            out[p] = parse_preference(out[p])
        except ValueError as e:
            raise err(str(e), p) from None


def read_pairs(source: str | Path | pd.DataFrame, *, pref: Sequence[str] = ()) -> pd.DataFrame:
    """Read and validate a pair table (JSONL / CSV / TSV / Parquet / DataFrame / ``"-"``): columns
    ``id``, ``instruction``, ``response_a``, ``response_b``; optional ``input``, ``reference``,
    ``system_a`` / ``system_b`` (default ``"A"`` / ``"B"``) and any others (kept).

    ``pref`` names human preference columns: each must be present and is parsed strictly by
    :func:`parse_preference` into +1 / -1 / 0 / NaN (floats). Errors name the file, line and field."""
    meta: dict[str, Any] = {}
    if isinstance(source, pd.DataFrame):
        name = str(source.attrs.get("source", "<DataFrame>"))
        records: Iterable[tuple[int, dict[str, Any]]] = _iter_frame(source)
        meta["line_word"] = "row"
        from_text = False
    else:
        name = _display(source)
        fmt = detect_format(source)
        from_text = fmt in ("csv", "tsv")
        records = iter_records(Path(source), fmt, meta)
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for line, rec in records:
        word = meta.get("line_word", "line")
        out = _validate_pair(rec, file=name, line=line, word=word, from_text=from_text, pref=pref)
        pid = out["id"]
        if pid in seen:
            raise InputError(f"duplicate id {pid!r}; first seen on {word} {seen[pid]}", file=name, line=line,
                             line_word=word, field="id")
        seen[pid] = line
        rows.append(out)
    if not rows:
        raise InputError("no records", file=name)
    df = pd.DataFrame(rows)
    for p in pref:
        df[p] = df[p].astype(float)
    df.attrs["source"] = name
    if "json_key" in meta:
        df.attrs["json_key"] = meta["json_key"]
    return df


def read_system_human(path: str | Path) -> dict[str, float]:
    """System-level human values from JSON (``{system: value}``, or an object whose one nested object
    is that mapping, e.g. ``{"description": ..., "ranks": {...}}``) or CSV / TSV (columns ``system``
    and one numeric column; empty cells are errors: every listed system needs its value)."""
    file = _display(path)
    path = Path(path)
    if path.suffix.lower() == ".json":
        fh = _binary_stream(path)
        try:
            text = "".join(t for _, t in decoded_lines(fh, file))
        finally:
            fh.close()
        obj = json_loads(text, file=file, line=None)
        nested = [v for v in obj.values() if isinstance(v, Mapping)] if isinstance(obj, Mapping) else []
        if len(nested) == 1:  # e.g. {"description": ..., "ranks": {system: rank}}
            obj = nested[0]
        if not isinstance(obj, Mapping) or not obj:
            raise InputError("expected a non-empty object {system: value}", file=file)
        out = {}
        for k, v in obj.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
                raise InputError(f"must be a finite number, got {v!r:.40}", file=file, field=str(k))
            _check_text(str(k), file=file, line=None, field=str(k), line_word="line")  # type: ignore[arg-type]
            out[str(k)] = float(v)
        return out
    fmt = detect_format(path)
    if fmt not in ("csv", "tsv"):
        raise UsageError(f"{file}: system-level human values are read from .json, .csv or .tsv files")
    records = list(iter_records(path, fmt))
    if not records:
        raise InputError("no records", file=file)
    cols = list(records[0][1])
    if "system" not in cols:
        raise InputError(f"needs a 'system' column{did_you_mean('system', cols)}", file=file, field="system")
    value_cols = [c for c in cols if c != "system"]
    if len(value_cols) != 1:
        raise InputError(f"needs exactly one value column besides 'system', found {value_cols}", file=file)
    out = {}
    for line, rec in records:
        sysname = rec["system"]
        if sysname is None:
            raise InputError("missing", file=file, line=line, field="system")
        v = parse_number(rec[value_cols[0]], from_text=True, file=file, line=line, field=value_cols[0])
        if math.isnan(v):
            raise InputError("missing", file=file, line=line, field=value_cols[0])
        if sysname in out:
            raise InputError(f"duplicate system {sysname!r}", file=file, line=line, field="system")
        out[sysname] = v
    return out


def references_of(df: pd.DataFrame) -> list[list[str]]:
    """The references of each row as a list of strings (empty list when there is none: None, NaN,
    ``pd.NA``). A value that is neither text nor a list of texts raises :class:`InputError`."""
    if "reference" not in df.columns:
        return [[] for _ in range(len(df))]
    out: list[list[str]] = []
    for i, r in enumerate(df["reference"].tolist(), start=1):
        r = unbox(r)
        if r is None:
            out.append([])
        elif isinstance(r, str):
            out.append([r])
        elif isinstance(r, list | tuple) and all(isinstance(x, str) for x in r):
            out.append(list(r))
        else:
            raise InputError(f"must be a string or a list of strings, got {type(r).__name__}",
                             file=str(df.attrs.get("source", "<DataFrame>")), line=i, line_word="row", field="reference")
    return out


def responses_of(df: pd.DataFrame) -> list[str]:
    """The ``response`` column as a list of strings, checked: a missing column, a missing value
    (None, NaN, ``pd.NA``), a value that is not text or a lone surrogate raise :class:`InputError`
    naming the row. The strings are the table's own objects (no copy)."""
    source = str(df.attrs.get("source", "<DataFrame>"))
    if "response" not in df.columns:
        raise InputError(f"no 'response' column{did_you_mean('response', map(str, df.columns))}", file=source,
                         field="response")
    out = df["response"].tolist()
    for i, r in enumerate(out, start=1):
        if not isinstance(r, str):
            what = "missing" if _is_missing(r) else f"must be a string, got {type(r).__name__} ({r!r:.40})"
            raise InputError(what, file=source, line=i, line_word="row", field="response")
        _check_text(r, file=source, line=i, field="response", line_word="row")
    return out


def check_systems(df: pd.DataFrame) -> None:
    """Raise :class:`InputError` naming the first row whose ``system`` is missing (None, NaN,
    ``pd.NA``) or empty, so that no row is silently left out of system-level scores."""
    if "system" not in df.columns:
        raise InputError("no 'system' column", file=str(df.attrs.get("source", "<DataFrame>")), field="system")
    for i, v in enumerate(df["system"].tolist(), start=1):
        if _is_missing(v) or v == "":
            raise InputError("missing (every row needs a system to be counted in system-level scores)",
                             file=str(df.attrs.get("source", "<DataFrame>")), line=i, line_word="row", field="system")


# --- writing ----------------------------------------------------------------------------------


def check_output(path: str | Path, *, formats: Sequence[str] = FORMATS, stdout: bool = True) -> str:
    """Check an output path before any work and return its format.

    ``-`` means standard output (JSONL) when ``stdout``. A path ending in ``/`` or naming a
    directory, a suffix outside ``formats``, a parent that is a file, a folder without write
    permission and a read-only existing file are errors (:class:`UsageError` for what the path's
    text shows, :class:`OutputError` for what the file system says)."""
    text = str(path)
    if text == STDIO:
        if not stdout:
            raise UsageError("- (standard output) is not possible for this output")
        return "jsonl"
    p = Path(text).expanduser()
    if text.endswith(("/", os.sep)) or p.is_dir():
        raise OutputError(f"{text}: is a directory; give a file name, e.g. {p / 'scored.jsonl'}")
    fmt = detect_format(p, output=True)
    if fmt not in formats:
        raise UsageError(f"{text}: this output is written as {' / '.join('.' + f for f in formats)}, not .{fmt}")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"{text}: cannot create it, '{parent}' is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{text}: cannot write in '{parent}' (permission denied)")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{text}: the file is read-only")
    return fmt


def _new_file_mode(target: Path) -> int:
    """The mode a written file should get: the old file's, else 0o666 minus the umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically with the
    mode of the file it replaces (a new file: the umask's mode); on any error, Ctrl-C or an exit
    (the command line turns SIGTERM into one) it is removed and ``path`` is untouched. File-system
    errors are :class:`OutputError` naming ``path``, never the temporary file."""
    target = Path(path).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent))
        os.close(fd)
    except OSError as e:
        raise OutputError(f"{path}: cannot write ({e.strerror or e})") from None
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _new_file_mode(target))
        os.replace(tmp_path, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if isinstance(e, OSError) and not isinstance(e, FileNotFoundError | InterruptedError) and (
            e.filename is None or str(e.filename) in (str(tmp_path), str(target))
        ):
            raise OutputError(f"{path}: cannot write ({e.strerror or e})") from None
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write a text file atomically (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write a JSON file atomically (indented, UTF-8, NaN written as null)."""
    write_text_atomic(path, json.dumps(json_safe(obj), indent=2, ensure_ascii=False, default=json_default) + "\n")


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN / infinities as None and numpy scalars and arrays as Python values
    (lists and dicts walked without recursion, so deep nesting cannot overflow the stack)."""
    root: list[Any] = [obj]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, obj)]
    while stack:
        parent, key, v = stack.pop()
        if isinstance(v, float):
            parent[key] = None if not math.isfinite(v) else v
        elif isinstance(v, str | int | bool) or v is None:
            continue
        elif isinstance(v, dict):
            new_d: dict[str, Any] = {str(k): x for k, x in v.items()}
            parent[key] = new_d
            stack.extend((new_d, k, x) for k, x in new_d.items())
        elif isinstance(v, list | tuple):
            new_l = list(v)
            parent[key] = new_l
            stack.extend((new_l, i, x) for i, x in enumerate(new_l))
        elif v is pd.NA or v is pd.NaT:
            parent[key] = None
        elif hasattr(v, "tolist") and not isinstance(v, pd.Timestamp):  # numpy scalars and arrays
            try:
                parent[key] = v.tolist()
            except (ValueError, AttributeError):
                continue
            stack.append((parent, key, parent[key]))
    return root[0]


def json_default(v: Any) -> Any:
    """JSON for values the json module does not know: dates and times as ISO 8601 text, decimals
    as numbers, sets as sorted lists; anything else is a :class:`TypeError`."""
    if isinstance(v, _dt.datetime | _dt.date | _dt.time | pd.Timestamp):
        return v.isoformat()
    if isinstance(v, pd.Timedelta | _dt.timedelta):
        return pd.Timedelta(v).isoformat()
    if isinstance(v, decimal.Decimal):
        return float(v) if v.is_finite() else None
    if isinstance(v, set | frozenset):
        return sorted(v, key=str)
    raise TypeError(f"cannot write a {type(v).__name__} as JSON")


def _jsonl_lines(df: pd.DataFrame, path: str) -> Iterator[str]:
    cols = [str(c) for c in df.columns]
    for i, values in enumerate(df.itertuples(index=False, name=None), start=1):
        rec = dict(zip(cols, values, strict=True))
        try:
            yield json.dumps(json_safe(rec), ensure_ascii=False, default=json_default) + "\n"
        except (TypeError, ValueError, RecursionError) as e:
            col = next((c for c in cols if not _json_ok(rec[c])), None)
            raise OutputError(f"{path}: row {i}" + (f", column '{col}'" if col else "") + f": {e}") from None


def _json_ok(v: Any) -> bool:
    try:
        json.dumps(json_safe(v), default=json_default)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def write_table(df: pd.DataFrame, path: str | Path, format: str | None = None) -> None:
    """Write the item table atomically as JSONL, CSV, TSV or Parquet (by suffix unless ``format``);
    ``-`` writes JSONL to standard output. Dates and times are written as ISO 8601 text in JSONL.
    Errors are :class:`OutputError` naming ``path`` (and the row and column when one value is the
    cause)."""
    fmt = format or detect_format(path, output=True)
    if str(path) == STDIO:
        for line in _jsonl_lines(df, "<stdout>"):
            sys.stdout.write(line)
        sys.stdout.flush()
        return
    with atomic_path(path) as tmp:
        if fmt == "jsonl":
            try:
                with tmp.open("w", encoding="utf-8") as fh:
                    for line in _jsonl_lines(df, str(path)):
                        fh.write(line)
            except UnicodeEncodeError as e:
                raise OutputError(f"{path}: cannot encode {e.object[e.start:e.end]!a} as UTF-8") from None
        elif fmt in ("csv", "tsv"):
            out = df.copy()
            for c in out.columns:
                if out[c].map(lambda v: isinstance(v, list | tuple | dict)).any():
                    out[c] = out[c].map(lambda v: json.dumps(json_safe(v), ensure_ascii=False, default=json_default)
                                        if isinstance(v, list | tuple | dict) else v)
            try:
                out.to_csv(tmp, index=False, sep="\t" if fmt == "tsv" else ",")
            except UnicodeEncodeError as e:
                raise OutputError(f"{path}: cannot encode {e.object[e.start:e.end]!a} as UTF-8") from None
        else:
            out = df.copy()
            for c in out.columns:
                col = out[c]
                has_list = col.map(lambda v: isinstance(v, list | tuple)).any()
                has_str = col.map(lambda v: isinstance(v, str)).any()
                if has_list and has_str:  # mixed str / list (e.g. reference): store all as lists
                    out[c] = col.map(lambda v: [v] if isinstance(v, str) else v)
            try:
                out.to_parquet(tmp, index=False)
            except OSError:
                raise
            except Exception as e:  # pyarrow raises several types for values it cannot store
                raise OutputError(f"{path}: cannot write Parquet ({' '.join(str(e).split())[:300]})") from None


#: the former private names of the helpers above (other modules imported them; use the public names)
_iter_records = iter_records
_json_safe = json_safe
_json_default = json_default
_complete_json_line = complete_json_line
_decoded_lines = decoded_lines
_iter_csv = iter_csv
_json_loads = json_loads
_unbox = unbox
_records_to_table = records_to_table
