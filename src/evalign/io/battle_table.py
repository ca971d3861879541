"""Reading a battle table (:func:`read_battles`), column by column.

A battle table has a row per battle (a million of them for an arena release), so its checks are
columnar: every check computes, over whole columns, which rows *might* be bad (a superset: a string
that is not ASCII might hold a lone surrogate, a number might be infinite), and the per-record rule
(:func:`validate_battle`, the one definition of a valid battle) is run on those rows only, in row
order. The first row it rejects is the error, with the message, line and field the per-record rule
gives, so the error is the one a record-by-record reading would raise. Good tables cost a few passes
over their columns and no Python call per row.

The line numbers of the rows travel in ``DataFrame.attrs["lines"]`` as :class:`LineNumbers`, which
pandas copies for free (pandas deep-copies ``attrs`` into every frame and column derived from a
table; a list of a million line numbers made each column access a deep copy of it).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from evalign.errors import InputError, did_you_mean
from evalign.io.readers import (
    STDIO,
    check_value_text,
    detect_format,
    is_frame,
    is_missing,
    iter_records,
    read_parquet_frame,
    unbox,
)
from evalign.io.validation import parse_number

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

#: fields a battle (verdict) table must have (see :func:`read_battles`)
BATTLE_REQUIRED = ("system_a", "system_b")
_BATTLE_NUMBERS = ("len_a", "len_b")
#: pandas' inferred types of a column that holds no string
_NO_TEXT = ("integer", "floating", "boolean", "mixed-integer-float", "empty", "decimal", "complex", "datetime",
            "datetime64", "date", "timedelta", "timedelta64", "time", "period", "interval", "bytes")
#: values per block when a text column is checked for lone surrogates (bounds the joined copy)
_TEXT_BLOCK = 65536


class LineNumbers(Sequence[int]):
    """The line (or row) number of each row of a table, immutable and compact (8 bytes a row).

    A copy (``copy.copy`` / ``copy.deepcopy``, as pandas makes of ``DataFrame.attrs`` on every derived
    frame) is the object itself."""

    __slots__ = ("_lines",)

    def __init__(self, lines: Iterable[int]) -> None:
        self._lines = array("q", lines)

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...
    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        return self._lines[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self._lines)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self._lines) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> LineNumbers:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LineNumbers:
        return self

    def __repr__(self) -> str:
        return f"LineNumbers({len(self)} rows)"


def validate_battle(rec: dict[str, Any], *, file: str, line: int, word: str, from_text: bool,
                    columns: Sequence[str]) -> dict[str, Any]:
    """One record of a battle table, checked and completed (the rule :func:`read_battles` applies to
    every row): its strings are Unicode text, ``system_a`` / ``system_b`` and every column of
    ``columns`` are present, the systems are non-empty strings, ``id`` (when given) a string or an
    integer (made a string), ``len_a`` / ``len_b`` numbers (floats, NaN when missing). Raises
    :class:`InputError` naming ``file``, ``line`` and the field."""

    def err(msg: str, field: str) -> InputError:
        return InputError(msg, file=file, line=line, line_word=word, field=field)

    out = dict(rec)
    for k, v in out.items():
        if not isinstance(v, int | float | bool) and v is not None:
            check_value_text(v, file=file, line=line, field=k, line_word=word)
    for f in (*BATTLE_REQUIRED, *columns):
        if f not in rec:
            unused = [k for k in rec if k not in BATTLE_REQUIRED and k not in columns]
            raise err(f"missing{did_you_mean(f, unused)}", f)
    for f in BATTLE_REQUIRED:
        v = out[f]
        if is_missing(v) or (isinstance(v, str) and not v.strip()):
            raise err("missing", f)
        if not isinstance(v, str):
            raise err(f"must be a string, got {type(v).__name__}", f)
    if "id" in out and not is_missing(out["id"]):
        if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
            raise err(f"must be a string or an integer, got {type(out['id']).__name__}", "id")
        out["id"] = str(out["id"])
    for f in _BATTLE_NUMBERS:
        if f in out:
            out[f] = parse_number(out[f], from_text=from_text, file=file, line=line, field=f, line_word=word)
    return out


# --- which rows might be bad (a superset of the bad ones), column by column ---------------------------


def _kind(values: np.ndarray) -> str:
    """pandas' inferred type of an object column (``string``, ``integer``, ``floating``, ...)."""
    import pandas as pd

    return str(pd.api.types.infer_dtype(values, skipna=True))


def _text_suspects(values: np.ndarray) -> np.ndarray:
    """Rows whose value may hold a string that is not Unicode text (a lone surrogate)."""
    import numpy as np

    n = values.size
    kind = _kind(values)
    if kind in _NO_TEXT:
        return np.zeros(n, dtype=bool)
    if kind == "string":  # encode blocks of the column at once: UTF-8 refuses a lone surrogate
        out = np.zeros(n, dtype=bool)
        for start in range(0, n, _TEXT_BLOCK):
            block = [v for v in values[start:start + _TEXT_BLOCK].tolist() if isinstance(v, str)]
            try:
                "".join(block).encode("utf-8")
            except UnicodeEncodeError:
                part = values[start:start + _TEXT_BLOCK].tolist()
                out[start:start + len(part)] = [isinstance(v, str) and not v.isascii() for v in part]
        return out
    # anything else (lists, dicts, mixed): each value that is not a plain number or ASCII text
    return np.fromiter((not (v is None or isinstance(v, int | float | bool) or (isinstance(v, str) and v.isascii()))
                        for v in values.tolist()), dtype=bool, count=n)


def _system_suspects(values: np.ndarray) -> np.ndarray:
    """Rows whose system is missing, blank or not a string."""
    import numpy as np
    import pandas as pd

    s = pd.Series(values, dtype=object)
    try:
        uniques = pd.unique(s.dropna())
    except TypeError:  # unhashable values (lists): each one
        return np.fromiter((not (isinstance(v, str) and v.strip()) for v in values.tolist()), dtype=bool,
                           count=values.size)
    bad = [u for u in uniques.tolist() if not (isinstance(u, str) and u.strip())]
    return (s.isna() | s.isin(bad)).to_numpy(dtype=bool)


def _id_suspects(values: np.ndarray) -> np.ndarray:
    """Rows whose id is given but is neither a string nor an integer."""
    import numpy as np

    if _kind(values) in ("string", "integer", "empty"):
        return np.zeros(values.size, dtype=bool)
    return np.fromiter((not is_missing(v) and (isinstance(v, bool) or not isinstance(v, str | int))
                        for v in values.tolist()), dtype=bool, count=values.size)


def _number_suspects(values: np.ndarray, from_text: bool) -> np.ndarray:
    """Rows whose length may not read as a finite number (or missing)."""
    import numpy as np
    import pandas as pd

    if values.dtype.kind in "iu":
        return np.zeros(values.size, dtype=bool)
    if values.dtype.kind == "f":
        return np.isinf(values)
    kind = _kind(values)
    if kind in ("integer", "empty"):
        return np.zeros(values.size, dtype=bool)
    if kind in ("floating", "mixed-integer-float"):
        as_float = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        return np.isinf(as_float)
    if from_text and kind == "string":
        s = pd.Series(values, dtype=object)
        num = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
        blank = (s.isna() | (s.str.strip() == "")).to_numpy(dtype=bool)
        return ~blank & ~np.isfinite(num)
    return np.ones(values.size, dtype=bool)  # each value is read by the per-record rule


def _suspects(df: pd.DataFrame, columns: Sequence[str], from_text: bool) -> np.ndarray:
    """Rows of ``df`` (every record has all of its columns) that may break :func:`validate_battle`."""
    import numpy as np

    n = len(df)
    out = np.zeros(n, dtype=bool)
    if n and any(f not in df.columns for f in (*BATTLE_REQUIRED, *columns)):
        out[0] = True  # the first row already lacks the column
    for c in df.columns:
        col = df[c]
        if _arrow_text(col):  # valid UTF-8 by construction, and every value a string or missing
            if c in BATTLE_REQUIRED:
                blank = [u for u in col.dropna().unique().tolist() if not u.strip()]
                out |= (col.isna() | col.isin(blank)).to_numpy(dtype=bool)
            elif c in _BATTLE_NUMBERS:
                out |= _number_suspects(col.to_numpy(dtype=object), from_text)
            continue
        values = col.to_numpy(dtype=object) if col.dtype.kind not in "iufb" else col.to_numpy()
        if values.dtype == object:
            out |= _text_suspects(values)
        if c in BATTLE_REQUIRED:
            out |= _system_suspects(values if values.dtype == object else values.astype(object))
        elif c == "id":
            out |= _id_suspects(values)
        elif c in _BATTLE_NUMBERS:
            out |= _number_suspects(values, from_text)
    return out


def _arrow_text(col: pd.Series) -> bool:
    """Whether ``col`` is a pandas text column stored by pyarrow (what Parquet files are read as)."""
    import pandas as pd

    return isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow"


# --- the table -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    """A battle table as read, before its checks."""

    name: str  # the file's name to show
    frame: pd.DataFrame
    lines: Sequence[int]  # each row's line (or row) number
    from_text: bool  # values are CSV / TSV text
    word: str  # how lines are named
    records: list[dict[str, Any]] | None = None  # the records as read (text files)
    lacking: int | None = None  # the first record without a required column
    unreadable: InputError | None = None  # the error of a line that could not be read (rows before it read)


def _records_frame(source: str | Path, columns: Sequence[str]) -> _Read:
    """A JSONL / CSV / TSV file (or ``"-"``) read record by record into a frame."""
    import pandas as pd

    fmt = detect_format(source)
    name = "<stdin>" if str(source) == STDIO else str(source)
    meta: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    need = {*BATTLE_REQUIRED, *columns}
    lacking: int | None = None
    unreadable: InputError | None = None
    try:
        for line, rec in iter_records(Path(source), fmt, meta):
            if lacking is None and not need <= rec.keys():
                lacking = len(rows)
            rows.append(rec)
            lines.append(line)
    except InputError as e:  # a line that cannot be read: raised once the rows before it are checked
        unreadable = e
    # object columns until checked: a column of strings is stored as Unicode text, which a lone surrogate is not
    return _Read(name, pd.DataFrame(rows, dtype=object), lines, fmt in ("csv", "tsv"), meta.get("line_word", "line"),
                 rows, lacking, unreadable)


def _source_frame(source: str | Path | pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """A DataFrame or a Parquet file as a frame of its own (the caller's frame is not changed)."""
    if is_frame(source):
        name = str(source.attrs.get("source", "<DataFrame>"))
        df = source.copy(deep=False)
    else:
        name = str(source)
        df = read_parquet_frame(Path(source), name)
    if df.columns.duplicated().any():
        raise InputError(f"duplicate column '{df.columns[df.columns.duplicated()][0]}'", file=name)
    df.attrs = {}
    df.columns = [str(c) for c in df.columns]
    return name, df.reset_index(drop=True)


def _completed(df: pd.DataFrame, from_text: bool) -> pd.DataFrame:
    """The checked frame with ids as strings and lengths as floats (what the per-record rule makes of
    them), column by column."""
    import numpy as np
    import pandas as pd

    if "id" in df.columns:
        col = df["id"]
        if col.dtype.kind in "iu":
            df["id"] = col.astype(str)
        elif _kind(col.to_numpy(dtype=object)) != "string":  # integers among strings, or None
            df["id"] = pd.Series([None if is_missing(v) else str(v) for v in col.tolist()], index=df.index)
    for f in _BATTLE_NUMBERS:
        if f in df.columns:
            col = df[f]
            if col.dtype.kind in "iufb" and col.dtype.kind != "b":
                df[f] = col.to_numpy(dtype=np.float64)
            else:
                df[f] = np.array([parse_number(unbox(v), from_text=from_text) for v in col.tolist()], dtype=np.float64)
    return df


def read_battles(source: str | Path | pd.DataFrame, *, columns: Sequence[str] = ()) -> pd.DataFrame:
    """Read and check a battle table: pairwise verdicts (JSONL / CSV / TSV / Parquet / DataFrame /
    ``"-"``) with ``system_a``, ``system_b`` and every column of ``columns`` (the verdict columns,
    whose values the statistics check); optional ``id``, ``task``, ``len_a`` / ``len_b`` (numbers),
    ``response_a`` / ``response_b`` and any others (kept). Each row is held to
    :func:`validate_battle`, checked column by column (module doc); the first bad row is an
    :class:`InputError` naming the file, its line and the field. ``attrs["lines"]`` holds each row's
    line number (:class:`LineNumbers`) and ``attrs["line_word"]`` how lines are named, so later checks
    of a row can name its line too."""
    import numpy as np

    if is_frame(source) or (str(source) != STDIO and detect_format(source) == "parquet"):
        name, frame = _source_frame(source)
        read = _Read(name, frame, range(1, len(frame) + 1), False, "row")
    else:
        read = _records_frame(source, columns)
    df, lines, records = read.frame, read.lines, read.records
    if len(df):
        suspects = _suspects(df, columns, read.from_text)
        if read.lacking is not None:
            suspects[read.lacking] = True
        cols = [str(c) for c in df.columns]
        for i in np.flatnonzero(suspects).tolist():
            rec = records[i] if records is not None else {c: unbox(v) for c, v in zip(cols, df.iloc[i].tolist(), strict=True)}
            validate_battle(rec, file=read.name, line=lines[i], word=read.word, from_text=read.from_text, columns=columns)
    if read.unreadable is not None:
        raise read.unreadable
    if not len(df):
        raise InputError("no records", file=read.name)
    df = _completed(df.infer_objects() if records is not None else df, read.from_text)
    df.attrs.update(source=read.name, lines=lines if isinstance(lines, range) else LineNumbers(lines),
                    line_word=read.word)
    return df


__all__ = ["BATTLE_REQUIRED", "LineNumbers", "read_battles", "validate_battle"]
