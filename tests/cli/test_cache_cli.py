"""`evalign cache info|clear`, and the one line that says where a newly created cache is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cache import Cache, cache_stats, clear_cache, default_cache_path
from evalign.cli import app
from evalign.cli.cache import human_size
from evalign.io import write_table

runner = CliRunner()


def _fill(path: Path) -> None:
    with Cache(path) as c:
        c.put_arrays("embedding", {f"k{i}": np.arange(100, dtype=np.float32) + i for i in range(3)})
        c.put_json("judge", "a", {"score": 4, "feedback": "ok"})
        c.put_json("judge", "b", {"score": 2, "feedback": "meh"})


def test_info_without_cache() -> None:
    res = runner.invoke(app, ["cache", "info", "--json"])
    assert res.exit_code == 0, res.output
    st = json.loads(res.stdout)
    assert st["path"] == str(default_cache_path()) and st["exists"] is False and st["entries"] == 0
    assert not default_cache_path().exists()  # looking does not create it
    res = runner.invoke(app, ["cache", "info"])
    assert "no cache yet" in res.stdout


def test_info_counts_by_kind() -> None:
    _fill(default_cache_path())
    st = cache_stats()
    assert st["entries"] == 5
    assert st["by_namespace"]["embedding"]["entries"] == 3 and st["by_namespace"]["judge"]["entries"] == 2
    assert st["by_namespace"]["embedding"]["value_bytes"] > 3 * 400  # 100 float32 each, plus a header
    assert st["size_bytes"] >= default_cache_path().stat().st_size > 0
    res = runner.invoke(app, ["cache", "info"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert f"location: {default_cache_path()}" in text
    assert "5 entries" in text and "embedding: 3 entries" in text and "judge: 2 entries" in text


def test_clear_asks_and_clears_by_kind() -> None:
    _fill(default_cache_path())
    res = runner.invoke(app, ["cache", "clear"], input="n\n")
    assert res.exit_code == 1 and "nothing deleted" in res.output
    assert cache_stats()["entries"] == 5
    res = runner.invoke(app, ["cache", "clear", "--kind", "judge", "--yes"])
    assert res.exit_code == 0, res.output
    assert "deleted 2 entries" in res.stdout
    assert cache_stats()["by_namespace"] == {"embedding": {"entries": 3, "value_bytes": pytest.approx(1296, abs=200)}}
    res = runner.invoke(app, ["cache", "clear", "--kind", "nope", "--yes"])
    assert res.exit_code == 1 and "no entries of kind 'nope'" in res.output
    res = runner.invoke(app, ["cache", "clear"], input="y\n")
    assert res.exit_code == 0 and cache_stats()["entries"] == 0
    assert clear_cache() == 0


def test_human_size() -> None:
    assert [human_size(n) for n in (0, 999, 1500, 2_500_000)] == ["0 B", "999 B", "1.5 kB", "2.5 MB"]


def test_first_run_says_where_the_cache_is(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"  # semscore on the bundled MiniLM (the test install has the demo extra)
    write_table(
        pd.DataFrame(
            {"id": ["1", "2"], "system": ["s", "s"], "response": ["a cat", "a dog"], "reference": ["a cat", "the dog"]}
        ),
        items,
    )
    args = ["score", str(items), "-m", "semscore", "--option", "semscore.model=minilm"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert f"created the evalign cache at {default_cache_path()}" in " ".join(res.stderr.split())
    res = runner.invoke(app, args)  # the second run says nothing about it
    assert res.exit_code == 0 and "created the evalign cache" not in res.stderr


@pytest.mark.parametrize("content", [b"this is not a database at all " * 200, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_info_on_a_corrupt_file_says_so(content: bytes) -> None:
    p = default_cache_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content)
    res = runner.invoke(app, ["cache", "info"])
    assert res.exit_code == 1
    line = " ".join(res.output.split())
    assert f"cache {p}: not a readable evalign cache" in line and "0 entries" not in line


def test_info_on_an_empty_sqlite_file_is_zero_entries() -> None:
    import sqlite3

    p = default_cache_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    sqlite3.connect(p).close()
    st = cache_stats()
    assert st["exists"] is True and st["entries"] == 0
