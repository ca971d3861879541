"""A Ray node killed in the middle of ``--engine ray``: the run still finishes, every row is
written exactly once, and the scores are those of the in-memory engine."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from engine_helpers import OBJECT_STORE, in_memory, read_shards

from evalign.engine import EngineSettings
from evalign.engine.ray import RaySettings, run_ray

pytest.importorskip("ray")


def test_node_killed_mid_run_every_row_once(items_jsonl: Path, tmp_path: Path) -> None:
    import ray
    from ray.cluster_utils import Cluster

    _, expected = in_memory(items_jsonl, ("bleu",))
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "object_store_memory": OBJECT_STORE, "include_dashboard": False})
    worker = cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        out = tmp_path / "out"
        result: dict[str, object] = {}

        def run() -> None:
            try:
                result["summary"] = run_ray(EngineSettings(source=str(items_jsonl), out_dir=str(out),
                                                           metrics=(("bleu", {}),), shard_rows=100), RaySettings())[0]
            except BaseException as e:  # handed to the test thread
                result["error"] = e

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 120
        # kill the worker node once it has finished a shard of its own (so the kill loses real work)
        while not _done_by(out, worker.node_id) and time.monotonic() < deadline and t.is_alive():
            time.sleep(0.05)
        done_before = len(list(out.glob("part-*.json")))
        assert _done_by(out, worker.node_id), "the worker node finished no shard before the kill"
        assert 0 < done_before < 21, "the run must be under way when the node is killed"
        cluster.remove_node(worker, allow_graceful=False)  # the node's processes are killed
        t.join(timeout=240)
        assert not t.is_alive() and "error" not in result, result.get("error")
    finally:
        ray.shutdown()
        cluster.shutdown()
    summary = result["summary"]
    assert isinstance(summary, dict)
    rows = read_shards(out)
    assert len(rows) == 2016 and not rows.duplicated(["id", "system"]).any()  # every row exactly once
    assert summary["systems"] == expected["systems"]
    # the killed node had finished a shard before the kill (asserted above); its record may since have been
    # written again by the head node: Ray re-runs a task whose output object was lost with the node, and the
    # shard's fixed name makes that a rewrite of the same rows, never a second copy (checked just above)
    nodes = {json.loads(p.read_text())["node"] for p in out.glob("part-*.json")}
    print(f"node killed after {done_before}/21 shards; shards written by {len(nodes)} nodes")


def _done_by(out: Path, node_id: str) -> bool:
    """Whether a finished shard's record names ``node_id`` (records being written are skipped)."""
    for p in out.glob("part-*.json"):
        try:
            if json.loads(p.read_text())["node"] == node_id:
                return True
        except (ValueError, KeyError, OSError):
            continue
    return False
