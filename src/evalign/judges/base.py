"""The base of every grading mode: the :class:`Judge` class, the judge registry, and what the modes
share (prompt fields, aggregation of samples, pair verdicts). Each mode lives in its own module under
:mod:`evalign.judges.modes` and is registered here as a lazy placeholder with its mode names as
aliases.

Output columns (the one convention of every judge; ``J`` is the judge's column name):

* ``J``: item judges: the score (float; NaN when not scored; direction: ``higher_is_better`` of the
  judge, False for G-Eval, where 1 is best). Pair judges: the verdict ``"A"``, ``"B"``, ``"tie"``, or
  ``"unparseable"`` (outputs were read but gave no verdict); None when skipped or when the backend failed.
* ``J.status``: ``scored`` / ``unscored`` / ``skipped``; ``J.reason``: why not scored (a code of
  :data:`evalign.judges.parsing.REASONS`); ``J.feedback``: the judge's text; ``J.error``: the backend's
  error message (redacted) when a call failed.
* per mode: ``J.median``, ``J.std``, ``J.n`` (samples > 1); ``J.naturalness``, ``J.relatedness``,
  ``J.correctness`` (criteria); ``J.method`` (geval: ``logprobs`` / ``samples``); ``J.code`` (pairs:
  +1 = A better, -1 = B better, 0 = tie), ``J.ab``, ``J.ba``, ``J.consistent`` (relative);
  ``J.score_a``, ``J.score_b``, ``J.rounds`` (ranking); ``J.score_a``, ``J.score_b``, ``J.margin``,
  ``J.p_a`` (reward_pairwise: the two rewards, their difference, sigmoid of it = P(A better)).; ``J.label_ab``, ``J.label_ba`` (Arena-Hard).
* what the row's calls took (written by the runner, :mod:`evalign.judges.usage`): ``J.calls``,
  ``J.unparsed``, ``J.prompt_tokens``, ``J.completion_tokens``, ``J.seconds``, ``J.model`` and, when a
  server returned one, ``J.fingerprint``.

A row may hold a conversation (``messages``; ``messages_a`` / ``messages_b`` for pairs, see
:mod:`evalign.io.conversations`): a template with turn placeholders (MT-Bench's) shows its turns
(:func:`turn_fields`), any other sees the transcript up to the graded user turn as its instruction
(:func:`context_instruction`, :func:`pair_instruction`).
"""

from __future__ import annotations

import math
import re
import statistics
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from evalign.backends.types import Constraint
from evalign.errors import EvalignError, UsageError
from evalign.io.text import join_instruction
from evalign.judges.option_rules import check_constrain
from evalign.judges.parsing import ParseResult, parse_grade
from evalign.judges.prompts import (
    SAMPLING_RULES,
    Message,
    Rubric,
    Template,
    load_rubric,
    load_template,
    resolve_rubric_map,
    sampling_problem,
)
from evalign.judges.shapes import AnswerShape
from evalign.registry import Registry
from evalign.signature import Signature, make_signature, stable_hash, text_hash

#: the status values of ``J.status``
STATUSES = ("scored", "unscored", "skipped")

#: default sampling settings of Prometheus-style judges (Prometheus 2 paper / prometheus-eval)
PROMETHEUS_SAMPLING: dict[str, Any] = {
    "temperature": 1.0,
    "top_p": 0.9,
    "max_tokens": 1024,
    "repetition_penalty": 1.03,
}

#: the sampling settings a judge accepts (all go into the signature and the cache key)
SAMPLING_KEYS = tuple(SAMPLING_RULES)


def row_messages(row: Mapping[str, Any], key: str = "messages") -> list[Message] | None:
    """A row's conversation (``messages``, ``messages_a`` or ``messages_b``, as the readers checked
    it: see :mod:`evalign.io.conversations`), or None when the row has none."""
    v = row.get(key)
    if isinstance(v, list | tuple) and v:
        return [dict(m) for m in v]
    if v is not None and hasattr(v, "tolist") and not isinstance(v, str):  # a Parquet list column
        return [dict(m) for m in v.tolist()]
    return None


def _transcript(blocks: Sequence[tuple[str, str]]) -> str:
    """``### Role:`` blocks, as FastChat's multi-turn judge prompts lay turns out."""
    return "\n\n".join(f"### {role}:\n{text}" for role, text in blocks)


def context_instruction(row: Mapping[str, Any]) -> str:
    """The instruction a single-turn template shows for an item: its instruction (and input); for a
    conversation with more than the graded user turn (an earlier turn or a system message), the
    transcript up to that user turn (``### System:`` / ``### User:`` / ``### Assistant:`` blocks), so the
    last assistant turn is graded in context."""
    msgs = row_messages(row)
    if msgs is None or (len(msgs) <= 2 and msgs[0]["role"] == "user"):
        return join_instruction(row.get("instruction"), row.get("input"))
    names = {"system": "System", "user": "User", "assistant": "Assistant"}
    return _transcript([(names[m["role"]], m["content"]) for m in msgs[:-1]])


def pair_instruction(row: Mapping[str, Any], order: str = "ab") -> str:
    """The instruction a pair template shows in ``order`` (``ab``: response_a shown as A): the pair's
    instruction (and input); for conversations with an earlier turn or a system message, the transcript
    up to the graded user turn with each earlier answer of the side shown as A, then B's (``### Assistant
    A:`` / ``### Assistant B:``)."""
    a, b = row_messages(row, "messages_a"), row_messages(row, "messages_b")
    if a is None or b is None or (len(a) <= 2 and a[0]["role"] == "user" and b[0]["role"] == "user"):
        return join_instruction(row.get("instruction"), row.get("input"))
    first, second = (a, b) if order != "ba" else (b, a)
    blocks: list[tuple[str, str]] = []
    s1 = first[0]["content"] if first[0]["role"] == "system" else None
    s2 = second[0]["content"] if second[0]["role"] == "system" else None
    if s1 is not None and s1 == s2:
        blocks.append(("System", s1))
    else:
        blocks += [(f"System (Assistant {side})", s) for side, s in (("A", s1), ("B", s2)) if s is not None]
    users = [m["content"] for m in first if m["role"] == "user"]
    ans1 = [m["content"] for m in first if m["role"] == "assistant"]
    ans2 = [m["content"] for m in second if m["role"] == "assistant"]
    for k, question in enumerate(users):
        blocks.append(("User", question))
        if k < len(users) - 1:
            blocks += [("Assistant A", ans1[k]), ("Assistant B", ans2[k])]
    return _transcript(blocks)


def turn_fields(row: Mapping[str, Any], order: str = "", reference: bool = False) -> dict[str, str]:
    """The turn-indexed placeholders of a conversation row (FastChat's names, see
    :data:`evalign.judges.prompts.TURN_PLACEHOLDERS`): ``question_N``, and ``answer_N`` (an item) or
    ``answer_a_N`` / ``answer_b_N`` (a pair, A = the side shown first in ``order``); with ``reference``,
    ``ref_answer_N`` from the row's ``reference`` (a list: one reference answer per turn; a single
    text: the graded turn's). Empty for a row without a conversation."""
    out: dict[str, str] = {}
    single = row_messages(row)
    a, b = row_messages(row, "messages_a"), row_messages(row, "messages_b")
    if single is not None:
        sides = {"": single}
    elif a is not None and b is not None:
        sides = {"_a": a, "_b": b} if order != "ba" else {"_a": b, "_b": a}
    else:
        return out
    first = next(iter(sides.values()))
    for k, q in enumerate((m["content"] for m in first if m["role"] == "user"), start=1):
        out[f"question_{k}"] = q
    for suffix, msgs in sides.items():
        for k, ans in enumerate((m["content"] for m in msgs if m["role"] == "assistant"), start=1):
            out[f"answer{suffix}_{k}"] = ans
    if reference:
        refs = row.get("reference")
        turns = sum(1 for m in first if m["role"] == "assistant")
        if isinstance(refs, list | tuple):
            out.update({f"ref_answer_{k}": str(r) for k, r in enumerate(refs, start=1)})
        elif isinstance(refs, str):
            out[f"ref_answer_{turns}"] = refs
    return out


def all_references(value: Any) -> str | None:
    """Every reference of a cell as one text: a single one as it is; several as ``- `` lines (each on
    its own line, after a line break), or None."""
    if isinstance(value, list | tuple):
        refs = [str(v) for v in value if not is_missing(v) and str(v).strip()]
        if not refs:
            return None
        return refs[0] if len(refs) == 1 else "\n" + "\n".join(f"- {r}" for r in refs)
    return first_reference(value)


def prompt_text(messages: Sequence[Message]) -> str:
    """Every message's content joined (what the judge was shown), for echo masking."""
    return "\n".join(m["content"] for m in messages)


def first_reference(value: Any) -> str | None:
    """The reference text of a cell (the first one of a list), or None."""
    if is_missing(value):
        return None
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list | tuple) and value:
        return str(value[0])
    return None


def is_missing(v: Any) -> bool:
    """None or NaN (an empty cell)."""
    return v is None or (isinstance(v, float) and math.isnan(v))



#: the turn placeholders that show a response in a multi-turn template (FastChat's names)
_TURN_RESPONSE = {"response": "answer", "response_A": "answer_a", "response_B": "answer_b"}


def shows_response(text: str, placeholder: str) -> bool:
    """Whether a prompt shows the response of ``placeholder`` (``response``, ``response_A`` or
    ``response_B``): the placeholder itself, or in a multi-turn prompt one of its turns
    (``{answer_N}``, ``{answer_a_N}``, ``{answer_b_N}``)."""
    if "{" + placeholder + "}" in text:
        return True
    turn = _TURN_RESPONSE.get(placeholder)
    return turn is not None and re.search(r"\{" + turn + r"_[1-9]\}", text) is not None


def check_judge_options(name: str, sampling: Mapping[str, Any], *, samples: int, reask: int, constrain: str,
                        grammar: str | None, json_schema: dict[str, Any] | None) -> None:
    """A judge's keyword options as they must be (sampling keys and values, samples >= 1, reask >= 0,
    the constraint mode and at most one user constraint); a wrong one raises naming it."""
    unknown = [k for k in sampling if k not in SAMPLING_KEYS]
    if unknown:
        raise EvalignError(f"judge '{name}': unknown option(s) {', '.join(unknown)}")
    for key, value in sampling.items():
        problem = sampling_problem(key, value)
        if problem:
            raise UsageError(f"judge '{name}': {key} {problem}")
    if samples < 1:
        raise EvalignError(f"samples must be >= 1, got {samples}")
    if reask < 0:
        raise EvalignError(f"reask must be >= 0, got {reask}")
    check_constrain(constrain, user_constraint=grammar is not None or json_schema is not None)
    if grammar is not None and json_schema is not None:
        raise EvalignError("give a grammar or a JSON schema, not both")


class Judge(ABC):
    """A grading mode. Subclasses set the class variables and implement :meth:`prompts` and
    :meth:`aggregate`; :meth:`parse` reads one output.

    Options (all part of :meth:`signature` and of the cache key of every call):

    * ``template``: template name or file (default per judge).
    * ``rubric``: rubric name, file, mapping or :class:`Rubric` (judges with ``uses_rubric``).
    * ``rubric_column``: a column holding a rubric per row (dict, JSON string or rubric name), used instead.
    * ``rubric_map``: maps the rubric column's values to rubric names (``"hhh"``, a mapping, or
      ``VALUE=RUBRIC`` strings; see :func:`evalign.judges.prompts.resolve_rubric_map`).
    * ``reference``: True (use the reference answer; a row without one is an error), False
      (reference-free template), or None = True when every row has a reference, else False.
    * ``samples``: grades drawn per item (the sample index is part of the cache key; with a
      ``seed``, sample ``s`` uses ``seed + s``).
    * ``reask``: how many times to ask again (showing the unparseable answer) when an output cannot
      be parsed. Each re-ask is a separate, cached call.
    * sampling: ``temperature``, ``top_p``, ``max_tokens``, ``repetition_penalty`` (0 = not sent, for
      servers that reject it), ``seed`` (defaults per judge, see ``sampling_defaults``).
    * ``constrain``: ``"auto"`` (default: send the template's answer shape as an output constraint
      where the backend can; a backend that cannot, or a server that refuses it, gets one line and
      the run goes on unconstrained), ``"on"`` (constrain or stop with that line) or ``"off"``.
      The template's ``answer`` shape (:mod:`evalign.judges.shapes`) bounds its free text so the
      verdict always fits in ``max_tokens``; the parser still reads every answer.
    * ``grammar`` (a GBNF grammar) / ``json_schema`` (a JSON schema): a constraint of the user's,
      sent instead of the template's shape (GBNF: llama.cpp, vLLM, hf; JSON schema: every backend).
    * ``column``: the column name (default: the judge name, plus ``[rubric]`` for rubric judges; a
      pairwise judge run without a rubric is named after the judge alone, not its default rubric).
    """

    name: ClassVar[str]
    mode: ClassVar[str]
    description: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    pairwise: ClassVar[bool] = False
    #: the placeholders of the judged response(s) every prompt of its template must show
    response_placeholders: ClassVar[tuple[str, ...]] = ("response",)
    uses_rubric: ClassVar[bool] = False
    scale: ClassVar[tuple[int, int]] = (1, 5)
    default_template: ClassVar[str]
    default_rubric: ClassVar[str | None] = None
    sampling_defaults: ClassVar[dict[str, Any]] = dict(PROMETHEUS_SAMPLING)
    #: whether ``--mode absolute --template T`` (T of this judge's mode) runs this judge (else Prometheus')
    claims_templates: ClassVar[bool] = False

    def __init__(
        self,
        *,
        template: str | Template | None = None,
        rubric: str | Mapping[str, Any] | Rubric | None = None,
        rubric_column: str | None = None,
        rubric_map: Any = None,
        reference: bool | None = None,
        samples: int = 1,
        reask: int = 0,
        column: str | None = None,
        constrain: str = "auto",
        grammar: str | None = None,
        json_schema: dict[str, Any] | None = None,
        **sampling: Any,
    ) -> None:
        check_judge_options(self.name, sampling, samples=samples, reask=reask, constrain=constrain, grammar=grammar,
                            json_schema=json_schema)
        self.template = template if isinstance(template, Template) else load_template(template or self.default_template)
        self.check_template(self.template)
        if self.uses_rubric:
            self.rubric: Rubric | None = load_rubric(rubric or self.default_rubric or "helpfulness")
        else:
            if rubric is not None or rubric_column is not None:
                raise EvalignError(f"judge '{self.name}' does not use a rubric")
            self.rubric = None
        self.rubric_column = rubric_column
        self.rubric_map = resolve_rubric_map(rubric_map)
        if self.rubric_map and rubric_column is None:
            raise EvalignError("rubric_map (--rubric-map) needs rubric_column (--rubric-column)")
        self.reference = reference
        self.samples = samples
        self.reask = reask
        self.constrain = constrain
        self.grammar = grammar
        self.json_schema = json_schema
        self.sampling: dict[str, Any] = dict(self.sampling_defaults)
        self.sampling.update({k: v for k, v in sampling.items() if v is not None})
        if not self.sampling.get("repetition_penalty", 1):
            self.sampling.pop("repetition_penalty")  # 0 = off: not sent (servers that reject it)
        self._column = column
        #: whether a rubric was chosen (a pairwise judge without one is not named after its default)
        self._rubric_chosen = rubric is not None or rubric_column is not None

    def check_template(self, t: Template) -> None:
        """The template shows this judge's response(s) (:attr:`response_placeholders`) in each of its
        prompts: a template of another kind of judge (an absolute one with ``--mode pairwise``), or
        one without the placeholders, would send prompts that never show what is judged."""
        need = self.response_placeholders
        shown = " and ".join("{" + p + "}" for p in need)
        for variant, text in (("without_reference", t.without_reference), ("with_reference", t.with_reference)):
            missing = [p for p in need if text is not None and not shows_response(text, p)]
            if missing:
                where = f"template '{t.name}'" + (f" ({t.path})" if t.path else "") + f", field '{variant}'"
                hint = f" (the template's mode is {t.mode}: use it with --mode {t.mode})" if t.mode != self.mode else ""
                if self.pairwise and text is not None and shows_response(text, "response") and \
                        t.mode in ("pairwise", self.mode):
                    hint = " (it shows {response}: an absolute prompt; use it with --mode absolute)"
                raise UsageError(f"{where}: the {self.mode} judge shows {shown} in its prompt, but this prompt has "
                                 f"no {{{missing[0]}}}{hint}")

    # -- naming and signature -------------------------------------------------------------------
    @property
    def column(self) -> str:
        """The score column name."""
        if self._column:
            return self._column
        if self.uses_rubric and (self._rubric_chosen or not self.pairwise or self.mode == "ranking"):
            rub = self.rubric_column or (self.rubric.name if self.rubric else "")
            return f"{self.name}[{rub}]"
        return self.name

    def options(self, reference: bool) -> dict[str, Any]:
        """Everything besides the backend that determines the grades."""
        opts: dict[str, Any] = {"mode": self.mode, "template": self.template.tag(reference)}
        if self.uses_rubric:
            if self.rubric_column:
                opts["rubric"] = f"column:{self.rubric_column}"
                if self.rubric_map:
                    opts["rubric_map"] = stable_hash(self.rubric_map)[:8]
            else:
                opts["rubric"] = self.rubric.tag()  # type: ignore[union-attr]
        opts["reference"] = reference
        opts.update(self.sampling)
        opts["samples"] = self.samples
        if self.reask:
            opts["reask"] = self.reask
        if self.grammar is not None:
            opts["grammar"] = text_hash(self.grammar)[:8]
        if self.json_schema is not None:
            opts["json_schema"] = stable_hash(self.json_schema)[:8]
        opts.update(self.extra_options())
        return opts

    def extra_options(self) -> dict[str, Any]:
        """Mode-specific options for the signature."""
        return {}

    def template_key(self, reference: bool) -> tuple[str, int, str]:
        """The template's part of every call's cache key: name, version and content hash of the variant
        used (a judge choosing among several templates gives its own)."""
        return self.template.name, self.template.version, self.template.hash(reference)

    def reference_variant(self) -> bool:
        """Whether the judge has prompts that show the reference answer (default: whether its template
        has a reference variant; a judge choosing among several templates says so itself)."""
        return self.template.has_reference

    def signature(self, backend: Mapping[str, Any], reference: bool, run: Mapping[str, Any] | None = None) -> Signature:
        """The reproducibility signature: judge options plus the backend identity (never a key) and
        what the run decided (``run``, e.g. ``method`` of G-Eval)."""
        opts = {**{f"backend.{k}": v for k, v in backend.items()}, **self.options(reference), **(run or {})}
        return make_signature(self.name, opts)

    # -- requests -------------------------------------------------------------------------------
    def request_settings(self, sample: int) -> dict[str, Any]:
        """Keyword arguments of :class:`~evalign.backends.GenerationRequest` for one sample."""
        s = dict(self.sampling)
        if s.get("seed") is not None:
            s["seed"] = int(s["seed"]) + sample
        return s

    # -- output constraints ---------------------------------------------------------------------
    def answer_shape(self, order: str) -> AnswerShape | None:
        """The shape of the answer of the call of ``order`` (default: the template's)."""
        return self.template.answer

    def constraint(self, max_tokens: int, order: str = "") -> Constraint | None:
        """The output constraint of a call of ``order`` with ``max_tokens`` (None: none; with
        ``constrain`` off, or no shape declared): the user's grammar or schema, else the answer shape."""
        if self.constrain == "off":
            return None
        if self.grammar is not None:
            return Constraint(gbnf=self.grammar, name="grammar")
        if self.json_schema is not None:
            return Constraint(json_schema=dict(self.json_schema), name="schema")
        shape = self.answer_shape(order)
        return None if shape is None else shape.constraint(int(max_tokens), name=self.template.name)

    def constraints(self) -> list[Constraint]:
        """The constraints this judge's calls may carry (at its ``max_tokens``), for a backend check
        before the run; default that of a first call."""
        c = self.constraint(int(self.sampling.get("max_tokens", 512)), self.first_order())
        return [c] if c is not None else []

    def first_order(self) -> str:
        """The order of a row's first verdict call (``""`` for item judges)."""
        return ""

    def constraint_tag(self) -> str:
        """What constrains the answers, for the signature: ``gbnf#hash``, ``schema#hash`` or the
        template's ``shape#hash``."""
        if self.grammar is not None:
            return f"gbnf#{text_hash(self.grammar)[:8]}"
        if self.json_schema is not None:
            return f"schema#{stable_hash(self.json_schema)[:8]}"
        return self.template.answer.tag() if self.template.answer is not None else "none"

    def constrained(self, settings: dict[str, Any], order: str) -> dict[str, Any]:
        """``settings`` with the call's output constraint (at its ``max_tokens``) when it has one; with
        ``constrain`` auto, none where ``max_tokens`` is too small for the answer's shape (the runner
        says so in its note), with ``on`` that is an error."""
        try:
            c = self.constraint(int(settings.get("max_tokens", 512)), order)
        except EvalignError:
            if self.constrain == "on":
                raise
            return settings
        return settings if c is None else {**settings, "constraint": c.to_dict()}

    def reask_messages(self, messages: Sequence[Message], output: str, result: ParseResult) -> list[Message]:
        """The conversation for a re-ask: the original prompt, the unreadable answer, and a request
        to answer again in the format."""
        note = (
            f"Your answer could not be read ({result.detail or result.reason}). "
            f"Answer again, following exactly this output format: {self.template.format_hint}"
        )
        return [*messages, {"role": "assistant", "content": output}, {"role": "user", "content": note}]

    @abstractmethod
    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        """``(order, messages)`` for each call one row needs (order ``""``; ``"ab"``/``"ba"`` for pairs)."""

    #: the parser mode of :func:`parse_grade`
    parse_mode: ClassVar[str] = ""

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        """Read one output (a :meth:`Generation.to_json` dict); ``prompt`` is the text the judge was
        shown (lines copied from it are masked)."""
        choice = gen["choices"][0]
        return parse_grade(choice.get("text"), self.parse_mode or self.mode, choice.get("finish_reason"),
                           scale=self.scale, prompt=prompt)

    def cache_order(self, order: str) -> str:
        """The order as it enters a call's cache key (default: itself). A judge whose answer does not
        depend on the order (a reward model scores one response at a time) returns ``""``, so a
        response's answer is cached once, whichever side it is on."""
        return order

    def next_calls(self, results: Mapping[tuple[int, str], ParseResult]) -> list[tuple[int, str]]:
        """Further ``(sample, order)`` calls one row needs once every call so far has its final
        result (``results``); default none. The ranking protocol asks for its next round here, a
        judge with stages (LLMBar's Metrics, Reference, Swap) its next stage."""
        return []

    def call_messages(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool, sample: int, order: str,
                      done: Mapping[tuple[int, str], tuple[ParseResult, str]]) -> list[Message]:
        """The messages of the follow-up call ``(sample, order)`` (asked for by :meth:`next_calls`);
        ``done``: the row's final calls so far, ``(sample, order) -> (result, output text)``, for a
        stage that shows an earlier stage's output. Default: the call's prompt of :meth:`prompts`."""
        return dict(self.prompts(row, rubric, reference))[order]

    def call_settings(self, sample: int, order: str) -> dict[str, Any]:
        """The request settings of the call ``(sample, order)``; default :meth:`request_settings` with
        the output constraint (a judge with stages gives each stage its own, e.g. ``max_tokens``)."""
        return self.constrained(self.request_settings(sample), order)

    def parse_call(self, gen: Mapping[str, Any], prompt: str | None, order: str) -> ParseResult:
        """Read the output of the call of ``order``; default :meth:`parse` (a judge with stages reads
        each stage's output in its own way)."""
        return self.parse(gen, prompt)

    def run_options(self, columns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What the run itself decided and the signature must record (e.g. G-Eval's method)."""
        return {}

    def run_notes(self, columns: Sequence[Mapping[str, Any]]) -> list[str]:
        """What the run's answers lacked that the user must be told once (e.g. a confidence judge whose
        server returned no logprobs), from each row's columns; none by default."""
        return []

    @abstractmethod
    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        """Columns (suffix -> value; ``""`` is the score) from the final parse of each
        (sample, order)."""

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        """The columns of a row that has no grade (unscored or skipped)."""
        return {"": None if self.pairwise else float("nan"), "feedback": None, "status": status, "reason": reason}


# --- registry ---------------------------------------------------------------------------------

#: the judge registry (plugins from the ``evalign.judges`` entry points; modes are aliases)
JUDGES: Registry[type[Judge]] = Registry("judge or mode", base_cls=Judge, entry_point_group="evalign.judges")

#: the built-in modes, one module each, imported on first use; their mode names (``--mode``) are aliases
JUDGES.register("prometheus_absolute", lazy="evalign.judges.modes.absolute:PrometheusAbsolute", aliases=("absolute",))
JUDGES.register("prometheus_relative", lazy="evalign.judges.modes.relative:PrometheusRelative",
                aliases=("relative", "pairwise"))
JUDGES.register("geval", lazy="evalign.judges.modes.geval:GEval", aliases=("geval", "g-eval"))
JUDGES.register("criteria", lazy="evalign.judges.modes.criteria:CriteriaJudge", aliases=("criteria",))
JUDGES.register("prometheus_ranking", lazy="evalign.judges.modes.ranking:PrometheusRanking", aliases=("ranking",))
JUDGES.register("llmbar", lazy="evalign.judges.modes.llmbar:LLMBarJudge", aliases=("llmbar",))
JUDGES.register("reward", lazy="evalign.judges.modes.reward:RewardJudge")
JUDGES.register("reward_pairwise", lazy="evalign.judges.modes.reward:RewardPairJudge")

#: the judge of each mode name on a backend that returns scores (``--backend reward``): item, pair
REWARD_MODES = {"absolute": "reward", "reward": "reward", "pairwise": "reward_pairwise", "relative": "reward_pairwise",
                "reward_pairwise": "reward_pairwise"}
JUDGES.register("mtbench_single", lazy="evalign.judges.modes.mtbench:MTBenchSingle")
JUDGES.register("mtbench_pair", lazy="evalign.judges.modes.mtbench:MTBenchPair")
JUDGES.register("arena_hard", lazy="evalign.judges.modes.mtbench:ArenaHard", aliases=("arena-hard",))
JUDGES.register("simulated_annotators", lazy="evalign.judges.modes.simulated:SimulatedAnnotators",
                aliases=("simulated-annotators",))

#: mode names (as used by the CLI's --mode) -> judge names (the registry's aliases)
MODE_ALIASES: dict[str, str] = JUDGES.aliases

J = TypeVar("J", bound=type[Judge])


def register_judge(cls: J) -> J:
    """Class decorator: make a judge available by its ``name``."""
    JUDGES.add(cls.name, cls)
    return cls


def judge_class(name: str) -> type[Judge]:
    """The judge class registered as ``name`` or a mode alias (``absolute``, ``pairwise`` ...)."""
    return JUDGES.get(name)


def judge_for_template(name: str, template: str | Template | None) -> type[Judge]:
    """The judge class of ``name`` (a judge or mode), given the template it is asked to run: a template
    of another pair judge (its ``mode``, e.g. ``llmbar`` for ``llmbar_cot``) with ``pairwise`` /
    ``relative`` runs that judge (``--mode pairwise --template llmbar_cot``); with another mode it is
    an error."""
    cls = judge_class(name)
    if template is None or (isinstance(template, str) and template == getattr(cls, "default_template", None)):
        return cls
    t = template if isinstance(template, Template) else load_template(template)
    if t.mode not in JUDGES:
        return cls
    own = JUDGES.get(t.mode)
    other_kind = own.pairwise != cls.pairwise and JUDGES.get(load_template(cls.default_template).mode) is not own
    if other_kind and not (own.pairwise and own.name != "prometheus_relative"):  # (those: "use --mode pairwise")
        raise UsageError(f"template '{t.path or t.name}' declares mode {t.mode} (the {own.name} judge, which judges "
                         f"{'pairs' if own.pairwise else 'one response at a time'}), but the mode asked for is {name} "
                         f"(the {cls.name} judge, which judges {'pairs' if cls.pairwise else 'one response at a time'}): "
                         f"give --mode {t.mode} with this template, or a template of mode {name}")
    if not own.pairwise and own is not cls:  # an item judge's template: it runs that judge if it claims them
        return own if own.claims_templates and cls.name == "prometheus_absolute" else cls
    if own is cls or not own.pairwise or own.name == "prometheus_relative":
        return cls
    if cls.name != "prometheus_relative":
        raise EvalignError(f"template '{t.name}' is a template of the {own.name} judge: use --mode pairwise "
                           f"(or {own.mode}) with it")
    return own


def judge_for_backend(mode: str, scores: bool) -> str:
    """The judge (registry name or mode) that ``mode`` names on a backend that returns text
    (``scores=False``: ``mode`` itself, but not a reward judge) or scores (``scores=True``, a reward
    model: ``absolute`` -> ``reward``, ``pairwise`` -> ``reward_pairwise``; other modes generate text
    and are a :class:`~evalign.errors.UsageError`)."""
    reward = mode in REWARD_MODES.values()
    if scores:
        if mode not in REWARD_MODES:
            raise UsageError(f"--backend reward scores responses with a reward model: use --mode absolute (its score "
                             f"of each response) or --mode pairwise (A vs B from the two scores), not --mode {mode}")
        return REWARD_MODES[mode]
    if reward:
        raise UsageError(f"judge '{mode}' reads a reward model's scores: use it with --backend reward")
    return mode


def list_judges() -> list[type[Judge]]:
    """All registered judge classes (built-in and plugins), sorted by name."""
    return [cls for _, cls in JUDGES.items()]


def judge_names() -> list[str]:
    """Registered judge names."""
    return JUDGES.names()



# --- shared aggregation -------------------------------------------------------------------------


def reason_of(results: Sequence[ParseResult]) -> str | None:
    reasons = Counter(r.reason for r in results if r.reason)
    return reasons.most_common(1)[0][0] if reasons else None


def numeric_columns(results: Sequence[ParseResult], samples: int) -> dict[str, Any]:
    """Score (mean over scored samples), feedback, status, reason; with several samples also
    median, std (population, ddof=0) and n (scored samples)."""
    scored = [r for r in results if r.ok]
    values = [float(r.value) for r in scored]  # type: ignore[arg-type]
    out: dict[str, Any] = {
        "": statistics.fmean(values) if values else float("nan"),
        "feedback": scored[0].feedback if scored else (results[0].feedback if results else None),
        "status": "scored" if scored else "unscored",
        "reason": None if len(scored) == len(results) else reason_of(results),
    }
    if samples > 1:
        out["median"] = statistics.median(values) if values else float("nan")
        out["std"] = statistics.pstdev(values) if values else float("nan")
        out["n"] = len(values)
    return out


# --- what the modes share ------------------------------------------------------------------


class SingleJudge(Judge):
    """A judge of one response per row (item table)."""

    def fields(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> dict[str, str]:
        f = {
            "instruction": context_instruction(row),
            "response": "" if is_missing(row.get("response")) else str(row.get("response")),
            **turn_fields(row, reference=reference),
        }
        if reference:
            ref = first_reference(row.get("reference"))
            f["reference_answer"] = ref or ""
        if rubric is not None:
            f["rubric"] = rubric.render("absolute")
        return f

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        return [("", self.template.render(reference, self.fields(row, rubric, reference)))]

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        ordered = [results[k] for k in sorted(results)]
        return numeric_columns(ordered, self.samples)


#: verdict -> code (+1 = A better, -1 = B better, 0 = tie), as in the pair tables' pref columns
VERDICT_CODE = {"A": 1.0, "B": -1.0, "tie": 0.0}
#: a verdict seen from the other order
SWAP_VERDICT = {"A": "B", "B": "A", "tie": "tie"}


def resolve_orders(ab: str | None, ba: str | None) -> str | None:
    """The verdict of a pair from its two orders (both in the original orientation): the same ->
    that verdict; different -> ``"tie"``; an order missing -> the other (one-order judging)."""
    if ab is None or ba is None:
        return ab if ba is None else ba
    return ab if ab == ba else "tie"


def pair_verdict(code: float, failures: Sequence[ParseResult]) -> str | None:
    """The verdict column of a pair: ``"A"`` / ``"B"`` / ``"tie"`` from the mean code; without a
    verdict ``"unparseable"`` when outputs were read, None when the backend failed."""
    if math.isfinite(code):
        return "A" if code > 0 else "B" if code < 0 else "tie"
    if failures and all(f.reason == "backend_error" for f in failures):
        return None
    return "unparseable"
