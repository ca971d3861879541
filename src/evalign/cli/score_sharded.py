"""``evalign score --out-dir DIR [--engine ray]``: the command-line side of the sharded engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from evalign.cli.common import (
    cache_input,
    check_outputs,
    console,
    emit_json,
    err_console,
    print_table,
    progress,
    split_multi,
)
from evalign.engine.settings import EngineSettings
from evalign.errors import UsageError
from evalign.io import FORMATS, OutputFolder, refuse_output_onto_inputs, write_table
from evalign.metrics.option_parsing import parse_all_options

#: what ``score --out-dir`` writes in its folder (see :mod:`evalign.engine.shard`)
SHARD_FILES = ("manifest.json", "part-*", "summary.json")


def check_sharded(
    *, file: str | None, dataset: str | None, out: str | None, significance: bool, engine: str,
    out_dir: str | None, address: str | None, gpus_per_actor: float, workers: int | None,
) -> None:
    """The options of a sharded run that must agree, checked before any work (:class:`UsageError`)."""
    if engine not in ("local", "ray"):
        raise UsageError(f"--engine {engine}: expected local or ray")
    if engine == "local" and (address is not None or gpus_per_actor or workers is not None):
        raise UsageError("--address, --gpus-per-actor and --workers need --engine ray")
    if out_dir is None:
        raise UsageError(f"--engine {engine}: give --out-dir DIR (the scored shards are written there)")
    if dataset is not None or file is None or file == "-":
        raise UsageError("--out-dir: give a FILE (or a folder of Parquet shards), not --dataset or standard input")
    if out is not None:
        raise UsageError("-o: not with --out-dir (the scored rows are the Parquet shards in --out-dir)")
    if significance:
        raise UsageError("--significance: not with --out-dir (run it on the scored shards with evalign score)")
    if address is not None and workers is not None:
        raise UsageError("--workers: only without --address (a cluster has its own CPUs)")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise UsageError(f"--out-dir {out_dir}: is a file, not a folder")


def metric_names(metric: list[str]) -> list[str]:
    """The ``-m`` names (repeated or comma-separated), at least one and none twice."""
    names = split_multi(metric)
    if not names:
        raise UsageError("-m: give at least one metric")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"-m {twice[0]}: given twice")
    return names


def score_sharded(
    *, file: str | None, dataset: str | None, metric: list[str], option: list[str], no_cache: bool,
    skip_invalid: bool, out: str | None, system_out: str | None, significance: bool, fields: dict[str, str],
    system: str | None, as_json: bool, engine: str, out_dir: str | None, address: str | None, shard_rows: int,
    gpus_per_actor: float, workers: int | None,
) -> None:
    """Check the command line, run the chosen engine with a progress bar and print what
    ``evalign score`` prints (``--json``: the same object, with ``out`` the folder)."""
    from evalign.engine.local import run_local  # pandas: not at `evalign score --help`
    from evalign.engine.ray import RaySettings, run_ray  # ray itself is imported when a run starts

    check_sharded(file=file, dataset=dataset, out=out, significance=significance, engine=engine, out_dir=out_dir,
                  address=address, gpus_per_actor=gpus_per_actor, workers=workers)
    assert file is not None and out_dir is not None  # checked above
    names = metric_names(metric)
    check_outputs(("--system-out", system_out, FORMATS), stdout_used=as_json)
    refuse_output_onto_inputs({"--out-dir": OutputFolder(out_dir, SHARD_FILES), "--system-out": system_out},
                              {"FILE": file, **cache_input()})
    options = parse_all_options(option, names, no_cache)
    settings = EngineSettings(source=file, out_dir=out_dir, metrics=tuple((n, options[n]) for n in names),
                              fields=fields, default_system=system, skip_invalid=skip_invalid, shard_rows=shard_rows)
    quiet = as_json or system_out == "-"
    with progress(transient=True, disable=quiet) as bar:
        task = bar.add_task(f"scoring shards ({engine})", total=None)

        def on_shard(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        if engine == "ray":
            summary, sys_df = run_ray(settings, RaySettings(address=address, workers=workers,
                                                            gpus_per_actor=gpus_per_actor), on_shard=on_shard)
        else:
            summary, sys_df = run_local(settings, on_shard=on_shard)
    if system_out:
        write_table(sys_df, system_out)
    _print_sharded(summary, sys_df, as_json=as_json, quiet=quiet, out_dir=out_dir)


def _print_sharded(summary: dict[str, Any], sys_df: Any, *, as_json: bool, quiet: bool, out_dir: str) -> None:
    skipped: list[Any] = summary["skipped_rows"]
    for msg in skipped[:5]:
        err_console.print(f"[yellow]skipped[/yellow]: {escape(msg)}", highlight=False, soft_wrap=True)
    if skipped:
        err_console.print(f"[yellow]{len(skipped)} invalid row(s) skipped[/yellow] (--skip-invalid)", highlight=False)
    if as_json:
        emit_json(summary)
        return
    if quiet:
        return
    print_table(sys_df, title=f"System scores ({summary['items']} items, {summary['shards']} shards, "
                f"{summary['resumed_shards']} resumed)")
    for r in summary["metrics"]:
        err_console.print(f"[dim]{escape(str(r['column']))}: {escape(str(r['signature']))}[/dim]", highlight=False)
    console.print(escape(f"wrote {out_dir}"))
