"""Validation: records checked and turned into the item table (:func:`read_items`), the pair table
(:func:`read_pairs`) and system-level human values (:func:`read_system_human`); errors name the file,
line and field."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalign.errors import InputError, UsageError, did_you_mean
from evalign.io.conversations import (
    MESSAGES,
    PAIR_MESSAGES,
    check_derived,
    conversation_fields,
    pair_conversations,
    parse_messages,
)
from evalign.io.readers import (
    CORE_FIELDS,
    STDIO,
    TEXT_FIELDS,
    binary_stream,
    check_text,
    check_value_text,
    csv_value,
    decoded_lines,
    detect_format,
    is_frame,
    is_missing,
    iter_frame,
    iter_records,
    json_loads,
    unbox,
)

if TYPE_CHECKING:
    import pandas as pd

#: the names other tools give a canonical field; a record with one of them (and not the field) gets
#: the hint to map it with ``--<field>-field NAME``
FIELD_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "response": ("output", "outputs", "answer", "completion", "generation", "prediction", "hypothesis",
                 "model_output", "response_text", "text"),
    "reference": ("target", "gold", "references", "ref", "expected", "expected_output", "ground_truth"),
    "instruction": ("prompt", "question", "query"),
    "id": ("idx", "item_id", "example_id", "question_id", "uid"),
    "system": ("model", "model_name", "generator", "system_name"),
}


def field_hint(field: str, present: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for a close name of ``present``, else, when a column named as other
    tools name ``field`` is present (``output`` for ``response``), the flag that maps it."""
    names = [str(k) for k in present]
    close = did_you_mean(field, names)
    if close:
        return close
    lower = {n.lower(): n for n in names}
    for syn in FIELD_SYNONYMS.get(field, ()):
        if syn in lower:
            return f" (the field '{lower[syn]}' is present: map it with --{field}-field {lower[syn]})"
    return ""


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
        others = [k for k in rec if k not in fields.values()]
        hint = "" if src in rec else field_hint(src, others) if src == field else did_you_mean(src, others)
        return self.err(f"missing{extra}{hint}", field)


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
    scores: Sequence[str] = (),
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
                out[k] = csv_value(v)
    if check_text:
        for k, v in out.items():
            if not isinstance(v, int | float | bool) and v is not None:
                check_value_text(v, file=file, line=line, field=fields.get(k, k), line_word=line_word)
    _item_conversation(out, where)
    _validate_core(out, where, default_system)
    _validate_reference(out, where, require_reference)
    for h in human:
        if h not in out:
            raise where.err(f"missing human rating field{did_you_mean(h, rec)}", h)
        if line_word != "row" and isinstance(out[h], float) and math.isnan(out[h]):  # JSON's NaN literal
            raise where.err("must be a finite number, got nan (write null for a missing rating)", h)
        out[h] = parse_number(out[h], from_text=numeric_from_text, file=file, line=line, field=h, line_word=line_word)
    for c in scores:  # score columns to rank: numbers, finite (absent ones are computed or reported later)
        if c in out and c not in human:
            out[c] = parse_number(out[c], from_text=numeric_from_text, file=file, line=line, field=c,
                                  line_word=line_word)
    return out


def _turn_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The graded turn as part of a row's key (per-turn items of one conversation share their id), or
    nothing for a row without a ``turn``."""
    t = row.get("turn")
    if is_missing(t) or t == "":
        return ()
    return (str(int(t)) if isinstance(t, float) and t.is_integer() else str(t),)


def _item_conversation(out: dict[str, Any], where: _Where) -> None:
    """A record's ``messages`` (when given) checked, and its ``instruction``, ``response`` and ``turn``
    filled from it (see :mod:`evalign.io.conversations`; in place)."""
    if is_missing(out.get(MESSAGES)):
        out.pop(MESSAGES, None)
        return
    src = where.fields.get(MESSAGES, MESSAGES)
    msgs = parse_messages(out[MESSAGES], file=where.file, line=where.line, field=src, line_word=where.line_word)
    if not is_missing(out.get("input")) and out.get("input") != "":
        raise where.err("an item with 'messages' holds its input in the user turn; leave 'input' empty", "input")
    out[MESSAGES] = msgs
    check_derived(out, conversation_fields(msgs), field=src, file=where.file, line=where.line,
                  line_word=where.line_word, names={k: k for k in ("instruction", "response", "turn")})


def _validate_core(out: dict[str, Any], where: _Where, default_system: str | None) -> None:
    """``system``, ``id``, ``response`` and the text fields of a renamed record, checked (in place)."""
    if is_missing(out.get("system")) or out.get("system") == "":
        if default_system is None:
            raise where.missing("system", " (or pass a default system name)")
        out["system"] = default_system
    if is_missing(out.get("id")) or out.get("id") == "":
        raise where.missing("id")
    if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
        raise where.err(f"must be a string or an integer, got {type(out['id']).__name__}", "id")
    out["id"] = str(out["id"])
    if not isinstance(out["system"], str):
        raise where.err(f"must be a string, got {type(out['system']).__name__}", "system")
    if is_missing(out.get("response")):
        raise where.missing("response")
    for f in TEXT_FIELDS:
        if f in out and not is_missing(out[f]) and not isinstance(out[f], str):
            raise where.err(f"must be a string, got {type(out[f]).__name__} ({out[f]!r:.40})", f)
    for f in ("instruction", "input"):
        if is_missing(out.get(f)):
            out[f] = ""
    for f in ("task", "language"):
        if f in out and is_missing(out[f]):
            out[f] = None


def _validate_reference(out: dict[str, Any], where: _Where, require_reference: bool) -> None:
    """``reference``: a string or a non-empty list of strings (None when missing and not required)."""
    ref = out.get("reference")
    if is_missing(ref):
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

    if is_missing(v):
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
    scores: Sequence[str] = (),
) -> pd.DataFrame:
    if on_invalid not in ("error", "skip"):
        raise ValueError(f"on_invalid must be 'error' or 'skip', not {on_invalid!r}")
    fmap = dict(fields or {})
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: dict[tuple[str, ...], int] = {}
    for line, rec in records:
        word = meta.get("line_word", "line")
        try:
            row = _validate(rec, file=file, line=line, fields=fmap, human=human, require_reference=require_reference,
                            default_system=default_system, numeric_from_text=numeric_from_text, line_word=word,
                            scores=scores)
            key = (row["id"], row["system"], *_turn_key(row))
            if key in seen:
                names = "(id, system, turn)" if len(key) > 2 else "(id, system)"
                raise InputError(f"duplicate {names} = ({', '.join(map(repr, key))}); first seen on {word} {seen[key]}",
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
    import pandas as pd  # pandas is imported where a table is built, not at every command's start

    df = pd.DataFrame(rows)
    front = [c for c in CORE_FIELDS if c in df.columns]
    df = df[front + [c for c in df.columns if c not in front]]
    for h in [*human, *(c for c in scores if c in df.columns)]:
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
    scores: Sequence[str] = (),
) -> pd.DataFrame:
    """Read and validate an item table from JSONL / JSON list / CSV / TSV / Parquet, standard input
    (``"-"``, JSONL) or a DataFrame (see the module docstring for what is accepted).

    ``fields`` maps canonical names to source names (``{"response": "output"}``). ``human`` names
    numeric human rating columns (missing = NaN; text, booleans and infinities are errors).
    ``require_reference`` makes a missing reference an error. ``default_system`` is used when a
    record has no ``system``. ``scores`` names score columns, read as ``human`` is where present
    (text other than a number, booleans and infinities are errors naming the line). ``on_invalid="skip"`` leaves out rows that fail validation instead of
    raising; their messages are in ``df.attrs["skipped"]``. Raises
    :class:`~evalign.errors.InputError` naming file, line, field.
    """
    meta: dict[str, Any] = {}
    if is_frame(source):
        meta["line_word"] = "row"
        return records_to_table(iter_frame(source), file=str(source.attrs.get("source", "<DataFrame>")), fields=fields,
                                 human=human, require_reference=require_reference, default_system=default_system,
                                 numeric_from_text=False, meta=meta, on_invalid=on_invalid, scores=scores)
    path = Path(source) if str(source) != STDIO else Path(STDIO)
    fmt = format or detect_format(source)
    return records_to_table(iter_records(path, fmt, meta), file=_display(source), fields=fields, human=human,
                             require_reference=require_reference, default_system=default_system,
                             numeric_from_text=fmt in ("csv", "tsv"), meta=meta, on_invalid=on_invalid,
                             scores=scores)


def _display(source: str | Path) -> str:
    return "<stdin>" if str(source) == STDIO else str(source)


#: fields a pair table must have (see :func:`read_pairs`)
PAIR_REQUIRED = ("id", "instruction", "response_a", "response_b")
#: text fields of a pair table (never parsed as JSON in CSV files)
PAIR_TEXT_FIELDS = ("id", "instruction", "input", "response_a", "response_b", "system_a", "system_b")

_PREF_TEXT = {"+1": 1.0, "1": 1.0, "a": 1.0, "-1": -1.0, "2": -1.0, "b": -1.0, "0": 0.0, "tie": 0.0,
              # as a float column is written to CSV (a table exported with missing labels)
              "+1.0": 1.0, "1.0": 1.0, "-1.0": -1.0, "2.0": -1.0, "0.0": 0.0}


def parse_preference(v: Any) -> float:
    """A human preference label as evalign's code: +1 (A better), -1 (B better), 0 (tie), NaN
    (missing: None, NaN, empty text). Accepted: the numbers +1 / -1 / 0, the numbers 1 / 2 / 0
    (1 = A, 2 = B, 0 = tie), and the texts ``"+1"``, ``"1"``, ``"-1"``, ``"2"``, ``"0"`` (also
    written ``"1.0"``, ... as a CSV writes a float column), ``"A"``, ``"B"``, ``"tie"`` (case and surrounding spaces ignored). Anything else (``"yes"``, 0.5, a
    boolean) raises :class:`ValueError`."""
    if is_missing(v) or (isinstance(v, str) and not v.strip()):
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
                out[k] = csv_value(v)
    for k, v in out.items():
        if not isinstance(v, int | float | bool) and v is not None:
            check_value_text(v, file=file, line=line, field=k, line_word=word)
    for f in PAIR_MESSAGES:
        if is_missing(out.get(f)):
            out.pop(f, None)
    pair_conversations(out, file=file, line=line, line_word=word)
    for f in PAIR_REQUIRED:
        v = out.get(f)
        if f != "instruction" and (is_missing(v) or (f == "id" and v == "")):
            unused = [k for k in rec if k not in PAIR_REQUIRED]  # never suggest a field that is itself used
            raise err(f"missing{did_you_mean(f, unused) if f not in rec else ''}", f)
    if isinstance(out["id"], bool) or not isinstance(out["id"], str | int):
        raise err(f"must be a string or an integer, got {type(out['id']).__name__}", "id")
    out["id"] = str(out["id"])
    for f in ("instruction", "input", "response_a", "response_b", "system_a", "system_b"):
        v = out.get(f)
        if is_missing(v):
            out[f] = {"system_a": "A", "system_b": "B"}.get(f, "")
        elif not isinstance(v, str):
            raise err(f"must be a string, got {type(v).__name__}", f)
    _pair_reference_and_preferences(out, rec, pref, err)
    return out


def _pair_reference_and_preferences(out: dict[str, Any], rec: Mapping[str, Any], pref: Sequence[str],
                                    err: Callable[[str, str], InputError]) -> None:
    """A pair's optional ``reference`` and its preference columns, checked and parsed (in place)."""
    ref = out.get("reference")
    if is_missing(ref):
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



def _open_records(
    source: str | Path | pd.DataFrame,
) -> tuple[str, Iterable[tuple[int, dict[str, Any]]], dict[str, Any], bool]:
    """The name to show, the numbered records, the reader's meta (how lines are named) and whether the
    values come from text (CSV / TSV: numbers still to be read) of a file, ``"-"`` or a DataFrame."""
    meta: dict[str, Any] = {}
    if is_frame(source):
        meta["line_word"] = "row"
        return str(source.attrs.get("source", "<DataFrame>")), iter_frame(source), meta, False
    fmt = detect_format(source)
    return _display(source), iter_records(Path(source), fmt, meta), meta, fmt in ("csv", "tsv")

def read_pairs(source: str | Path | pd.DataFrame, *, pref: Sequence[str] = ()) -> pd.DataFrame:
    """Read and validate a pair table (JSONL / CSV / TSV / Parquet / DataFrame / ``"-"``): columns
    ``id``, ``instruction``, ``response_a``, ``response_b``; optional ``input``, ``reference``,
    ``system_a`` / ``system_b`` (default ``"A"`` / ``"B"``) and any others (kept).

    ``pref`` names human preference columns: each must be present and is parsed strictly by
    :func:`parse_preference` into +1 / -1 / 0 / NaN (floats). Errors name the file, line and field."""
    name, records, meta, from_text = _open_records(source)
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], int] = {}
    for line, rec in records:
        word = meta.get("line_word", "line")
        out = _validate_pair(rec, file=name, line=line, word=word, from_text=from_text, pref=pref)
        pid = (out["id"], *_turn_key(out))
        if pid in seen:
            shown = f"id {pid[0]!r}" if len(pid) == 1 else f"(id, turn) = ({pid[0]!r}, {pid[1]!r})"
            raise InputError(f"duplicate {shown}; first seen on {word} {seen[pid]}", file=name, line=line,
                             line_word=word, field="id")
        seen[pid] = line
        rows.append(out)
    if not rows:
        raise InputError("no records", file=name)
    import pandas as pd

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
        fh = binary_stream(path)
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
            check_text(str(k), file=file, line=None, field=str(k), line_word="line")  # type: ignore[arg-type]
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
            what = "missing" if is_missing(r) else f"must be a string, got {type(r).__name__} ({r!r:.40})"
            raise InputError(what, file=source, line=i, line_word="row", field="response")
        check_text(r, file=source, line=i, field="response", line_word="row")
    return out


def check_systems(df: pd.DataFrame) -> None:
    """Raise :class:`InputError` naming the first row whose ``system`` is missing (None, NaN,
    ``pd.NA``) or empty, so that no row is silently left out of system-level scores."""
    if "system" not in df.columns:
        raise InputError("no 'system' column", file=str(df.attrs.get("source", "<DataFrame>")), field="system")
    for i, v in enumerate(df["system"].tolist(), start=1):
        if is_missing(v) or v == "":
            raise InputError("missing (every row needs a system to be counted in system-level scores)",
                             file=str(df.attrs.get("source", "<DataFrame>")), line=i, line_word="row", field="system")
