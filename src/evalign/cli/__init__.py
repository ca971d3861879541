"""The ``evalign`` command line (typer). Each verb lives in its own module."""

from __future__ import annotations

import typer

from evalign.cli.common import STATE, handle_errors

app = typer.Typer(
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
    from evalign.cli import demo, judge, meta, metrics, report, score

    for mod in (score, metrics, meta, judge, report, demo):
        mod.register(app)


_register()


def main() -> None:
    """Entry point of the ``evalign`` script."""
    with handle_errors():
        app()
