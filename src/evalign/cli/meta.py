"""``evalign meta``: how well metrics and judges agree with human judgments, and which to trust.

The command only parses its options into an :class:`~evalign.evaluate.EvalSpec` and renders the
:class:`~evalign.evaluate.EvalResult` of :func:`~evalign.evaluate.evaluate`."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    cache_input,
    console,
    emit_json,
    err_console,
    field_map,
    print_table,
    resampling_of,
    split_multi,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, LABELS
from evalign.cli.panel_options import (
    PANEL_CALIBRATION,
    PANEL_MIN,
    PANEL_RULE,
    PANEL_SOFT,
    PANEL_TIE,
    check_panel_calibration,
    check_panel_options,
    panel_settings,
    panel_specs,
)
from evalign.cli.published import published_settings, run_published
from evalign.cli.score import parse_options
from evalign.cli.selective_options import (
    CASCADE,
    DELTA,
    HOLDOUT,
    RISK,
    SAVE_CALIBRATION,
    SELECTIVE,
    render_selective,
    save_calibration,
    selective_errors,
    selective_request,
    with_selective,
)
from evalign.columns import resolve_metric_column
from evalign.errors import EvalignError, UsageError
from evalign.io import refuse_output_onto_inputs
from evalign.metrics.base import get_metric, metric_class

if TYPE_CHECKING:
    import pandas as pd

#: the order diagnostics' fields (:data:`evalign.meta.order_diagnostics.FIELDS`; that module loads numpy)
ORDER_FIELDS = ("accuracy_original", "accuracy_swapped", "accuracy_mean", "accuracy_both", "position_agreement",
                "prefers_first", "prefers_longer")
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
GROUPING: Any = typer.Option(None, "--grouping", help="Item-level grouping: none, item or system (default: item, "
                             "or the dataset's own: none for sets with one output per input).")
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
PRICE: Any = typer.Option([], "--price", help="A judge's price per million input/output tokens for its cost per "
                          "1,000 items: IN/OUT (every judge) or COLUMN=IN/OUT (repeatable).")
PRICES: Any = typer.Option(None, "--prices", help="A price file (YAML: model name or glob -> {input, output} per "
                           "million tokens; looked up by each judge's J.model column); default: $EVALIGN_PRICES.")
ALT_TEST: Any = typer.Option(False, "--alt-test", help="Alt-Test of each judge against the individual annotators "
                                                       "(Calderon et al. 2025; needs >= 2 annotator columns).")
EPSILON: Any = typer.Option(None, "--epsilon", help="The Alt-Test's cost-benefit margin in [0, 1) (implies "
                                                    "--alt-test; default: by the dataset's annotators: experts 0.2, "
                                                    "skilled 0.15, crowd 0.1; unknown 0.1).")
MIN_ITEMS: Any = typer.Option(None, "--min-items", help="With --alt-test: items an annotator needs to be tested "
                                                       "(default 30; as evalign alt-test's --min-items).")
PUBLISHED: Any = typer.Option(False, "--published", help="Every judge and metric the datasets ship, on every set with "
                                                         "its files here, in one table (--dataset: only these sets).")
TOP: Any = typer.Option(None, "--top", help="With --published: the best N columns of each set only.")
PANEL: Any = typer.Option([], "--panel", help="NAME=COL1,COL2,...: judge columns combined into one panel judge (a row "
                          "beside its members, with a confidence from the votes; repeatable; see --panel-rule).")
AGREEMENT: Any = typer.Option(False, "--agreement", help="Each judge's kappa with each annotator against the "
                                                         "annotators' kappa with each other (the human ceiling).")


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
    as_json: bool = AS_JSON, price: list[str] = PRICE, prices: Path = PRICES, alt_test: bool = ALT_TEST,
    epsilon: float = EPSILON, agreement: bool = AGREEMENT, published: bool = PUBLISHED, top: int = TOP,
    selective: bool = SELECTIVE, risk: float = RISK, delta: float = DELTA, cascade: str = CASCADE,
    holdout: float = HOLDOUT, save_calibration_to: Path = SAVE_CALIBRATION, min_items: int = MIN_ITEMS, panel: list[str] = PANEL,
    panel_rule: str = PANEL_RULE, panel_tie: str = PANEL_TIE, panel_min: int = PANEL_MIN,
    panel_calibration: Path = PANEL_CALIBRATION, panel_soft: bool = PANEL_SOFT,
) -> None:
    """Correlations, pairwise accuracy with tie calibration, baselines, breakdowns and the trust table."""
    from evalign.evaluate import evaluate  # scipy: not at every command's start
    from evalign.evaluate.inputs import InputSettings  # scipy: not at every command's start
    from evalign.evaluate.prepare import is_glob  # scipy: not at every command's start

    _check_options(level, grouping, bootstrap, permutations, confidence, alpha, min_group_size)
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(seed=seed, top=top)
    check_panel_options(bool(panel), panel_rule, panel_tie, panel_min, panel_soft, panel_calibration)
    panels = panel_specs(list(panel), panel_settings(panel_rule, panel_tie, panel_min, panel_soft))
    sel = selective_request(selective, risk, delta, cascade, holdout, save_calibration_to, seed=seed,
                            confidence=confidence, published=published)
    if panels:
        check_panel_calibration(panel_rule, panel_calibration, Path(file) if file else None,
                                holdout=sel.holdout if sel is not None else None)
    refuse_output_onto_inputs({"--save-calibration": save_calibration_to},
                              {"FILE": file, "--system-human": system_human, "--prices": prices, **cache_input(),
                               "(a judge summary beside FILE, read for the judges' specs)":
                               sorted(Path(file).parent.glob("*.summary.json")) if file and save_calibration_to else []})
    if published:
        given = [o for o, v in (("FILE", file), ("--metric", metric), ("--human", human), ("--pref", pref),
                                ("--system-human", system_human), ("--labels", labels), ("--by", by)) if v]
        if given:
            raise CliError(f"--published evaluates every dataset's own columns and labels: not with {', '.join(given)}")
        check_resampling(resampling_method, workers)
        run_published(published_settings(datasets=dataset, data_dir=data_dir, bootstrap=bootstrap,
                                          permutations=permutations, seed=seed, alpha=alpha, confidence=confidence,
                                          epsilon=epsilon, workers=workers, panels=panels), as_json=as_json, top=top)
        return
    if top is not None:
        raise CliError("--top goes with --published")
    check_resampling(resampling_method, workers)
    if file is None and dataset is None:
        raise CliError("give a FILE of scored items or --dataset NAME")
    metrics = split_multi(metric)
    if not metrics and not panels and dataset is None:
        raise CliError("name the metric or judge columns (or metrics to compute) with --metric")
    fields = field_map(id_field, system_field, None, None, reference_field, response_field, task_field,
                       language_field)
    settings = InputSettings(file=file, dataset=dataset, data_dir=data_dir, fields=fields, human=human,
                             system_human=system_human, lower_is_better=lower_is_better,
                             pref=tuple(split_multi(pref)), rule="flags",
                             scores=tuple(n for n in metrics if not is_glob(n)), label_set=labels)
    resampling = resampling_of(n_resamples=bootstrap, n_permutations=permutations, confidence=confidence,
                               alpha=alpha, seed=seed, method=resampling_method, workers=workers)
    from evalign.judges.usage import price_book

    spec = meta_spec(settings, metrics, split_multi(metric_lower), option, no_cache, panels=(panels, panel_calibration),
                     level=level, grouping=grouping,
                     by=by, min_group_size=min_group_size, resampling=resampling,
                     baselines=not no_baselines, prices=price_book(prices, list(price)))
    spec = with_judge_tests(spec, dataset, alt_test=alt_test, epsilon=epsilon, agreement=agreement,
                            min_items=min_items)
    spec = with_selective(spec, sel)
    with Stages(disable=as_json) as stages:
        stages.start(f"meta-evaluating: {bootstrap} bootstrap resamples, {permutations} permutations per test")
        with selective_errors(sel):
            result = evaluate(spec, progress=stages.resampling())
    save_calibration(result.selective, save_calibration_to, spec.dataset or spec.source)
    if as_json:
        emit_json(result.to_json())
        if result.refused and result.selective is None:  # (the selective table computed: exit 0, as the terminal's)
            raise SystemExit(1)
        return
    if result.selective is not None:
        render_selective(result.selective, confidence)
        return
    render(result)
    if result.refused:
        raise CliError(result.refused)


def _check_options(level: str | None, grouping: str | None, bootstrap: int, permutations: int, confidence: float,
                   alpha: float, min_group_size: int | None) -> None:
    if level is not None and level not in LEVELS:
        raise CliError(f"--level must be one of {', '.join(LEVELS)}, got '{level}'")
    if grouping is not None and grouping not in GROUPINGS:
        raise CliError(f"--grouping must be one of {', '.join(GROUPINGS)}, got '{grouping}'")
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(bootstrap=bootstrap, permutations=permutations, confidence=confidence, alpha=alpha,
                  min_group_size=min_group_size)


def with_judge_tests(spec: Any, dataset: str | None, *, alt_test: bool, epsilon: float | None, agreement: bool,
                     min_items: int | None = None) -> Any:
    """``spec`` with the Alt-Test (``--alt-test``, or ``--epsilon`` given; epsilon by the annotators
    of ``dataset``, ``NAME[:VARIANT]``, when not given; ``min_items``: items an annotator needs, None
    for the test's default) and the human-ceiling ``--agreement``. A bad value is named as its option
    in the words of ``evalign alt-test``."""
    import dataclasses

    from evalign.cli.alt_test import named_settings
    from evalign.evaluate.alt_test import dataset_settings  # scipy: not at every command's start

    testing = alt_test or epsilon is not None
    if min_items is not None and not testing:
        raise CliError("--min-items goes with --alt-test")
    if not (testing or agreement):
        return spec
    with named_settings():
        alt = dataset_settings(dataset, epsilon, **({} if min_items is None else {"min_items": min_items})) \
            if testing else None
    return dataclasses.replace(spec, alt_test=alt, agreement="auto" if agreement else None)


def check_resampling(method: str, workers: int | None) -> None:
    """The ``--resampling`` and ``--workers`` options of ``meta`` and ``report``, checked."""
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    if method not in ("auto", "items"):
        raise CliError(f"--resampling must be auto or items, got '{method}'")
    check_options(workers=workers)


def meta_spec(settings: Any, metrics: list[str], lower: list[str], option: list[str], no_cache: bool,
              **spec_kw: Any) -> Any:
    """The :class:`~evalign.evaluate.EvalSpec` of ``evalign meta``: the inputs of ``settings``
    (an :class:`~evalign.evaluate.inputs.InputSettings`), the ``metrics`` columns found or
    computed (``option``: their ``--option`` values; a glob selects judge columns; none: the
    dataset's shipped judge and metric columns for the chosen labels, see
    :func:`~evalign.evaluate.prepare.expand_names`), and the remaining spec fields ``spec_kw``. A
    dataset adds what it declares: the direction of its shipped columns, its default grouping
    (``grouping=None``) and item-level statistic, and its own statistics."""
    from evalign.evaluate import EvalSpec, TrustRequest  # scipy: not at every command's start
    from evalign.evaluate.prepare import expand_names  # scipy: not at every command's start

    panels, calibration = spec_kw.pop("panels", ([], None))
    inputs = meta_inputs(settings)
    ds = inputs.ds
    default = ds.columns_for(inputs.human.column) if ds is not None else []
    if spec_kw.get("grouping") is None:
        spec_kw["grouping"] = ds.grouping if ds is not None else "item"
    if (ds is not None and ds.statistic and not spec_kw.get("trust") and inputs.human.kind == "item"
            and spec_kw.get("level") in (None, "item")):
        spec_kw["trust"] = (TrustRequest(ds.statistic, "item", spec_kw["grouping"]),)
    try:
        if metrics or default or not panels:  # a panel alone: its members and itself
            metrics = expand_names(metrics, table=inputs.items, pairs=inputs.pairs, default=default,
                                   source=inputs.source)
    except EvalignError as e:
        suffix = "" if metrics else " with --metric (the dataset ships no judge columns)"
        raise CliError(f"{e}{suffix}") from None
    if panels:
        inputs, metrics = _with_panels(inputs, metrics, panels, calibration, settings.human)
    options = {n: _options(option, n, no_cache) for n in metrics}
    if ds is not None:
        lower = [*lower, *(c for c in ds.lower_is_better if c in metrics and c not in lower)]
    table, cols, runs = _columns(inputs, metrics, lower, options)
    try:
        return EvalSpec(human=inputs.human, columns=tuple(cols), items=table, pairs=inputs.pairs,
                        source=inputs.source, dataset=inputs.dataset, costs={r.column: r.seconds_per_1000 for r in runs},
                        statistics=tuple(ds.statistics) if ds is not None else (), **spec_kw)
    except EvalignError as e:
        raise CliError(str(e)) from None


def _with_panels(inputs: Any, metrics: list[str], panels: list[Any], calibration: Path | None,
                 human: str | None) -> tuple[Any, list[str]]:
    """The inputs with each panel's columns in the pair table (verdicts) or the item table (grades), and the
    judge list with each panel after its members (members added when not named)."""
    import dataclasses

    from evalign.cli.panel_options import add_panels, calibration_weights_of, panel_notes

    graded = inputs.pairs is None
    if any(p.settings.rule == "weighted" for p in panels):
        if calibration is None:
            raise UsageError("--panel-rule weighted needs --panel-calibration FILE (labelled items, never the "
                             "evaluated ones)")
        panels = [dataclasses.replace(p, settings=dataclasses.replace(p.settings, weights=calibration_weights_of(
            calibration, list(p.members), graded=graded, label=human if graded else None))) for p in panels]
    table = inputs.items if graded else inputs.pairs
    table, results = add_panels(table, panels, graded=graded)
    inputs = dataclasses.replace(inputs, **({"items": table} if graded else {"pairs": table}))
    names = list(metrics)
    for p in panels:
        names += [m for m in p.members if m not in names]
        names.append(p.name)
    for line in panel_notes(panels, results):
        err_console.print(f"[dim]note: {escape(line)}[/dim]", highlight=False)
    return inputs, names


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
                           lower_is_better=lower, options=options, on_scoring=spinner,
                           lower_option="--metric-lower-is-better")


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
            lower = [c for c in lower if c != n]  # named by its column from here on
        out.append(found or n)
    return out, lower


# ------------------------------------------------------------------------------------------------
# output


def trust_display(rows: Any, confidence: float, statistic: str) -> Any:
    """A trust table's rows as a terminal table: the interval in one column, ``beats_baselines``
    as yes / no, empty columns left out."""
    import pandas as pd  # tables to print: not at `evalign meta --help`

    from evalign.meta.order_diagnostics import FIELDS  # numpy only, but evalign.meta is heavy

    rows = pd.DataFrame(rows).copy()
    if rows.empty:
        return rows
    from evalign.evaluate.annotators import ALT_COLUMNS, CEILING_COLUMNS  # numpy: not at start

    cost = [c for c in COST_SHOWN if c != "s_per_1000"]  # shown in their own table (print_costs)
    rows = rows.drop(columns=[c for c in ("definition", *FIELDS, *cost, *ALT_COLUMNS, *CEILING_COLUMNS)
                              if c in rows.columns])
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
                                "accuracy_parsed": "acc. parsed only", "n_unparseable": "unparseable",
                                "accuracy_weighted": "weighted by p_a"})


#: the order diagnostics shown under a trust table, with their short headers
DIAGNOSTICS_SHOWN = {"accuracy_original": "acc. A first", "accuracy_swapped": "acc. B first",
                     "accuracy_mean": "acc. mean (2 orders)", "accuracy_both": "acc. both orders",
                     "position_agreement": "orders agree", "prefers_first": "picks first shown",
                     "prefers_longer": "picks longer"}


def diagnostics_display(rows: Any, group: str = "(all)") -> pd.DataFrame:
    """The order diagnostics of the judges run in both orders, for one group of a trust table's
    rows, in the table's order (empty when no judge has them): the key figures of
    :data:`evalign.meta.order_diagnostics.FIELDS` (all of them are in ``--json``)."""
    import pandas as pd

    rows = pd.DataFrame(rows)
    if rows.empty or "accuracy_both" not in rows.columns:
        return pd.DataFrame()
    rows = rows[(rows["group"] == group) & pd.to_numeric(rows["accuracy_both"], errors="coerce").notna()]
    return rows[["metric", *DIAGNOSTICS_SHOWN]].rename(columns=DIAGNOSTICS_SHOWN).reset_index(drop=True)


#: the cost columns shown under a trust table, with their headers
COST_SHOWN = {"calls": "calls", "prompt_tokens": "prompt tokens", "completion_tokens": "completion tokens",
              "s_per_call": "s/call", "parse_rate": "parse rate", "s_per_1000": "s/1k items",
              "cost_per_1000": "cost/1k items", "list_cost_per_1000": "list cost/1k items"}


def cost_display(rows: Any, group: str = "(all)") -> pd.DataFrame:
    """The cost column group of the judges with usage (calls, tokens, seconds, parse rate, cost per
    1,000 items), for one group of a trust table's rows, beside the ranking statistic (empty when no
    judge has usage)."""
    import pandas as pd

    rows = pd.DataFrame(rows)
    if rows.empty or "calls" not in rows.columns:
        return pd.DataFrame()
    rows = rows[(rows["group"] == group) & pd.to_numeric(rows["calls"], errors="coerce").notna()]
    out = rows[["metric", "value", *COST_SHOWN]].rename(columns=COST_SHOWN).reset_index(drop=True)
    for c in ("calls", "prompt tokens", "completion tokens"):
        out[c] = [f"{int(v):,}" for v in out[c]]
    out["cost/1k items"] = ["-" if not (isinstance(v, float) and math.isfinite(v)) else f"{v:.4g}"
                            for v in out["cost/1k items"]]
    return out


def print_costs(rows: Any, statistic: str) -> None:
    """The judges' cost table under a trust table (nothing when no judge has usage columns)."""
    df = cost_display(rows)
    if df.empty:
        return
    print_table(df.rename(columns={"value": statistic}), digits=3,
                title="Judges: cost and time (whole table; seconds are the calls' latencies added up; cost needs a "
                      "price: --price IN/OUT or --prices FILE)")


def print_judges_vs_humans(r: Any, t: Any) -> None:
    """Under the first trust table: can these judges replace an annotator? The Alt-Test and the
    agreement against the human ceiling of each judge, then their details (p-values, the
    annotators' own agreement) and what was left out."""
    from evalign.report.tables import alt_test_p_display, judges_vs_humans_display  # pandas: not at start

    if r.alt_test is None and r.ceiling is None:
        return
    titles = [x.short_title for x in (r.alt_test, r.ceiling) if x is not None]
    print_table(judges_vs_humans_display(t.rows, r.alt_test, r.ceiling, t.statistic),
                title="Can these judges replace an annotator? " + "; ".join(titles), digits=3)
    if r.alt_test is not None:
        p = alt_test_p_display(r.alt_test.p_values())
        if not p.empty:
            print_table(p, title="Alt-Test p-value per left-out annotator (H0: the annotator's advantage >= "
                                 "epsilon; * = rejected: the judge wins against that annotator)")
        console.print(escape(f"Alt-Test settings: {r.alt_test.describe()}"), highlight=False)
        for line in r.alt_test.dropped():
            err_console.print(f"[dim]Alt-Test left out: {escape(line)}[/dim]", highlight=False)
    notes = [*(r.alt_test.notes if r.alt_test is not None else ()), *(r.ceiling.notes if r.ceiling is not None else ())]
    for note in dict.fromkeys(notes):
        err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)


def print_calibration(r: Any) -> None:
    """The calibration of the judges that state a probability (nothing when none does)."""
    from evalign.report.tables import calibration_display  # pandas: not at start

    if not r.calibration:
        return
    print_table(calibration_display(r.calibration),
                title=f"Calibration of the judges' stated probabilities (J.p_a: P(A better) vs the humans' majority, "
                      f"ties left out; J.p: P(chosen grade) vs the humans' grade); ECE over "
                      f"{r.calibration[0].binning}", digits=3)


def print_diagnostics(rows: Any) -> bool:
    """The order diagnostics table under a trust table (nothing when no judge has both orders);
    whether it printed one."""
    df = diagnostics_display(rows)
    if df.empty:
        return False
    print_table(df, title="Judges run in both orders: accuracy in each order (A shown first as in the table, then "
                          "swapped), as LLMBar reports it (mean of the two orders), "
                          "when both orders are right (the ranked verdict), how often the orders agree, and the "
                          "share of decided verdicts that picked the first-shown or the longer response", digits=3)
    return True


def _format_extras(rows: pd.DataFrame) -> pd.DataFrame:
    """The optional columns of a trust table: left out when empty, ``epsilon`` and ``n_unparseable``
    as text."""
    import pandas as pd

    for c in ("epsilon", "s_per_1000", "n_unparseable", "accuracy_parsed", "p_vs_best", "accuracy_weighted"):
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
    import pandas as pd

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
        print_table(overview.drop(columns=[c for c in ORDER_FIELDS if c in overview.columns]),
                    title=f"{title} ({head})")  # the order diagnostics: their own table below
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
    print_trust_tables(r)
    if r.refused is None and r.trust:
        err_console.print(f"[dim]signature: {escape(r.signature['text'])}[/dim]", highlight=False)


def print_trust_tables(r: Any) -> None:
    """Each trust table with the order diagnostics of its judges run in both orders; when no table
    has them (too few pairs to rank), the diagnostics over all pairs from the overview."""
    shown = False
    for i, t in enumerate(r.trust):
        print_trust(t, trust_display(t.rows, t.signature["confidence"], t.statistic), trust_title(t, r))
        shown = print_diagnostics(t.rows) or shown
        print_costs(t.rows, t.statistic)
        if i == 0:
            print_judges_vs_humans(r, t)
            print_calibration(r)
    if not shown and "accuracy_both" in r.overview.columns:  # nothing ranked: the judges still described
        print_diagnostics(r.overview.assign(group="(all)"))
