"""Helpers shared by the engine tests (imported as ``engine_helpers``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()
LEXICAL = ("bleu", "chrf", "rouge_l", "exact_match")
#: the lexical metrics without chrF (the slowest) for runs over all 2,016 bundled items
FAST = ("bleu", "rouge_l", "exact_match")


#: object store of each node of the test clusters
OBJECT_STORE = 100 * 2**20

def read_shards(out_dir: Path) -> pd.DataFrame:
    """Every scored row of an output folder, in shard order."""
    parts = sorted(out_dir.glob("part-*.parquet"))
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def in_memory(source: Path | str, metrics: tuple[str, ...] = LEXICAL) -> tuple[pd.DataFrame, dict[str, object]]:
    """The in-memory engine's scored table and ``--json`` object (one ``evalign score`` run)."""
    out = Path(str(source) + ".scored.parquet")
    res = runner.invoke(app, ["score", str(source), "-m", ",".join(metrics), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return pd.read_parquet(out), json.loads(res.stdout)


def assert_same_items(shards: pd.DataFrame, scored: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """Every row once, with exactly the in-memory values (NaN where it has NaN)."""
    assert len(shards) == len(scored)
    assert not shards.duplicated(["id", "system"]).any()
    got = shards.set_index(["id", "system"]).loc[list(zip(scored["id"], scored["system"], strict=True))]
    for c in columns:
        np.testing.assert_array_equal(got[c].to_numpy(dtype=float), scored[c].to_numpy(dtype=float))
    np.testing.assert_array_equal(got["response"].to_numpy(), scored["response"].to_numpy())
