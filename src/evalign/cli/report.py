"""``evalign report``: meta-evaluate scored tables against human judgments and write one HTML page
(with the plots as PNG and the tables as Markdown and LaTeX beside it). The command parses its
options into an :class:`~evalign.evaluate.EvalSpec` and renders the result."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import (
    RESAMPLING_OPTIONS,
    CliError,
    Stages,
    console,
    emit_json,
    err_console,
    resampling_of,
    split_multi,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, LABELS
from evalign.cli.meta import (
    AGREEMENT,
    ALT_TEST,
    EPSILON,
    PRICE,
    PRICES,
    PUBLISHED,
    RESAMPLING,
    WORKERS,
    check_resampling,
    existing_columns,
    with_judge_tests,
)
from evalign.cli.published import published_settings, run_published
from evalign.cli.selective_options import (
    CASCADE,
    DELTA,
    HOLDOUT,
    RISK,
    SELECTIVE,
    selective_errors,
    selective_request,
    with_selective,
)
from evalign.datasets import default_metrics
from evalign.errors import EvalignError
from evalign.report.data import MERGED_TASK, merge_labels

SCORED_FILE: Any = typer.Argument(None, help="Scored items (.jsonl/.csv/.parquet); for pairs, the scored "
                                             "sides or a judged pair table (optional with --dataset: "
                                             "the metrics are then computed).")
METRIC: Any = typer.Option([], "--metric", "-m", help="Metric column (repeatable or comma-separated).")
JUDGE: Any = typer.Option([], "--judge", "-j", help="LLM-judge column (adds score-vs-length plots).")
HUMAN: Any = typer.Option(None, "--human", help="Item-level human rating column of SCORED_FILE.")
SYSTEM_HUMAN: Any = typer.Option(
    None, "--system-human", help="System-level human values: JSON {system: value} or CSV system,value."
)
HUMAN_LOWER: Any = typer.Option(False, "--human-lower-is-better", "--lower-is-better",
                                help="Lower human values are better (ranks, errors); the same switch as meta's.")
PAIRS_FILE: Any = typer.Option(None, "--pairs", help="Pair table with human preferences (pref_1, ...).")
PREF: Any = typer.Option([], "--pref", help="Preference columns of the pair table (default: pref_*).")
METRIC_LOWER: Any = typer.Option([], "--metric-lower-is-better",
                                 help="Metric columns where lower is better (repeatable), as in meta.")
BY: Any = typer.Option(None, "--by", help="Column for the per-task breakdown (default: task, when present).")
BOOTSTRAP: Any = typer.Option(1000, "--bootstrap", help="Bootstrap resamples (and permutations).")
CONFIDENCE: Any = typer.Option(0.95, "--confidence", help="Confidence level of the intervals.")
SEED: Any = typer.Option(0, "--seed")
TITLE: Any = typer.Option(None, "--title")
OUT: Any = typer.Option(Path("report.html"), "--out", "-o", help="HTML file; plots and tables go to <stem>_files/.")
AS_JSON: Any = typer.Option(False, "--json", help="Print the written paths and the evaluation as JSON.")


def register(app: typer.Typer) -> None:
    """Add ``report`` to ``app``."""
    app.command("report")(report_cmd)


def report_cmd(
    scored_file: Path = SCORED_FILE, metric: list[str] = METRIC, judge: list[str] = JUDGE, human: str = HUMAN,
    system_human: Path = SYSTEM_HUMAN, human_lower_is_better: bool = HUMAN_LOWER, pairs_file: Path = PAIRS_FILE,
    pref: list[str] = PREF, dataset: str = DATASET, data_dir: Path = DATA_DIR, labels: str = LABELS,
    metric_lower: list[str] = METRIC_LOWER, by: str = BY, bootstrap: int = BOOTSTRAP,
    confidence: float = CONFIDENCE, seed: int = SEED, resampling_method: str = RESAMPLING, workers: int = WORKERS,
    title: str = TITLE, out: Path = OUT, as_json: bool = AS_JSON, price: list[str] = PRICE, prices: Path = PRICES,
    alt_test: bool = ALT_TEST, epsilon: float = EPSILON, agreement: bool = AGREEMENT, published: bool = PUBLISHED,
    selective: bool = SELECTIVE, risk: float = RISK, delta: float = DELTA, cascade: str = CASCADE,
    holdout: float = HOLDOUT,
) -> None:
    """Compare metrics (and judges) with human judgments; write an HTML report with plots and tables."""
    from evalign.evaluate import evaluate  # scipy: not at every command's start
    from evalign.evaluate.inputs import InputSettings  # scipy: not at every command's start
    from evalign.io import OutputFolder, refuse_output_onto_inputs
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(bootstrap=bootstrap, confidence=confidence, seed=seed)
    refuse_output_onto_inputs({"-o": out, "-o (its files)": OutputFolder(out.parent / f"{out.stem}_files")},
                              {"SCORED_FILE": scored_file, "--pairs": pairs_file, "--system-human": system_human,
                               "--prices": prices})
    if published:
        _published_report(scored_file, metric, judge, dataset, data_dir, bootstrap, confidence, seed, epsilon, title,
                          out, as_json)
        return
    metrics = split_multi(metric)
    judges = split_multi(judge)
    if not metrics and not judges and (scored_file is not None or not dataset):
        raise CliError("give at least one --metric (or --judge) column (with --dataset NAME alone, the dataset's "
                       "default metrics are computed)")
    if human and system_human:
        raise CliError("give either --human or --system-human, not both")
    if scored_file is None and not dataset:
        raise CliError("give a SCORED_FILE or --dataset NAME")
    check_resampling(resampling_method, workers)
    sel = selective_request(selective, risk, delta, cascade, holdout, None, seed=seed, confidence=confidence,
                            published=published)
    settings = InputSettings(file=scored_file, dataset=dataset, data_dir=data_dir, human=human,
                             system_human=system_human, lower_is_better=human_lower_is_better,
                             pref=tuple(split_multi(pref)), pairs_file=pairs_file, rule="tables", label_set=labels)
    resampling = resampling_of({**RESAMPLING_OPTIONS, "n_permutations": "--bootstrap"}, n_resamples=bootstrap,
                               n_permutations=bootstrap, confidence=confidence, seed=seed, method=resampling_method,
                               workers=workers)
    from evalign.judges.usage import price_book

    job = report_job(settings, metrics, judges, split_multi(metric_lower), by=by, resampling=resampling,
                     prices=price_book(prices, list(price)))
    job = dataclasses.replace(job, spec=with_judge_tests(job.spec, dataset, alt_test=alt_test, epsilon=epsilon,
                                                         agreement=agreement))
    job = dataclasses.replace(job, spec=with_selective(job.spec, sel))
    with Stages(disable=as_json) as stages, selective_errors(sel):
        stages.start(f"meta-evaluating: {bootstrap} bootstrap resamples and permutations")
        result = evaluate(job.spec, progress=stages.resampling())
    if result.refused:
        raise CliError(result.refused)
    written = write_report_files(job, result, title=title, out=out)
    if as_json:
        emit_json({**{k: str(v) for k, v in written.items()}, "evaluation": result.to_json()})
        return
    for w in result.warnings:
        err_console.print(f"[yellow]warning[/yellow]: {escape(w)}", highlight=False)
    n_fig = sum(k.startswith("figure:") for k in written)
    n_tab = sum(k.startswith("markdown:") for k in written)
    err_console.print(f"[dim]{n_fig} plots and {n_tab} tables in {escape(str(out.parent / (out.stem + '_files')))}[/dim]")
    console.print(escape(f"wrote {written['html']}"))


def _published_report(scored_file: Path | None, metric: list[str], judge: list[str], dataset: str | None,
                      data_dir: Path | None, bootstrap: int, confidence: float, seed: int, epsilon: float | None,
                      title: str | None, out: Path, as_json: bool) -> None:
    """``evalign report --published``: the cross-set table as a report page."""
    from evalign.report.build import write_report  # matplotlib: not at every command's start
    from evalign.report.data import ReportData

    if scored_file is not None or metric or judge:
        raise CliError("--published evaluates every dataset's own columns: not with SCORED_FILE, --metric or --judge")
    settings = published_settings(datasets=dataset, data_dir=data_dir, bootstrap=bootstrap, permutations=bootstrap,
                                  seed=seed, alpha=0.05, confidence=confidence, epsilon=epsilon)
    table = run_published(settings, as_json=True) if as_json else _quiet_published(settings)
    data = ReportData(title=title or "evalign: every shipped judge and metric on every set", published=table)
    written = write_report(out.parent, data, html_name=out.name, assets=f"{out.stem}_files")
    if not as_json:
        console.print(escape(f"wrote {written['html']}"))


def _quiet_published(settings: Any) -> Any:
    from evalign.evaluate.published import published_table  # scipy: not at every command's start

    with Stages() as stages:
        return published_table(settings, progress=stages.start)


@dataclass(frozen=True)
class ReportJob:
    """What ``evalign report`` evaluates: the inputs, the spec, the metric runs and the notes on
    merged task labels."""

    inputs: Any  # evalign.evaluate.inputs.Inputs
    spec: Any  # evalign.evaluate.EvalSpec
    runs: list[Any]
    merges: list[str]


def report_inputs(settings: Any) -> Any:
    """:func:`~evalign.evaluate.inputs.load_inputs`, its conditions worded for ``evalign report``."""
    from evalign.evaluate.inputs import InputsError, load_inputs  # scipy: not at every command's start

    try:
        return load_inputs(settings)
    except InputsError as e:
        message = {
            "no_pref_columns": "a pair table needs its preference columns: give --pref",
            "no_labels": "no human judgments: give --human COL, --system-human FILE, --pairs FILE or --dataset NAME",
        }[e.reason]
        raise CliError(message) from None


def report_job(settings: Any, metrics: list[str], judges: list[str], lower: list[str], *, by: str | None,
               resampling: Any, prices: Any = None) -> ReportJob:
    """Read the inputs of ``settings``, find or compute the metric and judge columns, and build the
    report's :class:`~evalign.evaluate.EvalSpec` (its trust tables by the labels' kind; the breakdown
    by ``task`` when it has several values, its labels merged by case)."""
    from evalign.evaluate import EvalSpec  # scipy: not at every command's start
    from evalign.evaluate.prepare import expand_names, resolve_columns  # scipy: not at every command's start

    inputs = report_inputs(settings)
    hum, pairs = inputs.human, inputs.pairs
    if not metrics and not judges and inputs.ds is not None:  # --dataset NAME alone: its default metrics
        metrics = default_metrics(inputs.ds, hum.column)
        if not metrics:
            raise CliError(f"dataset '{inputs.ds.name}' has no references and no judge columns: name the columns "
                           "to evaluate with --metric or --judge")
        err_console.print(escape(f"metrics: {', '.join(metrics)} (the dataset's defaults; choose with --metric)"),
                          highlight=False)
    try:  # globs (``judge:gpt-4/*``) select judge columns
        metrics, judges = (expand_names(n, table=inputs.items, pairs=pairs, source=inputs.source) if n else []
                           for n in (metrics, judges))
    except EvalignError as e:
        raise CliError(str(e)) from None
    if inputs.ds is not None:  # the direction of the dataset's shipped columns
        lower = [*lower, *(c for c in inputs.ds.lower_is_better if c in (*metrics, *judges) and c not in lower)]
    names, lower = existing_columns(inputs.items, list(dict.fromkeys([*metrics, *judges])), lower, {})
    table, cols, runs = resolve_columns(inputs.items, names, source=inputs.source, pairs=pairs, lower_is_better=lower,
                                        lower_option="--metric-lower-is-better", judges=judges)
    cols = [dataclasses.replace(c, kind="judge") if c.name in judges else c for c in cols]
    table, pairs, by, merges = _merge_tasks(table, pairs, by)
    try:
        spec = EvalSpec(human=hum, columns=tuple(cols), items=table, pairs=pairs, by=by, trust=_requests(hum.kind, inputs.ds),
                        resampling=resampling, source=inputs.source, dataset=inputs.dataset,
                        costs={r.column: r.seconds_per_1000 for r in runs}, curves=True, min_group_size=10,
                        statistics=tuple(inputs.ds.statistics) if inputs.ds is not None else (),
                        prices=prices)
    except EvalignError as e:
        raise CliError(str(e)) from None
    return ReportJob(inputs, spec, runs, merges)


def _merge_tasks(table: Any, pairs: Any, by: str | None) -> tuple[Any, Any, str | None, list[str]]:
    """The breakdown column (default ``task`` when it has several values); "Yelp" and "yelp" are
    one task (the merge is listed): (table, pairs, by, merge notes)."""
    group_col = pairs if pairs is not None else table
    if by is None:
        by = "task" if group_col is not None and "task" in group_col.columns and \
            group_col["task"].nunique() > 1 else None
    merges: list[str] = []
    if by == "task" and group_col is not None:
        merged, merges = merge_labels(group_col["task"])
        if merged:
            group_col = group_col.assign(**{MERGED_TASK: group_col["task"].astype(str).replace(merged)})
            if pairs is not None:
                pairs = group_col
            else:
                table = group_col
            by = MERGED_TASK
    return table, pairs, by, merges


def _requests(kind: str, ds: Any = None) -> tuple[Any, ...]:
    """The report's trust tables for labels of ``kind`` (item level grouped as the dataset ``ds``
    declares; pairwise accuracy left out where it declares another item-level statistic)."""
    from evalign.evaluate import TrustRequest  # scipy: not at every command's start

    if kind == "item":
        grouping = ds.grouping if ds is not None else "item"
        pairwise = () if ds is not None and ds.statistic else (TrustRequest("pairwise_accuracy", "item", grouping),)
        return (TrustRequest("kendall", "item", grouping), TrustRequest("kendall", "system"), *pairwise)
    if kind == "system":
        return (TrustRequest("kendall", "system"),)
    return (TrustRequest("preference_accuracy"),)


def write_report_files(job: ReportJob, result: Any, *, title: str | None, out: Path) -> dict[str, Any]:
    """Write the report of ``result`` to ``out`` (the HTML file; plots and tables in
    ``<stem>_files/``). Returns what :func:`~evalign.report.write_report` wrote."""
    from evalign.report.assemble import from_results  # scipy: not at every command's start
    from evalign.report.build import write_report  # matplotlib: not at every command's start

    inputs, spec = job.inputs, job.spec
    ds = inputs.ds
    subtitle = None
    if ds is not None:
        subtitle = f"{ds.name}: {ds.description}. Licence: {ds.licence}. Source: {ds.citation}"
        title = title or f"evalign report: {ds.name}"
    data = from_results([result], title=title or f"evalign report: {inputs.source}", subtitle=subtitle,
                        notes=job.merges, runs={inputs.source: job.runs}, min_group_size=10, item_table=spec.items,
                        human_col=inputs.human.column, judge_cols=[c.name for c in spec.columns if c.kind == "judge"],
                        pairs=spec.pairs, human_higher_is_better=inputs.human.higher_is_better)
    return write_report(out.parent, data, html_name=out.name, assets=f"{out.stem}_files")
