"""``evalign report``: meta-evaluate scored tables against human judgments and write one HTML page
(with the plots as PNG and the tables as Markdown and LaTeX beside it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import CliError, console, emit_json, err_console, split_multi

#: columns of a scored table that are never metrics (used to list candidates in an error)
_NOT_METRICS = ("id", "system", "instruction", "input", "reference", "response", "task", "language", "side")


def _numeric(df: Any, cols: list[str], what: str) -> None:
    import pandas as pd

    from evalign.errors import InputError

    source = df.attrs.get("source")
    for c in cols:
        if c not in df.columns:
            cands = [x for x in df.columns if x not in _NOT_METRICS and pd.api.types.is_numeric_dtype(df[x])]
            raise InputError(f"no {what} column '{c}' (numeric columns: {', '.join(map(str, cands)) or 'none'})", file=source, field=c)
        try:
            df[c] = pd.to_numeric(df[c], errors="raise").astype(float)
        except (ValueError, TypeError) as e:
            raise InputError(f"{what} column must be numeric ({e})", file=source, field=c) from e


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @app.command("report")
    def report_cmd(
        scored_file: Path = typer.Argument(..., help="Scored items (.jsonl/.csv/.parquet); for --pairs, the scored sides."),
        metric: list[str] = typer.Option([], "--metric", "-m", help="Metric column (repeatable or comma-separated)."),
        judge: list[str] = typer.Option([], "--judge", "-j", help="LLM-judge score column (adds score-vs-length plots)."),
        human: str = typer.Option(None, "--human", help="Item-level human rating column of SCORED_FILE."),
        system_human: Path = typer.Option(
            None, "--system-human", help="System-level human values: JSON {system: value} or CSV system,value."
        ),
        human_lower_is_better: bool = typer.Option(False, "--human-lower-is-better", help="Human values are ranks/errors."),
        pairs_file: Path = typer.Option(None, "--pairs", help="Pair table with human preferences (pref_1, ...)."),
        pref: list[str] = typer.Option([], "--pref", help="Preference columns of the pair table (default: pref_*)."),
        dataset: str = typer.Option(None, "--dataset", help="Take human labels from a registered dataset (e.g. tulu1)."),
        data_dir: Path = typer.Option(None, "--data-dir", help="Folder of dataset files that are not bundled."),
        lower_is_better: list[str] = typer.Option([], "--lower-is-better", help="Metric columns where lower is better."),
        by: str = typer.Option("task", "--by", help="Column for the per-task breakdown ('' for none)."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples (and permutations)."),
        confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the intervals."),
        seed: int = typer.Option(0, "--seed"),
        title: str = typer.Option(None, "--title"),
        out: Path = typer.Option(Path("report.html"), "--out", "-o", help="HTML file; plots and tables go to <stem>_files/."),
        as_json: bool = typer.Option(False, "--json", help="Print the written paths as JSON."),
    ) -> None:
        """Compare metrics (and judges) with human judgments; write an HTML report with plots and tables."""
        from evalign.io import read_items, read_pairs, read_system_human
        from evalign.report import write_report
        from evalign.report.assemble import report_data

        metrics = split_multi(metric)
        judges = split_multi(judge)
        if not metrics and not judges:
            raise CliError("give at least one --metric (or --judge) column")
        if human and system_human:
            raise CliError("give either --human or --system-human, not both")
        items = read_items(scored_file)
        pairs = read_pairs(pairs_file) if pairs_file else None
        pref_cols = split_multi(pref)
        sys_human = read_system_human(system_human) if system_human else None
        human_hib = not human_lower_is_better
        system_hib = not human_lower_is_better
        subtitle = None
        notes: list[str] = []
        if dataset:
            from evalign.datasets import load_dataset

            ds = load_dataset(dataset, **({"data_dir": data_dir} if data_dir else {}))
            subtitle = f"{ds.name}: {ds.description}. Licence: {ds.licence}. Source: {ds.citation}"
            title = title or f"evalign report: {ds.name}"
            side_table = "side" in items.columns
            if ds.pairs is not None and pairs is None and side_table:
                pairs, pref_cols = ds.pairs, pref_cols or list(ds.pref_columns)
            elif ds.items is not None and not human and not sys_human and ds.human_columns:
                human, human_hib = ds.human_columns[0], ds.human_higher_is_better
                if human not in items.columns:
                    keep = ds.items[["id", "system", human]].astype({"id": str})
                    items = items.merge(keep, on=["id", "system"], how="left", validate="one_to_one")
                    items.attrs["source"] = str(scored_file)
            elif ds.system_human is not None and not human and not sys_human:
                sys_human, system_hib = ds.system_human, ds.system_human_higher_is_better
        if pairs is not None and not pref_cols:
            pref_cols = sorted((c for c in pairs.columns if str(c).startswith("pref_")), key=lambda c: (len(c), c))
        if human:
            _numeric(items, [human], "human rating")
        if pairs is None or "side" in items.columns:
            _numeric(items, metrics + judges, "metric")
        if not human and sys_human is None and pairs is None:
            raise CliError("no human judgments: give --human COL, --system-human FILE, --pairs FILE or --dataset NAME")
        data = report_data(
            items,
            metrics,
            human=human,
            human_higher_is_better=human_hib,
            system_human=sys_human,
            system_human_higher_is_better=system_hib,
            pairs=pairs,
            pref_columns=pref_cols,
            judges=judges,
            lower_is_better=split_multi(lower_is_better),
            by=by or None,
            n_resamples=bootstrap,
            confidence=confidence,
            seed=seed,
            title=title or f"evalign report: {scored_file.name}",
            subtitle=subtitle,
            notes=notes,
        )
        written = write_report(out.parent, data, html_name=out.name, assets=f"{out.stem}_files")
        if as_json:
            emit_json({k: str(v) for k, v in written.items()})
            return
        n_fig = sum(k.startswith("figure:") for k in written)
        n_tab = sum(k.startswith("markdown:") for k in written)
        err_console.print(f"[dim]{n_fig} plots and {n_tab} tables in {escape(str(out.parent / (out.stem + '_files')))}[/dim]")
        console.print(escape(f"wrote {written['html']}"))
