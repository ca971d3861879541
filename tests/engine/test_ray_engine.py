"""``evalign score --engine ray`` on a real two-node Ray cluster on this machine: the same item
and system scores as the local engine (lexical: identical; a model metric in an actor: within
1e-6), work on both nodes, resume, the reader's errors, an unreachable address."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from engine_helpers import FAST, assert_same_items, in_memory, read_shards
from typer.testing import CliRunner

from evalign.cli import app
from evalign.engine import EngineSettings
from evalign.engine.ray import RaySettings, run_ray
from evalign.errors import InputError
from evalign.io import read_items, write_table

pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("ray_cluster")
runner = CliRunner()


def settings(source: Path, out: Path, metrics: tuple[tuple[str, dict[str, object]], ...], rows: int) -> EngineSettings:
    return EngineSettings(source=str(source), out_dir=str(out), metrics=metrics, shard_rows=rows)


def test_two_nodes_lexical_identical_then_resume(items_jsonl: Path, tmp_path: Path) -> None:
    scored, expected = in_memory(items_jsonl, FAST)
    out = tmp_path / "out"
    summary, _ = run_ray(settings(items_jsonl, out, tuple((m, {}) for m in FAST), 300), RaySettings())
    assert summary["systems"] == expected["systems"]  # corpus BLEU and means: exactly equal
    assert [m["signature"] for m in summary["metrics"]] == [m["signature"] for m in expected["metrics"]]
    assert_same_items(read_shards(out), scored, FAST)
    records = [json.loads(p.read_text()) for p in sorted(out.glob("part-*.json"))]
    assert len(records) == 7 and len({r["node"] for r in records}) == 2  # both nodes did work
    # resume: the shards left are scored, the others are not touched
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}
    for p in out.glob("part-00003.*"):
        p.unlink()
    again, _ = run_ray(settings(items_jsonl, out, tuple((m, {}) for m in FAST), 300), RaySettings())
    assert again["resumed_shards"] == 6 and again["systems"] == expected["systems"]
    assert all(p.stat().st_mtime_ns == stamps[p.name] for p in out.glob("part-*") if "00003" not in p.name)
    assert len(read_shards(out)) == 2016


def test_model_metric_in_actor_within_1e6(items: pd.DataFrame, tmp_path: Path) -> None:
    src = tmp_path / "few.jsonl"
    write_table(items.head(40), src)
    res = runner.invoke(app, ["score", str(src), "-m", "semscore,bleu", "--option", "semscore.model=minilm",
                              "--no-cache", "-o", str(tmp_path / "local.parquet"), "--json"])
    assert res.exit_code == 0, res.output
    expected = json.loads(res.stdout)
    local = pd.read_parquet(tmp_path / "local.parquet")
    out = tmp_path / "out"
    summary, _ = run_ray(settings(src, out, (("semscore", {"model": "minilm", "use_cache": False}), ("bleu", {})), 15),
                         RaySettings())
    got = read_shards(out)
    sem = "semscore[model=all-MiniLM-L6-v2]"
    assert list(got.columns[-2:]) == list(local.columns[-2:]) == [sem, "bleu"]  # -m order, whatever stage scored
    np.testing.assert_allclose(got[sem], local[sem], atol=1e-6, rtol=0)
    assert np.ptp(got[sem]) > 0.1  # real similarities, not a constant
    np.testing.assert_array_equal(got["bleu"], local["bleu"])
    for a, b in zip(summary["systems"], expected["systems"], strict=True):
        assert a["system"] == b["system"] and a["bleu"] == b["bleu"]
        assert a[sem] == pytest.approx(b[sem], abs=1e-6)
    assert [m["signature"] for m in summary["metrics"]] == [m["signature"] for m in expected["metrics"]]


def test_invalid_row_is_the_readers_error(items: pd.DataFrame, tmp_path: Path) -> None:
    df = items.head(200).copy()
    df["reference"] = df["reference"].astype(object)
    df.at[df.index[170], "reference"] = 7  # not text, in the last shard
    src = tmp_path / "bad.jsonl"
    write_table(df, src)
    with pytest.raises(InputError) as local:
        read_items(src, require_reference=True)
    with pytest.raises(InputError) as distributed:
        run_ray(settings(src, tmp_path / "out", (("exact_match", {}),), 50), RaySettings())
    assert str(distributed.value) == str(local.value) == f"{src}, line 171, field 'reference': must be a string or " \
        "a list of strings, got int"


def test_unreachable_address_is_one_line(items_jsonl: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["score", str(items_jsonl), "-m", "bleu", "--engine", "ray", "--address", "127.0.0.1:1",
                              "--out-dir", str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "error: --address 127.0.0.1:1: cannot reach a Ray cluster there" in " ".join(res.output.split())
    assert "Traceback" not in res.output


def test_model_that_cannot_load_is_the_same_error(items: pd.DataFrame, tmp_path: Path) -> None:
    src = tmp_path / "few.jsonl"
    write_table(items.head(10), src)
    args = ["score", str(src), "-m", "semscore", "--option", f"semscore.model={tmp_path / 'no-model'}", "--no-cache"]
    local = runner.invoke(app, args)
    distributed = runner.invoke(app, [*args, "--engine", "ray", "--out-dir", str(tmp_path / "out")])
    assert local.exit_code == distributed.exit_code == 1
    line = " ".join(local.output.split())
    assert line.startswith("error: ") and "no-model" in line
    assert " ".join(distributed.output.split()) == line
