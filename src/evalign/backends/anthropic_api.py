"""The native Anthropic backend (``anthropic:MODEL[@URL]``): the Messages API, ``POST {base}/v1/messages``.

Built to Anthropic's published API reference:

* headers ``x-api-key: KEY`` (from ``$ANTHROPIC_API_KEY`` unless ``api_key_env`` names another variable)
  and ``anthropic-version: 2023-06-01``; the key is never logged, cached or written;
* the system prompt is the top-level ``system`` field (text blocks), the turns ``messages``;
  ``max_tokens`` is always sent; ``temperature`` (at most 1), or ``top_p`` alone when it is below 1 and
  the temperature is 1 (Anthropic's default; recent models refuse both together: a top_p below 1 with
  another temperature is dropped, and said once), ``stop_sequences``; no seed, no ``n`` (several samples are several requests), no
  logprobs (G-Eval falls back to the sampled grade and says why once);
* a JSON-schema constraint goes as ``output_config: {format: {type: json_schema, schema}}``, the
  keywords the API refuses (``minimum``, ``maximum``, ``pattern`` ...) moved into the field's
  description and ``additionalProperties: false`` on every object, as Anthropic's SDK does;
* prompt caching (``prompt_cache``: ``auto`` / ``5m`` / ``1h`` / ``off``): ``cache_control:
  {type: ephemeral[, ttl: 1h]}`` on the last block of the part requests share (the system prompt, and
  the few-shot turns before the last user turn);
* ``stop_reason`` read as evalign's finish reasons (:data:`STOP_REASONS`), ``usage`` as
  :class:`Usage` (``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` prompt tokens,
  the cache parts apart);
* 429, 529 (overloaded) and every 5xx are retried honouring ``retry-after``; another 4xx never is.

:func:`anthropic_body` and :func:`anthropic_answer` are pure (a batch path builds its request lines and
reads its results with them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from evalign.backends.base import OnDone
from evalign.backends.hosted import (
    HostedBackend,
    chat_of,
    context_key,
    move_keywords,
    shared_user_prefixes,
    split_system,
)
from evalign.backends.registry import register_backend
from evalign.backends.types import Choice, Generation, GenerationRequest, Message, Usage, fold_system
from evalign.errors import BackendError

#: the API version sent in ``anthropic-version``
ANTHROPIC_VERSION = "2023-06-01"
#: the API root of Anthropic's reference (``/v1/messages`` is appended)
ANTHROPIC_URL = "https://api.anthropic.com"
#: Anthropic's ``stop_reason`` -> evalign's finish reason
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                "refusal": "content_filter", "pause_turn": "pause_turn",
                "model_context_window_exceeded": "length"}
#: JSON-schema keywords Anthropic's structured output takes (the rest go into the description)
_KEPT = frozenset({"type", "enum", "const", "anyOf", "allOf", "title", "properties", "additionalProperties",
                   "required", "items", "$ref", "$defs", "definitions", "default"})
#: string formats Anthropic's structured output takes
_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"})


def _kept(kind: Any, key: str, value: Any) -> bool:
    if key == "format":
        return kind == "string" and value in _FORMATS
    if key == "minItems":
        return value in (0, 1)
    return key in _KEPT


def anthropic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as Anthropic's structured output takes it: refused keywords (``minimum``, ``maximum``,
    ``pattern``, ``minLength`` ...) moved into the field's description, ``oneOf`` read as ``anyOf``,
    ``additionalProperties: false`` on every object, ``$schema`` dropped."""
    moved = move_keywords(schema, _kept, drop=("$schema",))
    return _closed(moved)


def _closed(node: Any) -> Any:
    if isinstance(node, list):
        return [_closed(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {("anyOf" if k == "oneOf" else k): _closed(v) for k, v in node.items()}
    if out.get("type") == "object" or "properties" in out:
        out["additionalProperties"] = False
    return out


def _cached(text: str, cache: dict[str, str] | None) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cache is not None:
        block["cache_control"] = dict(cache)
    return [block]


def cache_control(prompt_cache: str) -> dict[str, str] | None:
    """The ``cache_control`` of ``prompt_cache`` (``auto`` / ``5m``: ephemeral, five minutes; ``1h``: one
    hour; ``off``: None)."""
    if prompt_cache == "off":
        return None
    return {"type": "ephemeral", "ttl": "1h"} if prompt_cache == "1h" else {"type": "ephemeral"}


def anthropic_body(req: GenerationRequest, *, model: str, system_prompt: str = "role",
                   prompt_cache: str = "auto", user_prefix: str = "") -> dict[str, Any]:
    """The Messages API body of ``req`` (see the module doc): ``system_prompt`` ``role`` (the top-level
    ``system``) or ``fold`` (into the first user turn); ``prompt_cache`` marks the shared prefix:
    the system prompt, the turns before the last user turn, and ``user_prefix`` (the start of the last
    user turn that the run's requests share, :func:`~evalign.backends.hosted.shared_user_prefixes`:
    a verbatim template's instructions, a simulated annotator's few-shot examples) as a text block of
    its own."""
    chat = chat_of(req)
    if system_prompt == "fold":
        chat = fold_system(chat)
    system, turns = split_system(chat)
    cache = cache_control(prompt_cache)
    body: dict[str, Any] = {"model": model, "max_tokens": req.max_tokens}
    if system:
        body["system"] = _cached(system, cache)
    body["messages"] = _turns(turns, cache, user_prefix)
    if req.top_p < 1.0 and req.temperature == 1.0:  # Anthropic's default temperature: the same sampling
        body["top_p"] = req.top_p
    else:  # recent models refuse temperature and top_p together: a top_p below 1 is dropped (said once)
        body["temperature"] = min(1.0, req.temperature)
    if req.stop:
        body["stop_sequences"] = list(req.stop)
    if req.constraint is not None and req.constraint.json_schema is not None:
        body["output_config"] = {"format": {"type": "json_schema",
                                            "schema": anthropic_schema(req.constraint.json_schema)}}
    return body


def _turns(turns: list[Message], cache: dict[str, str] | None, user_prefix: str = "") -> list[dict[str, Any]]:
    """The turns; with a cache, the turn before the last user turn (few-shot examples shared by every
    request) ends a cached prefix, and so does ``user_prefix`` at the start of the last user turn."""
    out: list[dict[str, Any]] = [{"role": "assistant" if m["role"] == "assistant" else "user",
                                  "content": m["content"]} for m in turns]
    last_user = max((i for i, m in enumerate(out) if m["role"] == "user"), default=-1)
    if cache is not None and last_user >= 1:
        shared = out[last_user - 1]
        shared["content"] = _cached(str(shared["content"]), cache)
    text = str(out[last_user]["content"]) if last_user >= 0 else ""
    if cache is not None and user_prefix and last_user == len(out) - 1 and text.startswith(user_prefix) \
            and len(text) > len(user_prefix):
        out[last_user]["content"] = [*_cached(user_prefix, cache), {"type": "text", "text": text[len(user_prefix):]}]
    return out


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def anthropic_usage(u: Any) -> Usage:
    """A Messages ``usage`` as :class:`Usage`: prompt tokens are ``input_tokens`` (after the last cache
    breakpoint) plus ``cache_creation_input_tokens`` (written) plus ``cache_read_input_tokens`` (read)."""
    if not isinstance(u, dict):
        return Usage()
    write, read = _int(u.get("cache_creation_input_tokens")), _int(u.get("cache_read_input_tokens"))
    return Usage(_int(u.get("input_tokens")) + write + read, _int(u.get("output_tokens")),
                 cache_read_tokens=read, cache_write_tokens=write)


def anthropic_problem(data: Any) -> str | None:
    """Why a 200 answer is not a Messages answer (None: it is one)."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        return "the JSON is not a message (no 'content' list)"
    return None


def anthropic_answer(data: dict[str, Any]) -> tuple[list[Choice], Usage]:
    """The one choice (its text blocks joined; ``stop_reason`` read by :data:`STOP_REASONS`) and the
    usage of a Messages answer; ValueError when it is none."""
    problem = anthropic_problem(data)
    if problem:
        raise ValueError(problem)
    text = "".join(str(b.get("text") or "") for b in data["content"] if isinstance(b, dict) and b.get("type") == "text")
    reason = data.get("stop_reason")
    finish = STOP_REASONS.get(str(reason), str(reason)) if reason else "unknown"
    return [Choice(text=text, finish_reason=finish)], anthropic_usage(data.get("usage"))


class AnthropicBackend(HostedBackend):
    """Anthropic's Messages API (see the module doc). ``prompt_cache``: ``auto`` / ``5m`` (five-minute
    cache), ``1h``, ``off``."""

    kind = "anthropic"
    default_url = ANTHROPIC_URL
    default_api_key_env = "ANTHROPIC_API_KEY"
    fixed_headers: ClassVar[dict[str, str]] = {"anthropic-version": ANTHROPIC_VERSION}

    @property
    def url(self) -> str:
        """``{base_url}/v1/messages``."""
        return self.base_url + "/v1/messages"

    def key_headers(self, key: str) -> dict[str, str]:
        """``x-api-key: KEY``."""
        return {"x-api-key": key}

    def build_body(self, req: GenerationRequest, n: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """The Messages body of ``req`` (:func:`anthropic_body`; one sample per request, no seed), the
        shared start of its last turn cached where its wave had one."""
        body = anthropic_body(req, model=self.model, system_prompt=self.system_prompt, prompt_cache=self.prompt_cache,
                              user_prefix=self._prefixes.get(context_key(req), ""))
        body.update(self.extra_body)
        return body

    def answer_problem(self, data: Any) -> str | None:
        """Why a 200 answer is not a Messages answer (:func:`anthropic_problem`)."""
        return anthropic_problem(data)

    def read_answer(self, data: dict[str, Any]) -> tuple[list[Choice], Usage]:
        """:func:`anthropic_answer`."""
        return anthropic_answer(data)

    async def generate_many(self, reqs: Sequence[GenerationRequest], on_done: OnDone | None = None, *,
                            raise_errors: bool = False) -> list[Generation | BackendError]:
        """:meth:`Backend.generate_many`, after reading what the wave's requests share (the start of
        their last turn, :func:`~evalign.backends.hosted.shared_user_prefixes`): a prefix found in an
        earlier wave is kept while the new requests start with it, so the cached blocks stay the same."""
        if self.prompt_cache != "off":
            for key, prefix in shared_user_prefixes(reqs).items():
                known = self._prefixes.get(key)
                if not (known and prefix.startswith(known)):
                    self._prefixes[key] = prefix
        return await super().generate_many(reqs, on_done, raise_errors=raise_errors)

    async def generate(self, req: GenerationRequest) -> Generation:
        """Send ``req`` (logprobs cannot be asked of Claude: said once, the answer comes without them)."""
        if req.logprobs:
            self.say_once("logprobs", "%s: Claude returns no logprobs; G-Eval falls back to the sampled grade "
                          "(--geval-fallback) and J.p_a / J.confidence stay empty", self.kind)
        if req.top_p < 1.0 and req.temperature != 1.0:
            self.say_once("top_p", "%s: top_p %g is not sent with temperature %g (recent Claude models refuse "
                          "both together)", self.kind, req.top_p, req.temperature)
        self.unsent(req)
        return await super().generate(req)


register_backend("anthropic")(AnthropicBackend)

__all__ = ["ANTHROPIC_URL", "ANTHROPIC_VERSION", "STOP_REASONS", "AnthropicBackend", "anthropic_answer",
           "anthropic_body", "anthropic_problem", "anthropic_schema", "anthropic_usage", "cache_control"]
