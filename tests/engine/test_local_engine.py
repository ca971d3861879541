"""The sharded local engine (``evalign score FILE --out-dir DIR``): the same scores, signatures
and errors as the in-memory ``evalign score``, resume at shard level."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from engine_helpers import FAST, LEXICAL, assert_same_items, in_memory, read_shards
from typer.testing import CliRunner

from evalign.cli import app
from evalign.engine import EngineSettings
from evalign.engine.local import run_local
from evalign.engine.plan import plan_shards
from evalign.errors import EvalignError, InputError
from evalign.io import read_items, write_table

runner = CliRunner()


def settings(source: Path, out: Path, rows: int = 300, metrics: tuple[str, ...] = LEXICAL) -> EngineSettings:
    return EngineSettings(source=str(source), out_dir=str(out), metrics=tuple((m, {}) for m in metrics),
                          shard_rows=rows)


def test_cli_out_dir_matches_in_memory(items_jsonl: Path, tmp_path: Path) -> None:
    scored, expected = in_memory(items_jsonl, FAST)
    out = tmp_path / "out"
    res = runner.invoke(app, ["score", str(items_jsonl), "-m", ",".join(FAST), "--out-dir", str(out),
                              "--shard-rows", "300", "--system-out", str(tmp_path / "systems.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["shards"] == 7 and got["items"] == 2016 and got["resumed_shards"] == 0
    assert got["systems"] == expected["systems"]  # corpus BLEU / chrF and means: exactly equal
    assert [m["signature"] for m in got["metrics"]] == [m["signature"] for m in expected["metrics"]]
    assert json.loads((out / "summary.json").read_text())["systems"] == expected["systems"]
    assert [json.loads(x) for x in (tmp_path / "systems.jsonl").read_text().splitlines()] == expected["systems"]
    assert_same_items(read_shards(out), scored, FAST)


@pytest.mark.parametrize("kind", ["csv", "parquet_folder", "json_list"])
def test_other_formats_match_in_memory(kind: str, items: pd.DataFrame, tmp_path: Path) -> None:
    df = items[items["response"].str.len() > 0].head(400).copy()
    df.loc[df.index[5], "response"] = 'a "quoted"\nanswer, over\nthree lines'  # a CSV record of 3 lines
    if kind == "csv":
        src = tmp_path / "items.csv"
        write_table(df, src)
    elif kind == "json_list":
        src = tmp_path / "items.json"
        src.write_text(json.dumps(df.to_dict("records")), encoding="utf-8")
    else:
        src = tmp_path / "shards"
        src.mkdir()
        for k in range(3):  # three files of different sizes
            write_table(df.iloc[k * 150:(k + 1) * 150], src / f"in-{k}.parquet")
    whole = tmp_path / "whole.parquet"
    write_table(df, whole)
    metrics = LEXICAL if kind == "parquet_folder" else FAST  # chrF (slow) once
    scored, expected = in_memory(whole if kind == "parquet_folder" else src, metrics)
    summary, _ = run_local(settings(src, tmp_path / "out", rows=70, metrics=metrics))
    assert summary["systems"] == expected["systems"]
    assert_same_items(read_shards(tmp_path / "out"), scored, metrics)


def _bad(items: pd.DataFrame, tmp_path: Path, fmt: str, row: int, change: dict[str, object]) -> Path:
    df = items[items["response"].str.len() > 0].head(300).copy()
    for k, v in change.items():
        df[k] = df[k].astype(object)
        df.at[df.index[row], k] = v
    path = tmp_path / f"bad.{fmt}"
    write_table(df, path)
    return path


@pytest.mark.parametrize(("fmt", "change"), [
    ("jsonl", {"response": None}),
    ("jsonl", {"id": "0"}),  # the (id, system) of row 0, in another shard: the duplicate error
    ("csv", {"reference": None}),
    ("parquet", {"reference": None}),
])
def test_errors_name_the_same_file_line_and_field(fmt: str, change: dict[str, object], items: pd.DataFrame,
                                                  tmp_path: Path) -> None:
    change = dict(change)
    if change.get("id") == "0":
        change = {"id": items[items["response"].str.len() > 0]["id"].iloc[0]}
    path = _bad(items, tmp_path, fmt, 251, change)
    with pytest.raises(InputError) as local:
        read_items(path, require_reference=True)
    with pytest.raises(InputError) as sharded:
        run_local(EngineSettings(source=str(path), out_dir=str(tmp_path / "out"), metrics=(("exact_match", {}),),
                                 shard_rows=40))
    assert str(sharded.value) == str(local.value)
    assert str(local.value).startswith(str(path))
    res = runner.invoke(app, ["score", str(path), "-m", "exact_match", "--out-dir", str(tmp_path / "o2"),
                              "--shard-rows", "40"])
    assert res.exit_code == 1 and str(local.value) in " ".join(res.output.split())


def test_skip_invalid_counts_the_same_rows(items: pd.DataFrame, tmp_path: Path) -> None:
    path = _bad(items, tmp_path, "jsonl", 150, {"response": None})
    res = runner.invoke(app, ["score", str(path), "-m", "bleu", "--skip-invalid", "--json"])
    assert res.exit_code == 0, res.output
    expected = json.loads(res.stdout)
    summary, _ = run_local(EngineSettings(source=str(path), out_dir=str(tmp_path / "out"), metrics=(("bleu", {}),),
                                          shard_rows=40, skip_invalid=True))
    assert summary["skipped_rows"] == expected["skipped_rows"] and summary["skipped"] == 1
    assert summary["systems"] == expected["systems"]


def test_resume_skips_finished_shards(items_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first, _ = run_local(settings(items_jsonl, out, metrics=("exact_match", "bleu")))
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*")}
    for stem in ("part-00002", "part-00005"):  # as if the first run had stopped before these
        for p in out.glob(f"{stem}.*"):
            p.unlink()
    again, _ = run_local(settings(items_jsonl, out, metrics=("exact_match", "bleu")))
    assert again["resumed_shards"] == 5 and again["shards"] == 7
    assert again["systems"] == first["systems"]
    for p in out.glob("part-*"):
        if not p.name.startswith(("part-00002", "part-00005")):
            assert p.stat().st_mtime_ns == stamps[p.name], p.name  # not written again
    assert len(read_shards(out)) == 2016


def test_out_dir_of_another_run_is_an_error(items_jsonl: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_local(settings(items_jsonl, out, rows=1000, metrics=("exact_match",)))
    with pytest.raises(EvalignError, match=r"holds shards of a different run \(shard_rows, shards differ\)"):
        run_local(settings(items_jsonl, out, rows=500, metrics=("exact_match",)))


def test_cli_usage_errors(items_jsonl: Path, tmp_path: Path) -> None:
    for args, msg in [
        (["--engine", "ray"], "give --out-dir"),
        (["--out-dir", str(tmp_path / "o"), "-o", str(tmp_path / "x.jsonl")], "not with --out-dir"),
        (["--out-dir", str(tmp_path / "o"), "--address", "h:1"], "need --engine ray"),
        (["--workers", "2"], "need --engine ray"),
        (["--engine", "spark", "--out-dir", str(tmp_path / "o")], "expected local or ray"),
    ]:
        res = runner.invoke(app, ["score", str(items_jsonl), "-m", "bleu", *args])
        assert res.exit_code == 2 and msg in res.output, res.output


def test_plan_jsonl_shards_cover_the_file_once(items_jsonl: Path) -> None:
    shards = plan_shards(str(items_jsonl), 500)
    assert [s.first_line for s in shards] == [1, 501, 1001, 1501, 2001]
    assert shards[0].start == 0 and shards[-1].stop == os.path.getsize(items_jsonl)
    assert all(a.stop == b.start for a, b in itertools.pairwise(shards))

