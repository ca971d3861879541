"""QAGS (Wang et al. 2020): summaries of CNN/DailyMail (235) and XSum (239) articles judged for
factual consistency with the article (0-1: the share of the summary's sentences that the
annotators, 3 per sentence, judged consistent), as UniEval ships them, with UniEval's consistency score
(``unieval:consistency``; see :mod:`evalign.datasets.unieval`).

``instruction`` is evalign's wording of the task ("Summarize the article.": the files carry none),
``input`` the article, ``response`` the summary. Each article has one summary, so item-level
statistics compare every summary with every other (grouping ``none``), ranked by Kendall's tau as
UniEval reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, Variant, register_dataset
from evalign.datasets.unieval import CITATION as UNIEVAL_CITATION
from evalign.datasets.unieval import columns, item_table, read_unieval, score_columns

ASPECTS = ("consistency",)
#: variant (the ``task`` column) -> UniEval's set name
SETS = {"cnndm": "qags_cnndm", "xsum": "qags_xsum"}
INSTRUCTION = "Summarize the article."
CITATION = (f"Wang, Cho and Lewis 2020, Asking and Answering Questions to Evaluate the Factual Consistency of "
            f"Summaries, ACL 2020 (QAGS); {UNIEVAL_CITATION}.")


@register_dataset("qags", entry=DatasetEntry(
    "qags",
    ("items",),
    "474 summaries (235 CNN/DM, 239 XSum) judged for factual consistency 0-1 (share of consistent sentences, 3 "
    "annotators per sentence); UniEval's consistency score (unieval:consistency)",
    "MIT (UniEval's files)",
    True,
    citation=CITATION,
    label_sets={"consistency": LabelSet("item", "human factual consistency 0-1 (share of the summary's sentences "
                                                "judged consistent)", "3 annotators per sentence (the summary's "
                                                "score only)", column="consistency")},
    variants={"cnndm": Variant("the 235 summaries of CNN/DM articles", tasks=("cnndm",)),
              "xsum": Variant("the 239 summaries of XSum articles", tasks=("xsum",))},
    annotator_kind="crowd",
    annotator_basis="Amazon Mechanical Turk workers (Wang et al. 2020)",
))
def load_qags(path: str | Path | None = None) -> HumanDataset:
    """QAGS as an item table (474 rows: ``id`` = ``<variant>/<doc_id>``, ``system`` = upstream
    ``system_id``, ``task`` = ``cnndm`` / ``xsum``): ``instruction``, ``input`` (the article),
    ``response`` (the summary), ``consistency`` (human, 0-1) and ``unieval:consistency``. ``path``:
    a folder with ``fact/qags_<set>_result.json`` files instead of the bundled ones."""
    rows: list[dict[str, Any]] = []
    sources = []
    for task, name in SETS.items():
        data, source = read_unieval("fact", name, Path(path, "fact", f"{name}_result.json") if path else None)
        sources.append(source)
        rows += [{"id": f"{task}/{r['doc_id']}", "system": str(r["system_id"]), "instruction": INSTRUCTION,
                  "input": r["source"], "response": r["system_output"], "task": task, **score_columns(r, ASPECTS)}
                 for r in data]
    items = item_table(rows, ASPECTS, sources[0].parent)
    return HumanDataset(
        name="qags",
        description="QAGS: 474 summaries (CNN/DM 235, XSum 239), factual consistency 0-1",
        licence="MIT",
        citation=CITATION,
        items=items,
        human_columns=list(ASPECTS),
        judge_columns=columns(ASPECTS)["consistency"],
        label_columns=columns(ASPECTS),
        grouping="none",
        statistic="kendall",
    )
