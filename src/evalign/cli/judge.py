"""``evalign judge``: grade responses (or response pairs) with an LLM judge.

Every call is cached as soon as it returns, so an interrupted run resumes by running the same command
again; ``OUT.partial.jsonl`` logs finished calls while the run goes on and the final table is written
atomically at the end (with ``OUT``'s summary beside it as ``OUT.summary.json``).

Output columns (``J`` = the judge's column, ``--name`` or e.g. ``prometheus_absolute[helpfulness]``):
``J`` is the score (item judges; direction in the summary's ``higher_is_better``, False for G-Eval) or
the verdict ``A`` / ``B`` / ``tie`` / ``unparseable`` (pair judges); ``J.status`` (scored / unscored /
skipped), ``J.reason``, ``J.feedback``, ``J.error`` (the backend's message), plus per mode ``J.method``
(G-Eval), ``J.code`` (+1 A, -1 B, 0 tie), ``J.naturalness`` / ``J.relatedness`` / ``J.correctness``,
``J.score_a`` / ``J.score_b`` / ``J.rounds`` (ranking).

Prometheus' ranking protocol on preference data (grade A and B with the absolute prompt, re-grade
ties at temperature 1.0 up to ``--max-rounds``), with the papers' criteria::

    # HHH alignment (bundled): each subset's rubric of the Prometheus HHH benchmark
    evalign judge --dataset hhh --mode absolute --ranking --rubric-column task --rubric-map hhh \
        --base-url http://localhost:8000/v1 --model prometheus-7b-v2.0 -o hhh_ranking.jsonl
    # MT-Bench human judgments (LLMBar's processed subset, read from $EVALIGN_DATA_DIR/llmbar)
    evalign judge --dataset llmbar:mt-bench --mode absolute --ranking --rubric human_preference \
        --base-url http://localhost:8000/v1 --model prometheus-7b-v2.0 -o mtbench_ranking.jsonl

The column ``J`` of the output holds the verdicts, read into preference accuracy like a relative judge's.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table

from evalign.backends import (
    BACKENDS,
    Backend,
    BackendOptions,
    backend_class,
    create_backend,
    missing_options,
    public_url,
    returns_scores,
)
from evalign.backends.spec import api_key_env_problem, key_env_of
from evalign.cache import Cache
from evalign.cli.batch_options import (
    BATCH_API,
    BATCH_MAX_REQUESTS,
    BATCH_POLL,
    BATCH_RETRIES,
    BATCH_RETRY,
    batch_block,
    check_batch_options,
    with_batch,
)
from evalign.cli.common import (
    ID_FIELD,
    INPUT_FIELD,
    INSTRUCTION_FIELD,
    REFERENCE_FIELD,
    RESPONSE_FIELD,
    SYSTEM_FIELD,
    CliError,
    cache_input,
    console,
    emit_json,
    err_console,
    field_map,
    fmt_value,
    progress,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table
from evalign.cli.judge_panel import PANEL_ALL, PANEL_MEMBER
from evalign.cli.panel_options import (
    PANEL_CALIBRATION,
    PANEL_MIN,
    PANEL_RULE,
    PANEL_SOFT,
    PANEL_TIE,
    check_panel_options,
)
from evalign.cli.simulated_options import (
    FEWSHOT,
    FEWSHOT_EXAMPLES,
    FEWSHOT_PROMPT,
    SIMULATED_ANNOTATORS,
    simulated_options,
)
from evalign.errors import InputError, UsageError
from evalign.io import read_items, refuse_output_onto_inputs, write_json_atomic, write_table
from evalign.judges.base import Judge, judge_class, judge_for_backend
from evalign.judges.bias import LENGTH_UNITS
from evalign.judges.option_rules import backend_option_problem, check_constrain
from evalign.judges.parsing import REASONS
from evalign.judges.prompts import sampling_problem
from evalign.judges.runner import TURNS as TURN_MODES
from evalign.judges.runner import JudgeRun, failed_too_often, read_pairs, run_judge
from evalign.judges.spec import JudgeSpec, make_judge
from evalign.judges.usage import Price, parse_price, price_book

# --- the options, declared once ------------------------------------------------------------------

FILE = typer.Argument(None, help="Items (or, for pairwise, a pair table): JSONL, JSON, CSV, Parquet.")
MODE = typer.Option("absolute", "--mode", help="absolute | pairwise (relative) | geval | criteria | mtbench_single | "
                    "mtbench_pair | arena_hard (or a plugin judge); with --backend reward: absolute (each response's "
                    "reward) or pairwise (A vs B by the rewards).")
TURNS = typer.Option("last", "--turns", help="Conversations (messages / messages_a, messages_b): 'last' grades the "
                     "last assistant turn in context; 'each' grades every assistant turn (one output row per turn).")
PRICE = typer.Option(None, "--price", help="The judge's price per million input/output tokens, IN/OUT (e.g. 2.5/10): "
                     "the summary shows the cost per 1,000 items.")
PRICES = typer.Option(None, "--prices", help="A price file (YAML: model name or glob -> {input, output} per million "
                      "tokens); default: $EVALIGN_PRICES.")
RANKING = typer.Option(False, "--ranking", help="With --mode absolute on a pair table: grade A and B "
                       "independently, re-grade ties (Prometheus' ranking protocol).")
MAX_ROUNDS = typer.Option(5, "--max-rounds", help="--ranking: most grading rounds before a tie is called.")
RUBRIC = typer.Option(None, "--rubric", help="Built-in rubric name or a .yaml/.json rubric file.")
RUBRIC_COLUMN = typer.Option(None, "--rubric-column", help="Column with a rubric per row (JSON or a rubric name).")
RUBRIC_MAP = typer.Option(None, "--rubric-map", help="VALUE=RUBRIC for the rubric column's values "
                          "(repeatable), or a built-in map: hhh (the HHH subsets' rubrics).")
TEMPLATE = typer.Option(None, "--template", help="Built-in template name or a template file.")
BACKEND = typer.Option("openai", "--backend", help="openai (any OpenAI-compatible server), anthropic (the Messages "
                       "API), gemini (generateContent), hf, reward (a reward "
                       "model: a sequence classifier that scores each response), or a plugin backend.")
SYSTEM_PROMPT = typer.Option("role", "--system-prompt", help="openai: 'role' (a system message) or 'fold' "
                             "(prepended to the user turn, for chat templates without a system role).")
BASE_URL = typer.Option(None, "--base-url", help="API root, e.g. http://localhost:8000/v1; "
                        "repeat it to spread calls over several servers of the same model.")
MODEL = typer.Option(None, "--model", help="Model name (openai); hf: a model folder, a GGUF file or the alias smollm2-135m-instruct.")
API_KEY_ENV = typer.Option(None, "--api-key-env", help="Environment variable holding the API key (never logged); "
                           "default by backend: OPENAI_API_KEY, ANTHROPIC_API_KEY (anthropic), GEMINI_API_KEY (gemini).")
SAMPLES = typer.Option(1, "--samples", help="Grades drawn per item (mean, median, std reported).")
CONCURRENCY = typer.Option(8, "--concurrency", help="Requests in flight at most (openai).")
BATCH_SIZE = typer.Option(8, "--batch-size", help="Prompts per batch (hf).")
DEVICE = typer.Option(None, "--device", help="Device of the hf backend (cpu, cuda, ...).")
TEMPERATURE = typer.Option(None, "--temperature", help="Sampling temperature (judge default).")
TOP_P = typer.Option(None, "--top-p", help="Nucleus sampling (judge default).")
MAX_TOKENS = typer.Option(None, "--max-tokens", help="Most tokens per judge output.")
REPETITION_PENALTY = typer.Option(None, "--repetition-penalty", help="Where the server supports it; 0 = not sent.")
SEED = typer.Option(None, "--seed", help="Sampling seed (sample s uses seed + s).")
GRAMMAR = typer.Option(None, "--grammar", help="GBNF grammar file constraining the output instead of the template's "
                       "answer shape (llama.cpp, vLLM, hf).")
CONSTRAIN = typer.Option("auto", "--constrain", help="Constrain each answer to its template's shape: auto (where the "
                         "backend can; else one line and unconstrained), on (or stop), off.")
PROMPT_CACHE = typer.Option("auto", "--prompt-cache", help="The provider's prompt cache: auto (on where the "
                            "provider has it: anthropic 5-minute cache_control, OpenAI prompt_cache_key, Gemini "
                            "implicit), 5m or 1h (Anthropic's TTL), off.")
SERVICE_TIER = typer.Option(None, "--service-tier", help="OpenAI's service tier, e.g. flex (slower, priced as batch: "
                            "the price file's batch multiplier).")
CONSTRAINT_FORMAT = typer.Option("auto", "--constraint-format", help="openai: how the server takes a constraint: "
                                 "auto (from GET /models), llama.cpp (GBNF), vllm (structured_outputs), openai "
                                 "(JSON schema only).")
REASK = typer.Option(0, "--reask", help="Ask again up to K times when an output cannot be parsed.")
TIE = typer.Option(False, "--tie", help="Pairwise: offer TIE as an answer.")
TIE_MARGIN = typer.Option(0.0, "--tie-margin", help="--backend reward --mode pairwise: a tie when |reward A - reward B| "
                          "is at most this (default 0: a tie only for equal rewards).")
LOGIT_BIAS = typer.Option(False, "--logit-bias", help="LLMBar templates: decode with upstream's logit bias "
                          "(tokens_to_avoid -100, tokens_to_favor +7; servers that take token texts, e.g. llama-cpp-python).")
SINGLE_ORDER = typer.Option(False, "--single-order", help="Pairwise: judge only the A/B order.")
NO_REFERENCE = typer.Option(False, "--no-reference", help="Use the reference-free template.")
SKIP_SELF = typer.Option(None, "--skip-self", help="Skip rows whose system matches this glob "
                         "(repeatable, e.g. 'gpt-4*'; 'self' = the judge model's name).")
GEVAL_FALLBACK = typer.Option("samples", "--geval-fallback", help="G-Eval when the server returns no "
                              "logprobs: 'samples' (read the sampled score) or 'error' (row unscored).")
GEVAL_MIN_MASS = typer.Option(0.5, "--geval-min-mass", help="G-Eval: least total probability of the "
                              "score tokens at the score position (0-1); below it the row is unscored.")
CRITERIA_OPT = typer.Option(None, "--criteria", help="criteria: grade these criteria in one call (repeatable: a "
                            "built-in rubric name or a rubric file each), each its own column J.<name>, 1-5.")
SCORE_CRITERION = typer.Option(None, "--score-criterion", help="criteria: the score column's criterion "
                               "(naturalness, relatedness, correctness; default correctness).")
MAX_FAILED = typer.Option(0.5, "--max-failed", help="Exit 1 when more than this fraction of the calls "
                          "failed after retries (0-1).")
NO_CACHE = typer.Option(False, "--no-cache", help="Make every call anew (new outputs are stored).")
HUMAN = typer.Option(None, "--human", help="Human rating column (length bias within each grade).")
LENGTH_UNIT = typer.Option("chars", "--length-unit", help="chars or words (length-bias audit).")
NAME = typer.Option(None, "--name", help="Column name of the judge's scores.")
LIMIT = typer.Option(None, "--limit", help="Judge only the first N rows.")
TIMEOUT = typer.Option(120.0, "--timeout", help="Seconds to wait for an answer to start (openai; an answer that "
                       "is still streaming is never cut: see --idle-timeout).")
IDLE_TIMEOUT = typer.Option(120.0, "--idle-timeout", help="Seconds without a byte from a started answer before it "
                            "is abandoned (openai; a server that keeps streaming is waited for).")
STREAM = typer.Option(False, "--stream/--no-stream", help="Ask the server to stream its answers (openai; without "
                      "it --timeout bounds the whole answer). A llama-cpp-python server must then run with "
                      "--interrupt_requests False.")
MAX_UNPARSEABLE = typer.Option(2, "--max-unparseable-rounds", help="--ranking: rounds with an unparseable grade "
                               "before a pair is given up (unparseable).")
CONNECT_TIMEOUT = typer.Option(10.0, "--connect-timeout", help="Seconds to connect to the server (openai).")
DEADLINE = typer.Option(None, "--deadline", help="Seconds for all requests together; past it the run "
                        "stops (finished calls stay cached).")
MAX_RETRIES = typer.Option(6, "--max-retries", help="Retries per request on 429/5xx/timeouts.")
OUT = typer.Option(None, "--out", "-o", help="Judged table (.jsonl/.csv/.parquet).")
SYSTEM = typer.Option(None, "--system", help="System name for records without one.")
AS_JSON = typer.Option(False, "--json", help="Print the run summary as JSON.")
TOP_LOGPROBS = typer.Option(None, "--top-logprobs", help="Ask for the top K logprobs of each answer token: pair "
                            "judges then give J.p_a (P(A better), both orders mapped back), graded ones J.p.")
CASCADE_CAL = typer.Option(None, "--cascade", help="Run the cascade of CAL.json (evalign meta --selective "
                           "--save-calibration): each judge called only on what the earlier ones left; -o gets the "
                           "decided items, --rest those left for people.")
REST = typer.Option(None, "--rest", help="With --cascade: the items left for people (a pair or item table).")
AUDIT = typer.Option(0.0, "--audit", help="With --cascade: share of the decided items also sent to people, at "
                     "random (seeded by --seed), marked audit.")


@dataclass(frozen=True)
class JudgeCommand:
    """The options of one ``evalign judge`` call, as given on the command line."""

    file: Path | None
    mode: str
    ranking: bool
    max_rounds: int
    max_unparseable_rounds: int
    dataset: str | None
    data_dir: Path | None
    rubric: str | None
    rubric_column: str | None
    rubric_map: list[str] | None
    template: str | None
    backend: str
    system_prompt: str
    base_url: list[str] | None
    model: str | None
    api_key_env: str | None
    samples: int
    concurrency: int
    batch_size: int
    device: str | None
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    repetition_penalty: float | None
    seed: int | None
    grammar: Path | None
    constrain: str
    constraint_format: str
    reask: int
    tie: bool
    tie_margin: float
    logit_bias: bool
    single_order: bool
    no_reference: bool
    skip_self: list[str] | None
    geval_fallback: str
    geval_min_mass: float
    criteria: list[str] | None
    score_criterion: str | None
    max_failed: float
    no_cache: bool
    human: str | None
    length_unit: str
    name: str | None
    limit: int | None
    timeout: float
    connect_timeout: float
    deadline: float | None
    idle_timeout: float
    stream: bool
    max_retries: int
    out: Path | None
    id_field: str | None
    system_field: str | None
    instruction_field: str | None
    input_field: str | None
    reference_field: str | None
    response_field: str | None
    system: str | None
    as_json: bool
    turns: str = "last"
    price: str | None = None
    prices: Path | None = None
    top_logprobs: int | None = None
    cascade: Path | None = None
    rest: Path | None = None
    audit: float = 0.0
    simulated_annotators: int | None = None
    fewshot: Path | None = None
    fewshot_examples: int = 3
    fewshot_prompt: str = "auto"
    batch_api: bool = False
    batch_max_requests: int | None = None
    batch_retries: int = 2
    batch_retry: str = "batch"
    batch_poll: float = 30.0
    prompt_cache: str = "auto"
    service_tier: str | None = None
    panel_member: list[str] | None = None
    panel_all: bool = False
    panel_rule: str = "majority"
    panel_tie: str = "tie"
    panel_min: int = 1
    panel_calibration: Path | None = None
    panel_soft: bool = False

    def backend_options(self) -> BackendOptions:
        """The backend's settings (each backend takes what it needs)."""
        return BackendOptions(
            model=self.model, base_url=list(self.base_url) if self.base_url else None,
            api_key_env=key_env_of(self.backend, self.api_key_env), concurrency=self.concurrency, timeout=self.timeout,
            max_retries=self.max_retries, connect_timeout=self.connect_timeout, deadline=self.deadline,
            idle_timeout=self.idle_timeout, stream=self.stream, system_prompt=self.system_prompt, device=self.device, batch_size=self.batch_size,
            constraint_format=self.constraint_format if self.constraint_format != "auto" else None,
            prompt_cache=self.prompt_cache if self.prompt_cache != "auto" else None, service_tier=self.service_tier,
        )  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add ``judge`` to ``app``."""
    app.command("judge")(judge_cmd)


def judge_cmd(
    file: Path = FILE, mode: str = MODE, ranking: bool = RANKING, max_rounds: int = MAX_ROUNDS,
    max_unparseable_rounds: int = MAX_UNPARSEABLE,
    dataset: str = DATASET, data_dir: Path = DATA_DIR, rubric: str = RUBRIC, rubric_column: str = RUBRIC_COLUMN,
    rubric_map: list[str] = RUBRIC_MAP, template: str = TEMPLATE, backend: str = BACKEND,
    system_prompt: str = SYSTEM_PROMPT, base_url: list[str] = BASE_URL, model: str = MODEL,
    api_key_env: str | None = API_KEY_ENV, samples: int = SAMPLES, concurrency: int = CONCURRENCY,
    batch_size: int = BATCH_SIZE, device: str = DEVICE, temperature: float = TEMPERATURE, top_p: float = TOP_P,
    max_tokens: int = MAX_TOKENS, repetition_penalty: float = REPETITION_PENALTY, seed: int = SEED,
    grammar: Path = GRAMMAR, constrain: str = CONSTRAIN, constraint_format: str = CONSTRAINT_FORMAT, reask: int = REASK,
    tie: bool = TIE, tie_margin: float = TIE_MARGIN, logit_bias: bool = LOGIT_BIAS,
    single_order: bool = SINGLE_ORDER,
    no_reference: bool = NO_REFERENCE, skip_self: list[str] = SKIP_SELF, geval_fallback: str = GEVAL_FALLBACK,
    geval_min_mass: float = GEVAL_MIN_MASS, criteria: list[str] = CRITERIA_OPT, score_criterion: str = SCORE_CRITERION, max_failed: float = MAX_FAILED,
    no_cache: bool = NO_CACHE, human: str = HUMAN, length_unit: str = LENGTH_UNIT, name: str = NAME,
    limit: int = LIMIT, timeout: float = TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
    deadline: float = DEADLINE, idle_timeout: float = IDLE_TIMEOUT, stream: bool = STREAM, max_retries: int = MAX_RETRIES, out: Path = OUT, id_field: str = ID_FIELD,
    system_field: str = SYSTEM_FIELD, instruction_field: str = INSTRUCTION_FIELD, input_field: str = INPUT_FIELD,
    reference_field: str = REFERENCE_FIELD, response_field: str = RESPONSE_FIELD, system: str = SYSTEM,
    as_json: bool = AS_JSON, turns: str = TURNS, price: str = PRICE, prices: Path = PRICES,
    top_logprobs: int = TOP_LOGPROBS, cascade: Path = CASCADE_CAL, rest: Path = REST, audit: float = AUDIT,
    simulated_annotators: int = SIMULATED_ANNOTATORS, fewshot: Path = FEWSHOT, fewshot_examples: int = FEWSHOT_EXAMPLES,
    fewshot_prompt: str = FEWSHOT_PROMPT, prompt_cache: str = PROMPT_CACHE, service_tier: str = SERVICE_TIER,
    batch_api: bool = BATCH_API, batch_max_requests: int = BATCH_MAX_REQUESTS,
    batch_retries: int = BATCH_RETRIES, batch_retry: str = BATCH_RETRY, batch_poll: float = BATCH_POLL,
    panel_member: list[str] = PANEL_MEMBER, panel_all: bool = PANEL_ALL,
    panel_rule: str = PANEL_RULE, panel_tie: str = PANEL_TIE, panel_min: int = PANEL_MIN,
    panel_calibration: Path = PANEL_CALIBRATION, panel_soft: bool = PANEL_SOFT,
) -> None:
    """Grade every response with an LLM judge (Prometheus absolute / pairwise, G-Eval, criteria)."""
    o = JudgeCommand(**locals())  # every option, as given
    _validate(o)
    refuse_output_onto_inputs(judge_outputs(o), judge_inputs(o))
    from evalign.cli.judge_cascade import cascade_cmd, summary_spec

    if o.cascade is not None:
        cascade_cmd(o, _load_table)
        return
    check_panel_options(bool(o.panel_member), o.panel_rule, o.panel_tie, o.panel_min, o.panel_soft,
                        o.panel_calibration)
    if o.panel_all and not o.panel_member:
        raise UsageError("--panel-all goes with --panel-member")
    if o.panel_member:
        from evalign.cli.judge_panel import panel_cmd

        panel_cmd(o, _load_table, judge_spec, _judge_mode)
        return
    if o.rest is not None or o.audit:
        raise CliError("--rest and --audit go with --cascade")
    base = JudgeSpec(mode=_judge_mode(o), template=o.template, constrain=o.constrain)
    simulated = simulated_options(o, base.mode)  # --simulated-annotators: its options checked, the few-shot file read
    if simulated is not None:
        base = JudgeSpec(mode="simulated_annotators", constrain=o.constrain)
    table = _load_table(o, base.judge_class.pairwise)
    spec = judge_spec(o, base)
    recorded = {**({"template": o.template} if o.template else {}), **spec.judge_options()}
    if simulated is not None:  # (the summary names the few-shot file, not the examples read from it)
        recorded.update(fewshot=str(o.fewshot), annotators=o.simulated_annotators, prompt=o.fewshot_prompt)
        spec = spec.evolve(options={**spec.options, **simulated})
    judge = make_judge(spec)
    be = with_batch(checked_backend(o.backend, o.backend_options()), o, quiet=o.as_json)
    run = _run(o, table, judge, be, _judge_price(o, be))
    summary = _write(o, run, be, summary_spec(o, base.mode, recorded))
    if summary.get("drift"):
        err_console.print(f"warning: {escape(summary['drift'])}", highlight=False)
    if o.as_json:
        emit_json(summary)
    else:
        print_summary(summary)
        if o.out:
            console.print(f"wrote {escape(str(o.out))} and {escape(str(o.out))}.summary.json")
    if failed_too_often(run.summary, o.max_failed):
        calls = summary["calls"]
        raise CliError(
            f"{calls['failed']} of {calls['failed'] + calls['new']} judge calls failed after retries "
            f"(more than --max-failed {o.max_failed:g}); last backend error: {summary['last_error']}"
        )


def judge_inputs(o: JudgeCommand) -> dict[str, Any]:
    """The files an ``evalign judge`` call reads, by option (a built-in name matches no output)."""
    return {"FILE": o.file, "--cascade": o.cascade, "--template": o.template, "--rubric": o.rubric,
            "--grammar": o.grammar, "--prices": o.prices, "--fewshot": o.fewshot, **cache_input()}


def judge_outputs(o: JudgeCommand) -> dict[str, Any]:
    """The files an ``evalign judge`` call writes, by option: ``-o`` with its summary and its log of
    finished calls beside it (without ``--cascade``), ``--rest``."""
    if o.out is None or str(o.out) == "-" or o.cascade is not None:
        return {"-o": o.out, "--rest": o.rest}
    return {"-o": o.out, "-o (its summary)": f"{o.out}.summary.json",
            "-o (its log of finished calls)": f"{o.out}.partial.jsonl", "--rest": o.rest}


def _judge_mode(o: JudgeCommand) -> str:
    """The judge's registry name or mode: ``--ranking`` turns ``--mode absolute`` into ``ranking``; with
    a backend that returns scores (``--backend reward``) absolute / pairwise are the reward judges."""
    scores = o.backend in BACKENDS and returns_scores(backend_class(o.backend))
    if not o.ranking:
        return judge_for_backend(o.mode, scores)
    if scores:
        raise UsageError("--ranking grades with a generating judge; --backend reward scores each response already "
                         "(use --mode pairwise)")
    if judge_class(o.mode).name != "prometheus_absolute":
        raise UsageError("--ranking applies to --mode absolute (Prometheus' ranking by absolute grading)")
    return "ranking"


def judge_spec(o: JudgeCommand, base: JudgeSpec) -> JudgeSpec:
    """The judge's spec from the command line: ``base`` (its mode and template, the template read
    once) with the options of the command line, each mode's own checked against the judge's class."""
    cls, mode = base.judge_class, base.mode
    decoding = {"temperature": o.temperature, "top_p": o.top_p, "max_tokens": o.max_tokens,
                "repetition_penalty": o.repetition_penalty, "seed": o.seed}
    spec: dict[str, Any] = {"samples": o.samples, "reask": o.reask, "column": o.name, "decoding": decoding,
                            "constrain": o.constrain}
    if getattr(o, "top_logprobs", None) is not None:  # (judge only: a confidence from the verdict's logprobs)
        decoding.update(logprobs=True, top_logprobs=o.top_logprobs)
    own: dict[str, Any] = {}
    if o.no_reference:
        spec["reference"] = False
    if o.grammar is not None:
        try:
            spec["grammar"] = o.grammar.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start}); save the grammar as UTF-8",
                             file=str(o.grammar)) from None
    if cls.uses_rubric:
        spec.update(rubric=o.rubric, rubric_column=o.rubric_column, rubric_map=list(o.rubric_map) if o.rubric_map else None)
    elif o.rubric or o.rubric_column or o.rubric_map:
        raise CliError(f"--mode {mode} does not use a rubric")
    if cls.name in ("prometheus_relative", "llmbar"):
        own["tie"] = o.tie
        spec["both_orders"] = not o.single_order
    elif cls.pairwise and cls.name in ("mtbench_pair", "arena_hard"):
        spec["both_orders"] = not o.single_order  # their prompts always offer a tie
    elif o.tie or o.single_order:
        raise CliError("--tie and --single-order apply to --mode pairwise")
    if cls.name == "reward_pairwise":
        own["tie_margin"] = o.tie_margin
    elif o.tie_margin:
        raise CliError("--tie-margin applies to --backend reward with --mode pairwise")
    if cls.name == "llmbar":
        own["logit_bias"] = o.logit_bias
    elif o.logit_bias:
        raise CliError("--logit-bias applies to the LLMBar templates (--mode pairwise --template llmbar_*)")
    if cls.name == "prometheus_ranking":
        own.update(max_rounds=o.max_rounds, max_unparseable=o.max_unparseable_rounds)
    if cls.name == "geval":
        own.update(fallback=o.geval_fallback, min_mass=o.geval_min_mass)
    if o.score_criterion is not None or o.criteria:
        if cls.name != "criteria":
            raise CliError("--score-criterion and --criteria apply to --mode criteria")
        spec["criteria"] = tuple(o.criteria or ())
        own["score_criterion"] = o.score_criterion
    return base.evolve(**spec, options=own)


def _judge_price(o: JudgeCommand, be: Backend) -> Price | None:
    """The judge's price: ``--price``, else the price file's (``--prices`` / ``$EVALIGN_PRICES``) for the
    model asked for (the answers' own model names are looked up by ``evalign meta``)."""
    if o.price is not None:
        return parse_price(o.price)
    book = price_book(o.prices)
    return book.for_model(be.identity().get("model"), o.model)


def _run(o: JudgeCommand, table: pd.DataFrame, judge: Judge, be: Backend, price: Price | None = None) -> JudgeRun:
    """Run the judge with a progress bar (``OUT.partial.jsonl`` logs finished calls)."""
    partial = Path(f"{o.out}.partial.jsonl") if o.out else None
    with progress(transient=True, disable=o.as_json) as bar:
        task = bar.add_task("judging", total=None)

        def on_progress(c: dict[str, int]) -> None:
            bar.update(
                task,
                completed=c["done"],
                total=c["total"],
                description=f"judging [dim]done {c['done']} · cached {c['cached']} · unscored {c['unscored']}"
                f" · retried {c['retried']} · failed {c['failed']}[/dim]",
            )

        def on_note(line: str) -> None:
            err_console.print(f"[yellow]note[/yellow]: {escape(line)}", highlight=False, soft_wrap=True)

        return run_judge(table, judge, be, cache=Cache.for_command(o.no_cache),
                         skip_self=list(o.skip_self or []), human=o.human, length_unit=o.length_unit,
                         partial_path=partial, on_progress=on_progress, on_note=on_note, turns=o.turns,
                         price=price)  # fmt: skip


def _write(o: JudgeCommand, run: JudgeRun, be: Backend, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run summary (with the endpoints' calls, and the judge's ``spec``: what rebuilds it, for
    ``evalign judge --cascade``); the judged table and the summary written to ``--out``."""
    summary = run.summary.as_dict()
    if spec is not None:
        summary["spec"] = spec
    if hasattr(be, "endpoint_stats"):  # several --base-url: calls per endpoint, endpoints taken out
        summary["endpoints"] = be.endpoint_stats()
    batch = batch_block(be)
    if batch is not None:  # --batch-api: batches, lines, failed / retried lines, failures by reason
        summary["batch"] = batch
    abandoned = be.stats().get("abandoned", 0)
    if abandoned:  # said, never silent: requests given up on a timeout and sent again
        summary["calls"]["abandoned"] = abandoned
    if o.out:
        write_table(run.table, o.out)
        summary_path = Path(f"{o.out}.summary.json")
        summary["out"] = str(o.out)
        summary["summary_out"] = str(summary_path)
        write_json_atomic(summary_path, summary)
        with contextlib.suppress(FileNotFoundError):
            Path(f"{o.out}.partial.jsonl").unlink()
    return summary


def _load_table(o: JudgeCommand, pairwise: bool) -> pd.DataFrame:
    """The item table (or, for pair judges, the pair table) of FILE or --dataset, its first --limit rows."""
    if (o.file is None) == (o.dataset is None):
        raise CliError("give either FILE or --dataset NAME")
    if pairwise and o.human:
        raise CliError("--human applies to item tables (absolute, geval, criteria)")
    human = [o.human] if o.human else []
    if o.dataset is not None:
        # pair judges read the pair table; item judges the item table, else both sides of each pair
        source = dataset_table(o.dataset, o.data_dir, as_="pairs" if pairwise else "auto-items")
        table = read_pairs(source) if pairwise else read_items(source, human=human)
    elif pairwise:
        table = read_pairs(o.file)
    else:
        fields = field_map(o.id_field, o.system_field, o.instruction_field, o.input_field, o.reference_field,
                           o.response_field)
        table = read_items(o.file, fields=fields, human=human, default_system=o.system)
    return table if o.limit is None else table.head(o.limit).reset_index(drop=True)


def checked_backend(name: str, options: BackendOptions) -> Backend:
    """The backend ``name`` built from ``options``, after the command line's checks (unknown names: one
    line with "did you mean"; a missing --model or --base-url; a --base-url given twice)."""
    missing = missing_options(name, options)
    if "model" in missing or not options.model:
        raise CliError("--model is required (the model name, or a local model directory for --backend hf)")
    if "base_url" in missing:
        raise CliError(f"--base-url is required for --backend {name} (e.g. http://localhost:8000/v1)")
    urls = list(options.base_urls) if "base_url" in backend_class(name).required_options else []
    if len(set(urls)) < len(urls):  # one model on several servers: each once
        raise UsageError(f"--base-url given twice: {public_url(next(u for u in urls if urls.count(u) > 1))}")
    return create_backend(name, options)


def _takes_base_url(name: str) -> bool:
    """Whether the backend ``name`` (when known) is reached at a --base-url."""
    cls = backend_class(name) if name in BACKENDS else None
    return cls is not None and ("base_url" in cls.required_options or bool(getattr(cls, "default_url", "")))


def _validate(o: JudgeCommand) -> None:
    """Check every option value before any work; the first bad one is a usage error naming it."""

    def check(ok: bool, option: str, need: str) -> None:
        if not ok:
            value = getattr(o, option.lstrip("-").replace("-", "_"))
            raise UsageError(f"{option} must be {need}, got {value!r}")

    for url in (o.base_url or []) if _takes_base_url(o.backend) else []:
        parsed = urlparse(url)
        if not (parsed.scheme in ("http", "https") and bool(parsed.netloc)):
            raise UsageError(f"--base-url must be an http:// or https:// URL (e.g. http://localhost:8000/v1), got {public_url(url)!r}")
    for key in ("concurrency", "batch_size", "timeout", "connect_timeout", "max_retries", "idle_timeout",
                "system_prompt", "constraint_format", "prompt_cache", "service_tier"):  # as a bench judge spec's
        problem = backend_option_problem(key, getattr(o, key))
        if problem:
            raise UsageError(f"--{key.replace('_', '-')} {problem}")
    if o.service_tier and o.backend in BACKENDS and not getattr(backend_class(o.backend), "takes_service_tier", False):
        raise UsageError(f"--service-tier: the {o.backend} backend takes no service tier (flex is OpenAI's)")
    problem = api_key_env_problem(o.api_key_env)
    if problem:  # (the value is not repeated: it may be the key)
        raise UsageError(f"--api-key-env {problem}")
    check(o.deadline is None or o.deadline > 0, "--deadline", "> 0 seconds")
    check_batch_options(o)
    check(o.limit is None or o.limit >= 1, "--limit", ">= 1")
    check(o.top_logprobs is None or 1 <= o.top_logprobs <= 20, "--top-logprobs", "an integer in [1, 20]")
    for key in ("temperature", "top_p", "max_tokens", "repetition_penalty"):  # the rules every judge's settings follow
        problem = sampling_problem(key, getattr(o, key))
        if problem:
            raise UsageError(f"--{key.replace('_', '-')} {problem}")
    check(o.samples >= 1, "--samples", ">= 1")
    check(o.reask >= 0, "--reask", ">= 0")
    check(0 <= o.max_failed <= 1, "--max-failed", "a fraction in [0, 1]")
    check(o.max_rounds >= 1, "--max-rounds", ">= 1")
    check(o.max_unparseable_rounds >= 1, "--max-unparseable-rounds", ">= 1")
    check(o.tie_margin >= 0, "--tie-margin", ">= 0")
    check(0 <= o.geval_min_mass <= 1, "--geval-min-mass", "in [0, 1]")
    check(o.geval_fallback in ("samples", "error"), "--geval-fallback", "'samples' or 'error'")
    check_constrain(o.constrain, user_constraint=o.grammar is not None)
    check(o.turns in TURN_MODES, "--turns", " or ".join(f"'{t}'" for t in TURN_MODES))
    if o.price is not None:
        parse_price(o.price)
    if o.length_unit not in LENGTH_UNITS:
        raise CliError(f"--length-unit must be one of {', '.join(LENGTH_UNITS)}, got '{o.length_unit}'")


def print_summary(summary: dict[str, Any]) -> None:
    """The run summary as terminal tables: counts, unscored reasons, score distribution, bias audit."""
    console.print(_counts_table(summary))
    if summary.get("endpoints"):
        console.print(_endpoints_table(summary["endpoints"]))
    if summary.get("rounds"):
        r = _table("Ranking rounds used (pairs)", ("rounds", "left"), ("pairs", "right"))
        for k, v in summary["rounds"].items():
            r.add_row(k, str(v))
        console.print(r)
    if summary.get("errors"):
        e = _table("Backend errors (after retries)", ("calls", "right"), ("message", "left"))
        for msg, n in list(summary["errors"].items())[:5]:
            e.add_row(str(n), escape(msg))
        console.print(e)
    if summary["unscored_by_reason"] or summary["calls"]["unscored_by_reason"]:
        console.print(_unscored_table(summary))
    if summary["distribution"]:
        console.print(_distribution_table(summary))
    if summary.get("usage"):
        console.print(_usage_table(summary))
    console.print(_bias_table(summary["bias"]))
    err_console.print(f"[dim]{escape(summary['signature'])}[/dim]", highlight=False)


def _table(title: str, *columns: tuple[str, str]) -> Table:
    """A summary table: ``(header, justify)`` per column."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for header, justify in columns:
        t.add_column(header, justify=justify)  # type: ignore[arg-type]
    return t


def _counts_table(summary: dict[str, Any]) -> Table:
    calls = summary["calls"]
    t = _table(f"Judge {escape(summary['column'])} ({summary['items']} items)", ("", "left"), ("count", "right"))
    for k in ("scored", "unscored", "skipped"):
        t.add_row(k, str(summary[k]))
    t.add_row("calls made", str(calls["new"]))
    t.add_row("calls from cache", str(calls["cached"]))
    t.add_row("re-asked", str(calls["reasked"]))
    t.add_row("failed (backend)", str(calls["failed"]))
    t.add_row("HTTP retries", str(calls["http_retries"]))
    constraint = summary.get("constraint") or {}
    if constraint:
        t.add_row("output constrained", "yes" if constraint.get("sent") else "no")
    if constraint.get("outside_shape"):
        t.add_row("answers outside the constraint", str(constraint["outside_shape"]))
    if calls.get("read_before_cut"):
        t.add_row("read before the max_tokens cut", str(calls["read_before_cut"]))
    if calls.get("abandoned"):
        t.add_row("abandoned on a timeout, re-sent", str(calls["abandoned"]))
    for method, n in sorted(summary.get("methods", {}).items()):
        t.add_row(f"G-Eval method {method}", str(n))
    return t


def _usage_table(summary: dict[str, Any]) -> Table:
    """Calls, tokens, time, parse rate and cost of the judged items, and the model versions that answered."""
    u = summary["usage"]
    t = _table(f"Cost and time ({u['items']} items judged)", ("", "left"), ("value", "right"))
    t.add_row("calls answered (cached or new)", str(u["calls"]))
    t.add_row("parse rate (answers read)", fmt_value(u["parse_rate"], 3))
    t.add_row("prompt tokens", f"{u['prompt_tokens']:,}")
    if u.get("cache_read_tokens") or u.get("cache_write_tokens"):
        t.add_row("  of which read from / written to the prompt cache",
                  f"{u['cache_read_tokens']:,} / {u['cache_write_tokens']:,}")
    t.add_row("completion tokens", f"{u['completion_tokens']:,}")
    t.add_row("seconds per call", fmt_value(u["seconds_per_call"], 3))
    t.add_row("seconds per 1,000 items (one call at a time)", fmt_value(u["seconds_per_1000_items"], 1))
    if u.get("price"):
        p = u["price"]
        t.add_row("price per 1M tokens (in / out)", f"{p['input_per_million']:g} / {p['output_per_million']:g}")
        run, listed = u["cost_detail"]["run"], u["cost_detail"]["list"]
        t.add_row("cost (this run's token split / list price)",
                  f"{fmt_value(run['cost'], 4)} / {fmt_value(listed['cost'], 4)}")
        t.add_row("cost per 1,000 items (this run / list price)",
                  f"{fmt_value(run['cost_per_1000_items'], 4)} / {fmt_value(listed['cost_per_1000_items'], 4)}")
    else:
        t.add_row("cost per 1,000 items", "no price (--price IN/OUT or --prices FILE)")
    t.add_row("this run: new calls / prompt / completion tokens",
              f"{u['new_calls']} / {u['new_prompt_tokens']:,} / {u['new_completion_tokens']:,}")
    cache = summary.get("prompt_cache") or {}
    if cache:
        need = f" (minimum {cache['minimum']:,})" if cache.get("minimum") else ""
        t.add_row("prompt cache: shared prefix, estimated", f"~{cache['shared_prefix_tokens']:,} tokens{need}")
        if cache.get("note"):
            t.add_row("prompt cache", escape(str(cache["note"])))
    for v in summary.get("models", []):
        who = escape(str(v["model"] or "?")) + (f" ({escape(str(v['system_fingerprint']))})" if v["system_fingerprint"] else "")
        t.add_row(f"answered by {who}", f"{v['calls']} calls")
    return t


def _endpoints_table(endpoints: list[dict[str, Any]]) -> Table:
    ep = _table("Endpoints", *((c, "left" if c == "base URL" else "right")
                               for c in ("base URL", "calls", "failed attempts", "taken out", "healthy at the end")))
    for e in endpoints:
        ep.add_row(escape(e["base_url"]), str(e["calls"]), str(e["failures"]), str(e["taken_out"]),
                   "yes" if e["healthy"] else "no")
    return ep


def _unscored_table(summary: dict[str, Any]) -> Table:
    by_items, by_calls = summary["unscored_by_reason"], summary["calls"]["unscored_by_reason"]
    r = _table("Unscored, by reason", ("reason", "left"), ("items", "right"), ("calls", "right"), ("meaning", "left"))
    for k in dict.fromkeys([*by_items, *by_calls]):
        r.add_row(k, str(by_items.get(k, 0)), str(by_calls.get(k, 0)), REASONS.get(k, ""))
    return r


def _distribution_table(summary: dict[str, Any]) -> Table:
    pairs = summary.get("kind") == "verdict"
    title = "Verdicts" if pairs else "Score distribution" + ("" if summary["higher_is_better"] else " (lower is better)")
    d = _table(title, ("verdict" if pairs else "score", "left"), ("items", "right"))
    for k, v in summary["distribution"].items():
        d.add_row(k, str(v))
    d.add_row("mean code (+1 = A)" if pairs else "mean", fmt_value(summary.get("mean")))
    return d


def _bias_table(bias: dict[str, Any]) -> Table:
    b = _table("Bias audit", ("check", "left"), ("value", "right"), ("n", "right"))
    length = bias["length"]
    unit = length["unit"]
    what = "verdict vs length(A) - length(B)" if "prefers_longer" in length else f"score vs length ({unit})"
    ov = length["overall"]
    b.add_row(f"Spearman {what}", fmt_value(ov["spearman"], 3), str(ov["n"]))
    b.add_row(f"Kendall {what}", fmt_value(ov["kendall"], 3), str(ov["n"]))
    for g, c in length.get("by_human", {}).items():
        b.add_row(f"Spearman score vs length | human = {g}", fmt_value(c["spearman"], 3), str(c["n"]))
    if "prefers_longer" in length:
        b.add_row("prefers_longer", fmt_value(length["prefers_longer"], 3), str(length["n_decided"]))
    swap = bias.get("order_swap")
    if swap:
        b.add_row("position_agreement", fmt_value(swap["position_agreement"], 3), str(swap["n_pairs"]))
        b.add_row("prefers_first", fmt_value(swap["prefers_first"], 3),
                  str(swap["n_verdicts"]))
    return b


# public names for the verbs that run a judge too (``evalign probe``)
validate_options = _validate
load_table = _load_table
