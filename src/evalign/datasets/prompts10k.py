"""10k_prompts_ranked (Data Is Better Together, Hugging Face) as the Alt-Test ships it (Calderon et
al. 2025): 1,698 prompts rated 1-5 for quality by 2-5 of 13 annotators, and by the Alt-Test's six
LLM judges.

Read from the data folder (``alttest/10k_prompts/``; the Alt-Test repository has no licence file).
The files hold no texts (not the prompts): the set is meta-evaluated from its label and judge
columns only, and ``evalign judge`` / ``score`` refuse it. Each prompt is its own item with one
"system" (``prompt``), so item-level statistics compare every prompt with every other (grouping
``none``); ``evalign meta`` ranks by Kendall's tau there (pairwise accuracy over the 1.4 million
pairs of prompts is too slow to resample).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.alttest import CITATION as ALTTEST_CITATION
from evalign.datasets.alttest import LLMS, WHERE, read_alttest
from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, register_dataset

CITATION = (
    "Data Is Better Together 2024, 10k_prompts_ranked (huggingface.co/datasets/data-is-better-together/"
    f"10k_prompts_ranked); annotations and LLM labels as in {ALTTEST_CITATION}."
)
#: the one "system" of every row (the items are prompts, rated on their own)
SYSTEM = "prompt"


@register_dataset("10k-prompts", entry=DatasetEntry(
    "10k-prompts",
    ("items",),
    "1,698 prompts rated 1-5 for quality by 2-5 of 13 annotators (quality_1..13); the 1-5 grades of the Alt-Test's "
    "six LLM judges (judge:<llm>); no texts",
    "none (the Alt-Test's files have no licence file: read from the data folder)",
    False,
    where=WHERE.replace("<set>", "10k_prompts"),
    folder="alttest",
    citation=CITATION,
    label_sets={"quality": LabelSet("item", "prompt quality 1-5 (mean of the annotators who rated it)",
                                    "13 annotator columns, 2-5 per prompt (2 for 1,307 of the 1,698)",
                                    column="quality")},
    annotator_kind="skilled",
    annotator_basis="volunteers of the Data Is Better Together community; the Alt-Test paper uses epsilon 0.15 "
                    "(skilled) here",
    has_texts=False,
))
def load_10k_prompts(data_dir: str | Path | None = None) -> HumanDataset:
    """10k_prompts_ranked as an item table (1,698 rows: ``id`` = upstream item id, ``system`` =
    ``prompt``): ``quality`` = the mean of the annotators who rated the prompt, ``quality_1`` ..
    ``quality_13`` = each annotator (in the order of ``human_annotations.json``; NaN = not rated),
    ``n_annotators``, and each LLM judge's grade ``judge:<llm>`` (upstream's LLM names)."""
    alt = read_alttest("10k_prompts", data_dir)
    ids = list(dict.fromkeys(i for v in alt.humans.values() for i in v))
    items = pd.DataFrame({"id": ids, "system": SYSTEM})
    cols = [f"quality_{k}" for k in range(1, len(alt.humans) + 1)]
    for c, labels in zip(cols, alt.humans.values(), strict=True):
        items[c] = np.array([labels.get(i, np.nan) for i in ids], dtype=float)
    items.insert(2, "quality", items[cols].mean(axis=1))
    items.insert(3, "n_annotators", items[cols].notna().sum(axis=1))
    llms = [m for m in LLMS if m in alt.llms] + [m for m in alt.llms if m not in LLMS]
    for m in llms:
        items[f"judge:{m}"] = np.array([alt.llms[m].get(i, np.nan) for i in ids], dtype=float)
    items.attrs["source"] = str(alt.folder / "human_annotations.json")
    return HumanDataset(
        name="10k-prompts",
        description="10k_prompts_ranked: 1,698 prompts, quality 1-5 by 2-5 of 13 annotators; no texts",
        licence="none (Alt-Test files, no licence file upstream)",
        citation=CITATION,
        items=items,
        human_columns=["quality"],
        annotator_columns=cols,
        judge_columns=[f"judge:{m}" for m in llms],
        grouping="none",
        statistic="kendall",
    )
