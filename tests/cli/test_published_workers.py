"""``evalign meta --published --workers N`` reaches the cross-set table's resampling (it was silently dropped:
every set forked a pool of every core whatever the option), is checked like ``meta``'s, and the table's
values do not depend on it. ``Registry.find`` answers None for unknown names without an error."""

from __future__ import annotations

import json

import pandas as pd
from typer.testing import CliRunner

from evalign.cli import app
from evalign.cli.published import published_settings
from evalign.metrics.base import METRICS

runner = CliRunner()


def test_workers_reach_the_settings() -> None:
    s = published_settings(datasets="pandalm", data_dir=None, bootstrap=50, permutations=20, seed=0, alpha=0.05,
                           confidence=0.95, epsilon=None, workers=1)
    assert s.resampling.workers == 1 and s.resampling.n_resamples == 50 and s.datasets == ("pandalm",)


def test_workers_checked_and_values_independent() -> None:
    res = runner.invoke(app, ["meta", "--published", "--dataset", "pandalm", "--workers", "-1"])
    assert res.exit_code == 2 and "error: --workers must be an integer >= 0 (0: every core), got -1" in res.output
    outs = []
    for w in ("1", "2"):
        res = runner.invoke(app, ["meta", "--published", "--dataset", "pandalm", "--bootstrap", "60", "--permutations",
                                  "30", "--json", "--workers", w])
        assert res.exit_code == 0, res.output
        outs.append(json.loads(res.stdout)["rows"])
    assert outs[0] == outs[1] and len(outs[0]) == 2


def test_registry_find() -> None:
    assert METRICS.find("bleu") is METRICS.get("bleu")
    assert METRICS.find("chrF") is METRICS.get("chrf")  # case folding as get
    assert METRICS.find("judge:gpt-4/coherence") is None
    assert "bleu" in METRICS and "no_such_metric" not in METRICS


def test_label_sets_evaluated_side_by_side_give_the_same_table(tmp_path, monkeypatch) -> None:
    """With two workers the label sets are evaluated in forked workers (each records its process id)
    and the table (rows, sets but for the timings, notes) is the one of one worker."""
    import os

    import evalign.evaluate.published as published

    evaluate = published.evaluate
    pids = tmp_path / "pids"

    def recording(spec):  # inherited by the forked workers
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return evaluate(spec)

    monkeypatch.setattr(published, "evaluate", recording)
    tables = {}
    for w in (1, 2):
        pids.write_text("")
        s = published_settings(datasets="pandalm,topical-chat,qags", data_dir=None, bootstrap=40, permutations=20,
                               seed=3, alpha=0.05, confidence=0.95, epsilon=None, workers=w)
        tables[w] = published.published_table(s)
        ran = set(pids.read_text().split())
        assert len(pids.read_text().split()) == 8  # pandalm 1, topical-chat 6, qags 1
        assert (ran == {str(os.getpid())}) if w == 1 else (str(os.getpid()) not in ran and 1 <= len(ran) <= 2)
    one, two = tables[1], tables[2]
    assert len(one.rows) == 9 and one.rows["value"].notna().all()  # pandalm ships 2 columns
    pd.testing.assert_frame_equal(one.rows, two.rows, check_exact=True)
    pd.testing.assert_frame_equal(one.sets.drop(columns="seconds"), two.sets.drop(columns="seconds"), check_exact=True)
    assert one.notes == two.notes
