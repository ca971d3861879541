"""``evalign meta``: how well metrics and judges agree with human judgments, and which to trust.

The command only parses its options into an :class:`~evalign.evaluate.EvalSpec` and renders the
:class:`~evalign.evaluate.EvalResult` of :func:`~evalign.evaluate.evaluate`."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pandas as pd
import typer
from rich.markup import escape

from evalign.cli.common import (
    ID_FIELD,
    LANGUAGE_FIELD,
    REFERENCE_FIELD,
    RESPONSE_FIELD,
    SYSTEM_FIELD,
    TASK_FIELD,
    CliError,
    Stages,
    console,
    emit_json,
    err_console,
    field_map,
    print_table,
    split_multi,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, LABELS
from evalign.cli.score import parse_options
from evalign.columns import resolve_metric_column
from evalign.errors import EvalignError
from evalign.metrics.base import get_metric, metric_class

LEVELS = ("system", "item")
GROUPINGS = ("none", "item", "system")

FILE: Any = typer.Argument(None, help="Scored items or a judged pair table (JSONL, JSON list, CSV, Parquet); "
                                      "optional with --dataset.")
HUMAN: Any = typer.Option(None, "--human", help="Human rating column (item-level ratings).")
METRIC: Any = typer.Option(
    [], "--metric", "-m", help="Metric or judge column, a metric name to compute on the fly, or a glob of judge "
    "columns ('judge:gpt-4/*') (repeatable). Default with --dataset: the dataset's shipped judge columns."
)
SYSTEM_HUMAN: Any = typer.Option(
    None, "--system-human", help="JSON file: {system: human score or rank} (or {'ranks': {...}})."
)
LOWER_IS_BETTER: Any = typer.Option(False, "--lower-is-better", "--human-lower-is-better",
                                    help="Lower human values are better (ranks, errors); the same switch as report's.")
METRIC_LOWER: Any = typer.Option(
    [], "--metric-lower-is-better", help="Metric columns where lower is better (repeatable)."
)
PREF: Any = typer.Option([], "--pref", help="Annotator preference columns of a pair table (+1/-1/0).")
LEVEL: Any = typer.Option(None, "--level", help="Level of the ranking statistic: system or item.")
GROUPING: Any = typer.Option("item", "--grouping", help="Item-level grouping: none, item or system.")
BY: Any = typer.Option(None, "--by", help="Break down by a column: task, language, a task-type column, system.")
BOOTSTRAP: Any = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for confidence intervals.")
PERMUTATIONS: Any = typer.Option(1000, "--permutations", help="Permutations per paired significance test.")
SEED: Any = typer.Option(0, "--seed", help="Seed of resampling and permutations.")
ALPHA: Any = typer.Option(0.05, "--alpha", help="Significance level of clusters and baseline tests.")
CONFIDENCE: Any = typer.Option(0.95, "--confidence", help="Confidence level of the intervals.")
RESAMPLING: Any = typer.Option(
    "auto", "--resampling", help="auto: accuracies (means of per-item credits taking few values) resampled by the "
    "counts of each value, exact in distribution but other draws than item indices; items: item indices always."
)
WORKERS: Any = typer.Option(None, "--workers", help="Processes for the per-item resampling work (default: every "
                                                    "core; the results do not depend on it).")
MIN_GROUP_SIZE: Any = typer.Option(
    None, "--min-group-size", help="Smallest group reported (default 10 items, 30 pairs)."
)
NO_BASELINES: Any = typer.Option(False, "--no-baselines", help="Leave the baseline rows out.")
OPTION: Any = typer.Option([], "--option", help="Metric option metric.key=value (repeatable).")
NO_CACHE: Any = typer.Option(False, "--no-cache", help="Do not read or write the cache when scoring.")
AS_JSON: Any = typer.Option(False, "--json", help="Print machine-readable JSON.")


def register(app: typer.Typer) -> None:
    """Add ``meta`` to ``app``."""
    app.command("meta")(meta_cmd)


def meta_cmd(
    file: Path = FILE, dataset: str = DATASET, data_dir: Path = DATA_DIR, labels: str = LABELS, human: str = HUMAN,
    metric: list[str] = METRIC, system_human: Path = SYSTEM_HUMAN, lower_is_better: bool = LOWER_IS_BETTER,
    metric_lower: list[str] = METRIC_LOWER, pref: list[str] = PREF, level: str = LEVEL, grouping: str = GROUPING,
    by: str = BY, bootstrap: int = BOOTSTRAP, permutations: int = PERMUTATIONS, seed: int = SEED,
    alpha: float = ALPHA, confidence: float = CONFIDENCE, resampling_method: str = RESAMPLING,
    workers: int = WORKERS, min_group_size: int = MIN_GROUP_SIZE,
    no_baselines: bool = NO_BASELINES, option: list[str] = OPTION, no_cache: bool = NO_CACHE,
    id_field: str = ID_FIELD, system_field: str = SYSTEM_FIELD, reference_field: str = REFERENCE_FIELD,
    response_field: str = RESPONSE_FIELD, task_field: str = TASK_FIELD, language_field: str = LANGUAGE_FIELD,
    as_json: bool = AS_JSON,
) -> None:
    """Correlations, pairwise accuracy with tie calibration, baselines, breakdowns and the trust table."""
    from evalign.evaluate import Resampling, evaluate  # scipy: not at every command's start
    from evalign.evaluate.inputs import InputSettings  # scipy: not at every command's start
    from evalign.evaluate.prepare import is_glob  # scipy: not at every command's start

    _check_options(level, grouping, bootstrap, permutations, confidence, alpha, min_group_size)
    check_resampling(resampling_method, workers)
    if file is None and dataset is None:
        raise CliError("give a FILE of scored items or --dataset NAME")
    metrics = split_multi(metric)
    if not metrics and dataset is None:
        raise CliError("name the metric or judge columns (or metrics to compute) with --metric")
    fields = field_map(id_field, system_field, None, None, reference_field, response_field, task_field,
                       language_field)
    settings = InputSettings(file=file, dataset=dataset, data_dir=data_dir, fields=fields, human=human,
                             system_human=system_human, lower_is_better=lower_is_better,
                             pref=tuple(split_multi(pref)), rule="flags",
                             scores=tuple(n for n in metrics if not is_glob(n)), label_set=labels)
    resampling = Resampling(n_resamples=bootstrap, n_permutations=permutations, confidence=confidence,
                            alpha=alpha, seed=seed, method=resampling_method, workers=workers)
    spec = meta_spec(settings, metrics, split_multi(metric_lower), option, no_cache, level=level, grouping=grouping, by=by, min_group_size=min_group_size, resampling=resampling,
                     baselines=not no_baselines)
    with Stages(disable=as_json) as stages:
        stages.start(f"meta-evaluating: {bootstrap} bootstrap resamples, {permutations} permutations per test")
        result = evaluate(spec, progress=stages.resampling())
    if as_json:
        emit_json(result.to_json())
        if result.refused:
            raise SystemExit(1)
        return
    render(result)
    if result.refused:
        raise CliError(result.refused)


def _check_options(level: str | None, grouping: str, bootstrap: int, permutations: int, confidence: float,
                   alpha: float, min_group_size: int | None) -> None:
    if level is not None and level not in LEVELS:
        raise CliError(f"--level must be one of {', '.join(LEVELS)}, got '{level}'")
    if grouping not in GROUPINGS:
        raise CliError(f"--grouping must be one of {', '.join(GROUPINGS)}, got '{grouping}'")
    if bootstrap < 1 or permutations < 1:
        raise CliError("--bootstrap and --permutations must be at least 1")
    if not 0 < confidence < 1 or not 0 < alpha < 1:
        raise CliError("--confidence and --alpha must be between 0 and 1")
    if min_group_size is not None and min_group_size < 1:
        raise CliError("--min-group-size must be at least 1")


def check_resampling(method: str, workers: int | None) -> None:
    """The ``--resampling`` and ``--workers`` options of ``meta`` and ``report``, checked."""
    if method not in ("auto", "items"):
        raise CliError(f"--resampling must be auto or items, got '{method}'")
    if workers is not None and workers < 0:
        raise CliError("--workers must be at least 0 (0 = every core)")


def meta_spec(settings: Any, metrics: list[str], lower: list[str], option: list[str], no_cache: bool,
              **spec_kw: Any) -> Any:
    """The :class:`~evalign.evaluate.EvalSpec` of ``evalign meta``: the inputs of ``settings``
    (an :class:`~evalign.evaluate.inputs.InputSettings`), the ``metrics`` columns found or
    computed (``option``: their ``--option`` values; a glob selects judge columns; none: the
    dataset's shipped judge columns, see :func:`~evalign.evaluate.prepare.expand_names`), and the
    remaining spec fields ``spec_kw``."""
    from evalign.evaluate import EvalSpec  # scipy: not at every command's start
    from evalign.evaluate.prepare import expand_names  # scipy: not at every command's start

    inputs = meta_inputs(settings)
    default = list(inputs.ds.judge_columns) if inputs.ds is not None and inputs.pairs is not None else []
    try:
        metrics = expand_names(metrics, table=inputs.items, pairs=inputs.pairs, default=default,
                               source=inputs.source)
    except EvalignError as e:
        suffix = "" if metrics else " with --metric (the dataset ships no judge columns)"
        raise CliError(f"{e}{suffix}") from None
    options = {n: _options(option, n, no_cache) for n in metrics}
    table, cols, runs = _columns(inputs, metrics, lower, options)
    try:
        return EvalSpec(human=inputs.human, columns=tuple(cols), items=table, pairs=inputs.pairs,
                        source=inputs.source, dataset=inputs.dataset, costs={r.column: r.seconds_per_1000 for r in runs},
                        **spec_kw)
    except EvalignError as e:
        raise CliError(str(e)) from None


# ------------------------------------------------------------------------------------------------
# inputs


def _options(option: list[str], name: str, no_cache: bool) -> dict[str, object]:
    try:
        metric_class(name)
    except (EvalignError, ImportError):
        return {}
    return parse_options(option, name, no_cache)


def meta_inputs(settings: Any) -> Any:
    """:func:`~evalign.evaluate.inputs.load_inputs`, its conditions worded for ``evalign meta``."""
    from evalign.evaluate.inputs import InputsError, load_inputs  # scipy: not at every command's start

    try:
        return load_inputs(settings)
    except InputsError as e:
        file = settings.file
        message = {
            "no_pair_table": f"{file}: not a pair table (needs response_a / response_b) and no --dataset with pairs",
            "no_pref_columns": "name the annotator preference columns with --pref",
            "not_sides": f"{file}: expected the scored items of the pairs (a 'side' column a/b)",
            "no_labels": "give the human rating column with --human COL or system-level values with --system-human FILE",
            "no_item_table": f"dataset '{e.dataset}' has no item table",
        }[e.reason]
        raise CliError(message) from None


def _columns(inputs: Any, metrics: list[str], lower: list[str],
             options: dict[str, dict[str, object]]) -> tuple[Any, list[Any], list[Any]]:
    from evalign.evaluate.prepare import resolve_columns  # scipy: not at every command's start

    def spinner(names: list[str]) -> AbstractContextManager[Any]:
        return err_console.status("scoring " + ", ".join(names))

    names, lower = existing_columns(inputs.items, metrics, lower, options)
    return resolve_columns(inputs.items, names, source=inputs.source, pairs=inputs.pairs,
                           lower_is_better=lower, options=options, on_scoring=spinner)


def existing_columns(table: Any, metrics: list[str], lower: list[str],
                     options: dict[str, dict[str, object]]) -> tuple[list[str], list[str]]:
    """``-m NAME`` -> the table's column that already holds metric NAME, so that it is used and not
    recomputed: with ``--option NAME.key=value`` the column of the metric with those options when
    the table has it; else :func:`evalign.columns.resolve_metric_column` (``NAME`` itself, or the one
    column ``NAME[...]``; several are an error naming them). Names without such a column are kept
    (a registered metric is then computed). Returns (names, lower-is-better columns), a resolved
    column of a lower-is-better metric added to the latter."""
    if table is None:
        return metrics, lower
    cols = [str(c) for c in table.columns]
    out: list[str] = []
    lower = list(lower)
    for n in metrics:
        try:
            cls = metric_class(n)
        except (EvalignError, ImportError):
            cls = None
        if cls is not None and options.get(n):
            col = get_metric(n, **options[n]).column
            found = col if col in cols else None
        else:
            try:
                found = resolve_metric_column(cols, n)
            except EvalignError as e:
                raise CliError(f"-m {n}: {e}") from None
        if found is not None and found != n:
            err_console.print(f"[dim]-m {escape(n)}: using the existing column {escape(found)}[/dim]",
                              highlight=False)
            if ((cls is not None and not cls.higher_is_better) or n in lower) and found not in lower:
                lower.append(found)
        out.append(found or n)
    return out, lower


# ------------------------------------------------------------------------------------------------
# output


def trust_display(rows: Any, confidence: float, statistic: str) -> Any:
    """A trust table's rows as a terminal table: the interval in one column, ``beats_baselines``
    as yes / no, empty columns left out."""
    from evalign.meta.order_diagnostics import FIELDS  # numpy only, but evalign.meta is heavy

    rows = pd.DataFrame(rows).copy()
    if rows.empty:
        return rows
    rows = rows.drop(columns=[c for c in ("definition", *FIELDS) if c in rows.columns])
    pct = round(100 * confidence)
    rows.insert(rows.columns.get_loc("ci_low"), f"{pct}% CI", [
        f"[{lo:.3f}, {hi:.3f}]" if isinstance(lo, float) and math.isfinite(lo) and math.isfinite(hi) else "-"
        for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)
    ])
    rows = rows.drop(columns=["ci_low", "ci_high"]).rename(columns={"value": statistic})
    rows["beats_baselines"] = ["yes" if b is True else "no" if b is False else "-" for b in rows["beats_baselines"]]
    for c in ("rank", "cluster"):
        rows[c] = ["-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v)) for v in rows[c]]
    if set(rows["group"]) == {"(all)"}:
        rows = rows.drop(columns=["group", "n"])
    rows = _format_extras(rows)
    front = ["rank", "cluster", "metric", "kind"]
    rows = rows[[c for c in ("group", "n") if c in rows.columns] + front + [
        c for c in rows.columns if c not in front and c not in ("group", "n")]]
    return rows.rename(columns={"s_per_1000": "s/1k items", "beats_baselines": "beats baselines",
                                "accuracy_parsed": "acc. parsed only", "n_unparseable": "unparseable"})


#: the order diagnostics shown under a trust table, with their short headers
DIAGNOSTICS_SHOWN = {"accuracy_mean": "acc. mean (2 orders)", "accuracy_both": "acc. both orders",
                     "position_agreement": "orders agree", "prefers_first": "picks first shown",
                     "prefers_longer": "picks longer"}


def diagnostics_display(rows: Any, group: str = "(all)") -> pd.DataFrame:
    """The order diagnostics of the judges run in both orders, for one group of a trust table's
    rows, in the table's order (empty when no judge has them): the key figures of
    :data:`evalign.meta.order_diagnostics.FIELDS` (all of them are in ``--json``)."""
    rows = pd.DataFrame(rows)
    if rows.empty or "accuracy_both" not in rows.columns:
        return pd.DataFrame()
    rows = rows[(rows["group"] == group) & pd.to_numeric(rows["accuracy_both"], errors="coerce").notna()]
    return rows[["metric", *DIAGNOSTICS_SHOWN]].rename(columns=DIAGNOSTICS_SHOWN).reset_index(drop=True)


def print_diagnostics(rows: Any) -> None:
    """The order diagnostics table under a trust table (nothing when no judge has both orders)."""
    df = diagnostics_display(rows)
    if df.empty:
        return
    print_table(df, title="Judges run in both orders: accuracy as LLMBar reports it (mean of the two orders), "
                          "when both orders are right (the ranked verdict), how often the orders agree, and the "
                          "share of decided verdicts that picked the first-shown or the longer response", digits=3)


def _format_extras(rows: pd.DataFrame) -> pd.DataFrame:
    """The optional columns of a trust table: left out when empty, ``epsilon`` and ``n_unparseable``
    as text."""
    for c in ("epsilon", "s_per_1000", "n_unparseable", "accuracy_parsed", "p_vs_best"):
        if c in rows.columns and pd.to_numeric(rows[c], errors="coerce").isna().all():
            rows = rows.drop(columns=[c])
    if "epsilon" in rows.columns:
        rows["epsilon"] = [f"{e:.3g}" if isinstance(e, float) and math.isfinite(e) else "-" for e in rows["epsilon"]]
    if "n_unparseable" in rows.columns:
        rows["n_unparseable"] = ["-" if not (isinstance(v, float) and math.isfinite(v)) else str(int(v))
                                 for v in rows["n_unparseable"]]
    return rows


def baseline_legend(rows: Any) -> list[str]:
    """What each baseline row of a trust table is (``name: definition``), in the order of the rows."""
    rows = pd.DataFrame(rows)
    if rows.empty or "definition" not in rows.columns:
        return []
    defs = rows[rows["definition"].notna()].drop_duplicates("metric")
    return [f"{m}: {d}" for m, d in zip(defs["metric"], defs["definition"], strict=True)]


def result_warnings(r: Any) -> list[str]:
    """The warnings of a result that belong to none of its trust tables (e.g. a metric calling most
    pairs ties: shown under the overview)."""
    own = {w for t in r.trust for w in t.warnings}
    return [w for w in r.warnings if w not in own]


def print_warnings(warnings: Any) -> None:
    """Each warning on its own line (stderr)."""
    for w in warnings:
        err_console.print(f"[yellow]warning[/yellow]: {escape(w)}", highlight=False)


def print_trust(t: Any, display: Any, title: str, extra_warnings: Any = ()) -> None:
    """A trust table ``t`` shown as ``display``: its headline when it ranks nothing, the table, the
    legend of its baselines and, directly under it, its warnings (and ``extra_warnings``)."""
    if t.headline:
        console.print(f"[bold yellow]{escape(t.headline)}[/bold yellow]", highlight=False)
    print_table(display, title=title, digits=3)
    for line in baseline_legend(t.rows):
        err_console.print(f"[dim]baseline {escape(line)}[/dim]", highlight=False)
    print_warnings([*t.warnings, *extra_warnings])


def trust_title(t: Any, r: Any) -> str:
    """The title of a trust table: what is ranked, and how."""
    sig = t.signature
    level = "pairs" if r.mode == "pairs" else f"{t.level} level" + (
        f", grouping {t.grouping}" if t.level == "item" else "")
    test = sig["test"] + (f", {sig['permutations']} permutations" if "permutation" in sig["test"] else "")
    return (f"Which metric or judge to trust ({r.title.lower()}): ranked by {t.statistic} ({level}); cluster 1 = "
            f"not significantly worse than the best; baselines beside them (significance level {sig['alpha']}; "
            f"{test}; {sig['resamples']} bootstrap resamples, seed {sig['seed']})")


def render(r: Any) -> None:
    """Print an :class:`~evalign.evaluate.EvalResult` to the terminal."""
    if r.mode == "items":
        head = f"{r.n_items} items x {r.n_systems} systems, labels: {r.human}"
    else:
        head = f"{r.n_items} pairs, annotators {r.human}"
    if not r.overview.empty:
        title = r.title if r.mode == "items" else f"Preference accuracy: {r.title.lower()}"
        overview = r.overview if r.rater == "human" else r.overview.rename(
            columns={"human_tie_rate": f"{r.rater}_tie_rate"})
        print_table(overview, title=f"{title} ({head})")
    print_warnings(result_warnings(r))
    if r.systems is not None and r.human == "system-level":
        print_table(r.systems, title=f"System ranking ({r.rater}; each metric's declared system score)")
    if not r.missing.empty and (r.missing["missing"] > 0).any():
        wide = r.missing.pivot(index="system", columns="metric", values="missing").reset_index()
        wide.columns.name = None
        wide.insert(1, "cells", r.missing.drop_duplicates("system").set_index("system")["n"].reindex(wide["system"]).to_numpy())
        print_table(wide, title="Missing values: cells without a value, per system and column")
    if r.breakdown is not None:
        bd = r.breakdown
        ok = bd[bd["status"] != "too small"]
        if len(ok):
            wide = ok.pivot(index="metric", columns="group", values="value").reindex(
                index=list(dict.fromkeys(ok["metric"])), columns=list(dict.fromkeys(ok["group"]))).reset_index()
            wide.columns.name = None
            print_table(wide, title=f"{r.breakdown_statistic} by {r.breakdown_by}")
        small = bd[bd["status"] == "too small"].drop_duplicates("group")
        if len(small):
            listing = ", ".join(f"{g} ({n})" for g, n in zip(small["group"], small["n"], strict=True))
            err_console.print(f"[dim]too small to report: {escape(listing)}[/dim]", highlight=False)
    for note in r.notes:
        err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    for t in r.trust:
        for note in t.notes:
            err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
        skipped = t.groups[t.groups["status"] == "too small"]
        if len(skipped):
            err_console.print("[dim]groups too small to rank (reported, not ranked): "
                              + escape(", ".join(f"{g} ({n})" for g, n in zip(skipped["group"], skipped["n"],
                                                                                  strict=True))) + "[/dim]",
                              highlight=False)
    for t in r.trust:
        print_trust(t, trust_display(t.rows, t.signature["confidence"], t.statistic), trust_title(t, r))
        print_diagnostics(t.rows)
    if r.refused is None and r.trust:
        err_console.print(f"[dim]signature: {escape(r.signature['text'])}[/dim]", highlight=False)
