"""One judge model served by several OpenAI-compatible endpoints: :class:`MultiEndpointBackend`.

Requests are spread over the endpoints (each an :class:`OpenAICompatibleBackend`, which does the HTTP),
at most ``concurrency`` in flight per endpoint, the least busy healthy endpoint first. An endpoint whose
call fails with a connection error, a timeout or a 5xx status is *taken out*; after ``cooldown``
seconds it gets a health check (``GET {base_url}/models``) and is put back when it answers. The failed
request is retried at once on another healthy endpoint (with backoff when every endpoint has been
tried). When no endpoint is healthy, requests fail as backend errors (non-fatal: the caller's
``--max-failed`` decides), quickly once one request has waited through all its retries.
A busy endpoint (408 / 409 / 425 / 429) stays in; the request is retried elsewhere or after a backoff
(each endpoint makes one attempt per call, so its ``Retry-After`` pause is not used here). Request
and configuration errors (other 4xx; 401 / 403 / 404 are fatal) are raised at once, as with one URL.

The cache identity does NOT name the endpoints: ``{"kind": "openai", "model", "endpoint",
"system_prompt"[, "extra_body"]}``, so runs with different endpoint lists share cached grades (a
single-URL :class:`OpenAICompatibleBackend` keeps its URL in its identity, as before).

Usage::

    backend = make_backend("multi", base_urls=["http://gpu1:8000/v1", "http://gpu2:8000/v1"],
                           model="prometheus-7b-v2.0", concurrency=4)
    gens = backend.run(requests)
    backend.endpoint_stats()   # [{"base_url", "calls", "failures", "taken_out", "put_back", "healthy"}, ...]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evalign.backends._http import RetryPolicy, is_retryable_status, split_url_credentials
from evalign.backends.base import Backend, BackendOptions, BackendRequestError
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.registry import register_backend
from evalign.backends.types import Constraint, Generation, GenerationRequest

log = logging.getLogger(__name__)

#: A health check: True when the endpoint answers.
Probe = Callable[[Backend], Awaitable[bool]]


@dataclass
class _Endpoint:
    """Scheduling state of one endpoint (mutated only in the event loop)."""

    backend: Backend
    name: str
    limit: int
    active: int = 0
    calls: int = 0  # requests answered here
    failures: int = 0  # attempts that failed here
    taken_out: int = 0  # times taken out
    put_back: int = 0  # times put back after a health check
    healthy: bool = True
    last_error: str | None = None

    def stats(self) -> dict[str, Any]:
        return {"base_url": self.name, "calls": self.calls, "failures": self.failures,
                "taken_out": self.taken_out, "put_back": self.put_back, "healthy": self.healthy,
                "last_error": self.last_error}  # fmt: skip


class _NoEndpoint(Exception):
    """Internal: no healthy endpoint right now."""


def is_endpoint_failure(exc: BackendRequestError) -> bool:
    """True when ``exc`` says the endpoint is broken (no HTTP status: connection error, timeout,
    dropped or unusable answer; or a 5xx status), not the request or the configuration."""
    return exc.status is None or exc.status >= 500


async def http_probe(backend: Backend, timeout: float = 5.0) -> bool:
    """Health check of an :class:`OpenAICompatibleBackend`: ``GET {base_url}/models`` answers with a
    status below 500 within ``timeout`` seconds (through the backend's own connection pool and headers)."""
    client, _ = backend._ensure_client()  # type: ignore[attr-defined]
    headers, _key = backend._headers()  # type: ignore[attr-defined]
    try:
        resp = await asyncio.wait_for(client.get(f"{backend.base_url}/models", headers=headers), timeout)  # type: ignore[attr-defined]
    except Exception:
        return False
    return int(resp.status_code) < 500


class MultiEndpointBackend(Backend):
    """Spread requests over several endpoints serving the same model (see the module docstring).

    Give either ``base_urls`` (with ``model`` and the :class:`OpenAICompatibleBackend` keyword
    arguments in ``endpoint_options``, e.g. ``concurrency``, ``timeout``, ``api_key_env``; each endpoint
    then makes ONE attempt per call, retries are this backend's) or ready ``endpoints`` (Backend
    objects with a ``concurrency``, e.g. for tests).

    * ``cooldown``: seconds an endpoint stays out before its health check (then again after each
      failed check).
    * ``probe``: the health check (default :func:`http_probe` with ``probe_timeout`` seconds).
    * ``max_retries``, ``backoff_base``, ``backoff_max``, ``seed``: retries of one request over the
      endpoints (:class:`evalign.backends._http.RetryPolicy`); a retry goes to an endpoint not tried yet
      when one is healthy, without waiting.
    * ``deadline``: seconds for all requests together, from the first (passed to every endpoint too);
      past it no attempt is started and a failure is not retried: a fatal error stops the run.
    """

    kind = "multi"
    required_options = ("model", "base_url")

    @classmethod
    def from_options(cls, options: BackendOptions) -> Backend:
        """One model on every URL of ``options.base_url`` (each endpoint an OpenAI-compatible client)."""
        urls = {"base_urls": list(options.base_urls)} if options.base_urls else {}
        own = options.given("concurrency", "timeout", "connect_timeout", "max_retries", "deadline", "system_prompt",
                            "idle_timeout", "stream", "constraint_format")
        return cls(**{**urls, "model": options.model, "api_key_env": options.api_key_env, **own, **options.extra})

    def __init__(
        self,
        base_urls: Sequence[str] | None = None,
        model: str | None = None,
        *,
        endpoints: Sequence[Backend] | None = None,
        cooldown: float = 10.0,
        probe: Probe | None = None,
        probe_timeout: float = 5.0,
        max_retries: int = 6,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        deadline: float | None = None,
        seed: int | None = None,
        **endpoint_options: Any,
    ) -> None:
        super().__init__()
        if (base_urls is None) == (endpoints is None):
            raise ValueError("give exactly one of base_urls or endpoints")
        if cooldown < 0:
            raise ValueError(f"cooldown must be >= 0 seconds, got {cooldown}")
        if probe_timeout <= 0:
            raise ValueError(f"probe_timeout must be > 0 seconds, got {probe_timeout}")
        if base_urls is not None:
            if isinstance(base_urls, str) or not base_urls:
                raise ValueError(f"base_urls must be a non-empty list of URLs, got {base_urls!r}")
            if model is None:
                raise ValueError("model is required with base_urls")
            dup = sorted({u for u in base_urls if list(base_urls).count(u) > 1})
            if dup:
                raise ValueError(f"base URL given more than once: {split_url_credentials(dup[0])[0]}")  # never its credentials
            endpoints = [
                OpenAICompatibleBackend(u, model, max_retries=0, deadline=deadline, seed=seed, **endpoint_options)
                for u in base_urls
            ]
            probe = probe or (lambda b: http_probe(b, probe_timeout))
        assert endpoints is not None
        if not endpoints:
            raise ValueError("endpoints is empty")
        idents = [_shared_identity(e) for e in endpoints]
        if any(i != idents[0] for i in idents[1:]):
            raise ValueError(f"every endpoint must serve the same model with the same settings; got {idents}")
        self._identity = idents[0]
        self._eps = [
            _Endpoint(e, str(getattr(e, "base_url", f"endpoint-{k}")), max(1, int(getattr(e, "concurrency", 1))))
            for k, e in enumerate(endpoints)
        ]
        self.model = model or self._identity.get("model")
        self.concurrency = sum(ep.limit for ep in self._eps)
        self.cooldown = float(cooldown)
        self.probe: Probe = probe or _generation_probe
        self.policy = RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max,
                                  rng=random.Random(seed))  # fmt: skip
        self.deadline = None if deadline is None else float(deadline)
        self._deadline_at: float | None = None
        self._cond: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._revivers: dict[int, asyncio.Task[None]] = {}
        self._all_down = False  # a request gave up because no endpoint was healthy (fail fast until one is back)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({[ep.name for ep in self._eps]!r}, model={self.model!r})"

    def identity(self) -> dict[str, Any]:
        """The endpoints' shared identity without their URLs (same model and settings = same cache key)."""
        return dict(self._identity)

    def endpoint_stats(self) -> list[dict[str, Any]]:
        """Per endpoint: ``base_url``, ``calls`` answered, ``failures`` (attempts that failed there),
        ``taken_out`` / ``put_back`` (times), ``healthy`` now, ``last_error``."""
        return [ep.stats() for ep in self._eps]

    # -- scheduling ------------------------------------------------------------------------
    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._cond is None or self._loop is not loop:
            self._cond = asyncio.Condition()
            self._loop = loop
            self._revivers = {}
            for k, ep in enumerate(self._eps):  # a new event loop: endpoints still out get a new check
                ep.active = 0
                if not ep.healthy:
                    self._revivers[k] = asyncio.ensure_future(self._revive(k))
        return self._cond

    async def _acquire(self, tried: set[int]) -> int:
        """Index of the least busy healthy endpoint with a free slot, one not in ``tried`` when such a one
        is healthy (waits for a slot); raises :class:`_NoEndpoint` when none is healthy."""
        cond = self._condition()
        async with cond:
            while True:
                healthy = [k for k, ep in enumerate(self._eps) if ep.healthy]
                if not healthy:
                    raise _NoEndpoint
                # a retry waits for an endpoint it has not tried yet, when one is healthy
                fresh = [k for k in healthy if k not in tried] or healthy
                free = [k for k in fresh if self._eps[k].active < self._eps[k].limit]
                if free:
                    k = min(free, key=lambda k: (self._eps[k].active / self._eps[k].limit, self._eps[k].calls, k))
                    self._eps[k].active += 1
                    return k
                await cond.wait()

    async def _release(self, k: int) -> None:
        cond = self._condition()
        async with cond:
            self._eps[k].active -= 1
            cond.notify_all()

    async def _take_out(self, k: int, exc: BaseException) -> None:
        ep = self._eps[k]
        ep.failures += 1
        ep.last_error = str(exc)[:300]
        if ep.healthy:
            ep.healthy = False
            ep.taken_out += 1
            log.warning("endpoint %s taken out for %g s: %s", ep.name, self.cooldown, ep.last_error)
            if k not in self._revivers or self._revivers[k].done():
                self._revivers[k] = asyncio.ensure_future(self._revive(k))
        cond = self._condition()
        async with cond:
            cond.notify_all()  # waiters re-check: maybe no endpoint is healthy any more

    async def _revive(self, k: int) -> None:
        """Health-check endpoint ``k`` every ``cooldown`` seconds until it answers; then put it back."""
        ep = self._eps[k]
        while not ep.healthy:
            await asyncio.sleep(self.cooldown)
            if await self.probe(ep.backend):
                ep.healthy = True
                ep.put_back += 1
                self._all_down = False
                log.warning("endpoint %s answers again: put back", ep.name)
                cond = self._condition()
                async with cond:
                    cond.notify_all()

    def _past_deadline(self) -> bool:
        return self._deadline_at is not None and asyncio.get_running_loop().time() >= self._deadline_at

    # -- requests --------------------------------------------------------------------------
    async def check_constraint(self, constraint: Constraint) -> str | None:
        """What the first endpoint says (every endpoint serves the same model on the same server kind)."""
        return await self._eps[0].backend.check_constraint(constraint)

    async def generate(self, req: GenerationRequest) -> Generation:
        """Run ``req`` on the least busy healthy endpoint; retry on another one when that endpoint fails.

        Raised as is (no retry): a request or configuration error (4xx other than 408/409/425/429;
        fatal for 401/403/404) and any failure past the deadline.
        """
        loop = asyncio.get_running_loop()
        if self.deadline is not None and self._deadline_at is None:
            self._deadline_at = loop.time() + self.deadline
        tried: set[int] = set()
        retry = 0
        while True:
            if self._past_deadline():
                self._count(None, retry, failed=True)
                raise BackendRequestError(
                    f"the deadline of {self.deadline:g} s for all requests has passed (--deadline); finished "
                    "calls are cached, run the same command again to go on", fatal=True, attempts=retry + 1,
                )  # fmt: skip
            try:
                if self._all_down and not any(ep.healthy for ep in self._eps):
                    raise _NoEndpoint
                k = await self._acquire(tried)
            except _NoEndpoint:
                last: BaseException = _NoEndpoint()
                k = -1
            else:
                try:
                    gen = await self._eps[k].backend.generate(req)
                except BackendRequestError as exc:
                    await self._release(k)
                    if (exc.status is not None and not is_retryable_status(exc.status)) or self._past_deadline():
                        self._count(None, retry, failed=True)
                        raise
                    last = exc
                    if is_endpoint_failure(exc):
                        await self._take_out(k, exc)
                    else:  # 408 / 409 / 425 / 429: the endpoint works, it is busy
                        self._eps[k].failures += 1
                except BaseException:
                    await self._release(k)
                    raise
                else:
                    await self._release(k)
                    self._eps[k].calls += 1
                    self._all_down = False
                    self._count(gen.usage, retry + gen.retries)
                    return replace(gen, retries=gen.retries + retry) if retry else gen
                tried.add(k)
            if retry >= self.policy.max_retries or (self._all_down and k < 0):
                self._count(None, retry, failed=True)
                raise self._give_up(last, retry + 1)
            untried = any(ep.healthy for j, ep in enumerate(self._eps) if j not in tried)
            if not untried:  # every healthy endpoint failed this request already (or none is healthy)
                await asyncio.sleep(self.policy.delay(retry))
            retry += 1

    def _give_up(self, last: BaseException, attempts: int) -> BackendRequestError:
        if isinstance(last, _NoEndpoint):
            if not any(ep.healthy for ep in self._eps):
                self._all_down = True
            errs = "; ".join(f"{ep.name}: {ep.last_error}" for ep in self._eps if ep.last_error)
            return BackendRequestError(
                f"no healthy endpoint: all {len(self._eps)} taken out (health check every {self.cooldown:g} s); "
                f"last errors: {errs or 'none'}",
                attempts=attempts,
            )
        status = getattr(last, "status", None)
        return BackendRequestError(f"failed after {attempts} attempts over the endpoints; last error: {last}",
                                   status=status, attempts=attempts)  # fmt: skip

    async def aclose(self) -> None:
        """Stop the health checks and close every endpoint's connections."""
        for task in self._revivers.values():
            task.cancel()
        for task in self._revivers.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._revivers = {}
        self._cond = None
        for ep in self._eps:
            await ep.backend.aclose()

    def stats(self) -> dict[str, int]:
        """Counters of the requests (as :meth:`Backend.stats`, plus ``abandoned``: requests given up on a
        timeout, over every endpoint); per endpoint see :meth:`endpoint_stats`."""
        return {**super().stats(), "abandoned": sum(getattr(ep.backend, "abandoned", 0) for ep in self._eps)}


def _shared_identity(backend: Backend) -> dict[str, Any]:
    ident = dict(backend.identity())
    ident.pop("base_url", None)
    return ident


async def _generation_probe(backend: Backend) -> bool:
    """Health check of any backend: a one-token request is answered."""
    try:
        await backend.generate(GenerationRequest(prompt="ping", max_tokens=1))
    except Exception:
        return False
    return True


register_backend("multi")(MultiEndpointBackend)
