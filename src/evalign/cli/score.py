"""``evalign score``: add metric columns to an item table."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from evalign.cli.common import (
    ID_FIELD,
    INPUT_FIELD,
    INSTRUCTION_FIELD,
    LANGUAGE_FIELD,
    REFERENCE_FIELD,
    RESPONSE_FIELD,
    SYSTEM_FIELD,
    TASK_FIELD,
    check_outputs,
    console,
    emit_json,
    err_console,
    field_map,
    print_table,
    progress,
    split_multi,
    suggest,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table
from evalign.cli.system_significance import print_significance, run_significance
from evalign.errors import UsageError, did_you_mean


def register(app: typer.Typer) -> None:
    """Add ``score`` to ``app``."""

    @app.command("score")
    def score_cmd(
        file: str = typer.Argument(
            None, help="Items: JSONL, JSON list, CSV, TSV or Parquet; - reads JSONL from stdin (or --dataset)."
        ),
        dataset: str = DATASET,
        data_dir: Path = DATA_DIR,
        metric: list[str] = typer.Option(["rouge_l", "bleu"], "--metric", "-m", help="Metric name (repeatable)."),
        out: str = typer.Option(None, "--out", "-o", help="Scored items (.jsonl/.csv/.tsv/.parquet; - = JSONL to stdout)."),
        system_out: str = typer.Option(None, "--system-out", help="System-level scores (.csv/.tsv/.jsonl/.parquet; - = stdout)."),
        option: list[str] = typer.Option(
            [], "--option", help="Metric option as metric.key=value, e.g. chrf.char_order=4 (repeatable; "
            "the metric must be one of -m; see `evalign metrics --options`)."
        ),
        no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache."),
        skip_invalid: bool = typer.Option(
            False, "--skip-invalid", help="Leave out rows that fail validation (counted and reported) instead of stopping."
        ),
        id_field: str = ID_FIELD,
        system_field: str = SYSTEM_FIELD,
        instruction_field: str = INSTRUCTION_FIELD,
        input_field: str = INPUT_FIELD,
        reference_field: str = REFERENCE_FIELD,
        response_field: str = RESPONSE_FIELD,
        task_field: str = TASK_FIELD,
        language_field: str = LANGUAGE_FIELD,
        system: str = typer.Option(None, "--system", help="System name for records without one."),
        significance: bool = typer.Option(
            False, "--significance", help="Paired bootstrap and approximate randomization of systems (as sacrebleu)."
        ),
        baseline_system: str = typer.Option(None, "--baseline-system", help="Baseline of --significance (default: first)."),
        all_pairs: bool = typer.Option(False, "--all-pairs", help="--significance between every pair of systems."),
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
        engine: str = typer.Option("local", "--engine", help="local (this process) or ray (Ray Data; needs --out-dir)."),
        out_dir: str = typer.Option(None, "--out-dir", help="Score in shards into this folder (Parquet shards + "
                                    "summary.json), with bounded memory; a re-run resumes."),
        address: str = typer.Option(None, "--address", help="--engine ray: a running Ray cluster (HOST:PORT, "
                                    "ray://HOST:PORT or auto; default: start Ray on this machine)."),
        shard_rows: int = typer.Option(10_000, "--shard-rows", min=1, help="--out-dir: rows per shard."),
        gpus_per_actor: float = typer.Option(0.0, "--gpus-per-actor", min=0, help="--engine ray: GPUs per "
                                             "model-metric actor (0 = CPU)."),
        workers: int = typer.Option(None, "--workers", min=1, help="--engine ray without --address: CPUs "
                                    "Ray may use on this machine (default: all)."),
    ) -> None:
        """Score every response against its reference(s) with the given metrics."""
        if engine != "local" or out_dir is not None or address is not None or gpus_per_actor or workers is not None:
            from evalign.engine.command import score_sharded

            score_sharded(file=file, dataset=dataset, metric=metric, option=option, no_cache=no_cache,
                          skip_invalid=skip_invalid, out=out, system_out=system_out, significance=significance,
                          fields=field_map(id_field, system_field, instruction_field, input_field, reference_field,
                                           response_field, task_field, language_field),
                          system=system, as_json=as_json, engine=engine, out_dir=out_dir, address=address,
                          shard_rows=shard_rows, gpus_per_actor=gpus_per_actor, workers=workers)
            return
        from evalign.io import FORMATS, detect_format, read_items, write_table
        from evalign.metrics.base import Metric, get_metric
        from evalign.scoring import score, system_scores

        fields = field_map(
            id_field, system_field, instruction_field, input_field, reference_field, response_field, task_field, language_field
        )
        # everything the command line says is checked before any work
        names = split_multi(metric)
        if not names:
            raise UsageError("-m: give at least one metric")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UsageError(f"-m {twice[0]}: given twice")
        if (file is None) == (dataset is None):
            raise UsageError("give a FILE of items or --dataset NAME (not both)")
        if file is not None:
            detect_format(file)
        check_outputs(("-o", out, FORMATS), ("--system-out", system_out, FORMATS), stdout_used=as_json)
        options = parse_all_options(option, names, no_cache)
        metrics = [get_metric(m, **options[m]) for m in names]
        source = file if file is not None else dataset_table(dataset, data_dir)
        table = read_items(source, fields=fields, require_reference=True, default_system=system,
                           on_invalid="skip" if skip_invalid else "error")
        skipped = list(table.attrs.get("skipped", []))
        quiet = as_json or out == "-" or system_out == "-"
        with progress(transient=True, disable=quiet) as bar:
            task = bar.add_task("scoring", total=len(metrics))
            inner = bar.add_task("", total=None, visible=False)

            def on_metric(m: Metric, i: int, n: int) -> None:
                bar.update(task, completed=i, description=f"scoring {m.name}")
                bar.update(inner, visible=False)

            def on_progress(m: Metric, done: int, total: int) -> None:
                bar.update(inner, completed=done, total=total, description=f"  {m.name} texts", visible=True)

            scored, runs = score(table, metrics, on_metric=on_metric, on_progress=on_progress)
            bar.update(task, completed=len(metrics))
        sys_df = system_scores(scored, metrics)
        sig = None
        if significance:
            sig = run_significance(scored, metrics, baseline=baseline_system, all_pairs=all_pairs, show_progress=not as_json)
        if out:
            write_table(scored, out)
        if system_out:
            write_table(sys_df, system_out)
        for msg in skipped[:5]:
            err_console.print(f"[yellow]skipped[/yellow]: {escape(msg)}", highlight=False, soft_wrap=True)
        if skipped:
            err_console.print(f"[yellow]{len(skipped)} invalid row(s) skipped[/yellow] (--skip-invalid)", highlight=False)
        if as_json:
            emit_json(
                {
                    "items": len(scored),
                    "skipped": len(skipped),
                    "skipped_rows": skipped,
                    "systems": sys_df.to_dict("records"),
                    "metrics": [r.__dict__ for r in runs],
                    "out": str(out) if out else None,
                    **({"significance": sig} if sig else {}),
                }
            )
            return
        if quiet:
            return
        print_table(sys_df, title=f"System scores ({len(scored)} items)")
        for r in runs:
            extra = "".join(f" {k}={v}" for k, v in r.info.items())
            err_console.print(f"[dim]{escape(f'{r.column}: {r.signature} ({r.seconds:.2f}s){extra}')}[/dim]", highlight=False)
        if sig:
            print_significance(sig)
        if out:
            console.print(escape(f"wrote {out}"))


def parse_all_options(options: list[str], metrics: list[str], no_cache: bool) -> dict[str, dict[str, object]]:
    """The ``--option metric.key=value`` options, per metric of ``metrics``, parsed and checked
    through each metric's declared option types (``option_types``): an option of a metric that is
    not among ``metrics``, an unknown key or a value of the wrong type or range is a
    :class:`UsageError` naming the option. Metrics without declarations get JSON-parsed values."""
    import json

    from evalign.metrics.base import metric_class

    out: dict[str, dict[str, object]] = {m: {} for m in metrics}
    classes = {m: metric_class(m) for m in metrics}  # unknown metric names fail here
    for opt in options:
        lhs, sep, value = opt.partition("=")
        name, dot, key = lhs.strip().partition(".")
        if not sep or not dot or not name or not key:
            raise UsageError(f"--option '{opt}': expected metric.key=value, e.g. chrf.char_order=4")
        if name not in out:
            hint = did_you_mean(name, metrics)
            raise UsageError(f"--option '{opt}': metric '{name}' is not scored in this run{hint} (add -m {name})")
        specs = classes[name].option_types
        where = f"--option {name}.{key}"
        if specs:
            if key not in specs or not specs[key].cli:
                raise suggest("option", key, [k for k, v in specs.items() if v.cli], where=f"--option {name}.{key}")
            parsed = specs[key].parse(value, where)
        else:
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                parsed = value
        if key in out[name]:
            raise UsageError(f"{where}: given twice")
        out[name][key] = parsed
    for m, cls in classes.items():
        if no_cache and cls.uses_cache:
            out[m]["use_cache"] = False
    return out


def parse_options(options: list[str], metric: str, no_cache: bool) -> dict[str, object]:
    """Options ``metric.key=value`` that apply to ``metric`` (parsed and checked as by
    :func:`parse_all_options`; options of other metrics are left for them)."""
    mine = [o for o in options if o.partition("=")[0].strip().partition(".")[0] == metric or "." not in o.partition("=")[0]]
    return parse_all_options(mine, [metric], no_cache)[metric]
