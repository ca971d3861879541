"""``evalign escalate``: apply a selective calibration (``evalign meta --selective
--save-calibration CAL.json``) to a table of verdicts: the verdicts the judges may give, with the
judge that gave each, and the items left for people (a pair table ``read_pairs`` reads, or for
graded judges an item table ``read_items`` reads; both what ``evalign annotate`` reads); ``--audit`` adds a seeded random share of the decided items to the people's file,
marked. The work is :func:`evalign.evaluate.escalate.escalate`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import check_outputs, console, emit_json, err_console
from evalign.io import read_items, read_pairs, refuse_output_onto_inputs, write_table

CAL: Any = typer.Argument(..., help="Calibration file written by evalign meta --selective --save-calibration.")
VERDICTS: Any = typer.Argument(..., help="Pair table (or item table, graded judges) with the calibrated judges' "
                                         "verdicts and confidences (JSONL, JSON list, CSV, Parquet).")
OUT: Any = typer.Option(..., "--out", "-o", help="Decided items: the table with decided_by, verdict, confidence.")
REST: Any = typer.Option(..., "--rest", help="Items left for people: a pair or item table, as given (with the audit "
                                             "share, marked).")
AUDIT: Any = typer.Option(0.0, "--audit", help="Share of the decided items also sent to people, at random, marked "
                                               "audit (to check the verdicts given; the escalated items are the hard "
                                               "ones, not a sample).")
SEED: Any = typer.Option(0, "--seed", help="Seed of the audit draw.")
AS_JSON: Any = typer.Option(False, "--json", help="Print the summary as JSON.")
FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")


def register(app: typer.Typer) -> None:
    """Add ``escalate`` to ``app``."""
    app.command("escalate")(escalate_cmd)


def escalate_cmd(cal: Path = CAL, verdicts: Path = VERDICTS, out: Path = OUT, rest: Path = REST,
                 audit: float = AUDIT, seed: int = SEED, as_json: bool = AS_JSON) -> None:
    """Give the verdicts a calibrated judge (or cascade) may give; send the rest to people."""
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(audit=audit, seed=seed)
    check_outputs(("-o", out, FORMATS), ("--rest", rest, FORMATS), stdout_used=as_json)
    refuse_output_onto_inputs({"-o": out, "--rest": rest}, {"CAL": cal, "VERDICTS": verdicts})
    from evalign.evaluate.escalate import escalate, read_calibration  # pandas, scipy: not at --help
    calibration = read_calibration(cal)
    from evalign.annotate.items import is_pair_table

    table = read_pairs(verdicts) if is_pair_table(verdicts) else read_items(verdicts, default_system="-")
    decided, people, summary = escalate(calibration, table, audit=audit, seed=seed, source=str(verdicts))
    write_table(decided, out)
    write_table(people, rest)
    if as_json:
        emit_json(summary)
        return
    show_summary(summary, calibration)
    err_console.print(f"[dim]written: {escape(str(out))} (decided), {escape(str(rest))} (to people)[/dim]",
                      highlight=False)


def show_summary(summary: dict[str, Any], calibration: dict[str, Any]) -> None:
    """Who decided how many items, how many go to people, and the calibration's promise."""
    n = summary["n"]
    for judge, k in summary["decided"].items():
        console.print(f"{judge}: decided {k} of {n} ({k / n:.1%})" if n else f"{judge}: decided 0",
                      highlight=False, markup=False, emoji=False)
    console.print(escape(f"to people: {summary['to_people']} of {n}" + (
        f" + {summary['audit']} decided items drawn for audit" if summary["audit"] else "")), highlight=False)
    console.print(escape(f"the calibration's promise: with probability >= {1 - calibration['delta']:g} per stage, "
                         f"at least {1 - calibration['risk']:.0%} of the verdicts given agree with people "
                         "(for items drawn like the calibration items)"), highlight=False)
