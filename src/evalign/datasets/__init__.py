"""Adapters for public human-judgment datasets (see :class:`HumanDataset`)."""

from evalign.datasets import hhh, llmbar, pandalm, prometheus, self_instruct, tulu  # noqa: F401  (register adapters)
from evalign.datasets.base import HumanDataset, list_datasets, load_dataset, pairs_to_items, register_dataset

__all__ = ["HumanDataset", "list_datasets", "load_dataset", "pairs_to_items", "register_dataset"]
