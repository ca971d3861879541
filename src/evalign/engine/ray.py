"""The Ray engine: shards scored by Ray Data, on a local Ray or on a cluster.

The dataset holds one row per unfinished shard (where it starts and ends, not its data). A task
(``num_cpus=1``) reads and validates the shard's records from the file itself and computes the
lexical metrics; model metrics run in an actor pool, one model per actor (``num_gpus`` each with
``gpus_per_actor``), which also writes the shard. The driver only plans shards, shows progress and
merges the small per-shard records (:func:`evalign.engine.shard.finish`).

Every shard's output has a fixed name and is written atomically, so a task that Ray retries
after a worker died writes the same rows again, never twice; a re-run skips finished shards.
Where both stages need only CPUs, Ray Data may fuse them into the actors (no copy of the scored
rows between processes); with ``gpus_per_actor`` they stay apart (tasks on CPUs, actors on GPUs).
The input file and ``--out-dir`` must be visible to every node (one machine, or shared storage).
Model caches (:mod:`evalign.cache`) stay per node (each node's ``EVALIGN_CACHE``).
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.engine.plan import ShardSpec
from evalign.engine.settings import EngineSettings
from evalign.engine.shard import (
    build_metrics,
    finish,
    is_done,
    is_model_metric,
    prepare,
    read_shard,
    score_table,
    shard_seconds,
    write_shard,
)
from evalign.errors import EvalignError, InputError, UsageError


@dataclass(frozen=True)
class RaySettings:
    """Where and how wide to run: ``address`` of a running cluster (None: start Ray here with
    ``workers`` CPUs, default all), ``gpus_per_actor`` (0 = CPU actors) and ``actors`` (model
    actors; default: GPUs // gpus_per_actor, or half the CPUs)."""

    address: str | None = None
    workers: int | None = None
    gpus_per_actor: float = 0.0
    actors: int | None = None
    object_store_mb: int | None = None


def check_address(address: str, timeout: float = 5.0) -> None:
    """Raise :class:`EvalignError` (one line) when nothing listens at ``address``
    (``host:port`` or ``ray://host:port``; ``auto`` is left to Ray)."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--address {address}: expected HOST:PORT (e.g. 10.0.0.5:6379), ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise EvalignError(f"--address {address}: cannot reach a Ray cluster there ({e.strerror or e}); start one with "
                           "`ray start --head` or leave out --address to run Ray on this machine") from None


#: the Ray namespace of evalign's jobs (named actors of other programs on the same cluster stay apart)
NAMESPACE = "evalign"


def own_temp_dir() -> str:
    """A new temporary folder for a Ray instance of this process (short, as Ray's socket paths must be:
    under ``/tmp`` where there is one), removed at exit after Ray has shut down."""
    root = "/tmp" if os.path.isdir("/tmp") else None
    path = tempfile.mkdtemp(prefix="evalign-ray-", dir=root)

    def _remove() -> None:
        import ray

        ray.shutdown()
        shutil.rmtree(path, ignore_errors=True)

    atexit.register(_remove)
    return path


def init_ray(rs: RaySettings) -> None:
    """Connect to the cluster at ``rs.address``, or start Ray here (no dashboard): always a new instance
    of this process's own (``address="local"``, its own temporary folder, namespace :data:`NAMESPACE`),
    even when another Ray instance runs on this machine; ``--address auto`` connects to that one."""
    import ray

    if rs.address:
        check_address(rs.address)
    if ray.is_initialized():
        return
    # offline flags travel to every worker; paths (PYTHONPATH, EVALIGN_CACHE) only to workers on this machine
    flags = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "TRANSFORMERS_", "TOKENIZERS_"))}
    paths = {k: v for k, v in os.environ.items() if k.startswith("EVALIGN_") or k == "PYTHONPATH"}
    if rs.address:
        env = {"env_vars": flags}
        try:
            ray.init(address=rs.address, namespace=NAMESPACE, runtime_env=env, log_to_driver=False,
                     logging_level=logging.ERROR)
        except (ConnectionError, RuntimeError) as e:
            raise EvalignError(f"--address {rs.address}: cannot connect to Ray ({' '.join(str(e).split())[:200]})") from None
        return
    env = {"env_vars": {**flags, **paths}}
    try:
        ray.init(address="local", namespace=NAMESPACE, _temp_dir=own_temp_dir(),
                 num_cpus=rs.workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR, runtime_env=env,
                 object_store_memory=rs.object_store_mb * 2**20 if rs.object_store_mb else None)
    except Exception as e:  # Ray raises plain Exception too (e.g. "The current node timed out during startup")
        raise EvalignError(f"cannot start Ray on this machine ({' '.join(str(e).split())[:200]}); to use a Ray "
                           "instance that already runs here, give --address auto (or its HOST:PORT)") from None


def _pack(obj: Any) -> np.ndarray:
    return np.array([pickle.dumps(obj)], dtype=object)


def _lexical_stage(batch: dict[str, np.ndarray], settings: EngineSettings, final: bool) -> dict[str, np.ndarray]:
    """Task: read, validate and lexically score the batch's shards; write them when ``final``."""
    out: dict[str, list[Any]] = {"shard": [], "payload": []}
    lexical = build_metrics(settings, models=False)
    for index, raw in zip(batch["shard"], batch["spec"], strict=True):
        spec: ShardSpec = pickle.loads(raw)
        try:
            table = read_shard(spec, settings)
        except EvalignError as e:  # bad input (the reader's error) or a metric that cannot run
            payload: Any = ("error", e)
        else:
            scored, record = score_table(table, lexical)
            record["node"] = _node_id()
            payload = ("done", write_shard(spec, settings, scored, lexical, record)) if final else \
                ("scored", (spec, scored, record))
        out["shard"].append(int(index))
        out["payload"].append(pickle.dumps(payload))
    return {"shard": np.array(out["shard"], dtype=np.int64), "payload": np.array(out["payload"], dtype=object)}


class _ModelStage:
    """Actor: one instance of each model metric, loaded once; scores and writes shards."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.metrics = build_metrics(settings)
        self.models = [m for m in self.metrics if is_model_metric(m)]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        payloads = []
        for raw in batch["payload"]:
            kind, value = pickle.loads(raw)
            if kind == "scored":
                spec, table, record = value
                try:
                    scored, more = score_table(table, self.models)
                except EvalignError as e:  # e.g. a model that cannot be loaded: the driver says it
                    kind, value = "error", e
                else:
                    for k in ("seconds", "info", "corpus"):
                        record[k].update(more[k])
                    record["model_node"] = _node_id()
                    value = write_shard(spec, self.settings, scored, self.metrics, record)
                    kind = "done"
            payloads.append(pickle.dumps((kind, value)))
        return {"shard": np.asarray(batch["shard"], dtype=np.int64), "payload": np.array(payloads, dtype=object)}


def run_ray(
    settings: EngineSettings, rs: RaySettings, *, on_shard: Callable[[int, int], None] | None = None
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Score ``settings.source`` with Ray Data into ``settings.out_dir``; return the summary (as
    ``evalign score --json``) and the system scores. Finished shards are skipped; an invalid row
    is the reader's error (the earliest one in file order among the shards that failed)."""
    try:
        import ray
    except ImportError:
        raise EvalignError("--engine ray needs Ray: pip install 'evalign[ray]'") from None

    t0 = shard_seconds()
    shards = prepare(settings)
    metrics = build_metrics(settings)  # checks options and models' names before Ray starts
    todo = [s for s in shards if not is_done(settings, s.index)]
    done = len(shards) - len(todo)
    if on_shard is not None:
        on_shard(done, len(shards))
    if todo:
        init_ray(rs)
        import ray.data

        logging.getLogger("ray.data").setLevel(logging.ERROR)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ds: Any = ray.data.from_items([{"shard": s.index, "spec": pickle.dumps(s)} for s in todo],
                                 override_num_blocks=len(todo))
        has_models = any(is_model_metric(m) for m in metrics)
        ds = ds.map_batches(_lexical_stage, batch_size=1, num_cpus=1, fn_kwargs={"settings": settings,
                                                                                 "final": not has_models})
        if has_models:
            gpus = rs.gpus_per_actor
            if rs.actors:
                actors = rs.actors
            elif gpus:
                actors = max(1, int(ray.cluster_resources().get("GPU", 0) // gpus))
            else:
                actors = max(1, int(ray.cluster_resources().get("CPU", 1)) // 2)
            ds = ds.map_batches(_ModelStage, batch_size=1, num_cpus=0 if gpus else 1, num_gpus=gpus or None,
                                concurrency=actors, fn_constructor_kwargs={"settings": settings})
        errors: list[EvalignError] = []
        for row in ds.iter_rows():
            kind, value = pickle.loads(row["payload"])
            if kind == "error":
                errors.append(value)
            done += 1
            if on_shard is not None:
                on_shard(done, len(shards))
        if errors:
            inputs = [e for e in errors if isinstance(e, InputError)]
            raise min(inputs, key=_error_place) if inputs else errors[0]
    summary, sys_df = finish(settings, shards, metrics, shard_seconds() - t0, resumed=len(shards) - len(todo))
    return summary, sys_df


def _node_id() -> str:
    """The Ray node this code runs on (kept in the shard record)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _error_place(e: InputError) -> tuple[str, int]:
    return (str(e.file), e.line or 0)
