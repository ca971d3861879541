"""A run config's ``meta.selective`` does what ``evalign meta --selective`` does: the same selective
table in the evaluation's result and the same calibration file (``save_calibration``, relative to
the config's folder); a bad value names the file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()


def _pairs(n: int = 300, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    pref = rng.choice([1.0, -1.0], size=n)
    out = {"id": [f"p{i}" for i in range(n)], "instruction": [f"q{i}" for i in range(n)], "response_a": "a",
           "response_b": "b", "pref_1": pref}
    for j, power in (("judge:x", 0.5), ("judge:y", 1.0)):
        conf = rng.uniform(0.5, 1.0, n)
        verdict = np.where(rng.uniform(size=n) < conf**power, pref, -pref)  # right more often when sure
        out[j] = np.where(verdict > 0, "A", "B")
        out[f"{j}.confidence"] = conf
    return pd.DataFrame(out)


def test_run_config_selective_equals_the_command_line(tmp_path: Path) -> None:
    _pairs().to_json(tmp_path / "pairs.jsonl", orient="records", lines=True)
    cfg = {"version": 1, "name": "sel", "evaluations": [{
        "name": "sel", "data": {"file": "pairs.jsonl"}, "columns": ["judge:x", "judge:y"],
        "meta": {"human": {"pref_columns": ["pref_1"]}, "resampling": {"n_resamples": 20, "n_permutations": 20},
                 "selective": {"risk": 0.2, "delta": 0.1, "cascade": ["judge:y", "judge:x"], "holdout": 0.3,
                               "save_calibration": "cal_run.json"}}}], "report": {"formats": ["json"]}}
    conf = tmp_path / "c.yaml"
    conf.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = tmp_path / "out"
    res = runner.invoke(app, ["run", str(conf), "--out", str(out)])
    assert res.exit_code == 0, res.output
    cli_cal = tmp_path / "cal_cli.json"
    res = runner.invoke(app, ["meta", str(tmp_path / "pairs.jsonl"), "--pref", "pref_1", "-m", "judge:x,judge:y",
                              "--bootstrap", "20", "--permutations", "20", "--selective", "--risk", "0.2", "--delta",
                              "0.1", "--cascade", "judge:y,judge:x", "--holdout", "0.3", "--save-calibration",
                              str(cli_cal), "--json"])
    assert res.exit_code == 0, res.output
    want = json.loads(res.stdout)["selective"]
    from_run = json.loads((tmp_path / "cal_run.json").read_text())
    from_cli = json.loads(cli_cal.read_text())
    assert from_run["judges"] == from_cli["judges"] and from_run["delta_union"] == from_cli["delta_union"]
    assert from_run["judges"][0]["threshold"] is not None  # the first stage decides some pairs
    got = json.loads((out / "sel" / "evaluation.json").read_text())["selective"]
    assert got["rows"] == want["rows"] and got["cascade"]["thresholds"] == want["cascade"]["thresholds"]
    assert got["holdout"] == 0.3
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())["evaluations"][0]["meta"]["selective"]
    assert resolved == {"risk": 0.2, "delta": 0.1, "cascade": ["judge:y", "judge:x"], "holdout": 0.3, "seed": 0,
                        "save_calibration": str(tmp_path / "cal_run.json")}


@pytest.mark.parametrize(("section", "expected"), [
    ("      selective: {risk: 1.5}\n", "field 'evaluations[1].meta.selective.risk': must lie strictly between 0 and 1"),
    ("      selective: {risks: 0.1}\n", "unknown key 'risks' (did you mean 'risk'?)"),
    ("      selective:\n        cascade: judge:x\n", "field 'evaluations[1].meta.selective.cascade': must be a list"),
])
def test_selective_config_errors_name_the_field(tmp_path: Path, section: str, expected: str) -> None:
    (tmp_path / "bad.yaml").write_text("version: 1\nname: bad\nevaluations:\n  - name: a\n    data: {dataset: pandalm}\n"
                                       "    metrics: [bleu]\n    meta:\n" + section)
    res = runner.invoke(app, ["run", str(tmp_path / "bad.yaml"), "--dry-run"])
    assert res.exit_code == 2, res.output
    assert expected in res.output and "bad.yaml, line" in res.output
