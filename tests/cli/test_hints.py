"""Hints for the common slips (issue 20): a response column under another name suggests
``--response-field``; metric and dataset names match whatever their case, or get "did you mean"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import EvalignError
from evalign.io.validation import field_hint
from evalign.metrics.base import get_metric
from evalign.registry import Registry


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_output_column_suggests_response_field(tmp_path: Path) -> None:
    f = _write(tmp_path / "x.jsonl", [{"id": 1, "system": "s", "output": "a cat", "reference": "a cat"}])
    res = CliRunner().invoke(app, ["score", str(f), "-m", "bleu"])
    assert res.exit_code == 1
    assert (f"{f}, line 1, field 'response': missing (the field 'output' is present: map it with "
            "--response-field output)") in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["score", str(f), "-m", "bleu", "--response-field", "output", "--json"])
    assert res.exit_code == 0, res.output


def test_field_hint_prefers_a_close_name() -> None:
    assert field_hint("response", ["id", "responses", "output"]) == " (did you mean 'responses'?)"
    assert field_hint("response", ["id", "Completion"]) == (" (the field 'Completion' is present: map it with "
                                                            "--response-field Completion)")
    assert field_hint("reference", ["target"]) == " (the field 'target' is present: map it with --reference-field target)"
    assert field_hint("response", ["id", "score"]) == ""


def test_metric_names_match_whatever_their_case() -> None:
    assert get_metric("chrF").name == "chrf" and get_metric("BLEU").name == "bleu"
    with pytest.raises(EvalignError, match=r"unknown metric 'chrFF' \(did you mean 'chrf'\?\)"):
        get_metric("chrFF")


def test_registry_case_folding_needs_one_match() -> None:
    reg: Registry = Registry("thing")
    reg.add("Ab", 1)
    reg.add("ab", 2)
    reg.add("cd", 3)
    assert reg.get("Ab") == 1 and reg.get("ab") == 2 and reg.get("CD") == 3
    with pytest.raises(EvalignError, match="unknown thing 'AB'"):
        reg.get("AB")


def test_meta_with_differently_cased_names() -> None:
    args = ["meta", "--dataset", "Self_Instruct", "-m", "chrF", "-m", "BLEU",
            "--bootstrap", "20", "--permutations", "20", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["trust"][0]["rows"]
    assert {r["metric"] for r in rows if r["kind"] == "metric"} == {"bleu", "chrf"}
    res = CliRunner().invoke(app, ["datasets", "export", "selfinstruct", "-o", "x.jsonl"])
    assert res.exit_code != 0 and "unknown dataset 'selfinstruct' (did you mean 'self_instruct'?)" in res.output
