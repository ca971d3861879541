"""Reward-model judges: a reward model (``--backend reward``) scores each response on its own, and the
judge reads the scores instead of parsing text.

* ``reward`` (item tables; ``--mode absolute --backend reward``): ``J`` is the raw reward of the
  response (a logit: higher is better, no fixed scale).
* ``reward_pairwise`` (pair tables; ``--mode pairwise --backend reward``): A and B are scored apart;
  ``J.score_a`` / ``J.score_b`` are the rewards, ``J.margin = score_a - score_b``, ``J.p_a`` =
  sigmoid(margin), the Bradley-Terry probability that A is better (the model's own reading when it
  was trained with the Bradley-Terry loss); ``J`` is ``A`` when the margin is above ``tie_margin``,
  ``B`` when below ``-tie_margin``, else ``tie``; ``J.code`` +1 / -1 / 0. A reward model sees one
  response at a time, so it has no position to prefer: there is no second order.

What the reward model reads is the conversation: the instruction (and the input, after a blank line)
as the user turn through the judge's template (default: the instruction as it is), the response as
the assistant turn; a row with ``messages`` (``messages_a`` / ``messages_b`` for pairs: JSON arrays
of ``{role, content}`` ending with the graded assistant turn) is scored as that whole conversation.
A response's score is cached per (model, conversation): the same response in several pairs, or
graded by the item and the pair judge, is scored once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from evalign.errors import EvalignError, InputError
from evalign.judges.base import VERDICT_CODE, Judge, is_missing, join_instruction, register_judge
from evalign.judges.parsing import ParseResult, unscored
from evalign.judges.prompts import Message, Rubric, Template

#: the default template: the instruction (and input) as the user turn, nothing added
REWARD_TEMPLATE = Template(name="reward", version=1, mode="reward", source="evalign (the instruction as it is)",
                           system="", format_hint="", with_reference=None, without_reference="{instruction}")


def sigmoid(x: float) -> float:
    """The logistic function, without overflow for large ``|x|``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _messages(value: Any, field: str) -> list[Message] | None:
    """A conversation cell (a list of ``{role, content}`` or its JSON text), or None when empty."""
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise InputError(f"not a JSON list of messages ({e})", field=field) from e
    if not isinstance(value, list | tuple) or not value or not all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in value):
        raise InputError("must be a non-empty list of {role, content} messages", field=field)
    msgs = [{"role": str(m["role"]), "content": str(m["content"])} for m in value]
    if msgs[-1]["role"] != "assistant":
        raise InputError("must end with the graded assistant turn", field=field)
    return msgs


class _RewardBase(Judge):
    """What both reward judges share: no sampling, no rubric, no reference; the score read from the
    backend's ``raw["score"]``."""

    sampling_defaults: ClassVar[dict[str, Any]] = {}
    default_template = "reward"
    #: the response is the conversation's assistant turn, never a placeholder of the prompt
    response_placeholders: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, template: str | Template | None = None, column: str | None = None, samples: int = 1,
                 reask: int = 0, reference: bool | None = None, constrain: str | None = None, **rest: Any) -> None:
        bad = [k for k, v in rest.items() if v is not None] + ["constrain"] * (constrain == "on")
        bad += ["samples"] * (samples != 1) + ["reask"] * bool(reask) + ["reference"] * bool(reference)
        if bad:
            raise EvalignError(f"judge '{self.name}' reads a reward model's score: {', '.join(sorted(bad))} "
                               "do not apply (no sampling, rubric, reference or re-asking)")
        default = template is None or (isinstance(template, str) and template == REWARD_TEMPLATE.name)
        super().__init__(template=REWARD_TEMPLATE if default else template, column=column, reference=False)

    def conversation(self, row: Mapping[str, Any], response: Any, messages: Any, field: str) -> list[Message]:
        """The conversation scored for one response of ``row``."""
        msgs = _messages(messages, field)
        if msgs is not None:
            return msgs
        text = "" if is_missing(response) else str(response)
        prompt = self.template.render(False, {"instruction": join_instruction(row.get("instruction"), row.get("input"))})
        return [*prompt, {"role": "assistant", "content": text}]

    def cache_order(self, order: str) -> str:
        """A score depends on the conversation only: one cache entry per response, whatever its side."""
        return ""

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        raw = gen.get("raw") or {}
        score = raw.get("score")
        if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(float(score)):
            return ParseResult(float(score))
        return unscored("parser_error", "no reward score in the answer: the reward judges need --backend reward",
                        str(gen["choices"][0].get("text") or ""))


@register_judge
class RewardJudge(_RewardBase):
    """A reward model's raw score of each response (item tables)."""

    name = "reward"
    mode = "reward"
    description = "a reward model's score of each response (--backend reward); higher is better"

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        return [("", self.conversation(row, row.get("response"), row.get("messages"), "messages"))]

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        r = results.get((0, ""))
        ok = r is not None and r.ok
        return {"": float(r.value) if ok else float("nan"), "feedback": None,  # type: ignore[union-attr,arg-type]
                "status": "scored" if ok else "unscored", "reason": None if ok else (r.reason if r else "no_score")}


@register_judge
class RewardPairJudge(_RewardBase):
    """A reward model's verdict on a pair from the difference of the two scores (pair tables)."""

    name = "reward_pairwise"
    mode = "reward_pairwise"
    description = "a reward model scores A and B apart; the verdict from the score difference (--backend reward)"
    pairwise = True

    def __init__(self, *, tie_margin: float = 0.0, **kw: Any) -> None:
        if not (isinstance(tie_margin, int | float) and math.isfinite(tie_margin) and tie_margin >= 0):
            raise EvalignError(f"tie_margin must be a number >= 0, got {tie_margin!r}")
        self.tie_margin = float(tie_margin)
        super().__init__(**kw)

    def extra_options(self) -> dict[str, Any]:
        return {"tie_margin": self.tie_margin}

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        return [("a", self.conversation(row, row.get("response_a"), row.get("messages_a"), "messages_a")),
                ("b", self.conversation(row, row.get("response_b"), row.get("messages_b"), "messages_b"))]

    def verdict(self, margin: float) -> str:
        """``A`` / ``B`` / ``tie`` of a score difference ``score_a - score_b``."""
        return "A" if margin > self.tie_margin else "B" if margin < -self.tie_margin else "tie"

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        a, b = results.get((0, "a")), results.get((0, "b"))
        if a is None or b is None or not a.ok or not b.ok:
            bad = [r for r in (a, b) if r is None or not r.ok]
            failed = all(r is not None and r.reason == "backend_error" for r in bad)
            out = self.empty_columns("unscored", next((r.reason for r in bad if r is not None), "no_score"))
            out[""] = None if failed else "unparseable"
            out["score_a"] = float(a.value) if a is not None and a.ok else float("nan")  # type: ignore[arg-type]
            out["score_b"] = float(b.value) if b is not None and b.ok else float("nan")  # type: ignore[arg-type]
            return out
        sa, sb = float(a.value), float(b.value)  # type: ignore[arg-type]
        v = self.verdict(sa - sb)
        return {"": v, "code": VERDICT_CODE[v], "score_a": sa, "score_b": sb, "margin": sa - sb,
                "p_a": sigmoid(sa - sb), "feedback": None, "status": "scored", "reason": None}

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({"code": float("nan"), "score_a": float("nan"), "score_b": float("nan"), "margin": float("nan"),
                    "p_a": float("nan")})
        return out
