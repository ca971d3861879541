"""`evalign demo` as a real process: offline, on the bundled data, every table and file written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from evalign.datasets import load_dataset
from golden.compare import check_files, check_text, normalise_stderr, normalise_stdout


def _demo(out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200",
           "EVALIGN_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "evalign", "demo", "--out", str(out), "--bootstrap", "100"],
        capture_output=True, text=True, env=env, timeout=1200, check=False,
    )


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A cold run: a fresh cache, as on a new machine."""
    root = tmp_path_factory.mktemp("demo")
    return _demo(root / "out", root / "cache.sqlite"), root


def test_second_run_reads_embeddings_from_cache(demo_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, root = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = json.loads((root / "out" / "summary.json").read_text())["metrics"]["semscore[model=all-MiniLM-L6-v2]"]
    assert first["info"]["encoded"] > 1000 and first["info"]["cached"] == 0
    again = _demo(root / "out2", root / "cache.sqlite")
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads((root / "out2" / "summary.json").read_text())["metrics"]["semscore[model=all-MiniLM-L6-v2]"]
    assert second["info"]["encoded"] == 0 and second["info"]["cached"] == first["info"]["encoded"]
    assert (root / "out2" / "leaderboard.csv").read_text() == (root / "out" / "leaderboard.csv").read_text()


def test_demo_prints_tables(demo_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _root = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    for title in ("Self-Instruct leaderboard", "System-level agreement", "PandaLM: pairwise preference accuracy",
                  "LLMBar Natural + Adversarial", "Judges run in both orders"):
        assert title in proc.stdout
    assert "semscore" in proc.stdout
    assert "semscore = semscore[model=all-MiniLM-L6-v2]" in " ".join(proc.stderr.split())


def test_demo_files_and_numbers(demo_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, root = demo_run
    out = root / "out"
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    for name in ("self_instruct_scored.jsonl", "pandalm_scored.jsonl", "leaderboard.csv", "correlations.csv",
                 "pandalm_preference_accuracy.csv", "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert set(summary["metrics"]) == {"bleu", "chrf", "rouge_l", "exact_match", "semscore[model=all-MiniLM-L6-v2]"}
    # the system-level Kendall of rouge_l equals scipy's on the leaderboard it printed
    lb = pd.read_csv(out / "leaderboard.csv")
    ranks = load_dataset("self_instruct").system_human
    assert ranks is not None
    assert dict(zip(lb["system"], lb["human_rank"], strict=True)) == ranks
    corr = pd.read_csv(out / "correlations.csv").set_index("metric")
    tau = stats.kendalltau(-lb["human_rank"], lb["rouge_l"]).statistic
    assert corr.loc["rouge_l", "value"] == pytest.approx(tau, abs=1e-12)
    assert corr.loc["rouge_l", "ci_low"] <= tau <= corr.loc["rouge_l", "ci_high"]
    pref = pd.read_csv(out / "pandalm_preference_accuracy.csv").set_index("metric")
    assert 0.5 < pref.loc["rouge_l", "value"] < 1.0 and pref.loc["exact_match", "value"] < 0.5
    # one trust table: metrics, the two upstream judges and the baselines
    assert pref.loc["judge:gpt-3.5-turbo", "kind"] == "judge" and pref.loc["judge:pandalm-7b", "kind"] == "judge"
    assert pref.loc["judge:gpt-3.5-turbo", "n_unparseable"] == 25
    assert pref.loc["judge:pandalm-7b", "value"] == pytest.approx(0.6677, abs=1e-4)  # PandaLM paper: 66.77
    for b in ("always_tie", "always_a", "always_b", "random", "longer_is_better", "human_ceiling"):
        assert pref.loc[b, "kind"] == "baseline"
    assert pref.loc["always_tie", "value"] == pytest.approx(105 / 999)
    assert "judge:gpt-3.5-turbo" in proc.stdout and "always_tie" in proc.stdout
    assert summary["pandalm"]["signature"]["statistic"] == "preference_accuracy"
    # LLMBar: the published judges with their order diagnostics, beside the baselines
    llmbar = pd.read_csv(out / "llmbar_judges.csv").set_index("metric")
    assert llmbar.loc["judge:gpt-4/vanilla", "kind"] == "judge" and llmbar.loc["always_b", "kind"] == "baseline"
    assert llmbar.loc["judge:gpt-4/vanilla", "value"] == llmbar.loc["judge:gpt-4/vanilla", "accuracy_both"]
    rows = {r["metric"]: r for r in summary["llmbar"]["trust"][0]["rows"]}
    assert rows["judge:gpt-4/vanilla"]["n"] == 419 and 0 < rows["judge:gpt-4/vanilla"]["position_agreement"] < 1
    assert "bleu (corpus)" in lb.columns  # the declared system score
    scored = pd.read_json(out / "self_instruct_scored.jsonl", lines=True)
    assert len(scored) == 2016 and scored["semscore[model=all-MiniLM-L6-v2]"].between(-1, 1).all()


def test_demo_golden_outputs(demo_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """Byte for byte as recorded before the issue-21 restructuring (tests/golden/demo*; normaliser and
    regeneration in tests/golden/compare.py): stdout at 200 columns, stderr, and every file written
    (tables, CSVs, summary.json, scored JSONL, report.html and its figures)."""
    proc, root = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_text("demo.stdout", normalise_stdout(proc.stdout, [root]))
    check_text("demo.stderr", normalise_stderr(proc.stderr, [root]))
    check_files("demo_files", root / "out")


def test_demo_outputs_hold_no_path_of_this_machine(demo_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """No absolute path of the user's machine (home, the Python environment, the working folder) in the
    JSON, HTML, CSV or Markdown the demo writes; an example path of a note is kept as written."""
    proc, root = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "out"
    private = {str(Path.home()), sys.prefix, sys.base_prefix, os.getcwd()}
    private = {p for p in private if len(p) > 1}
    files = [p for p in out.rglob("*") if p.suffix in (".json", ".html", ".csv", ".md", ".tex")]
    assert any(p.name == "report.html" for p in files) and any(p.name == "summary.json" for p in files)
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        for prefix in private:
            assert prefix + "/" not in text, f"{p.name} holds {prefix}"
        assert "site-packages" not in text, p.name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["semscore[model=all-MiniLM-L6-v2]"]["signature"].startswith(
        "semscore|model:all-MiniLM-L6-v2|model_id:")
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "bertscore.model=/path/to/model" in report and "model=to/model" not in report
