"""Adapters for public human-judgment datasets (see :class:`HumanDataset`).

Adding a dataset: write its module (an adapter function decorated with
``@register_dataset(NAME, entry=DatasetEntry(...))``) and import it on the line below.
"""

# the import order is the order of `evalign datasets`
from evalign.datasets import self_instruct, pandalm, hhh, llmbar, tulu, prometheus  # noqa: F401, I001  (register adapters)
from evalign.datasets.base import (
    HumanDataset,
    LabelSet,
    items_to_pairs,
    list_datasets,
    load_dataset,
    pairs_to_items,
    register_dataset,
)
from evalign.datasets.catalogue import (
    CATALOGUE,
    DatasetEntry,
    Variant,
    dataset_table,
    default_metrics,
    label_set,
    load_dataset_spec,
    parse_spec,
)

__all__ = [
    "CATALOGUE",
    "DatasetEntry",
    "HumanDataset",
    "LabelSet",
    "Variant",
    "dataset_table",
    "default_metrics",
    "items_to_pairs",
    "label_set",
    "list_datasets",
    "load_dataset",
    "load_dataset_spec",
    "pairs_to_items",
    "parse_spec",
    "register_dataset",
]
