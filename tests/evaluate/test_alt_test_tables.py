"""The Alt-Test on evalign's tables and files, and ``evalign alt-test``: the same figures as the
array functions (pinned to upstream in tests/meta/test_alt_test.py), the labels read the table's way,
epsilon always stated."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import InputError
from evalign.evaluate.alt_test import alt_test_files, alt_test_table, dataset_settings
from evalign.evaluate.annotators import UNPARSEABLE, item_labels, run_alt_test, verdict_labels
from evalign.meta.alt_test import AltTestSettings, alt_test_dicts

runner = CliRunner()
MTBENCH = Path(os.environ["EVALIGN_DATA_DIR"]) / "alttest" / "mtbench"


def _mtbench() -> tuple[dict, dict]:
    return (json.loads((MTBENCH / "human_annotations.json").read_text()),
            json.loads((MTBENCH / "llm_annotations.json").read_text()))


def _as_pair_table(humans: dict, judges: dict) -> tuple[pd.DataFrame, list[str]]:
    """MT-Bench's Alt-Test labels as an evalign pair table: pref_* codes and judge verdict columns."""
    code = {"model_a": 1.0, "model_b": -1.0, "tie": 0.0}
    verdict = {"model_a": "A", "model_b": "B", "tie": "tie"}
    items = sorted({i for a in humans.values() for i in a})
    df = pd.DataFrame({"id": items, "system_a": "a", "system_b": "b"})
    prefs = []
    for k, (_, labels) in enumerate(humans.items(), start=1):
        df[f"pref_{k}"] = [code[labels[i]] if i in labels else np.nan for i in items]
        prefs.append(f"pref_{k}")
    for j, labels in judges.items():
        df[f"judge:{j}"] = [verdict[labels[i]] for i in items]
    return df, prefs


def test_pair_table_equals_the_dict_format() -> None:
    humans, judges = _mtbench()
    df, prefs = _as_pair_table(humans, judges)
    s = AltTestSettings(epsilon=0.2)
    table = alt_test_table(df, prefs, [f"judge:{j}" for j in judges], settings=s)
    dicts = alt_test_dicts(humans, judges, settings=s)
    for j in judges:
        r, d = table[f"judge:{j}"], dicts[j]
        assert r.scoring == "accuracy"
        assert (r.winning_rate, r.advantage_probability, r.n_items) == (d.winning_rate, d.advantage_probability,
                                                                         d.n_items)
        assert [a.p_value for a in r.annotators] == [a.p_value for a in d.annotators]


def test_unparseable_verdict_is_a_label_no_annotator_gave() -> None:
    verdicts = np.array([[1, 0, 0, np.nan, np.nan], [0, 1, 0, 0, np.nan]])
    assert verdict_labels(verdicts)[:4].tolist() == [1.0, -1.0, 0.0, UNPARSEABLE]
    assert np.isnan(verdict_labels(verdicts)[4])
    humans, judges = _mtbench()
    df, prefs = _as_pair_table(humans, {"gpt-4o": judges["gpt-4o"]})
    df["judge:broken"] = "unparseable"
    rep = alt_test_table(df, prefs, ["judge:gpt-4o", "judge:broken"], settings=AltTestSettings(epsilon=0.2))
    broken = rep["judge:broken"]
    # it never agrees with anyone: it wins only the items where the left-out annotator agrees with no
    # other annotator either (both score 0)
    shares = []
    for a, labels in humans.items():
        shared = [i for i in labels if sum(i in other for other in humans.values()) >= 2]
        alone = [i for i in shared if not any(o.get(i) == labels[i] for b, o in humans.items() if b != a)]
        shares.append(len(alone) / len(shared))
    assert broken.advantage_probability == pytest.approx(np.mean(shares), abs=1e-12)
    assert broken.winning_rate == 0.0
    assert any("unparseable" in n for n in rep.notes)


def test_item_scores_off_the_annotators_scale_are_left_out() -> None:
    rng = np.random.default_rng(0)
    r = [rng.integers(1, 6, (2, 20)).astype(float) for _ in range(3)]
    labels = item_labels(r, {"judge:ok": r[0], "judge:x10": r[0] * 10}, ["a", "b", "c"])
    assert labels.units is not None and labels.units.tolist() == list(range(20)) * 2  # cells resampled by item
    rep = run_alt_test(labels, AltTestSettings(min_items=10))
    assert rep.judges == ["judge:ok"]
    assert rep["judge:ok"].scoring == "neg_rmse"
    assert any("judge:x10: not on the annotators' scale" in n for n in rep.notes)


def test_table_errors_name_the_column() -> None:
    df = pd.DataFrame({"id": ["1"], "pref_1": [1.0], "judge:x": ["A"]})
    with pytest.raises(InputError, match="'pref_2'"):
        alt_test_table(df, ["pref_1", "pref_2"], ["judge:x"])
    with pytest.raises(InputError, match="at least 2 annotator"):
        alt_test_table(df, ["pref_1"], ["judge:x"])


def test_dataset_epsilon_by_annotator_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalign.datasets import catalogue

    s = dataset_settings("pandalm")
    declared = getattr(catalogue.CATALOGUE["pandalm"], "annotator_kind", None)
    if declared is None:
        assert s.epsilon == 0.1 and "unknown" in s.epsilon_source
    assert dataset_settings("pandalm", 0.25).epsilon == 0.25
    entry = catalogue.CATALOGUE["pandalm"]

    class WithKind:
        annotator_kind = "experts"

    monkeypatch.setitem(catalogue.CATALOGUE, "pandalm", WithKind())  # the field the data adapters declare
    s = dataset_settings("pandalm:any")
    assert s.epsilon == 0.2 and "pandalm:any's annotators are experts" in s.epsilon_source
    monkeypatch.setitem(catalogue.CATALOGUE, "pandalm", entry)


def test_files_and_cli() -> None:
    rep = alt_test_files(MTBENCH / "human_annotations.json", MTBENCH / "llm_annotations.json",
                         settings=AltTestSettings(epsilon=0.2), only=["gpt-4o"])
    assert rep.judges == ["gpt-4o"]
    res = runner.invoke(app, ["alt-test", str(MTBENCH / "human_annotations.json"),
                              str(MTBENCH / "llm_annotations.json"), "--epsilon", "0.2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["epsilon"] == 0.2 and out["epsilon_source"] == "given"
    got = {r["judge"]: r for r in out["results"]}
    assert got["gpt-4o"]["advantage_probability"] == rep["gpt-4o"].advantage_probability
    assert got["gpt-4o"]["winning_rate"] == 0.0 and got["gpt-4o"]["passed"] is False
    res = runner.invoke(app, ["alt-test", str(MTBENCH / "human_annotations.json"),
                              str(MTBENCH / "llm_annotations.json"), "--annotators", "crowd", "--judge", "gpt-4o"])
    assert res.exit_code == 0, res.output
    assert "epsilon 0.1 (annotators are crowd" in " ".join(res.output.split())
    assert "0.773" in res.output  # gpt-4o's advantage probability on MT-Bench


def test_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "h.json"
    bad.write_text('{"a": {"1": [1, 2]}}')
    res = runner.invoke(app, ["alt-test", str(bad), str(MTBENCH / "llm_annotations.json")])
    assert res.exit_code == 1 and "h.json, field 'a.1': a label must be a string, a number or null" in res.output
    res = runner.invoke(app, ["alt-test", str(MTBENCH / "human_annotations.json"),
                              str(MTBENCH / "llm_annotations.json"), "--annotators", "students"])
    assert res.exit_code == 2 and "error: --annotators: unknown annotator kind 'students'" in res.output
    one = tmp_path / "mine.json"
    one.write_text(json.dumps(_mtbench()[1]["gpt-4o"]))
    rep = alt_test_files(MTBENCH / "human_annotations.json", one, settings=AltTestSettings(epsilon=0.2))
    assert rep.judges == ["mine"]
