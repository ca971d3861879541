"""SummEval (Fabbri et al. 2021) as the Alt-Test ships it (Calderon et al. 2025): 1,600 summaries
(100 CNN/DailyMail documents x 16 systems), each rated 1-5 by 3 experts on coherence, consistency,
fluency and relevance, and by the Alt-Test's six LLM judges on the same four aspects.

Read from the data folder (``alttest/summeval/``; the Alt-Test repository has no licence file,
SummEval itself is MIT). The files hold no texts (no documents or summaries): the set is
meta-evaluated from its label and judge columns only, and ``evalign judge`` / ``score`` refuse it.
Item level (pairwise accuracy within a document, as SummEval's summary level) and system level
(``--level system``: Kendall over the 16 systems) both work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.alttest import CITATION as ALTTEST_CITATION
from evalign.datasets.alttest import LLMS, WHERE, read_alttest
from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, register_dataset
from evalign.errors import InputError

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
CITATION = (
    "Fabbri et al. 2021, SummEval: Re-evaluating Summarization Evaluation, TACL 9 (MIT); "
    f"expert ratings and LLM judges as in {ALTTEST_CITATION}."
)


def _long(humans: dict[str, dict[str, Any]], llms: dict[str, dict[str, Any]], file: str) -> pd.DataFrame:
    """One row per upstream item ``DOC__SYSTEM__ASPECT``: its labels by annotator and LLM."""
    items = list(dict.fromkeys(i for v in humans.values() for i in v))
    parts = [i.split("__") for i in items]
    bad = next((i for i, p in zip(items, parts, strict=True) if len(p) != 3 or p[2] not in ASPECTS), None)
    if bad is not None:
        raise InputError(f"item id {bad!r} is not DOC__SYSTEM__ASPECT with an aspect of {', '.join(ASPECTS)}",
                         file=file)
    df = pd.DataFrame(parts, columns=["id", "system", "aspect"])
    for who, labels in [*humans.items(), *llms.items()]:
        df[who] = np.array([labels.get(i, np.nan) for i in items], dtype=float)
    return df


@register_dataset("summeval", entry=DatasetEntry(
    "summeval",
    ("items",),
    "1,600 summaries (100 CNN/DM documents x 16 systems) rated 1-5 by 3 experts on 4 aspects; the 1-5 grades of the "
    "Alt-Test's six LLM judges per aspect (judge:<llm>/<aspect>); no texts",
    "none (the Alt-Test's files have no licence file: read from the data folder; SummEval MIT)",
    False,
    where=WHERE.replace("<set>", "summeval"),
    folder="alttest",
    citation=CITATION,
    label_sets={a: LabelSet("item", f"expert {a} 1-5 per summary (mean of 3)", "3 experts per summary",
                            column=a) for a in ASPECTS},
    annotator_kind="experts",
    annotator_basis="SummEval's 3 expert annotators (Fabbri et al.); the Alt-Test paper uses epsilon 0.2 (experts) "
                    "here",
    has_texts=False,
))
def load_summeval(data_dir: str | Path | None = None) -> HumanDataset:
    """SummEval as an item table (1,600 rows: ``id`` = CNN/DM document, ``system`` = M0-M23): per
    aspect (coherence, consistency, fluency, relevance) the mean of the 3 experts (``<aspect>``), each
    expert (``<aspect>_1`` .. ``_3`` = upstream annotators e0, e1, e2), and each LLM judge's grade
    ``judge:<llm>/<aspect>`` (upstream's LLM names). One label set per aspect; each aspect's judge
    columns are ranked against that aspect (:attr:`~evalign.datasets.HumanDataset.label_columns`)."""
    alt = read_alttest("summeval", data_dir)
    long = _long(alt.humans, alt.llms, str(alt.folder / "human_annotations.json"))
    experts = list(alt.humans)
    llms = [m for m in LLMS if m in alt.llms] + [m for m in alt.llms if m not in LLMS]
    wide = long.pivot(index=["id", "system"], columns="aspect", values=[*experts, *llms])
    order = list(dict.fromkeys(zip(long["id"], long["system"], strict=True)))
    wide = wide.reindex(pd.MultiIndex.from_tuples(order, names=["id", "system"]))
    items = pd.DataFrame({"id": [i for i, _ in order], "system": [s for _, s in order]})
    label_annotators: dict[str, list[str]] = {}
    label_columns: dict[str, list[str]] = {}
    for a in ASPECTS:
        cols = [f"{a}_{k}" for k in range(1, len(experts) + 1)]
        for c, who in zip(cols, experts, strict=True):
            items[c] = wide[(who, a)].to_numpy()
        items[a] = items[cols].mean(axis=1)
        label_annotators[a] = cols
        label_columns[a] = [f"judge:{m}/{a}" for m in llms]
    for m in llms:
        for a in ASPECTS:
            items[f"judge:{m}/{a}"] = wide[(m, a)].to_numpy()
    items = items[["id", "system", *ASPECTS, *(c for a in ASPECTS for c in label_annotators[a]),
                   *(c for a in ASPECTS for c in label_columns[a])]]
    items.attrs["source"] = str(alt.folder / "human_annotations.json")
    return HumanDataset(
        name="summeval",
        description="SummEval: 1,600 CNN/DM summaries (100 documents x 16 systems), 3 experts x 4 aspects (1-5); "
                    "no texts",
        licence="none (Alt-Test files, no licence file upstream; SummEval MIT)",
        citation=CITATION,
        items=items,
        human_columns=list(ASPECTS),
        annotator_columns=label_annotators[ASPECTS[0]],
        label_annotators=label_annotators,
        judge_columns=[c for a in ASPECTS for c in label_columns[a]],
        label_columns=label_columns,
    )
