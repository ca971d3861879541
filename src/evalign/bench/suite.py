"""The bench's suite, declared as data: which sets, which judge template per set, which categories.

The default suite is ``suite.yaml`` beside this module (``evalign bench --list`` prints it); a user's
file in the same format replaces it (``--suite FILE``). Every key is checked: an unknown key, a
missing field or a bad value is one :class:`~evalign.errors.InputError` naming the file, the line and
the field. Loading reads no dataset; :func:`set_kind` asks the catalogue whether a set is pairwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalign.datasets import CATALOGUE, parse_spec
from evalign.errors import InputError, unknown_name
from evalign.io.yaml_files import MarkedList, MarkedMap, load_marked
from evalign.signature import text_hash

#: the suite format's version
VERSION = 1
#: the bench's kinds of set: pairs judged A vs B, or responses graded one by one
KINDS = ("pairwise", "graded")
#: the correlations a graded set may be scored by
CORRELATIONS = ("kendall", "spearman", "pearson")
#: how a graded set's responses are compared
GROUPINGS = ("none", "item")
#: the stratum of a pair's human label (the annotators' majority)
LABEL = "label"
TOP_KEYS = ("version", "name", "categories", "sets")
CATEGORY_KEYS = ("key", "title")
SET_KEYS = ("key", "dataset", "labels", "category", "judge", "published", "stratify", "statistic", "grouping",
            "default")
JUDGE_KEYS = ("mode", "template", "rubric", "rubric_column", "rubric_map")
_KEY = re.compile(r"[a-z0-9][a-z0-9_.-]*\Z")


@dataclass(frozen=True)
class Recipe:
    """How a generative judge grades a set: its ``mode`` (``pairwise``, ``absolute`` or a judge's
    name), ``template``, ``rubric`` (a built-in name or an inline mapping), ``rubric_column`` and
    ``rubric_map`` (a rubric per row)."""

    mode: str
    template: str | None = None
    rubric: str | Mapping[str, Any] | None = None
    rubric_column: str | None = None
    rubric_map: str | None = None

    def options(self) -> dict[str, Any]:
        """The judge's constructor options this recipe sets."""
        out: dict[str, Any] = {}
        if self.template is not None:
            out["template"] = self.template
        if self.rubric is not None:
            out["rubric"] = dict(self.rubric) if isinstance(self.rubric, Mapping) else self.rubric
        if self.rubric_column is not None:
            out["rubric_column"] = self.rubric_column
        if self.rubric_map is not None:
            out["rubric_map"] = self.rubric_map
        return out


@dataclass(frozen=True)
class Category:
    """A category of sets: its ``key`` and the ``title`` tables show."""

    key: str
    title: str


@dataclass(frozen=True)
class SuiteSet:
    """One set of the suite (see ``suite.yaml`` for each field). ``published``: (shown name, column
    or glob pattern) pairs; ``line``: where the set starts in its file."""

    key: str
    dataset: str
    category: str
    recipe: Recipe
    labels: str | None = None
    published: tuple[tuple[str, str], ...] = ()
    stratify: tuple[str, ...] = ()
    statistic: str = "kendall"
    grouping: str = "none"
    default: bool = True
    line: int = 0

    def with_template(self, template: str) -> SuiteSet:
        """This set judged with another template (its mode and rubric kept)."""
        return replace(self, recipe=replace(self.recipe, template=template))


@dataclass(frozen=True)
class Suite:
    """The sets of a bench and their categories, as read from ``source`` (its text's SHA-256 in
    ``hash``: part of the bench's signature)."""

    name: str
    categories: tuple[Category, ...]
    sets: tuple[SuiteSet, ...]
    source: str
    hash: str
    version: int = VERSION

    def category(self, key: str) -> Category:
        """The category named ``key``."""
        for c in self.categories:
            if c.key == key:
                return c
        raise unknown_name("category", key, [c.key for c in self.categories], where=self.source)

    def get(self, key: str) -> SuiteSet:
        """The set named ``key`` (an unknown name is a usage error with a "did you mean")."""
        for s in self.sets:
            if s.key == key:
                return s
        raise unknown_name("bench set", key, [s.key for s in self.sets])

    def select(self, keys: Sequence[str] = ()) -> Suite:
        """The suite of the sets named (in the suite's order; ``all``: every set; none: the default
        sets); a category's key names all its sets."""
        if not keys:
            chosen = [s for s in self.sets if s.default]
        elif list(keys) == ["all"]:
            chosen = list(self.sets)
        else:
            cats = {c.key for c in self.categories}
            wanted: set[str] = set()
            for k in keys:
                if k in cats:
                    wanted |= {s.key for s in self.sets if s.category == k}
                else:
                    wanted.add(self.get(k).key)
            chosen = [s for s in self.sets if s.key in wanted]
        return replace(self, sets=tuple(chosen))

    def with_templates(self, overrides: Mapping[str, str]) -> Suite:
        """The suite with the templates of ``overrides`` (set key, category key or kind ->
        template); a set's own key wins over its category, its category over its kind."""
        out = []
        for s in self.sets:
            for k in (s.key, s.category, set_kind(s)):
                if k in overrides:
                    s = s.with_template(overrides[k])
                    break
            out.append(s)
        return replace(self, sets=tuple(out))


def default_suite_path() -> Path:
    """The suite that ships with evalign (``suite.yaml`` beside this module)."""
    return Path(__file__).with_name("suite.yaml")


def load_suite(path: str | Path | None = None) -> Suite:
    """The suite of ``path`` (default: :func:`default_suite_path`), every key checked."""
    p = Path(path) if path is not None else default_suite_path()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the suite ({e})", file=str(p)) from None
    return parse_suite(text, str(p))


def parse_suite(text: str, source: str) -> Suite:
    """The suite in the YAML ``text`` (``source`` names it in errors)."""
    doc = load_marked(text, source)
    if not isinstance(doc, MarkedMap):
        raise InputError("a suite is a mapping with version, name, categories and sets", file=source)
    _check_keys(doc, TOP_KEYS, source, "suite")
    if doc.get("version", VERSION) != VERSION:
        raise InputError(f"version must be {VERSION}, got {doc.get('version')!r}", file=source,
                         line=doc.lines.get("version"), field="version")
    cats = _categories(doc, source)
    raw = doc.get("sets")
    if not isinstance(raw, MarkedList) or not raw:
        raise InputError("sets must be a non-empty list", file=source, line=doc.lines.get("sets", doc.line), field="sets")
    sets = tuple(_set(entry, raw.lines[i], source, {c.key for c in cats}) for i, entry in enumerate(raw))
    seen: dict[str, int] = {}
    for s in sets:
        if s.key in seen:
            raise InputError(f"set '{s.key}' given twice (first on line {seen[s.key]})", file=source, line=s.line,
                             field="key")
        seen[s.key] = s.line
    name = str(doc.get("name") or Path(source).stem)
    return Suite(name=name, categories=cats, sets=sets, source=source, hash=text_hash(text)[:16])


def _check_keys(m: MarkedMap, allowed: Sequence[str], source: str, what: str) -> None:
    for k in m:
        if k not in allowed:
            raise InputError(str(unknown_name(f"{what} key", k, allowed)), file=source, line=m.lines.get(k), field=k)


def _categories(doc: MarkedMap, source: str) -> tuple[Category, ...]:
    raw = doc.get("categories")
    if not isinstance(raw, MarkedList) or not raw:
        raise InputError("categories must be a non-empty list", file=source, line=doc.lines.get("categories", doc.line),
                         field="categories")
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, MarkedMap):
            raise InputError("a category is a mapping {key, title}", file=source, line=raw.lines[i], field="categories")
        _check_keys(c, CATEGORY_KEYS, source, "category")
        key = _key(c, "key", source)
        out.append(Category(key, str(c.get("title") or key)))
    return tuple(out)


def _key(m: MarkedMap, name: str, source: str) -> str:
    v = m.get(name)
    if not isinstance(v, str) or not _KEY.match(v):
        raise InputError(f"must be a lower-case name (letters, digits, _ . -), got {v!r}", file=source,
                         line=m.lines.get(name, m.line), field=name)
    return v


def _text(m: MarkedMap, name: str, source: str, *, required: bool = False) -> str | None:
    v = m.get(name)
    if v is None:
        if required:
            raise InputError("missing", file=source, line=m.line, field=name)
        return None
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"must be a text, got {v!r}", file=source, line=m.lines.get(name), field=name)
    return v


def _choice(m: MarkedMap, name: str, choices: Sequence[str], default: str, source: str) -> str:
    v = m.get(name, default)
    if v not in choices:
        raise InputError(f"must be one of {', '.join(choices)}, got {v!r}", file=source, line=m.lines.get(name),
                         field=name)
    return str(v)


def _set(entry: Any, line: int, source: str, categories: set[str]) -> SuiteSet:
    if not isinstance(entry, MarkedMap):
        raise InputError("a set is a mapping (key, dataset, category, judge, ...)", file=source, line=line, field="sets")
    _check_keys(entry, SET_KEYS, source, "set")
    key = _key(entry, "key", source)
    dataset = _text(entry, "dataset", source, required=True)
    cat = _text(entry, "category", source, required=True)
    if cat not in categories:
        raise InputError(str(unknown_name("category", str(cat), categories)), file=source,
                         line=entry.lines.get("category"), field="category")
    default = entry.get("default", True)
    if not isinstance(default, bool):
        raise InputError(f"must be true or false, got {default!r}", file=source, line=entry.lines.get("default"),
                         field="default")
    return SuiteSet(
        key=key, dataset=str(dataset), category=str(cat), recipe=_recipe(entry, source),
        labels=_text(entry, "labels", source), published=_published(entry, source),
        stratify=_names(entry, "stratify", source), statistic=_choice(entry, "statistic", CORRELATIONS, "kendall", source),
        grouping=_choice(entry, "grouping", GROUPINGS, "none", source), default=default, line=line,
    )  # fmt: skip


def _recipe(entry: MarkedMap, source: str) -> Recipe:
    j = entry.get("judge")
    if not isinstance(j, MarkedMap):
        raise InputError("judge must be a mapping {mode, template, rubric, ...}", file=source,
                         line=entry.lines.get("judge", entry.line), field="judge")
    _check_keys(j, JUDGE_KEYS, source, "judge")
    rubric = j.get("rubric")
    if rubric is not None and not isinstance(rubric, str | MarkedMap):
        raise InputError(f"must be a rubric name or a rubric mapping, got {rubric!r}", file=source,
                         line=j.lines.get("rubric"), field="rubric")
    return Recipe(mode=str(_text(j, "mode", source, required=True)), template=_text(j, "template", source),
                  rubric=dict(rubric) if isinstance(rubric, MarkedMap) else rubric,
                  rubric_column=_text(j, "rubric_column", source), rubric_map=_text(j, "rubric_map", source))


def _names(entry: MarkedMap, name: str, source: str) -> tuple[str, ...]:
    v = entry.get(name, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise InputError(f"must be a list of column names, got {v!r}", file=source, line=entry.lines.get(name),
                         field=name)
    return tuple(v)


def _published(entry: MarkedMap, source: str) -> tuple[tuple[str, str], ...]:
    v = entry.get("published", [])
    if isinstance(v, Mapping):
        if not all(isinstance(k, str) and isinstance(c, str) and c for k, c in v.items()):
            raise InputError("must map shown names to columns", file=source, line=entry.lines.get("published"),
                             field="published")
        return tuple((str(k), str(c)) for k, c in v.items())
    return tuple((p, p) for p in _names(entry, "published", source))


def set_kind(s: SuiteSet) -> str:
    """``pairwise`` when the set's labels are preferences between two responses, else ``graded``
    (from the dataset's catalogue entry: its label set's kind, or the tables it has)."""
    name, _ = parse_spec(s.dataset)
    entry = CATALOGUE.get(name)
    if entry is None:
        return "pairwise"
    if s.labels is not None and s.labels in entry.label_sets:
        return "pairwise" if entry.label_sets[s.labels].kind == "pairs" else "graded"
    if entry.label_sets:
        return "pairwise" if next(iter(entry.label_sets.values())).kind == "pairs" else "graded"
    return "pairwise" if "pairs" in entry.tables else "graded"


__all__ = ["CORRELATIONS", "GROUPINGS", "KINDS", "LABEL", "Category", "Recipe", "Suite", "SuiteSet",
           "default_suite_path", "load_suite", "parse_suite", "set_kind"]
