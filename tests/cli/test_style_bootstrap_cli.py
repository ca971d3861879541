"""``leaderboard --style-control``: bootstrap percentile intervals with ``--bootstrap N`` (the default
1,000), Wald intervals with ``--bootstrap 0``; the title and the JSON say which."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()


def _rows() -> list[dict]:
    systems = ["x", "y", "z"]
    out = []
    for i in range(90):
        a, b = systems[i % 3], systems[(i + 1 + i // 3 % 2) % 3]
        out.append({"id": f"b{i}", "system_a": a, "system_b": b, "verdict": ("A", "B", "tie", "A")[i % 4],
                    "response_a": "word " * (i % 7 + 1) + ("\n- item" if i % 5 == 0 else ""),
                    "response_b": "w " * (i % 4 + 2)})
    return out


def test_style_control_intervals_follow_bootstrap(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    env = {"COLUMNS": "200"}
    boot = runner.invoke(app, ["leaderboard", str(path), "--style-control", "--bootstrap", "200"], env=env)
    wald = runner.invoke(app, ["leaderboard", str(path), "--style-control", "--bootstrap", "0"], env=env)
    assert boot.exit_code == 0 and wald.exit_code == 0, boot.output + wald.output
    assert "(bootstrap intervals)" in boot.output and "(Wald intervals)" in wald.output
    js = runner.invoke(app, ["leaderboard", str(path), "--style-control", "--bootstrap", "200", "--json"], env=env)
    assert js.exit_code == 0, js.output
    style = json.loads(js.output)["style_control"]
    assert style["intervals"] == "bootstrap"
    for row in style["systems"]:
        assert row["bt_style_low"] <= row["bt_style"] <= row["bt_style_high"]
