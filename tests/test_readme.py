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
