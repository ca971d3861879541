"""The paper's generation prompts (verbatim) and the parsers of the teacher's outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalign.judges.prompts import load_rubric
from evalign.signature import text_hash
from evalign.synth import parsing as P
from evalign.synth import prompts as pr

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "PAPER_PROMPTS.md"
#: SHA-256 of each prompt as extracted from PAPER_PROMPTS.md section 3 (Prometheus, Appendix J)
HASHES = {
    "BRAINSTORM_PROMPT": "bca65bd66fc5c84554407f162fff681a7fc7363e4d73c7bd1f18f522ca38be5a",
    "PARAPHRASE_PROMPT": "5edc2cea20b324fcd24985716a47bfac046d04c3395aff520e6de51b11312a92",
    "INSTRUCTION_PROMPT": "6d2eb56fd0b60f36498495a790380acc4bf6de98ca5a98acaf40e6cf034ce6d8",
    "RESPONSE_PROMPT": "f23fcbe4d1eec8858bdf2f43f25ba199e0b82349cb82f443602abc983b427139",
}
TITLES = ["Prompt for Brainstorming New Score Rubrics", "Prompt for Paraphrasing as a New Score Rubric",
          "Prompt for Generating an Instruction and Reference Answer", "Prompt for Generating Responses and Feedback"]


def test_prompts_are_the_papers_text() -> None:
    for name, h in HASHES.items():
        assert text_hash(getattr(pr, name)) == h, name
    assert "A ‘criteria’ is some useful" in pr.BRAINSTORM_PROMPT  # curly quotes kept
    assert pr.RESPONSE_PROMPT.count("{SCORE}") == 8 and "{SENT NUM} sentences" in pr.RESPONSE_PROMPT
    if REFERENCE.exists():  # the source checkout: compare with the reference text itself
        text = REFERENCE.read_text(encoding="utf-8")
        block = text[text.index("## 3."):]
        block = block[block.index("```text\n") + 8:]
        block = block[: block.index("```")]
        for i, name in enumerate(HASHES):
            start = block.index(TITLES[i]) + len(TITLES[i])
            end = block.index(TITLES[i + 1]) if i + 1 < len(TITLES) else len(block)
            assert getattr(pr, name) == block[start:end].strip("\n")


def test_filled_prompts() -> None:
    rubrics = [load_rubric(n) for n in ("helpfulness", "harmlessness", "honesty", "reasoning")]
    b = pr.brainstorm_prompt(rubrics)
    for i, r in enumerate(rubrics):
        assert f"Criteria {i + 1}:\n\n{pr.rubric_json(r)}\n\nCriteria" in b or f"Criteria {i + 1}:\n\n{pr.rubric_json(r)}\n\nPlease" in b
    assert json.loads(pr.rubric_json(rubrics[0]))["score3_description"] == rubrics[0].descriptions[2]
    with pytest.raises(ValueError):
        pr.brainstorm_prompt(rubrics[:3])
    resp = pr.response_prompt("Sum {SCORE} and 2.", rubrics[0], "First. Second! Third?", 2)
    assert "composed of 3 sentences" in resp and "get a score of 2 and" in resp
    assert "Sum {SCORE} and 2." in resp  # one pass: generated text is never expanded
    assert rubrics[0].render() in pr.instruction_prompt(rubrics[0])


@pytest.mark.parametrize(("text", "n"), [
    ("One. Two! Three? Four.", 4),
    ("Pi is 3.14 here. Done.", 2),
    ("Steps:\n1. mix\n2. bake\n\nEnjoy", 4),
    ("no end mark", 1),
    ("", 0),
])  # fmt: skip
def test_count_sentences(text: str, n: int) -> None:
    assert pr.count_sentences(text) == n


def test_parse_rubric() -> None:
    good = json.dumps({"criteria": "Is it kind?", **{f"score{i}_description": f"level {i}" for i in range(1, 6)}})
    r = P.parse_rubric(f"Here:\n{good}\n[END] trailing {{junk}}")
    assert not isinstance(r, P.Rejected) and r.criteria == "Is it kind?" and r.descriptions[4] == "level 5"
    assert P.parse_rubric(good, "length") == P.Rejected("truncated")
    assert P.parse_rubric("no json here").reason == "no_json"
    assert P.parse_rubric("{criteria: x}").reason == "bad_json"
    assert P.parse_rubric(json.dumps({"criteria": "x", "score1_description": "a"})).reason == "bad_rubric"
    assert P.parse_rubric("   ").reason == "empty"


def test_parse_instruction() -> None:
    r = P.parse_instruction("Problem: Add 2 and 3.\n[NEXT]\n**Response:** It is 5.\n[END]")
    assert r == P.InstructionPair("Add 2 and 3.", "It is 5.")
    assert P.parse_instruction("Problem: x\nResponse: y").reason == "no_next"
    assert P.parse_instruction("x [NEXT] Response: y").reason == "no_problem"
    assert P.parse_instruction("Problem: x [NEXT] y").reason == "no_response"


def test_parse_response_feedback() -> None:
    r = P.parse_response_feedback("Response: 5.\n[NEXT]\nFeedback: Right. So the overall score is 4\n[END]")
    assert r == P.ResponseFeedback("5.", "Right. So the overall score is 4", 4)
    two = P.parse_response_feedback("Response: a [NEXT] Feedback: not 2... So the overall score is 2. So the overall score is 3.")
    assert two.stated_score == 3  # the last statement counts
    assert P.parse_response_feedback("Response: a [NEXT] Feedback: good").reason == "no_score"
    assert P.parse_response_feedback("Response: a [NEXT] Feedback: So the overall score is 7").reason == "no_score"
    assert P.parse_response_feedback("Response: a [NEXT] Feedback: So the overall score is 3.5").reason == "no_score"
    assert P.parse_response_feedback("Response: a [NEXT]").reason == "no_feedback"
