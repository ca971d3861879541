"""Self-Instruct user-oriented set: 252 instructions with expert references, outputs of 8
GPT-3-family systems, and their system-level human ranks (bundled)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, bundled_path, register_dataset
from evalign.io import read_items

SYSTEMS = (
    "davinci",
    "davinci-t0-ft",
    "davinci-superni-ft",
    "davinci-self-instruct",
    "davinci-self-instruct-and-superni-ft",
    "text-davinci-001",
    "text-davinci-002",
    "text-davinci-003",
)

CITATION = (
    "Wang et al. 2023, Self-Instruct: Aligning Language Models with Self-Generated Instructions, ACL 2023. "
    "System ranks: Aynedinov & Akbik 2024, SemScore, Table 2 (Human)."
)


@register_dataset("self_instruct", entry=DatasetEntry(
    "self_instruct",
    ("items",),
    "system-level human ranks of 8 GPT-3 systems (SemScore paper, 1 = best); 2,016 items",
    "Apache-2.0",
    True,
    label_sets={"rank": LabelSet("system", "published human rank of each system (1 = best)",
                                 "system level: one ranking of the 8 systems")},
    citation=CITATION,
    annotator_kind=None,
    annotator_basis="published system ranks (one ranking of the systems), not per-item annotator labels",
))
def load_self_instruct(data_dir: str | Path | None = None) -> HumanDataset:
    """The 2,016 (instruction, response, reference) items of 8 systems, with system human ranks
    (1 = best; lower is better). ``response`` is stripped of surrounding whitespace."""
    root = Path(data_dir) if data_dir else bundled_path("self_instruct")
    tasks = [json.loads(line) for line in (root / "user_oriented_instructions.jsonl").open(encoding="utf-8")]
    rows = []
    for system in SYSTEMS:
        path = root / "predictions" / f"{system}_predictions.jsonl"
        with path.open(encoding="utf-8") as fh:
            for k, line in enumerate(fh):
                pred = json.loads(line)
                task = tasks[k]
                rows.append(
                    {
                        "id": task["id"],
                        "system": system,
                        "instruction": task["instruction"],
                        "input": task["instances"][0]["input"],
                        "reference": task["instances"][0]["output"],
                        "response": pred["response"].strip(),
                        "task": task["motivation_app"],
                    }
                )
    df = pd.DataFrame(rows)
    df.attrs["source"] = str(root)
    items = read_items(df, require_reference=True)
    ranks = json.loads((root / "human_system_ranking.json").read_text(encoding="utf-8"))["ranks"]
    return HumanDataset(
        name="self_instruct",
        description="Self-Instruct user-oriented tasks (252) x 8 GPT-3-family systems; human system ranks",
        licence="Apache-2.0",
        citation=CITATION,
        items=items,
        system_human={k: float(v) for k, v in ranks.items()},
        system_human_higher_is_better=False,
    )
