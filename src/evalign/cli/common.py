"""Shared pieces of the command line: the console, tables, JSON output, field options, and the
error contract.

The error contract (enforced here, for every verb, by :func:`handle_errors`, which the ``evalign``
group wraps around each command): a failure the user can cause ends with ONE line
``error: <file>, line <n>, field '<f>': <what>`` on stderr and exit code 1, or 2 for a wrong command
line (:class:`~evalign.errors.UsageError`; the option parser's own errors are 2 as well); any other
exception becomes one line naming its type plus a hint to rerun with ``--debug``, exit 1. A
traceback is printed only with ``--debug``. Verbs raise :class:`~evalign.errors.InputError`,
:class:`~evalign.errors.UsageError` (use :func:`~evalign.errors.unknown_name` for an unknown name:
it adds "did you mean"), :class:`~evalign.errors.OutputError`; they check their outputs with
:func:`check_outputs` before any work.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from evalign import interrupt
from evalign.errors import EvalignError, UsageError, unknown_name
from evalign.io import STDIO, check_output, is_missing, json_default, json_safe

if TYPE_CHECKING:
    import pandas as pd

#: the command line shows its own progress: the Hugging Face libraries' bars (transformers' "Loading
#: weights", hub downloads) stay off; read by huggingface_hub and transformers when they are imported
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

#: characters a terminal acts on instead of showing: C0 controls but tab and newline, DEL, C1
#: controls, and the bidirectional overrides and isolates that reorder what a line shows
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\u202e``): a name
    or text from a data file can then neither move the cursor, clear a line nor retitle the
    terminal (see :data:`_CONTROL`)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1] if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}", text)


class SafeConsole(Console):
    """A rich console that shows control characters escaped (:func:`visible`) in every string it
    renders: ``print``'s strings, table cells, headers and titles, progress descriptions. The one
    place where names and texts from the user's data meet the terminal; rich's own styles and cursor
    moves are not strings and pass unchanged. Emoji codes are off: a column ``judge:x:`` or a
    system ``a:smile:b`` is shown as written (rich would draw an emoji); markup in a name is
    escaped where it is printed (:func:`rich.markup.escape`; tables: :func:`render_table`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Any:
        return super().render_str(visible(text), **kwargs)


console = SafeConsole(stderr=False)
err_console = SafeConsole(stderr=True)

#: global state set by the top-level callback
STATE: dict[str, Any] = {"debug": False}


def suggest(kind: str, name: str, known: Sequence[str], *, where: str | None = None) -> UsageError:
    """A :class:`UsageError` for an unknown ``kind`` of name (metric, judge, dataset, column, ...)
    with a "did you mean" (see :func:`evalign.errors.unknown_name`)."""
    err = unknown_name(kind, name, known, where=where)
    assert isinstance(err, UsageError)
    return err


def _field_option(canonical: str) -> Any:
    return typer.Option(None, f"--{canonical}-field", help=f"Source field holding '{canonical}' (default: {canonical}).")


#: the ``--X-field`` options, declared once and shared by the verbs that read item tables
ID_FIELD = _field_option("id")
SYSTEM_FIELD = _field_option("system")
INSTRUCTION_FIELD = _field_option("instruction")
INPUT_FIELD = _field_option("input")
REFERENCE_FIELD = _field_option("reference")
RESPONSE_FIELD = _field_option("response")
TASK_FIELD = _field_option("task")
LANGUAGE_FIELD = _field_option("language")

#: ``--json``, as most verbs declare it
AS_JSON: Any = typer.Option(False, "--json", help="Print machine-readable JSON.")


def field_map(
    id_field: str | None = None,
    system_field: str | None = None,
    instruction_field: str | None = None,
    input_field: str | None = None,
    reference_field: str | None = None,
    response_field: str | None = None,
    task_field: str | None = None,
    language_field: str | None = None,
) -> dict[str, str]:
    """The ``--X-field`` options as a canonical -> source name mapping."""
    pairs = {
        "id": id_field,
        "system": system_field,
        "instruction": instruction_field,
        "input": input_field,
        "reference": reference_field,
        "response": response_field,
        "task": task_field,
        "language": language_field,
    }
    return {k: v for k, v in pairs.items() if v}


def fmt_value(v: Any, digits: int = 4) -> str:
    """A cell for a terminal table."""
    if v is None or is_missing(v):
        return "-"
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.{digits}f}"
    return str(v)


#: columns that name a row: repeated in every part of a table folded to fit the terminal
KEY_COLUMNS = ("group", "system", "metric")


def _fit_widths(headers: Sequence[str], cells: Sequence[Sequence[str]], key: Sequence[int],
                width: int) -> list[tuple[list[int], list[int]]]:
    """Fold a table into parts that each fit ``width`` terminal columns without breaking a cell:
    returns per part (column indices, column widths). Every part repeats the ``key`` columns. A
    column is as wide as its widest cell (cells never wrap) and at least its longest header word
    (headers wrap between words); spare width goes to headers first, so short tables keep
    one-line headers. Rich's box layout costs 3 characters per column plus 1."""

    def longest_word(h: str) -> int:
        return max((len(w) for w in h.split()), default=0)

    base = [max([longest_word(h), *(len(c) for c in col)]) for h, col in zip(headers, cells, strict=True)]

    def need(idx: Sequence[int]) -> int:
        return sum(base[i] + 3 for i in idx) + 1

    parts: list[list[int]] = []
    current = list(key)
    for i in range(len(headers)):
        if i in key:
            continue
        if need([*current, i]) <= width or len(current) == len(key):
            current.append(i)
        else:
            parts.append(current)
            current = [*key, i]
    parts.append(current)
    out = []
    for idx in parts:
        widths = [base[i] for i in idx]
        spare = width - need(idx)
        for k, i in enumerate(idx):  # one-line headers where the width allows
            grow = min(max(0, len(headers[i]) - widths[k]), max(spare, 0))
            widths[k] += grow
            spare -= grow
        out.append((sorted(idx), [w for _, w in sorted(zip(idx, widths, strict=True))]))
    return out


def _head(title: str | None) -> str:
    """A title's head (up to its first ':' or ' ('), to name the later parts of a folded table."""
    if not title:
        return ""
    cut = min([k for k in (title.find(":"), title.find(" (")) if k > 0] or [len(title)])
    return title[:cut]


def render_table(df: pd.DataFrame, title: str | None = None, digits: int = 4, *, width: int = 80,
                 key: Sequence[str] | None = None) -> list[Table]:
    """A DataFrame as rich tables that fit ``width`` columns without splitting a cell: a table too
    wide is folded into parts (see :func:`_fit_widths`), each repeating the ``key`` columns
    (default: those of :data:`KEY_COLUMNS` present, else the first column); later parts are titled
    with the title's head and ``(continued)``. Numbers are right-aligned."""
    from pandas.api.types import is_numeric_dtype  # pandas: loaded by whoever made df

    headers = [visible(str(c)) for c in df.columns]  # (as the console shows them: widths fit)
    cells = [[visible(fmt_value(v, digits)) for v in df[c]] for c in df.columns]
    names = list(key) if key is not None else [c for c in KEY_COLUMNS if c in headers]
    keys = [headers.index(c) for c in names if c in headers] or ([0] if headers else [])
    tables = []
    for n, (idx, widths) in enumerate(_fit_widths(headers, cells, keys, width)):
        text = title if n == 0 else f"{_head(title)} (continued)".strip()
        table = Table(title=escape(text) if text else None, title_justify="left", header_style="bold")
        for i, w in zip(idx, widths, strict=True):
            numeric = is_numeric_dtype(df[df.columns[i]])
            over = sum(w + 3 for w in widths) + 1 > width and i in keys  # only a name too long for any layout folds
            table.add_column(escape(headers[i]), justify="right" if numeric else "left",
                             width=None if over else w, overflow="fold", no_wrap=False)
        for r in range(len(df)):
            table.add_row(*[escape(cells[i][r]) for i in idx])
        tables.append(table)
    return tables


def print_table(df: pd.DataFrame, title: str | None = None, digits: int = 4, *,
                key: Sequence[str] | None = None, out: Console | None = None) -> None:
    """Print a DataFrame as rich tables that fit the terminal without splitting a cell (see
    :func:`render_table`)."""
    target = out or console
    for t in render_table(df, title, digits, width=target.width, key=key):
        target.print(t)


def emit_json(obj: Any) -> None:
    """Print machine-readable JSON to stdout (NaN as null)."""
    sys.stdout.write(json.dumps(json_safe(obj), indent=2, ensure_ascii=False, default=json_default) + "\n")


def progress(transient: bool = False, disable: bool = False) -> Progress:
    """A progress bar for long work (on stderr)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
        disable=disable,
    )


class Stages:
    """Progress of a command's stages on stderr: each stage (a metric's texts, the resampling) gets
    its own bar and its own timer; starting a stage finishes the one before at 100%, and so does
    leaving the block. A stage without a total (work that reports no steps, e.g. the bootstrap
    inside an evaluation) shows a moving bar and its elapsed time.

    Use::

        with Stages(disable=as_json) as st:
            st.start("scoring semscore texts", total=1976); st.update(32); ...
            st.start("meta-evaluating: 1000 bootstrap resamples")  # no total
    """

    def __init__(self, *, disable: bool = False) -> None:
        self.bar = progress(transient=True, disable=disable)
        self._task: Any = None
        self.description: str | None = None

    def __enter__(self) -> Stages:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.finish()
        self.bar.__exit__(*exc)

    def start(self, description: str, total: int | None = None) -> None:
        """Begin a stage (the current one is finished first); nothing happens when ``description``
        is the current stage's."""
        if description == self.description and self._task is not None:
            if total is not None:
                self.bar.update(self._task, total=total)
            return
        self.finish()
        self._task = self.bar.add_task(description, total=total)
        self.description = description

    def update(self, done: int, total: int | None = None) -> None:
        """Steps done in the current stage (and its total, when it changes)."""
        if self._task is not None:
            self.bar.update(self._task, completed=done, **({"total": total} if total is not None else {}))

    def resampling(self, prefix: str = "meta-evaluating") -> Callable[[str, int, int | None], None]:
        """A progress callback for :func:`evalign.evaluate.evaluate`: each resampling stage
        (bootstrap intervals, permutation tests) becomes a stage of this display."""

        def on_step(stage: str, done: int, total: int | None) -> None:
            self.start(f"{prefix}: {stage}", total=total)
            self.update(done, total)

        return on_step

    def finish(self) -> None:
        """Finish the current stage at 100% (its timer stops)."""
        if self._task is None:
            return
        task = next(t for t in self.bar.tasks if t.id == self._task)
        total = task.total if task.total is not None else 1
        self.bar.update(self._task, total=total, completed=total)
        self._task = None
        self.description = None


class CliError(EvalignError):
    """An error in how the command was called, found by a verb's own checks (exit 1; prefer
    :class:`~evalign.errors.UsageError`, exit 2, for a bad option value)."""


@contextmanager
def named_as_options(options: Mapping[str, str]) -> Iterator[None]:
    """Settings built in the block: an error whose message starts with one of ``options``' field names
    (``"max_steps must be >= 1, got 0"``) becomes a :class:`~evalign.errors.UsageError` naming the
    option instead (``"--max-steps must be >= 1, got 0"``), as every command names a bad value."""
    try:
        yield
    except EvalignError as e:
        field, _, rest = str(e).partition(" ")
        if field not in options:
            raise
        raise UsageError(f"{options[field]} {rest}") from None


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` on one line (newlines and runs of whitespace around them collapsed), at most
    ``limit`` characters."""
    flat = re.sub(r"\s*[\r\n]+\s*", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def print_error(message: str) -> None:
    """``error: <message>`` on one line (stderr): the one line of every failure."""
    err_console.print(f"[red]error[/red]: {escape(one_line(message))}", highlight=False, markup=True, soft_wrap=True)


_print_error = print_error


def bad_value_errors() -> tuple[type[BaseException], ...]:
    """The option parser's error for a value it cannot convert (``--port abc``: "Invalid value for
    '--port': 'abc' is not a valid integer."; click's and typer's vendored copy), which the ``evalign``
    group prints as one ``error:`` line, exit 2, instead of typer's box."""
    out: list[type[BaseException]] = []
    for mod in ("click.exceptions", "typer._click.exceptions"):
        with suppress(ImportError):
            m = __import__(mod, fromlist=["BadParameter"])
            out += [m.BadParameter] if hasattr(m, "BadParameter") else []
    return tuple(out)


@contextmanager
def handle_errors() -> Any:
    """Turn every exception into one clear line and an exit code (a traceback only with --debug):
    :class:`EvalignError` -> its ``exit_code`` (1; 2 for :class:`UsageError`); a file-system error
    -> 1 naming the file; anything else -> 1 with its type and a hint to rerun with ``--debug``.
    Click's own exits and usage errors pass through unchanged."""
    passthrough = _click_exceptions()
    try:
        with interrupt.verb_running():  # Ctrl-C: KeyboardInterrupt inside the verb (see evalign.interrupt)
            yield
    except KeyboardInterrupt:
        interrupt.said()  # a second Ctrl-C while this one unwinds prints nothing more
        word, rest = interrupt.LINE.split(": ", 1)
        err_console.print(f"[red]{word}[/red]: {escape(rest)}", highlight=False)
        raise SystemExit(interrupt.EXIT_CODE) from None
    except interrupt.Terminated:
        if not interrupt.said():
            word, rest = interrupt.TERM_LINE.split(": ", 1)
            err_console.print(f"[red]{word}[/red]: {escape(rest)}", highlight=False)
        raise
    except passthrough:
        raise
    except EvalignError as e:
        if STATE["debug"]:
            raise
        _print_error(str(e))
        raise SystemExit(e.exit_code) from None
    except OSError as e:
        if STATE["debug"]:
            raise
        where = f"{e.filename}: " if e.filename else ""
        _print_error(f"{where}{e.strerror or e}")
        raise SystemExit(1) from None
    except RecursionError:
        if STATE["debug"]:
            raise
        _print_error("input nested too deeply to process (rerun with --debug for the traceback)")
        raise SystemExit(1) from None
    except MemoryError:
        if STATE["debug"]:
            raise
        _print_error("out of memory (try a smaller input or fewer metrics at once)")
        raise SystemExit(1) from None
    except Exception as e:
        if STATE["debug"]:
            raise
        _print_error(f"unexpected {type(e).__name__}: {e} (this is a bug in evalign; rerun with --debug for the "
                     "traceback and report it)")
        raise SystemExit(1) from None


def _click_exceptions() -> tuple[type[BaseException], ...]:
    """The option parser's own exits and usage errors (click's, and typer's vendored copy)."""
    out: list[type[BaseException]] = [SystemExit]
    for mod in ("click.exceptions", "typer._click.exceptions", "typer.exceptions"):
        with suppress(ImportError):
            m = __import__(mod, fromlist=["ClickException"])
            out += [getattr(m, n) for n in ("ClickException", "Exit", "Abort") if hasattr(m, n)]
    return tuple(out)


def exit_on_sigterm() -> None:
    """Make SIGTERM end the command like Ctrl-C does: one line (:data:`evalign.interrupt.TERM_LINE`)
    and exit 143, temporary output files removed and the old output kept. Called by the ``evalign``
    entry point (which prints the line for a SIGTERM that lands outside a verb)."""
    with suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, interrupt.raise_terminated)


def check_outputs(*outputs: tuple[str, Any, Sequence[str]], stdout_used: bool = False) -> list[str | None]:
    """Check every output of a command before any work: ``(option, path, formats)`` triples, e.g.
    ``("-o", out, ("jsonl", "csv", "tsv", "parquet"))``; ``path`` may be None (not asked for).
    Returns each format (None where not asked for). At most one output may be ``-`` (standard
    output), none when ``stdout_used`` (e.g. ``--json`` prints there), and no two outputs may be
    the same file."""
    fmts: list[str | None] = []
    seen: dict[str, str] = {}
    dash = stdout_used
    for option, path, formats in outputs:
        if path is None:
            fmts.append(None)
            continue
        text = str(path)
        if text == STDIO:
            if dash:
                raise UsageError(f"{option} -: standard output is already used (by --json or another output)")
            dash = True
        else:
            key = str(Path(text).expanduser().resolve())
            if key in seen:
                raise UsageError(f"{option} {text}: the same file as {seen[key]}")
            seen[key] = option
        try:
            fmts.append(check_output(path, formats=formats))
        except EvalignError as e:
            e.args = (f"{option} {e}",)
            raise
    return fmts


#: the options of ``meta`` / ``report`` that set each field of :class:`~evalign.meta.resampling.Resampling`
RESAMPLING_OPTIONS = {"n_resamples": "--bootstrap", "n_permutations": "--permutations", "confidence": "--confidence",
                      "alpha": "--alpha", "seed": "--seed", "method": "--resampling", "workers": "--workers"}


def resampling_of(options: Mapping[str, str] = RESAMPLING_OPTIONS, **settings: Any) -> Any:
    """The :class:`~evalign.meta.resampling.Resampling` of a command's options; a bad value is a
    :class:`~evalign.errors.UsageError` named as its option (``options``: field -> option)."""
    from evalign.errors import InputError
    from evalign.meta.resampling import Resampling

    try:
        return Resampling(**settings)
    except InputError as e:
        raise UsageError(f"{options.get(e.field or '', e.field)} {e.reason}") from None


def cache_input() -> dict[str, Path]:
    """The cache file as an input of a command that reads it (for
    :func:`~evalign.io.refuse_output_onto_inputs`: no output may replace it)."""
    from evalign.cache import default_cache_path

    return {"the cache ($EVALIGN_CACHE)": default_cache_path()}


def split_multi(values: Sequence[str] | None) -> list[str]:
    """Accept repeated options and comma-separated lists alike."""
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out
