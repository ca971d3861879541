"""``evalign leaderboard``: rank systems from pairwise verdicts (win rates, length-controlled win
rates, Bradley-Terry scores with bootstrap intervals and significance clusters, judge panels).

The command only parses its options into a
:class:`~evalign.evaluate.leaderboard.LeaderboardSpec` and renders the outcome of
:func:`~evalign.evaluate.leaderboard.run_leaderboard`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import typer
from rich.markup import escape

from evalign.cli.common import CliError, check_outputs, console, emit_json, print_table, split_multi
from evalign.io import FORMATS, write_table

VERDICTS_FILE: Any = typer.Argument(..., help="Pairwise verdicts: JSONL, JSON list, CSV, TSV or Parquet "
                                              "(system_a, system_b and a verdict column; - reads JSONL from stdin).")
VERDICT: Any = typer.Option(None, "--verdict", help="Verdict column (A / B / tie / unparseable); default 'verdict'.")
JUDGE: Any = typer.Option(None, "--judge", help="Judge column of `evalign judge` relative-mode output "
                                                "(NAME, NAME.ab, NAME.ba: both orders become battles).")
PANEL: Any = typer.Option([], "--panel", help="Verdict columns combined into one panel judge (repeatable).")
PANEL_RULE: Any = typer.Option("majority", "--panel-rule", help="How the panel decides: majority or mean.")
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
OUT: Any = typer.Option(None, "-o", "--out", help="Write the system table (.jsonl / .csv / .tsv / .parquet).")
AS_JSON: Any = typer.Option(False, "--json", help="Print the result as JSON.")

#: the system table as shown: source column -> header (rates as percentages, as alpaca_eval prints)
SHOWN = {
    "rank": "rank", "cluster": "cluster", "system": "system", "bt_score": "bt_score", "bt_low": "bt_low",
    "bt_high": "bt_high", "win_rate": "win %", "lc_win_rate": "lc win %", "n_battles": "battles", "n_ties": "ties",
    "n_unparseable": "unparsed", "mean_length": "mean len", "position_agreement": "pos agree %",
}
PERCENT = ("win_rate", "lc_win_rate", "position_agreement")


def register(app: typer.Typer) -> None:
    """Add ``leaderboard`` to ``app``."""
    app.command("leaderboard")(leaderboard_cmd)


def leaderboard_cmd(
    verdicts: Path = VERDICTS_FILE, verdict: str = VERDICT, judge: str = JUDGE, panel: list[str] = PANEL,
    panel_rule: str = PANEL_RULE, baseline_system: str = BASELINE, anchor: str = ANCHOR, bootstrap: int = BOOTSTRAP,
    resample: str = RESAMPLE, seed: int = SEED, alpha: float = ALPHA, orders: str = ORDERS, no_lc: bool = NO_LC,
    difficulty: str = DIFFICULTY, judge_model: list[str] = JUDGE_MODEL, skip_self: bool = SKIP_SELF,
    trust_from: Path = TRUST_FROM, trust_column: str = TRUST_COLUMN, out: Path = OUT, as_json: bool = AS_JSON,
) -> None:
    """Rank systems from pairwise verdicts: Bradley-Terry scores with intervals, win rates, LC win rates."""
    from evalign.evaluate.leaderboard import (  # scipy: not at every command's start
        outcome_dict,
        read_judge_trust,
        run_leaderboard,
    )

    check_outputs(("-o", out, FORMATS), stdout_used=as_json)
    spec = leaderboard_spec(verdict=verdict, judge=judge, panel=split_multi(panel), panel_rule=panel_rule,
                            baseline=baseline_system, anchor=anchor, bootstrap=bootstrap, resample=resample,
                            seed=seed, alpha=alpha, orders=orders, lc=not no_lc, difficulty=difficulty,
                            judge_models=split_multi(judge_model), skip_self=skip_self)
    if trust_column is not None and trust_from is None:
        raise CliError("--trust-column needs --trust-from (the meta-evaluation result it is a column of)")
    trust = read_judge_trust(trust_from, trust_column or spec.column) if trust_from is not None else None
    outcome = run_leaderboard(verdicts, spec, trust=trust)
    if out is not None:
        write_table(outcome.board.table, out)
    if as_json:
        emit_json(outcome_dict(outcome))
        return
    render(outcome)


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise CliError(f"{option} must be one of {', '.join(choices)}, got '{value}'")
    return value


def leaderboard_spec(*, verdict: str | None, judge: str | None, panel: list[str], panel_rule: str,
                     baseline: str | None, anchor: str | None, bootstrap: int, resample: str, seed: int, alpha: float,
                     orders: str, lc: bool, difficulty: str, judge_models: list[str], skip_self: bool) -> Any:
    """The command's options as one frozen :class:`~evalign.evaluate.leaderboard.LeaderboardSpec`."""
    from evalign.evaluate.leaderboard import LeaderboardSpec  # scipy: not at every command's start
    from evalign.meta.leaderboard import BTSettings, LCSettings, LeaderboardSettings

    if bootstrap < 0:
        raise CliError("--bootstrap must be at least 0")
    if not 0 < alpha < 1:
        raise CliError("--alpha must be between 0 and 1")
    if skip_self and not judge_models:
        raise CliError("--skip-self needs --judge-model NAME (the judge whose own outputs to drop)")
    bt = BTSettings(anchor=anchor, n_bootstrap=bootstrap, seed=seed, alpha=alpha,
                    cluster=_choice("--resample", resample, ("battles", "items")) == "items")
    board = LeaderboardSettings(
        baseline=baseline, orders=_choice("--orders", orders, ("pool", "combine")), bt=bt,  # type: ignore[arg-type]
        lc=LCSettings(difficulty=_choice("--difficulty", difficulty, ("fitted", "zero"))) if lc else None,  # type: ignore[arg-type]
        judges=tuple(judge_models), skip_self=skip_self,
    )
    return LeaderboardSpec(verdict=verdict, judge=judge, panel=tuple(panel), board=board,
                           panel_rule=_choice("--panel-rule", panel_rule, ("majority", "mean")))  # type: ignore[arg-type]


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The system table as shown in the terminal (rates in percent; columns with nothing to show left out)."""
    shown = table[[c for c in SHOWN if c in table.columns]].copy()
    for c in PERCENT:
        if c in shown.columns:
            shown[c] = shown[c] * 100.0
    if "n_unparseable" in shown.columns and not shown["n_unparseable"].any():
        shown = shown.drop(columns="n_unparseable")
    if "cluster" in shown.columns and not shown["cluster"].any():
        shown = shown.drop(columns="cluster")
    shown = shown.drop(columns=[c for c in ("mean_length", "lc_win_rate") if c in shown and shown[c].isna().all()])
    return shown.rename(columns=SHOWN)


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


def title_of(o: Any) -> str:
    """One line naming the ranked column, the file and how the scores were computed."""
    b = o.board
    bt = b.bt.settings
    anchor = f"anchor {bt.anchor} = {bt.anchor_rating:g}" if bt.anchor else f"mean {bt.init_rating:g}"
    boot = (f"{bt.confidence:.0%} bootstrap over {'items' if bt.cluster else 'battles'}, {bt.n_bootstrap} resamples, "
            f"seed {bt.seed}" if bt.n_bootstrap else "no bootstrap")
    vs = f"; win % vs {b.settings.baseline}" if b.settings.baseline else ""
    return f"Leaderboard: {o.spec.column} on {o.source} ({o.n_rows} rows; Bradley-Terry, {anchor}; {boot}{vs})"


def footer_lines(o: Any) -> list[str]:
    """What is printed under the table: clusters, position agreement, the panel's agreement, notes."""
    b = o.board
    lines = []
    if b.bt.settings.n_bootstrap:
        lines.append(f"cluster 1 = not significantly below the best (alpha {b.bt.settings.alpha:g}); "
                     f"bt_low..bt_high = the interval")
    if b.positions is not None:
        p = b.positions
        lines.append(f"position agreement {_pct(p.agreement)} over {p.n_pairs} order-swapped pairs; "
                     f"first position chosen {_pct(p.first_position_rate)} of decisive verdicts")
    if o.panel is not None:
        pa = o.panel
        lines.append(f"panel of {', '.join(pa.members)} ({pa.how}): Fleiss' kappa {pa.fleiss_kappa:.3f}, "
                     f"Krippendorff's alpha {pa.krippendorff_alpha:.3f}, mean Cohen's kappa {pa.mean_cohen_kappa:.3f} "
                     f"({pa.n_complete} rows all judged)")
    lines.extend(f"note: {n}" for n in b.notes)
    return lines


def render(o: Any) -> None:
    """The system table, folded to the terminal width, with notes and warnings directly under it."""
    console.print(escape(o.judge_line()), highlight=False)
    print_table(display_table(o.board.table), title=title_of(o), digits=1)
    for line in footer_lines(o):
        console.print(escape(line), highlight=False, soft_wrap=False)
