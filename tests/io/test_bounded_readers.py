"""The readers bound what one line or cell may hold (64 MiB by default, ``EVALIGN_MAX_LINE_BYTES``):
a longer one is one error naming the file and the line, in the readers and in the shard planner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalign.engine.plan import plan_shards
from evalign.errors import InputError, UsageError
from evalign.io import DEFAULT_MAX_LINE_BYTES, max_line_bytes, read_items


def _rec(i: int, response: str = "ok") -> dict[str, str]:
    return {"id": f"q{i}", "system": "A", "response": response}


def test_the_default_limit_is_64_mib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALIGN_MAX_LINE_BYTES", raising=False)
    assert max_line_bytes() == DEFAULT_MAX_LINE_BYTES == 64 * 1024 * 1024
    monkeypatch.setenv("EVALIGN_MAX_LINE_BYTES", "lots")
    with pytest.raises(UsageError, match="EVALIGN_MAX_LINE_BYTES='lots': must be a whole number of bytes >= 1"):
        max_line_bytes()


def test_a_jsonl_line_over_the_limit_names_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_MAX_LINE_BYTES", "1000")
    path = tmp_path / "items.jsonl"
    lines = [json.dumps(_rec(0)), json.dumps(_rec(1, "x" * 900)), json.dumps(_rec(2, "y" * 5000))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_items(path)
    assert str(e.value) == (f"{path}, line 3: a line longer than 1,000 bytes (the readers' limit; set "
                            "EVALIGN_MAX_LINE_BYTES to read longer lines)")
    with pytest.raises(InputError, match=r"items.jsonl, line 3: a line longer than 1,000 bytes"):
        plan_shards(str(path), 1)
    monkeypatch.setenv("EVALIGN_MAX_LINE_BYTES", "6000")
    assert len(read_items(path)) == 3 and len(plan_shards(str(path), 1)) == 3


def test_a_json_document_on_one_long_line_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_MAX_LINE_BYTES", "2000")
    path = tmp_path / "items.json"
    path.write_text(json.dumps([_rec(i, "z" * 50) for i in range(100)]), encoding="utf-8")
    with pytest.raises(InputError, match=r"items.json, line 1: a line longer than 2,000 bytes"):
        read_items(path)
    path.write_text(json.dumps([_rec(i, "z" * 50) for i in range(100)], indent=1), encoding="utf-8")
    assert len(read_items(path)) == 100  # the same document over many short lines


def test_csv_lines_and_cells_over_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_MAX_LINE_BYTES", "1000")
    path = tmp_path / "items.csv"
    path.write_text("id,system,response\nq0,A,ok\nq1,A," + "w" * 3000 + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"items.csv, line 3: a line longer than 1,000 bytes"):
        read_items(path)
    with pytest.raises(InputError, match=r"items.csv, line 3: a line longer than 1,000 bytes"):
        plan_shards(str(path), 1)
    # one quoted cell over many short lines: the cell limit, at the line where its row starts
    cell = "\n".join(["v" * 50] * 40)
    path.write_text(f'id,system,response\nq0,A,ok\nq1,A,"{cell}"\nq2,A,ok\n', encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_items(path)
    assert str(e.value) == (f"{path}, line 3: a cell longer than 1,000 characters (the readers' limit; set "
                            "EVALIGN_MAX_LINE_BYTES to read longer cells)")
    monkeypatch.setenv("EVALIGN_MAX_LINE_BYTES", "4000")
    assert read_items(path)["response"].tolist()[1] == cell
