"""Reading UniEval's meta-evaluation sets (Zhong et al. 2022, EMNLP; GitHub
``maszhongming/UniEval``, MIT): Topical-Chat, QAGS (CNN/DM, XSum) and SF data-to-text (hotel,
restaurant), each item with its texts, the mean human score per aspect and UniEval's own score per
aspect (``predict_scores``), a published evaluator evalign ranks as the metric column
``unieval:<aspect>``.

Bundled (0.7 MB): ``data/unieval/<task>/<set>_result.json.gz`` are upstream's
``reproduce/unieval_predict/<task>/<set>_result.json`` gzipped (byte-identical inside); they hold
every field of the data files (``reproduce/data/...``) plus ``predict_scores``. The files hold
the mean of the annotators only: no per-annotator labels.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.datasets.base import LabelSet, bundled_path
from evalign.errors import InputError
from evalign.io import read_items

CITATION = ("Zhong et al. 2022, Towards a Unified Multi-Dimensional Evaluator for Text Generation (UniEval), "
            "EMNLP 2022 (sets and UniEval scores: github.com/maszhongming/UniEval, MIT)")
#: the prefix of UniEval's score columns
PREFIX = "unieval:"


def read_unieval(task: str, name: str, path: str | Path | None = None) -> tuple[list[dict[str, Any]], Path]:
    """The items of UniEval set ``name`` of ``task`` (``dialogue/topical_chat``, ...) and the file
    read (the bundled one unless ``path``); each item has ``scores`` and ``predict_scores`` with the
    same aspects."""
    p = Path(path) if path else bundled_path("unieval", task, f"{name}_result.json.gz")
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON ({e.msg})", file=str(p), line=e.lineno) from e
    for k, r in enumerate(data):
        scores, pred = r.get("scores"), r.get("predict_scores")
        if not isinstance(scores, dict) or not isinstance(pred, dict) or set(scores) != set(pred):
            raise InputError("needs 'scores' and 'predict_scores' with the same aspects", file=str(p), line=k + 1,
                             field="predict_scores")
    return data, p


def score_columns(row: dict[str, Any], aspects: tuple[str, ...]) -> dict[str, float]:
    """An item's human score (``<aspect>``) and UniEval's (``unieval:<aspect>``) per aspect."""
    return {**{a: float(row["scores"][a]) for a in aspects},
            **{f"{PREFIX}{a}": float(row["predict_scores"][a]) for a in aspects}}


def label_sets(scales: dict[str, str], annotators: str) -> dict[str, LabelSet]:
    """One item label set per aspect (``scales``: aspect -> its scale, e.g. ``1-5``)."""
    return {a: LabelSet("item", f"human {a} {scale} (mean of the annotators)", annotators, column=a)
            for a, scale in scales.items()}


def item_table(rows: list[dict[str, Any]], aspects: tuple[str, ...], source: Path) -> pd.DataFrame:
    """The validated item table of ``rows`` (human scores and UniEval's as numbers)."""
    df = pd.DataFrame(rows)
    df.attrs["source"] = str(source)
    return read_items(df, human=list(aspects), scores=[f"{PREFIX}{a}" for a in aspects])


def columns(aspects: tuple[str, ...]) -> dict[str, list[str]]:
    """Per aspect label, UniEval's score column for it."""
    return {a: [f"{PREFIX}{a}"] for a in aspects}
