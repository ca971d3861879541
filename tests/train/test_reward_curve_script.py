"""benchmarks/reward_curve_gpu.py's pure parts: the checkpoints it judges and the curve it draws."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import reward_curve_gpu as curve  # noqa: E402


def test_checkpoints_by_step_with_the_trained_models_record(tmp_path: Path) -> None:
    trained = tmp_path / "trained"
    for step in (100, 50, 150):
        (trained / "checkpoints" / f"checkpoint-{step}").mkdir(parents=True)
    (trained / "evalign_reward.json").write_text(json.dumps({"max_length": 512}), encoding="utf-8")
    found = curve.checkpoints(tmp_path)
    assert [s for s, _ in found] == [50, 100, 150]
    for _, folder in found:
        assert json.loads((folder / "evalign_reward.json").read_text(encoding="utf-8")) == {"max_length": 512}


def _row(data: str, step: int, set_: str, acc: float, longer: float | None) -> dict[str, object]:
    return {"data": data, "step": step, "set": set_, "accuracy": acc, "prefers_longer": longer, "n": 10}


def test_the_curve_averages_the_unseen_sets_and_keeps_val_apart(tmp_path: Path) -> None:
    rows = [_row("human", 0, "val", 0.4, 0.5), _row("human", 0, "a", 0.5, 0.5), _row("human", 0, "b", 0.7, None),
            _row("human", 50, "val", 0.8, 0.7), _row("human", 50, "a", 0.2, 0.9), _row("human", 50, "b", 0.4, 0.7),
            _row("contrastive", 0, "a", 0.6, 0.4), _row("contrastive", 0, "b", 0.8, 0.2)]
    got = curve.curve_summary(rows)
    assert list(got) == ["human", "contrastive"]
    assert got["human"]["steps"] == [0, 50]
    assert got["human"]["accuracy"]["unseen"] == pytest.approx([0.6, 0.3])
    assert got["human"]["accuracy"]["val"] == [0.4, 0.8]
    assert got["human"]["prefers_longer"]["unseen"] == pytest.approx([0.5, 0.8])  # the missing share left out
    assert got["contrastive"]["accuracy"]["unseen"] == pytest.approx([0.7])
    assert got["contrastive"]["accuracy"]["val"] == [None]
    png = curve.draw_curve(rows, tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_recorded_gpu_curve_matches_its_tables() -> None:
    """The curve shipped in benchmarks/results (the H200 run): every checkpoint of the three runs, and the
    length lean the docs describe."""
    data = json.loads((ROOT / "benchmarks" / "results" / "reward_curve_gpu_smollm2.json").read_text(encoding="utf-8"))
    summary = curve.curve_summary(data["rows"])
    assert set(summary) == {"human", "contrastive", "mixed"}
    assert summary["contrastive"]["steps"] == [0, 50, 100, 150, 200]
    assert summary["human"]["steps"] == [0, 100, 200]
    # the length lean: human labels push the share preferring the longer up, contrastive rows do not
    assert summary["human"]["prefers_longer"]["unseen"][-1] > 0.65 > 0.5 > summary["contrastive"]["prefers_longer"]["unseen"][-1]
