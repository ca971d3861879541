"""HANNA (Chhun et al. 2022, COLING; 2024, TACL): 1,056 stories (96 WritingPrompts prompts x 11
story generators, one of them the human story), each rated 1-5 by 3 crowd raters on six criteria,
scored by 72 automatic metrics and graded by five LLMs with four prompts each. Bundled (MIT):
``data/hanna/hanna_metric_scores_llm.csv.gz`` is upstream's ``hanna_metric_scores_llm.csv``
gzipped (byte-identical inside; 0.6 MB).

The file has no story texts (upstream's raw annotation file is too large), so the set is
meta-evaluated from its shipped columns only: ``evalign judge`` / ``score`` refuse it. Item level
(pairwise accuracy among the 11 stories of a prompt) and system level (``--level system``: Kendall
over the 11 systems, as the papers report) both work.

Columns (every upstream cell is a list of 96 numbers, one per prompt, in a row per system):

* labels, one label set per criterion: ``relevance``, ``coherence``, ``empathy``, ``surprise``,
  ``engagement``, ``complexity`` (the mean of the 3 raters) and ``<criterion>_1`` .. ``_3``
  (upstream ``Human 1 RE`` ..; rater slots, not persons: the raters are crowd workers and change
  from story to story). Upstream's ``Human Avg k`` columns (the mean of the other two raters) are
  left out: they are derived.
* the 72 metrics under upstream's names without the trailing category mark (``BLEU``, ``BERTScore
  F1``, ``BARTScore-SH``, ...; the marks, garbled in the file, encode reference-based Ξ vs
  reference-free ¤ and string § / embedding ε / model Δ); lower is better for the distances
  (DepthScore, BaryScore-*, InfoLM-*) and Repetition-*; higher for the rest (Coverage, Density,
  Compression, Text length and Novelty-* describe a story rather than grade it: higher is taken
  as better there, as a metric column's default). Every metric is ranked against every criterion.
* the LLM grades ``judge:<llm>/<criterion>-p<k>`` (Beluga-13B, OrcaPlatypus, Mistral-7B, Llama-13B,
  ChatGPT; prompts k = 1..4; the mean of the LLM's answers, 1-5), ranked against their criterion.
  Upstream's ``<llm> AVG <k>`` (the mean of the six criteria) is left out: it is derived.
"""

from __future__ import annotations

import ast
import csv
import gzip
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from evalign.datasets.base import DatasetEntry, HumanDataset, LabelSet, bundled_path, register_dataset
from evalign.errors import InputError

CITATION = (
    "Chhun et al. 2022, Of Human Criteria and Automatic Metrics: A Benchmark of the Evaluation of Story Generation, "
    "COLING 2022; Chhun et al. 2024, Do Language Models Enjoy Their Own Stories? Prompting Large Language Models for "
    "Automatic Story Evaluation, TACL 12 (github.com/dig-team/hanna-benchmark-asg, MIT)."
)
FILE = ("hanna", "hanna_metric_scores_llm.csv.gz")
#: criterion -> upstream's column of the mean rating and its two-letter code
CRITERIA = {"relevance": ("Relevance", "RE"), "coherence": ("Coherence", "CH"), "empathy": ("Empathy", "EM"),
            "surprise": ("Surprise", "SU"), "engagement": ("Engagement", "EG"), "complexity": ("Complexity", "CX")}
#: the LLM graders of the file (upstream names)
LLMS = ("Beluga-13B", "OrcaPlatypus", "Mistral-7B", "Llama-13B", "ChatGPT")
PROMPTS = (1, 2, 3, 4)
N_PROMPTS = 96
#: metric names (upstream, without the category mark) where a lower score is better: distances
#: and repetition rates
LOWER_IS_BETTER = re.compile(r"^(DepthScore|BaryScore-.*|InfoLM-.*|Repetition-\d)$")
_MARK = re.compile(r"\s+\S{2}$")
_LLM_COL = re.compile(r"^(.+) (RE|CH|EM|SU|EG|CX|AVG) (\d)$")
_HUMAN_COL = re.compile(r"^Human (\d) (RE|CH|EM|SU|EG|CX)$")
_HUMAN_AVG_COL = re.compile(r"^Human Avg \d (RE|CH|EM|SU|EG|CX)$")


def _read_cells(path: Path) -> tuple[list[str], list[dict[str, list[float]]]]:
    """The header and, per system row, each column's 96 values (the cells are Python-literal lists)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(io.StringIO(fh.read())))
    except (OSError, EOFError, UnicodeDecodeError) as e:  # not gzip, cut short, not UTF-8 inside
        what = "cut short" if isinstance(e, EOFError) else f"{type(e).__name__}: {e}"
        raise InputError(f"not a readable gzipped CSV ({what}); download the file again", file=str(path)) from None
    if not rows:
        raise InputError("empty CSV (no header)", file=str(path))
    header, body = rows[0], rows[1:]
    out = []
    for line, r in enumerate(body, start=2):
        if len(r) != len(header):
            raise InputError(f"expected {len(header)} cells as in the header, got {len(r)}", file=str(path), line=line)
        cells: dict[str, list[float]] = {"Model": r[0]}  # type: ignore[dict-item]
        for name, cell in zip(header[1:], r[1:], strict=True):
            try:  # the lists are JSON (Python literals in general)
                values = [float(v) for v in (json.loads(cell) if "nan" not in cell else ast.literal_eval(cell))]
            except (ValueError, SyntaxError, TypeError) as e:
                raise InputError(f"not a list of numbers ({e})", file=str(path), line=line, field=name) from e
            if len(values) != N_PROMPTS:
                raise InputError(f"expected {N_PROMPTS} values, got {len(values)}", file=str(path), line=line,
                                 field=name)
            cells[name] = values
        out.append(cells)
    return header, out


def metric_name(column: str) -> str:
    """A metric's column name: upstream's without its category mark (``BLEU Ξ§`` -> ``BLEU``)."""
    return _MARK.sub("", column)


def _column_names(header: list[str]) -> dict[str, str]:
    """Upstream column -> evalign column (left out: Model, the derived Human Avg and LLM AVG columns)."""
    codes = {code: crit for crit, (_, code) in CRITERIA.items()}
    means = {col: crit for crit, (col, _) in CRITERIA.items()}
    out: dict[str, str] = {}
    for h in header[1:]:
        if h in means:
            out[h] = means[h]
        elif m := _HUMAN_COL.match(h):
            out[h] = f"{codes[m.group(2)]}_{m.group(1)}"
        elif m := _LLM_COL.match(h):
            if m.group(2) != "AVG":
                out[h] = f"judge:{m.group(1).lower()}/{codes[m.group(2)]}-p{m.group(3)}"
        elif not _HUMAN_AVG_COL.match(h):
            out[h] = metric_name(h)
    return out


def _shipped(names: dict[str, str]) -> tuple[list[str], list[str], dict[str, list[str]]]:
    """The metric columns, the LLM grade columns, and per criterion the columns ranked against it."""
    means = {col for col, _ in CRITERIA.values()}
    metrics = [c for up, c in names.items() if up not in means and not _HUMAN_COL.match(up) and not _LLM_COL.match(up)]
    judges = [c for c in names.values() if c.startswith("judge:")]
    return metrics, judges, {c: [*metrics, *(j for j in judges if f"/{c}-p" in j)] for c in CRITERIA}


@register_dataset("hanna", entry=DatasetEntry(
    "hanna",
    ("items",),
    "1,056 stories (96 prompts x 11 systems) rated 1-5 by 3 crowd raters on 6 criteria; 72 metrics and 5 LLMs x 4 "
    "prompts per criterion (judge:<llm>/<criterion>-p<k>) already scored; no texts",
    "MIT",
    True,
    citation=CITATION,
    label_sets={c: LabelSet("item", f"human {c} 1-5 per story (mean of 3 raters)", "3 raters per story", column=c)
                for c in CRITERIA},
    annotator_kind="crowd",
    annotator_basis="Amazon Mechanical Turk workers (Chhun et al. 2022)",
    has_texts=False,
))
def load_hanna(path: str | Path | None = None) -> HumanDataset:
    """HANNA as an item table (1,056 rows: ``id`` = prompt 0-95, ``system`` = story generator,
    ``story_id`` = upstream's story id) with the columns of the module doc. One label set per
    criterion; each criterion is ranked against the 72 metrics and the LLM grades of that
    criterion (:attr:`~evalign.datasets.HumanDataset.label_columns`)."""
    p = Path(path) if path else bundled_path(*FILE)
    header, rows = _read_cells(p)
    names = _column_names(header)
    systems = [str(r["Model"]) for r in rows]
    data: dict[str, object] = {
        "id": [str(i) for _ in systems for i in range(N_PROMPTS)],
        "system": [s for s in systems for _ in range(N_PROMPTS)],
        "story_id": [k * N_PROMPTS + i for k in range(len(systems)) for i in range(N_PROMPTS)],
    }
    for up, col in names.items():
        data[col] = np.array([v for r in rows for v in r[up]], dtype=float)
    items = pd.DataFrame(data)
    items.attrs["source"] = str(p)
    metrics, judges, label_columns = _shipped(names)
    return HumanDataset(
        name="hanna",
        description="HANNA: 1,056 stories (96 prompts x 11 systems), 3 raters x 6 criteria (1-5), 72 metrics and "
                    "LLM grades; no texts",
        licence="MIT",
        citation=CITATION,
        items=items,
        human_columns=list(CRITERIA),
        annotator_columns=[f"relevance_{k}" for k in (1, 2, 3)],
        label_annotators={c: [f"{c}_{k}" for k in (1, 2, 3)] for c in CRITERIA},
        judge_columns=[*metrics, *judges],
        label_columns=label_columns,
        lower_is_better=[m for m in metrics if LOWER_IS_BETTER.match(m)],
    )
