"""LLMBar (Zeng et al. 2024): pairs of outputs for one instruction, with the objectively better one
marked by the authors; Natural (100) and four Adversarial subsets (319), bundled (MIT).
The third-party *Processed* sets (FairEval, LLMEval^2, MT-Bench human judgments; licences not
checked) are not bundled and are read from a local copy with ``processed=True``.

Every set carries the published verdicts of LLMBar's LLM evaluators as judge columns
``judge:<evaluator>/<strategy>`` (with ``.ab`` / ``.ba`` / ``.status`` / ``.reason``; see
:mod:`evalign.datasets.llmbar_verdicts`): they are plain columns of the pair table, listed in
:attr:`~evalign.datasets.base.HumanDataset.judge_columns`."""

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
from evalign.datasets.llmbar_verdicts import with_verdicts
from evalign.errors import InputError
from evalign.io.data_dir import find_set_dir

CITATION = (
    "Zeng et al. 2024, Evaluating Large Language Models at Evaluating Instruction Following, "
    "ICLR 2024, arXiv 2310.07641."
)
#: the set's citation, with where its pairs and the shipped judge verdicts come from
FULL_CITATION = f"{CITATION} Pairs and judge verdicts: github.com/princeton-nlp/LLMBar (MIT)."
#: subset name (the pair table's ``task``) -> folder in the bundled ``data/llmbar``
SUBSETS = {
    "Natural": "Natural",
    "Adversarial/Neighbor": "Adversarial/Neighbor",
    "Adversarial/GPTInst": "Adversarial/GPTInst",
    "Adversarial/GPTOut": "Adversarial/GPTOut",
    "Adversarial/Manual": "Adversarial/Manual",
}
PROCESSED = {
    "Processed/FairEval": "Processed/FairEval",
    "Processed/LLMEval2": "Processed/LLMEval2",
    "Processed/MT-Bench": "Processed/MT-Bench",
}
_CODE = {1: 1.0, 2: -1.0}


def _read_subset(path: Path, subset: str) -> list[dict[str, object]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=e.lineno) from e
    rows = []
    for k, r in enumerate(data):
        for f in ("input", "output_1", "output_2"):
            if not isinstance(r.get(f), str):
                raise InputError("must be a string", file=str(path), line=k + 1, field=f)
        label = r.get("label")
        if isinstance(label, bool) or label not in _CODE:
            raise InputError(f"must be 1 or 2, got {label!r}", file=str(path), line=k + 1, field="label")
        rows.append(
            {
                "id": f"{subset}/{k}",
                "instruction": r["input"],
                "input": "",
                "reference": None,
                "system_a": "output_1",
                "system_b": "output_2",
                "response_a": r["output_1"],
                "response_b": r["output_2"],
                "task": subset,
                "pref_1": _CODE[label],
            }
        )
    return rows


_LLMBAR_WHERE = "https://github.com/princeton-nlp/LLMBar (Dataset/Processed/<set>/dataset.json)"
_ADVERSARIAL = ("Neighbor", "GPTInst", "GPTOut", "Manual")


@register_dataset("llmbar", entry=DatasetEntry(
    "llmbar",
    ("pairs",),
    "419 pairs, gold better output marked by the authors (no ties); published verdicts of 6 LLM "
    "evaluators x up to 15 strategies in both orders (judge:<evaluator>/<strategy>)",
    "MIT (judge verdicts: MIT; processed sets: third-party, not checked)",
    True,
    where=_LLMBAR_WHERE,
    folder="llmbar",
    citation=FULL_CITATION,
    label_sets={"preference": LabelSet("pairs", "the better output (no ties)",
                                       "1 label per pair (the authors' gold; processed sets: the humans' majority)",
                                       pref=("pref_1",))},
    variants={
        "natural": Variant("Natural (100 pairs)", {"subsets": ["Natural"]}),
        "adversarial": Variant(
            "the four Adversarial subsets (319 pairs)", {"subsets": [f"Adversarial/{s}" for s in _ADVERSARIAL]}
        ),
        **{s.lower(): Variant(f"Adversarial/{s}", {"subsets": [f"Adversarial/{s}"]}) for s in _ADVERSARIAL},
        "processed": Variant(
            "the three processed human-judgment sets (FairEval, LLMEval2, MT-Bench; 466 pairs)",
            {"subsets": ["Processed/FairEval", "Processed/LLMEval2", "Processed/MT-Bench"]},
            needs_files=True,
        ),
        "faireval": Variant(
            "processed FairEval human judgments (66 pairs)", {"subsets": ["Processed/FairEval"]}, needs_files=True
        ),
        "llmeval2": Variant(
            "processed LLMEval^2 human judgments (200 pairs)", {"subsets": ["Processed/LLMEval2"]}, needs_files=True
        ),
        "mt-bench": Variant(
            "processed MT-Bench human judgments (200 pairs, majority vote)",
            {"subsets": ["Processed/MT-Bench"]},
            needs_files=True,
        ),
    },
    annotator_kind="experts",
    annotator_basis="the authors curated each pair and its gold label (Zeng et al. 2024)",
))
def load_llmbar(
    subsets: list[str] | None = None, *, processed: bool = False, data_dir: str | Path | None = None
) -> HumanDataset:
    """LLMBar as a pair table: ``task`` = subset (``Natural``, ``Adversarial/Neighbor``,
    ``Adversarial/GPTInst``, ``Adversarial/GPTOut``, ``Adversarial/Manual``), ``id`` =
    ``<subset>/<row>``, ``system_a``/``system_b`` = ``output_1``/``output_2``, one gold column
    ``pref_1`` (+1 = output_1 better, -1 = output_2 better; no ties), no reference; and the
    published judge verdicts of every LLMBar evaluator configuration that judged these sets as
    judge columns ``judge:<evaluator>/<strategy>`` (``J``, ``J.ab``, ``J.ba``, ``J.status``,
    ``J.reason``; :func:`evalign.datasets.llmbar_verdicts.with_verdicts`), named in
    ``judge_columns`` (what ``evalign meta`` ranks when no ``-m`` is given).

    ``subsets`` picks subsets (default: the five bundled ones). ``processed=True`` adds the
    Processed FairEval / LLMEval2 / MT-Bench sets from ``data_dir`` (see
    :mod:`evalign.io.data_dir`; folder ``llmbar/Processed/<name>/dataset.json``).
    """
    names = list(subsets) if subsets else list(SUBSETS) + (list(PROCESSED) if processed else [])
    unknown = [n for n in names if n not in SUBSETS and n not in PROCESSED]
    if unknown:
        raise InputError(f"unknown LLMBar subset(s) {unknown} (known: {', '.join([*SUBSETS, *PROCESSED])})")
    rows: list[dict[str, object]] = []
    for name in names:
        if name in SUBSETS:
            path = bundled_path("llmbar", SUBSETS[name], "dataset.json")
        else:
            rel = str(Path(PROCESSED[name], "dataset.json"))
            root = find_set_dir(
                "llmbar", [rel], data_dir, where="https://github.com/princeton-nlp/LLMBar (Dataset/Processed/)"
            )
            path = root / rel
        rows += _read_subset(path, name)
    pairs = pd.DataFrame(rows)
    pairs["pref_1"] = pairs["pref_1"].astype(np.float64)
    pairs, judges = with_verdicts(pairs)
    return HumanDataset(
        name="llmbar",
        description=(
            "LLMBar: instruction + two outputs, the objectively better one marked by the authors "
            "(Natural 100, Adversarial Neighbor 134 / GPTInst 92 / GPTOut 47 / Manual 46); no ties, no references"
        ),
        licence="MIT" if not any(n in PROCESSED for n in names) else "MIT (Processed sets: third-party, not checked)",
        citation=FULL_CITATION,
        pairs=pairs,
        pref_columns=["pref_1"],
        judge_columns=judges,
    )
