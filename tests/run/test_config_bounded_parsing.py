"""A run config is untrusted input: alias bombs, recursive aliases, deep nesting and YAML tags are
one error line naming the file and the line, at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import InputError
from evalign.run.marks import MAX_VALUES, load_marked

runner = CliRunner()


def _bomb(levels: int = 9, width: int = 10) -> str:
    lines = ["version: 1", "a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _dry_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    monkeypatch.chdir(tmp_path)
    Path("c.yaml").write_text(text, encoding="utf-8")
    res = runner.invoke(app, ["run", "c.yaml", "--dry-run"])
    assert res.exit_code == 1, (res.output, res.exception)
    out = " ".join(res.output.split())
    assert out.count("error:") == 1 and "Traceback" not in out and "this is a bug" not in out
    return out


def test_the_alias_bomb_is_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _bomb()
    assert len(text.encode()) < 700
    t0 = time.perf_counter()
    out = _dry_run(tmp_path, monkeypatch, text)
    assert time.perf_counter() - t0 < 5
    assert "c.yaml, line 6: the YAML expands to more than 100,000 values (through its aliases)" in out


def test_aliases_within_the_limit_are_read_with_their_lines() -> None:
    data = load_marked(_bomb(levels=3), "ok.yaml")  # 10 x 10 x 10 = 1,000 values
    assert len(data["a2"]) == 10 and data["a2"][3][9] == ["lol"] * 10
    assert data.lines["a2"] == 4 and data["a2"].line == 4
    with pytest.raises(InputError, match=r"ok.yaml, line 5: the YAML expands to more than"):
        load_marked(_bomb(levels=5, width=20), "ok.yaml")  # 20^5 values
    assert MAX_VALUES == 100_000


@pytest.mark.parametrize(("text", "expected"), [
    ("version: 1\nevaluations: !!python/tuple [1, 2]\n",
     "c.yaml, line 2: YAML tags are not read in a config (found '!!python/tuple')"),
    ("version: 1\nname: x\nreport:\n  title: !!python/object/apply:os.system ['echo hi']\n",
     "c.yaml, line 4: YAML tags are not read in a config (found '!!python/object/apply:os.system')"),
    ("version: 1\nname: !custom x\n", "c.yaml, line 2: YAML tags are not read in a config (found '!custom')"),
    ("version: 1\nname: !!str 5\n", "c.yaml, line 2: YAML tags are not read in a config (found '!!str')"),
    ("version: 1\nx: &a [1, *a]\n", "c.yaml, line 2: an alias that contains itself"),
    ("version: 1\nx: " + "[" * 100 + "]" * 100 + "\n", "c.yaml, line 2: the YAML is nested deeper than 64 levels"),
    ("version: 1\nx: " + "[" * 50000 + "]" * 50000 + "\n", "c.yaml, line 2: the YAML is nested deeper than 64 levels"),
], ids=["python-tuple", "python-object", "custom", "str", "recursive", "deep-100", "deep-50000"])
def test_tags_recursion_and_depth_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                                                expected: str) -> None:
    assert expected in _dry_run(tmp_path, monkeypatch, text)
