"""Plugins: a user's metric and judge, in a tiny package of their own that is "installed" (a
dist-info with entry points on the path, as pip leaves it), reach ``evalign score`` and
``evalign judge`` without any change to evalign; the shared registry's lookups and messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalign.errors import EvalignError
from evalign.registry import Registry

PLUGIN = '''
import numpy as np
from evalign.metrics.base import Metric, MetricResult
from evalign.judges.grading import PrometheusAbsolute


class LengthRatio(Metric):
    """len(response) / len(first reference)."""

    name = "length_ratio"
    description = "a plugin metric"

    def options(self):
        return {}

    def score(self, responses, references):
        return MetricResult(values=np.array([len(r) / len(refs[0]) for r, refs in zip(responses, references)]))


class StrictJudge(PrometheusAbsolute):
    name = "strict"
    description = "a plugin judge"
'''


def install_plugin(root: Path) -> Path:
    """Write the package and its dist-info (METADATA + entry_points.txt) under ``root``."""
    site = root / "site"
    (site / "evalign_demo_plugin").mkdir(parents=True)
    (site / "evalign_demo_plugin" / "__init__.py").write_text(PLUGIN)
    dist = site / "evalign_demo_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evalign-demo-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [evalign.metrics]
        length_ratio = evalign_demo_plugin:LengthRatio

        [evalign.judges]
        strict = evalign_demo_plugin:StrictJudge
    """))
    return site


def run_cli(args: list[str], site: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "EVALIGN_CACHE": str(tmp_path / "cache.sqlite")}
    return subprocess.run([sys.executable, "-c", "from evalign.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_plugin_metric_reaches_evalign_score(tmp_path: Path) -> None:
    site = install_plugin(tmp_path)
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": str(i), "system": "s", "instruction": "x", "reference": "abcd",
                                         "response": "ab" * (i + 1)}) + "\n" for i in range(3)))
    out = tmp_path / "scored.jsonl"
    proc = run_cli(["score", str(items), "-m", "length_ratio", "-o", str(out)], site, tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["length_ratio"] for r in rows] == [0.5, 1.0, 1.5]
    listed = run_cli(["metrics"], site, tmp_path)
    assert "length_ratio" in listed.stdout
    # without the plugin on the path the name is unknown, with a hint
    proc = run_cli(["score", str(items), "-m", "length_ratio"], tmp_path / "nowhere", tmp_path)
    assert proc.returncode != 0 and "unknown metric 'length_ratio'" in proc.stderr


def test_plugin_judge_is_found_through_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = install_plugin(tmp_path)
    code = ("from evalign.judges import get_judge, list_judges; j = get_judge('strict'); "
            "print(type(j).__module__, j.column, 'strict' in [c.name for c in list_judges()])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.stdout.split() == ["evalign_demo_plugin", "strict[helpfulness]", "True"], proc.stderr


def test_registry_lookup_aliases_and_did_you_mean() -> None:
    reg: Registry[int] = Registry("widget", aliases={"w": "widget_one"})
    reg.add("widget_one", 1)

    @reg.register("widget_two")
    def two() -> int:
        return 2

    assert reg.get("w") == 1 and reg.get("widget_two") is two and "widget_one" in reg
    assert reg.names() == ["widget_one", "widget_two"]
    with pytest.raises(EvalignError, match=r"unknown widget 'widget_on' \(did you mean 'widget_one'\?\)"):
        reg.get("widget_on")


def test_broken_plugin_is_named(tmp_path: Path) -> None:
    site = install_plugin(tmp_path)
    (site / "evalign_demo_plugin" / "__init__.py").write_text("raise ImportError('no numpy here')\n")
    items = tmp_path / "x.jsonl"
    items.write_text(json.dumps({"id": "1", "system": "s", "instruction": "x", "reference": "a", "response": "b"}))
    proc = run_cli(["score", str(items), "-m", "length_ratio"], site, tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "metric plugin 'length_ratio'" in proc.stderr and "no numpy here" in proc.stderr
