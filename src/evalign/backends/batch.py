"""Batch mode (``--batch-api``): a wave of calls sent through a provider's batch API (half the price,
results within 24 h) instead of one request each, by :class:`BatchBackend` wrapped around the ordinary
backend.

A *wave* is one :meth:`BatchBackend.generate_many` call: the calls whose prompts are known (a judge
run's first calls; then its re-asks, ranking rounds, cascade stages, each a wave of its own). Each
wave is one submission, split into batches within the provider's limits (:attr:`BatchAdapter.max_lines`
/ :attr:`BatchAdapter.max_bytes`) and ``--batch-max-requests``. A line's ``custom_id`` is the call's
cache key (the caller's, or a hash of the backend identity and the request), one line per distinct key.

Crash safety: every batch is recorded in the cache's SQLite file (:class:`~evalign.backends.batch_store.BatchStore`)
before it is created at the provider; a rerun of the same command re-attaches to the batches still
there and submits nothing twice. Results are read line by line as each batch ends and handed to the
caller (``on_done``, which writes them into the cache), so a rerun without ``--batch-api`` reuses them.

Per line, never per batch: results map back by ``custom_id`` in any order; a line that failed (an HTTP
status other than 200, an error object, a line only in the error file, a line in no file, a batch that
failed, expired or was cancelled as a whole) is counted by reason and sent again in a later batch, up to
``retries`` times (``retry="sync"``: as ordinary requests); a line that fails with the same 4xx twice is
given up with the provider's message. The provider-specific part (the wire format) is a
:class:`BatchAdapter`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import tempfile
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, Any, ClassVar

from evalign.backends.base import Backend, BackendRequestError, OnDone
from evalign.backends.batch_store import BatchStore
from evalign.backends.types import Constraint, Generation, GenerationRequest
from evalign.cache import make_key
from evalign.errors import BackendError

log = logging.getLogger(__name__)

#: what a custom id may be (Anthropic's rule, the strictest of the providers)
CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: ``--batch-retry``: how failed lines are sent again
RETRY_MODES = ("batch", "sync")


class NotCreated(BackendRequestError):
    """A submission the provider certainly did not create (the upload failed, or the create request was
    refused): its record is dropped at once, nothing to look for at the provider."""


@dataclass(frozen=True)
class BatchSettings:
    """How batches are sent and waited for.

    ``max_requests``: most lines per batch (``--batch-max-requests``; None: the provider's limit). It
    splits a wave into provider batches; it is not the hf backend's ``--batch-size`` (how many prompts
    one forward pass of a local model takes). ``retries``: how many times a failed line is sent again
    (``--batch-retries``, >= 0); ``retry``: ``batch`` (in a later batch) or ``sync`` (as ordinary
    requests). ``poll``: seconds before the first status check, growing 1.5x per check up to
    ``poll_max``. ``deadline``: seconds from the first submission after which polling stops (the
    batches are left running; None: no limit).
    """

    max_requests: int | None = None
    retries: int = 2
    retry: str = "batch"
    poll: float = 30.0
    poll_max: float = 600.0
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.max_requests is not None and self.max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {self.max_requests}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.retry not in RETRY_MODES:
            raise ValueError(f"retry must be one of {', '.join(RETRY_MODES)}, got {self.retry!r}")
        if self.poll <= 0 or self.poll_max <= 0:
            raise ValueError("poll intervals must be > 0 seconds")


@dataclass(frozen=True)
class LineResult:
    """One result line read back: its ``custom_id`` and either the ``generation`` or why not
    (``reason``: a :data:`BatchBackend.by_reason` key such as ``http_400``, ``error``, ``errored``,
    ``expired``, ``canceled``; ``message``: the provider's; ``status``: the line's HTTP status)."""

    custom_id: str
    generation: Generation | None = None
    reason: str | None = None
    message: str | None = None
    status: int | None = None


@dataclass(frozen=True)
class BatchStatus:
    """A batch's state at the provider: ``state`` (the provider's word), ``terminal`` (no more change),
    ``failure`` (the reason every line without a result gets when the batch ended as a whole:
    ``batch_failed``, ``expired``, ``canceled``; None: ``missing``), ``message`` (the provider's, for a
    failed batch), ``detail`` (file ids etc., stored with the record) and ``counts`` (lines done, failed)."""

    state: str
    terminal: bool
    failure: str | None = None
    message: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    counts: tuple[int, int] | None = None


class BatchAdapter(ABC):
    """One provider's batch wire format: build a line, submit, poll, read results, cancel."""

    provider: ClassVar[str] = ""
    #: the provider's limits on one batch: lines and bytes of its input
    max_lines: ClassVar[int] = 50_000
    max_bytes: ClassVar[int] = 200 * 1024 * 1024
    #: the provider's words for a batch still running
    url: str = ""
    model: str | None = None
    key_env: str | None = None

    @abstractmethod
    def line(self, custom_id: str, req: GenerationRequest) -> bytes:
        """The batch input line (JSON, ending in a newline) of one request."""

    @abstractmethod
    async def submit(self, fh: IO[bytes], n_lines: int, submission: str) -> tuple[str, str, dict[str, Any]]:
        """Upload the lines in ``fh`` and create the batch (``submission`` kept in its metadata);
        returns ``(batch id, state, detail)``; :class:`NotCreated` when the provider certainly created none."""

    @abstractmethod
    async def find(self, submission: str) -> tuple[str, str, dict[str, Any]] | None:
        """The batch created with ``submission``, if the provider has one (a crash before its id was stored)."""

    @abstractmethod
    async def status(self, batch_id: str, detail: dict[str, Any]) -> BatchStatus:
        """The batch's state now."""

    @abstractmethod
    def results(self, batch_id: str, status: BatchStatus) -> AsyncIterator[LineResult]:
        """The result lines of an ended batch, streamed (output and error files, in any order)."""

    @abstractmethod
    async def cancel(self, batch_id: str) -> str:
        """Ask the provider to cancel the batch; returns its state."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


@dataclass
class _Wave:
    """One :meth:`BatchBackend.generate_many` call: what is wanted, what failed, how often."""

    reqs: dict[str, GenerationRequest]
    deliver: Callable[[str, Generation | BackendError], None]
    wanted: set[str]
    attempts: Counter[str] = field(default_factory=Counter)
    last_status: dict[str, int | None] = field(default_factory=dict)
    failed: dict[str, LineResult] = field(default_factory=dict)


class BatchBackend(Backend):
    """The ordinary backend ``inner`` with its waves sent as provider batches (see the module doc).
    Its identity is ``inner``'s: batched and synchronous runs share cache keys, and their verdicts
    are equal for equal answers. ``store``: where batches are recorded (the cache's file).
    ``on_progress(line)``: one progress line per poll (default: the log). Counters for the run
    summary: :meth:`batch_summary`."""

    takes_keys = True

    def __init__(self, inner: Backend, adapter: BatchAdapter, store: BatchStore, settings: BatchSettings,
                 on_progress: Callable[[str], None] | None = None, on_note: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.kind = inner.kind
        self.concurrency = inner.concurrency
        self.output = inner.output
        self.adapter = adapter
        self.store = store
        self.settings = settings
        self.on_progress = on_progress
        self.on_note = on_note
        self.batches = 0
        self.lines = 0
        self.failed_lines = 0
        self.retried_lines = 0
        self.by_reason: Counter[str] = Counter()
        self._started: float | None = None
        self._active: list[int] = []

    def __getattr__(self, name: str) -> Any:  # display_model, server_format ... of the wrapped backend
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def identity(self) -> dict[str, Any]:
        """The wrapped backend's identity (shared cache keys)."""
        return self.inner.identity()

    async def check_constraint(self, constraint: Constraint) -> str | None:
        """As the wrapped backend."""
        return await self.inner.check_constraint(constraint)

    async def aclose(self) -> None:
        """Close the wrapped backend's and the batch client's connections."""
        await self.adapter.aclose()
        await self.inner.aclose()

    def batch_summary(self) -> dict[str, Any]:
        """``{batches, lines, failed_lines, retried_lines, by_reason}``, counted per attempt."""
        return {"batches": self.batches, "lines": self.lines, "failed_lines": self.failed_lines,
                "retried_lines": self.retried_lines, "by_reason": dict(sorted(self.by_reason.items()))}

    def stats(self) -> dict[str, int]:
        """The wrapped backend's counters plus this one's answered lines."""
        out = dict(self.inner.stats())
        out["requests"] = out.get("requests", 0) + self.requests
        out["prompt_tokens"] = out.get("prompt_tokens", 0) + self.usage.prompt_tokens
        out["completion_tokens"] = out.get("completion_tokens", 0) + self.usage.completion_tokens
        out["failures"] = out.get("failures", 0) + self.failures
        return out

    def key_of(self, req: GenerationRequest) -> str:
        """The custom id of a request sent without a caller's key: a hash of the identity and the request."""
        return make_key("batch", self.identity(), req.to_dict())

    async def generate(self, req: GenerationRequest) -> Generation:
        """One request as a batch of one."""
        out = (await self.generate_many([req], raise_errors=True))[0]
        assert isinstance(out, Generation)
        return out

    async def generate_many(self, reqs: Sequence[GenerationRequest], on_done: OnDone | None = None, *,
                            raise_errors: bool = False, keys: Sequence[str] | None = None
                            ) -> list[Generation | BackendError]:
        """Send one wave of requests as batches (``keys``: their cache keys, the custom ids; default
        :meth:`key_of`); results in input order, ``on_done(index, result)`` as each line is read."""
        keys = list(keys) if keys is not None else [self.key_of(r) for r in reqs]
        if len(keys) != len(reqs):
            raise ValueError("one key per request")
        slots: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            if not CUSTOM_ID.fullmatch(k):
                raise ValueError(f"a batch custom id must be 1-64 characters of [A-Za-z0-9_-], got {k!r}")
            slots.setdefault(k, []).append(i)
        results: list[Generation | BackendError | None] = [None] * len(reqs)

        def deliver(k: str, res: Generation | BackendError) -> None:
            if isinstance(res, Generation):
                self._count(res.usage)
            else:
                self._count(failed=True)
                if raise_errors or getattr(res, "fatal", False):
                    raise res
            for i in slots[k]:
                results[i] = res
                if on_done is not None:
                    on_done(i, res)
            wave.wanted.discard(k)

        wave = _Wave({k: reqs[ix[0]] for k, ix in slots.items()}, deliver, set(slots))
        if self._started is None:
            self._started = time.monotonic()
        todo = list(slots)
        while todo:
            active = await self._attach(todo)
            attached = {k for ks in active.values() for k in ks}
            sent = [k for k in todo if k in wave.wanted and k not in attached]
            nos = list(active) + await self._submit_all(sent, wave)
            await self._poll(nos, wave)
            todo = self._retry_or_give_up(wave)
            if todo and self.settings.retry == "sync":
                await self._sync(todo, wave)
                todo = []
        return [r for r in results if r is not None]

    # -- submitting ------------------------------------------------------------------------
    async def _attach(self, keys: Sequence[str]) -> dict[int, list[str]]:
        """The recorded batches still in flight that hold some of ``keys`` (a rerun after a crash);
        a record left ``submitting`` is looked up at the provider (kept when found, else dropped)."""
        out = self.store.attached(self.adapter.provider, self.adapter.url, keys)
        for no in list(out):
            rec = self.store.get(no)
            if rec is None or rec.state != "submitting":
                continue
            found = await self.adapter.find(str(rec.detail.get("submission", "")))
            if found is None:
                self.store.forget(no)
                del out[no]
            else:
                self.store.update(no, batch_id=found[0], state=found[1], detail=found[2])
        if out:
            self._note(f"re-attached to {len(out)} {self.adapter.provider} batch(es) still in flight "
                       f"({sum(len(v) for v in out.values())} lines)")
        return out

    async def _submit_all(self, keys: Sequence[str], wave: _Wave) -> list[int]:
        """Submit ``keys`` as batches within the limits; returns their record numbers."""
        limit = min(self.adapter.max_lines, self.settings.max_requests or self.adapter.max_lines)
        nos: list[int] = []
        chunk: list[str] = []
        size = 0
        fh: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, one per batch
        try:
            for k in keys:
                line = self.adapter.line(k, wave.reqs[k])
                if len(line) > self.adapter.max_bytes:
                    wave.deliver(k, BackendRequestError(f"the request is larger than a {self.adapter.provider} batch "
                                                        f"may be ({len(line)} bytes)"))
                    continue
                if chunk and (len(chunk) >= limit or size + len(line) > self.adapter.max_bytes):
                    nos.append(await self._submit(fh, chunk, wave))
                    fh.close()
                    fh, chunk, size = tempfile.TemporaryFile(), [], 0  # noqa: SIM115
                fh.write(line)
                chunk.append(k)
                size += len(line)
            if chunk:
                nos.append(await self._submit(fh, chunk, wave))
        finally:
            fh.close()
        return nos

    async def _submit(self, fh: IO[bytes], keys: list[str], wave: _Wave) -> int:
        """Record one batch, then create it at the provider (see the module doc)."""
        a = self.adapter
        submission = uuid.uuid4().hex
        no = self.store.begin(a.provider, a.url, a.model, a.key_env, keys, {"submission": submission})
        fh.seek(0)
        try:
            batch_id, state, detail = await a.submit(fh, len(keys), submission)
        except NotCreated:
            self.store.forget(no)
            raise
        except BaseException:
            found = None
            try:
                found = await a.find(submission)
            except Exception:  # the provider unreachable: the record stays, a rerun looks again
                log.debug("cannot look up submission %s", submission)
                raise
            finally:
                if found is not None:
                    self.store.update(no, batch_id=found[0], state=found[1], detail=found[2])
            if found is None:
                self.store.forget(no)
            raise
        self.store.update(no, batch_id=batch_id, state=state, detail=detail)
        self.batches += 1
        self.lines += len(keys)
        for k in keys:
            wave.attempts[k] += 1
        return no

    # -- waiting ---------------------------------------------------------------------------
    async def _poll(self, nos: list[int], wave: _Wave) -> None:
        """Poll the batches ``nos`` with backoff until every one has ended, collecting each as it ends."""
        active = list(nos)
        self._active = active
        delay = self.settings.poll
        try:
            while active:
                for no in list(active):
                    if await self._check(no, wave):
                        active.remove(no)
                self._progress(active)
                if not active:
                    break
                self._check_deadline(len(active))
                await asyncio.sleep(self._wait(delay))
                delay = min(self.settings.poll_max, delay * 1.5)
        except asyncio.CancelledError:
            self._note(self._left_running(len(active), "polling stopped (interrupted)"))
            raise
        finally:
            self._active = []
            self.store.stop_polling(active)

    def _wait(self, delay: float) -> float:
        if self.settings.deadline is None or self._started is None:
            return delay
        left = self._started + self.settings.deadline - time.monotonic()
        return max(0.0, min(delay, left))

    def _check_deadline(self, n_active: int) -> None:
        if self.settings.deadline is None or self._started is None:
            return
        if time.monotonic() - self._started >= self.settings.deadline:
            raise BackendRequestError(self._left_running(n_active, f"the deadline of {self.settings.deadline:g} s "
                                                         "has passed (--deadline)"), fatal=True)

    def _left_running(self, n: int, why: str) -> str:
        return (f"{why}: {n} {self.adapter.provider} batch(es) left running at the provider, finished lines "
                "are kept; run the same command again to collect them (nothing is submitted twice), or "
                "'evalign cache batches --cancel' to cancel them")

    async def _check(self, no: int, wave: _Wave) -> bool:
        """Poll one batch; when it has ended, read its results. Whether it has ended."""
        rec = self.store.get(no)
        if rec is None or rec.batch_id is None:
            return True
        st = await self.adapter.status(rec.batch_id, rec.detail)
        self.store.update(no, state=st.state, detail=st.detail, polled=True)
        if not st.terminal:
            return False
        await self._collect(no, rec.batch_id, st, wave)
        return True

    async def _collect(self, no: int, batch_id: str, st: BatchStatus, wave: _Wave) -> None:
        """Read an ended batch's lines: answers go to the caller at once, failures are noted by reason."""
        ids = self.store.custom_ids(no)
        states: dict[str, tuple[str, str | None]] = {}
        async for lr in self.adapter.results(batch_id, st):
            k = lr.custom_id
            if k not in ids or k in states:
                continue
            if lr.generation is not None:
                states[k] = ("done", None)
                if k in wave.wanted:
                    wave.deliver(k, replace(lr.generation, batched=True))  # priced at the batch multiplier
            else:
                states[k] = ("failed", lr.reason)
                self._failed(k, lr, wave)
        why = st.failure or "missing"
        msg = st.message or ("no result line for it in any file of the batch" if why == "missing" else
                             f"the batch ended as {st.state} before it was answered")
        for k in ids:
            if k not in states:
                states[k] = ("failed", why)
                self._failed(k, LineResult(k, reason=why, message=msg), wave)
        self.store.finish(no, states)

    def _failed(self, k: str, lr: LineResult, wave: _Wave) -> None:
        self.failed_lines += 1
        self.by_reason[lr.reason or "error"] += 1
        if k in wave.wanted:
            wave.failed[k] = lr

    def _retry_or_give_up(self, wave: _Wave) -> list[str]:
        """The failed lines to send again; the others (retries spent, the same 4xx twice) are given up."""
        again: list[str] = []
        for k, lr in wave.failed.items():
            same_4xx = lr.status is not None and 400 <= lr.status < 500 and wave.last_status.get(k) == lr.status
            wave.last_status[k] = lr.status
            if same_4xx or wave.attempts[k] > self.settings.retries:
                why = "the same client error twice" if same_4xx else f"{wave.attempts[k]} batch attempts"
                wave.deliver(k, BackendRequestError(f"{self.adapter.provider} batch line failed ({why}): "
                                                    f"{lr.reason}: {lr.message or ''}".rstrip(": "),
                                                    status=lr.status))
            else:
                again.append(k)
        wave.failed.clear()
        self.retried_lines += len(again)
        return again

    async def _sync(self, keys: list[str], wave: _Wave) -> None:
        """Send failed lines again as ordinary requests (``retry="sync"``)."""
        def done(i: int, res: Generation | BackendError) -> None:
            wave.deliver(keys[i], res)

        await self.inner.generate_many([wave.reqs[k] for k in keys], done)

    # -- saying ----------------------------------------------------------------------------
    def _progress(self, active: list[int]) -> None:
        recs = [r for r in (self.store.get(no) for no in active) if r is not None]
        oldest = max((time.time() - r.created for r in recs), default=0.0)
        line = (f"batches: {self.batches} submitted, {len(active)} in progress; lines: {self.lines} sent, "
                f"{self.requests - self.failures} done, {self.failed_lines} failed; oldest {oldest:.0f} s")
        if self.on_progress is not None:
            self.on_progress(line)
        else:
            log.info("%s", line)

    def _note(self, line: str) -> None:
        if self.on_note is not None:
            self.on_note(line)
        else:
            print(line, file=sys.stderr)


BATCH_COUNTS = ("batches", "lines", "failed_lines", "retried_lines")


def custom_id_line(raw: str) -> dict[str, Any] | None:
    """A result line as its JSON object when it carries a string ``custom_id`` (OpenAI's and Anthropic's
    result files); None for a line that is not JSON or not such an object."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("custom_id"), str) else None


def batch_counts_since(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """The ``batch`` block (:meth:`BatchBackend.batch_summary`) of what happened between two readings of
    one backend's counters: ``after`` minus ``before`` (None: nothing before), ``by_reason`` likewise
    (reasons that did not grow left out)."""
    b = before or {}
    reasons = Counter(after.get("by_reason") or {})
    reasons.subtract(b.get("by_reason") or {})
    return {**{k: int(after.get(k, 0)) - int(b.get(k, 0)) for k in BATCH_COUNTS},
            "by_reason": dict(sorted((k, v) for k, v in reasons.items() if v > 0))}


def add_batch_counts(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The sum of ``batch`` blocks (several judges' or sets'); None when there is none."""
    if not blocks:
        return None
    reasons: Counter[str] = Counter()
    for b in blocks:
        reasons.update(b.get("by_reason") or {})
    return {**{k: sum(int(b.get(k, 0)) for b in blocks) for k in BATCH_COUNTS}, "by_reason": dict(sorted(reasons.items()))}


__all__ = [
    "BATCH_COUNTS",
    "CUSTOM_ID",
    "RETRY_MODES",
    "BatchAdapter",
    "BatchBackend",
    "BatchSettings",
    "BatchStatus",
    "LineResult",
    "NotCreated",
    "add_batch_counts",
    "batch_counts_since",
    "custom_id_line",
]
