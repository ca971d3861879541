"""``evalign judge --cascade``: refused before any call when the calibration names no spec, when the
judge rebuilt from its spec is not the one calibrated (another template), or when judge options are
given beside it; the spec ``evalign judge`` records holds no credential."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from typer.testing import CliRunner

from evalign.cli import app
from evalign.cli.judge_cascade import summary_spec as judge_spec
from evalign.evaluate.cascade import signature_parts

runner = CliRunner()
PASSWORD = "hunter2-cascade"


def _pairs(path: Path) -> Path:
    pd.DataFrame([{"id": f"p{i}", "instruction": f"q{i}", "response_a": "a", "response_b": "b"}
                  for i in range(3)]).to_json(path, orient="records", lines=True)
    return path


def _cal(path: Path, *, spec: bool = True, template_hash: str = "deadbeef") -> Path:
    entry: dict = {"column": "j", "threshold": 0.7, "signature": {
        "column": "j", "confidence_source": "max(J.p_a, 1 - J.p_a) (P(A better))",
        "judge": f"llmbar|backend.kind:openai|template:llmbar_vanilla@1-noref#{template_hash}|evalign:0"}}
    if spec:
        entry["spec"] = {"judge": "pairwise", "options": {"template": "llmbar_vanilla", "column": "j"},
                         "backend": {"kind": "openai", "model": "m", "url": ["http://127.0.0.1:9/v1"], "options": {}}}
    path.write_text(json.dumps({"kind": "evalign selective calibration", "risk": 0.15, "delta": 0.1,
                                "judges": [entry]}))
    return path


def test_cascade_refusals(tmp_path: Path) -> None:
    pairs = _pairs(tmp_path / "pairs.jsonl")
    out = ["-o", str(tmp_path / "d.jsonl"), "--rest", str(tmp_path / "r.jsonl")]
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(_cal(tmp_path / "a.json")), *out])
    assert res.exit_code == 1
    assert "field 'j'" in res.output and "another judge, template or model is refused" in res.output
    assert "template:llmbar_vanilla@1-noref#" in res.output  # the part that differs is named
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(_cal(tmp_path / "b.json", spec=False)), *out])
    assert res.exit_code == 1 and "no judge spec for j" in res.output and "evalign escalate" in res.output
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(_cal(tmp_path / "a.json")), "--model", "x", *out])
    assert res.exit_code == 1 and "--model do not apply" in res.output
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(_cal(tmp_path / "a.json")), "-o",
                              str(tmp_path / "d.jsonl")])
    assert res.exit_code == 1 and "--rest FILE" in res.output
    res = runner.invoke(app, ["judge", str(pairs), "--rest", str(tmp_path / "r.jsonl")])
    assert res.exit_code == 1 and "--rest and --audit go with --cascade" in res.output
    assert not (tmp_path / "d.jsonl").exists()


def test_recorded_spec_holds_no_credential() -> None:
    o = SimpleNamespace(api_key_env="JUDGE_KEY", system_prompt="role", concurrency=2, timeout=30.0,
                        connect_timeout=5.0, idle_timeout=30.0, max_retries=1, backend="openai", device=None,
                        batch_size=8, constraint_format="auto", model="m",
                        base_url=[f"http://judge:{PASSWORD}@localhost:8000/v1"])
    spec = judge_spec(o, "pairwise", {"template": "llmbar_vanilla", "column": "j", "top_p": None})
    text = json.dumps(spec)
    assert PASSWORD not in text and "judge:" not in text
    assert spec["backend"]["url"] == ["http://localhost:8000/v1"]
    assert spec["backend"]["options"]["api_key_env"] == "JUDGE_KEY"  # the variable's name, never the key
    assert spec["options"] == {"template": "llmbar_vanilla", "column": "j"}
    assert signature_parts("llmbar|a:1|b:2|evalign:0.2") == {"a:1", "b:2"}
