"""``--dataset`` and ``--data-dir``: declared once for every verb, and resolved to a table.

A dataset is named ``NAME`` or ``NAME:VARIANT`` (e.g. ``llmbar:mt-bench``, LLMBar's processed
MT-Bench human judgments). :data:`CATALOGUE` describes every registered adapter (labels, licence,
whether it ships with evalign, where to get its files, its variants); ``evalign datasets`` prints
it. :func:`load_dataset_spec` loads one; :func:`dataset_table` turns it into the item table, the
pair table, or the pair table as items (both sides of each pair as rows) that the verbs read.

Use in a verb::

    from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table

    def cmd(..., dataset: str = DATASET, data_dir: Path = DATA_DIR): ...
        table = dataset_table(dataset, data_dir, as_="auto-items")  # or load_dataset_spec + table_of
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import typer

from evalign.errors import EvalignError

#: ``--dataset``: a registered dataset, optionally with a variant
DATASET: Any = typer.Option(
    None,
    "--dataset",
    "-d",
    help="A human-judgment dataset NAME or NAME:VARIANT (list them with `evalign datasets`).",
)
#: ``--data-dir``: where dataset files that do not ship with evalign are
DATA_DIR: Any = typer.Option(
    None,
    "--data-dir",
    help="Folder of dataset files that do not ship with evalign (default: $EVALIGN_DATA_DIR, "
    "else ~/.cache/evalign/data).",
)

#: what :func:`dataset_table` can return
TABLE_KINDS = ("items", "pairs", "pairs-as-items")


@dataclass(frozen=True)
class Variant:
    """A named part of a dataset: keyword arguments for the adapter and/or ``task`` values kept."""

    description: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    tasks: tuple[str, ...] = ()
    #: whether this variant needs files that do not ship with evalign
    needs_files: bool = False


@dataclass(frozen=True)
class DatasetEntry:
    """What ``evalign datasets`` says about one adapter."""

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


_LLMBAR_WHERE = "https://github.com/princeton-nlp/LLMBar (Dataset/Processed/<set>/dataset.json)"
_TULU_WHERE = (
    "https://github.com/allenai/open-instruct (human_eval/data/; the annotation xlsx exported to "
    "eval_annotations_tulu_1.jsonl) + https://github.com/lm-sys/FastChat "
    "(fastchat/llm_judge/data/vicuna_bench/reference_answer/gpt-4.jsonl into fastchat_mt_bench/)"
)
_PROMETHEUS_WHERE = "https://github.com/prometheus-eval/prometheus-eval (eval/benchmark/data/)"

CATALOGUE: dict[str, DatasetEntry] = {
    e.name: e
    for e in [
        DatasetEntry(
            "self_instruct",
            ("items",),
            "system-level human ranks of 8 GPT-3 systems (SemScore paper, 1 = best); 2,016 items",
            "Apache-2.0",
            True,
        ),
        DatasetEntry(
            "pandalm",
            ("pairs",),
            "999 pairs, 3 human annotators each (A / B / tie)",
            "Apache-2.0",
            True,
        ),
        DatasetEntry(
            "hhh",
            ("pairs",),
            "221 pairs, human-preferred response (no ties)",
            "Apache-2.0",
            True,
            variants={
                t: Variant(f"the {t} subset only", tasks=(t,)) for t in ("harmless", "helpful", "honest", "other")
            },
        ),
        DatasetEntry(
            "llmbar",
            ("pairs",),
            "419 pairs, gold better output marked by the authors (no ties)",
            "MIT (processed sets: third-party, not checked)",
            True,
            where=_LLMBAR_WHERE,
            folder="llmbar",
            variants={
                "natural": Variant("Natural (100 pairs)", {"subsets": ["Natural"]}),
                "adversarial": Variant(
                    "the four Adversarial subsets (319 pairs)",
                    {"subsets": [f"Adversarial/{s}" for s in ("Neighbor", "GPTInst", "GPTOut", "Manual")]},
                ),
                **{
                    s.lower(): Variant(f"Adversarial/{s}", {"subsets": [f"Adversarial/{s}"]})
                    for s in ("Neighbor", "GPTInst", "GPTOut", "Manual")
                },
                "processed": Variant(
                    "the three processed human-judgment sets (FairEval, LLMEval2, MT-Bench; 466 pairs)",
                    {"subsets": ["Processed/FairEval", "Processed/LLMEval2", "Processed/MT-Bench"]},
                    needs_files=True,
                ),
                "faireval": Variant(
                    "processed FairEval human judgments (66 pairs)", {"subsets": ["Processed/FairEval"]}, needs_files=True
                ),
                "llmeval2": Variant(
                    "processed LLMEval^2 human judgments (200 pairs)", {"subsets": ["Processed/LLMEval2"]}, needs_files=True
                ),
                "mt-bench": Variant(
                    "processed MT-Bench human judgments (200 pairs, majority vote)",
                    {"subsets": ["Processed/MT-Bench"]},
                    needs_files=True,
                ),
            },
        ),
        DatasetEntry(
            "tulu1",
            ("items", "pairs"),
            "human acceptability per output (1,328 items) and 1-4 human 5-point preferences per pair (996 pairs)",
            "Apache-2.0",
            False,
            where=_TULU_WHERE,
            folder="tulu1_human_eval",
            variants={
                "self_instruct": Variant("the 252 Self-Instruct prompts", tasks=("self_instruct",), needs_files=True),
                "vicuna": Variant("the 80 Vicuna prompts", tasks=("vicuna",), needs_files=True),
            },
        ),
        DatasetEntry(
            "prometheus_mt_bench",
            ("items",),
            "GPT-4 grades 1-5 (3 per item; NOT human ratings); 320 items",
            "Apache-2.0",
            False,
            where=_PROMETHEUS_WHERE + " mt_bench_eval.json",
            folder="prometheus_eval_benchmarks",
        ),
        DatasetEntry(
            "prometheus_vicuna",
            ("items",),
            "GPT-4 grades 1-5 (3 per item; NOT human ratings); 320 items",
            "Apache-2.0",
            False,
            where=_PROMETHEUS_WHERE + " vicuna_eval.json",
            folder="prometheus_eval_benchmarks",
        ),
    ]
}


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME:VARIANT`` -> (name, variant or None). Raises EvalignError for an unknown
    name or variant (the message lists the known ones)."""
    from evalign.datasets import list_datasets

    name, _, variant = spec.strip().partition(":")
    known = list_datasets()
    if name not in known:
        raise EvalignError(f"unknown dataset '{name}' (known: {', '.join(known)}; see `evalign datasets`)")
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
    import inspect

    return "data_dir" in inspect.signature(fn).parameters


def load_dataset_spec(spec: str, data_dir: str | Path | None = None) -> Any:
    """The :class:`~evalign.datasets.HumanDataset` named by ``spec`` (``NAME`` or ``NAME:VARIANT``).

    ``data_dir`` is passed to adapters that read files that do not ship with evalign (None: the
    default data folder, see :func:`evalign.datasets._external.default_data_dir`). A variant with
    ``tasks`` keeps only the rows of those ``task`` values; its name is ``NAME:VARIANT``.
    """
    from evalign import datasets  # noqa: F401  (registers the built-in adapters)
    from evalign.datasets import base

    name, variant = parse_spec(spec)
    v = CATALOGUE[name].variants[variant] if variant else None
    kwargs: dict[str, Any] = dict(v.kwargs) if v else {}
    fn = base.DATASETS.get(name)
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


def dataset_table(spec: str, data_dir: str | Path | None = None, *, as_: str = "auto-items") -> Any:
    """A table of the dataset ``spec`` (``NAME`` or ``NAME:VARIANT``), ready for the other verbs:
    :func:`load_dataset_spec` then :func:`table_of`."""
    return table_of(load_dataset_spec(spec, data_dir), as_=as_)


def table_of(ds: Any, *, as_: str = "auto-items") -> Any:
    """A table of a loaded :class:`~evalign.datasets.HumanDataset`.

    ``as_``: ``"items"`` (the item table; error if the dataset has none), ``"pairs"`` (the pair
    table), ``"pairs-as-items"`` (both sides of each pair as item rows with ``side`` a/b, see
    :func:`evalign.datasets.pairs_to_items`), or ``"auto-items"`` (the item table if there is one,
    else the pairs as items: what ``score`` and ``judge`` need). The table's ``attrs["source"]``
    is ``"dataset NAME"``.
    """
    from evalign.datasets import pairs_to_items

    kind = as_
    if kind == "auto-items":
        kind = "items" if ds.items is not None else "pairs-as-items"
    if kind not in TABLE_KINDS:
        raise EvalignError(f"table kind must be one of {', '.join(TABLE_KINDS)}, not '{as_}'")
    if kind == "items":
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
