"""MT-Bench's judges (Zheng et al. 2023, FastChat's eight judge prompts) and Arena-Hard's (Li et al. 2024),
as evalign judges:

* ``mtbench_single`` (``--mode mtbench_single``, or ``--mode absolute --template mtbench_single``): one
  answer graded 1-10 (``Rating: [[n]]``; higher is better).
* ``mtbench_pair`` (``--mode mtbench_pair``, or ``--mode pairwise --template mtbench_pair``): A vs B
  (``[[A]]`` / ``[[B]]`` / ``[[C]]`` = tie), in both presentation orders like every evalign pair judge
  (FastChat judges both orders too: its games g1 and g2), resolved as FastChat's ``show_result.py``
  does by default: the same verdict in both orders -> that verdict, else a tie.
* ``arena_hard`` (``--mode arena_hard``, or ``--mode pairwise --template arena_hard``): A vs B on
  Arena-Hard's five labels (``[[A>>B]]`` ... ``[[B>>A]]``: A / tie / B; the label of each order in
  ``J.label_ab`` / ``J.label_ba``, flipped back to the table's A/B), both orders; ``--reask 1`` asks once
  more, in upstream's words, when no label was read (upstream's ``number_of_judgment_attempts: 2``).

Which of MT-Bench's prompts a row gets (FastChat's choice, per row): the math prompts (with the
reference answer) for a row with a ``reference`` (FastChat gives references to its math, reasoning and
coding questions: a dataset carries them where it has them; ``--no-reference`` never shows one), and
the multi-turn prompts for the second turn of a conversation (``turn`` 2: the first two turns shown,
the second graded; a multi-turn math prompt shows the reference of both turns, so its row's
``reference`` is a list of two answers, one per turn). The template named (``mtbench_single`` /
``mtbench_pair`` or any of their variants) picks the family; a template file of the user's is used
for every row as it is. MT-Bench's prompts show two turns at most: a later turn is an error.

Parsers: :func:`evalign.judges.bracket_parsing.parse_bracketed` (upstream's rules as the floor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from evalign.errors import EvalignError, InputError
from evalign.judges.base import (
    SAMPLING_KEYS,
    SingleJudge,
    context_instruction,
    first_reference,
    is_missing,
    join_instruction,
    pair_instruction,
    register_judge,
    row_messages,
    turn_fields,
)
from evalign.judges.bracket_parsing import parse_bracketed
from evalign.judges.modes.relative import PrometheusRelative
from evalign.judges.parsing import ParseResult
from evalign.judges.prompts import Message, Rubric, Template, load_template
from evalign.signature import stable_hash

#: each MT-Bench family: (reference shown, turn) -> its template (FastChat's prompt named in the comment)
FAMILIES: dict[str, dict[tuple[bool, int], str]] = {
    "mtbench_single": {
        (False, 1): "mtbench_single",  # single-v1
        (True, 1): "mtbench_single_math",  # single-math-v1
        (False, 2): "mtbench_single_multi_turn",  # single-v1-multi-turn
        (True, 2): "mtbench_single_math_multi_turn",  # single-math-v1-multi-turn
    },
    "mtbench_pair": {
        (False, 1): "mtbench_pair",  # pair-v2
        (True, 1): "mtbench_pair_math",  # pair-math-v1
        (False, 2): "mtbench_pair_multi_turn",  # pair-v2-multi-turn
        (True, 2): "mtbench_pair_math_multi_turn",  # pair-math-v1-multi-turn
    },
}
#: the family of each built-in MT-Bench template
FAMILY_OF = {name: fam for fam, members in FAMILIES.items() for name in members.values()}
#: the most turns MT-Bench's prompts show
MAX_TURNS = 2
#: Arena-Hard's second attempt (``gen_judgment.py``), sent by ``--reask``
ARENA_REASK = "continue your judgment and finish by outputting a final verdict label"


def row_turn(row: Mapping[str, Any]) -> int:
    """The graded turn of a row: its ``turn`` (1 when it has none)."""
    t = row.get("turn")
    if is_missing(t) or t == "":
        return 1
    try:
        return int(float(str(t)))
    except ValueError:
        raise InputError(f"must be a turn number, got {t!r:.40}", field="turn") from None


class _Family:
    """The templates a judge chooses from per row (an MT-Bench family), or its one template."""

    def __init__(self, template: Template) -> None:
        fam = FAMILY_OF.get(template.name)
        builtin = fam is not None and load_template(template.name) == template
        self.name = fam if builtin else None
        self.members = {k: load_template(v) for k, v in FAMILIES[fam].items()} if builtin and fam else {}
        self.template = self.members[(False, 1)] if self.members else template

    def choose(self, row: Mapping[str, Any], reference: bool, per_row: bool, conversation: bool) -> tuple[Template, bool]:
        """The template of ``row`` and whether it shows the reference (``reference``: the run's choice;
        ``per_row``: a row with a reference gets the reference prompt)."""
        turn = row_turn(row)
        ref = reference or (per_row and first_reference(row.get("reference")) is not None)
        if not self.members:
            return self.template, reference
        who = f"row id {row.get('id')!r}"
        if turn > MAX_TURNS:
            raise EvalignError(f"{who}: turn {turn}: MT-Bench's prompts show {MAX_TURNS} turns at most (judge later "
                               "turns with another template, e.g. --mode pairwise, which shows the transcript)")
        if turn == MAX_TURNS and not conversation:
            raise EvalignError(f"{who}: turn 2 needs the conversation (messages, or messages_a and messages_b)")
        return self.members[(ref, turn)], ref

    def key(self, reference: bool) -> tuple[str, int, str]:
        """The cache-key part: the family, and a hash of every member (or the one template's)."""
        if not self.members:
            return self.template.name, self.template.version, self.template.hash(reference)
        tags = {f"{r}-{t}": m.tag(r) for (r, t), m in sorted(self.members.items())}
        return f"family/{self.name}", 1, stable_hash(tags)

    def tags(self) -> list[str]:
        return [m.tag(r) for (r, _), m in sorted(self.members.items())]


@register_judge
class MTBenchSingle(SingleJudge):
    """MT-Bench single-answer grading: 1-10 (``Rating: [[n]]``), FastChat's four prompts."""

    name = "mtbench_single"
    mode = "mtbench_single"
    description = "MT-Bench single-answer grading (FastChat's prompts): 1-10, turn 1 or 2 of a conversation"
    scale = (1, 10)
    claims_templates = True
    default_template = "mtbench_single"
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "max_tokens": 2048}
    style = "mtbench_rating"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.family = _Family(self.template)
        self.template = self.family.template

    def options(self, reference: bool) -> dict[str, Any]:
        return _family_options(self, super().options, reference)

    def template_key(self, reference: bool) -> tuple[str, int, str]:
        return self.family.key(reference)

    def reference_variant(self) -> bool:
        return bool(self.family.members) or self.template.has_reference

    def fields(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> dict[str, str]:
        f = {
            "instruction": (join_instruction(row.get("instruction"), row.get("input")) if self.family.members
                            else context_instruction(row)),
            "response": "" if is_missing(row.get("response")) else str(row.get("response")),
            **turn_fields(row, reference=reference),
        }
        if reference:
            f["reference_answer"] = first_reference(row.get("reference")) or ""
        return f

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        t, ref = self.family.choose(row, reference, self.reference is None, row_messages(row) is not None)
        return [("", t.render(ref, self.fields(row, rubric, ref)))]

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        return parse_bracketed(choice.get("text"), choice.get("finish_reason"), style=self.style, prompt=prompt)


@register_judge
class MTBenchPair(PrometheusRelative):
    """MT-Bench pairwise comparison (``[[A]]`` / ``[[B]]`` / ``[[C]]``), FastChat's four prompts, both orders."""

    name = "mtbench_pair"
    mode = "mtbench_pair"
    description = "MT-Bench pairwise comparison (FastChat's prompts): A, B or tie, both orders, turn 1 or 2"
    uses_rubric = False
    default_template = "mtbench_pair"
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "max_tokens": 2048}
    style = "mtbench_verdict"

    def __init__(self, *, both_orders: bool = True, tie: bool = True, template: Any = None, **kw: Any) -> None:
        if not tie:
            raise EvalignError(f"the {self.name} prompt always offers a tie")
        given = {k: kw[k] for k in SAMPLING_KEYS if kw.get(k) is not None}
        super().__init__(tie=True, both_orders=both_orders, template=template or self.default_template, **kw)
        self.family = _Family(self.template)
        self.template = self.family.template
        self.sampling = {**self.sampling_defaults, **dict(self.template.sampling), **given}
        if not self.sampling.get("repetition_penalty", 1):
            self.sampling.pop("repetition_penalty")

    def options(self, reference: bool) -> dict[str, Any]:
        return _family_options(self, super().options, reference)

    def template_key(self, reference: bool) -> tuple[str, int, str]:
        return self.family.key(reference)

    def reference_variant(self) -> bool:
        return bool(self.family.members) or self.template.has_reference

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        conversation = row_messages(row, "messages_a") is not None and row_messages(row, "messages_b") is not None
        t, ref = self.family.choose(row, reference, self.reference is None, conversation)
        a = "" if is_missing(row.get("response_a")) else str(row.get("response_a"))
        b = "" if is_missing(row.get("response_b")) else str(row.get("response_b"))
        base: dict[str, str] = {}
        if ref:
            base["reference_answer"] = first_reference(row.get("reference")) or ""
        out = []
        for order in self.orders:
            first, second = (a, b) if order == "ab" else (b, a)
            # MT-Bench's prompts show the turns themselves; another prompt gets the transcript (in context)
            shown = (join_instruction(row.get("instruction"), row.get("input")) if self.family.members
                     else pair_instruction(row, order))
            fields = {**base, **turn_fields(row, order, ref), "instruction": shown, "response_A": first,
                      "response_B": second}
            out.append((order, t.render(ref, fields)))
        return out

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        return parse_bracketed(choice.get("text"), choice.get("finish_reason"), style=self.style, prompt=prompt)


@register_judge
class ArenaHard(MTBenchPair):
    """Arena-Hard's judge (``[[A>>B]]`` ... ``[[B>>A]]``), both orders; the labels in ``J.label_ab`` / ``J.label_ba``."""

    name = "arena_hard"
    mode = "arena_hard"
    description = "Arena-Hard's judge (as JudgeBench ran it): [[A>>B]] .. [[B>>A]] -> A, tie or B, both orders"
    default_template = "arena_hard"
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "max_tokens": 4096}
    style = "arena_hard"

    def reask_messages(self, messages: Any, output: str, result: ParseResult) -> list[Message]:
        """Upstream's second attempt: the answer, then "continue your judgment and finish by outputting
        a final verdict label"."""
        return [*messages, {"role": "assistant", "content": output}, {"role": "user", "content": ARENA_REASK}]

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        out = super().aggregate(results)
        for order in ("ab", "ba"):
            r = results.get((0, order))
            label = r.detail if r is not None and r.ok else None
            out[f"label_{order}"] = _flip_label(label) if order == "ba" and label else label
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        return {**super().empty_columns(status, reason), "label_ab": None, "label_ba": None}


def _flip_label(label: str) -> str:
    """An Arena-Hard label read in the swapped order, in the table's frame (``A>>B`` <-> ``B>>A``)."""
    return {"A>>B": "B>>A", "A>B": "B>A", "A=B": "A=B", "B>A": "A>B", "B>>A": "A>>B"}.get(label, label)


def _family_options(judge: Any, base: Any, reference: bool) -> dict[str, Any]:
    """A judge's signature options with its family's templates (every variant's tag)."""
    fam: _Family = judge.family
    if not fam.members:
        return dict(base(reference))
    opts = dict(base(False))
    opts["template"] = f"family/{fam.name}"
    opts["variants"] = fam.tags()
    opts["reference"] = reference if judge.reference is not None else "per row"
    return opts


def verdict_of_label(label: str | None) -> str | None:
    """Arena-Hard's decision of a label as JudgeBench writes it (``>>`` read as ``>``), e.g. ``B>A``."""
    return None if label is None else label.replace(">>", ">")


__all__ = ["ARENA_REASK", "FAMILIES", "ArenaHard", "MTBenchPair", "MTBenchSingle", "row_turn", "verdict_of_label"]
