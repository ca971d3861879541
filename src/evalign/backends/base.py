"""The :class:`Backend` base class (bounded concurrency, counters), the :class:`BackendOptions` every
backend is built from, and :class:`BackendRequestError`."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from evalign.backends.types import Constraint, Generation, GenerationRequest, Usage
from evalign.errors import BackendError

#: Called by :meth:`Backend.generate_many` as each request finishes: ``(index, Generation | BackendError)``.
OnDone = Callable[[int, "Generation | BackendError"], None]


@dataclass(frozen=True)
class BackendOptions:
    """The settings of a judge backend, as one object: each backend takes what it needs
    (:meth:`Backend.from_options`); None = the backend's own default.

    ``model``: the model name (OpenAI-compatible servers) or a local model directory (``hf``).
    ``base_url``: the API root, or several (one model on several servers). ``api_key_env``: the NAME
    of the environment variable holding the key (None: no key). ``concurrency``, ``timeout``,
    ``connect_timeout``, ``max_retries``, ``deadline``, ``idle_timeout``, ``stream``, ``system_prompt``:
    the HTTP backends' settings; ``device``, ``batch_size``: local models'. ``constraint_format``: how the openai backend sends an
    output constraint (``auto``, ``llama.cpp``, ``vllm``, ``openai``). ``prompt_cache``: the hosted
    providers' prompt cache (``auto``, ``off``, ``5m``, ``1h``); ``service_tier``: the provider's tier
    (``flex``). ``extra``: further keyword arguments of the
    backend's constructor (e.g. ``endpoint``, ``dtype``), passed as they are.
    """

    model: str | None = None
    base_url: str | Sequence[str] | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    concurrency: int | None = None
    timeout: float | None = None
    connect_timeout: float | None = None
    max_retries: int | None = None
    deadline: float | None = None
    idle_timeout: float | None = None
    stream: bool | None = None
    system_prompt: str | None = None
    device: str | None = None
    batch_size: int | None = None
    constraint_format: str | None = None
    prompt_cache: str | None = None
    service_tier: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def base_urls(self) -> tuple[str, ...]:
        """Every base URL given (none, one or several)."""
        if self.base_url is None:
            return ()
        return (self.base_url,) if isinstance(self.base_url, str) else tuple(self.base_url)

    def given(self, *names: str) -> dict[str, Any]:
        """The options among ``names`` that are set (not None)."""
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def settings(self) -> dict[str, Any]:
        """Every option but ``extra`` by name (``base_url``: the one URL, None when several)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        urls = self.base_urls
        out["base_url"] = urls[0] if len(urls) == 1 else None
        return out


# --------------------------------------------------------------------------------------------
# Base class
# --------------------------------------------------------------------------------------------
class Backend(ABC):
    """A text generator judges can call. Subclasses implement :meth:`generate` and :meth:`identity`.

    Counters (:attr:`usage`, :attr:`retries`, :attr:`requests`, :attr:`failures`) add up over the
    backend's lifetime; :meth:`stats` returns them as a dict.
    """

    kind: ClassVar[str] = ""
    #: the :class:`BackendOptions` this backend cannot do without (checked before it is built)
    required_options: ClassVar[tuple[str, ...]] = ("model",)
    #: How many requests :meth:`generate_many` runs at the same time.
    concurrency: int = 1
    #: what a backend answers: ``text`` (a generation) or ``score`` (a reward model's score per
    #: conversation, in ``Generation.raw["score"]``: only the reward judges read it)
    output: ClassVar[str] = "text"
    #: the forms of a :class:`Constraint` this backend sends (none: it takes no constraint)
    constraint_forms: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_options(cls, options: BackendOptions) -> Backend:
        """The backend built from one options object. Default: every option that is set and that
        the constructor takes by name, then ``options.extra``; a backend overrides this to map the
        options onto its constructor."""
        params = inspect.signature(cls).parameters
        kw = {k: v for k, v in options.settings().items() if k in params and v is not None}
        return cls(**{**kw, **options.extra})

    def __init__(self) -> None:
        self.usage = Usage()
        self.retries = 0
        self.requests = 0
        self.failures = 0
        self._count_lock = threading.Lock()

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What determines the outputs besides the request (backend kind, model, endpoint ...).

        JSON-serialisable, stable across runs, and free of secrets: used in cache keys and signatures.
        """

    @abstractmethod
    async def generate(self, req: GenerationRequest) -> Generation:
        """Run one request. Raises :class:`BackendError` when it cannot be answered."""

    async def generate_many(
        self,
        reqs: Sequence[GenerationRequest],
        on_done: OnDone | None = None,
        *,
        raise_errors: bool = False,
    ) -> list[Generation | BackendError]:
        """Run many requests, at most :attr:`concurrency` at a time; results in input order.

        A request that fails (after retries) gives its :class:`BackendError` in its slot instead of a
        :class:`Generation`, unless ``raise_errors`` is True. ``on_done(index, result)`` is called in the
        event loop as each request finishes (write results incrementally there). A *fatal* error
        (wrong key, unknown model or URL, server unreachable: :attr:`BackendRequestError.fatal`) stops
        all work and is raised.
        """
        results: list[Generation | BackendError | None] = [None] * len(reqs)
        queue = iter(range(len(reqs)))

        async def worker() -> None:
            for i in queue:
                t0 = time.perf_counter()
                try:
                    gen = await self.generate(reqs[i])
                    if gen.seconds is None:  # the call's latency, for the cost of a judge
                        gen = replace(gen, seconds=round(time.perf_counter() - t0, 4))
                    res: Generation | BackendError = gen
                except BackendError as exc:
                    if raise_errors or getattr(exc, "fatal", False):
                        raise
                    res = exc
                results[i] = res
                if on_done is not None:
                    on_done(i, res)

        n_workers = max(1, min(self.concurrency, len(reqs)))
        tasks = [asyncio.ensure_future(worker()) for _ in range(n_workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return [r for r in results if r is not None]

    def run(
        self, reqs: Sequence[GenerationRequest], on_done: OnDone | None = None, *, raise_errors: bool = False
    ) -> list[Generation | BackendError]:
        """Blocking wrapper of :meth:`generate_many` (starts its own event loop; closes connections)."""

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("Backend.run() cannot be called from a running event loop; "
                               "use 'await backend.generate_many(...)' there")

        async def main() -> list[Generation | BackendError]:
            try:
                return await self.generate_many(reqs, on_done, raise_errors=raise_errors)
            finally:
                await self.aclose()

        return asyncio.run(main())

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections (no-op by default)."""

    async def check_constraint(self, constraint: Constraint) -> str | None:
        """None when this backend can send ``constraint``, else why not (one line). Default: one of
        the constraint's forms is among :attr:`constraint_forms`."""
        if any(f in self.constraint_forms for f in constraint.forms):
            return None
        given = " / ".join(constraint.forms)
        if not self.constraint_forms:
            return f"the {self.kind or type(self).__name__} backend takes no output constraint"
        return f"the {self.kind} backend takes a {' or '.join(self.constraint_forms)} constraint, not {given}"

    def stats(self) -> dict[str, int]:
        """Counters: requests, retries, failures, prompt_tokens, completion_tokens."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "failures": self.failures,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
        }

    def _count(self, usage: Usage | None = None, retries: int = 0, failed: bool = False) -> None:
        with self._count_lock:
            self.requests += 1
            self.retries += retries
            if failed:
                self.failures += 1
            if usage is not None:
                self.usage = self.usage + usage


def returns_scores(backend: Backend | type[Backend]) -> bool:
    """Whether a backend (or backend class) answers with scores, not text (:attr:`Backend.output`)."""
    return getattr(backend, "output", "text") == "score"


class BatchedBackend(Backend):
    """A backend that answers whole batches in a worker thread (:meth:`generate_many`): one request is
    a batch of one."""

    async def generate(self, req: GenerationRequest) -> Generation:
        """Answer one request (a batch of one, in a worker thread)."""
        res = await self.generate_many([req], raise_errors=True)
        out = res[0]
        assert isinstance(out, Generation)
        return out


class BackendRequestError(BackendError):
    """A request that failed for good: ``status`` (HTTP status or None), ``fatal`` (True when going on
    is useless: wrong key, unknown model or URL, server unreachable) and ``attempts`` made."""

    def __init__(self, message: str, *, status: int | None = None, fatal: bool = False, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.fatal = fatal
        self.attempts = attempts


class ConstraintRefused(BackendRequestError):
    """The server refused a request's output constraint (the same request without it was answered):
    fatal for the run, which goes on unconstrained only where the user allowed it (``--constrain auto``)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, status=status, fatal=True)
