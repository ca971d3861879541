"""Anthropic's Message Batches API (:class:`AnthropicBatchAdapter`): ``POST {base}/v1/messages/batches``
with ``{"requests": [{"custom_id", "params"}]}`` (the params the synchronous backend sends,
:func:`~evalign.backends.anthropic_api.anthropic_body`, prompt caching at 1 h under ``auto`` since a batch
may wait longer than 5 minutes), polled with ``GET .../batches/{id}`` until ``processing_status`` is
``ended``, its results read from ``results_url`` (JSONL: ``{"custom_id", "result": {"type": "succeeded",
"message"} | {"type": "errored", "error"} | {"type": "canceled"} | {"type": "expired"}}``), cancelled with
``POST .../batches/{id}/cancel``. Limits: 100,000 requests and 256 MB per batch. Anthropic keeps no
metadata on a batch, so a crash between creating a batch and recording its id cannot find it again
(that window is one HTTP answer long)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import IO, Any

from evalign.backends.anthropic_api import AnthropicBackend, anthropic_body
from evalign.backends.base import BackendRequestError
from evalign.backends.batch import BatchStatus, LineResult, NotCreated, custom_id_line
from evalign.backends.batch_openai import OpenAIBatchAdapter
from evalign.backends.types import GenerationRequest

#: Anthropic's error types -> the HTTP status they stand for (a client error repeated is given up)
_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
                 "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
                 "overloaded_error": 529}


class AnthropicBatchAdapter(OpenAIBatchAdapter):
    """The batch client of one :class:`AnthropicBackend` (its URL, key headers, body and answer reading)."""

    provider = "anthropic"
    max_lines = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, backend: AnthropicBackend) -> None:
        super().__init__(backend)
        self.endpoint = "/v1/messages/batches"

    def line(self, custom_id: str, req: GenerationRequest) -> bytes:
        """``{"custom_id", "params"}`` and a newline (the request list is built from these lines)."""
        be = self.backend
        cache = getattr(be, "prompt_cache", "auto")
        params = anthropic_body(req, model=be.model, system_prompt=be.system_prompt,
                                prompt_cache="1h" if cache == "auto" else cache)
        params.update(be.extra_body)
        obj = {"custom_id": custom_id, "params": params}
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    async def submit(self, fh: IO[bytes], n_lines: int, submission: str) -> tuple[str, str, dict[str, Any]]:
        """``POST /v1/messages/batches`` with every line as one request."""
        lines = [ln.rstrip(b"\n") for ln in fh if ln.strip()]
        payload = b'{"requests":[' + b",".join(lines) + b"]}"
        try:
            b = await self._call("POST", self.endpoint, content=payload)
        except BackendRequestError as exc:
            if exc.status is not None and 400 <= exc.status < 500:  # refused: not created
                raise NotCreated(str(exc), status=exc.status, fatal=exc.fatal) from None
            raise
        return str(b["id"]), str(b.get("processing_status") or "in_progress"), {}

    async def find(self, submission: str) -> tuple[str, str, dict[str, Any]] | None:
        """Never found: Anthropic keeps no metadata on a batch (see the module doc)."""
        return None

    async def status(self, batch_id: str, detail: dict[str, Any]) -> BatchStatus:
        """``GET /v1/messages/batches/{id}``: ended when ``processing_status`` is ``ended``."""
        b = await self._call("GET", f"{self.endpoint}/{batch_id}")
        state = str(b.get("processing_status"))
        c = b.get("request_counts") or {}
        failed = sum(int(c.get(k) or 0) for k in ("errored", "canceled", "expired"))
        return BatchStatus(state=state, terminal=state == "ended", detail={"results_url": b.get("results_url")},
                           counts=(int(c.get("succeeded") or 0), failed))

    async def results(self, batch_id: str, status: BatchStatus) -> AsyncIterator[LineResult]:
        """The results file's lines, streamed (none when the batch has no ``results_url``)."""
        url = status.detail.get("results_url")
        if not url:
            return
        async for raw in self._stream(str(url)):
            lr = self.parse_line(raw)
            if lr is not None:
                yield lr

    def parse_line(self, raw: str) -> LineResult | None:
        """One result line (None: not a line of this format)."""
        obj = custom_id_line(raw)
        if obj is None:
            return None
        cid = obj["custom_id"]
        result = obj.get("result") if isinstance(obj.get("result"), dict) else {}
        kind = str(result.get("type"))
        if kind == "succeeded":
            return self.answer(cid, result.get("message"))
        if kind == "errored":
            err = (result.get("error") or {}).get("error") or result.get("error") or {}
            etype = str(err.get("type")) if isinstance(err, dict) else "error"
            msg = err.get("message") if isinstance(err, dict) else None
            return LineResult(cid, reason="errored", message=f"{etype}: {msg}", status=_ERROR_STATUS.get(etype))
        if kind in ("canceled", "expired"):
            return LineResult(cid, reason=kind, message=f"the line was {kind} at the provider")
        return LineResult(cid, reason="error", message=f"result of type {kind}")

    async def cancel(self, batch_id: str) -> str:
        """``POST /v1/messages/batches/{id}/cancel``."""
        b = await self._call("POST", f"{self.endpoint}/{batch_id}/cancel")
        return str(b.get("processing_status") or "canceling")


__all__ = ["AnthropicBatchAdapter"]
