"""Reading the teacher's generations: a rubric (JSON), an instruction with its reference answer, a
response with its feedback. Each parser returns the parsed value or a :class:`Rejected` with a reason;
nothing is repaired or guessed.

Rules common to all steps: output cut off by ``max_tokens`` (``finish_reason == "length"``) is
rejected (``truncated``); the text ends at the first ``[END]`` (the prompts ask for it; a text without
it is still read, so a stop string ``[END]`` works too); pieces are separated by the first ``[NEXT]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from evalign.errors import InputError
from evalign.judges.prompts import Rubric, rubric_from_mapping

#: why a generation was rejected
REASONS = {
    "truncated": "cut off by max_tokens",
    "empty": "no text",
    "no_json": "no JSON object in the text",
    "bad_json": "the JSON object does not parse",
    "bad_rubric": "not a rubric (criteria and score1..score5_description, all non-empty)",
    "no_next": "no [NEXT] separator between the two parts",
    "no_problem": "no 'Problem:' part (or it is empty)",
    "no_response": "no 'Response:' part (or it is empty)",
    "no_feedback": "no 'Feedback:' part (or it is empty)",
    "no_score": "the feedback has no 'So the overall score is k' (k in 1..5)",
}


@dataclass(frozen=True)
class Rejected:
    """A generation that cannot be used: ``reason`` (a key of :data:`REASONS`) and a short ``detail``."""

    reason: str
    detail: str = ""


@dataclass(frozen=True)
class InstructionPair:
    """An instruction (the paper's "problem") and its score-5 reference answer."""

    instruction: str
    reference: str


@dataclass(frozen=True)
class ResponseFeedback:
    """A response, its feedback, and the score the feedback states ("So the overall score is k")."""

    response: str
    feedback: str
    stated_score: int


def _body(text: str, finish_reason: str | None) -> str | Rejected:
    if finish_reason == "length":
        return Rejected("truncated")
    if not text or not text.strip():
        return Rejected("empty")
    end = text.find("[END]")
    return text[:end] if end >= 0 else text


def parse_rubric(text: str, finish_reason: str | None = None, *, name: str = "synth") -> Rubric | Rejected:
    """A rubric from a brainstorming or paraphrasing output (one JSON object)."""
    body = _body(text, finish_reason)
    if isinstance(body, Rejected):
        return body
    start, stop = body.find("{"), body.rfind("}")
    if start < 0 or stop < start:
        return Rejected("no_json")
    try:
        data = json.loads(body[start : stop + 1])
    except json.JSONDecodeError as e:
        return Rejected("bad_json", e.msg)
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in ("name", "version", "source", "description")}
    try:
        return rubric_from_mapping(data, name=name)
    except InputError as e:
        return Rejected("bad_rubric", e.reason)


def _labelled(part: str, label: str) -> str | None:
    """The text after ``label:`` at the start of ``part`` (leading ``*``/``#`` markup allowed)."""
    m = re.match(rf"\s*[#*\s]*{label}\s*[*]*\s*:\s*[*]*", part, flags=re.IGNORECASE)
    if m is None:
        return None
    out = part[m.end() :].strip()
    return out or None


def parse_instruction(text: str, finish_reason: str | None = None) -> InstructionPair | Rejected:
    """``Problem: ... [NEXT] Response: ... [END]`` -> the instruction and its reference answer."""
    body = _body(text, finish_reason)
    if isinstance(body, Rejected):
        return body
    if "[NEXT]" not in body:
        return Rejected("no_next")
    first, second = body.split("[NEXT]", 1)
    problem = _labelled(first, "Problem")
    if problem is None:
        return Rejected("no_problem")
    response = _labelled(second, "Response")
    if response is None:
        return Rejected("no_response")
    return InstructionPair(problem, response)


_SCORE_RE = re.compile(r"So the overall score is\s*\**\s*([1-5])\b(?!\.\d)", flags=re.IGNORECASE)


def parse_response_feedback(text: str, finish_reason: str | None = None) -> ResponseFeedback | Rejected:
    """``Response: ... [NEXT] Feedback: ... So the overall score is k [END]`` -> the response, the
    feedback and k (the last such phrase of the feedback)."""
    body = _body(text, finish_reason)
    if isinstance(body, Rejected):
        return body
    if "[NEXT]" not in body:
        return Rejected("no_next")
    first, second = body.split("[NEXT]", 1)
    response = _labelled(first, "Response")
    if response is None:
        return Rejected("no_response")
    feedback = _labelled(second, "Feedback")
    if feedback is None:
        return Rejected("no_feedback")
    hits = list(_SCORE_RE.finditer(feedback))
    if not hits:
        return Rejected("no_score")
    return ResponseFeedback(response, feedback, int(hits[-1].group(1)))
