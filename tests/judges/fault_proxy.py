"""A small HTTP/1.1 proxy that injects faults by a scripted schedule (plain asyncio streams).

It sits in front of an OpenAI-compatible server (the llama.cpp test server) — or, with
``upstream=None``, answers every request itself with a canned chat/completions response (an
instant stub, used to measure a client's own overhead). It runs its own event loop in a
background thread, so synchronous and asynchronous clients can both use it.

Every request is recorded (:class:`Seen`: arrival time, the ``marker`` found in the body, the
attempt number for that marker, the action taken, whether an Authorization header came), so tests
can count requests and check waiting times from the proxy's own clock.

Actions (what to do with one request):

* :class:`Forward` — pass it on and relay the answer.
* :class:`Status` — answer an error status, optionally with ``Retry-After``.
* :class:`Hang` — wait ``seconds`` (longer than the client's timeout), then close.
* :class:`Drop` — close the connection without answering.
* :class:`Truncate` — forward, but send only half of the response body, then close.
* :class:`Malformed` — answer 200 with a body that is not JSON.
* :class:`Rewrite` — forward, then answer with a function of the response JSON.
* :class:`Slow` — wait ``seconds``, then forward (a server that takes its time).
* :class:`Trickle` — answer as a server-sent-events stream, one event every ``every`` seconds (a
  slow server that is working); :class:`Stall` — start such a stream, then say nothing (a server
  that hangs mid-answer). Both stream the stub answer (or the upstream one, asked for without
  streaming and cut into pieces).

Requests asking for ``"stream": true`` are forwarded as they are (the upstream answer is relayed
whole); for :class:`Rewrite` the proxy asks upstream without streaming (it rewrites JSON), and the
client reads the JSON answer it gets.

The schedule is a function ``(Seen) -> Action``; :func:`by_attempt` builds one from a table
"marker -> actions for attempts 0, 1, 2 ..." (later attempts are forwarded).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


# -- actions ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Forward:
    """Pass the request on."""


@dataclass(frozen=True)
class Status:
    """Answer ``code`` with an error body (``body``, default a JSON error); ``retry_after`` is sent
    verbatim as ``Retry-After``."""

    code: int
    retry_after: str | None = None
    body: str | None = None


@dataclass(frozen=True)
class Hang:
    """Say nothing for ``seconds``, then close the connection."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection right after reading the request."""


@dataclass(frozen=True)
class Truncate:
    """Forward, then send the headers (with the full Content-Length) and half the body, and close."""


@dataclass(frozen=True)
class Malformed:
    """Answer 200 with a body that is not JSON."""


@dataclass(frozen=True)
class Rewrite:
    """Forward, then answer with ``fn(response JSON)`` (e.g. a server that returns no logprobs)."""

    fn: Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Slow:
    """Wait ``seconds``, then pass the request on."""

    seconds: float


@dataclass(frozen=True)
class Trickle:
    """Answer as a stream of ``pieces`` events, one every ``every`` seconds."""

    every: float
    pieces: int = 6


@dataclass(frozen=True)
class Stall:
    """Send the stream's headers and its first event, then say nothing for ``seconds`` and close."""

    seconds: float


def strip_logprobs(data: dict[str, Any]) -> dict[str, Any]:
    """The response without any ``logprobs`` (as servers that do not support them answer)."""
    for c in data.get("choices") or []:
        if isinstance(c, dict):
            c.pop("logprobs", None)
    return data


Action = Forward | Status | Hang | Drop | Truncate | Malformed | Rewrite | Slow | Trickle | Stall


def _unstreamed(raw: bytes, body: Any) -> bytes:
    """The request body without ``stream`` / ``stream_options`` (the upstream answers JSON)."""
    if not isinstance(body, dict) or "stream" not in body:
        return raw
    return json.dumps({k: v for k, v in body.items() if k not in ("stream", "stream_options")}).encode()


def _events(answer: dict[str, Any], pieces: int) -> list[bytes]:
    """A non-streamed answer cut into ``pieces`` server-sent events (chat deltas or completions text)."""
    c = answer["choices"][0]
    chat = "message" in c
    text = (c["message"].get("content") if chat else c.get("text")) or ""
    step = max(1, -(-len(text) // pieces))
    parts = [text[i : i + step] for i in range(0, len(text), step)] or [""]
    out = []
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        ch: dict[str, Any] = {"index": 0, "finish_reason": c.get("finish_reason") if last else None}
        if chat:
            ch["delta"] = {"content": part}
        else:
            ch["text"] = part
        chunk = {"id": answer.get("id", "x"), "model": answer.get("model", "x"), "choices": [ch]}
        if last and answer.get("usage"):
            chunk["usage"] = answer["usage"]
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    return out


@dataclass
class Seen:
    """One request as the proxy saw it. ``t`` is ``time.monotonic()`` at arrival."""

    index: int
    t: float
    path: str
    marker: str | None
    attempt: int
    authorized: str | None
    body: dict[str, Any] | None
    action: Action = field(default_factory=Forward)


_MARKER = re.compile(r"\[\[req-(\d+)\]\]")


def marker_of(body: dict[str, Any] | None) -> str | None:
    """The first ``[[req-N]]`` marker in a request body (prompt or messages), or None."""
    if not body:
        return None
    m = _MARKER.search(json.dumps(body.get("messages") or body.get("prompt") or ""))
    return m.group(0) if m else None


def by_attempt(table: dict[str, list[Action]]) -> Callable[[Seen], Action]:
    """A schedule: request with marker ``m`` gets ``table[m][attempt]``; anything else is forwarded."""

    def schedule(seen: Seen) -> Action:
        actions = table.get(seen.marker or "", [])
        return actions[seen.attempt] if seen.attempt < len(actions) else Forward()

    return schedule


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def _stub_answer(path: str, body: dict[str, Any] | None) -> dict[str, Any]:
    """The canned answer of stub mode: the text ``"Feedback: ok [RESULT] 3"``."""
    text = "Feedback: ok [RESULT] 3"
    usage = {"prompt_tokens": 7, "completion_tokens": 6, "total_tokens": 13}
    model = (body or {}).get("model", "stub")
    if path.endswith("/chat/completions"):
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        return {"id": "stub", "object": "chat.completion", "model": model, "choices": [choice], "usage": usage}
    return {"id": "stub", "object": "text_completion", "model": model,
            "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}], "usage": usage}


class FaultProxy:
    """The proxy. ``upstream``: ``"http://127.0.0.1:PORT"`` (no path) or None for stub mode.

    Use as a context manager; ``base_url`` is ``http://127.0.0.1:PORT/v1``.
    """

    def __init__(self, upstream: str | None, schedule: Callable[[Seen], Action] | None = None) -> None:
        self.upstream = upstream.rstrip("/") if upstream else None
        self.schedule = schedule or (lambda seen: Forward())
        self.seen: list[Seen] = []
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._client: Any = None
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def calls(self) -> list[Seen]:
        """The requests seen but ``GET /models`` (a client's health probe or its look at the server's kind)."""
        with self._lock:
            return [s for s in self.seen if not s.path.endswith("/models")]

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)

        async def boot() -> None:
            import httpx

            self._client = httpx.AsyncClient(timeout=httpx.Timeout(300.0))
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

        loop.run_until_complete(boot())
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._client.aclose())
        loop.close()

    def stop(self) -> None:
        if self._loop is None:
            return
        loop = self._loop

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self, schedule: Callable[[Seen], Action] | None = None) -> None:
        """Forget what was seen (and optionally install a new schedule)."""
        with self._lock:
            self.seen.clear()
            self._attempts.clear()
            self.max_in_flight = 0
            if schedule is not None:
                self.schedule = schedule

    # -- HTTP handling -------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                method, path, headers, raw = request
                keep = await self._serve(method, path, headers, raw, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            writer.close()

    async def _serve(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; False when the connection must be closed."""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        marker = marker_of(body) if isinstance(body, dict) else None
        with self._lock:
            attempt = self._attempts.get(marker or "", 0) if marker else 0
            if marker:
                self._attempts[marker] = attempt + 1
            seen = Seen(len(self.seen), time.monotonic(), path, marker, attempt, headers.get("authorization"),
                        body if isinstance(body, dict) else None)
            self.seen.append(seen)
        action = self.schedule(seen) if method == "POST" else Forward()
        seen.action = action
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._act(action, method, path, headers, raw, body, writer)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _act(
        self, action: Action, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any,
        writer: asyncio.StreamWriter,
    ) -> bool:
        if isinstance(action, Status):
            extra = {"Retry-After": action.retry_after} if action.retry_after is not None else {}
            payload = (action.body if action.body is not None else
                       json.dumps({"error": {"message": f"injected {action.code}"}})).encode()
            await _write(writer, action.code, payload, extra)
            return True
        if isinstance(action, Hang):
            await asyncio.sleep(action.seconds)
            return False
        if isinstance(action, Drop):
            return False
        if isinstance(action, Slow):
            await asyncio.sleep(action.seconds)
        if isinstance(action, Malformed):
            await _write(writer, 200, b'{"choices": [{"message": {"content": "cut', {})
            return True
        if isinstance(action, (Trickle, Stall)):
            await self._stream(action, method, path, headers, raw, body, writer)
            return False
        if isinstance(action, Rewrite):
            raw = _unstreamed(raw, body)
        status, payload, ctype = await self._forward(method, path, headers, raw, body)
        if isinstance(action, Rewrite) and status == 200:
            payload = json.dumps(action.fn(json.loads(payload))).encode()
        if isinstance(action, Truncate):
            head = _head(status, len(payload), {"Content-Type": ctype})
            writer.write(head + payload[: len(payload) // 2])
            await writer.drain()
            return False
        await _write(writer, status, payload, {"Content-Type": ctype})
        return True

    async def _stream(self, action: Trickle | Stall, method: str, path: str, headers: dict[str, str], raw: bytes,
                      body: Any, writer: asyncio.StreamWriter) -> None:
        _, payload, _ = await self._forward(method, path, headers, _unstreamed(raw, body), body)
        events = _events(json.loads(payload), action.pieces if isinstance(action, Trickle) else 4)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        if isinstance(action, Stall):
            writer.write(events[0])
            await writer.drain()
            await asyncio.sleep(action.seconds)
            return
        for ev in events:
            writer.write(b": ping\n\n" + ev)
            await writer.drain()
            await asyncio.sleep(action.every)
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()

    async def _forward(
        self, method: str, path: str, headers: dict[str, str], raw: bytes, body: Any
    ) -> tuple[int, bytes, str]:
        if self.upstream is None:
            if method == "GET":
                return 200, json.dumps({"object": "list", "data": [{"id": "stub"}]}).encode(), "application/json"
            return 200, json.dumps(_stub_answer(path, body)).encode(), "application/json"
        fwd = {k: v for k, v in headers.items() if k in ("content-type", "authorization", "accept")}
        resp = await self._client.request(method, self.upstream + path, content=raw, headers=fwd)
        return resp.status_code, resp.content, resp.headers.get("content-type", "application/json")


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0") or 0)
    raw = await reader.readexactly(n) if n else b""
    return method, path, headers, raw


def _head(status: int, length: int, extra: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", f"Content-Length: {length}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    if "Content-Type" not in extra:
        lines.append("Content-Type: application/json")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _write(writer: asyncio.StreamWriter, status: int, payload: bytes, extra: dict[str, str]) -> None:
    writer.write(_head(status, len(payload), extra) + payload)
    await writer.drain()


if __name__ == "__main__":  # serve as an instant stub (or a pass-through proxy) until killed
    import argparse

    ap = argparse.ArgumentParser(description="fault proxy / instant OpenAI-compatible stub")
    ap.add_argument("--upstream", default=None, help="http://host:port of the real server; none = stub")
    ns = ap.parse_args()
    proxy = FaultProxy(ns.upstream).start()
    print(proxy.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        proxy.stop()
