"""The ``evalign`` command line (typer). Each verb lives in its own module."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from evalign.cli.common import STATE, handle_errors


class _Group(TyperGroup):
    """Runs every verb inside :func:`handle_errors` (one clear line, exit 1, no traceback)."""

    def invoke(self, ctx: Any) -> Any:
        with handle_errors():
            return super().invoke(ctx)


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
    from evalign.cli import demo, judge, meta, metrics, report, score, synth, train_judge

    for mod in (score, metrics, meta, judge, report, demo, synth, train_judge):
        mod.register(app)


_register()


def main() -> None:
    """Entry point of the ``evalign`` script."""
    app()
