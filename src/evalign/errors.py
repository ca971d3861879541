"""Errors raised by evalign. The CLI turns any :class:`EvalignError` into one clear line."""

from __future__ import annotations


class EvalignError(Exception):
    """Base class of every error evalign raises on purpose (bad input, missing model, ...)."""


class InputError(EvalignError, ValueError):
    """Bad input data. The message names the file, the line (1-based; ``line_word="row"`` for
    Parquet files and DataFrames) and the field when known."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
        line_word: str = "line",
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = message
        where = []
        if file is not None:
            where.append(str(file))
        if line is not None:
            where.append(f"{line_word} {line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class ModelLoadError(EvalignError):
    """A model could not be loaded; the message says which, why, and how to use a local copy."""


class BackendError(EvalignError):
    """A judge backend failed in a way that retries could not fix."""
