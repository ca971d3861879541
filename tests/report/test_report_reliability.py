"""``evalign report`` with hostile text and a failing disk (issue 23): control characters (a NUL) never
stand raw in the page, and a write that fails part way leaves no partial ``*_files/`` folder and no
page, and an earlier report untouched."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from evalign.io import write_table
from evalign.report.explorer import explorer_html
from evalign.report.html import visible_controls

runner = CliRunner()


def _items(path: Path, response0: str = "an answer") -> Path:
    rng = np.random.default_rng(3)
    rows = [{"id": f"q{i}", "system": s, "instruction": f"task {i}", "response": f"{s} says {i}",
             "human": float(rng.integers(1, 6)), "length": float(rng.random())} for i in range(15) for s in "ABC"]
    rows[0]["response"] = response0
    write_table(pd.DataFrame(rows), path)
    return path


def _report(src: Path, out: Path, *extra: str) -> list[str]:
    return ["report", str(src), "--human", "human", "-m", "length", "--bootstrap", "20", "-o", str(out), *extra]


def test_control_characters_never_stand_raw_in_the_page(tmp_path: Path) -> None:
    from evalign.cli import app

    hostile = "a\x00b\x1b[31mred\x7f <script>x</script>"
    src = _items(tmp_path / "items.jsonl", hostile)
    out = tmp_path / "r.html"
    res = runner.invoke(app, _report(src, out, "--title", "T\x00itle"))
    assert res.exit_code == 0, res.output
    page = out.read_text(encoding="utf-8")
    for raw in ("\x00", "\x1b", "\x7f", "<script>x</script>"):
        assert raw not in page
    assert "a\u2400b\u241b[31mred\u2421 &lt;script&gt;x&lt;/script&gt;" in page  # the response, visible
    assert "<title>T\u2400itle</title>" in page
    assert visible_controls("tab\tnew\nline\r\ud800") == "tab\tnew\nline\r\ufffd"  # whitespace kept
    frag = explorer_html(pd.DataFrame({"id": ["1", "2"], "system": ["s", "s"], "response": ["x\x00", "y"],
                                       "h": [1.0, 2.0], "m": [0.1, 0.2]}), human=["h"], metrics=["m"])
    assert "\x00" not in frag and "x\u2400" in frag


def _limited(max_bytes: int) -> None:
    """A process whose files cannot grow past ``max_bytes`` (the kernel refuses the write, as a full disk
    would), with SIGXFSZ ignored so the write fails with EFBIG instead of killing the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))


def _run_limited(args: list[str], max_bytes: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "EVALIGN_CACHE": os.devnull}
    return subprocess.run([sys.executable, "-m", "evalign", *args], capture_output=True, text=True, env=env,
                          preexec_fn=lambda: _limited(max_bytes), timeout=300, check=False)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_report_that_cannot_be_written_leaves_nothing_partial(tmp_path: Path) -> None:
    src = _items(tmp_path / "items.jsonl")
    out_dir = tmp_path / "out"
    out = out_dir / "r.html"
    res = _run_limited(_report(src, out), 20_000)  # the tables fit, the first figure does not
    assert res.returncode == 1, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    # the report is named (issue 39), the file it could not write in brackets
    assert len(lines) == 1 and lines[0].startswith(f"error: {out}: cannot write (r_files/figures/") and \
        lines[0].endswith(".png: File too large)"), res.stderr
    assert not out_dir.exists()  # no page, no r_files/, no temporary folder: nothing at all
    # an earlier complete report survives a failed rewrite byte for byte
    ok = _run_limited(_report(src, out, "--json"), 1 << 30)
    assert ok.returncode == 0, ok.stderr
    written = json.loads(ok.stdout)
    assert Path(written["html"]) == out and any(k.startswith("figure:") for k in written)
    before = _tree(out_dir)
    assert "r.html" in before and any(k.startswith("r_files/figures/") for k in before)
    failed = _run_limited(_report(src, out, "--title", "another title"), 20_000)
    assert failed.returncode == 1 and f"{out}: cannot write (r_files/figures/" in failed.stderr
    assert _tree(out_dir) == before and [p.name for p in out_dir.iterdir() if p.name.startswith(".")] == []
