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
import re
import signal
import sys
from collections.abc import Sequence
from contextlib import contextmanager, suppress
from typing import Any

import pandas as pd
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

from evalign.errors import EvalignError, UsageError

console = Console(stderr=False)
err_console = Console(stderr=True)

#: global state set by the top-level callback
STATE: dict[str, Any] = {"debug": False}


def suggest(kind: str, name: str, known: Sequence[str], *, where: str | None = None) -> UsageError:
    """A :class:`UsageError` for an unknown ``kind`` of name (metric, judge, dataset, column, ...)
    with a "did you mean" (see :func:`evalign.errors.unknown_name`)."""
    from evalign.errors import unknown_name

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
    if v is None:
        return "-"
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.{digits}f}"
    return str(v)


def print_table(df: pd.DataFrame, title: str | None = None, digits: int = 4) -> None:
    """Print a DataFrame as a rich table."""
    table = Table(title=escape(title) if title else None, title_justify="left", header_style="bold")
    for c in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[c])
        table.add_column(escape(str(c)), justify="right" if numeric else "left", overflow="fold")
    for rec in df.itertuples(index=False):
        table.add_row(*[escape(fmt_value(v, digits)) for v in rec])
    console.print(table)


def emit_json(obj: Any) -> None:
    """Print machine-readable JSON to stdout (NaN as null)."""
    from evalign.io import _json_default, _json_safe

    sys.stdout.write(json.dumps(_json_safe(obj), indent=2, ensure_ascii=False, default=_json_default) + "\n")


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


class CliError(EvalignError):
    """An error in how the command was called, found by a verb's own checks (exit 1; prefer
    :class:`~evalign.errors.UsageError`, exit 2, for a bad option value)."""


def one_line(text: str, limit: int = 1000) -> str:
    """``text`` on one line (newlines and runs of whitespace around them collapsed), at most
    ``limit`` characters."""
    flat = re.sub(r"\s*[\r\n]+\s*", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _print_error(message: str) -> None:
    err_console.print(f"[red]error[/red]: {escape(one_line(message))}", highlight=False, markup=True, soft_wrap=True)


@contextmanager
def handle_errors() -> Any:
    """Turn every exception into one clear line and an exit code (a traceback only with --debug):
    :class:`EvalignError` -> its ``exit_code`` (1; 2 for :class:`UsageError`); a file-system error
    -> 1 naming the file; anything else -> 1 with its type and a hint to rerun with ``--debug``.
    Click's own exits and usage errors pass through unchanged."""
    passthrough = _click_exceptions()
    try:
        yield
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]: finished work is kept; run the same command again to resume")
        raise SystemExit(130) from None
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
    """Make SIGTERM end the command like Ctrl-C does (exit 143), so that temporary output files are
    removed and the old output is kept. Called by the ``evalign`` entry point."""

    def _term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    with suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, _term)


def check_outputs(*outputs: tuple[str, Any, Sequence[str]], stdout_used: bool = False) -> list[str | None]:
    """Check every output of a command before any work: ``(option, path, formats)`` triples, e.g.
    ``("-o", out, ("jsonl", "csv", "tsv", "parquet"))``; ``path`` may be None (not asked for).
    Returns each format (None where not asked for). At most one output may be ``-`` (standard
    output), none when ``stdout_used`` (e.g. ``--json`` prints there), and no two outputs may be
    the same file."""
    from pathlib import Path

    from evalign.io import STDIO, check_output

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


def split_multi(values: Sequence[str] | None) -> list[str]:
    """Accept repeated options and comma-separated lists alike."""
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out
