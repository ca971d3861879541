"""How much of a run's prompts a provider's prompt cache can reuse: the shared prefix of its requests
(:func:`shared_prefix_chars`, estimated in tokens) against the provider's minimum cacheable length
(:data:`CACHE_MINIMUMS`, by model family) — pure functions, read by the run summary.

A provider caches a prompt's prefix only from a minimum length on (shorter prefixes are sent at the
plain rate, and on Anthropic a cache write is not made). evalign's judges put what their requests
share first (the system message, the rubric, the instructions, the few-shot examples); verbatim
templates (Prometheus, MT-Bench, LLMBar) keep their published order, so their shared prefix can be
short: the summary says how long it is (estimated at :data:`CHARS_PER_TOKEN` characters a token) and
whether it reaches the minimum.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: characters per token of the estimate (English prose in the providers' BPE tokenizers)
CHARS_PER_TOKEN = 4.0
#: (backend kind, model glob, minimum cacheable prompt prefix in tokens), first match wins; from the
#: providers' prompt-caching pages (Anthropic: per model; OpenAI: 1,024 for every model that caches;
#: Gemini: implicit caching, per model)
CACHE_MINIMUMS: tuple[tuple[str, str, int], ...] = (
    ("anthropic", "claude-opus-4-5*", 4096),
    ("anthropic", "claude-opus-4-6*", 4096),
    ("anthropic", "claude-haiku-4-5*", 4096),
    ("anthropic", "claude-3-5-haiku*", 2048),
    ("anthropic", "claude-3-haiku*", 2048),
    ("anthropic", "claude-haiku-3*", 2048),
    ("anthropic", "claude-*", 1024),
    ("openai", "*", 1024),
    ("gemini", "gemini-2.5-flash*", 1024),
    ("gemini", "gemini-2.5-pro*", 4096),
    ("gemini", "gemini-3*pro*", 4096),
    ("gemini", "gemini-*flash*", 1024),
)


def cache_minimum(kind: str, model: str) -> int | None:
    """The minimum cacheable prefix (tokens) of ``model`` at provider ``kind``; None for a model the
    table does not know."""
    name = model.rsplit("/", 1)[-1].lower()
    return next((n for k, glob, n in CACHE_MINIMUMS if k == kind and fnmatch.fnmatchcase(name, glob)), None)


def _text(messages: Sequence[Mapping[str, Any]]) -> str:
    """A chat as the text a provider reads in order (each turn's role, then its content)."""
    return "".join(f"\x1e{m.get('role')}\x1f{m.get('content')}" for m in messages)


def shared_prefix_chars(chats: Iterable[Sequence[Mapping[str, Any]]]) -> int:
    """The length (characters, each turn's role name and a separator counted as the provider counts its
    turn markers) of the prefix every chat of ``chats`` shares, byte for byte, in the order the provider
    reads it (system, then the turns); 0 for no chat."""
    prefix: str | None = None
    for chat in chats:
        text = _text(chat)
        if prefix is None:
            prefix = text
            continue
        n = min(len(prefix), len(text))
        i = 0
        while i < n and prefix[i] == text[i]:
            i += 1
        prefix = prefix[:i]
        if not prefix:
            break
    return len(prefix or "")


def estimated_tokens(chars: int) -> int:
    """``chars`` characters in tokens, estimated (:data:`CHARS_PER_TOKEN`)."""
    return math.ceil(chars / CHARS_PER_TOKEN)


def caching_provider(identity: Mapping[str, Any]) -> str | None:
    """The provider whose prompt cache a backend of ``identity`` reaches (``anthropic``, ``gemini``, or
    ``openai`` at ``api.openai.com``), None for another server."""
    kind = str(identity.get("kind") or "")
    if kind in ("anthropic", "gemini"):
        return kind
    return "openai" if kind == "openai" and "api.openai.com" in str(identity.get("base_url") or "") else None


def prefix_report(chats: Iterable[Sequence[Mapping[str, Any]]], *, kind: str, model: str,
                  prompt_cache: str = "auto") -> dict[str, Any]:
    """What the run summary says of the prompt cache: ``mode`` (``prompt_cache``), the requests'
    ``shared_prefix_tokens`` (estimated), the provider's ``minimum`` (None: unknown model),
    ``reaches_minimum`` (None when unknown) and a ``note`` (None when the prefix is cached)."""
    chars = shared_prefix_chars(chats)
    tokens = estimated_tokens(chars)
    minimum = cache_minimum(kind, model)
    reaches = None if minimum is None else tokens >= minimum
    note = None
    if prompt_cache == "off":
        note = "prompt caching is off (--prompt-cache off)"
    elif minimum is None:
        note = (f"no known cache minimum for {kind} model {model!r} (1,024-4,096 tokens by model): see the "
                "provider's prompt-caching page")
    elif not reaches:
        note = (f"the shared prefix (~{tokens:,} tokens) is below {model}'s cache minimum ({minimum:,} tokens): "
                "its prompts are billed at the plain input rate")
    return {"mode": prompt_cache, "shared_prefix_tokens": tokens, "minimum": minimum, "reaches_minimum": reaches,
            "note": note}


__all__ = ["CACHE_MINIMUMS", "CHARS_PER_TOKEN", "cache_minimum", "caching_provider", "estimated_tokens", "prefix_report",
           "shared_prefix_chars"]
