"""The README's Python API example runs as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_python_api_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    block = re.findall(r"## Python API\n\n```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)[0]
    exec(compile(block, str(README), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("rouge_l|tok:rouge|stem:no|evalign:")
    assert out[1] == "1.0"
    assert any(line.startswith("longer-is-better: ") for line in out)


def test_readme_names_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert 'pip install torch==2.13.0 && pip install -e ".[demo]" && evalign demo' in text
    assert "bash scripts/test.sh" in text
    assert "bash scripts/test.sh" in (README.parent / ".ci" / "run").read_text(encoding="utf-8")


def test_one_call_example_prints_its_output(capsys: pytest.CaptureFixture[str]) -> None:
    text = README.read_text(encoding="utf-8")
    block, printed = re.findall(r"### One call: meta-evaluate a DataFrame\n.*?```python\n(.*?)```\n\nprints\n\n"
                                r"```text\n(.*?)```", text, re.S)[0]
    exec(compile(block, str(README), "exec"), {})
    assert capsys.readouterr().out == printed


def test_leaderboard_example_output_is_real(tmp_path: Path) -> None:
    """The Leaderboards section's commands, run as printed, print its output at 80 columns."""
    import os
    import subprocess
    import sys

    text = README.read_text(encoding="utf-8")
    section = text.split("## Leaderboards\n", 1)[1].split("\n## ", 1)[0]
    script = re.findall(r"```bash\n(.*?)```", section, re.S)[0]
    shown = re.findall(r"```text\n(.*?)```", section, re.S)[0]
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    res = subprocess.run(["bash", "-euc", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    printed = res.stdout.split("\n", 1)[1]  # after the export's "wrote pairs.jsonl ..." line
    assert [line.rstrip() for line in printed.splitlines()] == shown.splitlines()
