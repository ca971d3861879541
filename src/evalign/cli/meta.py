"""``evalign meta``: how well metrics agree with human judgments, and which metric to trust."""

from __future__ import annotations

import math
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
    console,
    emit_json,
    err_console,
    field_map,
    print_table,
    split_multi,
)

LEVELS = ("system", "item")
GROUPINGS = ("none", "item", "system")


def register(app: typer.Typer) -> None:
    """Add ``meta`` to ``app``."""

    @app.command("meta")
    def meta_cmd(
        file: Path = typer.Argument(None, help="Scored items (JSONL, JSON list, CSV, Parquet); optional with --dataset."),
        dataset: str = typer.Option(None, "--dataset", "-d", help="A registered human-judgment dataset, e.g. pandalm."),
        human: str = typer.Option(None, "--human", help="Human rating column (item-level ratings)."),
        metric: list[str] = typer.Option(
            [], "--metric", "-m", help="Metric column, or a metric name to compute on the fly (repeatable)."
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
        alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the clusters."),
        confidence: float = typer.Option(0.95, "--confidence", help="Confidence level of the intervals."),
        min_group_size: int = typer.Option(
            None, "--min-group-size", help="Smallest group reported (default 10 items, 30 pairs)."
        ),
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
        """Correlations, pairwise accuracy with tie calibration, breakdowns and the trust table."""
        if level is not None and level not in LEVELS:
            raise CliError(f"--level must be one of {', '.join(LEVELS)}, got '{level}'")
        if grouping not in GROUPINGS:
            raise CliError(f"--grouping must be one of {', '.join(GROUPINGS)}, got '{grouping}'")
        if bootstrap < 1 or permutations < 1:
            raise CliError("--bootstrap and --permutations must be at least 1")
        if not 0 < confidence < 1 or not 0 < alpha < 1:
            raise CliError("--confidence and --alpha must be between 0 and 1")
        if file is None and dataset is None:
            raise CliError("give a FILE of scored items or --dataset NAME")
        fields = field_map(id_field, system_field, None, None, reference_field, response_field, task_field,
                           language_field)
        settings = {
            "n_resamples": bootstrap,
            "n_permutations": permutations,
            "seed": seed,
            "alpha": alpha,
            "confidence": confidence,
        }
        ds = _load_dataset(dataset) if dataset else None
        if (ds is not None and ds.items is None and ds.pairs is not None) or (ds is None and pref):
            out = _run_pairs(file, ds, split_multi(pref), split_multi(metric), metric_lower, option, no_cache, fields,
                             by, min_group_size or 30, settings)
        else:
            out = _run_items(file, ds, human, system_human, lower_is_better, split_multi(metric), metric_lower,
                             option, no_cache, fields, level, grouping, by, min_group_size or 10, settings)
        if as_json:
            emit_json(out)
            return
        _print(out)


# ------------------------------------------------------------------------------------------------
# loading


def _load_dataset(name: str) -> Any:
    from evalign.datasets import load_dataset

    return load_dataset(name)


def _metric_columns(
    table: Any, names: list[str], option: list[str], no_cache: bool, source: str
) -> tuple[Any, list[str], list[Any], set[str]]:
    """Metric columns of ``table``: existing columns are used as they are; registered metric names
    missing from the table are computed (with their cost measured). Returns (table, columns, runs,
    lower-is-better columns)."""
    from evalign.cli.score import parse_options
    from evalign.errors import EvalignError
    from evalign.metrics.base import get_metric, metric_class
    from evalign.scoring import score

    if not names:
        raise CliError("name the metric columns (or metrics to compute) with --metric")

    def is_metric(name: str) -> bool:
        try:
            metric_class(name)
        except (EvalignError, ImportError):
            return False
        return True

    to_compute = []
    cols: list[str] = []
    lower: set[str] = set()
    for n in names:
        if n in table.columns:
            cols.append(n)
            if is_metric(n) and not metric_class(n).higher_is_better:
                lower.add(n)
        elif is_metric(n):
            m = get_metric(n, **parse_options(option, n, no_cache))
            to_compute.append(m)
            cols.append(m.column)
            if not m.higher_is_better:
                lower.add(m.column)
        else:
            raise CliError(f"{source}: no metric column '{n}' and no metric of that name")
    runs: list[Any] = []
    if to_compute:
        if "response" not in table.columns:
            raise CliError(f"{source}: cannot compute {', '.join(m.name for m in to_compute)} without responses")
        with err_console.status("scoring " + ", ".join(m.name for m in to_compute)):
            table, runs = score(table, to_compute)
    return table, cols, runs, lower


# ------------------------------------------------------------------------------------------------
# item tables


def _run_items(
    file: Path | None,
    ds: Any,
    human: str | None,
    system_human: Path | None,
    lower_is_better: bool,
    metrics: list[str],
    metric_lower: list[str],
    option: list[str],
    no_cache: bool,
    fields: dict[str, str],
    level: str | None,
    grouping: str,
    by: str | None,
    min_group_size: int,
    settings: dict[str, Any],
) -> dict[str, Any]:
    from evalign.io import read_items, read_system_human
    from evalign.meta.breakdown import breakdown, item_arrays
    from evalign.meta.trust import trust_table_items

    if file is not None:
        table = read_items(file, fields=fields, human=[human] if human else [])
        source = str(file)
    else:
        if ds.items is None:
            raise CliError(f"dataset '{ds.name}' has no item table")
        table = ds.items.copy()
        source = f"dataset {ds.name}"
    human_hib = not lower_is_better
    h_spec: str | dict[str, float]
    if system_human is not None:
        h_spec = read_system_human(system_human)
    elif human:
        h_spec = human
        if human not in table.columns:
            raise CliError(f"{source}: no human rating column '{human}'")
    elif ds is not None and ds.human_columns:
        h_spec = ds.human_columns[0]
        human_hib = ds.human_higher_is_better
    elif ds is not None and ds.system_human:
        h_spec = dict(ds.system_human)
        human_hib = ds.system_human_higher_is_better
    else:
        raise CliError("give the human rating column with --human COL or system-level values with --system-human FILE")
    if isinstance(h_spec, dict):
        table = table[table["system"].astype(str).isin(h_spec)].reset_index(drop=True)
        if table.empty:
            raise CliError(f"{source}: no system of the table has a system-level human value")
    table, cols, runs, lower = _metric_columns(table, metrics, option, no_cache, source)
    lower |= set(split_multi(metric_lower))
    system_only = isinstance(h_spec, dict)
    if system_only and level == "item":
        raise CliError("--level item needs item-level human ratings (--human COL)")
    arrays = item_arrays(table, h_spec, cols, human_higher_is_better=human_hib, lower_is_better=sorted(lower))
    out: dict[str, Any] = {
        "mode": "items",
        "source": source,
        "n_items": len(arrays.items),
        "n_systems": len(arrays.systems),
        "human": "system-level" if system_only else h_spec,
        "human_higher_is_better": human_hib,
        "metrics": cols,
        "costs": {r.column: r.seconds_per_1000 for r in runs},
    }
    out["correlations"] = _item_correlations(arrays, grouping, system_only)
    out["systems"] = _system_table(arrays, human_hib, lower)
    trust_level = level or ("system" if system_only else "item")
    statistic = "kendall" if trust_level == "system" else "pairwise_accuracy"
    if by:
        bd = breakdown(table, human=h_spec, metrics=cols, by=by, statistic=statistic, level=trust_level,
                       grouping=grouping, min_group_size=min_group_size, human_higher_is_better=human_hib,
                       lower_is_better=sorted(lower), wide=False)
        out["breakdown"] = {"by": by, "statistic": statistic, "rows": bd.to_dict("records")}
    rep = trust_table_items(table, h_spec, cols, level=trust_level, grouping=grouping,
                            by=None if by == "system" else by,
                            min_group_size=min_group_size, costs=runs, human_higher_is_better=human_hib,
                            lower_is_better=sorted(lower), **settings)
    out["trust"] = _trust_json(rep)
    return out


def _item_correlations(arrays: Any, grouping: str, system_only: bool) -> list[dict[str, Any]]:
    import numpy as np

    from evalign.meta.correlation import correlation, system_means
    from evalign.meta.pairwise import pairwise_accuracy

    rows = []
    h = arrays.human
    h_sys = h if h.ndim == 1 else system_means(h)
    for name, m in arrays.metrics.items():
        row: dict[str, Any] = {"metric": name}
        m_sys = system_means(m)
        for method in ("kendall", "pearson", "spearman"):
            row[f"system_{method}"] = correlation(h_sys, m_sys, method, "system").value
        if system_only:
            pa = pairwise_accuracy(h_sys, m_sys, grouping="none", epsilon=0.0)
            row["system_pairwise_accuracy"] = pa.accuracy
        else:
            for method in ("kendall", "pearson", "spearman"):
                row[f"item_{method}"] = correlation(h, m, method, "item", grouping).value  # type: ignore[arg-type]
            pa = pairwise_accuracy(h, m, grouping=grouping)  # type: ignore[arg-type]
            row["pairwise_accuracy"] = pa.accuracy
            row["epsilon"] = pa.epsilon
            row["metric_tie_rate"] = pa.metric_tie_rate
            row["human_tie_rate"] = pa.human_tie_rate
        row["n_items"] = int(np.isfinite(m).any(axis=0).sum())
        rows.append(row)
    return rows


def _system_table(arrays: Any, human_hib: bool, lower: set[str]) -> list[dict[str, Any]]:
    from evalign.meta.correlation import system_means

    h = arrays.human if arrays.human.ndim == 1 else system_means(arrays.human)
    sign_h = 1.0 if human_hib else -1.0
    rows = []
    for i, s in enumerate(arrays.systems):
        row: dict[str, Any] = {"system": s, "human": float(sign_h * h[i])}
        for name, m in arrays.metrics.items():
            row[name] = float((-1.0 if name in lower else 1.0) * system_means(m)[i])
        rows.append(row)
    rows.sort(key=lambda r: (-r["human"] if human_hib else r["human"]) if math.isfinite(r["human"]) else math.inf)
    return rows


# ------------------------------------------------------------------------------------------------
# pair tables


def _run_pairs(
    file: Path | None,
    ds: Any,
    pref: list[str],
    metrics: list[str],
    metric_lower: list[str],
    option: list[str],
    no_cache: bool,
    fields: dict[str, str],
    by: str | None,
    min_group_size: int,
    settings: dict[str, Any],
) -> dict[str, Any]:
    from evalign.datasets import pairs_to_items
    from evalign.io import read_items, read_pairs
    from evalign.meta.breakdown import breakdown, pair_arrays, pair_scores
    from evalign.meta.trust import trust_table_pairs

    pref_cols = list(pref) or (list(ds.pref_columns) if ds is not None else [])
    if not pref_cols:
        raise CliError("name the annotator preference columns with --pref")
    runs: list[Any] = []
    lower: set[str] = set(split_multi(metric_lower))
    if ds is not None:
        pairs = ds.pairs
        source = f"dataset {ds.name}"
        if file is not None:  # scored items of pairs_to_items(pairs)
            items = read_items(file, fields=fields)
            source = str(file)
            if "side" not in items.columns:
                raise CliError(f"{file}: expected the scored items of the pairs (a 'side' column a/b)")
        else:
            items = pairs_to_items(pairs)
        items, cols, runs, low = _metric_columns(items, metrics, option, no_cache, source)
        lower |= low
        table = pair_scores(pairs, items, cols)
    else:
        assert file is not None
        table = read_pairs(file)
        source = str(file)
        cols = []
        for n in metrics:
            if f"{n}_a" not in table.columns or f"{n}_b" not in table.columns:
                raise CliError(f"{file}: no pair score columns '{n}_a' and '{n}_b'")
            cols.append(n)
    arrays = pair_arrays(table, pref_cols, cols, lower_is_better=sorted(lower))
    out: dict[str, Any] = {
        "mode": "pairs",
        "source": source,
        "n_pairs": len(arrays.items),
        "annotators": pref_cols,
        "metrics": cols,
        "costs": {r.column: r.seconds_per_1000 for r in runs},
        "correlations": _pair_summary(arrays),
    }
    if by:
        bd = breakdown(table, human=pref_cols, metrics=cols, by=by, statistic="preference_accuracy",
                       min_group_size=min_group_size, lower_is_better=sorted(lower), wide=False)
        out["breakdown"] = {"by": by, "statistic": "preference_accuracy", "rows": bd.to_dict("records")}
    rep = trust_table_pairs(table, pref_cols, cols, by=None if by == "system" else by, min_group_size=min_group_size, costs=runs,
                            lower_is_better=sorted(lower), **settings)
    out["trust"] = _trust_json(rep)
    return out


def _pair_summary(arrays: Any) -> list[dict[str, Any]]:
    from evalign.meta.pairwise import pairwise_preference_accuracy

    rows = []
    for name, m in arrays.metrics.items():
        r = pairwise_preference_accuracy(arrays.human.T, m[0], m[1])
        r0 = pairwise_preference_accuracy(arrays.human.T, m[0], m[1], epsilon=0.0)
        rows.append({
            "metric": name,
            "accuracy_with_ties": r.accuracy_with_ties,
            "accuracy_without_ties": r0.accuracy_without_ties,
            "epsilon": r.epsilon,
            "metric_tie_rate": r.metric_tie_rate,
            "human_tie_rate": r.n_human_ties / r.n if r.n else float("nan"),
            "n_pairs": r.n,
        })
    return rows


# ------------------------------------------------------------------------------------------------
# output


def _trust_json(rep: Any) -> dict[str, Any]:
    return {
        "statistic": rep.statistic,
        "level": rep.level,
        "confidence": rep.confidence,
        "alpha": rep.alpha,
        "n_resamples": rep.n_resamples,
        "n_permutations": rep.n_permutations,
        "seed": rep.seed,
        "notes": list(rep.notes),
        "groups": rep.groups.to_dict("records"),
        "rows": rep.table.to_dict("records"),
    }


def _print(out: dict[str, Any]) -> None:
    import pandas as pd

    if out["mode"] == "items":
        head = f"{out['n_items']} items x {out['n_systems']} systems, human: {out['human']}"
        print_table(pd.DataFrame(out["correlations"]), title=f"Agreement with humans ({head})")
        if out["human"] == "system-level":
            print_table(pd.DataFrame(out["systems"]), title="System ranking (human; metric = mean item score)")
    else:
        head = f"{out['n_pairs']} pairs, annotators {', '.join(out['annotators'])}"
        print_table(pd.DataFrame(out["correlations"]), title=f"Preference accuracy ({head})")
    if "breakdown" in out:
        bd = pd.DataFrame(out["breakdown"]["rows"])
        ok = bd[bd["status"] != "too small"]
        wide = ok.pivot(index="metric", columns="group", values="value").reindex(
            index=list(dict.fromkeys(ok["metric"])), columns=list(dict.fromkeys(ok["group"]))).reset_index()
        wide.columns.name = None
        print_table(wide, title=f"{out['breakdown']['statistic']} by {out['breakdown']['by']}")
        small = bd[bd["status"] == "too small"].drop_duplicates("group")
        if len(small):
            listing = ", ".join(f"{g} ({n})" for g, n in zip(small["group"], small["n"], strict=True))
            console.print(f"[dim]too small to report: {escape(listing)}[/dim]", highlight=False)
    tr = out["trust"]
    rows = pd.DataFrame(tr["rows"])
    if not rows.empty:
        pct = round(100 * tr["confidence"])
        rows.insert(rows.columns.get_loc("ci_low"), f"{pct}% CI", [
            f"[{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) and math.isfinite(hi) else "-"
            for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)
        ])
        rows = rows.drop(columns=["ci_low", "ci_high"]).rename(columns={"value": tr["statistic"]})
        if rows["epsilon"].isna().all():
            rows = rows.drop(columns=["epsilon"])
        if set(rows["group"]) == {"(all)"}:
            rows = rows.drop(columns=["group", "n"])
        rows = rows.rename(columns={"s_per_1000": "s/1k items"})
        if "epsilon" in rows.columns:
            rows["epsilon"] = [f"{e:.3g}" if isinstance(e, float) and math.isfinite(e) else "-" for e in rows["epsilon"]]
    title = (f"Which metric to trust: ranked by {tr['statistic']} ({tr['level']} level), cluster 1 = not "
             f"significantly worse than the best (significance level {tr['alpha']}; paired permutation test, {tr['n_permutations']} permutations; "
             f"{tr['n_resamples']} bootstrap resamples, seed {tr['seed']})")
    print_table(rows, title=title, digits=3)
    for note in tr["notes"]:
        console.print(f"[dim]{escape(note)}[/dim]", highlight=False)
    skipped = [g for g in tr["groups"] if g["status"] != "ok"]
    if skipped:
        console.print("[dim]groups too small for the trust table: "
                      + ", ".join(f"{g['group']} ({g['n']})" for g in skipped) + "[/dim]", highlight=False)
