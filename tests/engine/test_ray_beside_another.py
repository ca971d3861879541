"""``--engine ray`` on a machine where another Ray instance already runs (issue 23): without ``--address``
evalign starts its own instance (own temporary folder and namespace) instead of trying to join the other
one with its own CPU count (which Ray refused: "When connecting to an existing cluster, num_cpus ...
must not be provided"), and leaves the other instance running; ``--address auto`` joins it.

The other instance is a real ``ray start --head`` whose files live under its own ``RAY_TMPDIR`` (so
that other Ray users of this machine are left alone); the runs see it through the same variable."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import psutil
import pytest
from engine_helpers import in_memory

from evalign.io import write_table

pytest.importorskip("ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_cli() -> str:
    here = Path(sys.executable).parent / "ray"
    found = str(here) if here.is_file() else shutil.which("ray")
    if not found:
        pytest.fail("the `ray` command is not installed beside this Python")
    return found


def _processes_of(root: str) -> list[psutil.Process]:
    """Every process started for the Ray instance whose files are under ``root``, with its children."""
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["cmdline"]):
        if root in " ".join(p.info["cmdline"] or []):
            found[p.pid] = p
            for c in p.children(recursive=True):
                found[c.pid] = c
    return list(found.values())


#: how long a run may go without any sign of progress (a new shard written, or the run ending) before it
#: counts as hung; a slow run on a loaded machine goes on as long as it progresses
STALL_S = 600
#: the longest a check of the other instance's readiness may keep failing (Ray starts slowly on 2 busy cores)
READY_S = 600
#: Ray's node health checks, relaxed so that a raylet slowed down by a busy machine is not declared dead
#: while the test waits on it (GCS defaults: a check every 3 s, dead after 5 misses of 10 s)
RELAXED_HEALTH = {"RAY_health_check_period_ms": "10000", "RAY_health_check_timeout_ms": "60000",
                  "RAY_health_check_failure_threshold": "30"}
#: connects to the cluster at argv[1] (``auto``: the one under RAY_TMPDIR) and prints its alive nodes' CPUs
READY_PROBE = """
import logging, sys, ray
ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False)
print(sum(n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]))
"""


def wait_until_ready(address: str, env: dict[str, str]) -> None:
    """Wait until the cluster at ``address`` has an alive node with its CPU (not a fixed time: each
    probe is a real connection; it fails after :data:`READY_S` of failing probes)."""
    deadline = time.monotonic() + READY_S
    last = ""
    while time.monotonic() < deadline:
        probe = subprocess.run([sys.executable, "-c", READY_PROBE, address], env=env, capture_output=True, text=True,
                               check=False)
        if probe.returncode == 0 and float((probe.stdout.strip().splitlines() or ["0"])[-1]) >= 1:
            return
        last = probe.stderr[-1000:] or probe.stdout[-200:]
        time.sleep(1)
    pytest.fail(f"the other Ray instance at {address} never became ready: {last}")


@pytest.fixture(scope="module")
def other_ray() -> Iterator[dict[str, str]]:
    """A running ``ray start --head`` instance; yields the environment under which it is "the" Ray of
    this machine (``RAY_TMPDIR``), and its GCS address, once it is ready to run tasks."""
    root = tempfile.mkdtemp(prefix="rayo-", dir="/tmp")  # short: Ray's socket paths are limited
    env = {**os.environ, "RAY_TMPDIR": root, **RELAXED_HEALTH}
    port = _free_port()
    cmd = [_ray_cli(), "start", "--head", "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats",
           f"--port={port}",
           f"--dashboard-agent-listen-port={_free_port()}", "--object-store-memory=100000000"]
    started = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, check=False)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        current = Path(root) / "ray" / "ray_current_cluster"
        assert current.is_file(), list(Path(root).rglob("*"))[:20]
        wait_until_ready("auto", env)  # (as `--address auto` finds it: through RAY_TMPDIR)
        yield {"RAY_TMPDIR": root, "address": current.read_text().strip()}
    finally:
        procs = _processes_of(root)
        for p in procs:
            p.terminate()
        _, alive = psutil.wait_procs(procs, timeout=20)
        for p in alive:
            p.kill()
        shutil.rmtree(root, ignore_errors=True)


def _score(src: Path, out: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    """``evalign score --engine ray`` into ``out``, waited for as long as it progresses: it fails only
    when :data:`STALL_S` pass without a new shard in ``out`` (a hang), never on a fixed total time."""
    args = [sys.executable, "-m", "evalign", "score", str(src), "-m", "bleu,rouge_l", "--engine", "ray", "--out-dir",
            str(out), "--shard-rows", "100", "--json", *extra]
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        proc = subprocess.Popen(args, env={**os.environ, **RELAXED_HEALTH, **env}, stdout=so, stderr=se, text=True)
        shards, last = -1, time.monotonic()
        try:
            while proc.poll() is None:
                done = len(list(out.glob("part-*"))) if out.is_dir() else 0
                if done != shards:
                    shards, last = done, time.monotonic()
                elif time.monotonic() - last > STALL_S:
                    proc.kill()
                    se.seek(0)
                    pytest.fail(f"no progress for {STALL_S} s ({shards} shards written): {se.read()[-2000:]}")
                time.sleep(1)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        so.seek(0)
        se.seek(0)
        return subprocess.CompletedProcess(args, proc.returncode, so.read(), se.read())


def test_own_instance_beside_another_then_join_it(other_ray: dict[str, str], items: pd.DataFrame,
                                                   tmp_path: Path) -> None:
    src = tmp_path / "few.jsonl"
    write_table(items.head(300), src)
    _, expected = in_memory(src, ("bleu", "rouge_l"))
    env = {"RAY_TMPDIR": other_ray["RAY_TMPDIR"]}
    gcs = [p for p in _processes_of(other_ray["RAY_TMPDIR"]) if "gcs_server" in " ".join(p.cmdline())]
    assert len(gcs) == 1
    own = _score(src, tmp_path / "own", env, "--workers", "1")
    assert own.returncode == 0, own.stderr
    assert json.loads(own.stdout)["systems"] == expected["systems"]
    # the other instance is untouched: still running, still the machine's current cluster
    assert gcs[0].is_running()
    assert (Path(other_ray["RAY_TMPDIR"]) / "ray" / "ray_current_cluster").read_text().strip() == other_ray["address"]
    joined = _score(src, tmp_path / "joined", env, "--address", "auto")
    assert joined.returncode == 0, joined.stderr
    assert json.loads(joined.stdout)["systems"] == expected["systems"]
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "joined").glob("part-*.json"))]
    assert len(records) == 3 and all(r["node"] for r in records)
