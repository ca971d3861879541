"""Trust or Escalate (Jung, Brahman and Choi, ICLR 2025): the three calibration files upstream
released, Mistral-7B-Instruct, GPT-3.5-Turbo and GPT-4-Turbo on the same 500 human-labelled pairs,
each verdict with upstream's confidence.

Not bundled: the repository (``jaehunjung1/cascaded-selective-evaluation``) has no licence file, so
the adapter reads ``selective/`` in the data folder (see :mod:`evalign.io.data_dir`) and
nothing of it is in the package: ``<judge>.calibration.jsonl`` for each judge, rows
``instruction``, ``outputs`` (``[A, B]``), ``preferences`` (``{"human": 1 | 2}``: 1 = A preferred;
one label per pair, no ties) and ``probs`` (``[P(A), P(B)]`` by *simulated annotators*: the judge
prompted once per annotator of ``fewshot.jsonl`` with that annotator's examples, in both orders,
the verdict tokens' probabilities mapped back to the original order and averaged over the 3 x 2
runs; they need not sum to 1).

Each file becomes the judge column ``judge:<judge>`` in the layout of a pairwise judge: ``J`` =
the arg max of ``probs`` (``A`` / ``B``; upstream's verdict), ``J.confidence`` = ``max(probs)``
(upstream's confidence, what :mod:`evalign.meta.selective` calibrates) and ``J.confidence_source``
naming where it came from. The pairs are matched across the files by their instruction and
responses (as upstream merges them) and must be the same in all three.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, register_dataset
from evalign.errors import InputError
from evalign.io.data_dir import find_set_dir

CITATION = (
    "Jung, Brahman and Choi 2025, Trust or Escalate: LLM Judges with Provable Guarantees for Human Agreement, "
    "ICLR 2025, arXiv 2407.18370 (calibration files: github.com/jaehunjung1/cascaded-selective-evaluation, "
    "no licence file: read from the data folder)."
)
FOLDER = "selective"
WHERE = "https://github.com/jaehunjung1/cascaded-selective-evaluation (result/*.calibration.jsonl)"
#: the released judges, cheap first (upstream's cascade order)
JUDGES = ("mistral-7b-instruct", "gpt-3.5-turbo", "gpt-4-turbo")
CONFIDENCE_SOURCE = ("simulated annotators (upstream: 3 annotators' few-shot examples x 2 orders, the verdict "
                     "tokens' probabilities averaged); max(probs)")
LICENCE = "none: read from the data folder (no licence file upstream, never bundled)"


def judge_column(judge: str) -> str:
    """The judge column of a released file: ``judge:<judge>``."""
    return f"judge:{judge}"


def _read(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=lineno) from e
            for f in ("instruction", "outputs", "preferences", "probs"):
                if f not in r:
                    raise InputError("missing", file=str(path), line=lineno, field=f)
            if not isinstance(r["outputs"], list) or len(r["outputs"]) != 2:
                raise InputError("expected a list of two responses", file=str(path), line=lineno, field="outputs")
            probs = r["probs"]
            if (not isinstance(probs, list) or len(probs) != 2
                    or not all(isinstance(p, (int, float)) and 0 <= p <= 1 for p in probs)):
                raise InputError(f"expected [P(A), P(B)] in [0, 1], got {probs!r}", file=str(path), line=lineno,
                                 field="probs")
            human = r["preferences"].get("human") if isinstance(r["preferences"], dict) else None
            if human not in (1, 2):
                raise InputError(f"expected 1 or 2, got {human!r}", file=str(path), line=lineno,
                                 field="preferences.human")
            rows.append({"lineno": lineno, **r})
    return rows


@register_dataset("trust-or-escalate", entry=DatasetEntry(
    "trust-or-escalate",
    ("pairs",),
    "500 human-labelled pairs (1 label per pair, no ties) with upstream's verdicts of Mistral-7B-Instruct, "
    "GPT-3.5-Turbo and GPT-4-Turbo and their confidences by simulated annotators (J.confidence): for "
    "`evalign meta --selective`",
    LICENCE,
    False,
    where=WHERE,
    folder=FOLDER,
    citation=CITATION,
    label_sets={"human": LabelSet("pairs", "the human preference upstream released (A or B; no ties)",
                                  "1 per pair", pref=("pref_1",))},
    annotator_kind=None,
    annotator_basis="one human label per pair as upstream released it; who gave them is not said in the files",
))
def load_trust_or_escalate(data_dir: str | Path | None = None) -> HumanDataset:
    """The 500 pairs as a pair table: ``id`` (``toe-<row>``), ``instruction``, ``system_a`` /
    ``system_b`` (``response_A`` / ``response_B``), ``response_a`` / ``response_b``, ``pref_1``
    (+1 A preferred, -1 B) and, per released judge, ``judge:<judge>`` (``A`` / ``B``),
    ``judge:<judge>.confidence`` and ``judge:<judge>.confidence_source`` (see the module doc)."""
    files = [f"{j}.calibration.jsonl" for j in JUDGES]
    root = find_set_dir(FOLDER, files, data_dir, where=WHERE)
    first = _read(root / files[0])
    pairs = pd.DataFrame({
        "id": [f"toe-{k + 1}" for k in range(len(first))],
        "instruction": [r["instruction"] for r in first], "input": "", "reference": None,
        "system_a": "response_A", "system_b": "response_B",
        "response_a": [r["outputs"][0] for r in first], "response_b": [r["outputs"][1] for r in first],
        "pref_1": np.array([1.0 if r["preferences"]["human"] == 1 else -1.0 for r in first]),
    })
    keys = {(r["instruction"], tuple(r["outputs"])): k for k, r in enumerate(first)}
    columns: dict[str, pd.Series] = {}
    for judge, name in zip(JUDGES, files, strict=True):
        path = root / name
        rows = first if name == files[0] else _read(path)
        verdict = np.full(len(first), None, dtype=object)
        conf = np.full(len(first), np.nan)
        for r in rows:
            k = keys.get((r["instruction"], tuple(r["outputs"])))
            if k is None:
                raise InputError("a pair not in the first file", file=str(path), line=r["lineno"], field="outputs")
            if (1.0 if r["preferences"]["human"] == 1 else -1.0) != pairs.at[k, "pref_1"]:
                raise InputError("the human label differs from the first file's", file=str(path), line=r["lineno"],
                                 field="preferences.human")
            p_a, p_b = (float(p) for p in r["probs"])
            verdict[k] = "A" if p_a >= p_b else "B"  # upstream's arg max (torch.max: the first on a tie)
            conf[k] = max(p_a, p_b)
        col = judge_column(judge)
        columns[col] = pd.Series(verdict, dtype=object)
        columns[f"{col}.confidence"] = pd.Series(conf, dtype=float)
        columns[f"{col}.confidence_source"] = pd.Series(
            [CONFIDENCE_SOURCE if np.isfinite(x) else None for x in conf], dtype=object)
    pairs = pd.concat([pairs, pd.DataFrame(columns)], axis=1)
    return HumanDataset(
        name="trust-or-escalate",
        description=f"Trust or Escalate: {len(pairs)} human-labelled pairs with the verdicts and confidences of "
                    "the three judges upstream calibrated",
        licence=LICENCE,
        citation=CITATION,
        pairs=pairs,
        pref_columns=["pref_1"],
        judge_columns=[judge_column(j) for j in JUDGES],
    )
