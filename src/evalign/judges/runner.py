"""Running a judge over a table: cached, resumable, concurrent, with a bias audit.

A run is three steps: :func:`plan` (the first call of every row), :func:`execute` (waves of calls:
cached outputs are read, the rest sent to the backend; then re-asks of unparseable outputs and the
follow-up calls a judge asks for, e.g. the next round of the ranking protocol) and
:func:`aggregate` (one set of columns per row, from that row's results, indexed by row).

Every judge call is stored in :class:`evalign.cache.Cache` (namespace ``"judge"``) as soon as it
returns, under a key made of the backend identity (kind, base URL, model — never an API key), the
template name/version/hash, the rubric hash, the request settings (sampling, grammar, seed), the
sample (or round) index, the order (pairs), the re-ask attempt and the messages themselves. Running
the same command again after Ctrl-C, a crash or a dead server therefore makes no call twice; a cache
opened with ``read=False`` (``--no-cache``) makes every call anew (and stores the new outputs). Calls
with equal keys within one run (duplicate rows) are made once, and so are calls of two runs on one
cache at the same time: a run leases the keys it sends (:meth:`evalign.cache.Cache.claim`, renewed
while the calls run) and another run waits for their outputs instead of paying for them again; it
makes a call itself only when that lease expires (its owner died) or was given back (the call failed).

A call that still fails after the backend's retries is reported as unscored ``backend_error`` with
the backend's message in the ``J.error`` column and the summary, and is not cached, so the next run
tries it again. A fatal backend error (server unreachable, wrong key or model) stops the run;
everything finished so far is in the cache. A parser failure never stops a run: the row is unscored
``parser_error`` and the judge's text is kept in ``J.feedback``.

Output constraints (:meth:`Judge.constraint`, the judge's ``constrain`` option): before planning,
the backend is asked whether it can send each constraint the judge's calls carry
(:meth:`Backend.check_constraint`). ``auto``: when it cannot, or when the server refuses one during
the run (:class:`ConstraintRefused`), one line says so (``on_note`` and the summary's
``constraint.note``) and the run goes on without constraints (keys without them: the calls an
unconstrained run makes); ``on``: that line is the error; ``off``: none is sent. A constraint sent
is part of each call's settings, hence of its cache key. Answers outside the constraint's regex
(a server that ignores it) are counted in ``constraint.outside_shape``.

``partial_path`` receives one JSON line per finished call (a progress log that survives a kill);
the caller writes the final table atomically when the run completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import fnmatch
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import pandas as pd

from evalign.backends import ConstraintRefused, Generation, GenerationRequest
from evalign.cache import LEASE_SECONDS, Cache, make_key
from evalign.errors import EvalignError, InputError, did_you_mean
from evalign.io import PAIR_REQUIRED, json_safe, read_pairs  # noqa: F401  (read_pairs re-exported)
from evalign.io.conversations import expand_turns
from evalign.judges.base import Judge, first_reference, prompt_text
from evalign.judges.parsing import ParseResult, unscored
from evalign.judges.prompt_cache import caching_provider, prefix_report
from evalign.judges.prompts import Message, Rubric, rubric_from_cell
from evalign.judges.summary import (  # noqa: F401  (CallCounts, failed_too_often re-exported)
    CallCounts,
    CallUsage,
    JudgeSummary,
    failed_too_often,
    summarize,
)
from evalign.judges.usage import Price

NAMESPACE = "judge"
#: how conversations are graded (see :func:`run_judge`)
TURNS = ("last", "each")
#: bump when the cache key layout changes
KEY_VERSION = 1
#: most characters of a backend error message kept (after redaction)
ERROR_CHARS = 500

ProgressFn = Callable[[dict[str, int]], None]
NoteFn = Callable[[str], None]


@dataclass
class Call:
    """One judge call: which row, sample (or round), order and re-ask attempt, and what is sent."""

    row: int
    sample: int
    order: str
    attempt: int
    messages: list[Message]
    settings: dict[str, Any]
    key: str = ""


@dataclass
class JudgeRun:
    """The result of :func:`run_judge`: the table with the judge's columns, the run summary, the
    judge's column name, the signature and one record per call."""

    table: pd.DataFrame
    summary: JudgeSummary
    column: str
    signature: str
    calls: list[dict[str, Any]] = field(default_factory=list, repr=False)


# --- inputs -------------------------------------------------------------------------------------


def _source(table: pd.DataFrame) -> str:
    return str(table.attrs.get("source", "<table>"))


def decide_reference(judge: Judge, table: pd.DataFrame) -> bool:
    """Whether the reference answer goes into the prompts: the judge's ``reference`` option, or
    (None) True when every row has a reference and the template has a reference variant. True with
    a row lacking one (or a template without a reference variant) is an error."""
    refs = table["reference"].tolist() if "reference" in table.columns else [None] * len(table)
    has = [first_reference(r) is not None for r in refs]
    needs = judge.template.needs_reference
    if judge.reference is False:
        judge.template.text(False)  # raises for a template that needs a reference
        return False
    if judge.reference is True or needs:
        if not judge.reference_variant():
            judge.template.text(True)  # raises for a template without a reference variant
        if not all(has):
            i = has.index(False)
            why = (f"template '{judge.template.name}' needs a reference answer on every row" if needs else
                   "no reference answer (judge without one: --no-reference / reference=False)")
            raise InputError(why, file=_source(table), line=i + 1, field="reference")
        return True
    return judge.reference_variant() and bool(has) and all(has)


def row_rubrics(judge: Judge, table: pd.DataFrame) -> list[Rubric | None]:
    """The rubric of each row: the judge's rubric, or the parsed ``rubric_column`` cell."""
    if not judge.uses_rubric:
        return [None] * len(table)
    col = judge.rubric_column
    if col is None:
        return [judge.rubric] * len(table)
    if col not in table.columns:
        raise InputError(f"no such rubric column{did_you_mean(col, table.columns)}", file=_source(table), field=col)
    return [
        rubric_from_cell(v, file=_source(table), line=i + 1, field=col, names=judge.rubric_map)
        for i, v in enumerate(table[col].tolist())
    ]


def skip_patterns(skip_self: bool | Sequence[str], model: str | None) -> list[str]:
    """The system-name patterns to skip: ``True`` = the judge model's name and its last path
    component; a list of glob patterns (``"gpt-4*"``) as given, where ``"self"`` stands for those two."""
    own = [model, model.rstrip("/").rsplit("/", 1)[-1]] if model else []
    if skip_self is True:
        return own
    if not skip_self:
        return []
    out: list[str] = []
    for p in skip_self:  # type: ignore[union-attr]
        out.extend(own if p == "self" else [p])
    return out


def self_judged(judge: Judge, table: pd.DataFrame, patterns: Sequence[str]) -> list[bool]:
    """Rows whose system (either system of a pair) matches one of the glob ``patterns``
    (case-insensitive, :func:`fnmatch.fnmatch`)."""
    pats = [p.lower() for p in patterns if p]
    out = [False] * len(table)
    if not pats:
        return out
    cols = ["system_a", "system_b"] if judge.pairwise else ["system"]
    for c in cols:
        if c in table.columns:
            for i, v in enumerate(table[c].tolist()):
                if isinstance(v, str) and any(fnmatch.fnmatchcase(v.lower(), p) for p in pats):
                    out[i] = True
    return out


def call_key(identity: Mapping[str, Any], judge: Judge, reference: bool, rubric: Rubric | None, call: Call) -> str:
    """The cache key of one call (see the module doc)."""
    return make_key(
        NAMESPACE,
        KEY_VERSION,
        dict(identity),
        *judge.template_key(reference),
        rubric.hash() if rubric is not None else None,
        call.settings,
        call.sample,
        judge.cache_order(call.order),
        call.attempt,
        call.messages,
    )


def safe_parse(judge: Judge, gen: Mapping[str, Any], prompt: str | None, order: str = "") -> ParseResult:
    """``judge.parse_call`` (the output of a call of ``order``), but a parser failure is an unscored
    ``parser_error`` with the text kept."""
    try:
        return judge.parse_call(gen, prompt, order)
    except Exception as exc:  # a parser bug must not abort the run
        text = ""
        with contextlib.suppress(Exception):
            text = str(gen["choices"][0].get("text") or "")
        return unscored("parser_error", f"{type(exc).__name__}: {exc}", text)


# --- plan ---------------------------------------------------------------------------------------


@dataclass
class _Plan:
    identity: dict[str, Any]
    reference: bool
    rubrics: list[Rubric | None]
    skipped: list[bool]
    records: list[dict[str, Any]]
    calls: list[Call]
    constrained: bool = True


def _settings(judge: Judge, sample: int, order: str, constrained: bool) -> dict[str, Any]:
    """The settings of a call; without an output constraint when the run sends none."""
    s = judge.call_settings(sample, order)
    if not constrained:
        s.pop("constraint", None)
    return s


def _make_call(judge: Judge, plan: _Plan, row: int, sample: int, order: str,
               done: Mapping[tuple[int, str], tuple[ParseResult, str]]) -> Call:
    messages = judge.call_messages(plan.records[row], plan.rubrics[row], plan.reference, sample, order, done)
    c = Call(row, sample, order, 0, messages, _settings(judge, sample, order, plan.constrained))
    c.key = call_key(plan.identity, judge, plan.reference, plan.rubrics[row], c)
    return c


def plan(
    table: pd.DataFrame,
    judge: Judge,
    identity: Mapping[str, Any],
    skip_self: bool | Sequence[str],
    model: str | None = None,
    constrained: bool = True,
) -> _Plan:
    """Check the table and build the first call of every (row, sample, order). ``model``: the judge
    model's name (for ``skip_self``); ``constrained``: whether calls carry their output constraint."""
    if judge.pairwise:
        missing = [c for c in PAIR_REQUIRED if c not in table.columns]
        if missing:
            raise InputError(f"not a pair table: no column '{missing[0]}' (pairwise judging needs "
                             f"{', '.join(PAIR_REQUIRED)})", file=_source(table), field=missing[0])
    elif "response" not in table.columns:
        raise InputError("no 'response' column (a pair table needs --mode pairwise)", file=_source(table),
                         field="response")
    reference = decide_reference(judge, table)
    rubrics = row_rubrics(judge, table)
    skipped = self_judged(judge, table, skip_patterns(skip_self, model or identity.get("model")))
    p = _Plan(dict(identity), reference, rubrics, skipped, table.to_dict("records"), [], constrained)
    for i, rec in enumerate(p.records):
        if skipped[i]:
            continue
        prompts = judge.prompts(rec, rubrics[i], reference)
        for s in range(judge.samples):
            for order, messages in prompts:
                c = Call(i, s, order, 0, messages, _settings(judge, s, order, constrained))
                c.key = call_key(identity, judge, reference, rubrics[i], c)
                p.calls.append(c)
    return p


# --- execute ------------------------------------------------------------------------------------


class _Progress:
    def __init__(self, fn: ProgressFn | None) -> None:
        self.fn = fn
        self.counts = {"done": 0, "total": 0, "cached": 0, "new": 0, "unscored": 0, "retried": 0, "failed": 0}

    def add(self, **kw: int) -> None:
        for k, v in kw.items():
            self.counts[k] += v
        if self.fn is not None:
            self.fn(dict(self.counts))


@dataclass
class _State:
    """What execution produced: final results indexed by row, errors by row, counters."""

    results: dict[int, dict[tuple[int, str], ParseResult]] = field(default_factory=dict)
    texts: dict[int, dict[tuple[int, str], str]] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    call_log: list[dict[str, Any]] = field(default_factory=list)
    #: each answered call's usage (cache key -> :class:`CallUsage`), from the backend or the cache
    answers: dict[str, CallUsage] = field(default_factory=dict)
    call_reasons: Counter[str] = field(default_factory=Counter)
    cut_calls: int = 0
    error_messages: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    http_retries: int = 0
    sent: int = 0
    outside_shape: int = 0


async def execute(
    judge: Judge,
    backend: Any,
    p: _Plan,
    cache: Cache,
    progress: _Progress,
    log_fh: IO[str] | None,
) -> _State:
    """Run the planned calls in waves (cache first, then the backend), re-ask unparseable outputs
    and add the follow-up calls the judge asks for, until no call is left."""
    st = _State()
    pending = list(p.calls)
    outstanding: Counter[int] = Counter(c.row for c in pending)
    progress.add(total=len({c.key for c in pending}))
    while pending:
        by_key: dict[str, list[Call]] = {}
        for c in pending:
            by_key.setdefault(c.key, []).append(c)
        stored = cache.get_many(NAMESPACE, list(by_key))
        parsed = _parse_stored(judge, stored, by_key, progress, st.answers, cache.path)
        from_cache = set(stored)
        todo = [k for k in by_key if k not in parsed]
        while todo:
            mine = _claim(cache, todo, backend)
            if mine:
                reqs = [GenerationRequest(messages=by_key[k][0].messages, **by_key[k][0].settings) for k in mine]
                wave = _Wave(judge, cache, st, progress, log_fh, mine, by_key, parsed)
                keyed = {"keys": mine} if getattr(backend, "takes_keys", False) else {}
                await _leased(cache, backend.generate_many(reqs, wave.on_done, **keyed))
            rest = [k for k in todo if k not in parsed]
            got = await _wait_for_other_run(cache, rest) if rest else {}
            parsed.update(_parse_stored(judge, got, by_key, progress, st.answers, cache.path))
            from_cache.update(got)
            todo = [k for k in rest if k not in got]
        pending = _next_wave(judge, p, st, by_key, parsed, from_cache, outstanding, progress)
    return st


def _claim(cache: Cache, todo: Sequence[str], backend: Any) -> list[str]:
    """The keys of ``todo`` this run sends now: those it could lease, and (``--batch-api``: a backend
    that takes keys) those whose line is in a provider batch still in flight, which it re-attaches to.
    A run without it that finds calls in such batches, with no run polling them, stops and says how
    to collect or cancel them (it never sends them again meanwhile)."""
    mine = cache.claim(NAMESPACE, todo)
    claimed = set(mine)
    held = cache.batch_held([k for k in todo if k not in claimed])
    if not held:
        return mine
    if getattr(backend, "takes_keys", False):
        return mine + [k for k in todo if k in held]
    if not mine and not cache.leased_elsewhere(NAMESPACE, list(held)):
        raise EvalignError(f"{len(held)} call(s) of this run are in provider batches still in flight (evalign cache "
                           "batches): run the same command with --batch-api to collect them, or cancel them with "
                           "'evalign cache batches --cancel'")
    return mine


async def _leased(cache: Cache, work: Any) -> Any:
    """Await ``work`` while renewing this run's leases; give back the leases left (failed calls)
    when it ends, however it ends."""

    async def renew() -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            cache.renew()

    task = asyncio.create_task(renew()) if cache.shared else None
    try:
        return await work
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        cache.release(NAMESPACE)


async def _wait_for_other_run(cache: Cache, keys: Sequence[str], poll: float = 0.25) -> dict[str, bytes]:
    """Wait until another run stores some of ``keys`` (returned) or gives up the lease of one of
    them (then ``{}``: the caller claims it and makes the call itself)."""
    while True:
        got = cache.get_many(NAMESPACE, keys)
        if got:
            return got
        if len(cache.leased_elsewhere(NAMESPACE, keys)) < len(set(keys)):
            return {}
        await asyncio.sleep(poll)
        poll = min(2.0, poll * 1.5)


def _stored_generation(raw: bytes, cache_path: Any) -> dict[str, Any]:
    """A cached answer's generation; an entry that is not one (a damaged cache) names the cache."""
    try:
        gen = json.loads(raw.decode("utf-8"))["generation"]
        if not isinstance(gen, dict) or not gen.get("choices"):
            raise ValueError("no choices")
        return gen
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise EvalignError(f"cache {cache_path}: a stored judge answer is not readable JSON ({type(e).__name__}); "
                           "run with --no-cache to make the calls anew (their answers replace it)") from None


def _parse_stored(judge: Judge, stored: Mapping[str, bytes], by_key: Mapping[str, list[Call]],
                  progress: _Progress, answers: dict[str, CallUsage],
                  cache_path: Any = None) -> dict[str, tuple[ParseResult, str]]:
    """The parsed result and text of each call found in the cache (its usage recorded in ``answers``)."""
    parsed: dict[str, tuple[ParseResult, str]] = {}
    bad = 0
    for k, raw in stored.items():
        gen = _stored_generation(raw, cache_path)
        answers[k] = CallUsage.of(gen)
        c = by_key[k][0]
        res = safe_parse(judge, gen, prompt_text(c.messages), c.order)
        parsed[k] = (res, gen["choices"][0].get("text") or "")
        bad += 0 if res.ok else 1
    if stored:
        progress.add(done=len(stored), cached=len(stored), unscored=bad)
    return parsed


@dataclass
class _Wave:
    """The calls of one wave sent to the backend: :meth:`on_done` stores, parses and counts each answer."""

    judge: Judge
    cache: Cache
    st: _State
    progress: _Progress
    log_fh: IO[str] | None
    todo: list[str]
    by_key: dict[str, list[Call]]
    parsed: dict[str, tuple[ParseResult, str]]

    def on_done(self, j: int, res: Any) -> None:
        key = self.todo[j]
        c = self.by_key[key][0]
        self.st.sent += 1
        if isinstance(res, Generation):
            self._answered(key, c, res)
        else:
            self._failed(key, c, res)

    def _answered(self, key: str, c: Call, res: Generation) -> None:
        data = res.to_json()
        self.cache.put(NAMESPACE, key, json.dumps({"generation": data}, ensure_ascii=False).encode("utf-8"))
        self.st.answers[key] = CallUsage.of(data)
        r = safe_parse(self.judge, data, prompt_text(c.messages), c.order)
        self.parsed[key] = (r, data["choices"][0].get("text") or "")
        if not fits_constraint(c.settings, res):
            self.st.outside_shape += 1
        self.st.http_retries += res.retries
        self.progress.add(done=1, new=1, unscored=0 if r.ok else 1, retried=res.retries)
        if self.log_fh is not None:
            _log(self.log_fh, {"key": key, "row": c.row, "sample": c.sample, "order": c.order,
                               "attempt": c.attempt, "value": r.value, "reason": r.reason,
                               "model": res.model, "system_fingerprint": res.system_fingerprint})

    def _failed(self, key: str, c: Call, res: Any) -> None:
        msg = str(res)[:ERROR_CHARS]  # backends redact before this point
        retries = max(0, int(getattr(res, "attempts", 1)) - 1)
        self.st.http_retries += retries
        self.st.error_messages[msg] += 1
        self.st.last_error = msg
        self.parsed[key] = (unscored("backend_error", msg), "")
        for cc in self.by_key[key]:
            self.st.errors.setdefault(cc.row, msg)
        self.progress.add(done=1, failed=1, unscored=1, retried=retries)
        if self.log_fh is not None:
            _log(self.log_fh, {"key": key, "row": c.row, "attempt": c.attempt, "reason": "backend_error",
                               "error": msg})


def fits_constraint(settings: Mapping[str, Any], gen: Generation) -> bool:
    """False when the call carried a constraint with a regex and its finished answer is outside it
    (a server that ignores the constraint)."""
    regex = (settings.get("constraint") or {}).get("regex")
    if not regex or gen.finish_reason == "length":
        return True
    return re.fullmatch(regex, gen.text) is not None


def _next_wave(judge: Judge, p: _Plan, st: _State, by_key: Mapping[str, list[Call]],
               parsed: Mapping[str, tuple[ParseResult, str]], stored: set[str], outstanding: Counter[int],
               progress: _Progress) -> list[Call]:
    """Record the final results of this wave; the re-asks of unparseable outputs and the follow-up
    calls of rows whose calls are all final make the next wave."""
    nxt: list[Call] = []
    touched: set[int] = set()
    for key, calls in by_key.items():
        res, text = parsed[key]
        if not res.ok:
            st.call_reasons[res.reason or "?"] += len(calls)
        elif res.cut:
            st.cut_calls += len(calls)
        for c in calls:
            st.call_log.append({"row": c.row, "sample": c.sample, "order": c.order, "attempt": c.attempt,
                                "key": key, "cached": key in stored, "value": res.value, "reason": res.reason,
                                "answered": key in st.answers})
            if not res.ok and res.reason not in ("backend_error", "parser_error") and c.attempt < judge.reask:
                messages = judge.reask_messages(calls[0].messages, text, res)
                n = Call(c.row, c.sample, c.order, c.attempt + 1, messages, c.settings)
                n.key = call_key(p.identity, judge, p.reference, p.rubrics[c.row], n)
                nxt.append(n)
                continue
            st.results.setdefault(c.row, {})[(c.sample, c.order)] = res
            st.texts.setdefault(c.row, {})[(c.sample, c.order)] = text
            outstanding[c.row] -= 1
            touched.add(c.row)
    reasked = len({c.key for c in nxt})
    for row in sorted(touched):
        if outstanding[row] == 0:
            done = {k: (r, st.texts[row][k]) for k, r in st.results[row].items()}
            for s, o in judge.next_calls(st.results[row]):
                nxt.append(_make_call(judge, p, row, s, o, done))
    for c in nxt:  # a re-ask replaces its call: the row's outstanding count is unchanged
        outstanding[c.row] += 0 if c.attempt else 1
    if nxt:
        progress.add(total=len({c.key for c in nxt}), retried=reasked)
    return nxt


# --- aggregate ----------------------------------------------------------------------------------


def aggregate(judge: Judge, table: pd.DataFrame, p: _Plan, st: _State) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The table with the judge's columns (see :mod:`evalign.judges.grading` for the convention)."""
    per_row: list[dict[str, Any]] = []
    for i in range(len(p.records)):
        if p.skipped[i]:
            cols = judge.empty_columns("skipped", "self_evaluation")
        else:
            cols = judge.aggregate(st.results.get(i, {}))
        cols["error"] = st.errors.get(i)
        per_row.append(cols)
    out = table.copy()
    col = judge.column
    suffixes: list[str] = ["", "feedback", "status", "reason", "error"]
    for cols in per_row:
        suffixes.extend(k for k in cols if k not in suffixes)
    for suf in suffixes:
        name = col if suf == "" else f"{col}.{suf}"
        out[name] = [cols.get(suf) for cols in per_row]
    if not judge.pairwise:
        out[col] = out[col].astype(float)
    for suf, values in row_usage(len(p.records), st).items():
        out[f"{col}.{suf}"] = values
    return out, per_row


def row_usage(n_rows: int, st: _State) -> dict[str, list[Any]]:
    """The per-row usage columns (:data:`evalign.judges.usage.ROW_COLUMNS`): each row's answered calls
    (re-asks, stages and rounds included; cached ones too: what judging the row takes), of which
    ``unparsed`` gave no grade, their tokens and seconds, and the models (``;``-joined when several)
    and fingerprints that answered (the fingerprint column only when a server gave one)."""
    cols: dict[str, list[Any]] = {c: [0] * n_rows for c in ("calls", "unparsed", "prompt_tokens", "completion_tokens",
                                                            "cache_read_tokens", "cache_write_tokens")}
    cols["seconds"] = [0.0] * n_rows
    models: list[dict[str, None]] = [{} for _ in range(n_rows)]
    prints: list[dict[str, None]] = [{} for _ in range(n_rows)]
    for c in st.call_log:
        u = st.answers.get(c["key"]) if c.get("answered") else None
        if u is None:
            continue
        r = c["row"]
        cols["calls"][r] += 1
        cols["unparsed"][r] += 0 if c["reason"] is None else 1
        cols["prompt_tokens"][r] += u.prompt_tokens
        cols["completion_tokens"][r] += u.completion_tokens
        cols["cache_read_tokens"][r] += u.cache_read_tokens
        cols["cache_write_tokens"][r] += u.cache_write_tokens
        cols["seconds"][r] += u.seconds or 0.0
        if u.model:
            models[r][u.model] = None
        if u.fingerprint:
            prints[r][u.fingerprint] = None
    cols["seconds"] = [round(x, 4) for x in cols["seconds"]]
    cols["model"] = ["; ".join(m) or None for m in models]
    if any(prints):
        cols["fingerprint"] = ["; ".join(f) or None for f in prints]
    return cols


# --- the whole run ------------------------------------------------------------------------------


async def arun_judge(
    table: pd.DataFrame,
    judge: Judge,
    backend: Any,
    *,
    cache: Cache | None = None,
    skip_self: bool | Sequence[str] = False,
    human: str | None = None,
    length_unit: str = "chars",
    partial_path: str | Path | None = None,
    on_progress: ProgressFn | None = None,
    on_note: NoteFn | None = None,
    turns: str = "last",
    price: Price | None = None,
) -> JudgeRun:
    """Async form of :func:`run_judge`."""
    t0 = time.perf_counter()
    cache = cache if cache is not None else Cache()
    identity = backend.identity()
    if turns not in TURNS:
        raise InputError(f"turns must be {' or '.join(TURNS)}, got {turns!r}", field="turns")
    if turns == "each":
        table = expand_turns(table, judge.pairwise)
    if human is not None and human not in table.columns:
        raise InputError("no such human rating column", file=_source(table), field=human)
    model = getattr(backend, "display_model", None) or identity.get("model")
    constrained, note = await constraint_decision(judge, backend)
    if note and on_note is not None:
        on_note(note)
    active = judge if constrained else without_constraint(judge)
    p = plan(table, active, identity, skip_self, model, constrained)
    progress = _Progress(on_progress)
    log_fh: IO[str] | None = None
    if partial_path is not None:
        Path(partial_path).parent.mkdir(parents=True, exist_ok=True)
        log_fh = open(partial_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finally
        _log(log_fh, {"event": "start", "signature": str(active.signature(identity, p.reference)),
                      "calls": len(p.calls), "time": time.time()})
    try:
        try:
            st = await execute(active, backend, p, cache, progress, log_fh)
        except ConstraintRefused as exc:
            if judge.constrain == "on":
                raise EvalignError(f"{exc} (--constrain on; --constrain auto goes on without it)") from None
            note = f"output not constrained: {exc}; going on without the constraint"
            if on_note is not None:
                on_note(note)
            active = without_constraint(judge)
            p = plan(table, active, identity, skip_self, model, constrained=False)
            st = await execute(active, backend, p, cache, progress, log_fh)
    finally:
        if log_fh is not None:
            log_fh.close()
    out, per_row = aggregate(active, table, p, st)
    run_opts = dict(active.run_options(per_row))
    if p.constrained:
        run_opts["constraint"] = judge.constraint_tag()
    signature = str(active.signature(identity, p.reference, run_opts))
    summary = summarize(active, out, identity, signature, p.reference, st, progress.counts, human, length_unit,
                       round(time.perf_counter() - t0, 3), price)
    constraint = {"mode": judge.constrain, "sent": p.constrained, "note": note, "outside_shape": st.outside_shape}
    counts = getattr(active, "criterion_counts", None)
    notes = tuple(active.run_notes(per_row))
    for line in notes if on_note is not None else ():
        on_note(line)
    provider = caching_provider(identity)
    cache_report = {} if provider is None else prefix_report(
        (c.messages for c in p.calls), kind=provider, model=str(identity.get("model") or ""),
        prompt_cache=str(getattr(backend, "prompt_cache", "auto")))
    summary = replace(summary, constraint=constraint, criteria=counts(per_row) if counts is not None else {},
                      notes=notes, prompt_cache=cache_report)
    return JudgeRun(out, summary, judge.column, signature, st.call_log)


def without_constraint(judge: Judge) -> Judge:
    """A copy of ``judge`` that sends no output constraint (its calls, and their cache keys, are those
    of ``constrain="off"``)."""
    if judge.constrain == "off":
        return judge
    out = copy.copy(judge)
    out.constrain, out.grammar, out.json_schema = "off", None, None
    return out


async def constraint_decision(judge: Judge, backend: Any) -> tuple[bool, str | None]:
    """Whether the run's calls carry their output constraints, and the one line that says why not
    (None when they do, or when none is asked for). ``constrain`` ``on`` and a backend that cannot
    (or a ``max_tokens`` too small for the answer's shape): an :class:`EvalignError` with that line."""
    if judge.constrain == "off":
        return False, None
    try:
        wanted = judge.constraints()
    except EvalignError as exc:
        if judge.constrain == "on":
            raise
        return False, f"output not constrained: {exc}"
    if not wanted:
        return False, None
    check = getattr(backend, "check_constraint", None)
    for c in wanted:
        reason = await check(c) if check is not None else f"the backend {type(backend).__name__} takes no constraint"
        if reason:
            if judge.constrain == "on":
                raise EvalignError(f"cannot constrain the output: {reason} (--constrain on; --constrain auto goes "
                                   "on without it)")
            return False, f"output not constrained: {reason}"
    return True, None


def run_judge(
    table: pd.DataFrame,
    judge: Judge,
    backend: Any,
    *,
    cache: Cache | None = None,
    skip_self: bool | Sequence[str] = False,
    human: str | None = None,
    length_unit: str = "chars",
    partial_path: str | Path | None = None,
    on_progress: ProgressFn | None = None,
    on_note: NoteFn | None = None,
    turns: str = "last",
    price: Price | None = None,
) -> JudgeRun:
    """Grade every row of ``table`` (an item table, or a pair table for pairwise judges) with
    ``judge`` on ``backend``; returns the table with the judge's columns and the run summary.

    ``cache``: where calls are stored and looked up (default: the project cache).
    ``skip_self``: rows whose system matches are ``skipped`` (reason ``self_evaluation``): True = the
    judge model's own name; or glob patterns such as ``["gpt-4*"]`` (``"self"`` = the model's name).
    ``human``: a human rating column for the within-grade length-bias audit.
    ``length_unit``: ``"chars"`` or ``"words"`` for the length-bias audit.
    ``partial_path``: a JSONL progress log (one line per finished call).
    ``on_progress(counts)``: called as calls finish (done, total, cached, new, unscored, retried, failed).
    ``on_note(line)``: called with the one line that says the output is not constrained, and why, and
    with each of the judge's notes on what the answers lacked (:meth:`~evalign.judges.base.Judge.run_notes`).
    ``turns``: for rows holding a conversation (``messages``, or ``messages_a`` / ``messages_b``),
    ``"last"`` grades the last assistant turn in context (the row as it is); ``"each"`` grades every
    assistant turn: each such row becomes one row per turn (``turn`` = 1, 2, ...; the conversation cut
    after that turn; the row's other columns, labels included, copied to each).
    ``price``: the judge's :class:`~evalign.judges.usage.Price` (the summary's ``usage`` then has the cost).
    """

    async def main() -> JudgeRun:
        try:
            return await arun_judge(table, judge, backend, cache=cache, skip_self=skip_self, human=human,
                                    length_unit=length_unit, partial_path=partial_path, on_progress=on_progress,
                                    on_note=on_note, turns=turns, price=price)
        finally:
            await backend.aclose()

    return asyncio.run(main())


def _log(fh: IO[str], obj: Mapping[str, Any]) -> None:
    fh.write(json.dumps(json_safe(dict(obj)), ensure_ascii=False) + "\n")
    fh.flush()
