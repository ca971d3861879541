"""Fakes of hosted providers' batch APIs, for the tests and benchmarks (no network): an HTTP server in a
background thread that speaks the published wire format and finishes a batch in milliseconds.

:class:`FakeOpenAI` serves OpenAI's ``/v1/files`` (multipart upload, ``purpose=batch``; ``GET
/files/{id}/content``), ``/v1/batches`` (create, retrieve, list, cancel) and ``/v1/chat/completions``
(the synchronous path, answering the same text for the same body). A batch moves one state per
``GET /batches/{id}``: ``validating -> in_progress -> finalizing -> completed`` (while :attr:`hold` is
set it stays ``in_progress``). Its input is validated as OpenAI does (JSON lines, ``custom_id`` unique,
``method`` POST, ``url`` the batch's endpoint); a bad file fails the batch as a whole (``failed`` with
``errors.data``).

What happens to each line is scripted by ``fate(custom_id, attempt) -> Fate`` (attempt: 0 for the first
submission of that custom id): :data:`OK`, ``Fate("http", 400, msg)`` (a 4xx/5xx line in the output
file), ``Fate("http_error_file", 400, msg)`` (the same line in the error file), ``Fate("error", code=...,
message=...)`` (``response: null`` and an error object, in the error file) or :data:`MISSING` (in no
file). What happens to a batch as a whole is the next item of :attr:`outcomes` (default ``completed``):
``expired_half`` (the first half answered, the rest ``batch_expired`` lines in the error file),
``failed`` (a validation failure), ``cancelled``. :attr:`history` holds the states each batch's polls saw. Output lines come in reverse order. :attr:`submitted`
counts each custom id's submissions (in created batches), :attr:`sync_calls` the synchronous requests.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Fate:
    """What happens to one line (see the module doc)."""

    kind: str = "ok"
    status: int = 200
    message: str = ""
    code: str = "server_error"


OK = Fate()
MISSING = Fate("missing")
LIFECYCLE = ("validating", "in_progress", "finalizing", "completed")


def default_answer(body: dict[str, Any]) -> str:
    """A Prometheus-style answer whose grade (1-5) is a hash of the last message: the same body, the
    same answer, batched or not."""
    msgs = body.get("messages") or [{"content": body.get("prompt", "")}]
    digest = hashlib.sha256(str(msgs[-1].get("content", "")).encode()).hexdigest()
    return f"Feedback: the response is adequate. [RESULT] {1 + int(digest[:8], 16) % 5}"


def completion(body: dict[str, Any], text: str) -> dict[str, Any]:
    """A chat completion object answering ``body`` with ``text``."""
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
                         "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": len(text.split()),
                      "total_tokens": prompt + len(text.split())}}


class FakeOpenAI:
    """The fake server (a context manager); :attr:`base_url` ends in ``/v1``."""

    def __init__(self, fate: Callable[[str, int], Fate] | None = None,
                 answer: Callable[[dict[str, Any]], str] = default_answer) -> None:
        self.fate = fate or (lambda cid, attempt: OK)
        self.answer = answer
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.inputs: dict[str, list[dict[str, Any]]] = {}
        self.submitted: Counter[str] = Counter()
        self.sync_calls = 0
        self.polls = 0
        self.hold = False
        self.outcomes: list[str] = []
        self.keys_seen: set[str] = set()
        #: batch id -> the states served to its polls, in order
        self.history: dict[str, list[str]] = {}
        self._lock = threading.RLock()
        self._n = 0
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}_{self._n:06d}"

    # -- the API -----------------------------------------------------------------------------
    def upload(self, purpose: str, content: bytes) -> dict[str, Any]:
        fid = self._id("file")
        self.files[fid] = content
        return {"id": fid, "object": "file", "bytes": len(content), "purpose": purpose, "filename": "input.jsonl"}

    def create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        fid = body.get("input_file_id")
        if fid not in self.files:
            return 400, {"error": {"message": f"no such file {fid}", "type": "invalid_request_error"}}
        bid = self._id("batch")
        lines, errors = self._validate(self.files[fid], body.get("endpoint"))
        batch = {"id": bid, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
                 "input_file_id": fid, "completion_window": body.get("completion_window"), "status": "validating",
                 "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                 "metadata": body.get("metadata") or {}, "_step": 0,
                 "_outcome": "failed" if errors else (self.outcomes.pop(0) if self.outcomes else "completed")}
        if errors:
            batch["errors"] = {"object": "list", "data": errors}
        else:
            for line in lines:
                self.submitted[line["custom_id"]] += 1
        self.batches[bid] = batch
        self.inputs[bid] = lines
        return 200, self._public(batch)

    def _validate(self, content: bytes, endpoint: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        lines: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        for i, raw in enumerate(content.splitlines(), start=1):
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                errors.append({"code": "invalid_json_line", "message": "not JSON", "param": None, "line": i})
                continue
            cid = obj.get("custom_id")
            if not isinstance(cid, str) or cid in seen:
                errors.append({"code": "duplicate_custom_id", "message": f"custom_id {cid!r} repeated", "line": i})
            elif obj.get("method") != "POST" or obj.get("url") != endpoint:
                errors.append({"code": "invalid_url", "message": f"url must be {endpoint}", "line": i})
            seen.add(str(cid))
            lines.append(obj)
        return lines, errors

    def retrieve(self, bid: str) -> dict[str, Any] | None:
        b = self.batches.get(bid)
        if b is None:
            return None
        self.polls += 1
        with self._lock:
            self._advance(b)
            self.history.setdefault(bid, []).append(b["status"])
        return self._public(b)

    def _advance(self, b: dict[str, Any]) -> None:
        if b["status"] in ("completed", "failed", "expired", "cancelled"):
            return
        if b["status"] == "cancelling":
            b["status"] = "cancelled"
            return
        if b["_outcome"] == "failed":
            b["status"] = "failed"
            b["errors"] = b["errors"] or {"object": "list", "data": [
                {"code": "invalid_request", "message": "forced validation failure", "param": None, "line": 1}]}
            return
        if self.hold and b["status"] == "in_progress":
            return
        b["_step"] += 1
        state = LIFECYCLE[min(b["_step"], len(LIFECYCLE) - 1)]
        if state != "completed":
            b["status"] = state
            return
        self._finish(b, "expired" if b["_outcome"] == "expired_half" else b["_outcome"])

    def _finish(self, b: dict[str, Any], status: str) -> None:
        lines = self.inputs[b["id"]]
        cut = len(lines) // 2 if status == "expired" else len(lines)
        out: list[bytes] = []
        err: list[bytes] = []
        for i, line in enumerate(lines):
            cid = line["custom_id"]
            if status == "cancelled":
                break
            if i >= cut:
                err.append(_line(cid, None, {"code": "batch_expired", "message": "This request could not be "
                                             "executed before the completion window expired."}))
                continue
            fate = self.fate(cid, self.submitted[cid] - 1)
            if fate.kind == "ok":
                out.append(_line(cid, {"status_code": 200, "request_id": "req", "body": completion(
                    line["body"], self.answer(line["body"]))}, None))
            elif fate.kind in ("http", "http_error_file"):
                resp = {"status_code": fate.status, "request_id": "req",
                        "body": {"error": {"message": fate.message, "type": "invalid_request_error"}}}
                (out if fate.kind == "http" else err).append(_line(cid, resp, None))
            elif fate.kind == "error":
                err.append(_line(cid, None, {"code": fate.code, "message": fate.message}))
        out.reverse()  # results come in any order
        b["status"] = status
        b["request_counts"].update(completed=len(out), failed=len(err))
        if out:
            b["output_file_id"] = self.upload("batch_output", b"".join(out))["id"]
        if err:
            b["error_file_id"] = self.upload("batch_output", b"".join(err))["id"]

    def cancel(self, bid: str) -> dict[str, Any] | None:
        b = self.batches.get(bid)
        if b is None:
            return None
        if b["status"] not in ("completed", "failed", "expired", "cancelled"):
            b["status"] = "cancelling"
        return self._public(b)

    def listing(self) -> dict[str, Any]:
        data = [self._public(b) for b in reversed(list(self.batches.values()))]
        return {"object": "list", "data": data, "has_more": False}

    @staticmethod
    def _public(b: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in b.items() if not k.startswith("_")}

    # -- HTTP ----------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, obj: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if raw is None else "application/jsonl")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self) -> None:
                self._auth()
                path = self.path.split("?", 1)[0]
                parts = path.strip("/").split("/")
                if path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
                elif path == "/v1/batches":
                    self._send(200, fake.listing())
                elif len(parts) == 3 and parts[1] == "batches":
                    b = fake.retrieve(parts[2])
                    self._send(404 if b is None else 200, b or {"error": {"message": "no such batch"}})
                elif len(parts) == 4 and parts[1] == "files" and parts[3] == "content":
                    content = fake.files.get(parts[2])
                    if content is None:
                        self._send(404, {"error": {"message": "no such file"}})
                    else:
                        self._send(200, None, content)
                else:
                    self._send(404, {"error": {"message": f"no route {path}"}})

            def do_POST(self) -> None:
                self._auth()
                path = self.path.split("?", 1)[0]
                parts = path.strip("/").split("/")
                body = self._body()
                if path == "/v1/files":
                    purpose, content = _multipart(self.headers.get("Content-Type", ""), body)
                    self._send(200, fake.upload(purpose, content))
                elif path == "/v1/batches":
                    self._send(*fake.create(json.loads(body)))
                elif len(parts) == 4 and parts[1] == "batches" and parts[3] == "cancel":
                    b = fake.cancel(parts[2])
                    self._send(404 if b is None else 200, b or {"error": {"message": "no such batch"}})
                elif path == "/v1/chat/completions":
                    req = json.loads(body)
                    with fake._lock:
                        fake.sync_calls += 1
                    self._send(200, completion(req, fake.answer(req)))
                else:
                    self._send(404, {"error": {"message": f"no route {path}"}})

            def _auth(self) -> None:
                auth = self.headers.get("Authorization")
                if auth:
                    fake.keys_seen.add(auth.removeprefix("Bearer "))

        return Handler


class _QuietServer(ThreadingHTTPServer):
    """A client that goes away (a killed run) is no error of the fake's."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


def _line(cid: str, response: dict[str, Any] | None, error: dict[str, Any] | None) -> bytes:
    return (json.dumps({"id": f"batch_req_{cid[:8]}", "custom_id": cid, "response": response, "error": error})
            + "\n").encode()


def _multipart(ctype: str, body: bytes) -> tuple[str, bytes]:
    """``(purpose, file content)`` of a multipart/form-data upload."""
    boundary = ctype.split("boundary=", 1)[1].strip('"').encode()
    purpose, content = "", b""
    for part in body.split(b"--" + boundary):
        head, _, data = part.partition(b"\r\n\r\n")
        data = data[:-2] if data.endswith(b"\r\n") else data
        if b'name="purpose"' in head:
            purpose = data.decode()
        elif b'name="file"' in head:
            content = data
    return purpose, content


def anthropic_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    """A Messages API answer to ``body`` with ``text``."""
    prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages") or [])
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model", "claude-fake"),
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": len(text.split()),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def anthropic_text(body: dict[str, Any]) -> str:
    """:func:`default_answer` of a Messages body (its last turn's text)."""
    last = (body.get("messages") or [{}])[-1].get("content", "")
    if isinstance(last, list):
        last = "".join(str(b.get("text", "")) for b in last if isinstance(b, dict))
    return default_answer({"messages": [{"content": last}]})


class FakeAnthropic:
    """A fake of Anthropic's Message Batches API (``/v1/messages/batches``: create, retrieve, results,
    cancel) and of ``POST /v1/messages``; :attr:`base_url` is the API root (no ``/v1``). A batch is
    ``in_progress`` for one poll, then ``ended`` (while :attr:`hold` is set it stays in progress).
    ``fate(custom_id, attempt)``: :data:`OK`, ``Fate("errored", 400, msg)`` (an
    ``invalid_request_error``), ``Fate("canceled")``, ``Fate("expired")`` or :data:`MISSING`. Results
    come in reverse order. :attr:`submitted`, :attr:`sync_calls`, :attr:`headers_seen` (the
    ``anthropic-version`` and whether ``x-api-key`` came) and :attr:`params` (each line's params) are
    kept for the tests."""

    def __init__(self, fate: Callable[[str, int], Fate] | None = None) -> None:
        self.fate = fate or (lambda cid, attempt: OK)
        self.batches: dict[str, dict[str, Any]] = {}
        self.inputs: dict[str, list[dict[str, Any]]] = {}
        self.results: dict[str, bytes] = {}
        self.submitted: Counter[str] = Counter()
        self.params: dict[str, dict[str, Any]] = {}
        self.sync_calls = 0
        self.hold = False
        self.headers_seen: set[tuple[str | None, bool]] = set()
        self._lock = threading.RLock()
        self._n = 0
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the API root; ``/v1/...`` is appended)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._n += 1
            bid = f"msgbatch_{self._n:06d}"
        reqs = body.get("requests") or []
        for r in reqs:
            self.submitted[r["custom_id"]] += 1
            self.params[r["custom_id"]] = r["params"]
        self.inputs[bid] = reqs
        self.batches[bid] = {"id": bid, "type": "message_batch", "processing_status": "in_progress",
                             "request_counts": {"processing": len(reqs), "succeeded": 0, "errored": 0,
                                                "canceled": 0, "expired": 0},
                             "results_url": None, "created_at": "2026-01-01T00:00:00Z", "_polls": 0}
        return self._public(self.batches[bid])

    def retrieve(self, bid: str) -> dict[str, Any] | None:
        b = self.batches.get(bid)
        if b is None:
            return None
        with self._lock:
            b["_polls"] += 1
            if b["processing_status"] == "canceling" or (b["processing_status"] == "in_progress" and not self.hold
                                                         and b["_polls"] >= 2):
                self._finish(b)
        return self._public(b)

    def _finish(self, b: dict[str, Any]) -> None:
        cancelled = b["processing_status"] == "canceling"
        lines: list[bytes] = []
        counts = b["request_counts"]
        for r in self.inputs[b["id"]]:
            cid = r["custom_id"]
            fate = Fate("canceled") if cancelled else self.fate(cid, self.submitted[cid] - 1)
            if fate.kind == "missing":
                continue
            if fate.kind == "ok":
                result: dict[str, Any] = {"type": "succeeded",
                                          "message": anthropic_message(r["params"], anthropic_text(r["params"]))}
                counts["succeeded"] += 1
            elif fate.kind == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": fate.message}}}
                counts["errored"] += 1
            else:
                result = {"type": fate.kind}
                counts[fate.kind] += 1
            lines.append((json.dumps({"custom_id": cid, "result": result}) + "\n").encode())
        lines.reverse()
        counts["processing"] = 0
        self.results[b["id"]] = b"".join(lines)
        b["processing_status"] = "ended"
        b["results_url"] = f"{self.base_url}/v1/messages/batches/{b['id']}/results"

    @staticmethod
    def _public(b: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in b.items() if not k.startswith("_")}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, obj: Any, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if raw is None else "application/binary")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _seen(self) -> None:
                fake.headers_seen.add((self.headers.get("anthropic-version"), bool(self.headers.get("x-api-key"))))

            def do_GET(self) -> None:
                self._seen()
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                if len(parts) == 4 and parts[:3] == ["v1", "messages", "batches"]:
                    b = fake.retrieve(parts[3])
                    self._send(404 if b is None else 200, b or {"type": "error"})
                elif len(parts) == 5 and parts[4] == "results" and parts[3] in fake.results:
                    self._send(200, None, fake.results[parts[3]])
                else:
                    self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_POST(self) -> None:
                self._seen()
                path = self.path.split("?", 1)[0]
                parts = path.strip("/").split("/")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if path == "/v1/messages/batches":
                    self._send(200, fake.create(body))
                elif len(parts) == 5 and parts[4] == "cancel" and parts[3] in fake.batches:
                    b = fake.batches[parts[3]]
                    if b["processing_status"] == "in_progress":
                        b["processing_status"] = "canceling"
                    self._send(200, fake._public(b))
                elif path == "/v1/messages":
                    with fake._lock:
                        fake.sync_calls += 1
                    self._send(200, anthropic_message(body, anthropic_text(body)))
                else:
                    self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": path}})

        return Handler


def gemini_response(body: dict[str, Any]) -> dict[str, Any]:
    """A ``generateContent`` answer to ``body`` (:func:`default_answer` of its last turn)."""
    last = (body.get("contents") or [{}])[-1].get("parts") or [{}]
    text = default_answer({"messages": [{"content": "".join(str(p.get("text", "")) for p in last)}]})
    n_in = sum(len(str(p.get("text", "")).split()) for c in body.get("contents") or [] for p in c.get("parts") or [])
    return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": n_in, "candidatesTokenCount": len(text.split()),
                              "totalTokenCount": n_in + len(text.split())},
            "modelVersion": "gemini-fake"}


class FakeGemini:
    """A fake of the Gemini API's batch mode (``models/M:batchGenerateContent`` with inline requests or an
    input file, ``batches/ID`` get / list / ``:cancel``), of the Files API's resumable upload
    (``upload/v1beta/files``: ``start``, then ``upload, finalize`` at the ``X-Goog-Upload-URL`` it
    answered) and download (``download/v1beta/files/ID:download?alt=media``), and of
    ``models/M:generateContent``; :attr:`base_url` ends in ``/v1beta``. A batch goes ``PENDING -> RUNNING
    -> SUCCEEDED`` one state per poll (:attr:`hold` keeps it running). ``fate(key, attempt)``: :data:`OK`,
    ``Fate("error", 400, msg)`` (a per-request error) or :data:`MISSING`. With :attr:`echo_keys` False the
    inline answers come back without their ``metadata`` (in request order, as the API documents). An
    inline create larger than :attr:`inline_limit` bytes is refused (400), as the API refuses one over
    20 MB; a file batch's answers are a responses file, its lines ``{"key", "response" | "error"}`` in
    reverse order. :attr:`modes` lists each created batch's input (``inline`` / ``file``),
    :attr:`uploads` the uploaded files' sizes."""

    def __init__(self, fate: Callable[[str, int], Fate] | None = None) -> None:
        self.fate = fate or (lambda cid, attempt: OK)
        self.ops: dict[str, dict[str, Any]] = {}
        self.inputs: dict[str, list[dict[str, Any]]] = {}
        self.submitted: Counter[str] = Counter()
        self.sync_calls = 0
        self.hold = False
        self.echo_keys = True
        self.keys_seen: set[str] = set()
        self.inline_limit = 20 * 1000 * 1000
        self.modes: list[str] = []
        self.uploads: list[int] = []
        self.files: dict[str, bytes] = {}
        self._sessions: dict[str, int] = {}
        self._lock = threading.RLock()
        self._n = 0
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1beta``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1beta"

    def start_upload(self, declared: int) -> str:
        """A resumable upload session for ``declared`` bytes; its upload URL."""
        with self._lock:
            self._n += 1
            sid = f"up{self._n:06d}"
        self._sessions[sid] = declared
        return f"http://127.0.0.1:{self._server.server_address[1]}/upload/v1beta/files?upload_id={sid}"

    def finish_upload(self, sid: str, data: bytes) -> tuple[int, dict[str, Any]]:
        """The bytes of session ``sid``: stored as ``files/ID`` (400 if not the declared length)."""
        declared = self._sessions.pop(sid, None)
        if declared is None or declared != len(data):
            return 400, {"error": {"code": 400, "message": f"upload {sid}: {len(data)} bytes, declared {declared}",
                                   "status": "INVALID_ARGUMENT"}}
        name = f"files/{sid}"
        self.files[name] = data
        self.uploads.append(len(data))
        return 200, {"file": {"name": name, "mimeType": "application/jsonl", "sizeBytes": str(len(data)),
                              "state": "ACTIVE"}}

    def __enter__(self) -> FakeGemini:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def create(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._n += 1
            name = f"batches/{self._n:06d}"
        batch = body["batch"]
        file_name = batch["inputConfig"].get("fileName")
        if file_name:
            reqs = [{"request": o["request"], "metadata": {"key": o["key"]}}
                    for o in map(json.loads, self.files[file_name].splitlines()) if o]
        else:
            reqs = batch["inputConfig"]["requests"]["requests"]
        self.modes.append("file" if file_name else "inline")
        for r in reqs:
            self.submitted[r["metadata"]["key"]] += 1
        self.inputs[name] = reqs
        self.ops[name] = {"name": name, "done": False, "_step": 0, "_file": bool(file_name), "metadata": {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": f"models/{model}", "displayName": batch.get("displayName"), "state": "BATCH_STATE_PENDING"}}
        return self._public(self.ops[name])

    def get(self, name: str) -> dict[str, Any] | None:
        op = self.ops.get(name)
        if op is None:
            return None
        with self._lock:
            meta = op["metadata"]
            if meta["state"] == "BATCH_STATE_PENDING":
                meta["state"] = "BATCH_STATE_RUNNING"
            elif meta["state"] == "BATCH_STATE_RUNNING" and not self.hold:
                self._finish(op)
        return self._public(op)

    def _finish(self, op: dict[str, Any]) -> None:
        answers = []
        for r in self.inputs[op["name"]]:
            key = r["metadata"]["key"]
            fate = self.fate(key, self.submitted[key] - 1)
            if fate.kind == "missing":
                continue
            item: dict[str, Any] = ({"error": {"code": fate.status, "message": fate.message,
                                               "status": "INVALID_ARGUMENT"}} if fate.kind == "error"
                                    else {"response": gemini_response(r["request"])})
            if op["_file"]:
                item["key"] = key
            elif self.echo_keys:
                item["metadata"] = {"key": key}
            answers.append(item)
        op["metadata"]["state"] = "BATCH_STATE_SUCCEEDED"
        op["done"] = True
        kind = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"
        if op["_file"]:
            out = f"files/batch-{op['name'].split('/')[-1]}-responses"
            self.files[out] = b"".join(json.dumps(a).encode() + b"\n" for a in reversed(answers))
            op["response"] = {"@type": kind, "responsesFile": out}
        else:
            op["response"] = {"@type": kind, "inlinedResponses": {"inlinedResponses": answers}}

    @staticmethod
    def _public(op: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in op.items() if not k.startswith("_")}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, obj: Any, raw: bytes | None = None, extra: dict[str, str] | None = None) -> None:
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/jsonl" if raw is not None else "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.headers.get("x-goog-api-key"):
                    fake.keys_seen.add(self.headers["x-goog-api-key"])
                path, _, query = self.path.partition("?")
                if path.startswith("/download/v1beta/") and path.endswith(":download") and "alt=media" in query:
                    data = fake.files.get(path[len("/download/v1beta/"):-len(":download")])
                    self._send(404 if data is None else 200, {"error": {"code": 404, "message": path}}, raw=data)
                    return
                path = path.removeprefix("/v1beta/")
                if path == "batches":
                    self._send(200, {"operations": [fake._public(o) for o in fake.ops.values()]})
                    return
                op = fake.get(path)
                self._send(404 if op is None else 200, op or {"error": {"code": 404, "message": path}})

            def do_POST(self) -> None:
                if self.headers.get("x-goog-api-key"):
                    fake.keys_seen.add(self.headers["x-goog-api-key"])
                path, _, query = self.path.partition("?")
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if path == "/upload/v1beta/files":
                    self._upload(query, raw)
                    return
                path = path.removeprefix("/v1beta/")
                body = json.loads(raw or b"{}")
                if path.endswith(":batchGenerateContent"):
                    if "requests" in body["batch"]["inputConfig"] and len(raw) > fake.inline_limit:
                        self._send(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                   "message": f"Request payload size exceeds the limit: {len(raw)}"}})
                        return
                    self._send(200, fake.create(path.split("/", 1)[1].split(":")[0], body))
                elif path.endswith(":cancel") and path[: -len(":cancel")] in fake.ops:
                    fake.ops[path[: -len(":cancel")]]["metadata"]["state"] = "BATCH_STATE_CANCELLED"
                    fake.ops[path[: -len(":cancel")]]["done"] = True
                    self._send(200, {})
                elif path.endswith(":generateContent"):
                    with fake._lock:
                        fake.sync_calls += 1
                    self._send(200, gemini_response(body))
                else:
                    self._send(404, {"error": {"code": 404, "message": path}})

            def _upload(self, query: str, raw: bytes) -> None:
                command = self.headers.get("X-Goog-Upload-Command", "")
                if command == "start" and self.headers.get("X-Goog-Upload-Protocol") == "resumable":
                    url = fake.start_upload(int(self.headers.get("X-Goog-Upload-Header-Content-Length") or -1))
                    self._send(200, {}, extra={"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"})
                elif command == "upload, finalize" and query.startswith("upload_id="):
                    self._send(*fake.finish_upload(query[len("upload_id="):], raw))
                else:
                    self._send(400, {"error": {"code": 400, "message": f"upload command {command!r}"}})

        return Handler
