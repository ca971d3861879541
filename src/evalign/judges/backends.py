"""Deprecated alias of :mod:`evalign.backends` (the backends moved out of ``judges/``); kept for one release.

``import evalign.judges.backends`` warns (:class:`DeprecationWarning`) and gives the names of
:mod:`evalign.backends`; ``evalign.judges.backends.X`` (``openai``, ``hf``, ``registry`` ...) is the very
module ``evalign.backends.X``, not a copy, so classes, registries and ``isinstance`` checks are shared.
Plugins registered under the ``evalign.backends`` entry-point group load as before.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

import evalign.backends as _new

_OLD = __name__
_NEW = _new.__name__

warnings.warn(f"{_OLD} is deprecated and will be removed in the next release: import {_NEW}",
              DeprecationWarning, stacklevel=2)


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``evalign.judges.backends.X`` as the module ``evalign.backends.X`` itself."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(_NEW + spec.name[len(_OLD):])
        self._specs[module.__name__] = module.__spec__  # the import machinery overwrites it; put back below
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

__all__ = list(_new.__all__)


def __getattr__(name: str) -> Any:
    """The names of :mod:`evalign.backends` (and its submodules, once imported)."""
    return getattr(_new, name)
