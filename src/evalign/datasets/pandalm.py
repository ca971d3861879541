"""PandaLM human-annotated test set: 999 response pairs on the Self-Instruct instructions,
3 human annotators per pair, ties allowed (bundled, with the Self-Instruct references)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.base import HumanDataset, bundled_path, register_dataset

CITATION = (
    "Wang et al. 2023, PandaLM: An Automatic Evaluation Benchmark for LLM Instruction Tuning "
    "Optimization, arXiv 2306.05087."
)
#: PandaLM label -> evalign preference code (+1 A better, -1 B better, 0 tie)
_CODE = {1: 1.0, 2: -1.0, 0: 0.0}


def _text(v: object) -> str:
    # Upstream, 6 responses are JSON booleans (the models answered "True"): keep them as text.
    if isinstance(v, bool):
        return "True" if v else "False"
    return str(v)


@register_dataset("pandalm")
def load_pandalm(path: str | Path | None = None) -> HumanDataset:
    """The PandaLM pair table. ``system_a`` wrote ``response_a`` (PandaLM's response1)."""
    p = Path(path) if path else bundled_path("pandalm", "testset-v1_with_self_instruct_refs.jsonl")
    rows = []
    with p.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            a, b = r["cmp_key"].split("_", 1)
            rows.append(
                {
                    "id": str(r["idx"]),
                    "source_id": r["self_instruct_id"],
                    "instruction": r["instruction"],
                    "input": r["input"],
                    "reference": r["reference_output"],
                    "system_a": a,
                    "system_b": b,
                    "response_a": _text(r["response1"]),
                    "response_b": _text(r["response2"]),
                    "task": r["motivation_app"],
                    **{f"pref_{k}": _CODE[int(r[f"annotator{k}"])] for k in (1, 2, 3)},
                }
            )
    pairs = pd.DataFrame(rows)
    for k in (1, 2, 3):
        pairs[f"pref_{k}"] = pairs[f"pref_{k}"].astype(np.float64)
    return HumanDataset(
        name="pandalm",
        description="PandaLM test set: 999 pairs, 3 annotators, ties (0), on Self-Instruct instructions",
        licence="Apache-2.0",
        citation=CITATION,
        pairs=pairs,
        pref_columns=["pref_1", "pref_2", "pref_3"],
    )

