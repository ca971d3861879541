"""Fixtures of the engine tests: the bundled items as files, and a real two-node Ray cluster on
this machine (``ray.cluster_utils.Cluster``: a head and a worker node, one CPU and 100 MB of
object store each)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from engine_helpers import OBJECT_STORE

from evalign.datasets import load_dataset
from evalign.io import write_table


@pytest.fixture(scope="session")
def items() -> pd.DataFrame:
    """The bundled self_instruct items (2,016 rows, 8 systems)."""
    df = load_dataset("self_instruct").items
    assert df is not None and len(df) == 2016
    return df


@pytest.fixture(scope="session")
def items_jsonl(items: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("items") / "self_instruct.jsonl"
    write_table(items, path)
    return path


def start_cluster(nodes: int = 2) -> object:
    """A Ray cluster of ``nodes`` one-CPU nodes on this machine, connected to."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "object_store_memory": OBJECT_STORE, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    return cluster


def stop_cluster(cluster: object) -> None:
    import ray

    ray.shutdown()
    cluster.shutdown()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[object]:
    """A two-node Ray cluster for the tests of one module."""
    cluster = start_cluster(2)
    yield cluster
    stop_cluster(cluster)
