"""PandaLM human-annotated test set: 999 response pairs on the Self-Instruct instructions,
3 human annotators per pair, ties allowed (bundled, with the Self-Instruct references)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, bundled_path, register_dataset

CITATION = (
    "Wang et al. 2023, PandaLM: An Automatic Evaluation Benchmark for LLM Instruction Tuning "
    "Optimization, arXiv 2306.05087."
)
#: PandaLM label -> evalign preference code (+1 A better, -1 B better, 0 tie)
_CODE = {1: 1.0, 2: -1.0, 0: 0.0}
#: upstream judge verdicts bundled with the set: column -> field of ``upstream_judge_verdicts.jsonl``
JUDGES = {"judge:gpt-3.5-turbo": "gpt_result", "judge:pandalm-7b": "pandalm_result"}
#: an upstream verdict -> A / B / tie (anything else, e.g. GPT-3.5's "garbage", is unparseable)
_VERDICT = {"1": "A", "2": "B", "0": "tie", "tie": "tie"}


def _judge_columns(path: Path, ids: list[str]) -> dict[str, list[object]]:
    """The bundled upstream judges' verdict columns (see SOURCE.md), in the order of ``ids``:
    ``J`` (A / B / tie or None), ``J.status`` (scored / unscored), ``J.reason``."""
    by_id: dict[str, dict[str, object]] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            by_id[str(r["idx"])] = r
    out: dict[str, list[object]] = {}
    for col, key in JUDGES.items():
        verdicts: list[object] = []
        status: list[object] = []
        reason: list[object] = []
        for i in ids:
            raw = str(by_id[i][key]).strip()
            v = _VERDICT.get(raw.lower())
            verdicts.append(v)
            status.append("scored" if v else "unscored")
            reason.append(None if v else f"unparseable upstream output {raw!r}")
        out[col], out[f"{col}.status"], out[f"{col}.reason"] = verdicts, status, reason
    return out


def _text(v: object) -> str:
    # Upstream, 6 responses are JSON booleans (the models answered "True"): keep them as text.
    if isinstance(v, bool):
        return "True" if v else "False"
    return str(v)


@register_dataset("pandalm", entry=DatasetEntry(
    "pandalm",
    ("pairs",),
    "999 pairs, 3 human annotators each (A / B / tie)",
    "Apache-2.0",
    True,
    label_sets={"preference": LabelSet("pairs", "human preference A / B / tie", "3 annotators per pair",
                                       pref=("pref_1", "pref_2", "pref_3"))},
    citation=CITATION,
    annotator_kind="skilled",
    annotator_basis="three human evaluators labelling independently, pairs of large disagreement removed (Cohen's "
                    "kappa 0.85-0.88; PandaLM README); not said to be domain experts or crowd workers",
))
def load_pandalm(path: str | Path | None = None) -> HumanDataset:
    """The PandaLM pair table. ``system_a`` wrote ``response_a`` (PandaLM's response1). The bundled
    set also carries the upstream verdicts of GPT-3.5-turbo and PandaLM-7B on the same pairs as judge
    verdict columns ``judge:gpt-3.5-turbo`` and ``judge:pandalm-7b`` (with ``.status`` / ``.reason``;
    see :mod:`evalign.evaluate.columns`)."""
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
    if path is None:  # the upstream judges' verdicts go with the bundled set
        for col, values in _judge_columns(bundled_path("pandalm", "upstream_judge_verdicts.jsonl"),
                                          pairs["id"].tolist()).items():
            pairs[col] = values
    return HumanDataset(
        name="pandalm",
        description="PandaLM test set: 999 pairs, 3 annotators, ties (0), on Self-Instruct instructions",
        licence="Apache-2.0",
        citation=CITATION,
        pairs=pairs,
        pref_columns=["pref_1", "pref_2", "pref_3"],
        judge_columns=list(JUDGES) if path is None else [],
    )

