"""``--dataset``, ``--data-dir`` and ``--labels``: declared once for every verb.

The catalogue, the ``NAME:VARIANT`` specs and the tables they load live in
:mod:`evalign.datasets.catalogue` (re-exported here for the verbs, loaded on first use: the options
alone cost a verb's ``--help`` nothing).

Use in a verb::

    from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table

    def cmd(..., dataset: str = DATASET, data_dir: Path = DATA_DIR): ...
        table = dataset_table(dataset, data_dir, as_="auto-items")  # or load_dataset_spec + table_of
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from evalign.datasets.catalogue import (
        CATALOGUE,
        TABLE_KINDS,
        DatasetEntry,
        Variant,
        load_dataset_spec,
        parse_spec,
        table_of,
    )

#: the catalogue's names re-exported here, loaded on first use
_CATALOGUE_NAMES = ("CATALOGUE", "TABLE_KINDS", "DatasetEntry", "Variant", "load_dataset_spec", "parse_spec", "table_of")


def __getattr__(name: str) -> Any:
    if name in _CATALOGUE_NAMES:
        return getattr(importlib.import_module("evalign.datasets.catalogue"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def dataset_table(spec: str, data_dir: str | Path | None = None, *, as_: str = "auto-items",
                  against: str | None = None) -> Any:
    """:func:`evalign.datasets.catalogue.dataset_table` (the datasets load when a verb reads one)."""
    from evalign.datasets.catalogue import dataset_table as table

    return table(spec, data_dir, as_=as_, against=against)

__all__ = [
    "CATALOGUE",
    "DATASET",
    "DATA_DIR",
    "LABELS",
    "TABLE_KINDS",
    "DatasetEntry",
    "Variant",
    "dataset_table",
    "load_dataset_spec",
    "parse_spec",
    "table_of",
]

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
#: ``--labels``: one of the dataset's label sets (``evalign datasets`` lists them)
LABELS: Any = typer.Option(
    None,
    "--labels",
    help="One of the dataset's label sets, e.g. tulu1's acceptability or preference (listed by `evalign datasets`; "
    "default: the first).",
)
