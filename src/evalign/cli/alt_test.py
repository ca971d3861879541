"""``evalign alt-test``: can an LLM judge replace one of the annotators? The Alt-Test (Calderon et
al. 2025) on files in its own format: ``HUMANS.json`` ``{annotator: {item: label}}`` and
``JUDGES.json`` ``{judge: {item: label}}`` (or one judge's ``{item: label}``).

The command parses its options into an :class:`~evalign.meta.alt_test.AltTestSettings` and renders
the :class:`~evalign.meta.alt_test.AltTestReport` of :func:`~evalign.evaluate.alt_test.alt_test_files`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import CliError, console, emit_json, err_console, print_table, split_multi
from evalign.errors import InputError, UsageError

HUMANS: Any = typer.Argument(..., help="Annotators' labels: JSON {annotator: {item: label}}.")
JUDGES: Any = typer.Argument(..., help="Judges' labels: JSON {judge: {item: label}} or one judge's {item: label}.")
EPSILON: Any = typer.Option(None, "--epsilon", help="Cost-benefit margin epsilon in [0, 1) (default: by --annotators).")
KIND: Any = typer.Option(None, "--annotators", help="Who the annotators are, for the paper's epsilon: experts (0.2), "
                                                  "skilled (0.15) or crowd (0.1); neither option: 0.1.")
Q: Any = typer.Option(0.05, "--q", help="False discovery rate of the Benjamini-Yekutieli procedure.")
SCORING: Any = typer.Option("auto", "--scoring", help="Scoring function: accuracy, neg_rmse, neg_mae, or auto "
                                                     "(accuracy for text labels, neg_rmse for numbers).")
MIN_ANNOTATORS: Any = typer.Option(2, "--min-annotators", help="Annotators an item needs to be used.")
MIN_ITEMS: Any = typer.Option(30, "--min-items", help="Items an annotator needs to be tested.")
JUDGE: Any = typer.Option([], "--judge", help="Judges to test (repeatable; default: all of JUDGES.json).")
AS_JSON: Any = typer.Option(False, "--json", help="Print machine-readable JSON.")
#: the settings' fields by the option that sets them (an error names the option)
_OPTIONS = {"epsilon": "--epsilon", "annotator_kind": "--annotators", "q": "--q", "scoring": "--scoring",
            "min_annotators": "--min-annotators", "min_items": "--min-items"}


@contextmanager
def named_settings() -> Iterator[None]:
    """Alt-Test settings built in the block: a bad value is an error naming its option (``--min-items
    must be an integer >= 2, got 1``), the words ``evalign alt-test`` and ``evalign meta --alt-test``
    both say."""
    try:
        yield
    except InputError as e:  # a bad option value: named as the option, as every command names it
        option = _OPTIONS.get(e.field or "")
        if option is None:
            raise CliError(str(e)) from None
        raise UsageError(f"{option} {e.reason}" if e.reason.startswith("must") else f"{option}: {e.reason}") from None


def register(app: typer.Typer) -> None:
    """Add ``alt-test`` to ``app``."""
    app.command("alt-test")(alt_test_cmd)


def alt_test_cmd(
    humans: Path = HUMANS, judges: Path = JUDGES, epsilon: float = EPSILON, annotators: str = KIND, q: float = Q,
    scoring: str = SCORING, min_annotators: int = MIN_ANNOTATORS, min_items: int = MIN_ITEMS,
    judge: list[str] = JUDGE, as_json: bool = AS_JSON,
) -> None:
    """The Alt-Test: can a judge replace an annotator? Winning rate, advantage probability, p-values."""
    from evalign.evaluate.alt_test import alt_test_files  # scipy: not at every command's start
    from evalign.meta.alt_test import settings_for  # scipy: not at every command's start

    if epsilon is not None and annotators is not None:
        raise CliError("give --epsilon or --annotators, not both")
    with named_settings():
        settings = settings_for(epsilon, annotators, q=q, scoring=scoring, min_annotators=min_annotators,
                                min_items=min_items)
    report = alt_test_files(humans, judges, settings=settings, only=split_multi(judge))
    if as_json:
        emit_json(report.to_json())
        return
    render(report)


def render(report: Any) -> None:
    """An :class:`~evalign.meta.alt_test.AltTestReport` in the terminal: the judges, the p-values
    per annotator, what the minimums left out and the notes."""
    from evalign.report.tables import alt_test_display, alt_test_p_display  # pandas: not at start

    print_table(alt_test_display(report.table()), title=report.title, digits=3)
    p = alt_test_p_display(report.p_values())
    if not p.empty:
        print_table(p, title="p-value per left-out annotator (H0: the annotator's advantage >= epsilon; "
                             "* = rejected: the judge wins against that annotator)")
    console.print(escape(f"settings: {report.describe()}"), highlight=False)
    for line in report.dropped():
        err_console.print(f"[dim]left out: {escape(line)}[/dim]", highlight=False)
    for note in report.notes:
        err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
