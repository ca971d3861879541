"""The settings of a sharded scoring run, travelling together."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EngineSettings:
    """What a sharded run reads, scores and writes.

    ``source``: the item file (JSONL / JSON / CSV / TSV / Parquet) or a folder of Parquet shards.
    ``out_dir``: where the shards (``part-NNNNN.parquet``), their records and ``summary.json`` go.
    ``metrics``: (metric name, constructor options) pairs, in output order.
    ``fields``, ``default_system``, ``skip_invalid``: as for :func:`evalign.io.read_items`.
    ``shard_rows``: rows per shard (>= 1).
    """

    source: str
    out_dir: str
    metrics: tuple[tuple[str, dict[str, Any]], ...]
    fields: dict[str, str] = field(default_factory=dict)
    default_system: str | None = None
    skip_invalid: bool = False
    shard_rows: int = 10_000
