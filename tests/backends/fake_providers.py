"""Fakes of the hosted providers' wire formats, started by the tests: one threaded HTTP server that
answers Anthropic's ``POST /v1/messages`` and Gemini's ``POST /v1beta/models/MODEL:generateContent``
as their API references describe them (bodies, headers, usage with prompt-cache fields, Gemini's
``logprobsResult``, safety blocks), and fails on demand (``fail_next``: a status with ``retry-after``).

Reusable: a test (or the batch API's tests) subclasses :class:`FakeProviders` and adds routes in
:meth:`FakeProviders.route` (return None to fall through to the built-in ones)::

    with FakeProviders(reply=lambda seen: "[RESULT] 4") as fake:
        backend = AnthropicBackend(fake.anthropic_url, "claude-test", api_key_env="FAKE_KEY")
        ...
        fake.requests[0].headers["x-api-key"]

Token counts are words (``len(text.split())``). Anthropic's prompt cache is modelled: a system block
marked ``cache_control`` is written on its first request (``cache_creation_input_tokens``) and read by
the next ones with the same text (``cache_read_input_tokens``); Gemini's implicit cache reports
``cachedContentTokenCount`` for a system instruction seen before.
"""

from __future__ import annotations

import http.server
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Seen:
    """One request the fake received: ``provider`` (``anthropic`` / ``gemini`` / ``other``), ``path``,
    ``headers`` (lower-case names), ``body`` (parsed JSON), and the plain ``system`` / ``user`` texts."""

    provider: str
    path: str
    headers: dict[str, str]
    body: Any
    system: str = ""
    user: str = ""
    #: Anthropic: the text of the blocks up to the last one marked ``cache_control`` ("" when none)
    cached_prefix: str = ""


@dataclass
class Fault:
    """An answer to send instead of the real one: ``status``, ``retry_after`` header, JSON ``body``."""

    status: int
    retry_after: str | None = None
    body: Any = None


def words(text: str) -> int:
    """The fake's token count of ``text``."""
    return len(text.split())


def _texts(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if isinstance(blocks, list):
        return "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
    return ""


def cached_prefix(body: dict[str, Any]) -> str:
    """The text of a Messages body's blocks (system, then the turns') up to the last one marked
    ``cache_control``, joined by spaces ("" when none is marked)."""
    blocks: list[dict[str, Any]] = []
    system = body.get("system")
    blocks.extend(b for b in (system if isinstance(system, list) else [{"text": system or ""}]) if isinstance(b, dict))
    for m in body.get("messages", []):
        content = m.get("content")
        blocks.extend(content if isinstance(content, list) else [{"text": content}])
    marked = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    return " ".join(str(b.get("text", "")) for b in blocks[: marked[-1] + 1]) if marked else ""


@dataclass
class FakeProviders:
    """The fake server (a context manager; see the module doc).

    * ``reply(seen) -> str``: the answer text of a request (default ``"[RESULT] 3"``);
    * ``top``: Gemini's top log-probabilities at one answer position (``top_pos``: 0 the first character,
      -1 the last), as probabilities by token, or a function of the request giving them (sent when the
      request asks ``responseLogprobs``; the answer is one token per character);
    * ``stop_reason`` (Anthropic) / ``finish_reason`` (Gemini): what the answer ends with;
    * ``block_reason``: Gemini's ``promptFeedback.blockReason`` (no candidate);
    * ``model_version``: Gemini's ``modelVersion``.
    """

    reply: Callable[[Seen], str] = field(default=lambda seen: "[RESULT] 3")
    top: dict[str, float] | Callable[[Seen], dict[str, float]] | None = None
    top_pos: int = 0
    stop_reason: str = "end_turn"
    finish_reason: str = "STOP"
    block_reason: str | None = None
    model_version: str = "gemini-fake-001"
    requests: list[Seen] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    cached: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> FakeProviders:
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except json.JSONDecodeError:
                    body = None
                status, headers, answer = fake.handle(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST
            do_DELETE = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        assert self._server is not None, "use the fake as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def anthropic_url(self) -> str:
        """Anthropic's API root on the fake (``/v1/messages`` is appended by the backend)."""
        return self.base_url

    @property
    def gemini_url(self) -> str:
        """Gemini's API root on the fake (``/v1beta``)."""
        return self.base_url + "/v1beta"

    def fail_next(self, status: int, *, retry_after: str | None = None, times: int = 1, body: Any = None) -> None:
        """Answer the next ``times`` requests with ``status`` (and a ``retry-after`` header)."""
        with self._lock:
            self.faults.extend(Fault(status, retry_after, body) for _ in range(times))

    # -- routing ----------------------------------------------------------------------------------
    def route(self, seen: Seen) -> tuple[int, dict[str, str], Any] | None:
        """A subclass's own routes (None: the built-in ones answer)."""
        return None

    def handle(self, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, str], Any]:
        """``(status, headers, JSON)`` of one request."""
        provider = "anthropic" if path.endswith("/v1/messages") else "gemini" if ":generateContent" in path else "other"
        seen = Seen(provider, path, headers, body)
        if isinstance(body, dict) and provider == "anthropic":
            seen.system = _texts(body.get("system"))
            seen.user = _texts(body["messages"][-1]["content"]) if body.get("messages") else ""
        elif isinstance(body, dict) and provider == "gemini":
            seen.system = _texts((body.get("systemInstruction") or {}).get("parts"))
            seen.user = _texts(body["contents"][-1]["parts"]) if body.get("contents") else ""
        with self._lock:
            self.requests.append(seen)
            fault = self.faults.pop(0) if self.faults else None
        if fault is not None:
            extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            return fault.status, extra, fault.body or {"type": "error", "error": {"type": "fake_error",
                                                                                  "message": f"fake {fault.status}"}}
        own = self.route(seen)
        if own is not None:
            return own
        if provider == "anthropic":
            return 200, {}, self.anthropic_answer(seen)
        if provider == "gemini":
            return 200, {}, self.gemini_answer(seen)
        return 404, {}, {"error": {"message": f"no route {path}"}}

    # -- Anthropic --------------------------------------------------------------------------------
    def anthropic_answer(self, seen: Seen) -> dict[str, Any]:
        """A Messages API answer (usage with the prompt cache's fields: the blocks up to the last one
        marked ``cache_control`` are written on their first request and read by the next ones)."""
        body = seen.body
        text = self.reply(seen)
        prompt = words(seen.system) + sum(words(_texts(m["content"])) for m in body.get("messages", []))
        seen.cached_prefix = cached_prefix(body)
        write = read = 0
        if seen.cached_prefix:
            with self._lock:
                hit = seen.cached_prefix in self.cached
                self.cached.add(seen.cached_prefix)
            n = words(seen.cached_prefix)
            write, read = (0, n) if hit else (n, 0)
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": [{"type": "text", "text": text}], "stop_reason": self.stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": prompt - write - read, "output_tokens": words(text),
                          "cache_creation_input_tokens": write, "cache_read_input_tokens": read}}

    # -- Gemini -----------------------------------------------------------------------------------
    def gemini_answer(self, seen: Seen) -> dict[str, Any]:
        """A ``generateContent`` answer (``logprobsResult`` when asked; a block when set)."""
        body = seen.body
        prompt = words(seen.system) + sum(words(_texts(c.get("parts"))) for c in body.get("contents", []))
        with self._lock:
            hit = bool(seen.system) and seen.system in self.cached
            self.cached.add(seen.system)
        usage: dict[str, Any] = {"promptTokenCount": prompt}
        if hit:
            usage["cachedContentTokenCount"] = words(seen.system)
        if self.block_reason:
            return {"promptFeedback": {"blockReason": self.block_reason}, "usageMetadata": usage,
                    "modelVersion": self.model_version}
        config = body.get("generationConfig") or {}
        cands = []
        for i in range(int(config.get("candidateCount") or 1)):
            text = self.reply(seen) if self.finish_reason in ("STOP", "MAX_TOKENS") else ""
            cand: dict[str, Any] = {"index": i, "finishReason": self.finish_reason,
                                    "content": {"role": "model", "parts": [{"text": text}] if text else []}}
            if config.get("responseLogprobs") and text:
                top = self.top(seen) if callable(self.top) else self.top
                cand["logprobsResult"] = self.logprobs(text, int(config.get("logprobs") or 0), top)
            cands.append(cand)
        usage["candidatesTokenCount"] = sum(words(_texts(c["content"]["parts"])) for c in cands)
        usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"]
        return {"candidates": cands, "usageMetadata": usage, "modelVersion": self.model_version}

    def logprobs(self, text: str, k: int, top: dict[str, float] | None = None) -> dict[str, Any]:
        """Gemini's ``logprobsResult`` of ``text``: one step per character; the top candidates at
        :attr:`top_pos` from ``top`` (else the chosen character alone, probability 1)."""
        steps, chosen = [], []
        at = self.top_pos % len(text)
        for pos, ch in enumerate(text):
            dist = dict(top) if pos == at and top else {ch: 1.0}
            lp = math.log(dist.get(ch, 1e-9))
            chosen.append({"token": ch, "tokenId": ord(ch), "logProbability": lp})
            ranked = sorted(dist.items(), key=lambda kv: -kv[1])[: max(k, 1)]
            steps.append({"candidates": [{"token": t, "tokenId": ord(t[0]), "logProbability": math.log(p)}
                                         for t, p in ranked]})
        return {"topCandidates": steps, "chosenCandidates": chosen,
                "logProbabilitySum": sum(c["logProbability"] for c in chosen)}
