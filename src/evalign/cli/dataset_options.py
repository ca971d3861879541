"""``--dataset``, ``--data-dir`` and ``--labels``: declared once for every verb.

The catalogue, the ``NAME:VARIANT`` specs and the tables they load live in
:mod:`evalign.datasets.catalogue` (re-exported here for the verbs).

Use in a verb::

    from evalign.cli.dataset_options import DATA_DIR, DATASET, dataset_table

    def cmd(..., dataset: str = DATASET, data_dir: Path = DATA_DIR): ...
        table = dataset_table(dataset, data_dir, as_="auto-items")  # or load_dataset_spec + table_of
"""

from __future__ import annotations

from typing import Any

import typer

from evalign.datasets.catalogue import (
    CATALOGUE,
    TABLE_KINDS,
    DatasetEntry,
    Variant,
    dataset_table,
    load_dataset_spec,
    parse_spec,
    table_of,
)

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
