"""The judge-output parser: a table of real-looking judge outputs and what each must give.

In the spirit of prometheus-eval's ``tests/test_parser.py``, but every row that is ambiguous,
cut off, off the scale or a copy of the prompt must come out *unscored with a reason*.
"""

from __future__ import annotations

import pytest

from evalign.judges import REASONS, parse_grade
from evalign.judges.grading import parse_geval
from evalign.judges.parsing import TAIL_CHARS, last_json_object

LONG_FEEDBACK = (
    "The response addresses the user's question about the history of the printing press, but it "
    "confuses Gutenberg's movable type with earlier woodblock printing and never mentions the "
    "economic consequences the instruction asked for. The structure is clear and the tone is "
    "appropriate, yet the factual slip is significant under this rubric. "
)

# (output, finish_reason, expected score or None, expected reason or None)
ABSOLUTE_TABLE = [
    # --- the exact format -------------------------------------------------------------------
    ("Feedback: The response is accurate and complete. [RESULT] 5", None, 5, None),
    ("The response is accurate and complete. [RESULT] 4", "stop", 4, None),
    (LONG_FEEDBACK + "[RESULT] 2", None, 2, None),
    ("Feedback: Clear but shallow.\n[RESULT] 3\n", None, 3, None),
    ("Feedback: Clear but shallow. [RESULT] 3</s>", None, 3, None),
    ("Feedback: Good. [RESULT] 1.", None, 1, None),
    # --- usual variants ----------------------------------------------------------------------
    ("The answer covers every point. [SCORE 5]", None, 5, None),
    ("The answer covers every point. [SCORE] 4", None, 4, None),
    ("Mostly correct, one omission.\nScore: 4 out of 5", None, 4, None),
    ("It follows the rubric's level 3 description. So the overall score is 3", None, 3, None),
    ("Some errors remain. The final score is 4 out of 5.", None, 4, None),
    ("Some errors remain. [RESULT]: 4", None, 4, None),
    ("Some errors remain. [RESULT] (4)", None, 4, None),
    ("Some errors remain. [RESULT 2]", None, 2, None),
    ("Some errors remain. Score: 2/5", None, 2, None),
    ("Helpful and correct. Rating: [[5]]", None, 5, None),
    ("Helpful and correct. [RESULT] 4/5", None, 4, None),
    # --- the prompt's own text copied back: never a score ------------------------------------
    (
        'Feedback: (write a feedback for criteria) [RESULT] (an integer number between 1 and 5)',
        None, None, "no_score",
    ),
    (
        "The response is fine. [RESULT] 4\n\n3. The output format should look as follows: "
        '"(write a feedback for criteria) [RESULT] (an integer number between 1 and 5)"',
        None, None, "no_score",
    ),
    (
        "###Score Rubrics:\n[Is the response helpful?]\nScore 1: The response is unhelpful.\n"
        "Score 5: The response is extremely helpful.",
        None, None, "no_score",
    ),
    ("An instruction, a response, a reference answer that gets a score of 5, and a rubric.", None, None, "no_score"),
    ("write a score that is an integer between 1 and 5. You should refer to the score rubric.", None, None,
     "no_score"),
    # --- cut off / empty / gibberish ----------------------------------------------------------
    ("Feedback: The response is accurate. [RESULT] 4", "length", None, "truncated"),
    ("Feedback: The response is accurate and the reasoning is sound, but the second half of", "length", None,
     "truncated"),
    ("", None, None, "empty"),
    ("   \n ", "stop", None, "empty"),
    ("2n FeedbackQ Gc tiep s ]] ]]MzW/ Feedbackol Feedback q ?X/ FeedbackO", "stop", None, "no_score"),
    # --- a score that is not the final word --------------------------------------------------
    ("[RESULT] 4\n" + "The response could be improved in many ways. " * 8, None, None, "no_score"),
    # --- off the scale, fractions, other scales ----------------------------------------------
    ("The response is excellent. [RESULT] 6", None, None, "out_of_range"),
    ("The response is useless. [RESULT] 0", None, None, "out_of_range"),
    ("Strong answer overall. Score: 8/10", None, None, "wrong_scale"),
    ("Between a 3 and a 4. [RESULT] 3.5", None, None, "not_integer"),
    # --- several different final scores ------------------------------------------------------
    ("Feedback: fine. [RESULT] 3 ... on reflection [RESULT] 4", None, None, "conflicting"),
    ("It might deserve Score: 2 but I would say the score is 4", None, None, "conflicting"),
    # --- the same score twice is not a conflict ----------------------------------------------
    ("Score: 4. Therefore the final score is 4", None, 4, None),
]


@pytest.mark.parametrize(("text", "finish", "score", "reason"), ABSOLUTE_TABLE)
def test_absolute_table(text: str, finish: str | None, score: int | None, reason: str | None) -> None:
    r = parse_grade(text, "absolute", finish)
    assert r.reason == reason, (text, r)
    if score is None:
        assert r.value is None and r.score is None and not r.ok
        assert r.reason in REASONS and r.detail
    else:
        assert r.ok and r.score == float(score)


RELATIVE_TABLE = [
    ("Response A is more accurate and complete. [RESULT] A", None, True, "A", None),
    ("Response B follows the instruction better. [RESULT] B", None, True, "B", None),
    ("Both are good, B slightly better.\n[RESULT] Response B", None, True, "B", None),
    ("B is better. [RESULT]: B", None, True, "B", None),
    ("B is better. [RESULT] (B)", None, True, "B", None),
    ("Both responses are equally good. [RESULT] TIE", None, True, "tie", None),
    ("Both responses are equally good. [RESULT] TIE", None, False, None, "tie_not_allowed"),
    ("My final verdict is: [[A]]", None, True, "A", None),
    ("My final verdict is: [[C]]", None, True, "tie", None),
    ('(write a feedback for criteria) [RESULT] (A or B)', None, True, None, "no_score"),
    ("A is accurate. [RESULT] A", "length", True, None, "truncated"),
    ("[RESULT] A\nWait, actually [RESULT] B", None, True, None, "conflicting"),
    ("Response A is better than Response B in accuracy.", None, True, "A", None),
    ("[RESULT] a tie between them", None, True, None, "no_score"),
    ("gibberish tie Assistant ]] good", None, True, None, "no_score"),
]


@pytest.mark.parametrize(("text", "finish", "tie", "verdict", "reason"), RELATIVE_TABLE)
def test_relative_table(text: str, finish: str | None, tie: bool, verdict: str | None, reason: str | None) -> None:
    r = parse_grade(text, "relative", finish, allow_tie=tie)
    assert r.reason == reason, (text, r)
    assert r.verdict == verdict


GEVAL_TABLE = [
    ("2", None, 2, None),
    ("- Overall quality: 3", None, 3, None),
    ("1\n\nThe response is valid and satisfying.", None, 1, None),
    ("4.", None, 4, None),
    ("5", None, None, "out_of_range"),
    ("2.5", None, None, "not_integer"),
    ("1 - The response is valid and satisfying.", None, None, "no_score"),
    ("The response has minor imperfections. Overall quality: 2", None, 2, None),
    ("3", "length", None, "truncated"),
    ("", None, None, "empty"),
]


@pytest.mark.parametrize(("text", "finish", "score", "reason"), GEVAL_TABLE)
def test_geval_table(text: str, finish: str | None, score: int | None, reason: str | None) -> None:
    r = parse_geval(text, finish)
    assert r.reason == reason, (text, r)
    assert r.score == (None if score is None else float(score))


CRITERIA_TABLE = [
    ('The response is fluent.\n{"reasoning": "fluent, on topic, one error", "naturalness": 3, "relatedness": 3, '
     '"correctness": 2}', None, 8 / 3, None),
    ('```json\n{"reasoning": "ok", "naturalness": 1, "relatedness": 2, "correctness": 3}\n```', None, 2.0, None),
    # the last object wins; the format example copied from the prompt is not JSON
    ('{"reasoning": "<your reasoning>", "naturalness": <rating>}\n{"reasoning": "x", "naturalness": 2, '
     '"relatedness": 2, "correctness": 2}', None, 2.0, None),
    ('{"naturalness": 3, "relatedness": 2}', None, None, "missing_field"),
    ('{"naturalness": 3, "relatedness": 2, "correctness": 4}', None, None, "invalid_value"),
    ('{"naturalness": "3", "relatedness": 2, "correctness": 2}', None, None, "invalid_value"),
    ('{"naturalness": true, "relatedness": 2, "correctness": 2}', None, None, "invalid_value"),
    ('{"reasoning": "<your reasoning>", "naturalness": <rating>, "relatedness": <rating>}', None, None,
     "invalid_json"),
    ('{"reasoning": "good", "naturalness": 3, "relatedness": 3, "correctness": 3}', "length", None, "truncated"),
    ('{"naturalness": 3, "relatedness": 3, "correctness": 3}' + " and more text" * 30, None, None, "invalid_json"),
]


@pytest.mark.parametrize(("text", "finish", "score", "reason"), CRITERIA_TABLE)
def test_criteria_table(text: str, finish: str | None, score: float | None, reason: str | None) -> None:
    r = parse_grade(text, "criteria", finish)
    assert r.reason == reason, (text, r)
    if score is None:
        assert r.value is None
    else:
        assert r.score == pytest.approx(score)
        assert set(r.ratings) == {"naturalness", "relatedness", "correctness"}


def test_table_is_large_enough() -> None:
    assert len(ABSOLUTE_TABLE) + len(RELATIVE_TABLE) + len(GEVAL_TABLE) + len(CRITERIA_TABLE) >= 25


def test_feedback_is_the_text_before_the_grade() -> None:
    r = parse_grade("Feedback: Accurate, but it misses the date. [RESULT] 4", "absolute")
    assert r.feedback == "Accurate, but it misses the date."
    assert r.position == len("Feedback: Accurate, but it misses the date. [RESULT] ")


def test_only_the_tail_is_searched() -> None:
    head = "[RESULT] 5 "
    filler = "x" * (TAIL_CHARS + 50)
    assert parse_grade(head + filler, "absolute").reason == "no_score"
    assert parse_grade(filler + " [RESULT] 5", "absolute").score == 5.0


def test_last_json_object_outermost() -> None:
    obj, start, end = last_json_object('pre {"a": {"b": 1}, "c": 2} post')  # type: ignore[misc]
    assert obj == {"a": {"b": 1}, "c": 2}
    assert (start, end) == (4, 27)
    assert last_json_object("no json here") is None


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        parse_grade("x", "pointwise")
