"""``evalign bench``'s column "coverage at risk 0.15": for a judge with a confidence, the share of a set's
labelled pairs :func:`evalign.meta.selective.calibrate` lets it decide (risk 0.15, delta 0.1, against
the humans' majority); '-' for a judge without one, with the note that says why."""

from __future__ import annotations

import numpy as np
import pytest

from evalign.bench import BenchSettings
from evalign.bench.display import set_table
from evalign.bench.load import load_suite_sets
from evalign.bench.profile import NO_CONFIDENCE, evaluate_sets
from evalign.bench.runner import bench_suite, profile_of
from evalign.meta.agreement import majority_vote
from evalign.meta.resampling import Resampling
from evalign.meta.selective import SelectiveSettings, calibrate


def test_coverage_at_risk_where_the_judge_has_a_confidence() -> None:
    settings = BenchSettings(per_set=None, sets=("llmbar-natural",), resampling=Resampling(50, 50))
    suite = bench_suite(settings)
    loaded = load_suite_sets(suite, settings)
    s = loaded.sets[0]
    t = s.table
    label = majority_vote(t[list(s.human.pref_columns)].to_numpy(dtype=float), fallback=0.0)
    rng = np.random.default_rng(0)
    sure = rng.uniform(0.5, 1.0, len(t))
    right = sure > 0.7  # right exactly where sure enough
    verdict = np.where(right, label, -label)
    t["mine"] = np.where(verdict > 0, "A", "B")
    t["mine.status"] = "scored"
    t["mine.p_a"] = np.where(verdict > 0, sure, 1 - sure)
    rows, _ = evaluate_sets([s], ["mine"], {"mine": "yours"}, settings, {})
    by = {r["judge"]: r for r in rows}
    keep = label != 0  # human ties left out
    want = calibrate(sure[keep], right[keep], SelectiveSettings(alpha=0.15, delta=0.1))
    assert 0 < want.coverage < 1
    assert by["mine"]["coverage_at_risk"] == pytest.approx(want.coverage)
    published = [j for j, r in by.items() if r["role"] == "published"]
    assert published and all(np.isnan(by[j]["coverage_at_risk"]) for j in published)  # verdicts without confidence
    p = profile_of(suite, loaded, [], [], settings)
    shown = set_table(p, "llmbar-natural").set_index("judge")
    assert (shown.loc[published, "cov@0.15"] == "-").all()
    assert NO_CONFIDENCE in p.notes
