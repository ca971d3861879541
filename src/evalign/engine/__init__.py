"""Scoring engines for item tables larger than memory.

``evalign score FILE --out-dir DIR`` cuts the input into *shards* of ``shard_rows`` rows
(:mod:`evalign.engine.plan`), reads, validates and scores each shard on its own
(:mod:`evalign.engine.shard`; validation is :func:`evalign.io.read_items`' own, with the same
file / line / field errors) and writes one Parquet file per shard plus a small record of what
the system scores need. Two engines run the shards:

* ``local`` (:mod:`evalign.engine.local`): one shard after another in this process, memory
  bounded by one shard plus ~16 bytes per row;
* ``ray`` (:mod:`evalign.engine.ray`): Ray Data, lexical metrics as tasks, model metrics in an
  actor pool (one model per actor), on a local Ray or on a cluster (``--address``).

Both finish the same way (:func:`evalign.engine.shard.finish`): per-system scores and signatures
equal to the in-memory ``evalign score --json`` (corpus BLEU / chrF from sacrebleu sufficient
statistics summed over shards). A re-run with the same input and settings skips the shards
already written (resume at shard level).

Nothing here is imported by ``import evalign``.
"""

from __future__ import annotations

from evalign.engine.settings import EngineSettings

__all__ = ["EngineSettings"]
