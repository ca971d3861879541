"""``evalign meta``: how well metrics and judges agree with human judgments, and which to trust.

The command only parses its options into an :class:`~evalign.evaluate.EvalSpec` and renders the
:class:`~evalign.evaluate.EvalResult` of :func:`~evalign.evaluate.evaluate`."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

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
    emit_json,
    err_console,
    field_map,
    print_table,
    split_multi,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET

LEVELS = ("system", "item")
GROUPINGS = ("none", "item", "system")


def register(app: typer.Typer) -> None:
    """Add ``meta`` to ``app``."""

    @app.command("meta")
    def meta_cmd(
        file: Path = typer.Argument(None, help="Scored items or a judged pair table (JSONL, JSON list, CSV, Parquet); "
                                               "optional with --dataset."),
        dataset: str = DATASET,
        data_dir: Path = DATA_DIR,
        human: str = typer.Option(None, "--human", help="Human rating column (item-level ratings)."),
        metric: list[str] = typer.Option(
            [], "--metric", "-m", help="Metric or judge column, or a metric name to compute on the fly (repeatable)."
        ),
        system_human: Path = typer.Option(
            None, "--system-human", help="JSON file: {system: human score or rank} (or {'ranks': {...}})."
        ),
        lower_is_better: bool = typer.Option(False, "--lower-is-better", help="Lower human values are better (ranks)."),
        metric_lower: list[str] = typer.Option(
            [], "--metric-lower-is-better", help="Metric columns where lower is better (repeatable)."
        ),
        pref: list[str] = typer.Option([], "--pref", help="Annotator preference columns of a pair table (+1/-1/0)."),
        level: str = typer.Option(None, "--level", help="Level of the ranking statistic: system or item."),
        grouping: str = typer.Option("item", "--grouping", help="Item-level grouping: none, item or system."),
        by: str = typer.Option(None, "--by", help="Break down by a column: task, language, a task-type column, system."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for confidence intervals."),
        permutations: int = typer.Option(1000, "--permutations", help="Permutations per paired significance test."),
        seed: int = typer.Option(0, "--seed", help="Seed of resampling and permutations."),
        alpha: float = typer.Option(0.05, "--alpha", help="Significance level of clusters and baseline tests."),
        confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the intervals."),
        min_group_size: int = typer.Option(
            None, "--min-group-size", help="Smallest group reported (default 10 items, 30 pairs)."
        ),
        no_baselines: bool = typer.Option(False, "--no-baselines", help="Leave the baseline rows out."),
        option: list[str] = typer.Option([], "--option", help="Metric option metric.key=value (repeatable)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache when scoring."),
        id_field: str = ID_FIELD,
        system_field: str = SYSTEM_FIELD,
        reference_field: str = REFERENCE_FIELD,
        response_field: str = RESPONSE_FIELD,
        task_field: str = TASK_FIELD,
        language_field: str = LANGUAGE_FIELD,
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    ) -> None:
        """Correlations, pairwise accuracy with tie calibration, baselines, breakdowns and the trust table."""
        from evalign.errors import EvalignError
        from evalign.evaluate import EvalSpec, Resampling, evaluate

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
        if file is None and dataset is None:
            raise CliError("give a FILE of scored items or --dataset NAME")
        metrics = split_multi(metric)
        if not metrics:
            raise CliError("name the metric or judge columns (or metrics to compute) with --metric")
        fields = field_map(id_field, system_field, None, None, reference_field, response_field, task_field,
                           language_field)
        resampling = Resampling(n_resamples=bootstrap, n_permutations=permutations, confidence=confidence,
                                alpha=alpha, seed=seed)
        inputs = _inputs(file, dataset, data_dir, human, system_human, lower_is_better, split_multi(pref), fields)
        options = {n: _options(option, n, no_cache) for n in metrics}
        table, cols, runs = _columns(inputs, metrics, split_multi(metric_lower), options)
        try:
            spec = EvalSpec(human=inputs["human"], columns=tuple(cols), items=table, pairs=inputs["pairs"], level=level,
                            grouping=grouping, by=by, min_group_size=min_group_size, resampling=resampling,
                            source=inputs["source"], dataset=inputs["dataset"], baselines=not no_baselines,
                            costs={r.column: r.seconds_per_1000 for r in runs})
        except EvalignError as e:
            raise CliError(str(e)) from None
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


# ------------------------------------------------------------------------------------------------
# inputs


def _options(option: list[str], name: str, no_cache: bool) -> dict[str, object]:
    from evalign.cli.score import parse_options
    from evalign.errors import EvalignError
    from evalign.metrics.base import metric_class

    try:
        metric_class(name)
    except (EvalignError, ImportError):
        return {}
    return parse_options(option, name, no_cache)


def _first_record(path: Path) -> dict[str, Any]:
    from evalign.io import _iter_records, detect_format

    for _, rec in _iter_records(path, detect_format(path)):
        return dict(rec)
    return {}


def _inputs(
    file: Path | None,
    dataset: str | None,
    data_dir: Path | None,
    human: str | None,
    system_human: Path | None,
    lower_is_better: bool,
    pref: list[str],
    fields: dict[str, str],
) -> dict[str, Any]:
    """The labels and tables of the command: ``human`` (a Human), ``items``, ``pairs``, ``source``,
    ``dataset``, ``sides`` (the item table is the scored sides of the pairs)."""
    from evalign.evaluate import Human
    from evalign.evaluate.prepare import attach_labels, dataset_human, dataset_title
    from evalign.io import read_items, read_pairs, read_system_human

    ds = None
    if dataset:
        from evalign.cli.dataset_options import load_dataset_spec

        ds = load_dataset_spec(dataset, data_dir)
    is_pair_file = file is not None and "response_a" in _first_record(file)
    pairs_mode = bool(pref) or is_pair_file or (ds is not None and human is None and system_human is None and (
        ds.items is None or (not ds.human_columns and not ds.system_human)))
    out: dict[str, Any] = {"dataset": dataset_title(ds) if ds is not None else None, "items": None, "pairs": None}
    if pairs_mode:
        pairs = read_pairs(file) if is_pair_file else (ds.pairs if ds is not None else None)
        if pairs is None:
            raise CliError(f"{file}: not a pair table (needs response_a / response_b) and no --dataset with pairs")
        if ds is not None:
            hum = dataset_human(ds, pref=pref or list(ds.pref_columns))
        elif pref:
            hum = Human(pref_columns=tuple(pref))
        else:
            cands = sorted((c for c in pairs.columns if str(c).startswith("pref_")), key=lambda c: (len(c), c))
            if not cands:
                raise CliError("name the annotator preference columns with --pref")
            hum = Human(pref_columns=tuple(cands))
        out["pairs"] = pairs
        if file is not None and not is_pair_file:
            items = read_items(file, fields=fields)
            if "side" not in items.columns:
                raise CliError(f"{file}: expected the scored items of the pairs (a 'side' column a/b)")
            out["items"] = items
        else:
            from evalign.datasets import pairs_to_items

            out["items"] = pairs_to_items(pairs)
        out["source"] = str(file) if file is not None else f"dataset {ds.name}"  # type: ignore[union-attr]
        out["human"] = hum
        return out
    if system_human is not None:
        hum = Human(system=read_system_human(system_human), higher_is_better=not lower_is_better)
    elif human:
        hum = dataset_human(ds, column=human) if ds is not None and file is None else Human(
            column=human, higher_is_better=not lower_is_better)
        if ds is not None and file is not None and ds.items is not None and human in ds.items.columns:
            hum = dataset_human(ds, column=human)
    elif ds is not None:
        hum = dataset_human(ds)
    else:
        raise CliError("give the human rating column with --human COL or system-level values with --system-human FILE")
    if file is not None:
        items = read_items(file, fields=fields, human=[hum.column] if hum.column and ds is None else [])
        if ds is not None:
            items = attach_labels(items, ds, hum)
        out["source"] = str(file)
    else:
        assert ds is not None
        if ds.items is None:
            raise CliError(f"dataset '{ds.name}' has no item table")
        items = ds.items.copy()
        out["source"] = f"dataset {ds.name}"
    out["items"] = items
    out["human"] = hum
    return out


def _columns(inputs: dict[str, Any], metrics: list[str], lower: list[str],
             options: dict[str, dict[str, object]]) -> tuple[Any, list[Any], list[Any]]:
    from evalign.evaluate.prepare import resolve_columns

    def spinner(names: list[str]) -> AbstractContextManager[Any]:
        return err_console.status("scoring " + ", ".join(names))

    names, lower = existing_columns(inputs["items"], metrics, lower, options)
    return resolve_columns(inputs["items"], names, source=inputs["source"], pairs=inputs["pairs"],
                           lower_is_better=lower, options=options, on_scoring=spinner)


def existing_columns(table: Any, metrics: list[str], lower: list[str],
                     options: dict[str, dict[str, object]]) -> tuple[list[str], list[str]]:
    """``-m NAME`` -> the table's column that already holds metric NAME, so that it is used and not
    recomputed: with ``--option NAME.key=value`` the column of the metric with those options when
    the table has it; else :func:`evalign.columns.resolve_metric_column` (``NAME`` itself, or the one
    column ``NAME[...]``; several are an error naming them). Names without such a column are kept
    (a registered metric is then computed). Returns (names, lower-is-better columns), a resolved
    column of a lower-is-better metric added to the latter."""
    from evalign.columns import resolve_metric_column
    from evalign.errors import EvalignError
    from evalign.metrics.base import get_metric, metric_class

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
    import pandas as pd

    rows = pd.DataFrame(rows).copy()
    if rows.empty:
        return rows
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
    for c in ("epsilon", "s_per_1000", "n_unparseable", "accuracy_parsed", "p_vs_best"):
        if c in rows.columns and pd.to_numeric(rows[c], errors="coerce").isna().all():
            rows = rows.drop(columns=[c])
    if "epsilon" in rows.columns:
        rows["epsilon"] = [f"{e:.3g}" if isinstance(e, float) and math.isfinite(e) else "-" for e in rows["epsilon"]]
    if "n_unparseable" in rows.columns:
        rows["n_unparseable"] = ["-" if not (isinstance(v, float) and math.isfinite(v)) else str(int(v))
                                 for v in rows["n_unparseable"]]
    front = ["rank", "cluster", "metric", "kind"]
    rows = rows[[c for c in rows.columns if c in front and c not in ("group", "n")][:0] + [
        c for c in ("group", "n") if c in rows.columns] + front + [c for c in rows.columns if c not in front
                                                                   and c not in ("group", "n")]]
    return rows.rename(columns={"s_per_1000": "s/1k items", "beats_baselines": "beats baselines",
                                "accuracy_parsed": "acc. parsed only", "n_unparseable": "unparseable"})


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
    import pandas as pd

    if r.mode == "items":
        head = f"{r.n_items} items x {r.n_systems} systems, labels: {r.human}"
    else:
        head = f"{r.n_items} pairs, annotators {r.human}"
    if not r.overview.empty:
        title = r.title if r.mode == "items" else f"Preference accuracy: {r.title.lower()}"
        print_table(r.overview, title=f"{title} ({head})")
    if r.systems is not None and r.human == "system-level":
        print_table(r.systems, title="System ranking (human; each metric's declared system score)")
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
    for w in r.warnings:
        err_console.print(f"[yellow]warning[/yellow]: {escape(w)}", highlight=False)
    for t in r.trust:
        print_table(trust_display(t.rows, t.signature["confidence"], t.statistic), title=trust_title(t, r), digits=3)
    if r.refused is None and r.trust:
        err_console.print(f"[dim]signature: {escape(r.signature['text'])}[/dim]", highlight=False)
    _ = pd
