"""Adapters for public human-judgment datasets (see :class:`HumanDataset`).

Adding a dataset: write its module (an adapter function decorated with
``@register_dataset(NAME, entry=DatasetEntry(...))``) and import it on the line below.
"""

# the import order is the order of `evalign datasets`
from evalign.datasets import self_instruct, pandalm, hhh, llmbar, tulu, prometheus  # noqa: F401, I001  (register adapters)
from evalign.datasets import alttest_mtbench, summeval, prompts10k, hanna, autoj, judgebench  # noqa: F401  (register adapters)
from evalign.datasets import topical_chat, qags, sf_data2text, trust_or_escalate  # noqa: F401  (register adapters)
from evalign.datasets.base import (
    ANNOTATOR_KINDS,
    DatasetStatistic,
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
    annotator_kind,
    dataset_table,
    default_metrics,
    has_texts,
    label_set,
    load_dataset_spec,
    parse_spec,
    require_texts,
)

__all__ = [
    "ANNOTATOR_KINDS",
    "CATALOGUE",
    "DatasetEntry",
    "DatasetStatistic",
    "HumanDataset",
    "LabelSet",
    "Variant",
    "annotator_kind",
    "dataset_table",
    "default_metrics",
    "has_texts",
    "items_to_pairs",
    "label_set",
    "list_datasets",
    "load_dataset",
    "load_dataset_spec",
    "pairs_to_items",
    "parse_spec",
    "register_dataset",
    "require_texts",
]
