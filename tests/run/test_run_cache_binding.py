"""``evalign run`` re-runs in the same output folder: every recorded step is bound to the rows it was
computed from, in their order. Reordering the input, editing one cell (and restoring the file's
mtime) recompute what changed; the per-row numbers always equal a fresh run's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()


def _rows(n: int = 6) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        ref = f"the answer to question {i} is {i} apples"
        for s, resp in (("A", ref), ("B", f"the answer is {i}"), ("C", "no idea")):
            rows.append({"qid": f"q{i}", "model": s, "instruction": f"question {i}?", "reference": ref,
                         "output": resp, "rating": {"A": 5, "B": 3, "C": 1}[s] - (i % 2) * (s == "B")})
    return rows


def _config(folder: Path) -> Path:
    cfg = {
        "version": 1, "name": "order",
        "metrics": ["rouge_l", "exact_match"],
        "evaluations": [{
            "name": "toy",
            "data": {"file": "items.jsonl", "fields": {"id": "qid", "system": "model", "response": "output"}},
            "meta": {"human": {"column": "rating"}, "resampling": {"n_resamples": 5, "n_permutations": 5, "seed": 1}},
        }],
        "report": {"formats": ["json"]},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def _run(config: Path, out: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    res = runner.invoke(app, ["run", str(config), "--out", str(out)])
    assert res.exit_code == 0, (res.output, res.exception)
    scored = pd.read_json(out / "toy" / "scored.jsonl", lines=True)
    run = json.loads((out / "run.json").read_text())
    return scored, run


def _per_row(scored: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    return {(r.id, r.system): (round(float(r.rouge_l), 12), float(r.exact_match)) for r in scored.itertuples()}


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_reordered_and_edited_inputs_never_reuse_another_rows_scores(tmp_path: Path) -> None:
    config = _config(tmp_path)
    data = tmp_path / "items.jsonl"
    rows = _rows()
    _write_lines(data, rows)
    out = tmp_path / "out"
    first, run = _run(config, out)
    assert run["evaluations"]["toy"]["skipped"] == []
    assert _per_row(first)[("q0", "A")] == (1.0, 1.0)
    # the same file again: every step done before
    _, run = _run(config, out)
    assert run["evaluations"]["toy"]["skipped"] == ["metric rouge_l", "metric exact_match", "meta-evaluation"]

    # 1. the lines reversed: the steps are redone, each row keeps its own scores
    _write_lines(data, rows[::-1])
    reordered, run = _run(config, out)
    assert run["evaluations"]["toy"]["skipped"] == []
    assert _per_row(reordered) == _per_row(first)
    assert reordered.iloc[-1]["id"] == "q0" and reordered.iloc[-1]["rouge_l"] == 1.0
    fresh, _ = _run(config, tmp_path / "fresh-reversed")
    pd.testing.assert_frame_equal(reordered, fresh)
    assert (json.loads((out / "toy" / "evaluation.json").read_text())["trust"]
            == json.loads((tmp_path / "fresh-reversed" / "toy" / "evaluation.json").read_text())["trust"])

    # 2. one cell edited keeping the size, the mtime restored (as cp -p / rsync -a leave it)
    _write_lines(data, rows)
    _run(config, out)
    stat = data.stat()
    text = data.read_text(encoding="utf-8")
    edited = text.replace('"output": "the answer to question 0 is 0 apples"', '"output": "the answer to question 0 is 9 apples"', 1)
    assert len(edited) == len(text) and edited != text
    data.write_text(edited, encoding="utf-8")
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert data.stat().st_mtime_ns == stat.st_mtime_ns and data.stat().st_size == stat.st_size
    changed, run = _run(config, out)
    assert run["evaluations"]["toy"]["skipped"] == []
    assert _per_row(changed)[("q0", "A")][1] == 0.0 and _per_row(changed)[("q0", "A")][0] < 1.0
    fresh, _ = _run(config, tmp_path / "fresh-edited")
    pd.testing.assert_frame_equal(changed, fresh)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(list(range(12))))
def test_any_permutation_of_rows_gives_the_same_per_row_results(tmp_path_factory: Any, order: list[int]) -> None:
    """Runs in ONE output folder, one permutation after another: each one's per-row scores are
    those of the first order, joined by (id, system)."""
    folder = tmp_path_factory.getbasetemp() / "perm"
    folder.mkdir(exist_ok=True)
    config = _config(folder)
    rows = _rows(4)
    out = folder / "out"
    if not (folder / "base.json").exists():
        _write_lines(folder / "items.jsonl", rows)
        base, _ = _run(config, out)
        (folder / "base.json").write_text(json.dumps([[*k, *v] for k, v in _per_row(base).items()]))
    base_rows = {(a, b): (c, d) for a, b, c, d in json.loads((folder / "base.json").read_text())}
    _write_lines(folder / "items.jsonl", [rows[i] for i in order])
    scored, _ = _run(config, out)
    assert list(zip(scored["id"], scored["system"], strict=True)) == [(rows[i]["qid"], rows[i]["model"]) for i in order]
    assert _per_row(scored) == base_rows


def test_frame_key_depends_on_row_order_and_content() -> None:
    from evalign.run.execute import frame_key

    df = pd.DataFrame({"id": ["a", "b"], "response": ["x", "y"]})
    assert frame_key(df) == frame_key(df.copy())
    assert frame_key(df) != frame_key(df.iloc[::-1].reset_index(drop=True))
    assert frame_key(df) != frame_key(df.assign(response=["x", "z"]))
    assert frame_key(df) != frame_key(df.rename(columns={"response": "output"}))


def test_a_given_score_column_with_infinity_names_line_and_column(tmp_path: Path) -> None:
    rows = [{**r, "score": float(r["rating"])} for r in _rows()]
    rows[3]["score"] = float("inf")
    _write_lines(tmp_path / "items.jsonl", rows)
    cfg = yaml.safe_load(_config(tmp_path).read_text())
    cfg["metrics"] = []
    cfg["evaluations"][0]["columns"] = ["score"]
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    res = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "items.jsonl, line 4, field 'score': must be a finite number, got inf" in text and text.count("error:") == 1
