"""The Gemini API's batch mode (:class:`GeminiBatchAdapter`): ``POST {base}/models/MODEL:batchGenerateContent``
with ``{"batch": {"displayName", "inputConfig": {"requests": {"requests": [{"request", "metadata": {"key"}}]}}}}``
(inline requests: the custom id is ``metadata.key``; the request is the body the synchronous backend sends,
:func:`~evalign.backends.gemini_api.gemini_body`), polled with ``GET {base}/batches/ID`` (a long-running
operation: ``metadata.state`` ``BATCH_STATE_PENDING`` / ``RUNNING`` / ``SUCCEEDED`` / ``FAILED`` /
``CANCELLED`` / ``EXPIRED``; ``done``), its answers in ``response.inlinedResponses.inlinedResponses``
(each a ``response`` or an ``error``, in the order of the requests; read by ``metadata.key`` where it
came back, else by position), cancelled with ``POST {base}/batches/ID:cancel``. Inline requests are
limited to 20 MB per batch. The display name carries the submission id, so a batch created just before
a crash is found again (``GET {base}/batches``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import IO, Any

from evalign.backends.batch import BatchStatus, LineResult
from evalign.backends.batch_openai import OpenAIBatchAdapter
from evalign.backends.gemini_api import GeminiBackend
from evalign.backends.types import GenerationRequest

#: terminal batch states -> the reason of the lines the batch left without an answer
_ENDED = {"BATCH_STATE_SUCCEEDED": None, "BATCH_STATE_FAILED": "batch_failed", "BATCH_STATE_CANCELLED": "canceled",
          "BATCH_STATE_EXPIRED": "expired", "JOB_STATE_SUCCEEDED": None, "JOB_STATE_FAILED": "batch_failed",
          "JOB_STATE_CANCELLED": "canceled", "JOB_STATE_EXPIRED": "expired"}


class GeminiBatchAdapter(OpenAIBatchAdapter):
    """The batch client of one :class:`GeminiBackend`."""

    provider = "gemini"
    max_lines = 50_000
    max_bytes = 20 * 1000 * 1000  # inline requests

    def __init__(self, backend: GeminiBackend) -> None:
        super().__init__(backend)
        #: batch id -> (its inline answers, its keys in request order), from the poll that saw it end
        self._ended: dict[str, tuple[list[Any], list[str]]] = {}
        model = backend.model[len("models/"):] if backend.model.startswith("models/") else backend.model
        self.endpoint = f"/models/{model}:batchGenerateContent"

    def line(self, custom_id: str, req: GenerationRequest) -> bytes:
        """``{"request", "metadata": {"key"}}`` and a newline."""
        obj = {"request": self.backend.build_body(req), "metadata": {"key": custom_id}}
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    async def submit(self, fh: IO[bytes], n_lines: int, submission: str) -> tuple[str, str, dict[str, Any]]:
        """``POST .../models/MODEL:batchGenerateContent`` with the lines as inline requests."""
        lines = [ln.rstrip(b"\n") for ln in fh if ln.strip()]
        keys = [json.loads(ln)["metadata"]["key"] for ln in lines]
        head = json.dumps({"displayName": f"evalign-{submission}"})[:-1].encode()
        payload = head + b',"inputConfig":{"requests":{"requests":[' + b",".join(lines) + b"]}}}"
        op = await self._call("POST", self.endpoint, content=b'{"batch":' + payload + b"}")
        return str(op["name"]), _state(op), {"keys": keys}

    async def find(self, submission: str) -> tuple[str, str, dict[str, Any]] | None:
        """The batch whose display name holds ``submission`` among the newest 1,000."""
        token: str | None = None
        for _ in range(10):
            page = await self._call("GET", "/batches", params={"pageSize": 100, **({"pageToken": token} if token else {})})
            for op in page.get("operations") or page.get("batches") or []:
                if (op.get("metadata") or {}).get("displayName") == f"evalign-{submission}":
                    return str(op["name"]), _state(op), {}
            token = page.get("nextPageToken")
            if not token:
                return None
        return None

    async def status(self, batch_id: str, detail: dict[str, Any]) -> BatchStatus:
        """``GET .../batches/ID``; the inline answers kept in the status when it has ended."""
        op = await self._call("GET", f"/{batch_id}")
        state = _state(op)
        terminal = state in _ENDED or bool(op.get("done"))
        err = op.get("error") if isinstance(op.get("error"), dict) else None
        if terminal:  # (kept here, not in the record: the answers are written into the cache as they are read)
            answers = ((op.get("response") or {}).get("inlinedResponses") or {}).get("inlinedResponses") or []
            self._ended[batch_id] = (answers, list(detail.get("keys") or []))
        return BatchStatus(state=state, terminal=terminal, failure=_ENDED.get(state, "batch_failed" if err else None),
                           message=err.get("message") if err else None)

    async def results(self, batch_id: str, status: BatchStatus) -> AsyncIterator[LineResult]:
        """The inline answers, each mapped by ``metadata.key`` (else by its position)."""
        answers, keys = self._ended.pop(batch_id, ([], []))
        for i, item in enumerate(answers):
            if not isinstance(item, dict):
                continue
            key = (item.get("metadata") or {}).get("key") or (keys[i] if i < len(keys) else None)
            if not isinstance(key, str):
                continue
            err = item.get("error")
            if isinstance(err, dict):
                code = err.get("code")
                status_code = code if isinstance(code, int) else None
                yield LineResult(key, reason=f"http_{code}" if status_code else "error",
                                 message=f"{err.get('status')}: {err.get('message')}", status=status_code)
            else:
                yield self.answer(key, item.get("response"))

    async def cancel(self, batch_id: str) -> str:
        """``POST .../batches/ID:cancel``."""
        await self._call("POST", f"/{batch_id}:cancel")
        return "cancelling"


def _state(op: Any) -> str:
    meta = op.get("metadata") if isinstance(op, dict) else None
    return str((meta or {}).get("state") or "BATCH_STATE_PENDING")


__all__ = ["GeminiBatchAdapter"]
