"""Human-judgment datasets mapped into evalign's tables.

Each adapter returns a :class:`HumanDataset`: an item table (one row per item x system, see
:mod:`evalign.io`) and/or a *pair table* for A-vs-B human preferences, plus what is known at
system level, with the licence and citation of the source.

Pair table columns: ``id``, ``instruction``, ``input``, ``reference`` (may be None),
``system_a``, ``system_b``, ``response_a``, ``response_b``, one column per annotator
``pref_1 .. pref_k`` coded **+1 = A better, -1 = B better, 0 = tie** (NaN = no label), and
optional ``task``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.registry import Registry

#: who made a dataset's labels (:attr:`DatasetEntry.annotator_kind`) and the Alt-Test's advised
#: epsilon for them (Calderon et al. 2025: experts 0.2, skilled annotators 0.15, crowd workers 0.1)
ANNOTATOR_KINDS: dict[str, float] = {"experts": 0.2, "skilled": 0.15, "crowd": 0.1}


@dataclass
class HumanDataset:
    """A public dataset with human judgments, in evalign's tables."""

    name: str
    description: str
    licence: str
    citation: str
    #: item table (one row per item x system) or None
    items: pd.DataFrame | None = None
    #: numeric human rating columns of ``items``
    human_columns: list[str] = field(default_factory=list)
    #: whether a higher human rating is better
    human_higher_is_better: bool = True
    #: pair table (see module doc) or None
    pairs: pd.DataFrame | None = None
    #: annotator columns of ``pairs``
    pref_columns: list[str] = field(default_factory=list)
    #: system-level human scores or ranks, by system name
    system_human: dict[str, float] | None = None
    #: whether a higher system-level human value is better (False for ranks)
    system_human_higher_is_better: bool = True
    #: single-annotator rating columns of ``items`` (the human ceiling of a trust table)
    annotator_columns: list[str] = field(default_factory=list)
    #: who made the labels: ``human``, or ``model`` for model grades (e.g. GPT-4 in Prometheus' sets)
    label_source: str = "human"
    #: the labels' name in titles ("humans", "GPT-4 grades")
    label_name: str = "humans"
    #: judge verdict or score columns and published metric columns shipped with the set (e.g.
    #: upstream judges' verdicts): what ``evalign meta`` ranks when no column is named
    judge_columns: list[str] = field(default_factory=list)
    #: per item label column, the shipped columns that rate it (a set with several aspects: the
    #: judge columns of one aspect are ranked against that aspect's labels); a label column not
    #: listed gets all of :attr:`judge_columns`
    label_columns: dict[str, list[str]] = field(default_factory=dict)
    #: per item label column, its single-annotator columns (sets with several label columns);
    #: a label column not listed gets :attr:`annotator_columns` when it is one of :attr:`human_columns`
    label_annotators: dict[str, list[str]] = field(default_factory=dict)
    #: shipped judge or metric columns where a lower score is better (distances, error rates)
    lower_is_better: list[str] = field(default_factory=list)
    #: how item-level statistics group the items by default: ``item`` (compare the systems' outputs
    #: for the same input) or ``none`` (every output against every other: sets with one output per input)
    grouping: str = "item"
    #: the item-level statistic ``evalign meta`` ranks by default (None: pairwise accuracy);
    #: ``kendall`` for large sets grouped ``none``, where pairwise accuracy over every two outputs
    #: is too slow to resample (and Kendall's tau is what their papers report)
    statistic: str | None = None
    #: statistics the set's own authors report, computed beside evalign's for each judge column
    #: (e.g. JudgeBench's accuracy, see :class:`DatasetStatistic`)
    statistics: tuple[DatasetStatistic, ...] = ()

    def annotators_of(self, column: str) -> list[str]:
        """The single-annotator columns of the item label ``column`` ([] when it has none)."""
        if column in self.label_annotators:
            return list(self.label_annotators[column])
        return list(self.annotator_columns) if column in self.human_columns else []

    def columns_for(self, column: str | None = None) -> list[str]:
        """The shipped columns to rank against the item label ``column`` (None: preferences or
        system values): that label's columns, else every shipped column."""
        if column is not None and column in self.label_columns:
            return list(self.label_columns[column])
        return list(self.judge_columns)


@dataclass(frozen=True)
class DatasetStatistic:
    """A statistic a dataset's authors report for a judge, computed beside evalign's (a column of
    the trust table named ``name``). ``compute(pairs, column)``: the value (0-1) of judge
    ``column`` on the rows ``pairs`` of the pair table (NaN when the judge lacks what it needs);
    ``description``: what it is, shown under the table."""

    name: str
    description: str
    compute: Callable[[pd.DataFrame, str], float]


def bundled_path(*parts: str) -> Path:
    """Path of a file shipped in ``evalign/data``."""
    return Path(str(resources.files("evalign").joinpath("data", *parts)))


@dataclass(frozen=True)
class Variant:
    """A named part of a dataset: keyword arguments for the adapter and/or ``task`` values kept."""

    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[str, ...] = ()
    #: whether this variant needs files that do not ship with evalign
    needs_files: bool = False


#: what a label set holds: item ratings (a column of the item table), system-level values, or
#: annotator preference columns of the pair table
LABEL_KINDS = ("item", "system", "pairs")


@dataclass(frozen=True)
class LabelSet:
    """One set of labels of a dataset, picked with ``--labels NAME`` (every verb) or ``data.labels``
    (run configs). ``kind``: one of :data:`LABEL_KINDS`; ``column``: the item rating column
    (``item``); ``pref``: every annotator column of the pair table (``pairs``); ``annotators``: how
    many annotators gave each label, as people say it (``3 per pair``)."""

    kind: str
    description: str
    annotators: str
    column: str | None = None
    pref: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in LABEL_KINDS:
            raise ValueError(f"label set kind must be one of {', '.join(LABEL_KINDS)}, got {self.kind!r}")
        if (self.kind == "item") != (self.column is not None) or (self.kind == "pairs") != bool(self.pref):
            raise ValueError("an item label set names its column, a pairs label set its annotator columns")


@dataclass(frozen=True)
class DatasetEntry:
    """What ``evalign datasets`` says about one adapter (declared with the adapter, see
    :func:`register_dataset`)."""

    name: str
    #: tables the adapter returns: ``items``, ``pairs`` or both
    tables: tuple[str, ...]
    #: what the labels are and who gave them
    labels: str
    licence: str
    #: whether the (default variant's) files ship with evalign
    ships: bool
    #: where to get the files (for sets that do not ship)
    where: str = ""
    #: the folder under the data folder that holds the files
    folder: str = ""
    variants: dict[str, Variant] = field(default_factory=dict)
    #: how to cite the set (and what ships with it), shown by ``evalign datasets`` when given
    citation: str = ""
    #: the dataset's label sets by name, the default first (``--labels NAME``)
    label_sets: dict[str, LabelSet] = field(default_factory=dict)
    #: who made the labels, for the Alt-Test's epsilon (:data:`ANNOTATOR_KINDS`: ``experts``,
    #: ``skilled``, ``crowd``; None: not people, or not known)
    annotator_kind: str | None = None
    #: why that kind (the source's own words on its annotators), shown by ``evalign datasets``
    annotator_basis: str = ""
    #: whether the set has the texts (instruction, responses) that judges and metrics read; a set
    #: without them has only its shipped label, judge and metric columns to meta-evaluate
    has_texts: bool = True

    def __post_init__(self) -> None:
        if self.annotator_kind is not None and self.annotator_kind not in ANNOTATOR_KINDS:
            raise ValueError(f"annotator_kind must be one of {', '.join(ANNOTATOR_KINDS)} or None, "
                             f"got {self.annotator_kind!r}")


#: the dataset registry (adapter functions; plugins from the ``evalign.datasets`` entry points)
DATASETS: Registry[Callable[..., HumanDataset]] = Registry("dataset", entry_point_group="evalign.datasets")

#: the catalogue entry of every adapter registered with one, in the order of registration (the
#: one table behind ``evalign datasets`` and ``NAME:VARIANT``; filled by :func:`register_dataset`)
CATALOGUE: dict[str, DatasetEntry] = {}


def register_dataset(
    name: str, *, entry: DatasetEntry | None = None
) -> Callable[[Callable[..., HumanDataset]], Callable[..., HumanDataset]]:
    """Decorator: register an adapter function under ``name``, with its catalogue ``entry`` (what
    ``evalign datasets`` lists: labels, licence, files, variants; its name is set to ``name``)."""
    if entry is not None:
        CATALOGUE[name] = entry if entry.name == name else replace(entry, name=name)
    return DATASETS.register(name)


def load_dataset(name: str, **kwargs: object) -> HumanDataset:
    """Load a registered human-judgment dataset by name (e.g. ``"pandalm"``)."""
    from evalign import datasets  # noqa: F401  (registers the built-in adapters)

    return DATASETS.get(name)(**kwargs)


def list_datasets() -> list[str]:
    """Names of the registered datasets."""
    from evalign import datasets  # noqa: F401

    return DATASETS.names()


def pairs_to_items(pairs: pd.DataFrame) -> pd.DataFrame:
    """Both sides of each pair as rows of an item table (id = pair id, system = side's system),
    so that any metric can score them against the pair's reference."""
    keep = ["instruction", "input", "reference"] + (["task"] if "task" in pairs.columns else [])
    a = pairs[["id", "system_a", "response_a", *keep]].rename(columns={"system_a": "system", "response_a": "response"})
    b = pairs[["id", "system_b", "response_b", *keep]].rename(columns={"system_b": "system", "response_b": "response"})
    a = a.assign(side="a")
    b = b.assign(side="b")
    return pd.concat([a, b], ignore_index=True)


#: ``against`` value of :func:`items_to_pairs` that pairs every two systems
ALL_SYSTEMS = "all"


def items_to_pairs(items: pd.DataFrame, against: str) -> pd.DataFrame:
    """Battles between the systems of an item table: pairs of responses to the same instruction.

    ``against``: a system (one row per item and other system, that system as ``system_a`` and
    ``against`` as ``system_b``) or ``"all"`` (every two systems once, ``system_a`` the one listed
    first in the table). Columns: ``id`` (unique per pair: ``ITEM::SYSTEM_A::SYSTEM_B``, as a pair
    table needs), ``item_id`` (the item, which the leaderboard groups battles by), ``system_a``,
    ``system_b``, ``instruction``, ``input``, ``reference``, ``response_a``, ``response_b`` and
    ``task`` where the table has one. Items without a response of both systems are left out.
    Raises ValueError naming the known systems for an unknown ``against``."""
    systems = list(dict.fromkeys(items["system"].astype(str)))
    if against != ALL_SYSTEMS and against not in systems:
        raise ValueError(f"--against {against!r} is not a system of the table (systems: {', '.join(systems)}, or all)")
    if against == ALL_SYSTEMS:
        matches = [(a, b) for i, a in enumerate(systems) for b in systems[i + 1:]]
    else:
        matches = [(s, against) for s in systems if s != against]
    keep = [c for c in ("id", "instruction", "input", "reference", "task") if c in items.columns]
    rows = items.dropna(subset=["response"]).assign(system=lambda d: d["system"].astype(str))
    by_system = {s: g.drop_duplicates("id").set_index("id") for s, g in rows.groupby("system", sort=False)}
    parts = []
    for a, b in matches:
        left, right = by_system.get(a), by_system.get(b)
        if left is None or right is None:
            continue
        both = left.index.intersection(right.index, sort=False)
        part = left.loc[both, [c for c in keep if c != "id"]].reset_index()
        part = part.rename(columns={"id": "item_id"})
        part.insert(0, "id", [f"{i}::{a}::{b}" for i in part["item_id"].astype(str)])
        part["system_a"], part["system_b"] = a, b
        part["response_a"] = left.loc[both, "response"].to_numpy()
        part["response_b"] = right.loc[both, "response"].to_numpy()
        parts.append(part)
    cols = ["id", "item_id", "system_a", "system_b", *[c for c in keep if c != "id"], "response_a", "response_b"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
