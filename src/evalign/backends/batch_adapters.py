"""Which providers have a batch API, and the two things built from them: a :class:`BatchBackend` around
an ordinary backend (``--batch-api``) and the cancelling of recorded batches (``evalign cache batches
--cancel``, with the key read from the variable whose NAME the record keeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalign.backends.anthropic_api import AnthropicBackend
from evalign.backends.base import Backend, BackendRequestError
from evalign.backends.batch import BatchAdapter, BatchBackend, BatchSettings
from evalign.backends.batch_anthropic import AnthropicBatchAdapter
from evalign.backends.batch_gemini import GeminiBatchAdapter
from evalign.backends.batch_openai import OpenAIBatchAdapter
from evalign.backends.batch_store import BatchRecord, BatchStore
from evalign.backends.gemini_api import GeminiBackend
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.errors import UsageError

#: backend kind -> its batch adapter's builder (from the backend)
ADAPTERS: dict[str, Callable[[Any], BatchAdapter]] = {"openai": OpenAIBatchAdapter,
                                                      "anthropic": AnthropicBatchAdapter, "gemini": GeminiBatchAdapter}
#: provider -> the backend a record's adapter is built on (url, model, key variable)
_RECORD_BACKENDS: dict[str, Callable[[BatchRecord], Any]] = {
    "openai": lambda r: OpenAICompatibleBackend(r.url, r.model or "", api_key_env=r.key_env),
    "anthropic": lambda r: AnthropicBackend(r.url, r.model or "", api_key_env=r.key_env),
    "gemini": lambda r: GeminiBackend(r.url, r.model or "", api_key_env=r.key_env),
}


def batch_providers() -> list[str]:
    """The backend kinds ``--batch-api`` takes."""
    return sorted(ADAPTERS)


def batch_backend(backend: Backend, settings: BatchSettings, *, store: BatchStore | None = None,
                  cache_path: str | Path | None = None, on_progress: Callable[[str], None] | None = None,
                  on_note: Callable[[str], None] | None = None) -> BatchBackend:
    """``backend`` with its waves sent as provider batches; a :class:`UsageError` naming
    ``--batch-api`` for a backend without a batch API."""
    build = ADAPTERS.get(backend.kind)
    if not isinstance(backend, OpenAICompatibleBackend):  # (the multi backend's kind is its members')
        build = None
    if build is None:
        what = "several --base-url" if backend.kind in ("openai", "multi") else f"the {backend.kind} backend"
        raise UsageError(f"--batch-api: {what} has no batch API (it takes {', '.join(batch_providers())}, one URL)")
    return BatchBackend(backend, build(backend), store or BatchStore(cache_path), settings, on_progress, on_note)


def cancel_in_flight(store: BatchStore) -> list[tuple[BatchRecord, str]]:
    """Cancel every recorded batch not yet collected, at its provider; returns each record with its new
    state (or the error that stopped it, one line)."""

    async def main() -> list[tuple[BatchRecord, str]]:
        out: list[tuple[BatchRecord, str]] = []
        for rec in store.records(in_flight_only=True):
            if rec.batch_id is None or rec.provider not in _RECORD_BACKENDS:
                out.append((rec, "not cancelled: no batch id" if rec.batch_id is None else "unknown provider"))
                continue
            adapter = ADAPTERS[rec.provider](_RECORD_BACKENDS[rec.provider](rec))
            try:
                state = await adapter.cancel(rec.batch_id)
                store.update(rec.no, state=state)
                out.append((rec, state))
            except BackendRequestError as exc:
                out.append((rec, f"error: {exc}"))
            finally:
                await adapter.aclose()
        return out

    return asyncio.run(main())


__all__ = ["ADAPTERS", "batch_backend", "batch_providers", "cancel_in_flight"]
