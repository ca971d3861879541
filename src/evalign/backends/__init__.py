"""Model access (a package: ``types``, ``base``, ``openai``, ``hf``, ``reward``, ``multi``, ``registry``, ``spec``,
the HTTP client ``_http`` and model loading ``models``): send prompts to a language model and get text (and token
log-probabilities) back.

Two backends share one async interface (:class:`Backend`):

* :class:`OpenAICompatibleBackend` — any server speaking the OpenAI ``/v1/chat/completions`` or
  ``/v1/completions`` API (OpenAI, vLLM, llama.cpp, Ollama, TGI ...). Bounded concurrency, retries
  with exponential backoff and jitter on 429 / 5xx / timeouts / dropped connections / malformed
  bodies, honours ``Retry-After``. ``repeat_penalty`` passes through; an output :class:`Constraint` is sent in the server's own form
  (llama.cpp GBNF, vLLM ``structured_outputs``, OpenAI ``response_format``).
* :class:`AnthropicBackend` / :class:`GeminiBackend` — the native Messages and ``generateContent`` APIs
  (``x-api-key`` / ``x-goog-api-key``, JSON-schema output, prompt caching, Gemini's logprobs).
* :class:`MultiEndpointBackend` — one model on several OpenAI-compatible endpoints: per-endpoint
  concurrency, failing endpoints taken out and health-checked back in, failed requests retried on
  another endpoint; its identity does not name the endpoints.
* :class:`HFLocalBackend` — a local Hugging Face ``transformers`` causal LM, batched on CPU or GPU.
* :class:`RewardModelBackend` — a local reward model (a sequence classifier with one output): it
  scores conversations instead of generating (``output = "score"``; the reward judges read it).

A backend is named by a :class:`BackendSpec` (``KIND:MODEL[@URL][,K=V]``, a dict, or its fields) and
opened by :func:`open_backend` (``with open_backend(BackendSpec.parse("llama:smollm2-135m-instruct")) as
backend: ...`` starts llama.cpp's server for the block).

Usage::

    backend = create_backend("openai", BackendOptions(base_url="http://localhost:8080/v1", model="judge"))
    # or with the backend's own keyword arguments:
    backend = make_backend("openai", base_url="http://localhost:8080/v1", model="judge")
    req = GenerationRequest(messages=[{"role": "user", "content": "Rate this ..."}], max_tokens=64)
    gens = backend.run([req])                 # sync wrapper; or: await backend.generate_many([...])
    gens[0].text, gens[0].finish_reason, gens[0].top_logprobs

API keys are read from an environment variable (``api_key_env``) at request time. They are never
stored on the backend, never part of :meth:`Backend.identity` (used in cache keys and signatures),
of :attr:`Generation.raw`, of error messages, or of log records.

``import evalign.backends`` is light: httpx is imported when the first request is sent,
torch / transformers when an :class:`HFLocalBackend` is created.
"""

from __future__ import annotations

import importlib
from typing import Any

from evalign.backends._http import redact, split_url_credentials
from evalign.backends.base import (
    Backend,
    BackendOptions,
    BackendRequestError,
    ConstraintRefused,
    OnDone,
    returns_scores,
)
from evalign.backends.registry import (
    BACKENDS,
    backend_class,
    create_backend,
    list_backends,
    make_backend,
    missing_options,
    register_backend,
)
from evalign.backends.types import (
    Choice,
    Constraint,
    Generation,
    GenerationRequest,
    Message,
    Usage,
    fold_system,
)
from evalign.errors import BackendError

_LAZY = {
    "OpenAICompatibleBackend": "evalign.backends.openai",
    "AnthropicBackend": "evalign.backends.anthropic_api",
    "GeminiBackend": "evalign.backends.gemini_api",
    "HFLocalBackend": "evalign.backends.hf",
    "RewardModelBackend": "evalign.backends.reward",
    "MultiEndpointBackend": "evalign.backends.multi",
    "fallback_format": "evalign.backends.hf",
    "FALLBACK_ROLE_FORMAT": "evalign.backends.hf",
    "FALLBACK_GENERATION_PROMPT": "evalign.backends.hf",
    "BackendSpec": "evalign.backends.spec",
    "open_backend": "evalign.backends.spec",
}


def public_url(url: str) -> str:
    """``url`` without ``user:password@`` credentials: the form to print, log or store (the backend
    sends the credentials in the Authorization header)."""
    return split_url_credentials(url)[0]


def __getattr__(name: str) -> Any:
    """The backend classes and helpers, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BACKENDS",
    "AnthropicBackend",
    "Backend",
    "BackendError",
    "BackendOptions",
    "BackendRequestError",
    "BackendSpec",
    "Choice",
    "Constraint",
    "ConstraintRefused",
    "GeminiBackend",
    "Generation",
    "GenerationRequest",
    "HFLocalBackend",
    "Message",
    "MultiEndpointBackend",
    "OnDone",
    "OpenAICompatibleBackend",
    "RewardModelBackend",
    "Usage",
    "backend_class",
    "create_backend",
    "fallback_format",
    "fold_system",
    "list_backends",
    "make_backend",
    "missing_options",
    "open_backend",
    "public_url",
    "redact",
    "register_backend",
    "returns_scores",
]
