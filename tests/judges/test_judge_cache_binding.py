"""The judge cache is bound to what each grade was computed from (issue 23, item 1): its key is the
request itself (prompt and settings), so reordering the input reuses each row's own grade, and a cell
edited in place (same size, the file's mtime restored) is asked anew; the grades always equal a fresh
run's. The server (the fault proxy in stub mode) grades each prompt by its own content."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from fault_proxy import FaultProxy, Rewrite, Seen

N = 6
COL = "prometheus_absolute[helpfulness]"


def _grade(body: dict[str, Any] | None) -> int:
    """The server's grade of a prompt: (i mod 5) + 1 for the instruction "Say i."."""
    m = re.search(r"Say (\d+)\.", json.dumps(body or {}))
    assert m is not None
    return int(m.group(1)) % 5 + 1


def _schedule(seen: Seen) -> Rewrite:
    grade = _grade(seen.body)

    def fn(data: dict[str, Any]) -> dict[str, Any]:
        data["choices"][0]["message"]["content"] = f"Feedback: graded by content [RESULT] {grade}"
        return data

    return Rewrite(fn)


def _judge(items: Path, url: str, out: Path, cache: Path) -> dict[tuple[str, str], int]:
    env = {**os.environ, "EVALIGN_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-c", "from evalign.cli import main; main()", "judge", str(items),
                           "--base-url", url, "--model", "m", "-o", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    return {(r["id"], r["system"]): r[COL] for r in rows}


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_reordered_and_edited_inputs_get_their_own_grades(tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "system": "s", "instruction": f"Say {i}.", "response": "ok"} for i in range(N)]
    items = tmp_path / "items.jsonl"
    _write(items, rows)
    cache = tmp_path / "cache.sqlite"
    with FaultProxy(None, _schedule) as proxy:
        first = _judge(items, proxy.base_url, tmp_path / "first.jsonl", cache)
        assert first == {(f"q{i}", "s"): i % 5 + 1 for i in range(N)} and len(proxy.calls) == N
        # the lines reversed: every grade from the cache, each on its own row
        _write(items, rows[::-1])
        assert _judge(items, proxy.base_url, tmp_path / "reversed.jsonl", cache) == first
        assert len(proxy.calls) == N  # no new call
        # one cell edited in place, same size, mtime restored: that row alone is asked again
        stat = items.stat()
        text = items.read_text()
        items.write_text(text.replace('"Say 2."', '"Say 9."'), encoding="utf-8")
        assert items.stat().st_size == stat.st_size
        os.utime(items, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        edited = _judge(items, proxy.base_url, tmp_path / "edited.jsonl", cache)
        assert len(proxy.calls) == N + 1 and edited[("q2", "s")] == 5 and edited[("q3", "s")] == 4
        # the numbers equal a fresh run's (a new cache)
        fresh = _judge(items, proxy.base_url, tmp_path / "fresh.jsonl", tmp_path / "fresh.sqlite")
    assert edited == fresh
