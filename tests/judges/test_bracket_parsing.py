"""The bracket parsers (MT-Bench ``[[rating]]`` / ``[[A]]``, Arena-Hard ``[[A>>B]]``) against upstream's
own parsing on generated texts: FastChat's patterns and precedence (``fastchat.llm_judge.common``) and
Arena-Hard's ``get_score`` (JudgeBench's copy), through what it returned on 4,240 texts, kept in the data folder
(``judgebench/reference/arena_get_score_cases.json``; no upstream code runs here).
Where upstream reads one value, evalign reads the same; where a text holds several different values
evalign says ``conflicting`` (upstream takes the first); copied prompt text never counts."""

from __future__ import annotations

import ast
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalign.judges.bracket_parsing import ARENA_CHOICES, parse_bracketed

DATA = Path(os.environ.get("EVALIGN_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
REFERENCE = DATA / "judgebench" / "reference" / "arena_get_score_cases.json"

# FastChat's rules, as fastchat/llm_judge/common.py writes them (the template tests run FastChat itself)
ONE_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
ONE_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")


def fastchat_rating(judgment: str) -> float:
    match = re.search(ONE_SCORE, judgment) or re.search(ONE_SCORE_BACKUP, judgment)
    return float(ast.literal_eval(match.groups()[0])) if match else -1


def fastchat_winner(judgment: str) -> str:
    if "[[A]]" in judgment:
        return "A"
    if "[[B]]" in judgment:
        return "B"
    if "[[C]]" in judgment:
        return "tie"
    return "error"


FILLER = st.sampled_from(["The answer is fine.", "Assistant A explains more.", "Overall", "\n", "\n\n", " ",
                          "Both are short.", "B is wrong about 3.", "[note]", "Score", "A > B", "it's [not] bad"])


def _texts(tokens: list[str]) -> st.SearchStrategy[str]:
    parts = st.lists(st.one_of(FILLER, st.sampled_from(tokens)), min_size=0, max_size=8)
    return parts.map(" ".join)


@settings(max_examples=400, deadline=None)
@given(_texts(["[[1]]", "[[7]]", "[[10]]", "[[7.5]]", "Rating: [[7]]", "[4]", "[9]", "[[3.]]"]))
def test_rating_matches_fastchat(text: str) -> None:
    ours = parse_bracketed(text, "stop", style="mtbench_rating")
    up = fastchat_rating(text)
    doubles = {float(m) for m in ONE_SCORE.findall(text)}
    singles = {float(m) for m in ONE_SCORE_BACKUP.findall(text)}
    values = doubles or singles
    if len(values) == 1:
        assert ours.value == up, text
    elif len(values) > 1:
        assert ours.reason == "conflicting" and up in values, text
    else:
        assert ours.reason in ("no_score", "empty") and up == -1, text


@settings(max_examples=400, deadline=None)
@given(_texts(["[[A]]", "[[B]]", "[[C]]", "[A]", "[[a]]", "A]]"]))
def test_verdict_matches_fastchat(text: str) -> None:
    ours = parse_bracketed(text, "stop", style="mtbench_verdict")
    up = fastchat_winner(text)
    found = {t for t in ("[[A]]", "[[B]]", "[[C]]") if t in text}
    if len(found) == 1:
        assert ours.value == up, text
    elif found:
        assert ours.reason == "conflicting" and up != "error", text
    else:
        assert ours.reason in ("no_score", "empty") and up == "error", text


#: upstream's known labels and evalign's value for each
ARENA_VALUE = {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"}
#: the one real text where evalign and upstream differ in kind: Claude-3-Haiku's first game on pair
#: 90a99d74 holds two verdict lines ("[[A>B]]" after its view of A, "[[A=B]]" after B's); upstream calls it
#: conflicting, evalign masks the choice phrases and finds no verdict: neither reads one
ARENA_ACCEPTED = {("90a99d74", "judgments[0]"): ("no_score", (None, False))}


@pytest.fixture(scope="module")
def arena_cases() -> list[dict[str, Any]]:
    path = REFERENCE
    if not path.is_file():
        pytest.fail(f"upstream's Arena-Hard parser outputs are missing: expected {path} (see judgebench/SOURCE.md)")
    cases = json.loads(path.read_text(encoding="utf-8"))["cases"]
    assert len(cases) == 4240
    return cases


def _accepted(origin: str) -> tuple[str, tuple[Any, bool]] | None:
    for (pair, game), outcome in ARENA_ACCEPTED.items():
        if f"pair_id {pair}" in origin and f"{game}." in origin:
            return outcome
    return None


def test_arena_matches_upstream_get_score(arena_cases: list[dict[str, Any]]) -> None:
    outcomes: Counter[str] = Counter()
    for case in arena_cases:
        text, label, try_again = case["text"], case["label"], case["try_again"]
        ours = parse_bracketed(text, "stop", style="arena_hard")
        what = f"{case['origin']}: {text[-200:]!r}"
        accepted = _accepted(case["origin"])
        if accepted is not None:
            reason, upstream = accepted
            assert (label, try_again) == upstream and ours.reason == reason, what
            outcomes["accepted"] += 1
        elif label in ARENA_VALUE:
            assert ours.ok and ours.detail == label and ours.value == ARENA_VALUE[label], what
            outcomes["known"] += 1
        elif label is not None:  # one bracketed match upstream does not know, such as A<B
            assert ours.reason == "unknown_label", what
            outcomes["other_label"] += 1
        elif try_again:  # upstream found no label (and would ask once more)
            assert ours.reason in ("no_score", "empty"), what
            outcomes["try_again"] += 1
        else:  # several different labels
            assert ours.reason == "conflicting", what
            outcomes["conflict"] += 1
    # upstream's outcomes as the file's header counts them (3,000 generated + 1,240 real texts)
    assert outcomes == {"known": 853 + 1227, "other_label": 165, "try_again": 399, "conflict": 1583 + 12,
                        "accepted": 1}


def test_arena_reference_real_texts_are_the_verdict_files(arena_cases: list[dict[str, Any]]) -> None:
    real = [c for c in arena_cases if c["origin"] != "generated"]
    assert len(real) == 1240 and sum(c["origin"] == "generated" for c in arena_cases) == 3000
    # the texts are the judges' raw outputs of the data folder's verdict files, in file, line and game order
    rows = []
    for path in sorted((DATA / "judgebench" / "outputs").glob("*judge_name=arena_hard*.jsonl")):
        for line in path.open(encoding="utf-8"):
            rows.extend(g["judgment"]["response"] for g in json.loads(line)["judgments"])
    assert sorted(rows) == sorted(c["text"] for c in real)


def test_copied_prompt_text_never_counts() -> None:
    fc_pair = ('After providing your explanation, output your final verdict by strictly following this format: '
               '"[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" for a tie.')
    # the format sentence copied, then the verdict: upstream reads A (the copy), evalign the verdict
    text = fc_pair + "\n\nAssistant B is more accurate. [[B]]"
    assert fastchat_winner(text) == "A" and parse_bracketed(text, "stop", style="mtbench_verdict").value == "B"
    fc_single = 'you must rate the response on a scale of 1 to 10 by strictly following this format: ' \
                '"[[rating]]", for example: "Rating: [[5]]".'
    text = fc_single + "\nRating: [[8]]"
    assert fastchat_rating(text) == 5 and parse_bracketed(text, "stop", style="mtbench_rating").value == 8.0
    # "Rating: [[5]]" written as the answer is a 5 (only the example phrase is masked)
    assert parse_bracketed("Clear and correct.\nRating: [[5]]", "stop", style="mtbench_rating",
                           prompt=fc_single).value == 5.0
    # an output line equal to a whole prompt line is masked
    prompt = "Question\nThe weather answer says [[A]] is right.\nEnd"
    assert parse_bracketed("The weather answer says [[A]] is right.\nSo [[B]]", "stop", style="mtbench_verdict",
                           prompt=prompt).value == "B"
    # Arena-Hard: the list of choices copied is masked, one choice line alone is an answer
    listing = "\n".join(f"{i}. {c}" for i, c in enumerate(ARENA_CHOICES, start=1))
    assert parse_bracketed(listing + "\nMy final verdict is: [[B>A]]", "stop", style="arena_hard",
                           prompt=listing).detail == "B>A"
    assert parse_bracketed("Assistant A is significantly better: [[A>>B]]", "stop", style="arena_hard",
                           prompt=listing).detail == "A>>B"
    assert parse_bracketed("1. Assistant A is significantly better: [[A>>B]]", "stop", style="arena_hard",
                           prompt=listing).reason == "no_score"  # the prompt's line, numbered as there
    example = 'Example output: "My final verdict is tie: [[A=B]]".'
    assert parse_bracketed(example + "\nMy final verdict is: [[A>B]]", "stop", style="arena_hard",
                           prompt=example).detail == "A>B"


@pytest.mark.parametrize(("text", "finish", "style", "reason"), [
    ("Rating: [[8]]", "length", "mtbench_rating", "truncated"),
    ("", "stop", "mtbench_verdict", "empty"),
    ("Rating: [[11]]", "stop", "mtbench_rating", "out_of_range"),
    ("Rating: [[0]]", "stop", "mtbench_rating", "out_of_range"),
    ("[[A<B]]", "stop", "arena_hard", "unknown_label"),
    ("[[A>B]] at first, then [[B>A]]", "stop", "arena_hard", "conflicting"),
])
def test_unscored_reasons(text: str, finish: str, style: str, reason: str) -> None:
    r = parse_bracketed(text, finish, style=style)
    assert not r.ok and r.reason == reason


def test_feedback_and_position() -> None:
    r = parse_bracketed("A is clearer and correct.\n\nMy final verdict is: [[A>>B]]", "stop", style="arena_hard")
    assert (r.value, r.detail, r.feedback) == ("A", "A>>B", "A is clearer and correct.\n\nMy final verdict is:")
    assert r.position == len("A is clearer and correct.\n\nMy final verdict is: ")
