"""Readers of item files: formats by suffix, UTF-8 text checks, and the record iterators of JSONL /
JSON / CSV / TSV / Parquet files and DataFrames (``(line, record)`` pairs, before validation).
See :mod:`evalign.io` for what the readers accept."""

from __future__ import annotations

import codecs
import contextlib
import csv
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeGuard

from evalign.errors import InputError, UsageError

if TYPE_CHECKING:
    import pandas as pd

#: canonical columns of the item table, in output order
CORE_FIELDS = ("id", "system", "instruction", "input", "reference", "response", "task", "language")
TEXT_FIELDS = ("instruction", "input", "response", "task", "language")
FORMATS = ("jsonl", "csv", "tsv", "parquet")
#: the path that means standard input (readers) or standard output (writers)
STDIO = "-"

_SURROGATE = re.compile("[\ud800-\udfff]")

#: the longest line (a JSONL record, a CSV row's line, a CSV cell) the readers accept, in bytes:
#: 64 MiB unless the environment variable ``EVALIGN_MAX_LINE_BYTES`` says otherwise. A longer one
#: is an error naming the file and line, not an unbounded read into memory.
DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024


def max_line_bytes() -> int:
    """The line / cell size limit in force (:data:`DEFAULT_MAX_LINE_BYTES` or the environment's)."""
    raw = os.environ.get("EVALIGN_MAX_LINE_BYTES", "").strip()
    if not raw:
        return DEFAULT_MAX_LINE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise UsageError(f"EVALIGN_MAX_LINE_BYTES={raw!r}: must be a whole number of bytes >= 1")
    return value


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


def check_text(s: str, *, file: str, line: int, field: str, line_word: str) -> None:
    """Reject a lone surrogate in ``s`` (it is not Unicode text and cannot be written as UTF-8)."""
    if s.isascii():
        return
    m = _SURROGATE.search(s)
    if m is not None:
        raise InputError(f"lone surrogate {m.group()!a} at character {m.start() + 1} is not valid Unicode text "
                         "(evalign does not replace it; fix the text)", file=file, line=line, field=field,
                         line_word=line_word)


def check_value_text(v: Any, *, file: str, line: int, field: str, line_word: str) -> None:
    """:func:`check_text` on every string inside ``v`` (lists and dicts walked without recursion)."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            check_text(x, file=file, line=line, field=field, line_word=line_word)
        elif isinstance(x, dict):
            for k, y in x.items():
                if isinstance(k, str):
                    check_text(k, file=file, line=line, field=field, line_word=line_word)
                stack.append(y)
        elif isinstance(x, list | tuple):
            stack.extend(x)


def binary_stream(path: Path) -> IO[bytes]:
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


def bounded_lines(fh: IO[bytes], file: str) -> Iterator[bytes]:
    """The raw lines of a byte stream, each read with at most :func:`max_line_bytes` (+ its
    newline) in memory: a longer line is an :class:`InputError` naming the file and the line."""
    limit = max_line_bytes()
    lineno = 0
    while raw := fh.readline(limit + 1):
        lineno += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            raise InputError(f"a line longer than {limit:,} bytes (the readers' limit; set EVALIGN_MAX_LINE_BYTES to "
                             "read longer lines)", file=file, line=lineno)
        yield raw


def decoded_lines(fh: IO[bytes], file: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of a UTF-8 stream (lines bounded as :func:`bounded_lines`); the
    BOM is skipped; invalid UTF-8 is an :class:`InputError` naming the line and the 1-based
    character column."""
    for lineno, raw in enumerate(bounded_lines(fh, file), start=1):
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


def quoted_fields(raw: str, sep: str) -> list[bool]:
    """Whether each field of one CSV record (``raw``: its text, line breaks included) is quoted, so
    that a quoted empty field (``""``: an empty text) is told from an empty cell (missing)."""
    out: list[bool] = []
    i, n = 0, len(raw)
    while True:
        quoted = i < n and raw[i] == '"'
        out.append(quoted)
        if quoted:
            i += 1
            while i < n:
                if raw[i] == '"':
                    if i + 1 < n and raw[i + 1] == '"':
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        while i < n and raw[i] != sep and raw[i] not in "\r\n":
            i += 1
        if i >= n or raw[i] != sep:
            return out
        i += 1


def iter_csv(fh: IO[bytes], file: str, sep: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Records of a CSV/TSV stream: empty cells and cells absent from short rows are missing (None),
    a quoted empty cell (``""``) is an empty text; a row with more cells than the header is an error."""
    csv.field_size_limit(max_line_bytes())
    lines = decoded_lines(fh, file)
    state = {"line": 0}
    raw: list[str] = []

    def text_lines() -> Iterator[str]:
        for lineno, text in lines:
            state["line"] = lineno
            raw.append(text)
            yield text

    reader = csv.reader(text_lines(), delimiter=sep)
    header: list[str] | None = None
    start = 1
    try:
        for row in reader:
            row_line, start = start, state["line"] + 1
            text = "".join(raw)
            raw.clear()
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
            quoted = quoted_fields(text, sep) if "" in row else []
            rec = {h: (row[i] if i < len(row) and (row[i] != "" or (i < len(quoted) and quoted[i])) else None)
                   for i, h in enumerate(header)}
            yield row_line, rec
    except csv.Error as e:
        if "field larger than field limit" in str(e):
            raise InputError(f"a cell longer than {max_line_bytes():,} characters (the readers' limit; set "
                             "EVALIGN_MAX_LINE_BYTES to read longer cells)", file=file, line=start) from None
        raise InputError(f"cannot parse CSV ({e})", file=file, line=state["line"]) from None


def iter_records(path: Path, fmt: str, meta: dict[str, Any] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for each record of a file (``-`` = standard input, JSONL).
    ``meta`` receives ``line_word`` (how positions are named) and ``json_key`` where it applies."""
    meta = {} if meta is None else meta
    file = "<stdin>" if str(path) == STDIO else str(path)
    if fmt == "parquet":
        meta["line_word"] = "row"
        yield from iter_frame(read_parquet_frame(path, file))
        return
    fh = binary_stream(path)
    try:
        if fmt == "jsonl":
            yield from _iter_json(fh, file, meta)
        else:
            yield from iter_csv(fh, file, "\t" if fmt == "tsv" else ",")
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()


def read_parquet_frame(path: Path, file: str) -> pd.DataFrame:
    """A Parquet file as a DataFrame; a missing file or one pyarrow cannot read is an
    :class:`InputError` naming ``file``."""
    binary_stream(path).close()
    try:
        import pandas as pd  # pandas is imported where a table is built, not at every command's start

        return pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several types
        raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=file) from None


def parquet_columns(path: Path, file: str) -> list[str]:
    """The column names of a Parquet file (its schema only is read); a missing file or one pyarrow
    cannot read is an :class:`InputError` naming ``file``."""
    binary_stream(path).close()
    try:
        import pyarrow.parquet as pq

        return [str(c) for c in pq.ParquetFile(path).schema_arrow.names]
    except Exception as e:  # pyarrow raises several types
        raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=file) from None


def parquet_parts(path: Path, file: str, columns: list[str], rows: int
                  ) -> list[Callable[[], Iterator[tuple[int, pd.DataFrame]]]]:
    """A Parquet file's ``columns`` in parts, one per row group: each part a callable giving, each time
    it is called, the row group's rows as DataFrames of at most ``rows`` rows, read batch by batch
    (memory: one batch, not the file), with the row number (1-based, in the file) of each one's first
    row. Parts may be read in any order, by any process (each reads on one thread: parallelism is the
    caller's, part by part). A file pyarrow cannot read is an
    :class:`InputError` naming ``file`` (and the first row of the batch that failed)."""
    binary_stream(path).close()
    try:
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    except Exception as e:  # pyarrow raises several types
        raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=file) from None

    def part(g: int, first: int) -> Callable[[], Iterator[tuple[int, pd.DataFrame]]]:
        def batches() -> Iterator[tuple[int, pd.DataFrame]]:
            at = first
            try:
                it = pq.ParquetFile(path).iter_batches(batch_size=max(1, int(rows)), row_groups=[g], columns=columns,
                                                       use_threads=False)  # parts are read in parallel instead
                for batch in it:
                    yield at, batch.to_pandas(split_blocks=True)  # a block a column: no copy into 2-D blocks
                    at += batch.num_rows
            except Exception as e:  # pyarrow raises several types
                raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=file, line=at) from None

        return batches

    starts = list(itertools.accumulate(sizes, initial=1))
    return [part(g, starts[g]) for g in range(len(sizes))]


def iter_frame(df: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    if df.columns.duplicated().any():
        dup = str(df.columns[df.columns.duplicated()][0])
        raise InputError(f"duplicate column '{dup}'", file=str(df.attrs.get("source", "<DataFrame>")))
    cols = [str(c) for c in df.columns]
    for i, values in enumerate(df.itertuples(index=False, name=None), start=1):
        yield i, {c: unbox(v) for c, v in zip(cols, values, strict=True)}


def unbox(v: Any) -> Any:
    """A DataFrame cell as a plain Python value; NaN, ``pd.NA``, ``NaT`` and None are None."""
    if v is None or pandas_na(v):
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


def csv_value(v: Any) -> Any:
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


def is_missing(v: Any) -> bool:
    """Whether ``v`` is a missing value: None, NaN, ``pd.NA`` or ``NaT``."""
    return v is None or pandas_na(v) or (isinstance(v, float) and math.isnan(v))


def pandas_na(v: Any) -> bool:
    """Whether ``v`` is pandas' ``NA`` or ``NaT`` (without importing pandas: when it is not loaded,
    nothing is either)."""
    pd = sys.modules.get("pandas")
    return pd is not None and (v is pd.NA or v is pd.NaT)


def is_frame(v: Any) -> TypeGuard[pd.DataFrame]:
    """Whether ``v`` is a pandas DataFrame (without importing pandas)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(v, pd.DataFrame)
