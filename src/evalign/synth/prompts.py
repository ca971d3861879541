"""The four Feedback Collection generation prompts of Prometheus (Kim et al. 2023, Appendix J), verbatim,
and the functions that fill them.

The texts are copied character for character from the paper (``‘criteria’`` keeps its curly quotes);
placeholders are the paper's own (``{JSON LIST 1}`` .. ``{JSON LIST 4}``, ``{CRITERIA}``,
``{INSTRUCTION}``, ``{REFERENCE}``, ``{SCORE}``, ``{SENT NUM}``) and are replaced in one pass, so a
generated text that contains a placeholder is never expanded again.

How a rubric is written into a prompt (the paper does not fix it):

* brainstorming and paraphrasing ask for "the same format as the above examples" / "the dictionary":
  the rubric is a JSON object ``{"criteria": ..., "score1_description": ..., ..., "score5_description": ...}``
  (the published Feedback Collection's keys; :func:`rubric_json`);
* instruction and response generation show the rubric as the judge prompt does
  (:meth:`evalign.judges.prompts.Rubric.render`: ``[criteria]`` then ``Score n: ...`` lines).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from evalign.judges.prompts import Rubric

BRAINSTORM_PROMPT = """\
We are brainstorming criteria with which to grade a language model on its responses in diverse situations.

A ‘criteria’ is some useful, real-world objective, and associated rubric for scores 1-5, that tests a capability.

Here you will see 4 examples of ‘criteria’, and their scoring rubrics, formatted as JSON.

Criteria 1:

{JSON LIST 1}

Criteria 2:

{JSON LIST 2}

Criteria 3:

{JSON LIST 3}

Criteria 4:

{JSON LIST 4}

Please brainstorm a new criteria and scoring rubrics.

Be creative and create new but useful criteria that people in different settings or industries might find practical.

Please format the output as same as the above examples with no extra or surrounding text. Write [END] after you are done.

New Criteria:"""

PARAPHRASE_PROMPT = """\
Please paraphrase the sentences inside the dictionary below.

Each paraphrase should not change the meaning or substance of the original sentence, be naturally written, but sufficiently diverse from one another.

Diversity can come from differences in diction, phrasing, sentence structure, formality, detail, and/or other stylistic changes.

The dictionary:

{CRITERIA}

Respond with only dictionary (same format as the given dictionary) with no extra or surrounding text.

Write [END] after you are done.

Dictionary with Paraphrased Sentences:"""

INSTRUCTION_PROMPT = """\
Your job is to generate a new novel problem and a response that is related to the given score rubric.

The score rubric:
{CRITERIA}

* Problem

- The problem should inherently be related to the score criteria and score rubric given above. Specifically, the score criteria should be the core attributes required to solve the problem.
- The problem itself should not be too generic or easy to solve.
- If the score rubric is related to logical abilities, generate problems that require math or coding abilities.
- Try to make the person who might solve the problem not notice the existence of the score rubric by not explicitly mentioning it, and also provide additional inputs and options if needed.
- Assume a situation where a user is interacting with an AI model. The user would try to ask in a first-person point of view, but not using terms like "I", "A User" or "You" in the first sentence.
- Do not give a role to the AI, assume that the user is asking a question from his point of view.
- Do not include any phrase related to AI model in the problem.

* Response

- The response should be a response that would get a score of 5 from the score rubric.
- The response should be as detailed as possible unless the score rubric is related to conciseness or brevity. It should consist of multiple paragraphs, a list of items, or a step-by-step reasoning process.
- The response should look like how a well-prompted GPT-4 would normally answer your problem.

* Format

- DO NOT WRITE ANY GREETING MESSAGES, just write the problem and response only.
- In front of the problem, append the phrase "Problem:" and in front of the response, append the phrase "Response:".
- Write in the order of "Problem" - "Response", where the two items are separated by the phrase "[NEXT]".
- Write [END] after you are done.

Data Generation:"""

RESPONSE_PROMPT = """\
Your job is to generate a response that would get a score of {SCORE} and corresponding feedback based on the given score rubric. For reference, a reference response that would get a score of 5 is also given.

Instruction:
{INSTRUCTION}

The score rubric:
{CRITERIA}

Reference response (Score 5):
{REFERENCE}

* Response

- The quality of the score {SCORE} response should be determined based on the score rubric, not by its length.
- The score {SCORE} response should have the same length as the reference response, composed of {SENT NUM} sentences.
- Do not explicitly state the keywords of the score rubric inside the response.

* Feedback

- The score {SCORE} feedback should each be an explanation of why the response would get a score of {SCORE}. It should be written based on the generated response and score rubric.
- The score {SCORE} feedback shouldn't just copy and paste the score rubric, but it should also give very detailed feedback on the content of the corresponding response.
- The score {SCORE} feedback should include the phrase "So the overall score is {SCORE}" in the last sentence.

* Format

- DO NOT WRITE ANY GREETING MESSAGES, just write the problem and response only.
- In front of the response, append the phrase "Response:" and in front of the feedback, append the phrase "Feedback:".
- Write in the order of "Response" - "Feedback", where the two items are separated by the phrase "[NEXT]".
- Write [END] after you are done.

Data Generation:"""

#: how many seed rubrics a brainstorming prompt shows
N_EXAMPLES = 4
_PLACEHOLDER_RE = re.compile(r"\{(JSON LIST [1-4]|CRITERIA|INSTRUCTION|REFERENCE|SCORE|SENT NUM)\}")


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace each ``{PLACEHOLDER}`` of a paper prompt by ``values[PLACEHOLDER]`` in one pass."""

    def sub(m: re.Match[str]) -> str:
        return str(values[m.group(1)])

    return _PLACEHOLDER_RE.sub(sub, text)


def rubric_json(rubric: Rubric) -> str:
    """The rubric as the JSON object the brainstorming and paraphrasing prompts show (indent 4)."""
    d = {"criteria": rubric.criteria}
    d.update({f"score{i + 1}_description": t for i, t in enumerate(rubric.descriptions)})
    return json.dumps(d, ensure_ascii=False, indent=4)


def brainstorm_prompt(examples: Sequence[Rubric]) -> str:
    """The brainstorming prompt with exactly four example rubrics."""
    if len(examples) != N_EXAMPLES:
        raise ValueError(f"the brainstorming prompt shows {N_EXAMPLES} rubrics, got {len(examples)}")
    return fill(BRAINSTORM_PROMPT, {f"JSON LIST {i + 1}": rubric_json(r) for i, r in enumerate(examples)})


def paraphrase_prompt(rubric: Rubric) -> str:
    """The paraphrasing prompt for one rubric."""
    return fill(PARAPHRASE_PROMPT, {"CRITERIA": rubric_json(rubric)})


def instruction_prompt(rubric: Rubric) -> str:
    """The prompt asking for an instruction and a score-5 reference answer under ``rubric``."""
    return fill(INSTRUCTION_PROMPT, {"CRITERIA": rubric.render()})


def response_prompt(instruction: str, rubric: Rubric, reference: str, score: int) -> str:
    """The prompt asking for a response of score ``score`` (1-5) and its feedback; ``{SENT NUM}`` is the
    number of sentences of ``reference`` (:func:`count_sentences`)."""
    if score not in range(1, 6):
        raise ValueError(f"score must be 1..5, got {score}")
    return fill(RESPONSE_PROMPT, {
        "INSTRUCTION": instruction,
        "CRITERIA": rubric.render(),
        "REFERENCE": reference,
        "SCORE": str(score),
        "SENT NUM": str(count_sentences(reference)),
    })


_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def count_sentences(text: str) -> int:
    """Number of sentences of ``text``: each non-empty line (after a list marker ``-``, ``*``, ``•``,
    ``1.`` or ``1)``) is split after ``.``, ``!`` or ``?`` followed by white space, and every non-empty
    piece counts. A rule-based splitter (no model download); 0 for empty text."""
    n = 0
    for line in text.splitlines():
        line = _LIST_MARK.sub("", line).strip()
        if line:
            n += sum(1 for p in _SENTENCE_SPLIT.split(line) if p.strip(" \t\"')]"))
    return n
