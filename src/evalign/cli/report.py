"""``evalign report``: meta-evaluate scored tables against human judgments and write one HTML page
(with the plots as PNG and the tables as Markdown and LaTeX beside it). The command parses its
options into an :class:`~evalign.evaluate.EvalSpec` and renders the result."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import CliError, Stages, console, emit_json, err_console, split_multi
from evalign.cli.dataset_options import DATA_DIR, DATASET


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""

    @app.command("report")
    def report_cmd(
        scored_file: Path = typer.Argument(None, help="Scored items (.jsonl/.csv/.parquet); for pairs, the scored "
                                                      "sides or a judged pair table (optional with --dataset: "
                                                      "the metrics are then computed)."),
        metric: list[str] = typer.Option([], "--metric", "-m", help="Metric column (repeatable or comma-separated)."),
        judge: list[str] = typer.Option([], "--judge", "-j", help="LLM-judge column (adds score-vs-length plots)."),
        human: str = typer.Option(None, "--human", help="Item-level human rating column of SCORED_FILE."),
        system_human: Path = typer.Option(
            None, "--system-human", help="System-level human values: JSON {system: value} or CSV system,value."
        ),
        human_lower_is_better: bool = typer.Option(False, "--human-lower-is-better", help="Human values are ranks/errors."),
        pairs_file: Path = typer.Option(None, "--pairs", help="Pair table with human preferences (pref_1, ...)."),
        pref: list[str] = typer.Option([], "--pref", help="Preference columns of the pair table (default: pref_*)."),
        dataset: str = DATASET,
        data_dir: Path = DATA_DIR,
        lower_is_better: list[str] = typer.Option([], "--lower-is-better", help="Metric columns where lower is better."),
        by: str = typer.Option(None, "--by", help="Column for the per-task breakdown (default: task, when present)."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples (and permutations)."),
        confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the intervals."),
        seed: int = typer.Option(0, "--seed"),
        title: str = typer.Option(None, "--title"),
        out: Path = typer.Option(Path("report.html"), "--out", "-o", help="HTML file; plots and tables go to <stem>_files/."),
        as_json: bool = typer.Option(False, "--json", help="Print the written paths and the evaluation as JSON."),
    ) -> None:
        """Compare metrics (and judges) with human judgments; write an HTML report with plots and tables."""
        from evalign.cli.meta import existing_columns
        from evalign.errors import EvalignError
        from evalign.evaluate import EvalSpec, Human, Resampling, TrustRequest, evaluate
        from evalign.evaluate.prepare import attach_labels, dataset_human, dataset_title, resolve_columns
        from evalign.io import read_items, read_pairs, read_system_human
        from evalign.report import write_report
        from evalign.report.assemble import from_results

        metrics = split_multi(metric)
        judges = split_multi(judge)
        if not metrics and not judges:
            raise CliError("give at least one --metric (or --judge) column")
        if human and system_human:
            raise CliError("give either --human or --system-human, not both")
        if bootstrap < 1 or not 0 < confidence < 1:
            raise CliError("--bootstrap must be at least 1 and --confidence between 0 and 1")
        if scored_file is None and not dataset:
            raise CliError("give a SCORED_FILE or --dataset NAME")
        first = _first_record(scored_file) if scored_file is not None else {}
        pairs = read_pairs(pairs_file) if pairs_file else None
        items: Any = None
        if "response_a" in first:  # a judged pair table
            pairs = read_pairs(scored_file)
        elif scored_file is not None:
            items = read_items(scored_file)
        pref_cols = split_multi(pref)
        subtitle = None
        ds = None
        if dataset:
            from evalign.cli.dataset_options import load_dataset_spec

            ds = load_dataset_spec(dataset, data_dir)
            subtitle = f"{ds.name}: {ds.description}. Licence: {ds.licence}. Source: {ds.citation}"
            title = title or f"evalign report: {ds.name}"
            if scored_file is None:
                if ds.items is not None and not pref_cols:
                    items = ds.items.copy()
                elif ds.pairs is not None:
                    pairs = ds.pairs
        side_table = items is not None and "side" in items.columns
        hum: Any
        if human:
            hum = Human(column=human, higher_is_better=not human_lower_is_better)
            if ds is not None and ds.items is not None and human in ds.items.columns:
                hum = dataset_human(ds, column=human)
        elif system_human:
            hum = Human(system=read_system_human(system_human), higher_is_better=not human_lower_is_better)
        elif pairs is not None or (ds is not None and ds.pairs is not None and (side_table or ds.items is None)):
            if pairs is None:
                pairs = ds.pairs  # type: ignore[union-attr]
            if pref_cols:
                hum = Human(pref_columns=tuple(pref_cols)) if ds is None else dataset_human(ds, pref=pref_cols)
            elif ds is not None and ds.pref_columns:
                hum = dataset_human(ds, pref=list(ds.pref_columns))
            else:
                cands = sorted((c for c in pairs.columns if str(c).startswith("pref_")), key=lambda c: (len(c), c))
                if not cands:
                    raise CliError("a pair table needs its preference columns: give --pref")
                hum = Human(pref_columns=tuple(cands))
        elif ds is not None:
            hum = dataset_human(ds)
        else:
            raise CliError("no human judgments: give --human COL, --system-human FILE, --pairs FILE or --dataset NAME")
        if ds is not None and items is not None and hum.kind == "item":
            items = attach_labels(items, ds, hum)
        if hum.kind == "pairs" and items is None:
            from evalign.datasets import pairs_to_items

            items = pairs_to_items(pairs)
        source = str(scored_file) if scored_file is not None else f"dataset {ds.name}"  # type: ignore[union-attr]
        names, lower = existing_columns(items, list(dict.fromkeys([*metrics, *judges])), split_multi(lower_is_better), {})
        table, cols, runs = resolve_columns(items, names, source=source, pairs=pairs if hum.kind == "pairs" else None,
                                            lower_is_better=lower)
        cols = [dataclasses.replace(c, kind="judge") if c.name in judges else c for c in cols]
        group_col = (pairs if hum.kind == "pairs" else table)
        if by is None:
            by = "task" if group_col is not None and "task" in group_col.columns and \
                group_col["task"].nunique() > 1 else None
        merges: list[str] = []
        if by == "task" and group_col is not None:  # "Yelp" and "yelp" are one task (the merge is listed)
            from evalign.report.data import MERGED_TASK, merge_labels

            merged, merges = merge_labels(group_col["task"])
            if merged:
                group_col = group_col.assign(**{MERGED_TASK: group_col["task"].astype(str).replace(merged)})
                if hum.kind == "pairs":
                    pairs = group_col
                else:
                    table = group_col
                by = MERGED_TASK
        if hum.kind == "item":
            requests: tuple[Any, ...] = (TrustRequest("kendall", "item", "item"), TrustRequest("kendall", "system"),
                                         TrustRequest("pairwise_accuracy", "item", "item"))
        elif hum.kind == "system":
            requests = (TrustRequest("kendall", "system"),)
        else:
            requests = (TrustRequest("preference_accuracy"),)
        try:
            spec = EvalSpec(human=hum, columns=tuple(cols), items=table, pairs=pairs if hum.kind == "pairs" else None,
                            by=by, trust=requests, resampling=Resampling(n_resamples=bootstrap, n_permutations=bootstrap,
                                                                         confidence=confidence, seed=seed),
                            source=source, dataset=dataset_title(ds) if ds is not None else None,
                            costs={r.column: r.seconds_per_1000 for r in runs}, curves=True,
                            min_group_size=10)
        except EvalignError as e:
            raise CliError(str(e)) from None
        with Stages(disable=as_json) as stages:
            stages.start(f"meta-evaluating: {bootstrap} bootstrap resamples and permutations")
            result = evaluate(spec, progress=stages.resampling())
        if result.refused:
            raise CliError(result.refused)
        data = from_results([result], title=title or f"evalign report: {source}", subtitle=subtitle, notes=merges,
                            runs={source: runs}, min_group_size=10,
                            item_table=table, human_col=hum.column, judge_cols=[c.name for c in cols if c.kind == "judge"],
                            pairs=pairs if hum.kind == "pairs" else None, human_higher_is_better=hum.higher_is_better)
        written = write_report(out.parent, data, html_name=out.name, assets=f"{out.stem}_files")
        if as_json:
            emit_json({**{k: str(v) for k, v in written.items()}, "evaluation": result.to_json()})
            return
        for w in result.warnings:
            err_console.print(f"[yellow]warning[/yellow]: {escape(w)}", highlight=False)
        n_fig = sum(k.startswith("figure:") for k in written)
        n_tab = sum(k.startswith("markdown:") for k in written)
        err_console.print(f"[dim]{n_fig} plots and {n_tab} tables in {escape(str(out.parent / (out.stem + '_files')))}[/dim]")
        console.print(escape(f"wrote {written['html']}"))


def _first_record(path: Path) -> dict[str, Any]:
    from evalign.io import _iter_records, detect_format

    for _, rec in _iter_records(path, detect_format(path)):
        return dict(rec)
    return {}
