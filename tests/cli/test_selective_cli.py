"""``evalign meta --selective`` and ``evalign escalate``: the thresholds the command line reports
equal :func:`evalign.meta.selective.calibrate`'s, judges without a confidence are refused with the
reason, the calibration file holds no credential and refuses verdicts of another judge, and the
people's file is a pair table with the audit share marked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.io import read_pairs
from evalign.meta.selective import SelectiveSettings, calibrate, calibrate_cascade

runner = CliRunner()
SECRET = "sk-test-0123456789abcdef"


def _table(n: int = 300, seed: int = 1) -> pd.DataFrame:
    """Pairs with a judge ``x`` stating P(A better) (``J.p_a``, right more often when sure), a judge
    ``y`` with ``J.confidence`` and a judge ``z`` with no confidence."""
    rng = np.random.default_rng(seed)
    pref = rng.choice([1.0, -1.0], size=n)
    sure = rng.uniform(0.5, 1.0, n)
    right = rng.uniform(size=n) < np.sqrt(sure)
    x = np.where(right, pref, -pref)
    p_a = np.where(x > 0, sure, 1 - sure)
    conf_y = rng.uniform(0.5, 1.0, n)
    y = np.where(rng.uniform(size=n) < 0.1 + 0.9 * conf_y, pref, -pref)
    word = {1.0: "A", -1.0: "B"}
    return pd.DataFrame({
        "id": [f"p{i}" for i in range(n)], "instruction": [f"q{i}" for i in range(n)],
        "response_a": "a", "response_b": "b", "pref_1": pref,
        "judge:x": [word[v] for v in x], "judge:x.p_a": p_a,
        "judge:x.model": "m", "judge:x.base_url": "http://user:hunter2@example.invalid/v1",
        "judge:y": [word[v] for v in y], "judge:y.confidence": conf_y, "judge:y.confidence_source": "verbalised",
        "judge:z": [word[v] for v in pref],
    })


@pytest.fixture()
def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    _table().to_json(path, orient="records", lines=True)
    return path


def _meta(pairs: Path, *extra: str) -> object:
    return runner.invoke(app, ["meta", str(pairs), "--pref", "pref_1", "-m", "judge:x,judge:y", "--bootstrap", "20",
                               "--permutations", "20", "--selective", "--risk", "0.2", "--delta", "0.1", *extra],
                         env={"COLUMNS": "200", "OPENAI_API_KEY": SECRET})


def test_meta_selective_json_equals_calibrate(pairs: Path) -> None:
    res = _meta(pairs, "--json")
    assert res.exit_code == 0, res.output
    sel = json.loads(res.stdout)["selective"]
    t = _table()
    pref = t["pref_1"].to_numpy()
    s = SelectiveSettings(alpha=0.2, delta=0.1)
    cx = np.maximum(t["judge:x.p_a"], 1 - t["judge:x.p_a"]).to_numpy()
    yx = np.sign(t["judge:x.p_a"].to_numpy() - 0.5) == pref
    cy = t["judge:y.confidence"].to_numpy()
    yy = np.where(t["judge:y"] == "A", 1.0, -1.0) == pref
    rows = {r["judge"]: r for r in sel["rows"]}
    for j, c, y in (("judge:x", cx, yx), ("judge:y", cy, yy)):
        want = calibrate(c, y, s)
        assert rows[j]["threshold"] == pytest.approx(want.threshold)
        assert rows[j]["coverage"] == want.coverage and rows[j]["selective_accuracy"] == want.selective_accuracy
        assert rows[j]["guarantee"] == "with probability >= 0.9, at least 80% of the verdicts given agree with people"
    assert sel["alone"]["judge:y"]["n"] == 300 and sel["refused"] == {}
    res = _meta(pairs, "--json", "--cascade", "judge:y,judge:x")
    sel = json.loads(res.stdout)["selective"]
    cas = calibrate_cascade({"judge:y": (cy, yy), "judge:x": (cx, yx)}, ["judge:y", "judge:x"], s)
    assert all(np.isfinite(cas.thresholds)) and cas.decided["judge:x"] > 0
    assert sel["cascade"]["thresholds"] == pytest.approx(list(cas.thresholds))
    total = sel["rows"][-1]
    assert (total["judge"], total["stage"]) == ("(cascade)", "all")
    assert total["coverage"] == pytest.approx(cas.coverage) and total["delta"] == pytest.approx(0.2)
    assert "union bound" in total["guarantee"] and ">= 0.8," in total["guarantee"]


def test_meta_selective_table_holdout_and_refusals(pairs: Path, tmp_path: Path) -> None:
    res = _meta(pairs, "--holdout", "0.5")
    assert res.exit_code == 0, res.output
    assert "Where can each judge be trusted?" in res.output and "held-out" in res.output
    assert "judge:x: with probability >= 0.9, at least 80% of the verdicts given agree with people" in res.output
    # a judge with no confidence: refused with the reason (named in a cascade: an error)
    res = runner.invoke(app, ["meta", str(pairs), "--pref", "pref_1", "-m", "judge:x,judge:z", "--selective",
                              "--bootstrap", "20", "--permutations", "20"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "refused: judge:z has no confidence: no judge:z.confidence or judge:z.p_a column" in res.output
    res = runner.invoke(app, ["meta", str(pairs), "--pref", "pref_1", "-m", "judge:x,judge:z", "--selective",
                              "--cascade", "judge:x,judge:z", "--bootstrap", "20", "--permutations", "20"])
    assert res.exit_code == 1 and "error: --cascade: judge:z has no confidence" in res.output
    res = runner.invoke(app, ["meta", str(pairs), "--pref", "pref_1", "-m", "judge:x", "--cascade", "judge:x"])
    assert res.exit_code == 1 and "--cascade go with --selective" in res.output
    res = _meta(pairs, "--risk", "1.5")
    assert res.exit_code == 2 and "error: --risk must be a number strictly between 0 and 1, got 1.5" in res.output
    bad = tmp_path / "bad.jsonl"
    t = _table()
    t.loc[4, "judge:y.confidence"] = 1.3
    t.to_json(bad, orient="records", lines=True)
    res = _meta(bad)
    assert res.exit_code == 1 and "row 5, field 'judge:y.confidence': a confidence must lie in [0, 1]" in res.output


def test_calibration_file_and_escalate(pairs: Path, tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    res = _meta(pairs, "--cascade", "judge:y,judge:x", "--save-calibration", str(cal))
    assert res.exit_code == 0, res.output
    text = cal.read_text()
    assert SECRET not in text and "hunter2" not in text and "base_url" not in text
    record = json.loads(text)
    assert (record["risk"], record["delta"], record["cascade"]) == (0.2, 0.1, True)
    assert [j["column"] for j in record["judges"]] == ["judge:y", "judge:x"]
    assert record["judges"][0]["signature"]["confidence_source"] == "verbalised"
    out, rest = tmp_path / "decided.jsonl", tmp_path / "people.jsonl"
    res = runner.invoke(app, ["escalate", str(cal), str(pairs), "-o", str(out), "--rest", str(rest), "--audit", "0.1",
                              "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    t = _table()
    th = [j["threshold"] for j in record["judges"]]
    by_y = t["judge:y.confidence"] >= th[0]
    by_x = ~by_y & (np.maximum(t["judge:x.p_a"], 1 - t["judge:x.p_a"]) >= th[1])
    assert summary["decided"] == {"judge:y": int(by_y.sum()), "judge:x": int(by_x.sum())}
    decided = pd.read_json(out, lines=True)
    assert len(decided) == int((by_y | by_x).sum())
    assert set(decided["decided_by"]) == {"judge:y", "judge:x"}
    row = decided[decided["decided_by"] == "judge:y"].iloc[0]
    assert row["verdict"] == row["judge:y"] and row["confidence"] >= th[0]
    people = read_pairs(rest)  # the format read_pairs (and evalign annotate) reads
    n_audit = round(0.1 * len(decided))
    assert len(people) == 300 - len(decided) + n_audit == summary["to_people"] + summary["audit"]
    assert int(people["audit"].sum()) == n_audit and set(people[people["audit"]]["id"]) <= set(decided["id"])
    again = tmp_path / "again.jsonl"
    runner.invoke(app, ["escalate", str(cal), str(pairs), "-o", str(tmp_path / "d2.jsonl"), "--rest", str(again),
                        "--audit", "0.1"])
    assert read_pairs(again)["id"].tolist() == people["id"].tolist()  # seeded


def test_escalate_refuses_verdicts_of_another_judge(pairs: Path, tmp_path: Path) -> None:
    cal = tmp_path / "cal.json"
    assert _meta(pairs, "--cascade", "judge:y,judge:x", "--save-calibration", str(cal)).exit_code == 0
    other = tmp_path / "other.jsonl"
    _table().rename(columns={"judge:y": "judge:w", "judge:y.confidence": "judge:w.confidence"}).to_json(
        other, orient="records", lines=True)
    args = ["-o", str(tmp_path / "d.jsonl"), "--rest", str(tmp_path / "r.jsonl")]
    res = runner.invoke(app, ["escalate", str(cal), str(other), *args])
    assert res.exit_code == 1 and "no column 'judge:y'" in res.output and "another judge" in res.output
    t = _table()
    t["judge:y.confidence_source"] = "logprobs"
    t.to_json(other, orient="records", lines=True)
    res = runner.invoke(app, ["escalate", str(cal), str(other), *args])
    assert res.exit_code == 1 and "field 'judge:y.confidence_source'" in res.output
    assert "'logprobs', the calibration's from 'verbalised'" in res.output
    res = runner.invoke(app, ["escalate", str(pairs), str(other), *args])
    assert res.exit_code == 1 and "pairs.jsonl, line 2: malformed JSON" in res.output
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"risk": 0.1}')
    res = runner.invoke(app, ["escalate", str(wrong), str(other), *args])
    assert res.exit_code == 1 and "wrong.json, field 'kind': not a calibration file" in res.output


def test_meta_selective_on_graded_items(tmp_path: Path) -> None:
    """An item table: a graded judge's ``J.p`` (the probability of its grade) calibrated against the
    human rating rounded (the exact grade is correct); a judge with no confidence refused."""
    rng = np.random.default_rng(5)
    n = 400
    human = rng.integers(1, 6, n).astype(float)
    p = rng.uniform(0.3, 1.0, n)
    grade = np.where(rng.uniform(size=n) < p, human, np.clip(human + rng.choice([-1, 1], n), 1, 5))
    t = pd.DataFrame({"id": [f"i{k}" for k in range(n)], "system": "s", "instruction": "q", "response": "r",
                      "human": human, "judge:g": grade, "judge:g.p": p, "judge:h": human})
    path = tmp_path / "items.jsonl"
    t.to_json(path, orient="records", lines=True)
    res = runner.invoke(app, ["meta", str(path), "--human", "human", "-m", "judge:g,judge:h", "--grouping", "none",
                              "--bootstrap", "20", "--permutations", "20", "--selective", "--risk", "0.2", "--json"])
    assert res.exit_code == 0, res.output
    sel = json.loads(res.stdout)["selective"]
    want = calibrate(p, grade == human, SelectiveSettings(alpha=0.2, delta=0.1))
    row = sel["rows"][0]
    assert row["judge"] == "judge:g" and row["threshold"] == pytest.approx(want.threshold)
    assert row["coverage"] == want.coverage and want.coverage > 0
    assert sel["refused"]["judge:h"].startswith("judge:h has no confidence: no judge:h.confidence or judge:h.p")
