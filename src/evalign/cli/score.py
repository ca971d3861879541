"""``evalign score``: add metric columns to an item table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from evalign import scoring  # scoring.score looked up at call time (tests replace it)
from evalign.cli.common import (
    AS_JSON,
    ID_FIELD,
    INPUT_FIELD,
    INSTRUCTION_FIELD,
    LANGUAGE_FIELD,
    REFERENCE_FIELD,
    RESPONSE_FIELD,
    SYSTEM_FIELD,
    TASK_FIELD,
    cache_input,
    check_outputs,
    console,
    emit_json,
    err_console,
    field_map,
    print_table,
    progress,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table
from evalign.cli.score_sharded import metric_names, score_sharded
from evalign.cli.system_significance import print_significance, run_significance
from evalign.errors import UsageError
from evalign.io import FORMATS, detect_format, read_items, refuse_output_onto_inputs, write_table
from evalign.metrics.base import Metric, get_metric
from evalign.metrics.option_parsing import parse_all_options, parse_options
from evalign.scoring import MetricRun, system_scores

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ScoreArgs", "parse_all_options", "parse_options", "register", "score_cmd"]

FILE: Any = typer.Argument(
    None, help="Items: JSONL, JSON list, CSV, TSV or Parquet; - reads JSONL from stdin (or --dataset)."
)
METRIC: Any = typer.Option(["rouge_l", "bleu"], "--metric", "-m", help="Metric name (repeatable).")
OUT: Any = typer.Option(None, "--out", "-o", help="Scored items (.jsonl/.csv/.tsv/.parquet; - = JSONL to stdout).")
SYSTEM_OUT: Any = typer.Option(None, "--system-out", help="System-level scores (.csv/.tsv/.jsonl/.parquet; - = stdout).")
OPTION: Any = typer.Option(
    [], "--option", help="Metric option as metric.key=value, e.g. chrf.char_order=4 (repeatable; "
    "the metric must be one of -m; see `evalign metrics --options`)."
)
NO_CACHE: Any = typer.Option(False, "--no-cache", help="Do not read or write the cache.")
SKIP_INVALID: Any = typer.Option(
    False, "--skip-invalid", help="Leave out rows that fail validation (counted and reported) instead of stopping."
)
SYSTEM: Any = typer.Option(None, "--system", help="System name for records without one.")
SIGNIFICANCE: Any = typer.Option(
    False, "--significance", help="Paired bootstrap and approximate randomization of systems (as sacrebleu)."
)
BASELINE_SYSTEM: Any = typer.Option(None, "--baseline-system", help="Baseline of --significance (default: first).")
ALL_PAIRS: Any = typer.Option(False, "--all-pairs", help="--significance between every pair of systems.")
ENGINE: Any = typer.Option("local", "--engine", help="local (this process) or ray (Ray Data; needs --out-dir).")
OUT_DIR: Any = typer.Option(None, "--out-dir", help="Score in shards into this folder (Parquet shards + "
                            "summary.json), with bounded memory; a re-run resumes.")
ADDRESS: Any = typer.Option(None, "--address", help="--engine ray: a running Ray cluster (HOST:PORT, "
                            "ray://HOST:PORT or auto; default: start Ray on this machine).")
SHARD_ROWS: Any = typer.Option(10_000, "--shard-rows", help="--out-dir: rows per shard.")
GPUS_PER_ACTOR: Any = typer.Option(0.0, "--gpus-per-actor", help="--engine ray: GPUs per "
                                   "model-metric actor (0 = CPU).")
WORKERS: Any = typer.Option(None, "--workers", help="--engine ray without --address: CPUs "
                            "Ray may use on this machine (default: all).")


@dataclass(frozen=True)
class ScoreArgs:
    """The command line of ``evalign score``, as given (checked by the paths that run it)."""

    file: str | None
    dataset: str | None
    data_dir: Path | None
    metric: list[str]
    option: list[str]
    no_cache: bool
    skip_invalid: bool
    out: str | None
    system_out: str | None
    fields: dict[str, str] = field(default_factory=dict)
    system: str | None = None
    significance: bool = False
    baseline_system: str | None = None
    all_pairs: bool = False
    as_json: bool = False
    engine: str = "local"
    out_dir: str | None = None
    address: str | None = None
    shard_rows: int = 10_000
    gpus_per_actor: float = 0.0
    workers: int | None = None

    @property
    def sharded(self) -> bool:
        """Whether the run goes through a sharded engine (:mod:`evalign.engine`)."""
        return (self.engine != "local" or self.out_dir is not None or self.address is not None
                or bool(self.gpus_per_actor) or self.workers is not None)

    @property
    def quiet(self) -> bool:
        """Whether standard output carries data (no tables, no progress)."""
        return self.as_json or self.out == "-" or self.system_out == "-"


def score_cmd(
    file: str = FILE,
    dataset: str = DATASET,
    data_dir: Path = DATA_DIR,
    metric: list[str] = METRIC,
    out: str = OUT,
    system_out: str = SYSTEM_OUT,
    option: list[str] = OPTION,
    no_cache: bool = NO_CACHE,
    skip_invalid: bool = SKIP_INVALID,
    id_field: str = ID_FIELD,
    system_field: str = SYSTEM_FIELD,
    instruction_field: str = INSTRUCTION_FIELD,
    input_field: str = INPUT_FIELD,
    reference_field: str = REFERENCE_FIELD,
    response_field: str = RESPONSE_FIELD,
    task_field: str = TASK_FIELD,
    language_field: str = LANGUAGE_FIELD,
    system: str = SYSTEM,
    significance: bool = SIGNIFICANCE,
    baseline_system: str = BASELINE_SYSTEM,
    all_pairs: bool = ALL_PAIRS,
    as_json: bool = AS_JSON,
    engine: str = ENGINE,
    out_dir: str = OUT_DIR,
    address: str = ADDRESS,
    shard_rows: int = SHARD_ROWS,
    gpus_per_actor: float = GPUS_PER_ACTOR,
    workers: int = WORKERS,
) -> None:
    """Score every response against its reference(s) with the given metrics."""
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(shard_rows=shard_rows, gpus_per_actor=gpus_per_actor)
    if workers is not None and workers < 1:  # (Ray's CPUs: not meta's --workers, where 0 is every core)
        raise UsageError(f"--workers must be an integer >= 1 (CPUs Ray may use), got {workers!r}")
    fields = field_map(id_field, system_field, instruction_field, input_field, reference_field, response_field,
                       task_field, language_field)
    args = ScoreArgs(file=file, dataset=dataset, data_dir=data_dir, metric=metric, option=option, no_cache=no_cache,
                     skip_invalid=skip_invalid, out=out, system_out=system_out, fields=fields, system=system,
                     significance=significance, baseline_system=baseline_system, all_pairs=all_pairs,
                     as_json=as_json, engine=engine, out_dir=out_dir, address=address, shard_rows=shard_rows,
                     gpus_per_actor=gpus_per_actor, workers=workers)
    if args.sharded:
        score_sharded(file=file, dataset=dataset, metric=metric, option=option, no_cache=no_cache,
                      skip_invalid=skip_invalid, out=out, system_out=system_out, significance=significance,
                      fields=fields, system=system, as_json=as_json, engine=engine, out_dir=out_dir,
                      address=address, shard_rows=shard_rows, gpus_per_actor=gpus_per_actor, workers=workers)
        return
    score_local(args)


def register(app: typer.Typer) -> None:
    """Add ``score`` to ``app``."""
    app.command("score")(score_cmd)


def check_local(args: ScoreArgs) -> list[Metric]:
    """Everything the command line says, checked before any work: the metrics it builds."""
    names = metric_names(args.metric)
    if (args.file is None) == (args.dataset is None):
        raise UsageError("give a FILE of items or --dataset NAME (not both)")
    if args.file is not None:
        detect_format(args.file)
    check_outputs(("-o", args.out, FORMATS), ("--system-out", args.system_out, FORMATS), stdout_used=args.as_json)
    refuse_output_onto_inputs({"-o": args.out, "--system-out": args.system_out}, {"FILE": args.file, **cache_input()})
    options = parse_all_options(args.option, names, args.no_cache)
    return [get_metric(m, **options[m]) for m in names]


def score_local(args: ScoreArgs) -> None:
    """``evalign score`` in this process: read, score (with progress), write and print."""
    metrics = check_local(args)
    source: Any = args.file
    if source is None:
        assert args.dataset is not None  # check_local: a FILE or --dataset
        source = dataset_table(args.dataset, args.data_dir)
    table = read_items(source, fields=args.fields, require_reference=True, default_system=args.system,
                       on_invalid="skip" if args.skip_invalid else "error")
    skipped = list(table.attrs.get("skipped", []))
    scored, runs = score_with_progress(table, metrics, disable=args.quiet)
    sys_df = system_scores(scored, metrics)
    sig = None
    if args.significance:
        sig = run_significance(scored, metrics, baseline=args.baseline_system, all_pairs=args.all_pairs,
                               show_progress=not args.as_json)
    if args.out:
        write_table(scored, args.out)
    if args.system_out:
        write_table(sys_df, args.system_out)
    print_scores(args, scored, sys_df, runs, skipped, sig)


def score_with_progress(table: pd.DataFrame, metrics: list[Metric], *,
                        disable: bool) -> tuple[pd.DataFrame, list[MetricRun]]:
    """:func:`evalign.scoring.score` with a bar per metric and one for its texts (on stderr)."""
    with progress(transient=True, disable=disable) as bar:
        task = bar.add_task("scoring", total=len(metrics))
        inner = bar.add_task("", total=None, visible=False)

        def on_metric(m: Metric, i: int, n: int) -> None:
            bar.update(task, completed=i, description=f"scoring {m.name}")
            bar.update(inner, visible=False)

        def on_progress(m: Metric, done: int, total: int) -> None:
            bar.update(inner, completed=done, total=total, description=f"  {m.name} texts", visible=True)

        scored, runs = scoring.score(table, metrics, on_metric=on_metric, on_progress=on_progress)
        bar.update(task, completed=len(metrics))
    return scored, runs


def print_scores(args: ScoreArgs, scored: pd.DataFrame, sys_df: pd.DataFrame, runs: list[MetricRun],
                 skipped: list[Any], sig: dict[str, Any] | None) -> None:
    """What ``evalign score`` prints: skipped rows, then JSON or the system table and signatures."""
    for msg in skipped[:5]:
        err_console.print(f"[yellow]skipped[/yellow]: {escape(msg)}", highlight=False, soft_wrap=True)
    if skipped:
        err_console.print(f"[yellow]{len(skipped)} invalid row(s) skipped[/yellow] (--skip-invalid)", highlight=False)
    if args.as_json:
        emit_json(
            {
                "items": len(scored),
                "skipped": len(skipped),
                "skipped_rows": skipped,
                "systems": sys_df.to_dict("records"),
                "metrics": [r.__dict__ for r in runs],
                "out": str(args.out) if args.out else None,
                **({"significance": sig} if sig else {}),
            }
        )
        return
    if args.quiet:
        return
    print_table(sys_df, title=f"System scores ({len(scored)} items)")
    for r in runs:
        extra = "".join(f" {k}={v}" for k, v in r.info.items())
        err_console.print(f"[dim]{escape(f'{r.column}: {r.signature} ({r.seconds:.2f}s){extra}')}[/dim]", highlight=False)
    if sig:
        print_significance(sig)
    if args.out:
        console.print(escape(f"wrote {args.out}"))
