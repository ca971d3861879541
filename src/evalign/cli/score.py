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
    CliError,
    console,
    emit_json,
    err_console,
    field_map,
    print_table,
    progress,
    split_multi,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table
from evalign.cli.system_significance import print_significance, run_significance


def register(app: typer.Typer) -> None:
    """Add ``score`` to ``app``."""

    @app.command("score")
    def score_cmd(
        file: Path = typer.Argument(None, help="Items: JSONL, JSON list, CSV or Parquet (or --dataset)."),
        dataset: str = DATASET,
        data_dir: Path = DATA_DIR,
        metric: list[str] = typer.Option(["rouge_l", "bleu"], "--metric", "-m", help="Metric name (repeatable)."),
        out: Path = typer.Option(None, "--out", "-o", help="Scored items (.jsonl/.csv/.parquet)."),
        system_out: Path = typer.Option(None, "--system-out", help="System-level scores (.csv/.jsonl)."),
        option: list[str] = typer.Option(
            [], "--option", help="Metric option as metric.key=value, e.g. semscore.model=/path (repeatable)."
        ),
        no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the cache."),
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
    ) -> None:
        """Score every response against its reference(s) with the given metrics."""
        from evalign.io import read_items, write_table
        from evalign.metrics.base import Metric, get_metric
        from evalign.scoring import score, system_scores

        fields = field_map(
            id_field, system_field, instruction_field, input_field, reference_field, response_field, task_field, language_field
        )
        if (file is None) == (dataset is None):
            raise CliError("give a FILE of items or --dataset NAME (not both)")
        source = file if file is not None else dataset_table(dataset, data_dir)
        table = read_items(source, fields=fields, require_reference=True, default_system=system)
        metrics = [get_metric(m, **parse_options(option, m, no_cache)) for m in split_multi(metric)]
        with progress(transient=True, disable=as_json) as bar:
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
        if as_json:
            emit_json(
                {
                    "items": len(scored),
                    "systems": sys_df.to_dict("records"),
                    "metrics": [r.__dict__ for r in runs],
                    "out": str(out) if out else None,
                    **({"significance": sig} if sig else {}),
                }
            )
            return
        print_table(sys_df, title=f"System scores ({len(scored)} items)")
        for r in runs:
            extra = "".join(f" {k}={v}" for k, v in r.info.items())
            err_console.print(f"[dim]{escape(f'{r.column}: {r.signature} ({r.seconds:.2f}s){extra}')}[/dim]", highlight=False)
        if sig:
            print_significance(sig)
        if out:
            console.print(escape(f"wrote {out}"))


def parse_options(options: list[str], metric: str, no_cache: bool) -> dict[str, object]:
    """Options ``metric.key=value`` that apply to ``metric`` (values parsed as JSON when they can be)."""
    import json

    from evalign.cli.common import CliError
    from evalign.metrics.base import metric_class

    out: dict[str, object] = {}
    for opt in options:
        if "=" not in opt or "." not in opt.split("=", 1)[0]:
            raise CliError(f"--option '{opt}': expected metric.key=value")
        lhs, value = opt.split("=", 1)
        name, key = lhs.split(".", 1)
        if name != metric:
            continue
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    if no_cache and metric_class(metric).uses_cache:
        out["use_cache"] = False
    return out
