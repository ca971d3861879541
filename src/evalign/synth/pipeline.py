"""``evalign synth``: the Feedback Collection procedure of Prometheus (Kim et al. 2023) with any
evalign backend as the teacher.

1. **Rubrics.** For each of ``rounds`` rounds, ``rubrics_per_round`` brainstorming prompts, each
   showing 4 rubrics sampled (seeded) from the pool (the seed rubrics plus the rubrics kept so far);
   each new rubric is then paraphrased into one more rubric. A rubric is kept when its text (criteria
   and the five descriptions) has ROUGE-L below ``rubric_threshold`` with every rubric already kept
   (seeds included).
2. **Instructions.** For each kept rubric, ``instructions_per_rubric`` samples of the instruction
   prompt (problem + score-5 reference answer); an instruction is kept when its ROUGE-L with every
   instruction kept before is below ``instruction_threshold``.
3. **Responses and feedback.** For each instruction and each score 1-5, a response and a feedback
   that must end in "So the overall score is k" with k the target score; ``{SENT NUM}`` is the
   reference's sentence count.
4. **Balance.** Every score keeps the same number of rows (complete instructions first).

Every teacher call goes through :class:`evalign.cache.Cache` (namespace ``"synth"``) as soon as it
returns, keyed by the backend identity (never a key), the step, the prompt and the request settings
(the seed differs per sample). Killing a run and running it again therefore asks nothing twice. A
call that fails after the backend's retries is counted (``backend_error``) and asked again next run;
a fatal backend error stops the run (everything finished is cached).

The output rows have the published Feedback Collection's columns (:data:`COLUMNS`): the ``orig_*``
parts, ``instruction`` (the rendered judge prompt, ``prometheus_absolute`` by default) and ``output``
(``"<feedback> [RESULT] k"``), plus ``system`` (the template's system prompt, used by
``evalign train-judge`` so training matches how ``evalign judge`` asks) and ``mode`` (``absolute``;
``relative`` for the pairwise rows of :mod:`evalign.synth.relative`).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.backends import Generation, GenerationRequest
from evalign.cache import Cache, make_key
from evalign.errors import BackendError, EvalignError
from evalign.judges.parsing import parse_grade
from evalign.judges.prompts import Rubric, list_rubrics, load_rubric, load_template
from evalign.synth import parsing as P
from evalign.synth.filters import balance, novel
from evalign.synth.prompts import (
    N_EXAMPLES,
    brainstorm_prompt,
    instruction_prompt,
    paraphrase_prompt,
    response_prompt,
)
from evalign.synth.relative import relative_instances

NAMESPACE = "synth"
#: bump when the cache key layout changes
KEY_VERSION = 1
SCORES = (1, 2, 3, 4, 5)

#: the published Feedback Collection's columns, in order
COLUMNS = (
    "orig_instruction", "orig_response", "orig_reference_answer", "orig_criteria",
    "orig_score1_description", "orig_score2_description", "orig_score3_description",
    "orig_score4_description", "orig_score5_description", "orig_feedback", "orig_score",
    "instruction", "output",
)  # fmt: skip
#: evalign's extra columns
EXTRA_COLUMNS = ("system", "mode")

#: the filters, in the order they apply (keys of :attr:`SynthSummary.filters`)
FILTERS = (
    "backend_error",
    "rubric_unparseable",
    "rubric_near_duplicate",
    "instruction_unparseable",
    "instruction_near_duplicate",
    "response_unparseable",
    "score_mismatch",
    "output_unparseable",
    "balance_dropped",
)


@dataclass(frozen=True)
class SynthSettings:
    """Settings of one generation run (all part of the cache keys except ``balance``, the thresholds,
    ``template`` and the relative options, which act after the calls).

    * ``rounds`` (>= 0) x ``rubrics_per_round`` (>= 0) brainstorming prompts; ``paraphrase``: one
      paraphrased rubric per brainstormed one (the paper's second step).
    * ``include_seed_rubrics``: also write instructions for the seed rubrics (the paper does not).
    * ``instructions_per_rubric`` (>= 1): samples of the instruction prompt per rubric (paper: 20).
    * ``rubric_threshold``, ``instruction_threshold``: ROUGE-L F in [0, 1] at or above which a new
      rubric / instruction counts as a near-duplicate (Self-Instruct: 0.7).
    * ``balance``: equal counts per score (the paper's Feedback Collection is balanced).
    * ``template``: judge template rendering the training prompt (``prometheus_absolute``, or
      ``prometheus1_absolute`` for the published Feedback Collection's prompt).
    * ``relative``: add pairwise rows (:func:`evalign.synth.relative.relative_instances`) with
      ``relative_template``, at most ``max_pairs_per_instruction`` per instruction (None: all 10).
    * teacher sampling: ``temperature``, ``top_p``, ``max_tokens``; ``seed`` seeds the rubric sampling
      and, plus the sample index, every request.
    """

    rounds: int = 1
    rubrics_per_round: int = 4
    paraphrase: bool = True
    include_seed_rubrics: bool = False
    instructions_per_rubric: int = 20
    rubric_threshold: float = 0.7
    instruction_threshold: float = 0.7
    balance: bool = True
    template: str = "prometheus_absolute"
    relative: bool = False
    relative_template: str = "prometheus_relative"
    max_pairs_per_instruction: int | None = None
    temperature: float = 1.0
    top_p: float = 0.9
    max_tokens: int = 2048
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rounds", "rubrics_per_round"):
            if getattr(self, name) < 0:
                raise EvalignError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.instructions_per_rubric < 1:
            raise EvalignError(f"instructions_per_rubric must be >= 1, got {self.instructions_per_rubric}")
        for name in ("rubric_threshold", "instruction_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise EvalignError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.max_pairs_per_instruction is not None and self.max_pairs_per_instruction < 1:
            raise EvalignError(f"max_pairs_per_instruction must be >= 1, got {self.max_pairs_per_instruction}")
        if not (self.include_seed_rubrics or self.rounds * self.rubrics_per_round):
            raise EvalignError(f"nothing to generate: rounds={self.rounds} x rubrics_per_round="
                               f"{self.rubrics_per_round} brainstorms no rubric and include_seed_rubrics is off "
                               "(give --rounds >= 1 or --include-seed-rubrics)")

    def request(self) -> dict[str, Any]:
        """The sampling settings of every teacher request (the seed is added per call)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class SynthSummary:
    """What a run did.

    ``filters``: rows/generations removed by each filter (keys :data:`FILTERS`); ``rejected``: the
    unparseable generations of each step by reason (:data:`evalign.synth.parsing.REASONS`);
    ``length_by_score``: mean response length in words per score 1-5 of the output (the paper's
    length-balance check), ``length_by_score_before_balance`` the same before the balance step;
    ``calls``: teacher calls (``total``, ``cached``, ``new``, ``failed``).
    """

    seed_rubrics: int
    rubrics: int
    instructions: int
    rows: int
    relative_rows: int
    rows_by_score: Mapping[str, int]
    filters: Mapping[str, int]
    rejected: Mapping[str, Mapping[str, int]]
    length_by_score: Mapping[str, float]
    length_by_score_before_balance: Mapping[str, float]
    calls: Mapping[str, int]
    template: str
    backend: Mapping[str, Any]
    settings: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return json.loads(json.dumps(asdict(self), default=str))

    def empty_reason(self) -> str | None:
        """Why the run wrote no training row (the first step that kept nothing, with what its filters
        removed), or None when it wrote rows."""
        if self.rows:
            return None
        f = self.filters
        if not self.rubrics:
            return (f"no rubric was kept ({f['rubric_unparseable']} unparseable, {f['rubric_near_duplicate']} "
                    f"near-duplicates, {f['backend_error']} failed calls)")
        if not self.instructions:
            return (f"no instruction was kept for the {self.rubrics} rubrics ({f['instruction_unparseable']} "
                    f"unparseable, {f['instruction_near_duplicate']} near-duplicates, {f['backend_error']} failed "
                    "calls)")
        if f["balance_dropped"]:
            missing = [k for k, n in self.length_by_score_before_balance.items() if n != n]  # NaN: no row
            return (f"balancing dropped all {f['balance_dropped']} valid rows (no response was graded "
                    f"{', '.join(missing)}); give --no-balance to keep them")
        return (f"no response of the {self.instructions} instructions was usable ({f['response_unparseable']} "
                f"unparseable, {f['score_mismatch']} with another score, {f['output_unparseable']} with an "
                f"unparseable output, {f['backend_error']} failed calls)")


@dataclass
class SynthResult:
    """The generated table (``table``, columns :data:`COLUMNS` + :data:`EXTRA_COLUMNS`, relative rows
    with their own ``orig_*`` columns), the kept rubrics and the :class:`SynthSummary`."""

    table: pd.DataFrame
    rubrics: list[Rubric]
    summary: SynthSummary
    rejected_examples: list[dict[str, Any]] = field(default_factory=list, repr=False)


# --- seeds ----------------------------------------------------------------------------------------


def load_seed_rubrics(specs: Sequence[str | Path] | None = None) -> list[Rubric]:
    """Seed rubrics: built-in rubric names, rubric files (YAML/JSON, the form ``load_rubric`` reads) or
    folders of such files; None or empty = every built-in rubric. At least 4 are needed."""
    names: list[str | Path] = list(specs) if specs else list(list_rubrics())
    out: list[Rubric] = []
    for s in names:
        p = Path(s)
        if p.is_dir():
            files = sorted([*p.glob("*.yaml"), *p.glob("*.yml"), *p.glob("*.json")])
            if not files:
                raise EvalignError(f"{p}: no rubric files (.yaml/.yml/.json) in this folder")
            out.extend(load_rubric(f) for f in files)
        else:
            out.append(load_rubric(s))
    if len(out) < N_EXAMPLES:
        raise EvalignError(f"brainstorming needs at least {N_EXAMPLES} seed rubrics, got {len(out)}")
    return out


def rubric_text(r: Rubric) -> str:
    """The text near-duplicate rubrics are compared on: the criteria and the five descriptions."""
    return "\n".join([r.criteria, *r.descriptions])


# --- the teacher ----------------------------------------------------------------------------------


class _Teacher:
    """Cached calls to the backend; counts calls and failures."""

    def __init__(self, backend: Any, cache: Cache, settings: SynthSettings) -> None:
        self.backend = backend
        self.cache = cache
        self.identity = backend.identity()
        self.request = settings.request()
        self.seed = settings.seed
        self.calls: Counter[str] = Counter()

    async def ask(self, step: str, prompts: Sequence[tuple[str, int]]) -> list[dict[str, Any] | None]:
        """One generation per ``(prompt, sample)``: the cached or new Generation JSON, None on failure."""
        keys = [make_key(NAMESPACE, KEY_VERSION, self.identity, step, p, self.request, self.seed + s)
                for p, s in prompts]
        stored = self.cache.get_many(NAMESPACE, keys)
        out: dict[str, dict[str, Any] | None] = {k: json.loads(v.decode("utf-8")) for k, v in stored.items()}
        todo: list[int] = []
        seen: set[str] = set(out)
        for i, k in enumerate(keys):  # one call per distinct key
            if k not in seen:
                seen.add(k)
                todo.append(i)
        self.calls["total"] += len(set(keys))
        self.calls["cached"] += len(stored)
        reqs = [GenerationRequest(messages=[{"role": "user", "content": prompts[i][0]}],
                                  seed=self.seed + prompts[i][1], **self.request) for i in todo]

        def on_done(j: int, res: Generation | BackendError) -> None:
            key = keys[todo[j]]
            if isinstance(res, Generation):
                data = res.to_json()
                self.cache.put(NAMESPACE, key, json.dumps(data, ensure_ascii=False).encode("utf-8"))
                out[key] = data
                self.calls["new"] += 1
            else:
                out[key] = None
                self.calls["failed"] += 1

        if reqs:
            await self.backend.generate_many(reqs, on_done)
        return [out.get(k) for k in keys]


def _text(gen: dict[str, Any]) -> tuple[str, str | None]:
    c = gen["choices"][0]
    return c.get("text") or "", c.get("finish_reason")


# --- the run --------------------------------------------------------------------------------------


class _Run:
    """The state of one generation run: the teacher, the filter counts and the rejected examples."""

    def __init__(self, teacher: _Teacher, settings: SynthSettings, template: Any) -> None:
        self.teacher = teacher
        self.settings = settings
        self.template = template
        self.filters: Counter[str] = Counter({k: 0 for k in FILTERS})
        self.rejected: dict[str, Counter[str]] = {
            s: Counter() for s in ("brainstorm", "paraphrase", "instruction", "response")
        }
        self.examples: list[dict[str, Any]] = []

    def reject(self, step: str, r: P.Rejected, text: str) -> None:
        self.rejected[step][r.reason] += 1
        if len(self.examples) < 50:
            self.examples.append({"step": step, "reason": r.reason, "detail": r.detail, "text": text[:300]})

    def _parsed_rubrics(self, step: str, gens: Sequence[dict[str, Any] | None],
                        names: Sequence[str]) -> list[Rubric | None]:
        """Each generation parsed as a rubric (None where it failed or was rejected, counted)."""
        out: list[Rubric | None] = []
        for g, name in zip(gens, names, strict=True):
            if g is None:
                self.filters["backend_error"] += 1
                out.append(None)
                continue
            text, fin = _text(g)
            res = P.parse_rubric(text, fin, name=name)
            if isinstance(res, P.Rejected):
                self.reject(step, res, text)
                self.filters["rubric_unparseable"] += 1
                out.append(None)
            else:
                out.append(res)
        return out

    async def rubric_round(self, rnd: int, pool: list[Rubric], kept_texts: list[str]) -> list[Rubric]:
        """Step 1, one round: brainstorm, paraphrase, keep the novel rubrics (``pool`` and
        ``kept_texts`` grow by them)."""
        settings = self.settings
        rng = random.Random(f"evalign-synth:{settings.seed}:{rnd}")
        shown = [rng.sample(pool, N_EXAMPLES) for _ in range(settings.rubrics_per_round)]
        gens = await self.teacher.ask("brainstorm", [(brainstorm_prompt(ex), rnd * 100_003 + b)
                                                     for b, ex in enumerate(shown)])
        names = [f"synth-r{rnd}-b{b}" for b in range(len(gens))]
        brainstormed = [r for r in self._parsed_rubrics("brainstorm", gens, names) if r is not None]
        paraphrased: list[Rubric | None] = [None] * len(brainstormed)
        if settings.paraphrase and brainstormed:
            pg = await self.teacher.ask("paraphrase", [(paraphrase_prompt(r), 0) for r in brainstormed])
            paraphrased = self._parsed_rubrics("paraphrase", pg, [f"{r.name}-p" for r in brainstormed])
        candidates: list[Rubric] = []
        for r, p in zip(brainstormed, paraphrased, strict=True):
            candidates.append(r)
            if p is not None:
                candidates.append(p)
        keep = novel([rubric_text(r) for r in candidates], kept_texts, threshold=settings.rubric_threshold)
        new: list[Rubric] = []
        for r, k in zip(candidates, keep, strict=True):
            if k:
                new.append(r)
                pool.append(r)
                kept_texts.append(rubric_text(r))
            else:
                self.filters["rubric_near_duplicate"] += 1
        return new

    async def rubrics(self, seeds: Sequence[Rubric]) -> list[Rubric]:
        """Step 1: the rubrics that instructions are written for."""
        pool = list(seeds)
        kept_texts = [rubric_text(r) for r in seeds]
        new_rubrics: list[Rubric] = []
        for rnd in range(self.settings.rounds):
            new_rubrics.extend(await self.rubric_round(rnd, pool, kept_texts))
        return [*(seeds if self.settings.include_seed_rubrics else []), *new_rubrics]

    async def instructions(self, rubrics: Sequence[Rubric]) -> list[tuple[Rubric, P.InstructionPair]]:
        """Step 2: instructions (with reference answers) per rubric, near-duplicates left out."""
        n = self.settings.instructions_per_rubric
        asks = [(instruction_prompt(r), s) for r in rubrics for s in range(n)]
        owners = [r for r in rubrics for _ in range(n)]
        gens = await self.teacher.ask("instruction", asks)
        parsed: list[tuple[Rubric, P.InstructionPair]] = []
        for rub, g in zip(owners, gens, strict=True):
            if g is None:
                self.filters["backend_error"] += 1
                continue
            text, fin = _text(g)
            res = P.parse_instruction(text, fin)
            if isinstance(res, P.Rejected):
                self.reject("instruction", res, text)
                self.filters["instruction_unparseable"] += 1
            else:
                parsed.append((rub, res))
        keep = novel([p.instruction for _, p in parsed], threshold=self.settings.instruction_threshold)
        self.filters["instruction_near_duplicate"] += keep.count(False)
        return [x for x, k in zip(parsed, keep, strict=True) if k]

    async def responses(self, instructions: Sequence[tuple[Rubric, P.InstructionPair]]) -> list[dict[str, Any]]:
        """Step 3: per instruction and score 1-5, a response and its feedback as a row (``_group``:
        the instruction's index)."""
        asks = [(response_prompt(p.instruction, r, p.reference, k), 0) for r, p in instructions for k in SCORES]
        targets = [(j, k) for j in range(len(instructions)) for k in SCORES]
        gens = await self.teacher.ask("response", asks)
        rows: list[dict[str, Any]] = []
        for (j, k), g in zip(targets, gens, strict=True):
            row = self._response_row(g, instructions[j], k)
            if row is not None:
                row["_group"] = j
                rows.append(row)
        return rows

    def _response_row(self, g: dict[str, Any] | None, instruction: tuple[Rubric, P.InstructionPair],
                      k: int) -> dict[str, Any] | None:
        """The row of one response generation for target score ``k`` (None when filtered, counted)."""
        if g is None:
            self.filters["backend_error"] += 1
            return None
        text, fin = _text(g)
        res = P.parse_response_feedback(text, fin)
        if isinstance(res, P.Rejected):
            self.reject("response", res, text)
            self.filters["response_unparseable"] += 1
            return None
        if res.stated_score != k:
            self.filters["score_mismatch"] += 1
            return None
        rub, pair = instruction
        row = feedback_row(self.template, rub, pair.instruction, res.response, pair.reference, res.feedback, k)
        check = parse_grade(row["output"], "absolute")
        if check.value != k:  # e.g. a feedback that itself contains "[RESULT] n"
            self.filters["output_unparseable"] += 1
            return None
        return row

    def balanced(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Step 4: equal counts per score (when asked), the ``_group`` helper column removed."""
        if self.settings.balance:
            mask = balance([r["orig_score"] for r in rows], [r["_group"] for r in rows])
            self.filters["balance_dropped"] += mask.count(False)
            rows = [r for r, m in zip(rows, mask, strict=True) if m]
        for r in rows:
            r.pop("_group")
        return rows

    def with_relative(self, table: pd.DataFrame) -> pd.DataFrame:
        """The absolute rows plus the pairwise ones (when asked and there are rows)."""
        settings = self.settings
        if not (settings.relative and len(table)):
            return table
        rel = relative_instances(table, template=settings.relative_template,
                                 max_pairs_per_instruction=settings.max_pairs_per_instruction, seed=settings.seed)
        table = pd.concat([table, rel], ignore_index=True)
        for c in ("orig_score", "orig_score_A", "orig_score_B"):  # ints, None where not applicable
            table[c] = pd.Series([None if pd.isna(v) else int(v) for v in table[c]], dtype=object)
        return table


async def arun_synth(
    seeds: Sequence[Rubric], backend: Any, settings: SynthSettings, *, cache: Cache | None = None
) -> SynthResult:
    """Async form of :func:`run_synth`."""
    if len(seeds) < N_EXAMPLES and settings.rounds and settings.rubrics_per_round:
        raise EvalignError(f"brainstorming needs at least {N_EXAMPLES} seed rubrics, got {len(seeds)}")
    template = load_template(settings.template)
    if template.mode != "absolute":
        raise EvalignError(f"template '{settings.template}' is a {template.mode} template; synth renders "
                           "absolute grading prompts (use prometheus_absolute or prometheus1_absolute)")
    teacher = _Teacher(backend, cache if cache is not None else Cache(), settings)
    run = _Run(teacher, settings, template)
    rubrics = await run.rubrics(seeds)
    instructions = await run.instructions(rubrics)
    rows = await run.responses(instructions)
    before = _length_by_score(rows)
    rows = run.balanced(rows)
    absolute = pd.DataFrame(rows, columns=[*COLUMNS, *EXTRA_COLUMNS])
    table = run.with_relative(absolute)
    summary = SynthSummary(
        seed_rubrics=len(seeds),
        rubrics=len(rubrics),
        instructions=len(instructions),
        rows=len(absolute),
        relative_rows=len(table) - len(absolute),
        rows_by_score={str(k): sum(1 for r in rows if r["orig_score"] == k) for k in SCORES},
        filters=dict(run.filters),
        rejected={s: dict(c.most_common()) for s, c in run.rejected.items()},
        length_by_score=_length_by_score(rows),
        length_by_score_before_balance=before,
        calls={k: int(teacher.calls[k]) for k in ("total", "cached", "new", "failed")},
        template=template.tag(True),
        backend=dict(teacher.identity),
        settings=asdict(settings),
    )
    return SynthResult(table, rubrics, summary, run.examples)


def run_synth(
    seeds: Sequence[Rubric], backend: Any, settings: SynthSettings | None = None, *, cache: Cache | None = None
) -> SynthResult:
    """Run the four generation steps with ``backend`` as the teacher (see the module doc); blocking.

    ``cache``: where teacher calls are stored and looked up (default: the project cache).
    Raises :class:`~evalign.errors.BackendError` on a fatal backend error (finished calls are cached).
    """

    async def main() -> SynthResult:
        try:
            return await arun_synth(seeds, backend, settings or SynthSettings(), cache=cache)
        finally:
            await backend.aclose()

    return asyncio.run(main())


def feedback_row(template: Any, rubric: Rubric, instruction: str, response: str, reference: str,
                 feedback: str, score: int) -> dict[str, Any]:
    """One Feedback Collection row: the ``orig_*`` parts, the rendered prompt (``instruction``), the
    template's system prompt (``system``) and ``output`` = ``"<feedback> [RESULT] <score>"``."""
    system, prompt = template.render_single_turn(True, {"instruction": instruction, "response": response,
                                                        "reference_answer": reference, "rubric": rubric.render()})
    row: dict[str, Any] = {
        "orig_instruction": instruction,
        "orig_response": response,
        "orig_reference_answer": reference,
        "orig_criteria": rubric.criteria,
    }
    row.update({f"orig_score{i + 1}_description": d for i, d in enumerate(rubric.descriptions)})
    row.update({
        "orig_feedback": feedback,
        "orig_score": int(score),
        "instruction": prompt,
        "output": f"{feedback} [RESULT] {score}",
        "system": system or "",
        "mode": "absolute",
    })
    return row


def _length_by_score(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in SCORES:
        lens = [len(str(r["orig_response"]).split()) for r in rows if r["orig_score"] == k]
        out[str(k)] = round(sum(lens) / len(lens), 2) if lens else float("nan")
    return out
