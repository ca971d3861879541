"""Shared pieces of the command line: the console, tables, JSON output, field options."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from contextlib import contextmanager
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

from evalign.errors import EvalignError

console = Console(stderr=False)
err_console = Console(stderr=True)

#: global state set by the top-level callback
STATE: dict[str, Any] = {"debug": False}


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
    from evalign.io import _json_safe

    sys.stdout.write(json.dumps(_json_safe(obj), indent=2, ensure_ascii=False) + "\n")


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
    """An error in how the command was called."""


@contextmanager
def handle_errors() -> Any:
    """Turn expected errors into one clear line and exit code 1 (a traceback only with --debug)."""
    try:
        yield
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]: finished work is kept; run the same command again to resume")
        raise SystemExit(130) from None
    except (EvalignError, FileNotFoundError, PermissionError, OSError) as e:
        if STATE["debug"]:
            raise
        err_console.print(f"[red]error[/red]: {escape(str(e))}", highlight=False, markup=True, soft_wrap=True)
        raise SystemExit(1) from None


def split_multi(values: Sequence[str] | None) -> list[str]:
    """Accept repeated options and comma-separated lists alike."""
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out
