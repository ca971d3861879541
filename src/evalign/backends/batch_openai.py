"""OpenAI's Batch API (:class:`OpenAIBatchAdapter`): the lines uploaded as a JSONL file through the Files
API (``POST /files``, ``purpose=batch``), the batch created with ``POST /batches`` (``completion_window``
``24h``), polled with ``GET /batches/{id}``, its results read from the output file and the error file
(``GET /files/{id}/content``), cancelled with ``POST /batches/{id}/cancel``.

An input line is ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` with the body
the synchronous backend sends (:meth:`OpenAICompatibleBackend.build_body`); a result line is
``{"id", "custom_id", "response": {"status_code", "request_id", "body"} | null, "error": {"code",
"message"} | null}``, its ``body`` read into the :class:`Generation` a synchronous request with that
answer gives (:meth:`OpenAICompatibleBackend.generation_of`). Limits: 50,000 lines and 200 MB per batch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import IO, Any

from evalign.backends._http import FATAL_STATUSES, RetryPolicy, is_retryable_status, snippet
from evalign.backends.base import BackendRequestError
from evalign.backends.batch import BatchAdapter, BatchStatus, LineResult, NotCreated, custom_id_line
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.types import GenerationRequest

#: the batch states after which nothing changes, and the reason of the lines a batch left without a result
_ENDED = {"completed": None, "failed": "batch_failed", "expired": "expired", "cancelled": "canceled"}
#: error codes of a line that the batch's end cut off
_LINE_CODES = {"batch_expired": "expired", "batch_cancelled": "canceled"}
_ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


class OpenAIBatchAdapter(BatchAdapter):
    """The batch client of one :class:`OpenAICompatibleBackend` (its URL, model, key and body)."""

    provider = "openai"
    max_lines = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, backend: OpenAICompatibleBackend, policy: RetryPolicy | None = None) -> None:
        self.backend = backend
        self.url = backend.base_url
        self.model = backend.model
        self.key_env = backend.api_key_env
        self.endpoint = _ENDPOINTS[backend.endpoint]
        self.policy = policy or RetryPolicy(max_retries=backend.policy.max_retries)
        self._client: Any = None

    def line(self, custom_id: str, req: GenerationRequest) -> bytes:
        """``{"custom_id", "method": "POST", "url", "body"}`` and a newline."""
        obj = {"custom_id": custom_id, "method": "POST", "url": self.endpoint, "body": self.backend.build_body(req)}
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    # -- HTTP ------------------------------------------------------------------------------
    def _http(self) -> Any:
        import httpx

        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.backend.timeout,
                                                                   connect=self.backend.connect_timeout))
        return self._client

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None and not self._client.is_closed:
            await self._client.aclose()
        self._client = None

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        """One control request with retries on 429 / 5xx / connection errors; its JSON."""
        import httpx

        headers, secrets = self.backend.request_headers()
        if "files" in kw:
            headers.pop("Content-Type", None)
        url = self.url + path
        for retry in range(self.policy.max_retries + 1):
            try:
                resp = await self._http().request(method, url, headers=headers, **kw)
            except httpx.HTTPError as exc:
                why, status, after = f"{type(exc).__name__}", None, None
            else:
                if resp.status_code < 300:
                    return resp.json()
                why, status = f"HTTP {resp.status_code}: {snippet(resp.text, secrets)}", resp.status_code
                after = None
                if not is_retryable_status(resp.status_code):
                    raise BackendRequestError(f"{method} {url}: {why}", status=status,
                                              fatal=status in FATAL_STATUSES or status == 400)
            if retry < self.policy.max_retries:
                await asyncio.sleep(self.policy.delay(retry, after))
        raise BackendRequestError(f"{method} {url} failed after {self.policy.max_retries + 1} attempts: {why}",
                                  status=status, fatal=True)

    # -- the batch -------------------------------------------------------------------------
    async def submit(self, fh: IO[bytes], n_lines: int, submission: str) -> tuple[str, str, dict[str, Any]]:
        """Upload the file, create the batch."""
        try:
            f = await self._call("POST", "/files", data={"purpose": "batch"},
                                 files={"file": ("evalign-batch.jsonl", fh, "application/jsonl")})
        except BackendRequestError as exc:  # no file, no batch
            raise NotCreated(str(exc), status=exc.status, fatal=exc.fatal) from None
        try:
            b = await self._call("POST", "/batches", json={
                "input_file_id": f["id"], "endpoint": self.endpoint, "completion_window": "24h",
                "metadata": {"evalign_submission": submission}})
        except BackendRequestError as exc:
            if exc.status is not None and 400 <= exc.status < 500:  # refused: not created
                raise NotCreated(str(exc), status=exc.status, fatal=exc.fatal) from None
            raise
        return str(b["id"]), str(b.get("status") or "validating"), {"input_file_id": f["id"]}

    async def find(self, submission: str) -> tuple[str, str, dict[str, Any]] | None:
        """The batch whose metadata holds ``submission`` among the newest 1,000."""
        after: str | None = None
        for _ in range(10):
            page = await self._call("GET", "/batches", params={"limit": 100, **({"after": after} if after else {})})
            for b in page.get("data") or []:
                if (b.get("metadata") or {}).get("evalign_submission") == submission:
                    return str(b["id"]), str(b.get("status")), {"input_file_id": b.get("input_file_id")}
            if not page.get("has_more") or not page.get("data"):
                return None
            after = str(page["data"][-1]["id"])
        return None

    async def status(self, batch_id: str, detail: dict[str, Any]) -> BatchStatus:
        """``GET /batches/{id}``."""
        b = await self._call("GET", f"/batches/{batch_id}")
        state = str(b.get("status"))
        counts = b.get("request_counts") or {}
        errors = (b.get("errors") or {}).get("data") or []
        message = "; ".join(f"line {e.get('line')}: {e.get('code')}: {e.get('message')}" for e in errors[:5]) or None
        return BatchStatus(
            state=state, terminal=state in _ENDED, failure=_ENDED.get(state), message=message,
            detail={"output_file_id": b.get("output_file_id"), "error_file_id": b.get("error_file_id")},
            counts=(int(counts.get("completed") or 0), int(counts.get("failed") or 0)))

    async def results(self, batch_id: str, status: BatchStatus) -> AsyncIterator[LineResult]:
        """The output file's lines, then the error file's, streamed."""
        for fid in (status.detail.get("output_file_id"), status.detail.get("error_file_id")):
            if not fid:
                continue
            async for raw in self._lines(str(fid)):
                lr = self.parse_line(raw)
                if lr is not None:
                    yield lr

    async def _lines(self, file_id: str) -> AsyncIterator[str]:
        async for line in self._stream(f"{self.url}/files/{file_id}/content"):
            yield line

    async def _stream(self, url: str) -> AsyncIterator[str]:
        """The non-empty lines of a results file at ``url``, streamed (never all in memory)."""
        headers, secrets = self.backend.request_headers()
        async with self._http().stream("GET", url, headers=headers) as resp:
            if resp.status_code != 200:
                await resp.aread()
                raise BackendRequestError(f"GET {url}: HTTP {resp.status_code}: {snippet(resp.text, secrets)}",
                                          status=resp.status_code, fatal=True)
            async for line in resp.aiter_lines():
                if line.strip():
                    yield line

    def answer(self, custom_id: str, body: Any) -> LineResult:
        """A line's answer read as the synchronous backend reads it (unusable: reason ``unusable``)."""
        try:
            return LineResult(custom_id, self.backend.generation_of(body))
        except BackendRequestError as exc:
            return LineResult(custom_id, reason="unusable", message=str(exc))

    def parse_line(self, raw: str) -> LineResult | None:
        """One result line (None: not a line of this format)."""
        obj = custom_id_line(raw)
        if obj is None:
            return None
        cid = obj["custom_id"]
        resp, err = obj.get("response"), obj.get("error")
        code = resp.get("status_code") if isinstance(resp, dict) else None
        if code == 200 and not err:
            return self.answer(cid, resp.get("body"))  # type: ignore[union-attr]
        if isinstance(code, int) and code != 200:
            body = resp.get("body") if isinstance(resp, dict) else None
            inner = body.get("error") if isinstance(body, dict) else None
            msg = inner.get("message") if isinstance(inner, dict) else json.dumps(body)[:300]
            return LineResult(cid, reason=f"http_{code}", message=str(msg), status=code)
        e = err if isinstance(err, dict) else {}
        reason = _LINE_CODES.get(str(e.get("code")), "error")
        return LineResult(cid, reason=reason, message=f"{e.get('code')}: {e.get('message')}")

    async def cancel(self, batch_id: str) -> str:
        """``POST /batches/{id}/cancel``."""
        b = await self._call("POST", f"/batches/{batch_id}/cancel")
        return str(b.get("status") or "cancelling")


__all__ = ["OpenAIBatchAdapter"]
