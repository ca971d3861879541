"""Running a judge over a table: cached, resumable, concurrent, with a bias audit.

Every judge call is stored in :class:`evalign.cache.Cache` (namespace ``"judge"``) as soon as it
returns, under a key made of the backend identity (kind, base URL, model — never an API key), the
template name/version/hash, the rubric hash, the request settings (sampling, grammar, seed), the
sample index, the order (pairs), the re-ask attempt and the messages themselves. Running the same
command again after Ctrl-C, a crash or a dead server therefore makes no call twice; a cache opened
with ``read=False`` (``--no-cache``) makes every call anew (and stores the new outputs). Calls with
equal keys within one run (duplicate rows) are made once.

A call that still fails after the backend's retries is reported as unscored ``backend_error`` and
is not cached, so the next run tries it again. A fatal backend error (server unreachable, wrong key
or model) stops the run; everything finished so far is in the cache.

``partial_path`` receives one JSON line per finished call (a progress log that survives a kill);
the caller writes the final table atomically when the run completes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from evalign.cache import Cache, make_key
from evalign.errors import BackendError, InputError
from evalign.io import PAIR_REQUIRED, read_pairs  # noqa: F401  (read_pairs re-exported)
from evalign.judges.bias import length_bias, order_swap_agreement, pairwise_length_bias
from evalign.judges.grading import Judge, first_reference
from evalign.judges.parsing import ParseResult, unscored
from evalign.judges.prompts import Message, Rubric, rubric_from_cell

NAMESPACE = "judge"
#: bump when the cache key layout changes
KEY_VERSION = 1


ProgressFn = Callable[[dict[str, int]], None]


@dataclass
class Call:
    """One judge call: which row, sample, order and re-ask attempt, and what is sent."""

    row: int
    sample: int
    order: str
    attempt: int
    messages: list[Message]
    settings: dict[str, Any]
    key: str = ""


@dataclass
class JudgeRun:
    """The result of :func:`run_judge`: the table with the judge's columns and the run summary
    (counts by status and reason, calls made / cached / re-asked / failed, score distribution,
    bias audit, signature)."""

    table: pd.DataFrame
    summary: dict[str, Any]
    column: str
    signature: str
    calls: list[dict[str, Any]] = field(default_factory=list, repr=False)


# --- inputs -------------------------------------------------------------------------------------


def _source(table: pd.DataFrame) -> str:
    return str(table.attrs.get("source", "<table>"))


def decide_reference(judge: Judge, table: pd.DataFrame) -> bool:
    """Whether the reference answer goes into the prompts: the judge's ``reference`` option, or
    (None) True when every row has a reference. True with a row lacking one is an InputError."""
    refs = table["reference"].tolist() if "reference" in table.columns else [None] * len(table)
    has = [first_reference(r) is not None for r in refs]
    if judge.reference is False:
        return False
    if judge.reference is True:
        if not all(has):
            i = has.index(False)
            raise InputError(
                "no reference answer (judge without one: --no-reference / reference=False)",
                file=_source(table),
                line=i + 1,
                field="reference",
            )
        return True
    return bool(has) and all(has)


def row_rubrics(judge: Judge, table: pd.DataFrame) -> list[Rubric | None]:
    """The rubric of each row: the judge's rubric, or the parsed ``rubric_column`` cell."""
    if not judge.uses_rubric:
        return [None] * len(table)
    col = judge.rubric_column
    if col is None:
        return [judge.rubric] * len(table)
    if col not in table.columns:
        raise InputError("no such rubric column", file=_source(table), field=col)
    return [
        rubric_from_cell(v, file=_source(table), line=i + 1, field=col) for i, v in enumerate(table[col].tolist())
    ]


def self_judged(judge: Judge, table: pd.DataFrame, model: str | None) -> list[bool]:
    """Rows whose system is the judge model itself (compared with the model name and, for paths,
    its last component)."""
    if not model:
        return [False] * len(table)
    names = {model, model.rstrip("/").rsplit("/", 1)[-1]}
    cols = ["system_a", "system_b"] if judge.pairwise else ["system"]
    out = [False] * len(table)
    for c in cols:
        if c in table.columns:
            for i, v in enumerate(table[c].tolist()):
                out[i] = out[i] or (isinstance(v, str) and v in names)
    return out


def call_key(identity: Mapping[str, Any], judge: Judge, reference: bool, rubric: Rubric | None, call: Call) -> str:
    """The cache key of one call (see the module doc)."""
    return make_key(
        NAMESPACE,
        KEY_VERSION,
        dict(identity),
        judge.template.name,
        judge.template.version,
        judge.template.hash(reference),
        rubric.hash() if rubric is not None else None,
        call.settings,
        call.sample,
        call.order,
        call.attempt,
        call.messages,
    )


# --- running ------------------------------------------------------------------------------------


class _Progress:
    def __init__(self, fn: ProgressFn | None) -> None:
        self.fn = fn
        self.counts = {"done": 0, "total": 0, "cached": 0, "new": 0, "unscored": 0, "retried": 0, "failed": 0}

    def add(self, **kw: int) -> None:
        for k, v in kw.items():
            self.counts[k] += v
        if self.fn is not None:
            self.fn(dict(self.counts))


async def arun_judge(
    table: pd.DataFrame,
    judge: Judge,
    backend: Any,
    *,
    cache: Cache | None = None,
    skip_self: bool = False,
    human: str | None = None,
    length_unit: str = "chars",
    partial_path: str | Path | None = None,
    on_progress: ProgressFn | None = None,
) -> JudgeRun:
    """Async form of :func:`run_judge`."""
    from evalign.judges.backends import Generation, GenerationRequest

    t0 = time.perf_counter()
    cache = cache if cache is not None else Cache()
    identity = backend.identity()
    if judge.pairwise:
        missing = [c for c in PAIR_REQUIRED if c not in table.columns]
        if missing:
            raise InputError(f"not a pair table: no column '{missing[0]}' (pairwise judging needs "
                             f"{', '.join(PAIR_REQUIRED)})", file=_source(table), field=missing[0])
    elif "response" not in table.columns:
        raise InputError("no 'response' column (a pair table needs --mode pairwise)", file=_source(table),
                         field="response")
    if human is not None and human not in table.columns:
        raise InputError("no such human rating column", file=_source(table), field=human)
    reference = decide_reference(judge, table)
    rubrics = row_rubrics(judge, table)
    skipped = self_judged(judge, table, identity.get("model")) if skip_self else [False] * len(table)
    signature = str(judge.signature(identity, reference))
    records = table.to_dict("records")

    # the first attempt of every call
    pending: list[Call] = []
    for i, rec in enumerate(records):
        if skipped[i]:
            continue
        prompts = judge.prompts(rec, rubrics[i], reference)
        for s in range(judge.samples):
            settings = judge.request_settings(s)
            for order, messages in prompts:
                c = Call(i, s, order, 0, messages, settings)
                c.key = call_key(identity, judge, reference, rubrics[i], c)
                pending.append(c)

    progress = _Progress(on_progress)
    progress.add(total=len({c.key for c in pending}))
    final: dict[tuple[int, int, str], ParseResult] = {}
    call_log: list[dict[str, Any]] = []
    call_reasons: Counter[str] = Counter()
    http_retries = 0
    log_fh: IO[str] | None = None
    if partial_path is not None:
        Path(partial_path).parent.mkdir(parents=True, exist_ok=True)
        log_fh = open(partial_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finally
        _log(log_fh, {"event": "start", "signature": signature, "calls": len(pending), "time": time.time()})
    try:
        for attempt in range(judge.reask + 1):
            if not pending:
                break
            by_key: dict[str, list[Call]] = {}
            for c in pending:
                by_key.setdefault(c.key, []).append(c)
            stored = cache.get_many(NAMESPACE, list(by_key))
            outputs: dict[str, dict[str, Any] | BackendError] = {}
            bad = 0
            for k, raw in stored.items():
                gen = json.loads(raw.decode("utf-8"))["generation"]
                outputs[k] = gen
                bad += 0 if judge.parse(gen).ok else 1
            if stored:
                progress.add(done=len(stored), cached=len(stored), unscored=bad)
            todo = [k for k in by_key if k not in outputs]
            reqs = [GenerationRequest(messages=by_key[k][0].messages, **by_key[k][0].settings) for k in todo]

            def on_done(
                j: int,
                res: Any,
                todo: list[str] = todo,
                attempt: int = attempt,
                outputs: dict[str, Any] = outputs,
                by_key: dict[str, list[Call]] = by_key,
            ) -> None:
                nonlocal http_retries
                key = todo[j]
                if isinstance(res, Generation):
                    data = res.to_json()
                    cache.put(NAMESPACE, key, json.dumps({"generation": data}, ensure_ascii=False).encode("utf-8"))
                    outputs[key] = data
                    http_retries += res.retries
                    r = judge.parse(data)
                    progress.add(done=1, new=1, unscored=0 if r.ok else 1, retried=res.retries)
                    if log_fh is not None:
                        c = by_key[key][0]
                        _log(log_fh, {"key": key, "row": c.row, "sample": c.sample, "order": c.order,
                                      "attempt": attempt, "value": r.value, "reason": r.reason})
                else:
                    outputs[key] = res
                    progress.add(done=1, failed=1, unscored=1)
                    if log_fh is not None:
                        _log(log_fh, {"key": key, "attempt": attempt, "reason": "backend_error",
                                      "error": str(res)[:300]})

            if reqs:
                await backend.generate_many(reqs, on_done)
            nxt: list[Call] = []
            for key, calls in by_key.items():
                out = outputs.get(key)
                if isinstance(out, dict):
                    res = judge.parse(out)
                    text = out["choices"][0].get("text") or ""
                else:
                    res = unscored("backend_error", str(out)[:300] if out is not None else "")
                    text = ""
                if not res.ok:
                    call_reasons[res.reason or "?"] += len(calls)
                for c in calls:
                    final[(c.row, c.sample, c.order)] = res
                    call_log.append({"row": c.row, "sample": c.sample, "order": c.order, "attempt": c.attempt,
                                     "key": key, "cached": key in stored, "value": res.value,
                                     "reason": res.reason})
                    if not res.ok and res.reason != "backend_error" and attempt < judge.reask:
                        messages = judge.reask_messages(calls[0].messages, text, res)
                        n = Call(c.row, c.sample, c.order, attempt + 1, messages, c.settings)
                        n.key = call_key(identity, judge, reference, rubrics[c.row], n)
                        nxt.append(n)
            if nxt:
                progress.add(total=len({c.key for c in nxt}), retried=len({c.key for c in nxt}))
            pending = nxt
    finally:
        if log_fh is not None:
            log_fh.close()

    # one row of columns per table row
    col = judge.column
    per_row: list[dict[str, Any]] = []
    for i in range(len(records)):
        if skipped[i]:
            per_row.append(judge.empty_columns("skipped", "self_evaluation"))
            continue
        mine = {(s, o): r for (row, s, o), r in final.items() if row == i}
        per_row.append(judge.aggregate(mine))
    out = table.copy()
    suffixes: list[str] = []
    for cols in per_row:
        suffixes.extend(k for k in cols if k not in suffixes)
    for suf in suffixes:
        name = col if suf == "" else f"{col}.{suf}"
        out[name] = [cols.get(suf) for cols in per_row]
    out[col] = out[col].astype(float)

    summary = _summary(judge, out, col, identity, signature, reference, calls=call_log,
                       call_reasons=call_reasons, progress=progress.counts, http_retries=http_retries,
                       human=human, length_unit=length_unit)
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return JudgeRun(out, summary, col, signature, call_log)


def run_judge(
    table: pd.DataFrame,
    judge: Judge,
    backend: Any,
    *,
    cache: Cache | None = None,
    skip_self: bool = False,
    human: str | None = None,
    length_unit: str = "chars",
    partial_path: str | Path | None = None,
    on_progress: ProgressFn | None = None,
) -> JudgeRun:
    """Grade every row of ``table`` (an item table, or a pair table for pairwise judges) with
    ``judge`` on ``backend``; returns the table with the judge's columns and the run summary.

    ``cache``: where calls are stored and looked up (default: the project cache).
    ``skip_self``: rows whose system is the judge model get status ``skipped``.
    ``human``: a human rating column for the within-grade length-bias audit.
    ``length_unit``: ``"chars"`` or ``"words"`` for the length-bias audit.
    ``partial_path``: a JSONL progress log (one line per finished call).
    ``on_progress(counts)``: called as calls finish (done, total, cached, new, unscored, retried, failed).
    """

    async def main() -> JudgeRun:
        try:
            return await arun_judge(table, judge, backend, cache=cache, skip_self=skip_self, human=human,
                                    length_unit=length_unit, partial_path=partial_path, on_progress=on_progress)
        finally:
            await backend.aclose()

    return asyncio.run(main())


def _log(fh: IO[str], obj: Mapping[str, Any]) -> None:
    from evalign.io import _json_safe

    fh.write(json.dumps(_json_safe(dict(obj)), ensure_ascii=False) + "\n")
    fh.flush()


# --- summary ------------------------------------------------------------------------------------


def _summary(
    judge: Judge,
    out: pd.DataFrame,
    col: str,
    identity: Mapping[str, Any],
    signature: str,
    reference: bool,
    *,
    calls: Sequence[Mapping[str, Any]],
    call_reasons: Counter[str],
    progress: Mapping[str, int],
    http_retries: int,
    human: str | None,
    length_unit: str,
) -> dict[str, Any]:
    status = out[f"{col}.status"]
    unscored_rows = out[status == "unscored"]
    scores = out[col].to_numpy(dtype=float)
    summary: dict[str, Any] = {
        "judge": judge.name,
        "mode": judge.mode,
        "column": col,
        "higher_is_better": judge.higher_is_better,
        "signature": signature,
        "backend": dict(identity),
        "reference": reference,
        "items": len(out),
        "scored": int((status == "scored").sum()),
        "unscored": int((status == "unscored").sum()),
        "skipped": int((status == "skipped").sum()),
        "unscored_by_reason": dict(Counter(unscored_rows[f"{col}.reason"].fillna("?").tolist()).most_common()),
        "calls": {
            "total": len({c["key"] for c in calls}),
            "cached": int(progress.get("cached", 0)),
            "new": int(progress.get("new", 0)),
            "reasked": len({c["key"] for c in calls if c["attempt"] > 0}),
            "failed": int(progress.get("failed", 0)),
            "http_retries": http_retries,
            "unscored_by_reason": dict(call_reasons.most_common()),
        },
    }
    finite = scores[np.isfinite(scores)]
    if judge.pairwise:
        verdicts = out[f"{col}.verdict"].dropna().tolist()
        summary["distribution"] = {k: int(v) for k, v in sorted(Counter(verdicts).items())}
        summary["mean"] = float(finite.mean()) if finite.size else float("nan")
        bias: dict[str, Any] = {
            "length": pairwise_length_bias(scores, out["response_a"].tolist(), out["response_b"].tolist(),
                                           unit=length_unit)
        }
        if getattr(judge, "both_orders", False):
            bias["order_swap"] = order_swap_agreement(out[f"{col}.ab"].tolist(), out[f"{col}.ba"].tolist())
        summary["bias"] = bias
    else:
        rounded = Counter(float(v) if float(v).is_integer() else round(float(v)) for v in finite)
        summary["distribution"] = {f"{k:g}": int(v) for k, v in sorted(rounded.items())}
        summary["mean"] = float(finite.mean()) if finite.size else float("nan")
        summary["std"] = float(finite.std()) if finite.size else float("nan")
        hum = out[human].to_numpy(dtype=float) if human else None
        summary["bias"] = {"length": length_bias(scores, out["response"].tolist(), unit=length_unit, human=hum)}
    return summary
