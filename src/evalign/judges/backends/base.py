"""The :class:`Backend` base class (bounded concurrency, counters) and :class:`BackendRequestError`."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from evalign.errors import BackendError
from evalign.judges.backends.types import Generation, GenerationRequest, Usage

#: Called by :meth:`Backend.generate_many` as each request finishes: ``(index, Generation | BackendError)``.
OnDone = Callable[[int, "Generation | BackendError"], None]


# --------------------------------------------------------------------------------------------
# Base class
# --------------------------------------------------------------------------------------------
class Backend(ABC):
    """A text generator judges can call. Subclasses implement :meth:`generate` and :meth:`identity`.

    Counters (:attr:`usage`, :attr:`retries`, :attr:`requests`, :attr:`failures`) add up over the
    backend's lifetime; :meth:`stats` returns them as a dict.
    """

    kind: ClassVar[str] = ""
    #: How many requests :meth:`generate_many` runs at the same time.
    concurrency: int = 1

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
                try:
                    res: Generation | BackendError = await self.generate(reqs[i])
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


class BackendRequestError(BackendError):
    """A request that failed for good: ``status`` (HTTP status or None), ``fatal`` (True when going on
    is useless: wrong key, unknown model or URL, server unreachable) and ``attempts`` made."""

    def __init__(self, message: str, *, status: int | None = None, fatal: bool = False, attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.fatal = fatal
        self.attempts = attempts
