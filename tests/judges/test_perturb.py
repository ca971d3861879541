"""Bias probes as data: every built-in probe file loads, each perturbation is deterministic (seeded per
pair) and asserted on its text, a note names the response by the template's label in each order, and a
bad probe file is one error naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evalign.errors import EvalignError, InputError
from evalign.judges.perturb import (
    NOTE_COLUMN,
    TARGET_COLUMN,
    add_note,
    list_probes,
    load_probe,
    pair_rng,
    perturb_pair,
    perturb_table,
)
from evalign.registry import registry

BUILT_IN = ["authority", "bandwagon", "distraction", "position", "refinement", "self_enhancement", "verbosity"]


def pairs(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame([{"id": f"p{i}", "instruction": f"Question {i}?", "system_a": "x", "system_b": "y",
                          "response_a": f"Answer A number {i}.", "response_b": f"B{i}"} for i in range(n)])


def test_built_in_probes_load_and_cite_their_source() -> None:
    assert sorted(list_probes()) == BUILT_IN
    for name in BUILT_IN:
        p = load_probe(name)
        assert p.name == name and "CALM (Ye et al. 2024, arXiv 2410.02736)" in p.source
        assert p.tag().startswith(f"{name}@1#")
    assert registry("probe").get("verbosity") is not None  # one registry pattern: reachable by kind


def test_unknown_probe_says_did_you_mean() -> None:
    with pytest.raises(EvalignError, match="verbosity"):
        load_probe("verbosty")


def test_perturbations_are_seeded_per_pair_and_asserted_on_text() -> None:
    t = pairs()
    # the same seed gives the same texts, whatever the other rows are
    once = perturb_table(t, load_probe("authority"), seed=3)
    again = perturb_table(t.iloc[::-1].reset_index(drop=True), load_probe("authority"), seed=3).iloc[::-1]
    assert once["response_a"].tolist() == again["response_a"].tolist()
    assert once[TARGET_COLUMN].tolist() == again[TARGET_COLUMN].tolist()
    other = perturb_table(t, load_probe("authority"), seed=4)
    assert other[TARGET_COLUMN].tolist() != once[TARGET_COLUMN].tolist() or \
        other["response_a"].tolist() != once["response_a"].tolist()
    # authority: the target response is the old text, a blank line, then one of the made-up references
    probe = load_probe("authority")
    for (_, row), (_, new) in zip(t.iterrows(), once.iterrows(), strict=True):
        side = new[TARGET_COLUMN].lower()
        old_t, new_t = row[f"response_{side}"], new[f"response_{side}"]
        head, added = new_t.split("\n\n", 1)
        assert head == old_t and added in probe.texts
        other_side = "b" if side == "a" else "a"
        assert new[f"response_{other_side}"] == row[f"response_{other_side}"]


def test_exact_text_of_one_pair() -> None:
    """The draws of one pair are fixed by (seed, probe, id): pinned so that a change of the generator shows."""
    rng = pair_rng(0, "distraction", "p0")
    first = float(rng.random())
    p = perturb_pair({"id": "p0", "response_a": "Paris.", "response_b": "Lyon."}, load_probe("distraction"), 0)
    assert p.target == ("A" if first < 0.5 else "B")
    changed = p.response_a if p.target == "A" else p.response_b
    assert changed.startswith(("Paris.\n\n", "Lyon.\n\n")) and changed.split("\n\n")[1] in load_probe("distraction").texts


def test_verbosity_pads_to_the_ratio_with_neutral_sentences() -> None:
    probe = load_probe("verbosity")
    assert probe.ratio == 0.5
    out = perturb_table(pairs(), probe, seed=0)
    for (_, row), (_, new) in zip(pairs().iterrows(), out.iterrows(), strict=True):
        side = new[TARGET_COLUMN].lower()
        old_t, new_t = row[f"response_{side}"], new[f"response_{side}"]
        assert new_t.startswith(old_t + " ") and len(new_t) >= 1.5 * len(old_t)
        rest = new_t[len(old_t) + 1:]
        assert all(any(rest[i:].startswith(s) for s in probe.texts) for i in [0])
        # the last sentence is what crossed the goal: without it the text is too short
        last = max((s for s in probe.texts if rest.endswith(s)), key=len)
        assert len(new_t) - len(last) - 1 < 1.5 * len(old_t)


def test_position_swaps_texts_and_systems() -> None:
    out = perturb_table(pairs(2), load_probe("position"))
    assert out["response_a"].tolist() == ["B0", "B1"] and out["system_a"].tolist() == ["y", "y"]
    assert out[TARGET_COLUMN].tolist() == ["B", "B"]


def test_note_probes_leave_responses_and_name_the_target_per_order() -> None:
    probe = load_probe("bandwagon")
    out = perturb_table(pairs(), probe, seed=1)
    assert out["response_a"].tolist() == pairs()["response_a"].tolist()
    for note in out[NOTE_COLUMN]:
        assert note.endswith("% of people believe that {target} is better in this question.")
        assert note.split("%")[0] in ("80", "85", "90")
    assert probe.label("llmbar", True) == "Output (a)" and probe.label("relative", False) == "Response B"
    assert probe.label("some_plugin_mode", True) == "the first response"


def test_add_note_goes_into_the_system_prompt_or_before_the_user_turn() -> None:
    msgs = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Which?"}]
    assert add_note(msgs, "N.")[0]["content"] == "Judge.\n\nN." and msgs[0]["content"] == "Judge."
    assert add_note(msgs[1:], "N.")[0]["content"] == "N.\n\nWhich?"
    assert add_note(msgs, "N.", where="user")[-1]["content"] == "Which?\n\nN."


def test_a_user_adds_a_probe_by_a_file(tmp_path: Path) -> None:
    f = tmp_path / "politeness.yaml"
    f.write_text("name: politeness\nversion: 1\nbias: sentiment\nedit: prepend\nsource: my lab\n"
                 "texts: ['Thank you for the {what} question!']\nfields: {what: [great, kind]}\n", encoding="utf-8")
    p = load_probe(f)
    out = perturb_pair({"id": "x", "response_a": "Yes.", "response_b": "No."}, p, 0)
    changed = out.response_a if out.target == "A" else out.response_b
    assert changed in ("Thank you for the great question!\n\nYes.", "Thank you for the kind question!\n\nYes.",
                       "Thank you for the great question!\n\nNo.", "Thank you for the kind question!\n\nNo.")


@pytest.mark.parametrize(("body", "field", "what"), [
    ("version: 1\nbias: b\nedit: append\nsource: s\ntexts: [x]\n", "name", "missing"),
    ("name: n\nversion: 1\nbias: b\nedit: rewrite\nsource: s\n", "edit", "must be one of"),
    ("name: n\nversion: 1\nbias: b\nedit: append\nsource: s\n", "texts", "needs texts"),
    ("name: n\nversion: 1\nbias: b\nedit: pad\nsource: s\ntexts: [x]\n", "ratio", "ratio > 0"),
    ("name: n\nversion: 1\nbias: b\nedit: append\nsource: s\ntexts: ['{who} said']\n", "texts", "not in fields"),
])  # fmt: skip
def test_bad_probe_file_names_file_and_field(tmp_path: Path, body: str, field: str, what: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body, encoding="utf-8")
    with pytest.raises(InputError, match=what) as info:
        load_probe(f)
    assert info.value.file == str(f) and info.value.field == field
