"""The Gemini API's batch mode (:class:`GeminiBatchAdapter`): ``POST {base}/models/MODEL:batchGenerateContent``
polled with ``GET {base}/batches/ID`` (a long-running operation: ``metadata.state`` ``BATCH_STATE_PENDING`` /
``RUNNING`` / ``SUCCEEDED`` / ``FAILED`` / ``CANCELLED`` / ``EXPIRED``; ``done``), cancelled with
``POST {base}/batches/ID:cancel``. The request of each line is the body the synchronous backend sends
(:func:`~evalign.backends.gemini_api.gemini_body`). Two ways in, as the API reference gives them:

* **inline requests** (up to :attr:`GeminiBatchAdapter.inline_max_bytes`, 20 MB per batch):
  ``{"batch": {"displayName", "inputConfig": {"requests": {"requests": [{"request", "metadata": {"key"}}]}}}}``;
  the answers in ``response.inlinedResponses.inlinedResponses`` (each a ``response`` or an ``error``, in the
  order of the requests; read by ``metadata.key`` where it came back, else by position);
* **an input file** (a larger batch, up to 2 GB): JSONL lines ``{"key", "request"}`` uploaded through the
  Files API's resumable upload (``POST {root}/upload/v1beta/files`` with ``X-Goog-Upload-Protocol:
  resumable`` / ``X-Goog-Upload-Command: start``, then the bytes to the ``X-Goog-Upload-URL`` it answers
  with ``upload, finalize``), the batch created with ``"inputConfig": {"fileName": "files/ID"}``; its
  answers are the JSONL file ``response.responsesFile``, lines ``{"key", "response" | "error"}``, streamed
  from ``GET {root}/download/v1beta/FILE:download?alt=media``.

The display name carries the submission id, so a batch created just before a crash is found again
(``GET {base}/batches``). Limits (the Gemini API's rate-limit page): 2 GB per input file, 20 GB of stored
files and 100 concurrent batches per project; the API sets no line count, evalign caps a batch at
:attr:`~GeminiBatchAdapter.max_lines` (``--batch-max-requests`` lowers it)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import IO, Any

from evalign.backends._http import snippet
from evalign.backends.base import BackendRequestError
from evalign.backends.batch import BatchStatus, LineResult, NotCreated
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
    #: an input file's limit (2 GB)
    max_bytes = 2 * 1000 * 1000 * 1000
    #: inline requests' limit per batch (20 MB); a larger batch goes as an uploaded file
    inline_max_bytes = 20 * 1000 * 1000

    def __init__(self, backend: GeminiBackend) -> None:
        super().__init__(backend)
        #: batch id -> (its inline answers, its keys in request order), from the poll that saw it end
        self._ended: dict[str, tuple[list[Any], list[str]]] = {}
        model = backend.model[len("models/"):] if backend.model.startswith("models/") else backend.model
        self.endpoint = f"/models/{model}:batchGenerateContent"
        prefix, _, version = self.url.rstrip("/").rpartition("/")
        #: ``{root}/upload/v1beta`` and ``{root}/download/v1beta`` of the API root ``{root}/v1beta``
        self.upload_url = f"{prefix}/upload/{version}/files"
        self.download_root = f"{prefix}/download/{version}"

    def line(self, custom_id: str, req: GenerationRequest) -> bytes:
        """The input file's line ``{"key", "request"}`` and a newline (an inline request is made of it)."""
        obj = {"key": custom_id, "request": self.backend.build_body(req)}
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    async def submit(self, fh: IO[bytes], n_lines: int, submission: str) -> tuple[str, str, dict[str, Any]]:
        """``POST .../models/MODEL:batchGenerateContent``: the lines inline when they fit in
        :attr:`inline_max_bytes`, else uploaded as a JSONL file first."""
        size = fh.seek(0, 2)
        fh.seek(0)
        head = json.dumps({"displayName": f"evalign-{submission}"})[:-1].encode()
        if size > self.inline_max_bytes:
            name = await self._upload(fh, size, submission)
            payload = head + b',"inputConfig":' + json.dumps({"fileName": name}).encode() + b"}"
            op = await self._create(b'{"batch":' + payload + b"}")
            return str(op["name"]), _state(op), {"input_file": name}
        keys, inline = [], []
        for ln in fh:
            if ln.strip():
                key, request = _split_line(ln)
                keys.append(key)
                inline.append(b'{"request":' + request + b',"metadata":{"key":' + json.dumps(key).encode() + b"}}")
        payload = head + b',"inputConfig":{"requests":{"requests":[' + b",".join(inline) + b"]}}}"
        op = await self._create(b'{"batch":' + payload + b"}")
        return str(op["name"]), _state(op), {"keys": keys}

    async def _create(self, content: bytes) -> Any:
        """The create call; a 4xx means no batch was made (:class:`NotCreated`)."""
        try:
            return await self._call("POST", self.endpoint, content=content)
        except BackendRequestError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                raise NotCreated(str(exc), status=exc.status, fatal=exc.fatal) from None
            raise

    async def _upload(self, fh: IO[bytes], size: int, submission: str) -> str:
        """The Files API's resumable upload of ``fh`` (``size`` bytes, streamed); the file's name ``files/ID``."""
        import httpx

        headers, secrets = self.backend.request_headers()
        start = {**headers, "X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
                 "X-Goog-Upload-Header-Content-Length": str(size),
                 "X-Goog-Upload-Header-Content-Type": "application/jsonl", "Content-Type": "application/json"}
        try:
            resp = await self._http().post(self.upload_url, headers=start,
                                           json={"file": {"display_name": f"evalign-{submission}.jsonl"}})
            target = resp.headers.get("x-goog-upload-url")
            if resp.status_code >= 300 or not target:
                raise NotCreated(f"POST {self.upload_url}: HTTP {resp.status_code}: {snippet(resp.text, secrets)}"
                                 + ("" if target else " (no X-Goog-Upload-URL)"), status=resp.status_code, fatal=True)
            put = {**headers, "Content-Length": str(size), "X-Goog-Upload-Offset": "0",
                   "X-Goog-Upload-Command": "upload, finalize"}
            put.pop("Content-Type", None)
            resp = await self._http().post(target, headers=put, content=_chunks(fh))
        except httpx.HTTPError as exc:  # no file, no batch
            raise NotCreated(f"POST {self.upload_url}: {type(exc).__name__}", fatal=False) from None
        if resp.status_code >= 300:
            raise NotCreated(f"upload to {self.upload_url}: HTTP {resp.status_code}: {snippet(resp.text, secrets)}",
                             status=resp.status_code, fatal=resp.status_code < 500)
        return str(resp.json()["file"]["name"])

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
        response = op.get("response") or {}
        if terminal and not response.get("responsesFile"):  # (kept here, not in the record: the answers
            answers = (response.get("inlinedResponses") or {}).get("inlinedResponses") or []  # go to the cache)
            self._ended[batch_id] = (answers, list(detail.get("keys") or []))
        return BatchStatus(state=state, terminal=terminal, failure=_ENDED.get(state, "batch_failed" if err else None),
                           message=err.get("message") if err else None,
                           detail={"responses_file": response.get("responsesFile")} if terminal else {})

    async def results(self, batch_id: str, status: BatchStatus) -> AsyncIterator[LineResult]:
        """The answers: the responses file's lines streamed (``{"key", "response" | "error"}``), or the
        inline answers, each mapped by ``metadata.key`` (else by its position)."""
        file_name = status.detail.get("responses_file")
        if file_name:
            async for raw in self._stream(f"{self.download_root}/{file_name}:download?alt=media"):
                try:
                    item = json.loads(raw)
                except json.JSONDecodeError:
                    continue
                if isinstance(item, dict) and isinstance(item.get("key"), str):
                    yield self._item(item["key"], item)
            return
        answers, keys = self._ended.pop(batch_id, ([], []))
        for i, item in enumerate(answers):
            if not isinstance(item, dict):
                continue
            key = (item.get("metadata") or {}).get("key") or (keys[i] if i < len(keys) else None)
            if isinstance(key, str):
                yield self._item(key, item)

    def _item(self, key: str, item: dict[str, Any]) -> LineResult:
        """One answer: a ``response``, or an ``error`` (a status object: ``code``, ``message``) by its code."""
        err = item.get("error") if isinstance(item.get("error"), dict) else item.get("status")
        if isinstance(err, dict) and "response" not in item:
            code = err.get("code")
            status_code = code if isinstance(code, int) and 100 <= code < 600 else None
            return LineResult(key, reason=f"http_{code}" if status_code else "error",
                              message=f"{err.get('status')}: {err.get('message')}", status=status_code)
        return self.answer(key, item.get("response"))

    async def cancel(self, batch_id: str) -> str:
        """``POST .../batches/ID:cancel``."""
        await self._call("POST", f"/{batch_id}:cancel")
        return "cancelling"


def _split_line(line: bytes) -> tuple[str, bytes]:
    """An input file line ``{"key":K,"request":R}`` (as :meth:`GeminiBatchAdapter.line` writes it) as
    ``(K, R's bytes)``, without parsing R."""
    obj_end = line.rstrip()
    prefix_end = obj_end.index(b',"request":')
    key = json.loads(obj_end[len(b'{"key":'):prefix_end])
    return str(key), obj_end[prefix_end + len(b',"request":'):-1]


async def _chunks(fh: IO[bytes], size: int = 1 << 20) -> AsyncIterator[bytes]:
    """``fh`` read in ``size``-byte chunks (an upload streamed, never all in memory)."""
    while chunk := fh.read(size):
        yield chunk


def _state(op: Any) -> str:
    meta = op.get("metadata") if isinstance(op, dict) else None
    return str((meta or {}).get("state") or "BATCH_STATE_PENDING")


__all__ = ["GeminiBatchAdapter"]
