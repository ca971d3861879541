"""``simulated_annotators``: a pairwise judge whose verdict carries the confidence of *simulated
annotators* (Trust or Escalate: Jung, Brahman and Choi, ICLR 2025, arXiv 2407.18370).

The judge is prompted once per annotator, each time after that annotator's few-shot examples
(:mod:`evalign.io.fewshot`: upstream's ``fewshot.jsonl`` or an ``evalign annotate`` export), in
both presentation orders, asking for the verdict that annotator would give (``[[A]]`` / ``[[B]]``).
From the top logprobs of each answer (the judge asks for them: ``logprobs``, ``top_logprobs=10`` as
upstream) the probability of the first-shown response is read at the verdict token (the token after
``[[``; the two letters' probabilities renormalised over A and B, as ``J.p_a`` is everywhere in
evalign, :mod:`evalign.judges.logprobs`), mapped back to the original order (order ``ba`` shows B
first) and averaged over the K annotators x 2 orders (x samples): that is ``J.p_a``, P(A better).
The verdict ``J`` is its arg max (``A`` above 1/2, ``B`` below, ``tie`` at exactly 1/2), as upstream
takes it, and ``J.confidence`` = ``max(p_a, 1 - p_a)`` its probability, with ``J.confidence_source``
= ``simulated_annotators``: what ``evalign meta --selective`` calibrates. Upstream averages the raw
``exp(logprob)`` of the two letters (which need not sum to 1) and drops an annotator whose answer in
either order has none; evalign renormalises each call's two letters and averages the calls that have
them (``J.p_calls`` counts them). A call whose answer has no verdict or no logprobs at the verdict
leaves the pair's confidence to the other calls; a pair without any is unscored (or, without logprobs
at all, gets the majority of the verdicts read and no confidence).

Columns (``J`` = the column): ``J`` (``A`` / ``B`` / ``tie``), ``J.code`` (+1 / -1 / 0), ``J.p_a``,
``J.confidence``, ``J.confidence_source``, ``J.annotators`` (K), ``J.p_calls``, ``J.ab`` / ``J.ba``
(each order's majority verdict over the annotators, in the original orientation: the order-swap audit),
``J.consistent``, ``J.status`` / ``J.reason`` / ``J.feedback``.

**The prompt.** ``prompt="upstream"``: upstream's text (``model/prompts.py``: the system prompt, then
one user turn with the instruction of the task, each example and the query), read from the data
folder's ``selective/upstream_prompts.txt`` (not bundled: no licence file upstream); ``"evalign"``:
the template ``simulated_annotators`` (evalign's wording: each example a user turn and the
annotator's verdict as the assistant's answer); ``"auto"`` (default): upstream's when the data folder
has it, else evalign's. Every call's cache key holds its messages (the examples shown) and the
template key holds the hash of the prompt and of all example sets, so another few-shot file never
reuses a cached answer; the signature records ``prompt``, ``annotators`` and ``fewshot`` (the hash).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from evalign.errors import EvalignError, UsageError
from evalign.io.fewshot import (
    PROMPTS_FILE,
    AnnotatorExamples,
    FewshotExample,
    fewshot_hash,
    find_upstream_prompts,
    read_upstream_prompts,
)
from evalign.judges.base import (
    SWAP_VERDICT,
    VERDICT_CODE,
    is_missing,
    pair_instruction,
    reason_of,
    register_judge,
)
from evalign.judges.bracket_parsing import parse_bracketed
from evalign.judges.logprobs import first_shown_probability, with_probability
from evalign.judges.modes.relative import PrometheusRelative
from evalign.judges.parsing import ParseResult, unscored
from evalign.judges.prompts import Message, Rubric, Template, load_template
from evalign.signature import stable_hash

#: ``J.confidence_source`` of this judge
CONFIDENCE_SOURCE = "simulated_annotators"
#: the answer's verdict token: the letter after ``[[`` (A = the first-shown response)
BRACKETS = (re.compile(r"\[\[\s*$"), {"A": ("A",), "B": ("B",)}, False)
#: the prompt choices
PROMPTS = ("auto", "upstream", "evalign")
#: evalign's template
TEMPLATE = "simulated_annotators"
#: upstream's placeholders -> the values of a pair shown in an order
_UPSTREAM_RE = re.compile(r"\{(instruction|assistant_a|assistant_b|preferred_response)\}")


def split_order(order: str) -> tuple[str, int]:
    """``"ab#1"`` -> (``"ab"``, annotator 1)."""
    shown, _, k = order.partition("#")
    return shown, int(k or 0)


def _sub(text: str, fields: Mapping[str, str]) -> str:
    """Upstream's ``str.format`` of its prompts, in one pass and touching no other brace."""
    return _UPSTREAM_RE.sub(lambda m: fields[m.group(1)], text)


@register_judge
class SimulatedAnnotators(PrometheusRelative):
    """Simulated annotators: K annotators' few-shot examples x both orders, the verdict token's
    probabilities averaged into ``J.p_a`` and ``J.confidence`` (see the module doc).

    Options besides the judge's own (samples, sampling, ``constrain``, ``column``...): ``fewshot``
    (the annotators' example sets, in order; none: one zero-shot annotator), ``prompt`` (``auto``,
    ``upstream`` or ``evalign``) and ``data_dir`` (where ``selective/upstream_prompts.txt`` is
    looked for; default ``$EVALIGN_DATA_DIR``)."""

    name = "simulated_annotators"
    mode = "simulated_annotators"
    description = "simulated annotators (Trust or Escalate): K annotators' few-shot examples x both orders -> J.confidence"
    uses_rubric = False
    default_template = TEMPLATE
    default_rubric = None  # type: ignore[assignment]
    sampling_defaults: ClassVar[dict[str, Any]] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 10,
                                                    "logprobs": True, "top_logprobs": 10}

    def __init__(self, *, fewshot: Sequence[AnnotatorExamples] = (), prompt: str = "auto",
                 data_dir: str | Path | None = None, both_orders: bool = True, tie: bool = False,
                 template: Any = None, **kw: Any) -> None:
        if tie:
            raise EvalignError("simulated annotators answer A or B: no tie (drop --tie)")
        if not both_orders:
            raise EvalignError("simulated annotators judge both orders (drop --single-order)")
        if prompt not in PROMPTS:
            raise UsageError(f"prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
        self.fewshot = tuple(fewshot)
        self.upstream: dict[str, str] | None = None
        self.upstream_path: str | None = None
        if template is None and prompt != "evalign":
            path = find_upstream_prompts(data_dir)
            if path is None and prompt == "upstream":
                raise EvalignError(f"upstream's prompt text is not in the data folder (need selective/{PROMPTS_FILE}: "
                                   "see docs/selective.md); use prompt 'evalign' (--fewshot-prompt evalign)")
            if path is not None:
                self.upstream, self.upstream_path = read_upstream_prompts(path), str(path)
                template = self._upstream_template(self.upstream, path)
        elif template is not None and prompt == "upstream":
            raise EvalignError("prompt 'upstream' is upstream's text: it takes no template")
        self.prompt = "upstream" if self.upstream is not None else "evalign"
        super().__init__(tie=False, both_orders=True, template=template or TEMPLATE, **kw)
        if self.template.mode != self.mode:
            raise EvalignError(f"template '{self.template.name}' is not a simulated-annotators template "
                               f"(mode {self.mode}; its mode is {self.template.mode})")

    @staticmethod
    def _upstream_template(sections: Mapping[str, str], path: Path) -> Template:
        """Upstream's prompt as a template (for the signature, the answer's shape and re-asks): its
        system prompt, and the query (placeholders renamed) after the task's instruction."""
        own = load_template(TEMPLATE)
        query = sections["fewshot_query_prompt"].replace("{assistant_a}", "{response_A}").replace(
            "{assistant_b}", "{response_B}")
        example = sections["fewshot_example_prompt"]
        return Template(name="simulated_annotators_upstream", version=1, mode=SimulatedAnnotators.mode,
                        source=f"Trust or Escalate (Jung et al., ICLR 2025) model/prompts.py, read from {path}",
                        system=sections["system_prompt"], format_hint=own.format_hint, with_reference=None,
                        without_reference=f"{sections['fewshot_inst_prompt']}\n{example}\n{query}",
                        answer=own.answer)

    # -- naming, signature and cache ------------------------------------------------------------
    @property
    def annotators(self) -> int:
        """K: the annotators simulated (1 zero-shot annotator without few-shot examples)."""
        return max(1, len(self.fewshot))

    @property
    def orders(self) -> tuple[str, ...]:
        """``ab#k`` and ``ba#k`` for each annotator ``k``."""
        return tuple(f"{o}#{k}" for k in range(self.annotators) for o in ("ab", "ba"))

    def first_order(self) -> str:
        return "ab#0"

    def extra_options(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "annotators": len(self.fewshot),
                "fewshot": fewshot_hash(self.fewshot)[:8] if self.fewshot else None}

    def template_key(self, reference: bool) -> tuple[str, int, str]:
        """The template's name and version, and a hash of its text and of every example set."""
        t = self.template
        return t.name, t.version, stable_hash([t.hash(reference), fewshot_hash(self.fewshot)])

    # -- prompts ---------------------------------------------------------------------------------
    def _shown(self, row: Mapping[str, Any], shown: str) -> dict[str, str]:
        a = "" if is_missing(row.get("response_a")) else str(row.get("response_a"))
        b = "" if is_missing(row.get("response_b")) else str(row.get("response_b"))
        first, second = (a, b) if shown == "ab" else (b, a)
        return {"instruction": pair_instruction(row, shown), "response_A": first, "response_B": second}

    def annotator_messages(self, examples: Sequence[FewshotExample], fields: Mapping[str, str]) -> list[Message]:
        """The messages asking for one annotator's verdict on a pair shown as ``fields`` (instruction,
        response_A, response_B), after that annotator's ``examples``."""
        if self.upstream is not None:
            up = self.upstream
            prompt = up["fewshot_inst_prompt"]
            for ex in examples:
                prompt += "\n" + _sub(up["fewshot_example_prompt"], {
                    "instruction": ex.instruction, "assistant_a": ex.response_a, "assistant_b": ex.response_b,
                    "preferred_response": f"[[{ex.preferred}]]"})
            prompt += "\n" + _sub(up["fewshot_query_prompt"], {
                "instruction": fields["instruction"], "assistant_a": fields["response_A"],
                "assistant_b": fields["response_B"]})
            system = up["system_prompt"]
            return [*([{"role": "system", "content": system}] if system else []), {"role": "user", "content": prompt}]
        shots: list[tuple[str, str]] = []
        for ex in examples:
            shown = {"instruction": ex.instruction, "response_A": ex.response_a, "response_B": ex.response_b}
            shots += [("user", self.template.render(False, shown)[-1]["content"]), ("assistant", f"[[{ex.preferred}]]")]
        return replace(self.template, shots=(*self.template.shots, *shots)).render(False, fields)

    def prompts(self, row: Mapping[str, Any], rubric: Rubric | None, reference: bool) -> list[tuple[str, list[Message]]]:
        out = []
        for order in self.orders:
            shown, k = split_order(order)
            examples = self.fewshot[k].examples if self.fewshot else ()
            out.append((order, self.annotator_messages(examples, self._shown(row, shown))))
        return out

    # -- parsing and verdicts ---------------------------------------------------------------------
    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        res = parse_bracketed(choice.get("text"), choice.get("finish_reason"), style="mtbench_verdict", prompt=prompt)
        if res.ok and res.verdict == "tie":  # "[[C]]": not an answer offered
            return unscored("tie_not_allowed", feedback=res.feedback)
        return with_probability(res, first_shown_probability(choice, BRACKETS))

    def call_probabilities(self, results: Mapping[tuple[int, str], ParseResult]) -> list[float]:
        """Each call's P(A better) (order ``ba``: 1 - P(first shown)), over samples, annotators and
        orders, for the calls whose answer has one."""
        out = []
        for s in range(self.samples):
            for order in self.orders:
                p = getattr(results.get((s, order)), "p_first", None)
                if p is not None:
                    out.append(p if split_order(order)[0] == "ab" else 1.0 - p)
        return out

    def aggregate(self, results: Mapping[tuple[int, str], ParseResult]) -> dict[str, Any]:
        failures: list[ParseResult] = []
        votes: dict[str, list[str]] = {"ab": [], "ba": []}
        for s in range(self.samples):
            for order in self.orders:
                r = results.get((s, order))
                if r is None or not r.ok:
                    failures.append(r if r is not None else unscored("no_score"))
                    continue
                shown, _ = split_order(order)
                v = str(r.verdict)
                votes[shown].append(SWAP_VERDICT[v] if shown == "ba" else v)
        probs = self.call_probabilities(results)
        p_a = statistics.fmean(probs) if probs else None
        if p_a is not None:
            verdict: str | None = "A" if p_a > 0.5 else "B" if p_a < 0.5 else "tie"
        else:
            verdict = _majority(votes["ab"] + votes["ba"])
        per_order = {o: _majority(v) for o, v in votes.items()}
        first = results.get((0, "ab#0"))
        scored = verdict is not None
        backend_only = bool(failures) and all(f.reason == "backend_error" for f in failures)
        return {
            "": verdict if scored else (None if backend_only else "unparseable"),
            "code": VERDICT_CODE[verdict] if verdict is not None else float("nan"),
            "ab": per_order["ab"], "ba": per_order["ba"],
            "consistent": (per_order["ab"] == per_order["ba"]) if None not in per_order.values() else None,
            "feedback": first.feedback if first is not None else None,
            "status": "scored" if scored else "unscored",
            "reason": None if not failures else reason_of(failures),
            "p_a": p_a if p_a is not None else float("nan"),
            "confidence": max(p_a, 1.0 - p_a) if p_a is not None else float("nan"),
            "confidence_source": CONFIDENCE_SOURCE if p_a is not None else None,
            "annotators": self.annotators,
            "p_calls": len(probs),
        }

    def run_notes(self, columns: Sequence[Mapping[str, Any]]) -> list[str]:
        """One line when scored pairs have no confidence because no call's answer had logprobs at the
        verdict letter (a server that returns none, or none there)."""
        scored = [c for c in columns if c.get("status") == "scored"]
        bare = sum(1 for c in scored if not c.get("p_calls"))
        if not bare:
            return []
        head = ("no answer had logprobs at the verdict letter: the server returned none" if bare == len(scored)
                else f"{bare} of {len(scored)} scored pairs had no answer with logprobs at the verdict letter")
        return [f"{self.column}: {head}, so those pairs have no confidence (J.p_a and J.confidence empty; the verdict "
                "is the majority of the answers read); serve the judge where the server returns top logprobs "
                "(llama.cpp, vLLM, OpenAI's logprobs with top_logprobs)"]

    def empty_columns(self, status: str, reason: str | None) -> dict[str, Any]:
        out = super().empty_columns(status, reason)
        out.update({"p_a": float("nan"), "confidence": float("nan"), "confidence_source": None,
                    "annotators": self.annotators, "p_calls": 0})
        return out


def _majority(verdicts: Sequence[str]) -> str | None:
    """The most common verdict (``tie`` when the top two are as common); None without any."""
    if not verdicts:
        return None
    top = Counter(verdicts).most_common()
    return "tie" if len(top) > 1 and top[0][1] == top[1][1] else top[0][0]


__all__ = ["BRACKETS", "CONFIDENCE_SOURCE", "PROMPTS", "SimulatedAnnotators", "split_order"]
