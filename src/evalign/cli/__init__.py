"""The ``evalign`` command line (typer). Each verb lives in its own module."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from evalign.cache import default_cache_path
from evalign.cli import (
    bench,
    cache,
    datasets,
    demo,
    judge,
    meta,
    metrics,
    probe,
    report,
    score,
    synth,
    train_judge,
)
from evalign.cli import leaderboard as leaderboard_verb
from evalign.cli import run as run_verb
from evalign.cli.cache import cache_created_notice
from evalign.cli.common import STATE, err_console, exit_on_sigterm, handle_errors


class _Group(TyperGroup):
    """Runs every verb inside :func:`handle_errors` (one clear line, exit 1, no traceback)."""

    def invoke(self, ctx: Any) -> Any:
        existed = default_cache_path().is_file()
        try:
            with handle_errors():
                return super().invoke(ctx)
        finally:
            notice = cache_created_notice(existed)
            if notice:
                err_console.print(f"[dim]{escape(notice)}[/dim]", highlight=False)


app = typer.Typer(
    cls=_Group,
    name="evalign",
    help="Score LLM responses, judge them with LLMs, and check metrics and judges against human ratings.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors.")) -> None:
    STATE["debug"] = debug


def _register() -> None:
    for mod in (score, metrics, meta, judge, probe, leaderboard_verb, report, bench, demo, datasets, synth, train_judge,
                cache, run_verb):
        mod.register(app)


_register()


def main() -> None:
    """Entry point of the ``evalign`` script (SIGTERM ends it like Ctrl-C, see :func:`exit_on_sigterm`)."""
    exit_on_sigterm()
    app()
