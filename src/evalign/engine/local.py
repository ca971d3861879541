"""The local engine: the shards one after another in this process (bounded memory)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from evalign.engine.settings import EngineSettings
from evalign.engine.shard import build_metrics, finish, is_done, prepare, process_shard, shard_seconds


def run_local(
    settings: EngineSettings, *, on_shard: Callable[[int, int], None] | None = None
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Score ``settings.source`` shard by shard into ``settings.out_dir`` and return the summary
    (as ``evalign score --json``) and the system scores. Shards finished by an earlier run are
    skipped; ``on_shard(done, total)`` is called as shards finish. Memory: one shard's rows plus
    about 16 bytes per row of the input. The first invalid row stops the run with the reader's
    error (its shard is not written)."""
    t0 = shard_seconds()
    shards = prepare(settings)
    metrics = build_metrics(settings)
    todo = [s for s in shards if not is_done(settings, s.index)]
    done = len(shards) - len(todo)
    if on_shard is not None:
        on_shard(done, len(shards))
    for spec in todo:
        process_shard(spec, settings, metrics)
        done += 1
        if on_shard is not None:
            on_shard(done, len(shards))
    summary, sys_df = finish(settings, shards, metrics, shard_seconds() - t0, resumed=len(shards) - len(todo))
    return summary, sys_df
