"""``evalign run CONFIG.yaml``: a whole study (data, metrics, judges, meta-evaluation, report) from
one YAML file; see :mod:`evalign.run.config` for its layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import cache_input, console, emit_json, err_console, progress
from evalign.cli.meta import render
from evalign.metrics.base import Metric

CONFIG: Any = typer.Argument(..., help="Run config (YAML), or the name of a shipped one (demo).")
OUT: Any = typer.Option(None, "--out", "-o", help="Output folder (default: the config's report.out, "
                                                  "else evalign-<name>).")
FORCE: Any = typer.Option(False, "--force", help="Redo every step (default: skip steps already done).")
DRY_RUN: Any = typer.Option(False, "--dry-run", help="Check the config and print it resolved (every default "
                                                     "filled in) without scoring, judging or writing.")
AS_JSON: Any = typer.Option(False, "--json", help="Print the evaluations as JSON.")


def register(app: typer.Typer) -> None:
    """Add ``run`` to ``app``."""
    app.command("run")(run_cmd)


def run_cmd(config: str = CONFIG, out: Path = OUT, force: bool = FORCE, dry_run: bool = DRY_RUN,
            as_json: bool = AS_JSON) -> None:
    """Run the study a config file describes; write its outputs, report and resolved config."""
    from evalign.io import OutputFolder, refuse_output_onto_inputs
    from evalign.run import load_config, run_config  # scipy: not at every command's start
    from evalign.run.execute import dry_run as resolved_text  # scipy: not at every command's start

    cfg = load_config(config)
    refuse_output_onto_inputs({"--out": OutputFolder(cfg.out_dir(out), run_files(cfg))}, run_inputs(cfg))
    if dry_run:
        console.print(escape(resolved_text(cfg, out=out)), end="", highlight=False, soft_wrap=True)
        return

    def step(msg: str) -> None:
        if not as_json:
            err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)

    with progress(transient=True, disable=as_json) as bar:
        task = bar.add_task("", total=None, visible=False)

        def on_progress(m: Metric, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, description=f"  {m.name} texts", visible=done < total)

        outcome = run_config(cfg, out=out, force=force, step=step, on_progress=on_progress)
    if as_json:
        emit_json({"out": str(outcome.out), "signature_changes": outcome.warnings,
                   "evaluations": {o.name: o.result.to_json() for o in outcome.evaluations}})
    else:
        _render(outcome)
    if any(o.result.refused for o in outcome.evaluations):
        raise SystemExit(1)


def run_files(cfg: Any) -> tuple[str, ...]:
    """What a run writes in its output folder: a folder per evaluation, the leaderboards, the report
    and ``run.json`` (``resolved.yaml`` too, but ``evalign run OUT/resolved.yaml`` is the documented
    way to redo a run: the config is read whole before it is written again)."""
    return (*(f"{ev.name}/*" for ev in cfg.evaluations), "leaderboards/*", "run.json", "report.html", "figures/*",
            "tables/*")


def run_inputs(cfg: Any) -> dict[str, Any]:
    """The files a run reads, by where the config names them."""
    return {"CONFIG": cfg.path, **cache_input(), **{f"{ev.name}: data.file": ev.data.file for ev in cfg.evaluations},
            **{f"leaderboard {lc.name}: verdicts": lc.verdicts for lc in cfg.leaderboards}}


def _render(outcome: Any) -> None:
    """Print a :class:`~evalign.run.RunOutcome`: each evaluation, the warnings, what was written."""
    for o in outcome.evaluations:
        console.rule(escape(f"{o.name}"))
        render(o.result)
    for w in outcome.warnings:
        err_console.print(f"[yellow]warning[/yellow]: {escape(w)}", highlight=False)
    console.print(escape(f"wrote {len(outcome.files)} files to {outcome.out}/ (resolved config: "
                         f"{outcome.out / 'resolved.yaml'})"))
