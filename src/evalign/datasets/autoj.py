"""Auto-J's pairwise test set (Li et al. 2024, ICLR): 1,392 response pairs to real user queries, 24
in each of 58 scenarios, with one human label per pair (response 1 better, response 2 better, or
tie).

Not bundled (4 MB, no judge verdicts to rank offline): the adapter reads
``autoj_pairwise/autoj_pairwise.jsonl`` from the data folder (prometheus-eval's copy,
``eval/benchmark/data/autoj_pairwise.json``, Apache-2.0; see :mod:`evalign.io.data_dir`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, register_dataset
from evalign.errors import InputError
from evalign.io.data_dir import find_set_dir

CITATION = (
    "Li et al. 2024, Generative Judge for Evaluating Alignment (Auto-J), ICLR 2024, arXiv 2310.05470 (pairwise test "
    "set as stored by github.com/prometheus-eval/prometheus-eval, Apache-2.0)."
)
FOLDER = "autoj_pairwise"
FILE = "autoj_pairwise.jsonl"
WHERE = ("https://github.com/prometheus-eval/prometheus-eval (eval/benchmark/data/autoj_pairwise.json, saved as "
         "autoj_pairwise.jsonl)")
#: Auto-J label -> evalign preference code (+1 response 1 better, -1 response 2 better, 0 tie)
_CODE = {0: 1.0, 1: -1.0, 2: 0.0}
_TEXT = ("scenario", "prompt", "response 1", "response 2")


@register_dataset("autoj", entry=DatasetEntry(
    "autoj",
    ("pairs",),
    "1,392 pairs (58 scenarios x 24), one human label each (A / B / tie: 520 / 499 / 373)",
    "Apache-2.0 (prometheus-eval's copy; the Auto-J repository has no licence file)",
    False,
    where=WHERE,
    folder=FOLDER,
    citation=CITATION,
    label_sets={"preference": LabelSet("pairs", "human preference A / B / tie", "1 label per pair (aggregated)",
                                       pref=("pref_1",))},
    annotator_kind=None,
    annotator_basis="not stated in the file; one aggregated label per pair (no Alt-Test without several)",
))
def load_autoj(data_dir: str | Path | None = None) -> HumanDataset:
    """Auto-J's pairwise test set as a pair table: ``id`` = ``<scenario>/<k>`` (k-th pair of the
    scenario in file order), ``task`` = scenario, ``instruction`` = the query, ``system_a`` /
    ``system_b`` = ``response_1`` / ``response_2``, ``pref_1`` (+1 response 1 better, -1 response 2,
    0 tie), no reference."""
    root = find_set_dir(FOLDER, [FILE], data_dir, where=WHERE)
    path = root / FILE
    rows = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=lineno) from e
            for f in _TEXT:
                if not isinstance(r.get(f), str):
                    raise InputError("must be a string", file=str(path), line=lineno, field=f)
            label = r.get("label")
            if isinstance(label, bool) or label not in _CODE:
                raise InputError(f"must be 0, 1 or 2, got {label!r}", file=str(path), line=lineno, field="label")
            k = seen[r["scenario"]] = seen.get(r["scenario"], -1) + 1
            rows.append({"id": f"{r['scenario']}/{k}", "instruction": r["prompt"], "input": "", "reference": None,
                         "system_a": "response_1", "system_b": "response_2", "response_a": r["response 1"],
                         "response_b": r["response 2"], "task": r["scenario"], "pref_1": _CODE[label]})
    pairs = pd.DataFrame(rows)
    pairs["pref_1"] = pairs["pref_1"].astype(np.float64)
    return HumanDataset(
        name="autoj",
        description="Auto-J pairwise test set: 1,392 pairs in 58 scenarios, one human label each, ties",
        licence="Apache-2.0 (prometheus-eval's copy)",
        citation=CITATION,
        pairs=pairs,
        pref_columns=["pref_1"],
    )
