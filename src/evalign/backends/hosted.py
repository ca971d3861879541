"""What the native hosted backends (``anthropic``, ``gemini``) share: :class:`HostedBackend` (the HTTP
client of :class:`~evalign.backends.openai.OpenAICompatibleBackend` — retries on 429 / 5xx honouring
``Retry-After``, a 4xx never retried, deadlines, keys redacted everywhere — with the provider's own
URL, key header, request body and answer), and pure helpers of the request bodies: the system text
and turns of a chat (:func:`split_system`) and the JSON-schema keywords a provider refuses moved into
the field's description (:func:`move_keywords`, as the providers' own SDKs do).

A subclass gives :attr:`HostedBackend.default_url`, :meth:`HostedBackend.url`, ``fixed_headers``,
:meth:`HostedBackend.key_headers`, :meth:`HostedBackend.build_body` (from the pure body function of
its module), :meth:`HostedBackend.answer_problem` and :meth:`HostedBackend.read_answer` (from the
pure answer function); a batch path builds its lines and reads its results with the same pure
functions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from evalign.backends.base import Backend, BackendOptions, BackendRequestError
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.types import Constraint, GenerationRequest, Message
from evalign.errors import UsageError

log = logging.getLogger(__name__)

#: the options of :class:`BackendOptions` a hosted backend takes
HOSTED_OPTIONS = ("concurrency", "timeout", "connect_timeout", "max_retries", "deadline", "system_prompt",
                  "idle_timeout", "prompt_cache", "service_tier")


def split_system(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    """``(system text, the other turns)`` of a chat: every system message's text joined by a blank line
    (a provider that takes the system prompt apart from the turns), the turns in order."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    return system, [dict(m) for m in messages if m["role"] != "system"]


def chat_of(req: GenerationRequest) -> list[Message]:
    """The request's messages; a raw ``prompt`` is one user turn."""
    return list(req.messages) if req.messages is not None else [{"role": "user", "content": req.prompt or ""}]


def _context_key(chat: Sequence[Message]) -> str:
    """What requests of one template share before their last turn (system text and earlier turns)."""
    return json.dumps([[m["role"], m["content"]] for m in chat[:-1]], ensure_ascii=False)


def shared_user_prefixes(reqs: Iterable[GenerationRequest]) -> dict[str, str]:
    """For each group of requests with the same turns before the last one (a template and its rubric):
    the start of the last turn that every request of the group shares, cut after its last line break (a
    template's section boundary, so that the cut does not move with the items), when the group holds
    two requests or more and the start is not empty. The key is :func:`context_key` of a request."""
    groups: dict[str, list[str]] = {}
    for req in reqs:
        chat = chat_of(req)
        groups.setdefault(_context_key(chat), []).append(chat[-1]["content"])
    out: dict[str, str] = {}
    for key, texts in groups.items():
        if len(texts) < 2:
            continue
        first, last = min(texts), max(texts)  # their common start is every text's
        n = next((i for i, (x, y) in enumerate(zip(first, last, strict=False)) if x != y),
                 min(len(first), len(last)))
        prefix = first[:n]
        cut = prefix.rfind("\n")
        if cut > 0:
            out[key] = prefix[: cut + 1]
    return out


def context_key(req: GenerationRequest) -> str:
    """The key of ``req``'s group in :func:`shared_user_prefixes`."""
    return _context_key(chat_of(req))


def move_keywords(schema: Any, keep: Callable[[Any, str, Any], bool], *, drop: Iterable[str] = ()) -> Any:
    """``schema`` (a JSON schema, recursively: ``properties``, ``items``, ``anyOf``, ``$defs`` ...) with
    every keyword that ``keep(type, keyword, value)`` refuses moved into the field's ``description`` as
    ``{keyword: value, ...}`` (after the description it had, a blank line between), so the model still
    reads what it cannot be held to; keywords in ``drop`` are removed without a word (e.g. ``$schema``)."""
    if not isinstance(schema, Mapping):
        return schema
    dropped = set(drop)
    out: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    kind = schema.get("type")
    for key, value in schema.items():
        if key in dropped:
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, Mapping):
            out[key] = {k: move_keywords(v, keep, drop=dropped) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, Mapping):
            out[key] = move_keywords(value, keep, drop=dropped)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            out[key] = [move_keywords(v, keep, drop=dropped) for v in value]
        elif key == "description" or keep(kind, key, value):
            out[key] = value
        else:
            moved[key] = value
    if moved:
        said = "{" + ", ".join(f"{k}: {v}" for k, v in moved.items()) + "}"
        before = out.get("description")
        out["description"] = f"{before}\n\n{said}" if before else said
    return out


class HostedBackend(OpenAICompatibleBackend):
    """The client of a hosted provider's native API (see the module doc). ``base_url`` is the API
    root as the provider's reference gives it (default :attr:`default_url`); ``api_key_env`` the NAME
    of the variable holding the key (default :attr:`default_api_key_env`). Streaming, llama.cpp / vLLM
    fields and ``logit_bias`` are not sent; an output constraint goes as the provider's JSON-schema
    output (a regex or a grammar cannot be sent)."""

    required_options = ("model",)
    #: the provider's API root
    default_url: ClassVar[str] = ""
    #: the variable the key is read from when none is named
    default_api_key_env: ClassVar[str] = ""
    takes_service_tier: ClassVar[bool] = False

    @classmethod
    def from_options(cls, options: BackendOptions) -> Backend:
        """The client of ``options.base_url`` (default: the provider's) for ``options.model``."""
        urls = options.base_urls
        if len(urls) > 1:
            raise ValueError(f"the {cls.kind} backend takes one base URL, got {len(urls)}")
        if not options.model:
            raise ValueError(f"the {cls.kind} backend needs a model")
        own = options.given(*HOSTED_OPTIONS)
        return cls(**{"base_url": urls[0] if urls else cls.default_url, "model": options.model,
                      "api_key_env": options.api_key_env, **own, **options.extra})

    def __init__(self, base_url: str | None = None, model: str = "", *, api_key_env: str | None = None,
                 **kwargs: Any) -> None:
        if not model:
            raise ValueError(f"the {self.kind} backend needs a model")
        if kwargs.get("service_tier"):
            raise UsageError(f"service_tier: the {self.kind} backend takes no service tier (flex is OpenAI's); "
                             "use its batch API for the batch price")
        kwargs.pop("stream", None)  # the providers' event streams are not read: one answer per request
        for fixed in ("constraint_format", "repetition_penalty_fields", "endpoint"):  # the provider's own
            kwargs.pop(fixed, None)
        super().__init__(base_url or self.default_url, model,
                         api_key_env=api_key_env if api_key_env is not None else self.default_api_key_env,
                         repetition_penalty_fields=(), constraint_format="openai", **kwargs)
        self._format = (self.kind, "the provider's native JSON-schema output")
        self._said: set[str] = set()
        #: the shared start of the last turn, per group of requests (:func:`shared_user_prefixes`)
        self._prefixes: dict[str, str] = {}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
                f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency})")

    def identity(self) -> dict[str, Any]:
        """``{"kind", "base_url", "model", "system_prompt"}`` plus ``extra_body`` when set (never the key)."""
        ident: dict[str, Any] = {"kind": self.kind, "base_url": self.server_name or self.base_url,
                                 "model": self.model, "system_prompt": self.system_prompt}
        if self.extra_body:
            ident["extra_body"] = self.extra_body
        return ident

    @property
    def official(self) -> bool:
        """Never OpenAI's own API."""
        return False

    async def server_format(self) -> tuple[str, str]:
        """The provider's own JSON-schema output (no ``GET /models``)."""
        return self._format or (self.kind, "native")

    async def check_constraint(self, constraint: Constraint) -> str | None:
        """None for a JSON-schema constraint; a regex or a grammar cannot be sent."""
        if constraint.json_schema is not None:
            return None
        return (f"the {self.kind} backend takes a json_schema constraint (the provider's structured output), "
                f"not this {' / '.join(constraint.forms)} one")

    def _headers(self) -> tuple[dict[str, str], list[str]]:
        """The request headers (:meth:`OpenAICompatibleBackend._headers`); at the provider's own URL a key
        is required: without one, a fatal error names its variable before any request."""
        headers, secrets = super()._headers()
        if not secrets and self.base_url == self.default_url.rstrip("/"):
            where = f"${self.api_key_env}" if self.api_key_env else "no variable (--api-key-env '')"
            raise BackendRequestError(f"{self.url}: the {self.kind} API needs a key, and {where} is not set "
                                      "(set it, or name the variable that holds it with --api-key-env)", fatal=True)
        return headers, secrets

    def say_once(self, what: str, message: str, *args: Any) -> None:
        """Log ``message`` as a warning the first time ``what`` happens on this backend."""
        if what not in self._said:
            self._said.add(what)
            log.warning(message, *args)

    def unsent(self, req: GenerationRequest) -> None:
        """Say once each setting of ``req`` the provider cannot take (sent without it)."""
        if req.logit_bias:
            self.say_once("logit_bias", "%s: the provider takes no logit_bias; requests are sent without it",
                          self.kind)
        if req.repetition_penalty is not None and req.repetition_penalty != 1.0:
            self.say_once("repetition_penalty", "%s: the provider takes no repetition penalty; requests are "
                          "sent without it", self.kind)


__all__ = ["HOSTED_OPTIONS", "HostedBackend", "chat_of", "context_key", "move_keywords", "shared_user_prefixes",
           "split_system"]
