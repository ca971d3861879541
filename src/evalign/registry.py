"""One small registry shared by metrics, judges, datasets and judge backends.

A :class:`Registry` maps names to objects (classes or factory functions). Built-in entries can be
declared lazily (``builtin_modules``: name -> module imported on first use) so ``import evalign``
stays light. Third-party packages reach evalign through Python entry points, without editing
evalign: a package declares, in its ``pyproject.toml``::

    [project.entry-points."evalign.metrics"]
    my_metric = "my_package.metrics:MyMetric"

    [project.entry-points."evalign.judges"]
    my_judge = "my_package.judges:MyJudge"

and, once installed, ``evalign score -m my_metric`` / ``evalign judge --mode my_judge`` find it. The
entry point's object is registered under the entry point's name (a module whose import registers
its own entries with the decorator works too). Entry points are read once, when a name is not
found or when all names are listed. A plugin that fails to import is an :class:`EvalignError`
naming the entry point.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib import metadata
from typing import Generic, TypeVar

from evalign.errors import EvalignError, unknown_name

T = TypeVar("T")

#: entry point groups read by evalign
ENTRY_POINT_GROUPS = ("evalign.metrics", "evalign.judges", "evalign.datasets", "evalign.backends")


class Registry(Generic[T]):
    """Named objects of one kind (``kind`` is used in messages: "metric", "judge", ...).

    ``builtin_modules``: name -> module defining (and registering) that entry, imported on first use.
    ``entry_point_group``: the Python entry point group of plugins (e.g. ``"evalign.metrics"``).
    ``aliases``: other names of entries (e.g. judge modes), resolved before lookup.
    """

    def __init__(
        self,
        kind: str,
        *,
        builtin_modules: Mapping[str, str] | None = None,
        entry_point_group: str | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.builtin_modules: Mapping[str, str] = builtin_modules if builtin_modules is not None else {}
        self.entry_point_group = entry_point_group
        self.aliases: dict[str, str] = dict(aliases or {})
        self._entries: dict[str, T] = {}
        self._plugins_loaded = False

    # -- registering -------------------------------------------------------------------------------
    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name`` (a later registration of the same name replaces it)."""
        self._entries[name] = obj
        return obj

    def register(self, name: str | None = None) -> Callable[[T], T]:
        """Decorator: register under ``name`` (default: the object's ``name`` attribute)."""

        def deco(obj: T) -> T:
            key = name if name is not None else getattr(obj, "name", None)
            if not isinstance(key, str) or not key:
                raise TypeError(f"a {self.kind} needs a name to be registered")
            return self.add(key, obj)

        return deco

    # -- lookup ------------------------------------------------------------------------------------
    def _resolve(self, name: str) -> str:
        return self.aliases.get(name, name)

    def _import_builtin(self, name: str) -> None:
        module = self.builtin_modules.get(name)
        if module is not None and name not in self._entries:
            importlib.import_module(module)

    def load_plugins(self) -> None:
        """Register the objects of this registry's entry point group (once)."""
        if self._plugins_loaded or self.entry_point_group is None:
            return
        self._plugins_loaded = True
        for ep in metadata.entry_points(group=self.entry_point_group):
            if ep.name in self._entries:
                continue
            try:
                obj = ep.load()
            except Exception as exc:  # a broken plugin: say which
                raise EvalignError(
                    f"the {self.kind} plugin '{ep.name}' ({ep.value}, entry point group "
                    f"'{self.entry_point_group}') failed to load: {type(exc).__name__}: {exc}"
                ) from exc
            if ep.name not in self._entries and not _is_module(obj):
                self._entries[ep.name] = obj

    def get(self, name: str) -> T:
        """The object registered as ``name`` (or an alias); unknown names get a "did you mean"."""
        key = self._resolve(name)
        self._import_builtin(key)
        if key not in self._entries:
            self.load_plugins()
        if key not in self._entries:
            known = set(self.names(load=False)) | set(self.aliases)
            raise unknown_name(self.kind, name, known)
        return self._entries[key]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.get(name)
        except EvalignError:
            return False
        return True

    def names(self, *, load: bool = True) -> list[str]:
        """Every registered name (built-in and plugin), sorted. ``load``: import the built-in modules
        (those failing on a missing optional dependency are left out) and read the entry points."""
        if load:
            for name in self.builtin_modules:
                try:
                    self._import_builtin(name)
                except ImportError:
                    continue
            self.load_plugins()
        return sorted(set(self._entries) | (set() if load else set(self.builtin_modules)))

    def items(self) -> Iterator[tuple[str, T]]:
        """``(name, object)`` of every loaded entry, sorted by name."""
        for name in self.names():
            if name in self._entries:
                yield name, self._entries[name]


def _is_module(obj: object) -> bool:
    import types

    return isinstance(obj, types.ModuleType)


__all__ = ["ENTRY_POINT_GROUPS", "Registry"]
