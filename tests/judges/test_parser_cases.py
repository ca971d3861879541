"""Parser cases: issue cases, prometheus-eval's own parser test table (where upstream is right), the
echo masking independent of the tail window, and the property that no part of a rendered built-in
prompt is ever scored."""

from __future__ import annotations

import pytest

from evalign.judges import get_judge, list_rubrics, list_templates, load_template, parse_grade
from evalign.judges.grading import prompt_text
from evalign.judges.parsing import TAIL_CHARS

# prometheus-eval libs/prometheus-eval/tests/test_parser.py (commit dcfb442): (output, mode, expected)
UPSTREAM_CASES = [
    ("Reference (Score 5) two results [RESULT] 3", "absolute", 3),
    ("Reference (Score 5) not results", "absolute", None),
    ("Excellent. [RESULT] 5 out of 5", "absolute", 5),
    ("Poor performance. [RESULT] score of 1", "absolute", 1),
    ("Good job. [Result] 3", "absolute", 3),
    ("Needs improvement. [Result] Score: 2", "absolute", 2),
    ("Well done. [Result] Result: 4", "absolute", 4),
    ("Average. [Result] 4/5", "absolute", 4),
    ("Excellent. [Result] 5 out of 5", "absolute", 5),
    ("Poor performance. [Result] score of 1", "absolute", 1),
    ("Good job. [Score 4]", "absolute", 4),
    ("Good job. score: 3", "absolute", 3),
    ("Good job. Score: 3", "absolute", 3),
    ("Good job. score of 1", "absolute", 1),
    ("Good job. [RESULT] (5)", "absolute", 5),
    ("The score is definitely not 3.", "absolute", None),
    ("I rate this a perfect 10!", "absolute", None),
    ("Score: 2.5", "absolute", None),
    ("Result: A", "absolute", None),
    ("[Response B is not better. [RESULT] A", "relative", "A"),
    ("Result A or B, not results", "relative", None),
    ("Response A is better. [RESULT] A", "relative", "A"),
    ("Prefer Response B. [RESULT] B", "relative", "B"),
    ("Feedback: Both responses are similar... [Response B]", "relative", "B"),
    ("Feedback: Both responses are clear... [Result] Response B", "relative", "B"),
    ("Feedback: Both responses are clear... Response B Response A", "relative", None),
    ("Feedback: Both responses are clear... [RESULT: B]", "relative", "B"),
    ("Feedback: Both responses are clear... [Result: B]", "relative", "B"),
    ("Feedback: Both responses are clear...Response A. [RESULT] B", "relative", "B"),
    ("After careful consideration, I select Response B.", "relative", None),
    ("Both responses have their merits.", "relative", None),
    ("Response C is clearly superior.", "relative", None),
    ("The better response is obviously B... or is it A? It's hard to decide.", "relative", None),
]
# Where upstream is not right, with why: upstream reads "Good job. (Score 5)" as 5, but "(Score 5)" is the
# phrase of the absolute prompt ("###Reference Answer (Score 5):"), which an echoing judge copies.
UPSTREAM_DISAGREE = [("Good job. (Score 5)", "absolute", 5, None)]


def value(text: str, mode: str, **kw: object) -> object:
    r = parse_grade(text, mode, **kw)  # type: ignore[arg-type]
    if isinstance(r.value, float):
        return int(r.value)
    return r.value


@pytest.mark.parametrize(("text", "mode", "expected"), UPSTREAM_CASES)
def test_prometheus_eval_parser_cases(text: str, mode: str, expected: object) -> None:
    assert value(text, mode) == expected


@pytest.mark.parametrize(("text", "mode", "upstream", "ours"), UPSTREAM_DISAGREE)
def test_where_upstream_is_not_right(text: str, mode: str, upstream: object, ours: object) -> None:
    assert value(text, mode) == ours != upstream


@pytest.mark.parametrize(
    ("text", "mode", "expected"),
    [
        ("Fine. [RESULT] Score: 2", "absolute", 2),
        ("Fine. [RESULT] Result: 4", "absolute", 4),
        ("Fine. [RESULT] score of 1", "absolute", 1),
        ("Fine. [RESULT] (1-5)", "absolute", None),
        ("Fine. [RESULT] 1-5", "absolute", None),
        ("Fine. Score: 1 to 5", "absolute", None),
        ("Fine. [RESULT] 1 \u2013 5", "absolute", None),
        ("[Response B]", "relative", "B"),
        ("Only a marker [Response A]", "relative", "A"),
    ],
)
def test_issue_cases(text: str, mode: str, expected: object) -> None:
    assert value(text, mode) == expected


def test_echo_straddling_the_tail_window_is_not_scored() -> None:
    """An echoed task line cut by the tail window inside "a score of 5" is never read as 5
    (masking is done on the whole output, before the window is taken)."""
    line = load_template("prometheus_absolute").text(True).split("\n")[1]
    start = line.index("a score of 5")
    for cut in range(start, start + len("a score of 5")):
        filler_len = TAIL_CHARS - (len(line) - cut)
        assert filler_len > 0
        text = line + "\n" + ("word " * 200)[: filler_len - 1]
        assert len(text) - TAIL_CHARS == cut
        r = parse_grade(text, "absolute")
        assert not r.ok, (cut, r)


# --- property: no part of any rendered built-in prompt is ever scored ----------------------------------

ROW = {
    "instruction": "Describe the water cycle.", "input": "Keep it short.", "system": "s",
    "response": "Water evaporates, forms clouds and falls as rain.",
    "reference": "Water moves between the sea, the air and the land.",
    "response_a": "Water evaporates and falls again.", "response_b": "Rain comes from clouds made of vapour.",
}  # fmt: skip
MODE_JUDGE = {"absolute": "absolute", "relative": "pairwise", "geval": "geval", "criteria": "criteria", "llmbar": "pairwise",
              "mtbench_single": "mtbench_single", "mtbench_pair": "mtbench_pair", "arena_hard": "arena_hard",
              "simulated_annotators": "simulated_annotators"}
#: the row of a multi-turn template (its second turn graded; one reference per turn)
_TURNS = [{"role": "user", "content": "Describe the water cycle."}, {"role": "assistant", "content": "It cycles."},
          {"role": "user", "content": "Keep it short."}]
ROW_TURNS = {
    **ROW, "instruction": "Keep it short.", "input": "", "turn": 2, "reference": [ROW["reference"], "Sea, air, land."],
    "messages": [*_TURNS, {"role": "assistant", "content": ROW["response"]}],
    "messages_a": [*_TURNS, {"role": "assistant", "content": ROW["response_a"]}],
    "messages_b": [*_TURNS, {"role": "assistant", "content": ROW["response_b"]}],
}  # fmt: skip
#: modes whose prompts spell out the answer (LLMBar's "Therefore, Output (a) is better.", MT-Bench's "[[A]]")
SPELLED_OUT = ("llmbar", "mtbench_single", "mtbench_pair", "arena_hard", "simulated_annotators")


def _cases() -> list[tuple[str, bool, str | None]]:
    out = []
    for name in list_templates():
        t = load_template(name)
        refs = [True] if t.needs_reference else [True, False] if t.has_reference else [False]
        uses_rubric = "{rubric}" in (t.without_reference or t.with_reference or "")
        for ref in refs:
            for rubric in list_rubrics() if uses_rubric else [None]:
                out.append((name, ref, rubric))
    return out


def _windows(text: str, chars: bool) -> set[str]:
    """Every line window; with ``chars`` also every prefix and suffix."""
    wins = {text[:k] for k in range(1, len(text) + 1)} | {text[k:] for k in range(len(text))} if chars else set()
    lines = text.split("\n")
    for i in range(len(lines)):
        for j in range(i + 1, len(lines) + 1):
            wins.add("\n".join(lines[i:j]))
    return {w for w in wins if w.strip()}


@pytest.mark.parametrize(("name", "reference", "rubric"), _cases())
def test_no_window_of_a_rendered_prompt_is_scored(name: str, reference: bool, rubric: str | None) -> None:
    """Every line window of each rendered prompt; every prefix and suffix too for one rubric per
    template (the rubrics differ only in their lines, which the line windows cover)."""
    t = load_template(name)
    opts: dict[str, object] = {"template": name, "reference": reference}
    if rubric is not None:
        opts["rubric"] = rubric
    if name.endswith("_tie"):
        opts["tie"] = True
    if "{criteria}" in t.text(reference):  # several criteria in one call (criteria_rubrics)
        opts["criteria"] = ["helpfulness", "honesty"]
    judge = get_judge(MODE_JUDGE[t.mode], **opts)
    row = ROW_TURNS if "{question_2}" in t.text(reference) else ROW
    row = {k: v for k, v in row.items() if not (k == "messages" and judge.pairwise)}
    if t.mode in ("mtbench_single", "mtbench_pair"):  # a family: make sure the variant named is the one shown
        assert judge.family.choose(row, reference, False, True)[0].name == name
    for _, messages in judge.prompts(row, judge.rubric, reference):
        prompt = prompt_text(messages)
        # a few-shot template's example answers (its assistant turns) are answers by design: the windows
        # are those of the rest of the prompt (the parser is still given all of it)
        asked = prompt_text([m for m in messages if m["role"] != "assistant"])
        assert len(asked) < len(prompt) if t.shots else asked == prompt
        scored = []
        # LLMBar's prompts spell out the answer itself ('"Therefore, Output (a) is better."'), so a piece of
        # one line cut out of the prompt can be a true answer: line windows only for them
        chars = rubric in (None, "helpfulness") and t.mode not in SPELLED_OUT
        for w in _windows(asked, chars=chars):
            r = judge.parse({"choices": [{"text": w, "finish_reason": "stop"}]}, prompt)
            if r.ok:
                scored.append((w[:60], w[-60:], r.value))
        assert not scored, scored[:3]
