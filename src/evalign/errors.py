"""Errors raised by evalign, and the error contract of the command line.

Every failure a user can cause is an :class:`EvalignError` whose message is one line naming the
file, the 1-based line or row and the field or option. The command line prints that line after
``error:`` and exits with the error's :attr:`~EvalignError.exit_code`: 2 for a wrong command line
(:class:`UsageError`), 1 for everything else; a traceback is shown only with ``--debug``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable


class EvalignError(Exception):
    """Base class of every error evalign raises on purpose (bad input, missing model, ...)."""

    #: the command line's exit code for this error
    exit_code: int = 1


class UsageError(EvalignError):
    """The command line is wrong: an unknown or misspelled name, a bad option value or a bad
    combination of options. Exit code 2, as for the option parser's own errors."""

    exit_code = 2


class InputError(EvalignError, ValueError):
    """Bad input data. The message names the file, the line (1-based; ``line_word="row"`` for
    Parquet files and DataFrames), the 1-based character ``column`` when known, and the field."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        line_word: str = "line",
        column: int | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.column = column
        self.reason = message
        where = []
        if file is not None:
            where.append(str(file))
        if line is not None:
            where.append(f"{line_word} {line}" + (f" column {column}" if column is not None else ""))
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)

    def __reduce__(self):  # type: ignore[no-untyped-def]  # keep keyword arguments through pickling
        return (_rebuild_input_error, (self.reason, self.file, self.line, self.field, self.column, str(self)))


def _rebuild_input_error(reason: str, file: str | None, line: int | None, field: str | None,
                         column: int | None, text: str) -> InputError:
    e = InputError(reason, file=file, line=line, field=field, column=column)
    e.args = (text,)
    return e


class OutputError(EvalignError):
    """An output cannot be written (bad suffix, a directory, no permission, a value that the format
    cannot hold). The message names the output path the user gave, never a temporary file."""


class ModelLoadError(EvalignError):
    """A model could not be loaded; the message says which, why, and how to use a local copy."""


class BackendError(EvalignError):
    """A judge backend failed in a way that retries could not fix."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` names (difflib), or ``""``."""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_name(
    kind: str, name: str, known: Iterable[str], *, where: str | None = None, usage: bool = True
) -> EvalignError:
    """The one error for an unknown metric, judge, dataset, column or option name:
    ``[<where>: ]unknown <kind> '<name>' (did you mean '<closest>'?); known: a, b, c``.

    ``usage=True`` gives a :class:`UsageError` (exit 2; the name came from the command line),
    else an :class:`EvalignError`. Other verbs call this for their own kinds of names."""
    names = sorted({str(k) for k in known})
    hint = did_you_mean(name, names)
    shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
    msg = f"unknown {kind} '{name}'{hint}" + (f"; known: {shown}" if names else "")
    if where:
        msg = f"{where}: {msg}"
    return UsageError(msg) if usage else EvalignError(msg)


def check_all(*checks: Callable[[], object]) -> None:
    """Run every check (in order: the input first) and report every failure at once: one failing
    check raises its own error; several raise one error joining their messages with ``; `` (a
    :class:`UsageError` when all of them are, else an :class:`EvalignError`). A command that checks its
    arguments this way names all of the bad ones, not only the first."""
    errors: list[EvalignError] = []
    for check in checks:
        try:
            check()
        except EvalignError as e:
            errors.append(e)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        joined = "; ".join(str(e) for e in errors)
        raise UsageError(joined) if all(isinstance(e, UsageError) for e in errors) else EvalignError(joined)
