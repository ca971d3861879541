"""Scripted judges with known behaviour for the bench tests: backends registered under a name, so a
bench spec ``NAME=scripted-first:x`` runs them like any other backend.

* ``scripted-first``: always picks the response shown first (``Output (a)`` / ``[RESULT] A``) and grades
  every response 3;
* ``scripted-longer``: picks the longer response (characters) and grades a response by its length
  (1 + its length // 60, at most 5);
* ``scripted-flaky``: answers like ``scripted-longer`` until :attr:`Flaky.budget` calls were made, then
  fails as a server that went away (a fatal error: the bench stops, what was answered is cached).

Each counts the requests it answered (:attr:`calls`, shared by every instance of the class).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, ClassVar

from evalign.backends import Backend, BackendRequestError, Choice, Generation, GenerationRequest, Usage
from evalign.backends.registry import BACKENDS

_LLMBAR = re.compile(r"# Output \(a\):\n(.*)\n\n# Output \(b\):\n(.*)\n\n# Which is better", re.S)
_PROMETHEUS = re.compile(r"###Response A:\n(.*)\n\n###Response B:\n(.*)\n\n###(?:Reference Answer|Score Rubric)", re.S)
_ABSOLUTE = re.compile(r"###Response to evaluate:\n(.*)\n\n###(?:Reference Answer|Score Rubrics)", re.S)


def grade_of(text: str) -> int:
    """The grade ``scripted-longer`` gives a response."""
    return min(5, 1 + len(text) // 60)


class _Scripted(Backend):
    kind: ClassVar[str] = ""
    calls: ClassVar[list[GenerationRequest]] = []

    def __init__(self, model: str = "x", **_: Any) -> None:
        super().__init__()
        self.model = model

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model}

    def pick(self, a: str, b: str) -> str:
        raise NotImplementedError

    def grade(self, text: str) -> int:
        raise NotImplementedError

    async def generate(self, req: GenerationRequest) -> Generation:
        type(self).calls.append(req)
        prompt = "\n".join(m["content"] for m in req.messages)
        if m := _LLMBAR.search(prompt):
            text = f"Output ({self.pick(m.group(1), m.group(2)).lower()})"
        elif m := _PROMETHEUS.search(prompt):
            text = f"Feedback: scripted. [RESULT] {self.pick(m.group(1), m.group(2))}"
        elif m := _ABSOLUTE.search(prompt):
            text = f"Feedback: scripted. [RESULT] {self.grade(m.group(1))}"
        else:
            raise AssertionError(f"scripted judge: prompt not recognised: {prompt[:200]!r}")
        return Generation.from_choices([Choice(text, "stop")], Usage(len(prompt) // 4, 4))


class AlwaysFirst(_Scripted):
    kind = "scripted-first"
    calls: ClassVar[list[GenerationRequest]] = []

    def pick(self, a: str, b: str) -> str:
        return "A"

    def grade(self, text: str) -> int:
        return 3


class PrefersLonger(_Scripted):
    kind = "scripted-longer"
    calls: ClassVar[list[GenerationRequest]] = []

    def pick(self, a: str, b: str) -> str:
        return "A" if len(a) >= len(b) else "B"

    def grade(self, text: str) -> int:
        return grade_of(text)


class Flaky(PrefersLonger):
    kind = "scripted-flaky"
    calls: ClassVar[list[GenerationRequest]] = []
    budget: ClassVar[int] = 10**9

    async def generate(self, req: GenerationRequest) -> Generation:
        if len(type(self).calls) >= type(self).budget:
            raise BackendRequestError("scripted: the server went away", fatal=True)
        return await super().generate(req)


SCRIPTED = (AlwaysFirst, PrefersLonger, Flaky)


@contextlib.contextmanager
def registered() -> Iterator[None]:
    """The scripted backends in the backend registry for the duration (removed after, so the other
    tests see the built-in registry only)."""
    added = [c.kind for c in SCRIPTED if c.kind not in BACKENDS]
    for c in SCRIPTED:
        if c.kind in added:
            BACKENDS.add(c.kind, c)
    try:
        yield
    finally:
        for kind in added:
            BACKENDS._entries.pop(kind, None)
