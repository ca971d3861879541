"""``evalign score --out-dir``: the shards are bound to the input's bytes (an input changed with its
size and mtime kept is refused, never served stale shards), and a damaged shard file is one line
naming it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.engine import EngineSettings
from evalign.engine.local import run_local
from evalign.errors import EvalignError
from evalign.io import write_table

runner = CliRunner()


def _data(path: Path) -> Path:
    rows = [{"id": f"q{i}", "system": s, "reference": f"the answer is {i}",
             "response": f"the answer is {i}" if s == "A" else f"maybe {i}"} for i in range(30) for s in ("A", "B")]
    write_table(pd.DataFrame(rows), path)
    return path


def _settings(source: Path, out: Path) -> EngineSettings:
    return EngineSettings(source=str(source), out_dir=str(out), metrics=(("exact_match", {}), ("bleu", {})),
                          shard_rows=20)


def _same_size_edit(path: Path) -> None:
    """Change one cell keeping the size, and restore the mtime (as ``cp -p`` / ``rsync -a`` do)."""
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    edited = text.replace('"response": "the answer is 3"', '"response": "the answer is 7"', 1)
    assert edited != text and len(edited) == len(text)
    path.write_text(edited, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


def test_changed_input_with_same_size_and_mtime_is_refused(tmp_path: Path) -> None:
    data = _data(tmp_path / "items.jsonl")
    out = tmp_path / "out"
    first, _ = run_local(_settings(data, out))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == 2
    assert manifest["input"][0][2] == __import__("hashlib").sha256(data.read_bytes()).hexdigest()
    again, _ = run_local(_settings(data, out))  # unchanged: every shard resumed
    assert again["resumed_shards"] == again["shards"] == 3 and again["systems"] == first["systems"]
    _same_size_edit(data)
    with pytest.raises(EvalignError, match=r"holds shards of a different run \(input differ\)"):
        run_local(_settings(data, out))
    # a fresh folder gives the new numbers (A's exact match drops by 1/30)
    fresh, _ = run_local(_settings(data, tmp_path / "fresh"))
    a = next(s for s in fresh["systems"] if s["system"] == "A")
    assert a["exact_match"] == pytest.approx(29 / 30)
    # the lines reordered: refused too (the shards are runs of lines)
    lines = data.read_text(encoding="utf-8").splitlines(keepends=True)
    data.write_text("".join(lines[::-1]), encoding="utf-8")
    with pytest.raises(EvalignError, match="input differ"):
        run_local(_settings(data, tmp_path / "fresh"))


@pytest.mark.parametrize(("suffix", "damage"), [
    ("parquet", b"PAR1 not really parquet"),
    ("parquet", b""),
    ("json", b'{"shard": 1, "rows": '),
    ("keys.npz", b"PK\x03\x04garbage"),
])
def test_a_damaged_shard_file_is_one_line_naming_it(tmp_path: Path, suffix: str, damage: bytes) -> None:
    data = _data(tmp_path / "items.jsonl")
    out = tmp_path / "out"
    run_local(_settings(data, out))
    bad = out / f"part-00001.{suffix}"
    bad.write_bytes(damage)
    res = runner.invoke(app, ["score", str(data), "-m", "exact_match,bleu", "--out-dir", str(out),
                              "--shard-rows", "20"])
    assert res.exit_code != 0
    text = " ".join(res.output.split())
    assert f"{bad}: a damaged file of the output folder" in text, res.output
    assert "delete part-00001.json in that folder and run the command again" in text
    assert "this is a bug" not in text and "Traceback" not in text and text.count("error:") == 1
    # following the advice redoes the shard, with the numbers of the first run
    (out / "part-00001.json").unlink()
    res = runner.invoke(app, ["score", str(data), "-m", "exact_match,bleu", "--out-dir", str(out),
                              "--shard-rows", "20", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["resumed_shards"] == 2


def test_a_damaged_manifest_is_one_line(tmp_path: Path) -> None:
    data = _data(tmp_path / "items.jsonl")
    out = tmp_path / "out"
    run_local(_settings(data, out))
    (out / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(EvalignError, match=r"manifest.json: a damaged file of the output folder .*give another "
                                           r"--out-dir or remove that folder"):
        run_local(_settings(data, out))
