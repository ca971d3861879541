"""Writers: output checks, atomic writes (the old file or the complete new one, never a part) and
the item table as JSONL / CSV / TSV / Parquet."""

from __future__ import annotations

import contextlib
import datetime as _dt
import decimal
import json
import math
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalign.errors import OutputError, UsageError
from evalign.io.readers import FORMATS, STDIO, detect_format, pandas_na

if TYPE_CHECKING:
    import pandas as pd

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


def write_files_atomic(root: str | Path, files: dict[str, bytes], *, name: str | Path | None = None) -> dict[str, Path]:
    """Write several files under ``root`` (relative path -> bytes) as one: every byte is first written
    to a temporary folder inside ``root``, then each file is moved into place (a rename: no new space
    needed), the last one last. On any error (a full disk, Ctrl-C) nothing is left behind: no new
    folder, no partial file, the old files untouched; file-system errors are :class:`OutputError`
    naming the file, or ``name`` (what the files are, e.g. a report's page) with the file in brackets.
    Returns relative path -> written path."""
    out = Path(root).expanduser()
    created = not out.exists()
    done = False
    stage: Path | None = None
    target = out
    try:
        out.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".evalign-partial.", dir=str(out)))
        for rel, data in files.items():
            target = out / rel
            staged = stage / rel
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(data)
        written: dict[str, Path] = {}
        for rel in files:  # every byte is on disk: from here on, renames only
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(stage / rel, _new_file_mode(target))
            os.replace(stage / rel, target)
            written[rel] = target
        done = True
        return written
    except OSError as e:
        if name is not None:
            part = os.path.relpath(target, out)
            raise OutputError(f"{name}: cannot write ({part}: {e.strerror or e})") from None
        raise OutputError(f"{target}: cannot write ({e.strerror or e})") from None
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if created and not done:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when empty: a folder this call made and left nothing in


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
        elif pandas_na(v):
            parent[key] = None
        elif hasattr(v, "tolist") and not isinstance(v, _dt.datetime):  # numpy scalars and arrays (a Timestamp is a datetime)
            try:
                parent[key] = v.tolist()
            except (ValueError, AttributeError):
                continue
            stack.append((parent, key, parent[key]))
    return root[0]


def json_default(v: Any) -> Any:
    """JSON for values the json module does not know: dates and times as ISO 8601 text, decimals
    as numbers, sets as sorted lists; anything else is a :class:`TypeError`."""
    if isinstance(v, _dt.datetime | _dt.date | _dt.time):  # pandas' Timestamp too
        return v.isoformat()
    if isinstance(v, _dt.timedelta):  # pandas' Timedelta too; both as pandas writes them
        import pandas as pd  # there is a timedelta to write: pandas formats it

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


#: stands for an empty text while a CSV is written; replaced by ``""`` (a quoted empty cell)
EMPTY_TEXT_MARK = "\x00evalign-empty\x00"


def write_csv(df: pd.DataFrame, path: Path, sep: str) -> None:
    """``df`` as CSV / TSV: a missing value is an empty cell, an empty text a quoted empty cell
    (``""``), so that the readers tell them apart."""
    from pandas.api.types import is_string_dtype  # pandas: loaded by whoever made df

    marked = df.copy()
    for c in marked.columns:
        if marked[c].dtype == object or is_string_dtype(marked[c]):
            empty = marked[c].map(lambda v: isinstance(v, str) and v == "")
            if empty.any():
                marked[c] = marked[c].where(~empty, EMPTY_TEXT_MARK)
    text = marked.to_csv(index=False, sep=sep)
    path.write_text(text.replace(EMPTY_TEXT_MARK, '""'), encoding="utf-8", newline="")


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
                write_csv(out, tmp, "\t" if fmt == "tsv" else ",")
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
