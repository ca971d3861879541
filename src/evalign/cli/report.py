"""Placeholder: this verb is being written."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this verb to ``app``."""
