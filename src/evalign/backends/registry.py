"""The backend registry: backends are built by name from one :class:`BackendOptions` object
(:func:`create_backend`, ``BACKENDS.create(name, options)``) or with their own keyword arguments
(:func:`make_backend`). Built-ins (``openai``, ``anthropic``, ``gemini``, ``hf``, ``multi``, ``reward``) are lazy placeholders, imported when
first asked for; plugins come from the ``evalign.backends`` entry points. A new backend is its module
(a :class:`Backend` subclass, with :meth:`Backend.from_options` where its constructor needs a mapping)
plus one ``BACKENDS.register(name, lazy="module:Class")`` line here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalign.backends.base import Backend, BackendOptions
from evalign.registry import Registry


def _build(cls: type[Backend], options: BackendOptions) -> Backend:
    return cls.from_options(options)


#: the backend registry (name -> Backend class)
BACKENDS: Registry[type[Backend]] = Registry("judge backend", base_cls=Backend, entry_point_group="evalign.backends",
                                             build=_build)
BACKENDS.register("openai", lazy="evalign.backends.openai:OpenAICompatibleBackend")
BACKENDS.register("hf", lazy="evalign.backends.hf:HFLocalBackend")
BACKENDS.register("multi", lazy="evalign.backends.multi:MultiEndpointBackend")
BACKENDS.register("reward", lazy="evalign.backends.reward:RewardModelBackend")
BACKENDS.register("anthropic", lazy="evalign.backends.anthropic_api:AnthropicBackend")
BACKENDS.register("gemini", lazy="evalign.backends.gemini_api:GeminiBackend")


def default_api_key_env(kind: str) -> str:
    """The environment variable the key of backend ``kind`` is read from when none is named:
    ``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` (``anthropic``), ``GEMINI_API_KEY`` (``gemini``)."""
    if kind not in BACKENDS:
        return "OPENAI_API_KEY"
    return str(getattr(backend_class(kind), "default_api_key_env", "") or "OPENAI_API_KEY")


def register_backend(name: str) -> Callable[[type[Backend]], type[Backend]]:
    """Class decorator: make a backend available to :func:`make_backend` under ``name``."""
    return BACKENDS.register(name)


def list_backends() -> list[str]:
    """Names accepted by :func:`make_backend`."""
    return BACKENDS.names()


def backend_class(kind: str) -> type[Backend]:
    """The backend class registered as ``kind``."""
    return BACKENDS.get(kind)


def create_backend(name: str, options: BackendOptions) -> Backend:
    """The backend ``name`` built from one options object (each backend takes what it needs)."""
    return BACKENDS.create(name, options)  # type: ignore[no-any-return]


def missing_options(name: str, options: BackendOptions) -> list[str]:
    """The options backend ``name`` requires (``required_options``) that ``options`` leaves unset."""
    return [o for o in backend_class(name).required_options if not getattr(options, o)]


def make_backend(kind: str = "openai", **kwargs: Any) -> Backend:
    """Create a backend by registry name (``"openai"`` or ``"hf"``) with its keyword arguments."""
    return backend_class(kind)(**kwargs)
