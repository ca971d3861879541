"""SF data-to-text human ratings (Wen et al. 2015 outputs, rated in Novikova et al. 2017): utterances
generated from dialogue acts of the SF hotel (875) and restaurant (1,181) domains, rated 1-6 for
informativeness, naturalness and overall quality, as UniEval ships them, with UniEval's score per
aspect (``unieval:<aspect>``; see :mod:`evalign.datasets.unieval`).

``instruction`` is evalign's wording of the task (the files carry none), ``input`` the dialogue act
(``inform(name='...';...)``), ``reference`` the human reference, ``response`` the output. The files
do not say which system wrote an output (``system`` = ``unknown``) and each act has one output, so
item-level statistics compare every output with every other (grouping ``none``), ranked by
Kendall's tau.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalign.datasets.base import DatasetEntry, HumanDataset, Variant, register_dataset
from evalign.datasets.unieval import CITATION as UNIEVAL_CITATION
from evalign.datasets.unieval import columns, item_table, label_sets, read_unieval, score_columns

#: the rated aspects (overall first: the default label set)
ASPECTS = ("overall", "informativeness", "naturalness")
#: variant (the ``task`` column) -> UniEval's set name
SETS = {"hotel": "sfhot", "restaurant": "sfres"}
INSTRUCTION = "Write one utterance of a dialogue system that expresses this dialogue act."
SYSTEM = "unknown"
CITATION = (f"Novikova et al. 2017, Why We Need New Evaluation Metrics for NLG, EMNLP 2017 (ratings of the SF "
            f"hotel / restaurant outputs of Wen et al. 2015); {UNIEVAL_CITATION}.")


@register_dataset("sf-data2text", entry=DatasetEntry(
    "sf-data2text",
    ("items",),
    "2,056 generated utterances (875 hotel, 1,181 restaurant) rated 1-6 for overall quality, informativeness and "
    "naturalness "
    "(mean of 3 annotators); UniEval's score per aspect (unieval:<aspect>)",
    "MIT (UniEval's files)",
    True,
    citation=CITATION,
    label_sets=label_sets({a: "1-6" for a in ASPECTS}, "3 annotators per output (their mean only)"),
    variants={"hotel": Variant("the 875 outputs of the SF hotel domain", tasks=("hotel",)),
              "restaurant": Variant("the 1,181 outputs of the SF restaurant domain", tasks=("restaurant",))},
    annotator_kind="crowd",
    annotator_basis="crowd workers (CrowdFlower; Novikova et al. 2017)",
))
def load_sf_data2text(path: str | Path | None = None) -> HumanDataset:
    """SF data-to-text as an item table (2,056 rows: ``id`` = ``<variant>/<doc_id>``, ``system`` =
    ``unknown``, ``task`` = ``hotel`` / ``restaurant``): ``instruction``, ``input`` (the dialogue
    act), ``reference``, ``response``, per aspect the human score ``<aspect>`` (1-6) and UniEval's
    ``unieval:<aspect>``. ``path``: a folder with ``data2text/<set>_result.json`` files instead of
    the bundled ones."""
    rows: list[dict[str, Any]] = []
    sources = []
    for task, name in SETS.items():
        data, source = read_unieval("data2text", name, Path(path, "data2text", f"{name}_result.json") if path else None)
        sources.append(source)
        rows += [{"id": f"{task}/{r['doc_id']}", "system": SYSTEM, "instruction": INSTRUCTION, "input": r["source"],
                  "reference": r["reference"], "response": r["system_output"], "task": task,
                  **score_columns(r, ASPECTS)} for r in data]
    items = item_table(rows, ASPECTS, sources[0].parent)
    label_columns = columns(ASPECTS)
    return HumanDataset(
        name="sf-data2text",
        description="SF data-to-text: 2,056 utterances (hotel 875, restaurant 1,181), informativeness, naturalness, "
                    "overall 1-6",
        licence="MIT",
        citation=CITATION,
        items=items,
        human_columns=list(ASPECTS),
        judge_columns=[c for a in ASPECTS for c in label_columns[a]],
        label_columns=label_columns,
        grouping="none",
        statistic="kendall",
    )
