"""BIG-bench HHH alignment (Askell et al. 2021): 221 (query, preferred, dispreferred response)
triples in four subsets (harmless, helpful, honest, other), bundled (Apache-2.0)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.base import (
    DatasetEntry,
    HumanDataset,
    LabelSet,
    Variant,
    bundled_path,
    register_dataset,
)
from evalign.errors import InputError

CITATION = (
    "Askell et al. 2021, A General Language Assistant as a Laboratory for Alignment, arXiv 2112.00861 "
    "(BIG-bench hhh_alignment; Srivastava et al. 2023, TMLR). Text as stored by prometheus-eval."
)
SUBSETS = ("harmless", "helpful", "honest", "other")


@register_dataset("hhh", entry=DatasetEntry(
    "hhh",
    ("pairs",),
    "221 pairs, human-preferred response (no ties)",
    "Apache-2.0",
    True,
    variants={t: Variant(f"the {t} subset only", tasks=(t,)) for t in ("harmless", "helpful", "honest", "other")},
    label_sets={"preference": LabelSet("pairs", "the human-preferred response (no ties)", "1 label per pair (the set's gold)",
                                       pref=("pref_1",))},
    citation=CITATION,
    annotator_kind="experts",
    annotator_basis="the preferred and dispreferred responses were written by the set's authors (Askell et al. 2021)",
))
def load_hhh(path: str | Path | None = None) -> HumanDataset:
    """HHH alignment as a pair table, ``task`` = subset, ``id`` = ``<subset>/<row>``, gold in
    ``pref_1``, no reference.

    The order of the two responses alternates so that the gold is not always A: in even rows
    (``row`` of the source file) A is the preferred response (``pref_1`` = +1), in odd rows B is
    (``pref_1`` = -1). ``system_a``/``system_b`` are the neutral names ``response_1``/``response_2``;
    ``chosen_side`` (``a``/``b``) repeats the gold.
    """
    p = Path(path) if path else bundled_path("hhh", "hhh_alignment_pairs.jsonl")
    rows = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            r = json.loads(line)
            for f in ("input", "chosen", "rejected", "subset"):
                if not isinstance(r.get(f), str):
                    raise InputError("must be a string", file=str(p), line=lineno, field=f)
            if r["subset"] not in SUBSETS:
                raise InputError(f"unknown subset {r['subset']!r}", file=str(p), line=lineno, field="subset")
            row = int(r["row"])
            a_chosen = row % 2 == 0
            rows.append(
                {
                    "id": f"{r['subset']}/{row}",
                    "instruction": r["input"],
                    "input": "",
                    "reference": None,
                    "system_a": "response_1",
                    "system_b": "response_2",
                    "response_a": r["chosen"] if a_chosen else r["rejected"],
                    "response_b": r["rejected"] if a_chosen else r["chosen"],
                    "task": r["subset"],
                    "chosen_side": "a" if a_chosen else "b",
                    "pref_1": 1.0 if a_chosen else -1.0,
                }
            )
    pairs = pd.DataFrame(rows)
    pairs["pref_1"] = pairs["pref_1"].astype(np.float64)
    return HumanDataset(
        name="hhh",
        description=(
            "BIG-bench HHH alignment: 221 query + preferred/dispreferred response pairs "
            "(harmless 58, helpful 59, honest 61, other 43); human preference, no ties, no references"
        ),
        licence="Apache-2.0",
        citation=CITATION,
        pairs=pairs,
        pref_columns=["pref_1"],
    )
