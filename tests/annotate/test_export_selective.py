"""`evalign meta --selective` on an `evalign annotate` export: three annotators label every pair a judge
with a confidence decided; the threshold, coverage and selective accuracy `meta` reports are those of
:func:`evalign.meta.selective.calibrate` on the annotators' majority (ties left out)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from annotate_helpers import fill, write_pairs
from typer.testing import CliRunner

from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings
from evalign.cli import app
from evalign.meta.selective import SelectiveSettings, calibrate

runner = CliRunner()
ANNOTATORS = {"ann1": 0.9, "ann2": 0.85, "ann3": 0.8}


CODE = {"A": 1.0, "B": -1.0, "tie": 0.0}


def _judged(pairs: Path, n: int) -> tuple[list[float], list[dict]]:
    """A judged pair table of ``n`` pairs with the judge's confidence: high where its verdict is the
    truth, lower (and spread) where it is not. The truth and the rows."""
    truth = write_pairs(pairs, n, seed=3)
    rng = np.random.default_rng(4)
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    for r, t in zip(rows, truth, strict=True):
        right = CODE[r["judge:demo"]] == t
        r["judge:demo.confidence"] = float(rng.uniform(0.75, 1.0) if right else rng.uniform(0.4, 0.9))
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return truth, rows


def test_meta_selective_on_an_export(tmp_path: Path) -> None:
    n = 150
    pairs = tmp_path / "pairs.jsonl"
    truth, rows = _judged(pairs, n)
    code = CODE
    store = Store(tmp_path / "labels.sqlite")
    store.initialise(read_items_to_label(pairs, "pairwise"), StoreSettings(task="pairwise"))
    labels = fill(store, ANNOTATORS, truth)
    store.close()
    wide = tmp_path / "wide.jsonl"
    res = runner.invoke(app, ["annotate", "export", str(tmp_path / "labels.sqlite"), "-o", str(wide)])
    assert res.exit_code == 0, res.output
    exported = [json.loads(line) for line in wide.read_text().splitlines()]
    assert len(exported) == n and all("judge:demo.confidence" in r for r in exported)
    res = runner.invoke(app, ["meta", str(wide), "--pref", "pref_ann1,pref_ann2,pref_ann3", "-m", "judge:demo",
                              "--selective", "--risk", "0.2", "--delta", "0.1", "--bootstrap", "20",
                              "--permutations", "20", "--workers", "1", "--json"])
    assert res.exit_code == 0, res.output
    sel = json.loads(res.stdout)["selective"]
    # the humans' majority of the three labels (a tie or a split: left out), the judge's own tie is wrong
    majority = np.sign(np.sum([labels[a] for a in ANNOTATORS], axis=0))
    verdict = np.array([code[r["judge:demo"]] for r in rows])
    conf = np.array([r["judge:demo.confidence"] for r in rows])
    keep = majority != 0
    want = calibrate(conf[keep], (verdict == majority)[keep], SelectiveSettings(alpha=0.2, delta=0.1))
    assert 0 < want.coverage < 1  # a threshold that keeps some verdicts and sends the rest to people
    row = {r["judge"]: r for r in sel["rows"]}["judge:demo"]
    assert row["threshold"] == pytest.approx(want.threshold)
    assert row["coverage"] == pytest.approx(want.coverage)
    assert row["selective_accuracy"] == pytest.approx(want.selective_accuracy)
    assert sel["alone"]["judge:demo"]["n"] == int(keep.sum())


def test_the_loop_escalate_annotate_export_join_alt_test(tmp_path: Path) -> None:
    """judge -> calibrate -> escalate -> annotate the items left for people (three annotators) -> export
    joined with the judged table -> meta --alt-test and a PPI leaderboard."""
    judged = tmp_path / "judged.jsonl"
    truth, rows = _judged(judged, 300)
    calib = tmp_path / "calib.jsonl"  # people first label a slice, the calibration set
    calib.write_text("".join(json.dumps(r) + "\n" for r in rows[:100]))
    store = Store(tmp_path / "calib.sqlite")
    store.initialise(read_items_to_label(calib, "pairwise"), StoreSettings(task="pairwise"))
    fill(store, ANNOTATORS, truth[:100])
    store.close()
    assert runner.invoke(app, ["annotate", "export", str(tmp_path / "calib.sqlite"), "-o", str(tmp_path / "c.jsonl")]
                         ).exit_code == 0
    cal = tmp_path / "cal.json"
    res = runner.invoke(app, ["meta", str(tmp_path / "c.jsonl"), "--pref", "pref_ann1,pref_ann2,pref_ann3", "-m",
                              "judge:demo", "--selective", "--risk", "0.2", "--delta", "0.1", "--bootstrap", "20",
                              "--permutations", "20", "--workers", "1", "--save-calibration", str(cal)])
    assert res.exit_code == 0, res.output
    rest = tmp_path / "people.jsonl"
    res = runner.invoke(app, ["escalate", str(cal), str(judged), "-o", str(tmp_path / "decided.jsonl"), "--rest",
                              str(rest), "--audit", "0.2", "--json"])
    assert res.exit_code == 0, res.output
    people = [json.loads(line) for line in rest.read_text().splitlines()]
    assert 30 <= len(people) < 300 and "judge:demo" not in people[0]  # the rest file: no judge column
    items = read_items_to_label(rest, "pairwise")  # what evalign annotate reads
    assert [it.key for it in items] == [r["id"] for r in people]
    store = Store(tmp_path / "labels.sqlite")
    store.initialise(items, StoreSettings(task="pairwise"))
    by_id = {r["id"]: i for i, r in enumerate(rows)}
    labels = fill(store, ANNOTATORS, [truth[by_id[r["id"]]] for r in people])
    store.close()
    db, wide = str(tmp_path / "labels.sqlite"), tmp_path / "wide.jsonl"
    rest.unlink()  # the store keeps a copy of the items: the export needs no ITEMS file
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(wide)])  # without the judged table
    assert res.exit_code == 0, res.output
    args = ["--pref", "pref_ann1,pref_ann2,pref_ann3", "-m", "judge:demo", "--alt-test", "--bootstrap", "20",
            "--permutations", "20", "--workers", "1", "--json"]
    res = runner.invoke(app, ["meta", str(wide), *args])
    assert res.exit_code != 0 and "judge:demo" in res.output  # no judge column to test
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(wide), "--join", str(judged)])
    assert res.exit_code == 0, res.output
    out = [json.loads(line) for line in wide.read_text().splitlines()]
    assert list(out[0])[:len(people[0])] == list(people[0])  # the items' columns first
    assert list(out[0])[-4:] == ["pref_ann1", "pref_ann2", "pref_ann3", "verdict"]
    assert "judge:demo.confidence" in out[0] and "reason" in out[0]
    for r in out:
        assert r["judge:demo"] == rows[by_id[r["id"]]]["judge:demo"]
        assert r["instruction"] == rows[by_id[r["id"]]]["instruction"]
    assert [r["pref_ann2"] for r in out] == labels["ann2"]
    res = runner.invoke(app, ["meta", str(wide), *args])
    assert res.exit_code == 0, res.output
    alt = json.loads(res.stdout)["alt_test"]["results"][0]
    assert alt["n_items"] == len(people)
    # the same Alt-Test from the alttest export and the judge's labels on those items
    humans, judges = tmp_path / "humans.json", tmp_path / "judges.json"
    assert runner.invoke(app, ["annotate", "export", db, "-o", str(humans), "--format", "alttest"]).exit_code == 0
    judges.write_text(json.dumps({"demo": {r["id"]: r["judge:demo"] for r in out}}))
    res = runner.invoke(app, ["alt-test", str(humans), str(judges), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["results"][0]["advantage_probability"] == \
        pytest.approx(alt["advantage_probability"])
    res = runner.invoke(app, ["leaderboard", str(judged), "--verdict", "judge:demo", "--human", str(wide), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ppi"]["n_human"] == len(people)
    long = tmp_path / "long.jsonl"
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(long), "--format", "long", "--join", str(judged)])
    assert res.exit_code == 0, res.output
    long_rows = [json.loads(line) for line in long.read_text().splitlines()]
    assert len(long_rows) == 3 * len(people)
    assert all(r["judge:demo"] == rows[by_id[r["id"]]]["judge:demo"] for r in long_rows)
    # a table to join with a duplicate id, or none of the items' ids, or with --format alttest: refused
    dup = tmp_path / "dup.jsonl"
    dup.write_text(judged.read_text() + judged.read_text().splitlines(keepends=True)[0])
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(wide), "--join", str(dup)])
    assert res.exit_code == 1 and "dup.jsonl, line 301, field 'id': duplicate id 'q000'" in res.output
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "zz", "x": 1}) + "\n")
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(wide), "--join", str(other)])
    assert res.exit_code == 1 and "none of the labelled items' ids" in res.output
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(humans), "--format", "alttest", "--join",
                              str(judged)])
    assert res.exit_code == 2 and "--join goes with --format wide or long" in res.output
