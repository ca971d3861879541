"""Topical-Chat human ratings (Mehri and Eskenazi 2020, USR) as UniEval ships them: 60 dialogue
contexts x 6 responses (4 systems, the original human response and a new human one), rated on six
aspects, with UniEval's scores (``unieval:<aspect>``; see :mod:`evalign.datasets.unieval`).

Each response continues a knowledge-grounded conversation: ``messages`` holds the knowledge fact as
the system message, the history as alternating turns (the last one ``user``) and the response as the
last ``assistant`` turn; ``instruction`` is the last history turn, ``response`` the response,
``knowledge`` the fact. A history of an even number of turns begins with the assistant's turn, which a
conversation cannot (it starts with a user turn): that opening turn is quoted in the system message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalign.datasets.base import DatasetEntry, HumanDataset, register_dataset
from evalign.datasets.unieval import CITATION as UNIEVAL_CITATION
from evalign.datasets.unieval import columns, item_table, label_sets, read_unieval, score_columns

#: aspect -> its scale (overall first: the default label set)
SCALES = {"overall": "1-5", "understandability": "0-1", "naturalness": "1-3", "coherence": "1-3",
          "engagingness": "1-3", "groundedness": "0-1"}
ASPECTS = tuple(SCALES)
CITATION = (f"Mehri and Eskenazi 2020, USR: An Unsupervised and Reference Free Evaluation Metric for Dialog "
            f"Generation, ACL 2020 (Topical-Chat ratings); {UNIEVAL_CITATION}.")


def messages(history: str, response: str, fact: str = "") -> list[dict[str, str]]:
    """A Topical-Chat history (turns separated by newlines), its response and knowledge fact as
    messages: the fact as the system message, the turns alternating (the last history turn
    ``user``), the response ``assistant`` (see the module doc for an even-length history)."""
    turns = [t.strip() for t in history.split("\n") if t.strip()]
    system = f"Knowledge fact for this conversation: {fact.strip()}" if fact.strip() else ""
    if len(turns) % 2 == 0:  # the assistant spoke first: quoted in the system message
        system = (system + "\n" if system else "") + f"The assistant opened the conversation with: {turns[0]}"
        turns = turns[1:]
    roles = ["user" if (len(turns) - k) % 2 == 1 else "assistant" for k in range(len(turns))]
    return [*([{"role": "system", "content": system}] if system else []),
            *({"role": r, "content": t} for r, t in zip(roles, turns, strict=True)),
            {"role": "assistant", "content": response.strip()}]


@register_dataset("topical-chat", entry=DatasetEntry(
    "topical-chat",
    ("items",),
    "360 dialogue responses (60 contexts x 6 systems) rated on 6 aspects (mean of 3 annotators); UniEval's score per "
    "aspect (unieval:<aspect>)",
    "MIT (UniEval's files)",
    True,
    citation=CITATION,
    label_sets=label_sets(SCALES, "3 annotators per response (their mean only)"),
    annotator_kind=None,
    annotator_basis="not stated in the files; only the annotators' mean ships (no Alt-Test without them)",
))
def load_topical_chat(path: str | Path | None = None) -> HumanDataset:
    """Topical-Chat as an item table (360 rows: ``id`` = dialogue 0-59 in file order, ``system`` =
    upstream ``system_id``): ``instruction``, ``knowledge`` (the fact), ``response``, ``messages`` (see
    the module doc), per aspect the mean human score ``<aspect>`` and UniEval's ``unieval:<aspect>``."""
    data, source = read_unieval("dialogue", "topical_chat", path)
    contexts: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    for r in data:
        k = contexts.setdefault(r["source"], len(contexts))
        msgs = messages(r["source"], r["system_output"], r["context"])
        rows.append({"id": str(k), "system": str(r["system_id"]), "instruction": msgs[-2]["content"],
                     "knowledge": r["context"].strip(), "response": msgs[-1]["content"], "messages": msgs,
                     **score_columns(r, ASPECTS)})
    items = item_table(rows, ASPECTS, source)
    label_columns = columns(ASPECTS)
    return HumanDataset(
        name="topical-chat",
        description="Topical-Chat: 360 knowledge-grounded dialogue responses (60 contexts x 6 systems), 6 aspects",
        licence="MIT",
        citation=CITATION,
        items=items,
        human_columns=list(ASPECTS),
        judge_columns=[c for a in ASPECTS for c in label_columns[a]],
        label_columns=label_columns,
    )
