"""A scripted in-process teacher: a real :class:`evalign.backends.Backend` whose generations are
well-formed Feedback Collection outputs, with a known, deterministic share of bad ones.

Each generation depends only on the request (prompt and seed), as a model with a fixed seed would, so
cached and fresh runs agree. What it returns, per step (``b``/``s`` = the request seed):

* brainstorm: ``b % 4 == 3`` -> not JSON (unparseable); ``b % 4 == 2`` -> the same rubric as
  ``b - 2`` (a near-duplicate); else a new rubric of random words;
* paraphrase: a rubric of random words seeded by the prompt (identical prompts, identical rubric);
* instruction: ``s % 5 == 4`` -> no ``[NEXT]`` (unparseable); ``s % 5 == 3`` -> the problem of sample
  ``s - 3`` (a near-duplicate); else a new problem;
* response for target k: by a hash of the prompt, 1 in 7 has no feedback (unparseable), 1 in 7 states
  the score ``k % 5 + 1`` (a mismatch), the rest are valid with a response of ``6 + k`` words per sentence.

:attr:`log` records ``(step, outcome)`` for every call made; :attr:`prompts` every prompt asked;
``fail_after=N`` makes call N+1 raise a fatal error (a server that died).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

from evalign.backends import Backend, BackendRequestError, Generation, GenerationRequest, Usage

WORDS = ["apple", "river", "cloud", "stone", "garden", "mirror", "candle", "forest", "engine", "harbor", "violin", "desert", "planet", "ladder", "copper", "signal", "marble", "thunder", "pencil", "window", "bridge", "castle", "falcon", "lantern", "meadow", "ocean", "pepper", "quartz", "rocket", "saddle", "timber", "umbrella", "valley", "wagon", "yarn", "zebra", "anchor", "basket", "cactus", "dragon", "ember", "feather", "glacier", "hammer", "island", "jacket", "kettle", "lemon", "magnet", "needle", "orchard", "parrot", "quiver", "ribbon", "spider", "tunnel", "velvet", "walnut", "oyster", "prism", "comet", "dune", "fjord", "geyser", "hollow", "igloo", "jungle", "kelp", "lagoon"]


def words(seed: Any, n: int) -> str:
    rng = random.Random(str(seed))
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def rubric_text(seed: Any) -> str:
    d = {"criteria": f"Does the response handle {words(seed, 8)}?"}
    for i in range(1, 6):
        d[f"score{i}_description"] = f"Level {i}: {words((seed, i), 8)}."
    return json.dumps(d, indent=4) + "\n[END]"


class ScriptedTeacher(Backend):
    kind = "scripted"

    def __init__(self, fail_after: int | None = None, length_bias: bool = True, feedback_words: int = 6) -> None:
        super().__init__()
        self.feedback_words = feedback_words
        self.concurrency = 4
        self.fail_after = fail_after
        self.length_bias = length_bias
        self.log: list[tuple[str, str]] = []
        self.prompts: list[str] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "scripted-teacher-v1"}

    async def generate(self, req: GenerationRequest) -> Generation:
        if self.fail_after is not None and len(self.prompts) >= self.fail_after:
            raise BackendRequestError("scripted teacher: server gone", fatal=True)
        assert req.messages is not None
        prompt = req.messages[-1]["content"]
        self.prompts.append(prompt)
        seed = int(req.seed or 0)
        step, outcome, text = self.answer(prompt, seed)
        self.log.append((step, outcome))
        self._count(Usage(len(prompt.split()), len(text.split())))
        return Generation.from_choices([_choice(text)], Usage(len(prompt.split()), len(text.split())))

    def answer(self, prompt: str, seed: int) -> tuple[str, str, str]:
        if prompt.startswith("We are brainstorming"):
            b = seed % 100_003
            if b % 4 == 3:
                return "brainstorm", "unparseable", "Here is a new criteria: it is about cooking."
            return "brainstorm", "ok", rubric_text(("b", seed - 2 if b % 4 == 2 else seed))
        if prompt.startswith("Please paraphrase"):
            return "paraphrase", "ok", rubric_text(("p", _h(prompt)))
        if prompt.startswith("Your job is to generate a new novel problem"):
            s = seed % 5
            base = seed - 3 if s == 3 else seed
            problem = f"{words((_h(prompt), base, 'q'), 14)}?"
            reference = " ".join(f"{words((_h(prompt), base, k), 7).capitalize()}." for k in range(4))
            if s == 4:
                return "instruction", "unparseable", f"Problem: {problem}\nResponse: {reference}\n[END]"
            return "instruction", "duplicate" if s == 3 else "ok", f"Problem: {problem}\n[NEXT]\nResponse: {reference}\n[END]"
        m = re.match(r"Your job is to generate a response that would get a score of ([1-5])", prompt)
        if m:
            k = int(m.group(1))
            sent = int(re.search(r"composed of (\d+) sentences", prompt).group(1))
            per = 6 + k if self.length_bias else 8
            response = " ".join(f"{words((_h(prompt), j), per).capitalize()}." for j in range(sent))
            kind = _h(prompt) % 7
            if kind == 0:
                return "response", "unparseable", f"Response: {response}\n[END]"
            stated = k % 5 + 1 if kind == 1 else k
            topic = f" {words((_h(prompt), 'f'), self.feedback_words)}" if self.feedback_words else ""
            feedback = f"The response covers{topic}. So the overall score is {stated}"
            return ("response", "mismatch" if kind == 1 else "ok",
                    f"Response: {response}\n[NEXT]\nFeedback: {feedback}\n[END]")
        return "other", "unparseable", "?"


def _choice(text: str) -> Any:
    from evalign.backends import Choice

    return Choice(text=text, finish_reason="stop")
