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


def test_meta_selective_on_an_export(tmp_path: Path) -> None:
    n = 150
    pairs = tmp_path / "pairs.jsonl"
    truth = write_pairs(pairs, n, seed=3)
    # the judge's confidence: high where its verdict is the truth, lower (and spread) where it is not
    rng = np.random.default_rng(4)
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    code = {"A": 1.0, "B": -1.0, "tie": 0.0}
    for r, t in zip(rows, truth, strict=True):
        right = code[r["judge:demo"]] == t
        r["judge:demo.confidence"] = float(rng.uniform(0.75, 1.0) if right else rng.uniform(0.4, 0.9))
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
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
