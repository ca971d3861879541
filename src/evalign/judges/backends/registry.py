"""The backend registry: :func:`make_backend` by name (``openai``, ``hf``, ``multi``; plugins from the
``evalign.backends`` entry points). Backends are imported when first asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalign.judges.backends.base import Backend
from evalign.registry import Registry

#: the backend registry (name -> Backend class)
BACKENDS: Registry[type[Backend]] = Registry(
    "judge backend",
    builtin_modules={"openai": "evalign.judges.backends.openai", "hf": "evalign.judges.backends.hf",
                      "multi": "evalign.judges.backends.multi"},
    entry_point_group="evalign.backends",
)


def register_backend(name: str) -> Callable[[type[Backend]], type[Backend]]:
    """Class decorator: make a backend available to :func:`make_backend` under ``name``."""
    return BACKENDS.register(name)


def list_backends() -> list[str]:
    """Names accepted by :func:`make_backend`."""
    return BACKENDS.names()


def backend_class(kind: str) -> type[Backend]:
    """The backend class registered as ``kind``."""
    return BACKENDS.get(kind)


def make_backend(kind: str = "openai", **kwargs: Any) -> Backend:
    """Create a backend by registry name (``"openai"`` or ``"hf"``) with its keyword arguments."""
    return backend_class(kind)(**kwargs)
