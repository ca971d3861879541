"""The code blocks of the README and of the documentation pages (docs/*.md) that are marked to run
do run, and print what the page shows.

A block is marked by an HTML comment on the line before its fence, invisible on the rendered page:
``<!-- run: NAME -->`` for the code, ``<!-- output: NAME -->`` for the output it prints. The marks may
move between the README and the pages; each name must be marked exactly once."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
#: every marked block the tests below run
MARKED = {"python-api", "one-call", "leaderboard-longer", "config"}
_MARK = re.compile(r"^<!-- (run|output): ([\w-]+) -->\n```[\w-]*\n(.*?)^```", re.S | re.M)


def _marks() -> dict[tuple[str, str], list[tuple[Path, str]]]:
    found: dict[tuple[str, str], list[tuple[Path, str]]] = {}
    for page in PAGES:
        for kind, name, body in _MARK.findall(page.read_text(encoding="utf-8")):
            found.setdefault((kind, name), []).append((page, body))
    return found


def marked(name: str, kind: str = "run") -> tuple[Path, str]:
    """The page and the text of the block marked ``<!-- KIND: NAME -->``."""
    hits = _marks().get((kind, name), [])
    assert len(hits) == 1, f"<!-- {kind}: {name} --> marks {len(hits)} blocks in README.md and docs/ (want 1)"
    return hits[0]


def test_every_marked_block_is_run() -> None:
    names = {name for kind, name in _marks() if kind == "run"}
    assert names == MARKED
    for (kind, name), hits in _marks().items():
        assert len(hits) == 1, (kind, name, [str(p) for p, _ in hits])


@pytest.fixture(scope="module")
def api_example() -> tuple[dict, list[str]]:
    """The Python API guide's first block, run once: its namespace and its printed lines."""
    page, block = marked("python-api")
    namespace: dict = {}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(block, str(page), "exec"), namespace)
    return namespace, buf.getvalue().splitlines()


def test_python_api_example_runs(api_example: tuple[dict, list[str]]) -> None:
    out = api_example[1]
    assert out[0].startswith("rouge_l|tok:rouge|stem:no|evalign:")
    assert out[1] == "1.0 as given"
    assert out[2] == "{'rouge_l': 'rouge_l', 'bleu': 'bleu (corpus)', 'chrf': 'chrf (corpus)'}"
    assert any(line.startswith("longer-is-better: ") for line in out)


def test_python_api_example_agrees_with_meta_cli(api_example: tuple[dict, list[str]]) -> None:
    """One BLEU everywhere: the Python API guide's system scores and trust table (corpus BLEU) are the numbers
    ``evalign meta --dataset self_instruct -m bleu`` prints (same defaults: 1000 resamples, seed 0)."""
    ns = api_example[0]
    res = CliRunner().invoke(app, ["meta", "--dataset", "self_instruct", "-m", "bleu", "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    cli_sys = {r["system"]: r["bleu (corpus)"] for r in cli["systems"]}
    api_sys = ns["systems"]["bleu"].to_dict()
    assert api_sys == pytest.approx(cli_sys, abs=1e-9)
    assert api_sys["text-davinci-003"] == pytest.approx(12.382, abs=5e-4)  # corpus BLEU, not the item mean
    cli_row = next(r for r in cli["trust"][0]["rows"] if r["metric"] == "bleu")
    api_row = ns["report"].table.set_index("metric").loc["bleu"]
    assert cli_row["value"] == pytest.approx(1.0)
    for key in ("value", "ci_low", "ci_high"):
        assert float(api_row[key]) == pytest.approx(cli_row[key], abs=1e-12), key
    assert ns["tau"].value == pytest.approx(cli["overview"][0]["system_kendall"])
    # the one-call API gives the same row
    from evalign import load_dataset, meta_evaluate

    data = load_dataset("self_instruct")
    one = meta_evaluate(data.items, human=data.system_human, human_lower_is_better=True, metrics=["bleu"])
    row = one.to_pandas().set_index("metric").loc["bleu"]
    assert (float(row["value"]), float(row["ci_low"]), float(row["ci_high"])) == pytest.approx(
        (cli_row["value"], cli_row["ci_low"], cli_row["ci_high"]), abs=1e-12)


def test_readme_names_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert 'pip install torch==2.13.0 && pip install -e ".[demo]" && evalign demo' in text
    assert "bash scripts/test.sh" in text
    assert "bash scripts/test.sh" in (README.parent / ".ci" / "run").read_text(encoding="utf-8")


def test_one_call_example_prints_its_output(capsys: pytest.CaptureFixture[str]) -> None:
    page, block = marked("one-call")
    printed = marked("one-call", "output")[1]
    exec(compile(block, str(page), "exec"), {})
    assert capsys.readouterr().out == printed


def test_leaderboard_example_output_is_real(tmp_path: Path) -> None:
    """The Leaderboards page's commands, run as printed, print its output at 80 columns."""
    import os
    import subprocess
    import sys

    script = marked("leaderboard-longer")[1]
    shown = marked("leaderboard-longer", "output")[1]
    env = {**os.environ, "COLUMNS": "80", "HF_HUB_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    res = subprocess.run(["bash", "-euc", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    printed = res.stdout.split("\n", 1)[1]  # after the export's "wrote pairs.jsonl ..." line
    assert [line.rstrip() for line in printed.splitlines()] == shown.splitlines()
