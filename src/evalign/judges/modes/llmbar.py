"""``llmbar`` (``--mode pairwise --template llmbar_<strategy>``): LLMBar's prompting strategies (Zeng et
al. 2024, "Evaluating Large Language Models at Evaluating Instruction Following", ICLR 2024), verbatim
from upstream's prompts, as evalign pair judges: the judge answers ``Output (a)`` or ``Output (b)``,
in both presentation orders by default.

Templates (``src/evalign/judges/templates/llmbar_*.yaml``) and what a row costs:

* ``llmbar_vanilla``, ``llmbar_vanilla_norules`` (answer only), ``llmbar_vanilla_1shot`` /
  ``llmbar_vanilla_2shot`` (answer only, after one / two worked examples: the template's ``shots``),
  ``llmbar_cot`` (explain, then "Therefore, Output (x) is better."): one call per order.
* ``llmbar_metrics`` / ``llmbar_reference`` / ``llmbar_metrics_reference``: first the template's
  ``stages`` (once per item: up to three questions about a good output; a reference output of the
  model itself), then one call per order with their outputs in the prompt.
* ``llmbar_swap`` / ``llmbar_swap_cot``: the CoT prompt in both orders; when the two orders choose
  different outputs, a ``synthesis`` round in both orders shows the judge both explanations as a
  debate (each rewritten so "Output (a)" names the output shown as (a)) and its answers are the
  verdicts; otherwise the first round's are.

Every stage is a call of the runner: cached as it returns, so a resumed run repeats none. Each
template declares its parser (``llmbar_direct`` / ``llmbar_cot``:
:func:`evalign.judges.llmbar_parsing.parse_llmbar`, with upstream's regexes as its floor) and
upstream's GPT-4 decoding (temperature 0, ``max_tokens`` per stage). ``--max-tokens`` sets the
verdict rounds' (first and synthesis), never the stages'. A stage's output is used as it is, as
upstream did (stripped; also when cut off at ``max_tokens``).

Logit bias (``logit_bias=True``, ``--logit-bias``; off by default): upstream decoded with
``tokens_to_avoid`` (bias -100: "Both", "Neither", "It", ...) and, for the answer-only prompts,
``tokens_to_favor`` (+7: "Output (a)", "Output (b)"); the stages without any. Sent as token texts
(see :class:`evalign.backends.GenerationRequest`): llama-cpp-python's server takes them;
upstream applied -100 only to texts that are one token of GPT's tokenizer, where the server biases
every token of each text.

Columns are those of ``prometheus_relative`` (``J`` resolved over both orders: the same verdict ->
that verdict, different -> tie, an order without one -> unscored; ``J.ab`` / ``J.ba`` / ``J.consistent``
/ ``J.code``), plus ``J.synthesis`` (Swap: whether the synthesis round ran) and the first sample's
stage outputs ``J.questions`` / ``J.reference_output``. The column is named after the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from evalign.backends.types import Constraint
from evalign.errors import EvalignError
from evalign.judges.base import (
    SAMPLING_KEYS,
    SWAP_VERDICT,
    is_missing,
    pair_instruction,
    register_judge,
)
from evalign.judges.llmbar_parsing import parse_llmbar
from evalign.judges.logprobs import LLMBAR, first_shown_probability, with_probability
from evalign.judges.modes.relative import PrometheusRelative
from evalign.judges.parsing import ParseResult, unscored
from evalign.judges.prompts import Message, Rubric, Stage
from evalign.judges.shapes import AnswerShape

#: the parsers an LLMBar template may declare -> the answer format of :func:`parse_llmbar`
PARSERS = {"llmbar_direct": "direct", "llmbar_cot": "cot"}
#: upstream's logit bias values (``tokens_to_avoid`` / ``tokens_to_favor``)
AVOID_BIAS = -100.0
FAVOR_BIAS = 7.0
#: LLMBar's strategy names (``upstream_configs/<Evaluator>/<Strategy>.json``) -> evalign's templates
STRATEGY_TEMPLATES = {
    "Vanilla": "llmbar_vanilla", "Vanilla_NoRules": "llmbar_vanilla_norules",
    "Vanilla_1shot": "llmbar_vanilla_1shot", "Vanilla_2shot": "llmbar_vanilla_2shot", "CoT": "llmbar_cot",
    "Metrics": "llmbar_metrics", "Reference": "llmbar_reference", "Metrics_Reference": "llmbar_metrics_reference",
    "Swap": "llmbar_swap", "Swap_CoT": "llmbar_swap_cot",
}  # fmt: skip
#: the synthesis round's orders
SYNTHESIS = {"ab": "swap_ab", "ba": "swap_ba"}
_WINNER = {"A": "1", "B": "2"}


def swap_output_names(text: str) -> str:
    """``Output (a)`` <-> ``Output (b)`` (and ``output (a)`` <-> ``output (b)``) in ``text``, as
    upstream's ``reverse_OutputAB`` does for an explanation shown in the other order."""
    for word in ("Output", "output"):
        a, b = f"{word} (a)", f"{word} (b)"
        text = text.replace(a, "\0A\0").replace(b, a).replace("\0A\0", b)
    return text


def stripped(messages: list[Message]) -> list[Message]:
    """Every message's content stripped (upstream's ``prompt_to_chatml`` strips each block)."""
    return [{**m, "content": m["content"].strip()} for m in messages]


@register_judge
class LLMBarJudge(PrometheusRelative):
    """LLMBar's strategies (templates ``llmbar_*``): ``Output (a)`` / ``Output (b)``, both orders,
    with the template's stages and synthesis round (see the module doc)."""

    name = "llmbar"
    mode = "llmbar"
    description = "LLMBar's strategies (Zeng et al. 2024), templates llmbar_*: Output (a) or (b), both orders"
    uses_rubric = False
    default_template = "llmbar_vanilla"
    default_rubric = None
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 300}

    def __init__(self, *, both_orders: bool = True, logit_bias: bool = False, tie: bool = False,
                 template: Any = None, **kw: Any) -> None:
        if tie:
            raise EvalignError("LLMBar's templates have no tie answer (drop --tie)")
        self.logit_bias = bool(logit_bias)
        given = {k: kw[k] for k in SAMPLING_KEYS if kw.get(k) is not None}
        super().__init__(tie=False, both_orders=both_orders, template=template or self.default_template, **kw)
        t = self.template
        if t.mode != self.mode or t.parser not in PARSERS:
            raise EvalignError(f"template '{t.name}' is not an LLMBar template (mode llmbar, parser "
                               f"{' or '.join(PARSERS)}); the llmbar judge runs templates llmbar_*")
        for stage in (*t.stages, *([t.synthesis] if t.synthesis else [])):
            if stage.name in ("ab", "ba", *SYNTHESIS.values()):
                raise EvalignError(f"template '{t.name}': a stage may not be named '{stage.name}'")
        if t.synthesis is not None:
            if t.synthesis.parser not in PARSERS:
                raise EvalignError(f"template '{t.name}': the synthesis round needs a parser ({', '.join(PARSERS)})")
            if not both_orders:
                raise EvalignError(f"template '{t.name}' compares both orders (Swap): --single-order does not apply")
        self.sampling = {**self.sampling_defaults, **dict(t.sampling), **given}
        self._max_tokens_given = "max_tokens" in given

    @property
    def column(self) -> str:
        """The template's name (``llmbar_cot``) unless a column name is given."""
        return self._column or self.template.name

    def extra_options(self) -> dict[str, Any]:
        return {**super().extra_options(), "logit_bias": self.logit_bias}

    # -- prompts ---------------------------------------------------------------------------------
    def _base(self, row: Mapping[str, Any], order: str = "ab") -> dict[str, str]:
        return {"instruction": pair_instruction(row, order)}

    def _shown(self, row: Mapping[str, Any], order: str) -> dict[str, str]:
        a = "" if is_missing(row.get("response_a")) else str(row.get("response_a"))
        b = "" if is_missing(row.get("response_b")) else str(row.get("response_b"))
        first, second = (a, b) if order == "ab" else (b, a)
        return {**self._base(row, order), "response_A": first, "response_B": second}

    def _verdict_messages(self, row: Mapping[str, Any], order: str, stage_outputs: Mapping[str, str]) -> list[Message]:
        return stripped(self.template.render(False, {**self._shown(row, order), **stage_outputs}))

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        """The first calls of a row: the template's stages when it has any, else the verdict call of
        each order."""
        if self.template.stages:
            return [(st.name, stripped(st.render(self._base(row), template=self.template.name)))
                    for st in self.template.stages]
        return [(order, self._verdict_messages(row, order, {})) for order in self.orders]

    def call_messages(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool, sample: int, order: str,
                      done: Mapping[tuple[int, str], tuple[ParseResult, str]]) -> list[Message]:
        if order in SYNTHESIS.values():
            shown = "ab" if order == "swap_ab" else "ba"
            return self._synthesis_messages(row, shown, done[(sample, "ab")], done[(sample, "ba")])
        outputs = {st.name: done[(sample, st.name)][1].strip() for st in self.template.stages}
        return self._verdict_messages(row, order, outputs)

    def _synthesis_messages(self, row: Mapping[str, Any], shown: str, ab: tuple[ParseResult, str],
                            ba: tuple[ParseResult, str]) -> list[Message]:
        """Upstream's synthesis prompt in the order ``shown``: the explanation that chose each output
        (in the ORIGINAL numbering), rewritten when it was written for the other order."""
        first_round = {"ab": ab, "ba": ba}
        explanation: dict[str, str] = {}
        for order, (res, text) in first_round.items():
            original = _WINNER[self._original(res.verdict, order)]  # type: ignore[arg-type]
            explanation[original] = text.strip() if order == shown else swap_output_names(text.strip())
        a, b = (explanation["1"], explanation["2"]) if shown == "ab" else (explanation["2"], explanation["1"])
        synthesis: Stage = self.template.synthesis  # type: ignore[assignment]
        fields = {**self._shown(row, shown), "explanation_A": a, "explanation_B": b}
        return stripped(synthesis.render(fields, template=self.template.name))

    @staticmethod
    def _original(verdict: str, order: str) -> str:
        """A verdict read in ``order`` in the original orientation (``A`` = response_a)."""
        return SWAP_VERDICT[verdict] if order == "ba" else verdict

    # -- settings and parsing --------------------------------------------------------------------
    def _stage(self, order: str) -> Stage | None:
        if order in SYNTHESIS.values():
            return self.template.synthesis
        return next((st for st in self.template.stages if st.name == order), None)

    def call_settings(self, sample: int, order: str) -> dict[str, Any]:
        s = self.request_settings(sample)
        stage = self._stage(order)
        avoid, favor = self.template.tokens_to_avoid, self.template.tokens_to_favor
        if stage is not None:
            avoid, favor = stage.tokens_to_avoid, stage.tokens_to_favor
            if stage.max_tokens is not None and not (order in SYNTHESIS.values() and self._max_tokens_given):
                s["max_tokens"] = stage.max_tokens
        if self.logit_bias and (avoid or favor):
            s["logit_bias"] = {**{t: AVOID_BIAS for t in avoid}, **{t: FAVOR_BIAS for t in favor}}
        return self.constrained(s, order)

    def answer_shape(self, order: str) -> AnswerShape | None:
        """The synthesis round's or a stage's own shape; the template's for the verdict calls."""
        stage = self._stage(order)
        return self.template.answer if stage is None else stage.answer

    def constraint(self, max_tokens: int, order: str = "") -> Constraint | None:
        """A stage's output (e.g. the questions) is free unless the stage declares a shape (a
        user's grammar or schema constrains the verdict calls only)."""
        stage = self._stage(order)
        if stage is not None and order not in SYNTHESIS.values():
            shape = stage.answer
            return None if shape is None or self.constrain == "off" else shape.constraint(max_tokens, stage.name)
        return super().constraint(max_tokens, order)

    def constraints(self) -> list[Constraint]:
        """The verdict calls' constraint and the synthesis round's."""
        orders = ["ab", *(["swap_ab"] if self.template.synthesis is not None else [])]
        found = [self.constraint(int(self.call_settings(0, o)["max_tokens"]), o) for o in orders]
        return [c for c in found if c is not None]

    def parse_call(self, gen: Mapping[str, Any], prompt: str | None, order: str) -> ParseResult:
        choice = gen["choices"][0]
        text = choice.get("text") or ""
        if order in ("ab", "ba"):
            style = PARSERS[self.template.parser]
        elif order in SYNTHESIS.values():
            style = PARSERS[self.template.synthesis.parser]  # type: ignore[union-attr]
        else:  # a stage: its output is used as it is
            return ParseResult(text.strip(), None, "stage output", text.strip())
        res = parse_llmbar(text, choice.get("finish_reason"), style=style, prompt=prompt)
        return with_probability(res, first_shown_probability(choice, LLMBAR, last=style == "cot"))

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        return self.parse_call(gen, prompt, "ab")

    # -- stages and verdicts ---------------------------------------------------------------------
    def next_calls(self, results: Mapping[tuple[int, str], ParseResult]) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for s in range(self.samples):
            stages = [results.get((s, st.name)) for st in self.template.stages]
            if any(r is None or not r.ok for r in stages):
                continue  # a stage failed (backend error): the next run retries it
            if (s, self.orders[0]) not in results:
                out.extend((s, o) for o in self.orders)
            elif self.template.synthesis is not None and (s, "swap_ab") not in results:
                ab, ba = results.get((s, "ab")), results.get((s, "ba"))
                if ab is not None and ba is not None and ab.ok and ba.ok and ab.verdict == ba.verdict:
                    out.extend((s, SYNTHESIS[o]) for o in self.orders)  # the orders chose different outputs
        return out

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        final: dict[tuple[int, str], ParseResult] = {}
        for s in range(self.samples):
            failed = next((r for st in self.template.stages if (r := results.get((s, st.name))) is not None
                           and not r.ok), None)
            for order in self.orders:
                r = results.get((s, SYNTHESIS[order])) or results.get((s, order))
                if failed is not None:
                    r = failed
                final[(s, order)] = r if r is not None else unscored("no_score")
        out = super().aggregate(final)
        if self.template.synthesis is not None:
            out["synthesis"] = (0, "swap_ab") in results
        for st in self.template.stages:
            r = results.get((0, st.name))
            out[st.name] = r.value if r is not None and r.ok else None
        return out

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        if self.template.synthesis is not None:
            out["synthesis"] = None
        out.update({st.name: None for st in self.template.stages})
        return out
