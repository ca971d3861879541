"""Cutting an item file into shards, and reading one shard back with the reader's own checks.

A shard is a run of consecutive records of one file, named by where it starts (a byte offset
and the 1-based line of its first record for JSONL and CSV; a row range for Parquet; a record
range for a JSON document). Planning reads the file once without parsing the records (CSV rows
are split by the csv module, which knows quoted newlines) and keeps nothing per row.
:func:`read_shard_records` gives a shard's ``(line, record)`` pairs numbered as in the whole file,
so :func:`evalign.io.read_items`' validation reports the same file / line / field. A JSON
document (a list of records, or one object holding them) cannot be cut by lines: each of its
shards parses the whole document (use JSONL or Parquet for large inputs).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.errors import InputError
from evalign.io import (
    bounded_lines,
    complete_json_line,
    decoded_lines,
    detect_format,
    iter_csv,
    iter_records,
    json_loads,
    max_line_bytes,
    unbox,
)


@dataclass(frozen=True)
class ShardSpec:
    """One shard: ``kind`` is ``lines`` (JSONL bytes ``start``-``stop``), ``csv`` (CSV/TSV bytes
    ``start``-``stop`` read after the header bytes ``0``-``header_stop``), ``parquet`` (rows
    ``start``-``stop`` of ``path``) or ``document`` (records ``start``-``stop`` of one JSON
    document). ``first_line`` is the 1-based line of the first byte (``lines``/``csv``); ``file``
    is the name errors use; ``header_lines`` the lines of the CSV header part."""

    index: int
    kind: str
    path: str
    file: str
    start: int
    stop: int
    first_line: int = 1
    header_stop: int = 0
    header_lines: int = 0
    sep: str = ","


def _shifted(e: InputError, offset: int, line_word: str = "line") -> InputError:
    """``e`` with its line moved by ``offset`` (a shard's lines are numbered from its start)."""
    return InputError(e.reason, file=e.file, line=None if e.line is None else e.line + offset, field=e.field,
                      column=e.column, line_word=line_word)


def plan_shards(source: str, shard_rows: int) -> list[ShardSpec]:
    """The shards of ``source`` (a file, or a folder of ``.parquet`` / ``.pq`` files), about
    ``shard_rows`` records each, in file order. A missing or unreadable file is an
    :class:`~evalign.errors.InputError` naming it."""
    if shard_rows < 1:
        raise ValueError("shard_rows must be >= 1")
    p = Path(source)
    if p.is_dir():
        files = sorted(x for x in p.iterdir() if x.suffix.lower() in (".parquet", ".pq") and x.is_file())
        if not files:
            raise InputError("a folder without .parquet files (a folder is read as Parquet shards)", file=source)
        out: list[ShardSpec] = []
        for f in files:
            out += _plan_parquet(str(f), str(Path(source) / f.name), shard_rows, len(out))
        return out
    fmt = detect_format(source)
    if not p.exists():
        raise InputError("no such file", file=source)
    if fmt == "parquet":
        return _plan_parquet(str(p), source, shard_rows, 0)
    if fmt in ("csv", "tsv"):
        return _plan_csv(p, source, shard_rows, "\t" if fmt == "tsv" else ",")
    return _plan_jsonl(p, source, shard_rows)


def _plan_parquet(path: str, file: str, shard_rows: int, first_index: int) -> list[ShardSpec]:
    import pyarrow.parquet as pq

    try:
        n = pq.ParquetFile(path).metadata.num_rows
    except Exception as e:  # pyarrow raises several types
        raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=file) from None
    return [ShardSpec(first_index + k, "parquet", path, file, s, min(s + shard_rows, n))
            for k, s in enumerate(range(0, n, shard_rows))]


def _plan_jsonl(p: Path, file: str, shard_rows: int) -> list[ShardSpec]:
    with p.open("rb") as fh:
        first = ""
        try:
            for _, text in decoded_lines(fh, file):
                if text.strip():
                    first = text
                    break
        except InputError:
            first = "?"  # invalid UTF-8 before the first record: the shard reader reports it
    if first.lstrip().startswith("[") or (first.lstrip().startswith("{") and not complete_json_line(first)):
        return _plan_document(p, file, shard_rows)
    shards: list[ShardSpec] = []
    start, first_line, count, pos, lineno, records = 0, 1, 0, 0, 0, 0
    with p.open("rb") as fh:
        for raw in bounded_lines(fh, file):
            lineno += 1
            pos += len(raw)
            if raw.strip():
                count += 1
                records += 1
            if count == shard_rows:
                shards.append(ShardSpec(len(shards), "lines", str(p), file, start, pos, first_line))
                start, first_line, count = pos, lineno + 1, 0
    if records <= 1:  # one object may hold the records ({"items": [...]}): the reader decides
        return _plan_document(p, file, shard_rows)
    if pos > start:
        shards.append(ShardSpec(len(shards), "lines", str(p), file, start, pos, first_line))
    return shards


def _plan_document(p: Path, file: str, shard_rows: int) -> list[ShardSpec]:
    n = sum(1 for _ in iter_records(p, "jsonl"))
    return [ShardSpec(k, "document", str(p), file, s, min(s + shard_rows, n))
            for k, s in enumerate(range(0, max(n, 1), shard_rows))]


def _plan_csv(p: Path, file: str, shard_rows: int, sep: str) -> list[ShardSpec]:
    csv.field_size_limit(max_line_bytes())
    state = {"pos": 0, "line": 0}

    def lines(fh: Any) -> Iterator[str]:
        for raw in bounded_lines(fh, file):
            state["pos"] += len(raw)
            state["line"] += 1
            yield raw.decode("utf-8", errors="replace")

    shards: list[ShardSpec] = []
    header_stop = header_lines = 0
    start = first_line = count = 0
    with p.open("rb") as fh:
        reader = csv.reader(lines(fh), delimiter=sep)
        try:
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                if not header_stop:
                    header_stop, header_lines = state["pos"], state["line"]
                    start, first_line = state["pos"], state["line"] + 1
                    continue
                count += 1
                if count == shard_rows:
                    shards.append(ShardSpec(len(shards), "csv", str(p), file, start, state["pos"], first_line,
                                            header_stop, header_lines, sep))
                    start, first_line, count = state["pos"], state["line"] + 1, 0
        except csv.Error:  # the rest is one shard; its reader reports the error with its line
            pass
        end = p.stat().st_size
    if not header_stop:  # no header: one shard, whose reader says what is wrong
        return [ShardSpec(0, "csv", str(p), file, 0, end, 1, 0, 0, sep)]
    if end > start or not shards:
        shards.append(ShardSpec(len(shards), "csv", str(p), file, start, end, first_line, header_stop, header_lines, sep))
    return shards


def _read_bytes(path: str, start: int, stop: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(stop - start)


def read_shard_records(spec: ShardSpec) -> tuple[Iterator[tuple[int, dict[str, Any]]], str]:
    """The shard's ``(line, record)`` pairs, numbered as in the whole file, and the word the
    reader uses for a position (``line``, ``record`` or ``row``). Reading errors are those of
    :func:`evalign.io.read_items` at the same place."""
    if spec.kind == "parquet":
        return _parquet_records(spec), "row"
    if spec.kind == "document":
        meta: dict[str, Any] = {}
        it = iter_records(Path(spec.path), "jsonl", meta)
        first = next(it, None)  # the reader sets meta["line_word"] as it starts

        def doc() -> Iterator[tuple[int, dict[str, Any]]]:
            for k, pair in enumerate(_chain_one(first, it)):
                if k >= spec.stop:
                    return
                if k >= spec.start:
                    yield pair

        return doc(), meta.get("line_word", "line")
    if spec.kind == "csv":
        return _csv_records(spec), "line"
    return _jsonl_records(spec), "line"


def _chain_one(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first is not None:
        yield first
        yield from rest


def _jsonl_records(spec: ShardSpec) -> Iterator[tuple[int, dict[str, Any]]]:
    offset = spec.first_line - 1
    for line, text in _shift_decoded(decoded_lines(io.BytesIO(_read_bytes(spec.path, spec.start, spec.stop)),
                                                    spec.file), offset):
        if not text.strip():
            continue
        rec = json_loads(text, file=spec.file, line=line)
        if not isinstance(rec, dict):
            raise InputError(f"each line must be a JSON object, got {type(rec).__name__}", file=spec.file, line=line)
        yield line, rec


def _shift_decoded(lines: Iterator[tuple[int, str]], offset: int) -> Iterator[tuple[int, str]]:
    """``lines`` numbered from ``offset + 1``; a decoding error names the line in the whole file."""
    while True:
        try:
            rel, text = next(lines)
        except StopIteration:
            return
        except InputError as e:
            raise _shifted(e, offset) from None
        yield rel + offset, text


def _csv_records(spec: ShardSpec) -> Iterator[tuple[int, dict[str, Any]]]:
    head = _read_bytes(spec.path, 0, spec.header_stop)
    data = io.BytesIO(head + _read_bytes(spec.path, spec.start, spec.stop))
    offset = spec.first_line - (spec.header_lines + 1)
    try:
        for rel, rec in iter_csv(data, spec.file, spec.sep):
            yield rel + offset, rec
    except InputError as e:
        if e.line is not None and e.line > spec.header_lines and offset:
            raise _shifted(e, offset) from None
        raise


def _parquet_records(spec: ShardSpec) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(spec.path)
        groups, at = [], 0
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if at < spec.stop and at + n > spec.start:
                groups.append((g, at))
            at += n
        table = pf.read_row_groups([g for g, _ in groups]) if groups else pf.schema_arrow.empty_table()
        first = groups[0][1] if groups else spec.start
        df = table.slice(spec.start - first, spec.stop - spec.start).to_pandas()
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"cannot read Parquet ({' '.join(str(e).split())})", file=spec.file) from None
    if df.columns.duplicated().any():
        dup = str(df.columns[df.columns.duplicated()][0])
        raise InputError(f"duplicate column '{dup}'", file=spec.file)
    cols = [str(c) for c in df.columns]
    for i, values in enumerate(df.itertuples(index=False, name=None), start=spec.start + 1):
        yield i, {c: unbox(v) for c, v in zip(cols, values, strict=True)}
