"""Judge backends: send prompts to a language model and get text (and token log-probabilities) back.

Two backends share one async interface (:class:`Backend`):

* :class:`OpenAICompatibleBackend` — any server speaking the OpenAI ``/v1/chat/completions`` or
  ``/v1/completions`` API (OpenAI, vLLM, llama.cpp, Ollama, TGI ...). Bounded concurrency, retries
  with exponential backoff and jitter on 429 / 5xx / timeouts / dropped connections / malformed
  bodies, honours ``Retry-After``. llama.cpp extras (GBNF ``grammar``, ``repeat_penalty``) pass through.
* :class:`HFLocalBackend` — a local Hugging Face ``transformers`` causal LM, batched on CPU or GPU.

Usage::

    backend = make_backend("openai", base_url="http://localhost:8080/v1", model="judge")
    req = GenerationRequest(messages=[{"role": "user", "content": "Rate this ..."}], max_tokens=64)
    gens = backend.run([req])                 # sync wrapper; or: await backend.generate_many([...])
    gens[0].text, gens[0].finish_reason, gens[0].top_logprobs

API keys are read from an environment variable (``api_key_env``) at request time. They are never
stored on the backend, never part of :meth:`Backend.identity` (used in cache keys and signatures),
of :attr:`Generation.raw`, of error messages, or of log records.

``import evalign.judges.backends`` is light: httpx is imported when the first request is sent,
torch / transformers when an :class:`HFLocalBackend` is created.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

from evalign.errors import BackendError, ModelLoadError
from evalign.judges._http import FATAL_STATUSES, RetryPolicy, is_retryable_status, parse_retry_after, redact

log = logging.getLogger(__name__)

Message = dict[str, str]
#: Called by :meth:`Backend.generate_many` as each request finishes: ``(index, Generation | BackendError)``.
OnDone = Callable[[int, "Generation | BackendError"], None]

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "BackendRequestError",
    "Choice",
    "Generation",
    "GenerationRequest",
    "HFLocalBackend",
    "OpenAICompatibleBackend",
    "Usage",
    "list_backends",
    "make_backend",
    "register_backend",
]


# --------------------------------------------------------------------------------------------
# Requests and results
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GenerationRequest:
    """One generation request. Give exactly one of ``messages`` (chat) or ``prompt`` (raw text).

    * ``messages``: ``[{"role": "system"|"user"|"assistant", "content": str}, ...]``.
    * ``max_tokens``: most tokens to generate (>= 1). Output cut off there has
      ``finish_reason == "length"`` (a judge must treat it as unparseable).
    * ``temperature`` (>= 0; 0 = greedy), ``top_p`` in (0, 1].
    * ``n``: number of samples (>= 1); all land in :attr:`Generation.choices`.
    * ``seed``: sampling seed, when the backend supports one.
    * ``logprobs`` / ``top_logprobs``: return, for each generated token, the ``top_logprobs``
      (0..20) most likely tokens with their natural-log probabilities.
    * ``stop``: strings that end generation (not included in the text).
    * ``repetition_penalty``: llama.cpp ``repeat_penalty`` / HF ``repetition_penalty`` (1.0 = off).
    * ``grammar``: a GBNF grammar (llama.cpp servers) constraining the output.
    * ``response_format``: passed through (e.g. ``{"type": "json_object"}``).
    """

    messages: list[Message] | None = None
    prompt: str | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    stop: list[str] | None = None
    repetition_penalty: float | None = None
    grammar: str | None = None
    response_format: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("GenerationRequest needs exactly one of 'messages' or 'prompt'")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("GenerationRequest.messages is empty")
            for i, m in enumerate(self.messages):
                if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(
                    m.get("content"), str
                ):
                    raise ValueError(f"GenerationRequest.messages[{i}] needs string 'role' and 'content'")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not 0 <= self.top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be in 0..20, got {self.top_logprobs}")
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs > 0 needs logprobs=True")

    def settings(self) -> dict[str, Any]:
        """The sampling settings (everything but the prompt), for signatures and cache keys."""
        d = asdict(self)
        d.pop("messages")
        d.pop("prompt")
        return d

    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-friendly dict (prompt included), e.g. for a cache key."""
        return asdict(self)


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more requests."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)


@dataclass(frozen=True)
class Choice:
    """One sampled output.

    ``finish_reason`` is ``"stop"`` (natural end or a stop string), ``"length"`` (hit ``max_tokens``)
    or what the server said (``"content_filter"``, ...; ``"unknown"`` when it said nothing).
    ``tokens`` / ``token_logprobs`` are the generated tokens and their log-probabilities (natural log),
    ``top_logprobs`` one ``{token: logprob}`` dict per generated position; all three are None unless
    the request asked for ``logprobs``.
    """

    text: str
    finish_reason: str
    top_logprobs: list[dict[str, float]] | None = None
    tokens: list[str] | None = None
    token_logprobs: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)


@dataclass(frozen=True)
class Generation:
    """The result of one :class:`GenerationRequest`.

    ``text`` / ``finish_reason`` / ``top_logprobs`` / ``tokens`` / ``token_logprobs`` are those of the
    first choice; ``choices`` holds all ``n``. ``usage`` counts tokens of all choices. ``retries`` is
    how many times the request was retried. ``raw`` is the server's response JSON (``{"responses":
    [...]}`` when ``n > 1`` took several requests; for local models the rendered ``prompt`` and the
    ``completion_ids`` of each choice); it never holds request headers or keys.
    """

    text: str
    finish_reason: str
    top_logprobs: list[dict[str, float]] | None
    usage: Usage
    retries: int = 0
    raw: dict[str, Any] = field(default_factory=dict)
    tokens: list[str] | None = None
    token_logprobs: list[float] | None = None
    choices: tuple[Choice, ...] = ()

    @property
    def truncated(self) -> bool:
        """True when the (first) output was cut off by ``max_tokens``."""
        return self.finish_reason == "length"

    @classmethod
    def from_choices(
        cls, choices: Sequence[Choice], usage: Usage, retries: int = 0, raw: dict[str, Any] | None = None
    ) -> Generation:
        """Build from one or more choices (the first one fills the top-level fields)."""
        if not choices:
            raise ValueError("a Generation needs at least one choice")
        first = choices[0]
        return cls(
            text=first.text,
            finish_reason=first.finish_reason,
            top_logprobs=first.top_logprobs,
            usage=usage,
            retries=retries,
            raw=raw or {},
            tokens=first.tokens,
            token_logprobs=first.token_logprobs,
            choices=tuple(choices),
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict (for the cache); :meth:`from_json` reads it back."""
        return {
            "choices": [c.to_json() for c in self.choices],
            "usage": {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens},
            "retries": self.retries,
            "raw": self.raw,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Generation:
        """Inverse of :meth:`to_json`."""
        return cls.from_choices(
            [Choice(**c) for c in data["choices"]],
            Usage(**data.get("usage", {})),
            retries=int(data.get("retries", 0)),
            raw=data.get("raw") or {},
        )


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


# --------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP backend
# --------------------------------------------------------------------------------------------
class _Retry(Exception):
    """Internal: this attempt failed in a retryable way."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status


_ENDPOINT_PATHS = {"chat": "/chat/completions", "completions": "/completions"}


class OpenAICompatibleBackend(Backend):
    """Async client of an OpenAI-compatible server.

    * ``base_url``: the API root including the version, e.g. ``"http://localhost:8080/v1"``.
    * ``model``: the model name sent with each request.
    * ``api_key_env``: name of the environment variable holding the key (read at each request;
      no ``Authorization`` header when it is unset or empty — fine for local servers).
    * ``endpoint``: ``"chat"`` (``/chat/completions``) or ``"completions"`` (``/completions``).
    * ``concurrency``: requests in flight at most. ``timeout``: seconds per attempt (whole request).
    * ``max_retries``, ``backoff_base``, ``backoff_max``, ``retry_after_max``: see
      :class:`evalign.judges._http.RetryPolicy`.
    * ``extra_body``: extra JSON fields merged into every request body (part of :meth:`identity`).
    * ``max_tokens_field``: the body field for ``max_tokens`` (``"max_completion_tokens"`` for OpenAI
      reasoning models).
    * ``seed``: seeds the backoff jitter (not the model).
    * ``repetition_penalty_fields``: body fields that carry a request's repetition penalty; default
      ``("repeat_penalty", "repetition_penalty")`` (llama.cpp; vLLM / TGI), and none for
      ``api.openai.com``, which rejects unknown fields.
    """

    kind = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        endpoint: Literal["chat", "completions"] = "chat",
        concurrency: int = 8,
        max_retries: int = 6,
        timeout: float = 120.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        extra_body: dict[str, Any] | None = None,
        max_tokens_field: str = "max_tokens",
        seed: int | None = None,
        repetition_penalty_fields: tuple[str, ...] | None = None,
    ) -> None:
        super().__init__()
        if endpoint not in _ENDPOINT_PATHS:
            raise ValueError(f"endpoint must be one of {sorted(_ENDPOINT_PATHS)}, got {endpoint!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.policy = RetryPolicy(
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            retry_after_max=retry_after_max,
            rng=random.Random(seed),
        )
        self.extra_body = dict(extra_body or {})
        self.max_tokens_field = max_tokens_field
        if repetition_penalty_fields is None:
            # OpenAI's own API rejects unknown sampling fields; local servers (llama.cpp, vLLM, TGI) take them
            official = "api.openai.com" in self.base_url
            repetition_penalty_fields = () if official else ("repeat_penalty", "repetition_penalty")
        self.repetition_penalty_fields = tuple(repetition_penalty_fields)
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pause_until = 0.0  # event-loop time before which no request is sent (after a 429)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
            f"endpoint={self.endpoint!r}, api_key_env={self.api_key_env!r}, concurrency={self.concurrency})"
        )

    @property
    def url(self) -> str:
        """The full URL requests are POSTed to."""
        return self.base_url + _ENDPOINT_PATHS[self.endpoint]

    def identity(self) -> dict[str, Any]:
        """``{"kind": "openai", "base_url", "model", "endpoint"}`` plus ``extra_body`` when set (never the key)."""
        ident: dict[str, Any] = {
            "kind": self.kind, "base_url": self.base_url, "model": self.model, "endpoint": self.endpoint
        }
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    # -- request body ----------------------------------------------------------------------
    def build_body(self, req: GenerationRequest, n: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """The JSON body for ``req`` (``n`` / ``seed`` override the request's)."""
        body: dict[str, Any] = {"model": self.model}
        if self.endpoint == "chat":
            body["messages"] = (
                req.messages if req.messages is not None else [{"role": "user", "content": req.prompt or ""}]
            )
        else:
            if req.prompt is None:
                raise ValueError(
                    "the 'completions' endpoint takes a raw 'prompt'; use endpoint='chat' for messages"
                )
            body["prompt"] = req.prompt
        body[self.max_tokens_field] = req.max_tokens
        body["temperature"] = req.temperature
        body["top_p"] = req.top_p
        n = req.n if n is None else n
        if n != 1:
            body["n"] = n
        seed = req.seed if seed is None else seed
        if seed is not None:
            body["seed"] = seed
        if req.stop:
            body["stop"] = list(req.stop)
        if req.logprobs:
            if self.endpoint == "chat":
                body["logprobs"] = True
                body["top_logprobs"] = req.top_logprobs
            else:
                body["logprobs"] = max(1, req.top_logprobs)
        if req.repetition_penalty is not None:
            for field_name in self.repetition_penalty_fields:  # llama.cpp: repeat_penalty; vLLM/TGI: repetition_penalty
                body[field_name] = req.repetition_penalty
        if req.grammar is not None:
            body["grammar"] = req.grammar
        if req.response_format is not None:
            body["response_format"] = req.response_format
        body.update(self.extra_body)
        return body

    # -- response parsing ------------------------------------------------------------------
    def parse_choice(self, choice: dict[str, Any]) -> Choice:
        """One response choice -> :class:`Choice` (chat and completions logprob formats both read)."""
        if self.endpoint == "chat" or "message" in choice:
            msg = choice.get("message")
            if not isinstance(msg, dict):
                raise _Retry("response choice has no 'message'")
            text = msg.get("content")
            text = "" if text is None else str(text)
        else:
            if "text" not in choice:
                raise _Retry("response choice has no 'text'")
            text = str(choice["text"])
        tokens, token_lps, tops = _normalise_logprobs(choice.get("logprobs"))
        return Choice(
            text=text,
            finish_reason=str(choice.get("finish_reason") or "unknown"),
            top_logprobs=tops,
            tokens=tokens,
            token_logprobs=token_lps,
        )

    # -- transport -------------------------------------------------------------------------
    def _ensure_client(self) -> tuple[Any, asyncio.Semaphore]:
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), limits=limits)
            self._sem = asyncio.Semaphore(self.concurrency)
            self._loop = loop
            self._pause_until = 0.0
        assert self._sem is not None
        return self._client, self._sem

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None and not self._client.is_closed:
            with contextlib.suppress(RuntimeError):  # pool created by an event loop that is gone
                await self._client.aclose()
        self._client = None

    def _headers(self) -> tuple[dict[str, str], str | None]:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers, key

    async def _attempt(self, client: Any, body: dict[str, Any], headers: dict[str, str], key: str | None) -> dict:
        import httpx

        try:
            resp = await _within(client.post(self.url, json=body, headers=headers), self.timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            raise _Retry(f"timed out after {self.timeout:g} s") from exc
        except httpx.ConnectError as exc:
            raise _Retry(f"cannot connect ({type(exc).__name__}: {redact(str(exc), key)})") from exc
        except httpx.RequestError as exc:  # dropped connection, truncated body, bad encoding ...
            raise _Retry(f"connection failed ({type(exc).__name__}: {redact(str(exc), key)})") from exc
        status = resp.status_code
        if status != 200:
            snippet = redact(resp.text[:300].strip(), key)
            if is_retryable_status(status):
                raise _Retry(
                    f"HTTP {status}: {snippet}", parse_retry_after(resp.headers.get("retry-after")), status
                )
            hint = " (check the API key and its variable)" if status in (401, 403) else ""
            raise BackendRequestError(
                f"POST {self.url}: HTTP {status}{hint}: {snippet}", status=status, fatal=status in FATAL_STATUSES
            )
        try:
            data = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _Retry(f"malformed JSON body ({len(resp.content)} bytes)") from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise _Retry("response JSON has no 'choices'")
        return data

    async def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST with retries; returns (response JSON, number of retries).

        A 429 with ``Retry-After`` pauses *every* request of this backend until that time (requests
        already sent are not recalled), so a rate-limited server is not hammered by the other workers.
        """
        client, _ = self._ensure_client()
        loop = asyncio.get_running_loop()
        retry = 0
        while True:
            pause = self._pause_until - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            headers, key = self._headers()
            try:
                return await self._attempt(client, body, headers, key), retry
            except _Retry as exc:
                last = exc
            except BackendRequestError as exc:
                exc.attempts = retry + 1
                raise
            if retry >= self.policy.max_retries:
                raise BackendRequestError(
                    f"POST {self.url} failed after {retry + 1} attempts; last error: {last.reason}",
                    status=last.status,
                    fatal=last.reason.startswith("cannot connect"),
                    attempts=retry + 1,
                )
            wait = self.policy.delay(retry, last.retry_after)
            if last.status == 429 and last.retry_after is not None:
                self._pause_until = max(self._pause_until, loop.time() + wait)
            log.info("retrying %s in %.2f s (retry %d/%d): %s", self.url, wait, retry + 1,
                     self.policy.max_retries, last.reason)
            retry += 1
            await asyncio.sleep(wait)

    async def generate(self, req: GenerationRequest) -> Generation:
        """Send ``req``; retry on transient failures; raise :class:`BackendError` when it fails for good.

        When ``req.n > 1`` and the server returns fewer choices (llama.cpp ignores ``n``), the rest are
        requested one by one (with ``seed + k`` when a seed is set).
        """
        body = self.build_body(req)
        _, sem = self._ensure_client()
        choices: list[Choice] = []
        usage = Usage()
        retries = 0
        raws: list[dict[str, Any]] = []
        try:
            async with sem:
                while len(choices) < req.n:
                    extra = len(choices)
                    if extra:
                        seed = None if req.seed is None else req.seed + extra
                        body = self.build_body(req, n=req.n - extra, seed=seed)
                    data, r = await self._post(body)
                    retries += r
                    try:
                        ordered = sorted(
                            (c for c in data["choices"] if isinstance(c, dict)),
                            key=lambda c: c.get("index", 0) if isinstance(c.get("index", 0), int) else 0,
                        )
                        got = [self.parse_choice(c) for c in ordered]
                    except _Retry as exc:
                        raise BackendRequestError(f"POST {self.url}: unusable response: {exc.reason}") from None
                    if not got:
                        raise BackendRequestError(f"POST {self.url}: response has no usable choice")
                    choices.extend(got[: req.n - len(choices)])
                    usage = usage + _read_usage(data.get("usage"))
                    raws.append(data)
        except BackendRequestError as exc:
            self._count(usage, retries + max(0, exc.attempts - 1), failed=True)
            raise
        self._count(usage, retries)
        raw = raws[0] if len(raws) == 1 else {"responses": raws}
        return Generation.from_choices(choices, usage, retries=retries, raw=raw)


async def _within(coro: Any, seconds: float) -> Any:
    """Await ``coro`` with a total time limit (``asyncio.timeout`` where available: no extra task)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await coro
    return await asyncio.wait_for(coro, seconds)  # pragma: no cover - Python 3.10


def _read_usage(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage()
    try:
        return Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
    except (TypeError, ValueError):
        return Usage()


def _normalise_logprobs(
    lp: Any,
) -> tuple[list[str] | None, list[float] | None, list[dict[str, float]] | None]:
    """Read chat (``{"content": [{token, logprob, top_logprobs: [...]}]}``) or completions
    (``{"tokens", "token_logprobs", "top_logprobs": [{tok: lp}]}``) logprobs into
    (tokens, token_logprobs, top_logprobs per position)."""
    if not isinstance(lp, dict):
        return None, None, None
    content = lp.get("content")
    if isinstance(content, list):
        tokens, lps, tops = [], [], []
        for entry in content:
            if not isinstance(entry, dict):
                continue
            tokens.append(str(entry.get("token", "")))
            lps.append(float(entry.get("logprob", float("nan"))))
            top: dict[str, float] = {}
            for alt in entry.get("top_logprobs") or []:
                if isinstance(alt, dict) and "token" in alt:
                    tok = str(alt["token"])
                    top[tok] = max(top.get(tok, float("-inf")), float(alt.get("logprob", float("nan"))))
            tops.append(top)
        return tokens, lps, tops
    if "tokens" in lp or "top_logprobs" in lp:
        tokens = [str(t) for t in lp.get("tokens") or []]
        lps = [float("nan") if v is None else float(v) for v in lp.get("token_logprobs") or []]
        tops = []
        for d in lp.get("top_logprobs") or []:
            tops.append({str(k): float(v) for k, v in d.items()} if isinstance(d, dict) else {})
        return tokens, lps, tops
    return None, None, None


# --------------------------------------------------------------------------------------------
# Local Hugging Face backend
# --------------------------------------------------------------------------------------------
#: Prompt format used when a tokenizer has no chat template. Each message becomes
#: ``"### {Role}:\n{content}\n\n"`` (Role capitalised) and the prompt ends with ``"### Assistant:\n"``.
FALLBACK_ROLE_FORMAT = "### {role}:\n{content}\n\n"
FALLBACK_GENERATION_PROMPT = "### Assistant:\n"


def fold_system(messages: Sequence[Message]) -> list[Message]:
    """Merge system messages into the first user turn (for chat templates without a system role).

    The system text comes first, separated from the user text by a blank line; with no user turn
    the system text becomes one.
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if not system:
        return rest
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{system}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]


def fallback_format(messages: Sequence[Message]) -> str:
    """The documented prompt format for tokenizers without a chat template (see module constants)."""
    parts = [FALLBACK_ROLE_FORMAT.format(role=m["role"].capitalize(), content=m["content"]) for m in messages]
    return "".join(parts) + FALLBACK_GENERATION_PROMPT


class HFLocalBackend(Backend):
    """A local Hugging Face causal LM (``transformers``), batched with left padding.

    * ``model_path``: a local directory (or a model id already in the local HF cache).
    * ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``; default CUDA when available, else CPU.
    * ``batch_size``: prompts per forward batch. ``dtype``: ``"float32"``, ``"bfloat16"``, ``"float16"``
      or None (float32 on CPU, the checkpoint's dtype elsewhere).

    Chat messages go through the tokenizer's chat template. A template that rejects the system role
    (raises) or drops it silently gets the system prompt folded into the first user turn
    (:func:`fold_system`); a tokenizer without a chat template uses :func:`fallback_format`.
    Requests with equal settings are batched together; ``seed`` seeds each batch (so sampled outputs
    are reproducible for the same requests, batch size and device). ``grammar`` and
    ``response_format`` are not supported and raise :class:`BackendError`.
    """

    kind = "hf"

    def __init__(
        self, model_path: str, *, device: str | None = None, batch_size: int = 8, dtype: str | None = None
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelLoadError(
                "the 'hf' judge backend needs torch and transformers: pip install 'evalign[models]'"
            ) from exc
        self.model_path = str(model_path)
        self.batch_size = batch_size
        self.concurrency = 1
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = None
        if dtype is not None:
            torch_dtype = getattr(torch, dtype, None)
            if not isinstance(torch_dtype, torch.dtype):
                raise ValueError(f"unknown dtype {dtype!r} (use float32, bfloat16 or float16)")
        elif self.device == "cpu":
            torch_dtype = torch.float32
        try:
            tokenizer: Any = AutoTokenizer.from_pretrained(self.model_path)
            kwargs: dict[str, Any] = {}
            if torch_dtype is not None:
                kwargs["dtype"] = torch_dtype
            model: Any = AutoModelForCausalLM.from_pretrained(self.model_path, **kwargs)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"cannot load the judge model {self.model_path!r}: {exc}. Give a local directory with "
                "config.json, weights and tokenizer files (no download is attempted when HF_HUB_OFFLINE=1)."
            ) from exc
        self.tokenizer: Any = tokenizer
        self.model: Any = model.to(self.device)
        self.model.eval()
        self.dtype = str(self.model.dtype).replace("torch.", "")
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            if tok.eos_token is None:
                raise ModelLoadError(f"the tokenizer of {self.model_path!r} has neither a pad nor an eos token")
            tok.pad_token = tok.eos_token
        self._system_mode: str | None = None  # "native" | "fold" | None (not yet probed)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"HFLocalBackend(model_path={self.model_path!r}, device={self.device!r}, dtype={self.dtype!r})"

    def identity(self) -> dict[str, Any]:
        """``{"kind": "hf", "model", "dtype", "chat_template"}`` (template hashed; the device is left out)."""
        from evalign.signature import stable_hash

        template = getattr(self.tokenizer, "chat_template", None)
        return {
            "kind": self.kind,
            "model": self.model_path,
            "dtype": self.dtype,
            "chat_template": stable_hash(template) if template else "fallback",
        }

    # -- prompts ---------------------------------------------------------------------------
    def _apply_template(self, messages: Sequence[Message]) -> str:
        out = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return str(out)

    def _probe_system(self) -> str:
        marker = "evalign-system-probe-7f3a"
        try:
            text = self._apply_template([{"role": "system", "content": marker}, {"role": "user", "content": "x"}])
        except Exception:  # jinja TemplateError or a raise_exception() in the template
            return "fold"
        return "native" if marker in text else "fold"

    def render(self, req: GenerationRequest) -> tuple[str, bool]:
        """The prompt text for ``req`` and whether the tokenizer should add special tokens."""
        if req.prompt is not None:
            return req.prompt, True
        assert req.messages is not None
        if not getattr(self.tokenizer, "chat_template", None):
            return fallback_format(req.messages), True
        messages = req.messages
        if any(m["role"] == "system" for m in messages):
            if self._system_mode is None:
                self._system_mode = self._probe_system()
            if self._system_mode == "fold":
                messages = fold_system(messages)
        try:
            return self._apply_template(messages), False
        except Exception as exc:
            raise BackendRequestError(f"the chat template of {self.model_path!r} rejected the messages: {exc}") from exc

    # -- generation ------------------------------------------------------------------------
    async def generate(self, req: GenerationRequest) -> Generation:
        """Run one request (in a worker thread)."""
        res = await self.generate_many([req], raise_errors=True)
        out = res[0]
        assert isinstance(out, Generation)
        return out

    async def generate_many(
        self,
        reqs: Sequence[GenerationRequest],
        on_done: OnDone | None = None,
        *,
        raise_errors: bool = False,
    ) -> list[Generation | BackendError]:
        """Group requests with equal settings into batches of ``batch_size`` and run them in a thread."""
        results: list[Generation | BackendError | None] = [None] * len(reqs)
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(reqs):
            groups.setdefault(json.dumps(r.settings(), sort_keys=True, default=str), []).append(i)
        for idxs in groups.values():
            for start in range(0, len(idxs), self.batch_size):
                batch = idxs[start : start + self.batch_size]
                try:
                    gens: list[Generation | BackendError] = list(
                        await asyncio.to_thread(self._generate_batch, [reqs[i] for i in batch])
                    )
                except BackendError as exc:
                    if raise_errors:
                        raise
                    gens = [exc] * len(batch)
                    for _ in batch:
                        self._count(failed=True)
                for i, g in zip(batch, gens, strict=True):
                    results[i] = g
                    if on_done is not None:
                        on_done(i, g)
        return [r for r in results if r is not None]

    def _generate_batch(self, reqs: list[GenerationRequest]) -> list[Generation]:
        import torch

        proto = reqs[0]
        if proto.grammar is not None or proto.response_format is not None:
            raise BackendRequestError("the 'hf' backend supports neither 'grammar' nor 'response_format'")
        tok = self.tokenizer
        rendered = [self.render(r) for r in reqs]
        add_special = rendered[0][1]
        texts = [t for t, _ in rendered]
        with self._lock, torch.inference_mode():
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=add_special).to(self.device)
            n_prompt = enc["input_ids"].shape[1]
            sample = proto.temperature > 0
            gen_kwargs: dict[str, Any] = {
                "max_new_tokens": proto.max_tokens,
                "do_sample": sample,
                "pad_token_id": tok.pad_token_id,
                "return_dict_in_generate": True,
                "output_logits": proto.logprobs,
                "num_return_sequences": proto.n if sample else 1,
            }
            if sample:
                gen_kwargs["temperature"] = proto.temperature
                gen_kwargs["top_p"] = proto.top_p
                gen_kwargs["top_k"] = 0
            else:  # silence warnings about sampling settings of the model's generation config
                gen_kwargs.update(temperature=None, top_p=None, top_k=None)
            if proto.repetition_penalty is not None:
                gen_kwargs["repetition_penalty"] = proto.repetition_penalty
            if proto.stop:
                gen_kwargs["stop_strings"] = list(proto.stop)
                gen_kwargs["tokenizer"] = tok
            if proto.seed is not None:
                torch.manual_seed(proto.seed)
            try:
                out = self.model.generate(**enc, **gen_kwargs)
            except (RuntimeError, ValueError) as exc:
                raise BackendRequestError(f"generation with {self.model_path!r} failed: {exc}") from exc
        seqs = out.sequences[:, n_prompt:].cpu()
        logits = out.logits if proto.logprobs else None
        per_req = proto.n if sample else 1
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        eos_ids = _eos_ids(self.model, tok)
        gens: list[Generation] = []
        for b, r in enumerate(reqs):
            choices = []
            completion = 0
            ids: list[list[int]] = []
            for k in range(per_req):
                row = b * per_req + k
                choice, gen_ids, n_tok = self._decode(seqs[row], row, logits, r, eos_ids)
                choices.append(choice)
                ids.append(gen_ids)
                completion += n_tok
            if not sample and r.n > 1:
                choices, ids = choices * r.n, ids * r.n
                completion *= r.n
            usage = Usage(int(prompt_lens[b]), completion)
            self._count(usage)
            raw = {"backend": "hf", "model": self.model_path, "prompt": texts[b], "completion_ids": ids}
            gens.append(Generation.from_choices(choices, usage, retries=0, raw=raw))
        return gens

    def _decode(
        self, ids: Any, row: int, logits: Any, req: GenerationRequest, eos_ids: set[int]
    ) -> tuple[Choice, list[int], int]:
        """One generated row -> (Choice, generated token ids, completion tokens). The row ends at the first eos token
        (counted) or pad token (a row finished early by a stop string is padded, not counted)."""
        import torch

        tok = self.tokenizer
        id_list = [int(x) for x in ids.tolist()]
        end, n_tokens, ended = len(id_list), len(id_list), False
        for j, t in enumerate(id_list):
            if t in eos_ids or t == tok.pad_token_id:
                end, n_tokens, ended = j, j + (1 if t in eos_ids else 0), True
                break
        gen_ids = id_list[:end]
        text = tok.decode(gen_ids, skip_special_tokens=True)
        # no end token and the full budget used: cut off, unless a stop string ended it
        finish = "length" if not ended and len(id_list) >= req.max_tokens else "stop"
        if req.stop:
            cut = min((p for p in (text.find(s) for s in req.stop) if p >= 0), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        tops = tokens = lps = None
        if logits is not None:  # raw model log-probabilities (before temperature / top-p)
            tokens, lps, tops = [], [], []
            k = max(1, req.top_logprobs)
            for j in range(end):
                logp = torch.log_softmax(logits[j][row].float(), dim=-1)
                tokens.append(tok.decode([gen_ids[j]]))
                lps.append(float(logp[gen_ids[j]]))
                vals, idx = torch.topk(logp, min(k, logp.shape[-1]))
                top: dict[str, float] = {}
                for v, i in zip(vals.tolist(), idx.tolist(), strict=True):
                    s = tok.decode([i])
                    top[s] = max(top.get(s, float("-inf")), float(v))
                tops.append(top if req.top_logprobs else {})
        return Choice(text, finish, tops, tokens, lps), gen_ids, n_tokens


def _eos_ids(model: Any, tok: Any) -> set[int]:
    ids: set[int] = set()
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for v in (cfg_eos, tok.eos_token_id):
        if isinstance(v, int):
            ids.add(v)
        elif isinstance(v, (list, tuple)):
            ids.update(int(x) for x in v)
    return ids


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------
BACKENDS: dict[str, type[Backend]] = {}


def register_backend(name: str) -> Callable[[type[Backend]], type[Backend]]:
    """Class decorator: make a backend available to :func:`make_backend` under ``name``."""

    def deco(cls: type[Backend]) -> type[Backend]:
        BACKENDS[name] = cls
        return cls

    return deco


register_backend("openai")(OpenAICompatibleBackend)
register_backend("hf")(HFLocalBackend)


def list_backends() -> list[str]:
    """Names accepted by :func:`make_backend`."""
    return sorted(BACKENDS)


def make_backend(kind: str = "openai", **kwargs: Any) -> Backend:
    """Create a backend by registry name (``"openai"`` or ``"hf"``) with its keyword arguments."""
    try:
        cls = BACKENDS[kind]
    except KeyError:
        raise ValueError(f"unknown judge backend {kind!r}; choose from {', '.join(list_backends())}") from None
    return cls(**kwargs)
