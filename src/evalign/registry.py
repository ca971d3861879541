"""One registry pattern for every kind of named object: metrics, judges, datasets, judge backends,
templates and rubrics (in the style of lm-evaluation-harness' ``lm_eval/api/registry.py``).

A :class:`Registry` maps names to objects (classes, factory functions, data files). An entry is added

* with the decorator, where the object is defined::

      @METRICS.register("bleu")          # or register_metric / register_judge / register_backend ...
      class Bleu(Metric): ...

* or as a *lazy placeholder* ``"module:Object"``, so that ``import evalign`` stays light and torch is
  imported only when a model metric is used::

      METRICS.register("bleurt", lazy="evalign.metrics.bleurt:Bleurt")   # imported on first get()

  (a placeholder without ``:Object`` names a module whose import registers the entry itself).

Registering is strict: a name already registered with a different object raises ``ValueError``; a
class that does not inherit from the registry's ``base_cls`` raises ``TypeError``. A module that
registers the very object its placeholder names (the decorator above its class) replaces the
placeholder. Other names of an entry are aliases (``JUDGES.alias("pairwise", "prometheus_relative")``).

Third-party packages reach evalign through Python entry points, without editing evalign: a package
declares, in its ``pyproject.toml``::

    [project.entry-points."evalign.metrics"]
    my_metric = "my_package.metrics:MyMetric"

    [project.entry-points."evalign.judges"]
    my_judge = "my_package.judges:MyJudge"

(groups: :data:`ENTRY_POINT_GROUPS`) and, once installed, ``evalign score -m my_metric`` /
``evalign judge --mode my_judge`` find it. The entry point's object is registered under the entry
point's name (a module whose import registers its own entries with the decorator works too). Entry
points are read once, when a name is not found or when all names are listed. A plugin that fails to
import is an :class:`EvalignError` naming the entry point.

Every registry of evalign is reachable by its kind (:data:`KINDS`): ``registry("backend")``, and
``create("backend", "openai", options)`` builds an object through the registry's ``build`` hook.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Generic, TypeVar

from evalign.errors import EvalignError, unknown_name

T = TypeVar("T")

#: entry point groups read by evalign (one per kind)
ENTRY_POINT_GROUPS = ("evalign.metrics", "evalign.judges", "evalign.datasets", "evalign.backends",
                      "evalign.templates", "evalign.rubrics", "evalign.probes")

#: where the registry of each kind lives (``module:attribute``), imported on first use
KINDS: dict[str, str] = {
    "metric": "evalign.metrics.base:METRICS",
    "judge": "evalign.judges.base:JUDGES",
    "dataset": "evalign.datasets.base:DATASETS",
    "backend": "evalign.backends.registry:BACKENDS",
    "template": "evalign.judges.prompts:TEMPLATES",
    "rubric": "evalign.judges.prompts:RUBRICS",
    "probe": "evalign.judges.perturb:PROBES",
}


@dataclass(frozen=True)
class Lazy:
    """A placeholder for an entry not imported yet: ``"module:Object"`` (or ``"module"``, whose import
    registers the entry itself)."""

    target: str

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def attribute(self) -> str:
        return self.target.partition(":")[2]

    def stands_for(self, obj: object) -> bool:
        """Whether ``obj`` is the object this placeholder stands for."""
        if not self.attribute:
            return getattr(obj, "__module__", None) == self.module
        return (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)) == (self.module, self.attribute)

    def load(self) -> Any:
        """Import the module (and return its object, when the placeholder names one)."""
        module = importlib.import_module(self.module)
        return getattr(module, self.attribute) if self.attribute else None


class Registry(Generic[T]):
    """Named objects of one kind (``kind`` is used in messages: "metric", "judge", ...).

    ``base_cls``: classes registered must inherit from it (objects that are not classes are not checked).
    ``lazy``: name -> ``"module:Object"`` placeholders, imported on first use.
    ``builtin_modules``: name -> module defining (and registering) that entry (a placeholder without object).
    ``entry_point_group``: the Python entry point group of plugins (e.g. ``"evalign.metrics"``).
    ``aliases``: other names of entries (e.g. judge modes), resolved before lookup.
    ``build``: how :meth:`create` makes an object from an entry (default: call it).
    ``discover``: called once before the first lookup, to register entries found elsewhere (e.g. the
    built-in data files of templates).
    """

    def __init__(
        self,
        kind: str,
        *,
        base_cls: type | tuple[type, ...] | None = None,
        lazy: Mapping[str, str] | None = None,
        builtin_modules: Mapping[str, str] | None = None,
        entry_point_group: str | None = None,
        aliases: Mapping[str, str] | None = None,
        build: Callable[..., Any] | None = None,
        discover: Callable[[Registry[T]], None] | None = None,
    ) -> None:
        self.kind = kind
        self.base_cls = base_cls
        self.entry_point_group = entry_point_group
        self.aliases: dict[str, str] = {}
        self._entries: dict[str, Any] = {}
        self._build = build
        self._discover = discover
        self._plugins_loaded = False
        for name, target in {**dict(builtin_modules or {}), **dict(lazy or {})}.items():
            self.register(name, lazy=target)
        for alias, name in (aliases or {}).items():
            self.alias(alias, name)

    # -- registering -------------------------------------------------------------------------------
    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``. ``ValueError`` when ``name`` already holds another object
        (a placeholder naming ``obj`` is replaced); ``TypeError`` when a class is not a ``base_cls``."""
        self._check_type(obj)
        current = self._entries.get(name)
        if current is not None and current is not obj and not (isinstance(current, Lazy) and current.stands_for(obj)):
            raise ValueError(f"{self.kind} '{name}' is already registered ({_describe(current)}); "
                             f"cannot register {_describe(obj)} under the same name")
        self._entries[name] = obj
        return obj

    def register(
        self, name: str | None = None, *, lazy: str | None = None, aliases: tuple[str, ...] = ()
    ) -> Callable[[T], T]:
        """Decorator: register under ``name`` (default: the object's ``name`` attribute). With
        ``lazy="module:Object"``: register a placeholder now (no decorator is needed then).
        ``aliases``: other names of the entry (needs ``name``)."""
        for alias in aliases:
            if not name:
                raise TypeError(f"aliases of a {self.kind} need its name")
            self.alias(alias, name)
        if lazy is not None:
            if not name:
                raise TypeError(f"a lazy {self.kind} needs a name")
            placeholder, current = Lazy(lazy), self._entries.get(name)
            if current is None:
                self._entries[name] = placeholder
            elif current != placeholder and not placeholder.stands_for(current):  # else: already there, or loaded
                raise ValueError(f"{self.kind} '{name}' is already registered ({_describe(current)}); "
                                 f"cannot register {lazy!r} under the same name")
            return lambda obj: obj

        def deco(obj: T) -> T:
            key = name if name is not None else getattr(obj, "name", None)
            if not isinstance(key, str) or not key:
                raise TypeError(f"a {self.kind} needs a name to be registered")
            return self.add(key, obj)

        return deco

    def alias(self, alias: str, name: str) -> None:
        """Make ``alias`` another name of the entry ``name``."""
        if self.aliases.get(alias, name) != name:
            raise ValueError(f"{self.kind} alias '{alias}' already stands for '{self.aliases[alias]}'")
        self.aliases[alias] = name

    def _check_type(self, obj: object) -> None:
        if self.base_cls is not None and isinstance(obj, type) and not issubclass(obj, self.base_cls):
            raise TypeError(f"a {self.kind} must inherit from {_describe(self.base_cls)}; got {_describe(obj)}")

    # -- lookup ------------------------------------------------------------------------------------
    def _resolve(self, name: str) -> str:
        """The entry ``name`` stands for: itself, an alias, or the one entry or alias spelled the same
        but for case (``chrF`` -> ``chrf``)."""
        key = self.aliases.get(name, name)
        if key in self._entries or not isinstance(name, str):
            return key
        folded = [k for k in (*self._entries, *self.aliases) if k.lower() == name.lower()]
        if len(folded) == 1:
            return self.aliases.get(folded[0], folded[0])
        return key

    def _materialise(self, name: str) -> None:
        """Import a placeholder's module; its object replaces the placeholder."""
        entry = self._entries.get(name)
        if not isinstance(entry, Lazy):
            return
        obj = entry.load()  # the module's decorators may register the entry themselves
        if not isinstance(self._entries.get(name), Lazy):
            return
        if not entry.attribute:
            raise EvalignError(f"the module {entry.module} does not register the {self.kind} '{name}'")
        self._check_type(obj)
        self._entries[name] = obj

    def _discover_once(self) -> None:
        if self._discover is not None:
            discover, self._discover = self._discover, None
            discover(self)

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
            if ep.name not in self._entries and not isinstance(obj, types.ModuleType):
                self.add(ep.name, obj)

    def get(self, name: str) -> T:
        """The object registered as ``name`` (or an alias); unknown names get a "did you mean"."""
        found = self.find(name)
        if found is None:
            known = set(self.names(load=False)) | set(self.aliases)
            raise unknown_name(self.kind, name, known)
        return found

    def find(self, name: str) -> T | None:
        """The object registered as ``name`` (or an alias), or None when no such name is registered
        (no error is built: a cheap membership probe for callers that try many names)."""
        self._discover_once()
        key = self._resolve(name)
        if key not in self._entries:
            self.load_plugins()
        if key not in self._entries:
            return None
        self._materialise(key)
        return self._entries[key]  # type: ignore[no-any-return]

    def create(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """An object made from the entry ``name``: ``build(entry, *args, **kwargs)`` when the registry
        has a ``build`` hook (e.g. backends from one options object), else ``entry(*args, **kwargs)``."""
        entry = self.get(name)
        if self._build is not None:
            return self._build(entry, *args, **kwargs)
        return entry(*args, **kwargs)  # type: ignore[operator]

    def is_loaded(self, name: str) -> bool:
        """Whether ``name`` is registered and no longer a placeholder (its module was imported)."""
        key = self._resolve(name)
        return key in self._entries and not isinstance(self._entries[key], Lazy)

    def lazy_module(self, name: str) -> str:
        """The module a placeholder (or a loaded entry) ``name`` comes from, without importing it."""
        entry = self._entries[self._resolve(name)]
        return entry.module if isinstance(entry, Lazy) else str(getattr(entry, "__module__", ""))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            return self.find(name) is not None
        except EvalignError:
            return False

    def names(self, *, load: bool = True) -> list[str]:
        """Every registered name (built-in and plugin), sorted. ``load``: import the placeholders'
        modules (those failing on a missing optional dependency are left out) and read the entry
        points; else the names known without importing anything."""
        self._discover_once()
        if not load:
            return sorted(self._entries)
        for name in list(self._entries):
            try:
                self._materialise(name)
            except ImportError:
                continue
        self.load_plugins()
        return sorted(n for n, obj in self._entries.items() if not isinstance(obj, Lazy))

    def items(self) -> Iterator[tuple[str, T]]:
        """``(name, object)`` of every loaded entry, sorted by name."""
        for name in self.names():
            yield name, self._entries[name]


def _describe(obj: object) -> str:
    if isinstance(obj, Lazy):
        return f"lazy {obj.target!r}"
    if isinstance(obj, tuple):
        return " or ".join(_describe(o) for o in obj)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else repr(obj)


def registry(kind: str) -> Registry[Any]:
    """The registry of ``kind`` (a key of :data:`KINDS`: metric, judge, dataset, backend, template, rubric)."""
    if kind not in KINDS:
        raise unknown_name("registry kind", kind, KINDS)
    module, _, attribute = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


def create(kind: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """``registry(kind).create(name, ...)``, e.g. ``create("backend", "openai", BackendOptions(...))``."""
    return registry(kind).create(name, *args, **kwargs)


__all__ = ["ENTRY_POINT_GROUPS", "KINDS", "Lazy", "Registry", "create", "registry"]
