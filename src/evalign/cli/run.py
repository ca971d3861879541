"""``evalign run CONFIG.yaml``: a whole study (data, metrics, judges, meta-evaluation, report) from
one YAML file; see :mod:`evalign.run.config` for its layout."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from evalign.cli.common import console, emit_json, err_console, progress


def register(app: typer.Typer) -> None:
    """Add ``run`` to ``app``."""

    @app.command("run")
    def run_cmd(
        config: str = typer.Argument(..., help="Run config (YAML), or the name of a shipped one (demo)."),
        out: Path = typer.Option(None, "--out", "-o", help="Output folder (default: the config's report.out, "
                                                           "else evalign-<name>)."),
        force: bool = typer.Option(False, "--force", help="Redo every step (default: skip steps already done)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Check the config and print it resolved (every default "
                                                              "filled in) without scoring, judging or writing."),
        as_json: bool = typer.Option(False, "--json", help="Print the evaluations as JSON."),
    ) -> None:
        """Run the study a config file describes; write its outputs, report and resolved config."""
        import yaml

        from evalign.io import _json_safe
        from evalign.metrics.base import Metric
        from evalign.run import load_config, resolve, run_config
        from evalign.run.execute import dry_meta

        cfg = load_config(config)
        if dry_run:
            folder = cfg.out_dir(out)
            resolved = resolve(cfg, [], folder, partial=True, metas=dry_meta(cfg))
            resolved.pop("signatures")
            sys_out = yaml.safe_dump(_json_safe(resolved), sort_keys=False, allow_unicode=True, width=100)
            console.print(escape(sys_out), end="", highlight=False, soft_wrap=True)
            return

        def step(msg: str) -> None:
            if not as_json:
                err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)

        with progress(transient=True, disable=as_json) as bar:
            task = bar.add_task("", total=None, visible=False)

            def on_progress(m: Metric, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=f"  {m.name} texts", visible=done < total)

            outcome = run_config(cfg, out=out, force=force, step=step, on_progress=on_progress)
        refused = [o for o in outcome.evaluations if o.result.refused]
        if as_json:
            emit_json({"out": str(outcome.out), "signature_changes": outcome.warnings,
                       "evaluations": {o.name: o.result.to_json() for o in outcome.evaluations}})
        else:
            from evalign.cli.meta import render

            for o in outcome.evaluations:
                console.rule(escape(f"{o.name}"))
                render(o.result)
            for w in outcome.warnings:
                err_console.print(f"[yellow]warning[/yellow]: {escape(w)}", highlight=False)
            console.print(escape(f"wrote {len(outcome.files)} files to {outcome.out}/ (resolved config: "
                                 f"{outcome.out / 'resolved.yaml'})"))
        if refused:
            raise SystemExit(1)
