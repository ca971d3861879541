"""``evalign demo``: the whole pipeline on the bundled human-rated data, offline."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from evalign.cli.common import console, emit_json, err_console, print_table


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""

    @app.command("demo")
    def demo_cmd(
        out: Path = typer.Option(Path("evalign-demo"), "--out", "-o", help="Folder for tables, scored items, report."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the intervals."),
        seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap and permutation tests."),
        as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout instead of tables."),
    ) -> None:
        """Score the bundled Self-Instruct and PandaLM data with every offline metric and show which
        metric agrees best with the human judgments."""
        import json

        from evalign.demo import run_demo, write_demo

        def step(msg: str) -> None:
            if not as_json:
                err_console.print(f"[dim]{msg}[/dim]", highlight=False)

        result = run_demo(n_resamples=bootstrap, seed=seed, on_step=step)
        paths = write_demo(result, out)
        if as_json:
            emit_json(json.loads((out / "summary.json").read_text(encoding="utf-8")))
            return
        print_table(
            result.leaderboard,
            title="Self-Instruct leaderboard: system scores beside the human rank (1 = best)",
            digits=3,
        )
        print_table(
            _show(result.correlations),
            title="System-level agreement with the human ranking (Kendall tau; 95% bootstrap CI over items)",
            digits=3,
        )
        print_table(
            _show(result.preference),
            title="PandaLM: pairwise preference accuracy vs 3-annotator majority (ties calibrated; 95% CI)",
            digits=3,
        )
        for note in result.notes:
            err_console.print(f"[dim]note: {note}[/dim]", highlight=False)
        console.print(f"wrote {len(paths)} files to {out}/ (report: {paths.get('html', out / 'report.html')})")


def _show(df: pd.DataFrame) -> pd.DataFrame:
    """Columns worth a terminal table."""
    keep = [c for c in df.columns if c not in ("table", "statistic", "level", "group")]
    return df[keep]
