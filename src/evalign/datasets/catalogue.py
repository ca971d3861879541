"""The dataset catalogue: every registered dataset, its variants, and ``NAME[:VARIANT]`` specs.

A dataset is named ``NAME`` or ``NAME:VARIANT`` (e.g. ``llmbar:mt-bench``, LLMBar's processed
MT-Bench human judgments). :data:`CATALOGUE` describes every registered adapter (labels, licence,
whether it ships with evalign, where to get its files, its variants); each entry is declared where
its adapter is registered (``register_dataset(NAME, entry=DatasetEntry(...))``), and
``evalign datasets`` prints it. :func:`load_dataset_spec` loads one; :func:`dataset_table` turns it
into the item table, the pair table, or the pair table as items (both sides of each pair as rows)
that the verbs read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalign.datasets.base import (
    CATALOGUE,
    DATASETS,
    DatasetEntry,
    HumanDataset,
    LabelSet,
    Variant,
    items_to_pairs,
    list_datasets,
    pairs_to_items,
)
from evalign.errors import EvalignError, did_you_mean

__all__ = [
    "CATALOGUE",
    "DEFAULT_METRICS",
    "TABLE_KINDS",
    "DatasetEntry",
    "LabelSet",
    "Variant",
    "annotator_kind",
    "dataset_table",
    "default_metrics",
    "has_texts",
    "label_set",
    "load_dataset_spec",
    "parse_spec",
    "require_texts",
    "subset_warning",
    "table_of",
]

#: what :func:`dataset_table` can return
TABLE_KINDS = ("items", "pairs", "pairs-as-items")
#: the metrics ``evalign report --dataset NAME`` computes when none is named (reference-based,
#: offline, fast), for a dataset with references
DEFAULT_METRICS = ("bleu", "chrf", "rouge_l")


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME:VARIANT`` -> (name, variant or None). Raises EvalignError for an unknown
    name or variant (the message lists the known ones)."""
    name, _, variant = spec.strip().partition(":")
    known = list_datasets()
    name = next((k for k in known if k.lower() == name.lower()), name) if name not in known else name
    if name not in known:
        raise EvalignError(f"unknown dataset '{name}'{did_you_mean(name, known)} (known: {', '.join(known)}; "
                           "see `evalign datasets`)")
    if not variant:
        return name, None
    entry = CATALOGUE.get(name)
    variants = entry.variants if entry else {}
    key = variant.lower()
    if key not in variants:  # a variant may also be named by its one subset, e.g. llmbar:Processed/MT-Bench
        key = next((k for k, v in variants.items() if [str(x).lower() for x in v.kwargs.get("subsets", [])] == [key]),
                   key)
    if key not in variants:
        listing = ", ".join(f"{name}:{v}" for v in variants) or "none"
        raise EvalignError(f"dataset '{name}' has no variant '{variant}' (variants: {listing})")
    return name, key


def _accepts_data_dir(fn: Callable[..., Any]) -> bool:
    return "data_dir" in inspect.signature(fn).parameters


def load_dataset_spec(spec: str, data_dir: str | Path | None = None) -> HumanDataset:
    """The :class:`~evalign.datasets.HumanDataset` named by ``spec`` (``NAME`` or ``NAME:VARIANT``).

    ``data_dir`` is passed to adapters that read files that do not ship with evalign (None: the
    default data folder, see :func:`evalign.io.data_dir.default_data_dir`). A variant with
    ``tasks`` keeps only the rows of those ``task`` values; its name is ``NAME:VARIANT``.
    """
    name, variant = parse_spec(spec)
    v = CATALOGUE[name].variants[variant] if variant else None
    kwargs: dict[str, Any] = dict(v.kwargs) if v else {}
    fn = DATASETS.get(name)
    if data_dir is not None and _accepts_data_dir(fn):
        kwargs["data_dir"] = data_dir
    ds = fn(**kwargs)
    if v is None:
        return ds
    changes: dict[str, Any] = {"name": f"{name}:{variant}", "description": f"{ds.description} - variant: {v.description}"}
    if v.tasks:
        for attr in ("items", "pairs"):
            df = getattr(ds, attr)
            if df is not None:
                changes[attr] = df[df["task"].isin(v.tasks)].reset_index(drop=True)
    return replace(ds, **changes)


def dataset_table(spec: str, data_dir: str | Path | None = None, *, as_: str = "auto-items",
                  against: str | None = None) -> Any:
    """A table of the dataset ``spec`` (``NAME`` or ``NAME:VARIANT``) for a verb that reads its
    texts (``score``, ``judge``): :func:`require_texts`, :func:`load_dataset_spec`, then
    :func:`table_of`."""
    require_texts(spec)
    return table_of(load_dataset_spec(spec, data_dir), as_=as_, against=against)


def has_texts(spec: str) -> bool:
    """Whether the dataset ``spec`` (``NAME``, ``NAME:VARIANT`` or a loaded dataset's name) has the
    texts that judges and metrics read (:attr:`DatasetEntry.has_texts`; True for a dataset
    registered without a catalogue entry)."""
    entry = CATALOGUE.get(spec.split(":", 1)[0])
    return entry is None or entry.has_texts


def require_texts(spec: str) -> None:
    """Raise EvalignError (one line) when the dataset ``spec`` has no texts to judge or score: it
    has only its labels and its shipped judge and metric columns, which ``evalign meta`` ranks."""
    if has_texts(parse_spec(spec)[0]):
        return
    raise EvalignError(f"dataset '{spec}' has no texts (no instructions or responses: only its labels and shipped "
                       f"judge and metric columns), so nothing can judge or score it; rank its shipped columns "
                       f"with `evalign meta --dataset {spec}`")


def annotator_kind(spec: str) -> str | None:
    """Who made the labels of the dataset ``spec`` (:attr:`DatasetEntry.annotator_kind`: ``experts``,
    ``skilled``, ``crowd`` or None), for the Alt-Test's epsilon."""
    entry = CATALOGUE.get(parse_spec(spec)[0])
    return entry.annotator_kind if entry is not None else None


def _battle_pairs(ds: Any, kind: str, against: str) -> Any:
    """The pairs between the systems of a dataset's item table (:func:`evalign.datasets.items_to_pairs`)."""
    if kind != "pairs":
        raise EvalignError(f"--against pairs the systems of an item table: use it with --as pairs, not '{kind}'")
    if ds.items is None:
        raise EvalignError(f"dataset '{ds.name}' has no item table to pair systems from (it has pairs: drop --against)")
    try:
        return items_to_pairs(ds.items, against)
    except ValueError as e:
        raise EvalignError(f"dataset '{ds.name}': {e}") from None


def table_of(ds: Any, *, as_: str = "auto-items", against: str | None = None) -> Any:
    """A table of a loaded :class:`~evalign.datasets.HumanDataset`.

    ``as_``: ``"items"`` (the item table; error if the dataset has none), ``"pairs"`` (the pair
    table), ``"pairs-as-items"`` (both sides of each pair as item rows with ``side`` a/b, see
    :func:`evalign.datasets.pairs_to_items`), or ``"auto-items"`` (the item table if there is one,
    else the pairs as items: what ``score`` and ``judge`` need). ``against`` (with ``as_="pairs"``):
    the pairs are battles between the systems of the item table, each system against that one or,
    with ``"all"``, every two systems (:func:`evalign.datasets.items_to_pairs`). The table's
    ``attrs["source"]`` is ``"dataset NAME"``.
    """
    kind = as_
    if kind == "auto-items":
        kind = "items" if ds.items is not None else "pairs-as-items"
    if kind not in TABLE_KINDS:
        raise EvalignError(f"table kind must be one of {', '.join(TABLE_KINDS)}, not '{as_}'")
    if against is not None:
        table = _battle_pairs(ds, kind, against)
    elif kind == "items":
        if ds.items is None:
            raise EvalignError(f"dataset '{ds.name}' has no item table (it has pairs: use --as pairs or pairs-as-items)")
        table = ds.items.copy()
    elif ds.pairs is None:
        raise EvalignError(f"dataset '{ds.name}' has no pair table (use --as items)")
    elif kind == "pairs":
        table = ds.pairs.copy()
    else:
        table = pairs_to_items(ds.pairs)
    table.attrs["source"] = f"dataset {ds.name}"
    return table


def label_set(spec: str, name: str) -> LabelSet:
    """The label set ``name`` of dataset ``spec`` (``NAME`` or ``NAME:VARIANT``; case-insensitive).
    Raises EvalignError listing the dataset's label sets (or saying it declares none)."""
    ds_name, _ = parse_spec(spec)
    entry = CATALOGUE.get(ds_name)
    sets = entry.label_sets if entry is not None else {}
    if not sets:
        raise EvalignError(f"dataset '{ds_name}' declares no label sets: name its labels with --human or --pref")
    key = next((k for k in sets if k.lower() == name.strip().lower()), None)
    if key is None:
        listing = ", ".join(sets)
        raise EvalignError(f"dataset '{ds_name}' has no label set '{name}'{did_you_mean(name, list(sets))} "
                           f"(label sets: {listing}; see `evalign datasets`)")
    return sets[key]


def subset_warning(ds: HumanDataset, pref: tuple[str, ...] | list[str]) -> str | None:
    """A warning when ``pref`` is a strict subset of the dataset's annotator columns (one ``--pref``
    of Tulu-1's four): how many there are and how to use all of them; else None."""
    mine = [str(c) for c in ds.pref_columns]
    chosen = [c for c in pref if c in mine]
    if not mine or len(chosen) != len(pref) or set(chosen) == set(mine):
        return None
    base = ds.name.split(":", 1)[0]
    entry = CATALOGUE.get(base)
    pick = next((n for n, ls in (entry.label_sets.items() if entry else ()) if ls.kind == "pairs"), None)
    hint = f"--labels {pick}" if pick else "--pref " + " --pref ".join(mine)
    return (f"labels: {len(chosen)} of the {len(mine)} annotator columns of {ds.name} ({', '.join(chosen)}); "
            f"all {len(mine)}: {hint}")


def default_metrics(ds: HumanDataset, column: str | None = None) -> list[str]:
    """What ``evalign report --dataset NAME`` evaluates when no metric is named: :data:`DEFAULT_METRICS`
    when the dataset has references and responses, and the judge and metric columns it ships for
    the item label ``column`` (e.g. PandaLM's upstream verdicts; see
    :meth:`~evalign.datasets.HumanDataset.columns_for`)."""
    table = ds.items if ds.items is not None else ds.pairs
    has_refs = (table is not None and "reference" in table.columns and bool(table["reference"].notna().any())
                and has_texts(ds.name))
    return [*(DEFAULT_METRICS if has_refs else ()), *ds.columns_for(column)]
