"""The OpenAI-compatible HTTP backend (OpenAI, vLLM, llama.cpp, Ollama, TGI ...).

API keys are read from an environment variable (``api_key_env``) at request time. They are never
stored on the backend, never part of :meth:`identity` (used in cache keys and signatures), of
:attr:`Generation.raw`, of error messages, or of log records: every text is redacted BEFORE it is
truncated. ``import`` is light: httpx is imported when the first request is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import random
import sys
from dataclasses import replace
from typing import Any, ClassVar, Literal

from evalign.backends._http import (
    FATAL_STATUSES,
    RetryPolicy,
    check_api_key,
    is_retryable_status,
    merge_stream,
    parse_retry_after,
    redact,
    scrub,
    snippet,
    split_url_credentials,
    sse_data,
)
from evalign.backends.base import Backend, BackendOptions, BackendRequestError, ConstraintRefused
from evalign.backends.registry import BACKENDS, register_backend
from evalign.backends.structured import (
    FORMAT_FORMS,
    FORMATS,
    chosen_form,
    constraint_fields,
    format_of,
)
from evalign.backends.types import (
    PROMPT_CACHE_MODES,
    Choice,
    Constraint,
    Generation,
    GenerationRequest,
    Usage,
    answered_by,
    fold_system,
)
from evalign.errors import EvalignError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP backend
# --------------------------------------------------------------------------------------------
class _Retry(Exception):
    """Internal: this attempt failed in a retryable way."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None,
                 abandoned: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.status = status
        #: the request was given up on a timeout (the server may still be computing it)
        self.abandoned = abandoned


_ENDPOINT_PATHS = {"chat": "/chat/completions", "completions": "/completions"}
#: a streamed answer that ended before its finish_reason: cut off, not an answer (retried)
UNFINISHED_STREAM = ("HTTP 200 but the stream ended before the answer was finished (no finish_reason); a "
                     "llama-cpp-python server cuts a streamed answer short when another request arrives: start "
                     "it with --interrupt_requests False, or use --concurrency 1")


class OpenAICompatibleBackend(Backend):
    """Async client of an OpenAI-compatible server.

    * ``base_url``: the API root including the version, e.g. ``"http://localhost:8080/v1"``.
    * ``model``: the model name sent with each request.
    * ``api_key_env``: name of the environment variable holding the key (read at each request;
      no ``Authorization`` header when it is unset or empty — fine for local servers). A key with a
      control character (a trailing ``\\r`` from a CRLF ``.env`` file) or a non-ASCII character is
      refused before any request, in one line that does not show it. Credentials in the URL
      (``http://user:KEY@host/v1``) are taken out of it and sent as ``Authorization: Basic ...``
      (``http://KEY@host/v1``: ``Bearer KEY``) unless the key variable is set; the URL without
      them is the one shown and stored. Every secret is redacted from error messages and from the
      answers (a server that echoes the key) before they are stored.
    * ``endpoint``: ``"chat"`` (``/chat/completions``) or ``"completions"`` (``/completions``).
    * ``concurrency``: requests in flight at most.
    * ``stream``: ask the server to stream its answer (``"stream": true``, server-sent events; default
      False: llama-cpp-python's server, started as is, cuts a streamed answer short when another request
      arrives; evalign's own launcher starts it with ``--interrupt_requests False``, and a stream that ends
      without a finish reason is retried, never read as an empty answer). Streamed chunks are put back together into the one answer a non-streaming request gives
      (text, finish reason, logprobs, usage), so a judge, the cache and ``raw`` see no difference; a
      server that answers a streaming request with plain JSON is read as such.
    * ``timeout``: seconds to wait for the answer to *start* (status and headers; without ``stream``, the
      whole answer). It never cuts an answer that is still arriving.
    * ``idle_timeout``: seconds without a single byte once the answer has started (default 120): a
      server that streams, or sends its keep-alive pings while it reads a long prompt, is working and
      is waited for; one that stops sending is abandoned. A streamed request that is abandoned closes
      its connection, which tells llama.cpp / vLLM to stop computing it. A request abandoned on a
      timeout is re-sent only as a counted retry (:attr:`abandoned`, warned in the log: without
      ``stream`` the server may still be computing the abandoned one).
    * ``connect_timeout``: seconds to establish a connection (default 10; a dead host fails fast).
    * ``deadline``: seconds for all requests of this backend together, from its first request
      (None = no limit); past it every request fails with a fatal error (the run stops, finished
      calls stay cached).
    * ``system_prompt``: ``"role"`` (send a ``system`` message) or ``"fold"`` (prepend the system
      text to the first user turn, as prometheus-eval's README does for served Prometheus models; for
      chat templates without a system role). Part of :meth:`identity`.
    * ``max_retries``, ``backoff_base``, ``backoff_max``, ``retry_after_max``: see
      :class:`evalign.backends._http.RetryPolicy`.
    * ``extra_body``: extra JSON fields merged into every request body (part of :meth:`identity`).
    * ``max_tokens_field``: the body field for ``max_tokens`` (``"max_completion_tokens"`` for OpenAI
      reasoning models).
    * ``seed``: seeds the backoff jitter (not the model).
    * ``server_name``: what names the server in :meth:`identity` (cache keys) instead of ``base_url``,
      e.g. ``llama.cpp:<sha256 of the GGUF>`` for a server evalign started on a random port.
    * ``repetition_penalty_fields``: body fields that carry a request's repetition penalty; default
      ``("repeat_penalty", "repetition_penalty")`` (llama.cpp; vLLM / TGI), and none for
      ``api.openai.com``, which rejects unknown fields.
    * ``constraint_format``: how a request's output :class:`Constraint` is sent: ``"llama.cpp"``
      (GBNF ``grammar``), ``"vllm"`` (``structured_outputs``), ``"openai"`` (``response_format``
      JSON schema only) or ``"auto"`` (read from ``GET /models`` once, at the first constrained
      request; see :mod:`evalign.backends.structured`). A constrained request that the server
      answers 400 / 422 / 501 is sent once more without the constraint: answered, it was the
      constraint, and :class:`ConstraintRefused` (fatal) says so in one line.
    """

    kind = "openai"
    required_options = ("model", "base_url")
    #: headers sent with every request besides the content type and the key
    fixed_headers: ClassVar[dict[str, str]] = {}
    #: whether ``service_tier`` (``--service-tier``) is sent
    takes_service_tier: ClassVar[bool] = True

    @classmethod
    def from_options(cls, options: BackendOptions) -> Backend:
        """The client of ``options.base_url``; several base URLs: one model on several servers
        (the ``multi`` backend, whose cache key does not name them)."""
        urls = options.base_urls
        if len(urls) > 1:
            return BACKENDS.create("multi", options)  # type: ignore[no-any-return]
        if not urls or not options.model:
            raise ValueError("the openai backend needs a base_url and a model")
        own = options.given("concurrency", "timeout", "connect_timeout", "max_retries", "deadline", "system_prompt",
                            "idle_timeout", "stream", "constraint_format", "prompt_cache", "service_tier")
        return cls(**{"base_url": urls[0], "model": options.model, "api_key_env": options.api_key_env, **own,
                      **options.extra})

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
        connect_timeout: float = 10.0,
        deadline: float | None = None,
        idle_timeout: float | None = 120.0,
        stream: bool = False,
        system_prompt: Literal["role", "fold"] = "role",
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 120.0,
        extra_body: dict[str, Any] | None = None,
        max_tokens_field: str = "max_tokens",
        seed: int | None = None,
        repetition_penalty_fields: tuple[str, ...] | None = None,
        server_name: str | None = None,
        constraint_format: str = "auto",
        prompt_cache: str = "auto",
        service_tier: str | None = None,
    ) -> None:
        super().__init__()
        if prompt_cache not in PROMPT_CACHE_MODES:
            raise ValueError(f"prompt_cache must be one of {', '.join(PROMPT_CACHE_MODES)}, got {prompt_cache!r}")
        #: the provider's prompt cache: auto (on where the provider has it), off, 5m or 1h (Anthropic's TTLs)
        self.prompt_cache = prompt_cache
        #: the provider's service tier sent with each request (OpenAI's ``flex``), None: the default
        self.service_tier = service_tier
        if constraint_format not in ("auto", *FORMATS):
            raise ValueError(f"constraint_format must be auto or one of {', '.join(FORMATS)}, got {constraint_format!r}")
        self.constraint_format = constraint_format
        #: the format in use and what told it (None until the first constrained request)
        self._format: tuple[str, str] | None = None if constraint_format == "auto" else (constraint_format, "given")
        if endpoint not in _ENDPOINT_PATHS:
            raise ValueError(f"endpoint must be one of {sorted(_ENDPOINT_PATHS)}, got {endpoint!r}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if connect_timeout <= 0:
            raise ValueError(f"connect_timeout must be > 0 seconds, got {connect_timeout}")
        if idle_timeout is not None and idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be > 0 seconds, got {idle_timeout}")
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline}")
        if system_prompt not in ("role", "fold"):
            raise ValueError(f"system_prompt must be 'role' or 'fold', got {system_prompt!r}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        clean, self._url_auth, self._url_secrets = split_url_credentials(base_url)
        self.base_url = clean.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.idle_timeout = None if idle_timeout is None else float(idle_timeout)
        self.stream = bool(stream)
        #: requests abandoned on a timeout (no answer started, or no byte for idle_timeout) and re-sent
        self.abandoned = 0
        self.deadline = None if deadline is None else float(deadline)
        self.system_prompt = system_prompt
        self._deadline_at: float | None = None
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
            repetition_penalty_fields = () if "api.openai.com" in self.base_url else ("repeat_penalty",
                                                                                      "repetition_penalty")
        self.repetition_penalty_fields = tuple(repetition_penalty_fields)
        self.server_name = server_name
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
            "kind": self.kind, "base_url": self.server_name or self.base_url, "model": self.model,
            "endpoint": self.endpoint,
            "system_prompt": self.system_prompt,
        }
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    # -- request body ----------------------------------------------------------------------
    def build_body(self, req: GenerationRequest, n: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """The JSON body for ``req`` (``n`` / ``seed`` override the request's)."""
        body: dict[str, Any] = {"model": self.model}
        if self.endpoint == "chat":
            messages = req.messages if req.messages is not None else [{"role": "user", "content": req.prompt or ""}]
            body["messages"] = fold_system(messages) if self.system_prompt == "fold" else messages
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
        if req.constraint is not None:
            body.update(constraint_fields(req.constraint, self._format[0] if self._format else "llama.cpp"))
        if req.logit_bias:
            body["logit_bias"] = dict(req.logit_bias)
            body["logit_bias_type"] = "tokens"
        if self.service_tier:
            body["service_tier"] = self.service_tier
        if self.prompt_cache != "off" and self.official and req.messages is not None:
            cache_key = prompt_cache_key(req.messages)
            if cache_key:
                body["prompt_cache_key"] = cache_key
        body.update(self.extra_body)
        return body

    @property
    def official(self) -> bool:
        """True for OpenAI's own API (``api.openai.com``): no llama.cpp / vLLM fields, a prompt cache key."""
        return "api.openai.com" in self.base_url

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

    def generation_of(self, data: Any) -> Generation:
        """One answer's JSON (e.g. a batch result line's body) -> the :class:`Generation` a synchronous
        request with that answer gives (:meth:`answer_problem`, :meth:`read_answer`: each provider's own);
        :class:`BackendRequestError` when it is unusable."""
        problem = self.answer_problem(data)
        if problem is not None:
            raise BackendRequestError(f"{self.url}: unusable answer: {problem}")
        try:
            choices, usage = self.read_answer(data)
        except ValueError as exc:
            raise BackendRequestError(f"{self.url}: unusable answer: {exc}") from None
        if not choices:
            raise BackendRequestError(f"{self.url}: the answer has no usable choice")
        model, fingerprint = answered_by(data)
        return Generation.from_choices(choices, usage, retries=0, raw=data, model=model,
                                       system_fingerprint=fingerprint)

    # -- transport -------------------------------------------------------------------------
    def _ensure_client(self) -> tuple[Any, asyncio.Semaphore]:
        import httpx

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
            # read: the longest wait for the next bytes of an answer that has started (idle_timeout)
            read = self.idle_timeout if self.stream else None
            timeout = httpx.Timeout(self.timeout, connect=min(self.connect_timeout, self.timeout), read=read)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
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

    def request_headers(self) -> tuple[dict[str, str], list[str]]:
        """The headers every request to this server carries (the key, read now) and the secrets they
        hold, for redacting (the batch client's requests use them too)."""
        return self._headers()

    def key_headers(self, key: str) -> dict[str, str]:
        """The headers that carry the API key (here ``Authorization: Bearer KEY``)."""
        return {"Authorization": f"Bearer {key}"}

    def _headers(self) -> tuple[dict[str, str], list[str]]:
        """The request headers and the secrets they hold (for :func:`redact`). The key is checked
        first (:func:`check_api_key`): a malformed one is a fatal error that does not show it."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.fixed_headers}
        secrets = list(self._url_secrets)
        if key:
            secrets.append(key)
            try:
                check_api_key(key, f"${self.api_key_env}")
            except EvalignError as exc:
                raise BackendRequestError(redact(str(exc), secrets), fatal=True) from None
            headers.update(self.key_headers(key))
        elif self._url_auth:
            try:
                check_api_key(self._url_auth, "the credentials of --base-url")
            except EvalignError as exc:
                raise BackendRequestError(redact(str(exc), secrets), fatal=True) from None
            headers["Authorization"] = self._url_auth
        return headers, secrets

    async def _exchange(self, client: Any, body: dict[str, Any], headers: dict[str, str], limit: float,
                        key: list[str]) -> tuple[int, str, Any, dict[str, Any] | None]:
        """Send one request: ``(status, body text, response headers, merged stream or None)``.

        Without ``stream`` the whole request has ``limit`` seconds. With it, the answer must *start*
        within ``limit``; then it may take as long as it keeps sending (httpx's read timeout is the
        idle timeout; the deadline, when set, bounds it)."""
        if not self.stream:
            resp = await _within(client.post(self.url, json=body, headers=headers), limit)
            return resp.status_code, _body_text(resp), resp.headers, None
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        request = client.build_request("POST", self.url, json=body, headers=headers)
        resp = await _within(client.send(request, stream=True), limit)
        try:
            ctype = resp.headers.get("content-type", "")
            rest = self._deadline_left()
            if resp.status_code != 200 or "text/event-stream" not in ctype.lower():
                await _within(resp.aread(), rest)
                return resp.status_code, _body_text(resp), resp.headers, None
            return 200, "", resp.headers, await _within(self._read_events(resp, key), rest)
        finally:
            await resp.aclose()

    async def _read_events(self, resp: Any, key: list[str]) -> dict[str, Any]:
        """The chunks of a server-sent-events answer, merged (:func:`merge_stream`)."""
        chunks: list[dict[str, Any]] = []
        async for line in resp.aiter_lines():
            payload = sse_data(line)
            if payload is None or not payload:
                continue
            if payload == "[DONE]":
                break
            try:
                chunk = json.loads(payload)
            except json.JSONDecodeError as exc:
                raise _Retry(f"HTTP 200 but a streamed event is not JSON: {snippet(payload, key, 200)!r}") from exc
            if isinstance(chunk, dict) and chunk.get("error") is not None:
                raise _Retry(f"the server sent an error in the stream: {snippet(json.dumps(chunk['error']), key)}")
            chunks.append(chunk)
        return merge_stream(chunks)

    def _deadline_left(self) -> float | None:
        """Seconds left before the deadline (None when there is none)."""
        if self._deadline_at is None:
            return None
        return max(0.001, self._deadline_at - asyncio.get_running_loop().time())

    async def _attempt(self, client: Any, body: dict[str, Any], headers: dict[str, str], key: list[str]) -> dict:
        import httpx

        limit = self.timeout
        left = self._deadline_left()
        if left is not None:
            limit = min(limit, left)
        try:
            status, text, rheaders, streamed = await self._exchange(client, body, headers, limit, key)
        except httpx.ConnectTimeout as exc:
            raise _Retry(f"cannot connect (no connection within {self.connect_timeout:g} s)") from exc
        except httpx.ReadTimeout as exc:
            raise _Retry(f"abandoned: no byte from the server for {self.idle_timeout:g} s (--idle-timeout)",
                         abandoned=True) from exc
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            if self._deadline_at is not None and asyncio.get_running_loop().time() >= self._deadline_at:
                self._check_deadline(asyncio.get_running_loop())
            what = "an answer" if not self.stream else "the answer to start"
            raise _Retry(f"abandoned: timed out after {limit:g} s waiting for {what} (--timeout)",
                         abandoned=True) from exc
        except httpx.ConnectError as exc:
            raise _Retry(f"cannot connect ({type(exc).__name__}: {redact(str(exc), key)})") from exc
        except httpx.RequestError as exc:  # dropped connection, truncated body, bad encoding ...
            raise _Retry(f"connection failed ({type(exc).__name__}: {redact(str(exc), key)})") from exc
        except (ValueError, TypeError) as exc:  # httpx refusing a header value; never shows it raw
            raise BackendRequestError(f"POST {self.url}: request refused by the HTTP client "
                                      f"({type(exc).__name__}: {redact(str(exc), key)})", fatal=True) from None
        if streamed is not None:
            if not streamed["choices"]:
                raise _Retry("HTTP 200 but the stream ended without a choice")
            if any(c.get("finish_reason") is None for c in streamed["choices"]):
                raise _Retry(UNFINISHED_STREAM)
            return scrub(streamed, key) if key else streamed  # type: ignore[no-any-return]
        return self._read_json(status, text, rheaders, key)

    def _read_json(self, status: int, text: str, rheaders: Any, key: list[str]) -> dict[str, Any]:
        """A non-streamed answer: its JSON, or the retry / error its status and body call for."""
        ctype = rheaders.get("content-type", "")
        if status != 200:
            shown = snippet(text, key)
            if is_retryable_status(status):
                raise _Retry(f"HTTP {status}: {shown}", parse_retry_after(rheaders.get("retry-after")), status)
            hint = " (check the API key and its variable)" if status in (401, 403) else ""
            if status == 400 and "system" in text.lower() and self.system_prompt == "role":
                hint = " (the server may not accept a system message: try --system-prompt fold)"
            raise BackendRequestError(
                f"POST {self.url}: HTTP {status}{hint}: {shown}", status=status, fatal=status in FATAL_STATUSES
            )
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, ValueError) as exc:
            first = snippet(text, key, 200)
            if "html" in ctype.lower() or first.lstrip().startswith("<"):
                raise BackendRequestError(
                    f"POST {self.url}: HTTP 200 with a web page ({ctype or 'no content type'}), not the API's JSON "
                    f"(is --base-url the API root, e.g. http://host:8000/v1?); body starts: {first!r}",
                    status=status, fatal=True,
                ) from exc
            raise _Retry(f"HTTP 200 but the body is not JSON ({len(text)} characters); body starts: {first!r}") from exc
        problem = self.answer_problem(data)
        if problem:
            raise _Retry(f"HTTP 200 but {problem}; body starts: {snippet(text, key, 200)!r}")
        return scrub(data, key) if key else data  # type: ignore[no-any-return]

    def answer_problem(self, data: Any) -> str | None:
        """Why a 200 answer's JSON cannot be read (retried), or None: here, no ``choices``."""
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            return "the JSON has no 'choices'"
        return None

    def read_answer(self, data: dict[str, Any]) -> tuple[list[Choice], Usage]:
        """The choices (in index order) and the usage of one answer's JSON (ValueError: unusable)."""
        ordered = sorted((c for c in data["choices"] if isinstance(c, dict)),
                         key=lambda c: c.get("index", 0) if isinstance(c.get("index", 0), int) else 0)
        try:
            return [self.parse_choice(c) for c in ordered], read_openai_usage(data.get("usage"))
        except _Retry as exc:
            raise ValueError(exc.reason) from None

    async def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST with retries; returns (response JSON, number of retries).

        A 429 with ``Retry-After`` pauses *every* request of this backend until that time (requests
        already sent are not recalled), so a rate-limited server is not hammered by the other workers.
        """
        client, _ = self._ensure_client()
        loop = asyncio.get_running_loop()
        if self.deadline is not None and self._deadline_at is None:
            self._deadline_at = loop.time() + self.deadline
        retry = 0
        while True:
            pause = self._pause_until - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            self._check_deadline(loop)
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
            if last.abandoned:  # never silent: the server may still be computing the abandoned request
                self.abandoned += 1
                log.warning("re-sending a request to %s abandoned on a timeout (retry %d/%d; %s)%s", self.url,
                            retry + 1, self.policy.max_retries, last.reason,
                            "" if self.stream else "; the server may still be computing the abandoned one")
            else:
                log.info("retrying %s in %.2f s (retry %d/%d): %s", self.url, wait, retry + 1,
                         self.policy.max_retries, last.reason)
            retry += 1
            if self._deadline_at is not None:
                wait = min(wait, max(0.0, self._deadline_at - loop.time()))
            await asyncio.sleep(wait)

    def _check_deadline(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._deadline_at is not None and loop.time() >= self._deadline_at:
            raise BackendRequestError(
                f"POST {self.url}: the deadline of {self.deadline:g} s for all requests has passed "
                "(--deadline); finished calls are cached, run the same command again to go on",
                fatal=True,
            )

    async def server_format(self) -> tuple[str, str]:
        """The constraint format of the server and what told it (``GET /models`` once, when ``auto``)."""
        if self._format is None:
            self._format = await self._read_format()
        return self._format

    async def _read_format(self) -> tuple[str, str]:
        if "api.openai.com" in self.base_url:
            return "openai", "api.openai.com"
        client, _ = self._ensure_client()
        headers, _secrets = self._headers()
        try:
            resp = await _within(client.get(self.base_url + "/models", headers=headers), self.timeout)
            if resp.status_code != 200:
                return "openai", f"GET /models answered HTTP {resp.status_code}"
            return format_of(json.loads(_body_text(resp)), self.model)
        except Exception as exc:
            return "openai", f"GET /models failed ({type(exc).__name__})"

    async def check_constraint(self, constraint: Constraint) -> str | None:
        """None when the server's format (:meth:`server_format`) can send one of ``constraint``'s forms,
        else why not."""
        fmt, why = await self.server_format()
        if chosen_form(constraint, fmt) is not None:
            return None
        hint = "" if self.constraint_format != "auto" else " (--constraint-format llama.cpp or vllm if it does)"
        return (f"{self.base_url} (constraint format {fmt}: {why}) takes a {' or '.join(FORMAT_FORMS[fmt])} "
                f"constraint, not this {' / '.join(constraint.forms)} one{hint}")

    def stats(self) -> dict[str, int]:
        """The counters of :meth:`Backend.stats` plus ``abandoned`` (requests given up on a timeout and re-sent)."""
        return {**super().stats(), "abandoned": self.abandoned}

    async def generate(self, req: GenerationRequest) -> Generation:
        """Send ``req``; retry on transient failures; raise :class:`BackendError` when it fails for good.

        When ``req.n > 1`` and the server returns fewer choices (llama.cpp ignores ``n``), the rest are
        requested one by one (with ``seed + k`` when a seed is set).
        """
        if req.constraint is not None:
            await self.server_format()
        body = self.build_body(req)
        _, sem = self._ensure_client()
        try:
            return await self._generate(req, body, sem)
        except ConstraintRefused:
            raise
        except BackendRequestError as exc:
            if req.constraint is None or exc.status not in (400, 422, 501):
                raise
            await self._refused(req, exc, sem)
            raise

    async def _refused(self, req: GenerationRequest, exc: BackendRequestError, sem: asyncio.Semaphore) -> None:
        """A constrained request failed with ``exc``: sent again without the constraint, an answer
        means the server refused the constraint (:class:`ConstraintRefused`); else nothing."""
        try:
            async with sem:
                await self._post(self.build_body(replace(req, constraint=None)))
        except BackendRequestError:
            return
        fmt = self._format[0] if self._format else "llama.cpp"
        form = chosen_form(req.constraint, fmt) if req.constraint is not None else None
        raise ConstraintRefused(f"{self.base_url} refused the output constraint ({form} sent as a {fmt} "
                                f"server; the same request without it was answered): {exc}", status=exc.status)

    async def _generate(self, req: GenerationRequest, body: dict[str, Any], sem: asyncio.Semaphore) -> Generation:
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
                        got, used = self.read_answer(data)
                    except ValueError as exc:
                        raise BackendRequestError(f"POST {self.url}: unusable response: {exc}") from None
                    if not got:
                        raise BackendRequestError(f"POST {self.url}: response has no usable choice")
                    choices.extend(got[: req.n - len(choices)])
                    usage = usage + used
                    raws.append(data)
        except BackendRequestError as exc:
            self._count(usage, retries + max(0, exc.attempts - 1), failed=True)
            raise
        self._count(usage, retries)
        raw = raws[0] if len(raws) == 1 else {"responses": raws}
        model, fingerprint = answered_by(raw)
        return Generation.from_choices(choices, usage, retries=retries, raw=raw, model=model,
                                       system_fingerprint=fingerprint)


def _body_text(resp: Any) -> str:
    """The response body as text (undecodable bytes replaced)."""
    try:
        return str(resp.text)
    except (UnicodeDecodeError, LookupError):
        return resp.content.decode("utf-8", errors="replace")


async def _within(coro: Any, seconds: float) -> Any:
    """Await ``coro`` with a total time limit (``asyncio.timeout`` where available: no extra task)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await coro
    return await asyncio.wait_for(coro, seconds)  # pragma: no cover - Python 3.10


def prompt_cache_key(messages: list[dict[str, str]]) -> str | None:
    """OpenAI's ``prompt_cache_key`` of a chat: ``evalign-`` and 16 hex digits of the SHA-256 of its system
    message (a template and its rubric), so requests that share it are routed to the same cache; None
    without a system message."""
    system = "\n".join(m["content"] for m in messages if m.get("role") == "system")
    if not system:
        return None
    return "evalign-" + hashlib.sha256(system.encode("utf-8")).hexdigest()[:16]


def read_openai_usage(u: Any) -> Usage:
    """An OpenAI ``usage`` object as :class:`Usage` (``prompt_tokens_details.cached_tokens``: the tokens
    read from the prompt cache, part of ``prompt_tokens``); unreadable: zero usage."""
    if not isinstance(u, dict):
        return Usage()
    try:
        details = u.get("prompt_tokens_details")
        cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
        return Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0), cache_read_tokens=cached)
    except (TypeError, ValueError, AttributeError):
        return Usage()


def _logprob(value: Any, token: str, position: int) -> float:
    """A logprob the server sent, as a float; a value that is not a number (``null``, a text) makes the
    answer unusable: a :class:`_Retry` naming the token (the call fails with that reason, the run goes on)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _Retry(f"malformed logprobs: token {position} ({token!r}) has logprob {json.dumps(value)[:40]}, "
                 "not a number")


def _normalise_logprobs(
    lp: Any,
) -> tuple[list[str] | None, list[float] | None, list[dict[str, float]] | None]:
    """Read chat (``{"content": [{token, logprob, top_logprobs: [...]}]}``) or completions
    (``{"tokens", "token_logprobs", "top_logprobs": [{tok: lp}]}``) logprobs into
    (tokens, token_logprobs, top_logprobs per position). A missing logprob is NaN (completions: a
    ``null`` token logprob, as an echoed first token has); one that is not a number is a :class:`_Retry`
    (see :func:`_logprob`)."""
    if not isinstance(lp, dict):
        return None, None, None
    content = lp.get("content")
    if isinstance(content, list):
        tokens, lps, tops = [], [], []
        for entry in content:
            if not isinstance(entry, dict):
                continue
            tok = str(entry.get("token", ""))
            tokens.append(tok)
            lps.append(_logprob(entry["logprob"], tok, len(tokens) - 1) if "logprob" in entry else float("nan"))
            top: dict[str, float] = {}
            for alt in entry.get("top_logprobs") or []:
                if isinstance(alt, dict) and "token" in alt:
                    t = str(alt["token"])
                    v = _logprob(alt["logprob"], t, len(tokens) - 1) if "logprob" in alt else float("nan")
                    top[t] = max(top.get(t, float("-inf")), v)
            tops.append(top)
        return tokens, lps, tops
    if "tokens" in lp or "top_logprobs" in lp:
        tokens = [str(t) for t in lp.get("tokens") or []]
        lps = [float("nan") if v is None else _logprob(v, tokens[j] if j < len(tokens) else "?", j)
               for j, v in enumerate(lp.get("token_logprobs") or [])]
        tops = []
        for j, d in enumerate(lp.get("top_logprobs") or []):
            tops.append({str(k): _logprob(v, str(k), j) for k, v in d.items()} if isinstance(d, dict) else {})
        return tokens, lps, tops
    return None, None, None


register_backend("openai")(OpenAICompatibleBackend)
