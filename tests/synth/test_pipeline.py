"""``run_synth`` with the scripted teacher: every filter counts what the teacher got wrong, the output
is balanced and valid, and a killed run resumes without asking anything twice."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from scripted_teacher import ScriptedTeacher

from evalign.cache import Cache
from evalign.errors import BackendError, EvalignError
from evalign.judges.parsing import parse_grade
from evalign.judges.prompts import load_template
from evalign.synth import COLUMNS, SynthSettings, load_seed_rubrics, relative_instances, run_synth

SETTINGS = SynthSettings(rounds=1, rubrics_per_round=4, instructions_per_rubric=5)


def test_filters_count_every_bad_generation(tmp_path: Path) -> None:
    teacher = ScriptedTeacher()
    res = run_synth(load_seed_rubrics(), teacher, SETTINGS, cache=Cache(tmp_path / "c.sqlite"))
    s = res.summary
    log = Counter(teacher.log)
    # rubrics: b=3 not JSON; b=2 repeats b=0, and its paraphrase repeats b=0's paraphrase (same prompt)
    assert log[("brainstorm", "unparseable")] == 1 and s.filters["rubric_unparseable"] == 1
    assert s.filters["rubric_near_duplicate"] == 2 and s.rubrics == 4
    # instructions: per rubric s=4 unparseable, s=3 a repeat of s=0
    assert s.filters["instruction_unparseable"] == log[("instruction", "unparseable")] == 4
    assert s.filters["instruction_near_duplicate"] == log[("instruction", "duplicate")] == 4
    assert s.instructions == 12
    # responses: what the teacher did wrong is exactly what was filtered
    assert s.filters["response_unparseable"] == log[("response", "unparseable")] > 0
    assert s.filters["score_mismatch"] == log[("response", "mismatch")] > 0
    valid = log[("response", "ok")]
    assert valid == s.rows + s.filters["balance_dropped"] and s.filters["balance_dropped"] > 0
    assert set(s.rows_by_score.values()) == {s.rows // 5} and s.rows % 5 == 0
    assert s.calls == {"total": len(teacher.prompts), "cached": 0, "new": len(teacher.prompts), "failed": 0}
    assert s.rejected["response"] == {"no_next": log[("response", "unparseable")]}
    # length report: the scripted teacher writes 6 + k words per sentence, 4 sentences
    assert s.length_by_score == {str(k): float(4 * (6 + k)) for k in range(1, 6)}
    # nothing invalid reaches the output
    t = res.table
    assert list(t.columns[: len(COLUMNS)]) == list(COLUMNS) and len(t) == s.rows
    for rec in t.to_dict("records"):
        assert parse_grade(rec["output"], "absolute").value == rec["orig_score"]
        assert rec["output"] == f"{rec['orig_feedback']} [RESULT] {rec['orig_score']}"
        assert rec["orig_feedback"].endswith(f"So the overall score is {rec['orig_score']}")
        assert rec["instruction"].startswith("###Task Description:") and rec["orig_response"] in rec["instruction"]
        assert rec["system"] == load_template("prometheus_absolute").system


def test_prometheus1_template_and_seed_rubrics(tmp_path: Path) -> None:
    settings = SynthSettings(rounds=0, include_seed_rubrics=True, instructions_per_rubric=1,
                             template="prometheus1_absolute", balance=False)
    seeds = load_seed_rubrics(["helpfulness", "honesty", "harmlessness", "reasoning"])
    res = run_synth(seeds, ScriptedTeacher(), settings, cache=Cache(tmp_path / "c.sqlite"))
    assert res.summary.rubrics == 4 and res.summary.filters["balance_dropped"] == 0
    assert all('"Feedback: (write a feedback' in x for x in res.table["instruction"])
    assert set(res.table["orig_criteria"]) <= {r.criteria for r in seeds}
    with pytest.raises(EvalignError, match="relative template"):
        run_synth(seeds, ScriptedTeacher(), SynthSettings(template="prometheus_relative"), cache=Cache.disabled())


def test_killed_run_resumes_without_asking_twice(tmp_path: Path) -> None:
    cache_path = tmp_path / "c.sqlite"
    full = ScriptedTeacher()
    expected = run_synth(load_seed_rubrics(), full, SETTINGS, cache=Cache(tmp_path / "other.sqlite"))
    dying = ScriptedTeacher(fail_after=30)
    with pytest.raises(BackendError):
        run_synth(load_seed_rubrics(), dying, SETTINGS, cache=Cache(cache_path))
    assert len(dying.prompts) == 30
    again = ScriptedTeacher()
    res = run_synth(load_seed_rubrics(), again, SETTINGS, cache=Cache(cache_path))
    assert not set(again.prompts) & set(dying.prompts)  # nothing asked twice
    assert len(again.prompts) + 30 == len(full.prompts)
    assert res.summary.calls["cached"] == 30
    pd.testing.assert_frame_equal(res.table, expected.table)
    third = ScriptedTeacher()
    run_synth(load_seed_rubrics(), third, SETTINGS, cache=Cache(cache_path))
    assert third.prompts == []


def test_relative_instances(tmp_path: Path) -> None:
    res = run_synth(load_seed_rubrics(), ScriptedTeacher(), SynthSettings(rounds=1, instructions_per_rubric=5,
                    relative=True), cache=Cache(tmp_path / "c.sqlite"))
    t = res.table
    absolute, rel = t[t["mode"] == "absolute"], t[t["mode"] == "relative"]
    # every two responses of different scores to one instruction make a pair
    expected = 0
    for _, g in absolute.groupby("orig_instruction"):
        sc = list(g["orig_score"])
        expected += sum(1 for i in range(len(sc)) for j in range(i + 1, len(sc)) if sc[i] != sc[j])
    assert len(rel) == expected == res.summary.relative_rows > 0
    for rec in rel.to_dict("records"):
        better = "A" if rec["orig_score_A"] > rec["orig_score_B"] else "B"
        assert rec["orig_preference"] == better and rec["output"].endswith(f"[RESULT] {better}")
        assert parse_grade(rec["output"], "relative").verdict == better
        assert rec["orig_response_A"] in rec["instruction"] and "###Response B:" in rec["instruction"]
    assert 0.25 < (rel["orig_preference"] == "A").mean() < 0.75  # the position is drawn, not fixed
    capped = relative_instances(absolute, max_pairs_per_instruction=1)
    spread = absolute.groupby("orig_instruction")["orig_score"].agg(lambda x: max(x) - min(x))
    assert len(capped) == int((spread > 0).sum())
    gaps = dict(zip(capped["orig_instruction"], (capped["orig_score_A"] - capped["orig_score_B"]).abs(), strict=True))
    assert gaps == {k: v for k, v in spread.items() if v > 0}  # the widest gap first


class NonsenseTeacher(ScriptedTeacher):
    """A teacher that answers every prompt with text no step can parse."""

    def answer(self, prompt: str, seed: int) -> tuple[str, str, str]:
        return "any", "unparseable", "I like turtles."


class NoResponseTeacher(ScriptedTeacher):
    """Rubrics and instructions as the scripted teacher writes them, every response unparseable."""

    def answer(self, prompt: str, seed: int) -> tuple[str, str, str]:
        step, outcome, text = super().answer(prompt, seed)
        return (step, outcome, text) if step != "response" else ("response", "unparseable", "Response: x\n[END]")


def test_nothing_to_generate_is_refused_before_any_call() -> None:
    with pytest.raises(EvalignError, match=r"nothing to generate: rounds=0 x rubrics_per_round=4 brainstorms no "
                                           r"rubric and include_seed_rubrics is off"):
        SynthSettings(rounds=0)
    with pytest.raises(EvalignError, match="rubrics_per_round=0"):
        SynthSettings(rubrics_per_round=0)
    assert SynthSettings(rounds=0, include_seed_rubrics=True).rounds == 0


@pytest.mark.parametrize(("teacher", "settings", "reason"), [
    (NonsenseTeacher(), SETTINGS, "no rubric was kept (4 unparseable, 0 near-duplicates, 0 failed calls)"),
    (NonsenseTeacher(), SynthSettings(rounds=0, include_seed_rubrics=True, instructions_per_rubric=2),
     "no instruction was kept for the 10 rubrics (20 unparseable, 0 near-duplicates, 0 failed calls)"),
    (NoResponseTeacher(), SynthSettings(rounds=0, include_seed_rubrics=True, instructions_per_rubric=1),
     "no response of the 10 instructions was usable (50 unparseable, 0 with another score, 0 with an unparseable "
     "output, 0 failed calls)"),
])
def test_a_run_without_rows_says_why(tmp_path: Path, teacher: ScriptedTeacher, settings: SynthSettings,
                                     reason: str) -> None:
    res = run_synth(load_seed_rubrics(), teacher, settings, cache=Cache(tmp_path / "c.sqlite"))
    assert res.summary.rows == 0 and len(res.table) == 0
    assert res.summary.empty_reason() == reason


class NoScoreOneTeacher(ScriptedTeacher):
    """The scripted teacher, but it never writes a usable response for score 1."""

    def answer(self, prompt: str, seed: int) -> tuple[str, str, str]:
        if prompt.startswith("Your job is to generate a response that would get a score of 1"):
            return "response", "unparseable", "Response: x\n[END]"
        return super().answer(prompt, seed)


def test_balancing_away_every_row_says_which_score_is_missing(tmp_path: Path) -> None:
    settings = SynthSettings(rounds=0, include_seed_rubrics=True, instructions_per_rubric=1)
    res = run_synth(load_seed_rubrics(), NoScoreOneTeacher(), settings, cache=Cache(tmp_path / "c"))
    s = res.summary
    assert s.rows == 0 and s.filters["balance_dropped"] > 0 and s.filters["response_unparseable"] >= 10
    assert s.empty_reason() == (f"balancing dropped all {s.filters['balance_dropped']} valid rows (no response was "
                                "graded 1); give --no-balance to keep them")
    unbalanced = run_synth(load_seed_rubrics(), NoScoreOneTeacher(), replace(settings, balance=False),
                           cache=Cache(tmp_path / "c"))
    assert unbalanced.summary.rows == s.filters["balance_dropped"] and unbalanced.summary.empty_reason() is None
