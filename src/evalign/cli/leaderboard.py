"""``evalign leaderboard``: rank systems from pairwise verdicts (win rates, length-controlled win
rates, Bradley-Terry scores with bootstrap intervals and significance clusters, judge panels).

The command only parses its options into a
:class:`~evalign.rank.leaderboard_run.LeaderboardSpec` and renders the outcome of
:func:`~evalign.rank.leaderboard_run.run_leaderboard`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import CliError, check_outputs, console, emit_json, print_table, split_multi
from evalign.cli.panel_options import (
    PANEL_CALIBRATION,
    PANEL_MIN,
    PANEL_RULE,
    PANEL_TIE,
    calibration_weights_of,
    check_panel_options,
)
from evalign.io import FORMATS, refuse_output_onto_inputs, write_table
from evalign.report.tables import pairwise_board_display

VERDICTS_FILE: Any = typer.Argument(..., help="Pairwise verdicts: JSONL, JSON list, CSV, TSV or Parquet "
                                              "(system_a, system_b and a verdict column; - reads JSONL from stdin).")
VERDICT: Any = typer.Option(None, "--verdict", help="Verdict column (A / B / tie / unparseable); default 'verdict'.")
JUDGE: Any = typer.Option(None, "--judge", help="Judge column of `evalign judge` relative-mode output "
                                                "(NAME, NAME.ab, NAME.ba: both orders become battles).")
PANEL: Any = typer.Option([], "--panel", help="Verdict columns combined into one panel judge (repeatable), or "
                          "NAME=COL1,COL2,... (a panel with its name).")
BASELINE: Any = typer.Option(None, "--baseline-system", help="System for win_rate and lc_win_rate.")
ANCHOR: Any = typer.Option(None, "--anchor", help="System whose Bradley-Terry score is 1000 (default: the mean is).")
BOOTSTRAP: Any = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the BT intervals (0: none).")
RESAMPLE: Any = typer.Option("battles", "--resample", help="Bootstrap unit: battles or items (clustered by id).")
SEED: Any = typer.Option(0, "--seed", help="Seed of the bootstrap.")
ALPHA: Any = typer.Option(0.05, "--alpha", help="Significance level of the clusters.")
ORDERS: Any = typer.Option("pool", "--orders", help="Both presentation orders: pool (two battles) or combine (one).")
NO_LC: Any = typer.Option(False, "--no-lc", help="No length-controlled win rate.")
DIFFICULTY: Any = typer.Option("fitted", "--difficulty", help="LC instruction difficulty: fitted or zero.")
JUDGE_MODEL: Any = typer.Option([], "--judge-model", help="Judge model name(s) for the self-preference warning.")
SKIP_SELF: Any = typer.Option(False, "--skip-self", help="Drop battles that include a --judge-model's own outputs.")
TRUST_FROM: Any = typer.Option(None, "--trust-from", help="A meta-evaluation result (`evalign meta --json` output or "
                                                       "a run's evaluation.json) that ranked this judge: its "
                                                       "agreement with humans is shown above the table.")
TRUST_COLUMN: Any = typer.Option(None, "--trust-column", help="The judge's column in --trust-from (default: the ranked "
                                                             "column's name).")
HUMAN: Any = typer.Option(None, "--human", help="Human verdicts on a subset of the same battles (id, system_a, system_b, "
                                                "verdict; joined by id and systems): adds prediction-powered "
                                                "(PPI++) win rates and Bradley-Terry scores with intervals.")
HUMAN_VERDICT: Any = typer.Option("verdict", "--human-verdict", help="Verdict column of --human.")
STYLE_CONTROL: Any = typer.Option(False, "--style-control", help="Add Bradley-Terry scores with length and markdown "
                                                                 "(headers, lists, bold) as covariates "
                                                                 "(needs response_a / response_b).")
OUT: Any = typer.Option(None, "-o", "--out", help="Write the system table (.jsonl / .csv / .tsv / .parquet).")
AS_JSON: Any = typer.Option(False, "--json", help="Print the result as JSON.")

def register(app: typer.Typer) -> None:
    """Add ``leaderboard`` to ``app``."""
    app.command("leaderboard")(leaderboard_cmd)


def leaderboard_cmd(
    verdicts: Path = VERDICTS_FILE, verdict: str = VERDICT, judge: str = JUDGE, panel: list[str] = PANEL,
    panel_rule: str = PANEL_RULE, panel_tie: str = PANEL_TIE, panel_min: int = PANEL_MIN,
    panel_calibration: Path = PANEL_CALIBRATION, baseline_system: str = BASELINE, anchor: str = ANCHOR, bootstrap: int = BOOTSTRAP,
    resample: str = RESAMPLE, seed: int = SEED, alpha: float = ALPHA, orders: str = ORDERS, no_lc: bool = NO_LC,
    difficulty: str = DIFFICULTY, judge_model: list[str] = JUDGE_MODEL, skip_self: bool = SKIP_SELF,
    trust_from: Path = TRUST_FROM, trust_column: str = TRUST_COLUMN, human: Path = HUMAN,
    human_verdict: str = HUMAN_VERDICT, style_control: bool = STYLE_CONTROL, out: Path = OUT, as_json: bool = AS_JSON,
) -> None:
    """Rank systems from pairwise verdicts: Bradley-Terry scores with intervals, win rates, LC win rates."""
    from evalign.judges.option_rules import check_options  # the rules every command's options follow
    from evalign.rank.leaderboard_run import (  # scipy: not at every command's start
        leaderboard_spec,
        outcome_dict,
        panel_members,
        read_judge_trust,
        run_leaderboard,
    )

    check_options(alpha=alpha, seed=seed)
    check_outputs(("-o", out, FORMATS), stdout_used=as_json)
    refuse_output_onto_inputs({"-o": out}, {"VERDICTS_FILE": verdicts, "--trust-from": trust_from, "--human": human})
    check_panel_options(bool(panel), panel_rule, panel_tie, panel_min, False, panel_calibration)
    members = panel_members(panel)[1]
    weights = (calibration_weights_of(panel_calibration, list(members), graded=False)
               if panel_calibration is not None else None)
    spec = leaderboard_spec(verdict=verdict, judge=judge, panel=panel, panel_rule=panel_rule, panel_tie=panel_tie,
                            panel_min=panel_min,
                            baseline=baseline_system, anchor=anchor, bootstrap=bootstrap, resample=resample,
                            seed=seed, alpha=alpha, orders=orders, lc=not no_lc, difficulty=difficulty,
                            judge_models=split_multi(judge_model), skip_self=skip_self)
    if weights is not None:  # --panel-calibration: the weighted rule's weights
        import dataclasses

        spec = dataclasses.replace(spec, panel_weights=weights)
    if trust_column is not None and trust_from is None:
        raise CliError("--trust-column needs --trust-from (the meta-evaluation result it is a column of)")
    trust = read_judge_trust(trust_from, trust_column or spec.column) if trust_from is not None else None
    outcome = run_leaderboard(verdicts, spec, trust=trust, human=human, human_verdict=human_verdict,
                              style_control=style_control)
    if out is not None:
        write_table(outcome.board.table, out)
    if as_json:
        emit_json(outcome_dict(outcome))
        return
    render(outcome)


def render(o: Any) -> None:
    """The system table, folded to the terminal width, with notes and warnings directly under it."""
    from evalign.report.boards import outcome_lines, outcome_title  # scipy: not at every command's start

    console.print(escape(o.judge_line()), highlight=False)
    print_table(pairwise_board_display(o.board.table), title=outcome_title(o), digits=1)
    for line in outcome_lines(o):
        console.print(escape(line), highlight=False, soft_wrap=False)
    if getattr(o, "ppi", None) is not None or getattr(o, "style", None) is not None:
        render_extras(o)


def render_extras(o: Any) -> None:
    """The prediction-powered leaderboard and the style-controlled ratings, when asked for."""
    from evalign.report.boards import ppi_display, style_display

    if o.ppi is not None:
        p = o.ppi
        level = f"{1 - p.settings.alpha:.0%}"
        wr, bt = ppi_display(p)
        print_table(wr, title=f"Prediction-powered win rate {p.target} ({level} intervals; judge = the judge's "
                              f"verdicts alone, humans only = the {p.n_human} labelled battles alone)")
        if bt is not None:
            print_table(bt, title=f"Prediction-powered Bradley-Terry ({level} intervals)")
        for line in p.notes:
            console.print(escape(f"note: {line}"), highlight=False, soft_wrap=False)
    if o.style is not None:
        systems, coefs = style_display(o.style)
        print_table(systems, title=f"Style control: Bradley-Terry with length ({o.style.length_unit}) and markdown "
                                   f"as covariates ({'Wald' if o.style.intervals == 'wald' else 'bootstrap'} intervals); style effect = BT - "
                                   "BT style-controlled")
        print_table(coefs, title="Style coefficients (logit per standard deviation of the feature)")
        if o.style.constant:
            console.print(escape(f"note: constant features left out: {', '.join(o.style.constant)}"), highlight=False)
        if not o.style.converged:
            console.print(escape("note: the style fit did not converge (a system or a feature separates the verdicts "
                                 "perfectly, e.g. one that always wins): its ratings and coefficients are not "
                                 "reliable; add battles"), highlight=False)
