"""The evaluation reports its resampling (for the command line's progress bars) without changing a number."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalign.evaluate import Column, EvalSpec, Human, Resampling, evaluate, evaluation_progress


def _spec() -> EvalSpec:
    rng = np.random.default_rng(1)
    n = 60
    df = pd.DataFrame({"pair_id": [f"p{i}" for i in range(n)], "p1": rng.choice([-1.0, 1.0], n),
                       "v": rng.choice([-1.0, 1.0, 0.0], n), "w": rng.choice([-1.0, 1.0, 0.0], n)})
    return EvalSpec(human=Human(pref_columns=("p1",)), pairs=df,
                    columns=(Column("v", kind="judge", verdict=True), Column("w", kind="judge", verdict=True)),
                    resampling=Resampling(n_resamples=50, n_permutations=50))


def test_progress_counts_every_interval_and_test_and_changes_nothing() -> None:
    calls: list[tuple[str, int, int | None]] = []
    with_progress = evaluate(_spec(), progress=lambda *a: calls.append(a))
    plain = evaluate(_spec())
    pd.testing.assert_frame_equal(with_progress.trust[0].rows, plain.trust[0].rows)
    intervals = [c for c in calls if c[0] == "bootstrap intervals"]
    rows = with_progress.trust[0].rows
    assert [c[1] for c in intervals] == list(range(1, len(rows) + 1))  # one interval per row, counted up
    assert {c[2] for c in intervals} == {len(rows)}
    tests = [c for c in calls if c[0] == "permutation tests"]
    assert tests and [c[1] for c in tests] == list(range(1, len(tests) + 1)) and {c[2] for c in tests} == {None}


def test_an_enclosing_block_receives_the_progress() -> None:
    seen: list[str] = []
    with evaluation_progress(lambda stage, done, total: seen.append(stage)):
        evaluate(_spec())
    assert "bootstrap intervals" in seen
    seen.clear()
    evaluate(_spec())  # outside the block: nobody is told
    assert seen == []
