"""Preference rows for a reward model (``evalign judge-data preference``) from human pair labels.

Any evalign pair dataset with per-annotator preference columns (``pandalm``, ``tulu1``,
``llmbar:llmeval2``, ``autoj`` ...; a ``NAME[:VARIANT]`` spec) or any pair table file (``instruction``,
``response_a``, ``response_b`` and ``pref_*`` columns coded +1 = A better, -1 = B better, 0 = tie) gives
one row per pair: ``prompt`` (the instruction, then a blank line and the input when there is one),
``chosen`` / ``rejected`` (the responses the annotators' majority preferred / did not), ``source``,
``question`` and provenance (``pair_id``, ``agreement``: the share of the pair's annotators who voted
for the majority).

* **Ties are left out**: a pair whose majority is a tie, or that has no majority (e.g. A, B and tie once
  each), teaches a Bradley-Terry model nothing about which response is better; they are counted in
  ``dropped`` (``tie``, ``no_majority``). No margin column is written (the loss is TRL's plain
  ``-log sigmoid(r_chosen - r_rejected)``).
* **Questions**: ``question`` is a hash of the normalised prompt (lower case, whitespace collapsed), so
  the same instruction in two sources is one question; ``held_out`` questions are kept aside by
  :func:`~evalign.train.feedback_data.split_by_question`.
* **Deduplication against held-out sets** (``exclude``: dataset specs whose pairs a judge will be tested
  on): a row is removed when its normalised prompt equals a held-out prompt, or when their first 300
  normalised characters have a ``rapidfuzz`` ratio of at least ``near_duplicate`` (default 90: an
  instruction reworded by a few words, as LLMBar's Natural set rewrote some LLMEval^2 instructions). The
  manifest counts the removed rows per held-out set.
* **Length balance** (``balance_length``, off by default): human labels favour the longer response
  (PandaLM, Tulu-1), so a reward model learns "longer wins" first (the shortcut LLMBar's Adversarial set
  punishes). With it, the rows of each source are subsampled (seeded) so that the chosen response is the
  longer one (in characters) in exactly half of them: every row of the smaller side is kept, as many of the
  larger side drawn; rows of equal length are kept. The manifest counts the rows dropped
  (``dropped["length_balance"]``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets import load_dataset_spec
from evalign.errors import EvalignError, InputError
from evalign.io import read_pairs
from evalign.judges.base import is_missing, join_instruction
from evalign.meta.agreement import majority_vote
from evalign.train.feedback_data import split_by_question, write_recipe

#: the columns of a preference row (``train-judge --kind reward`` reads the first three)
COLUMNS = ("prompt", "chosen", "rejected", "source", "question", "pair_id", "agreement")
#: characters of the normalised prompt compared for near-duplicates
NEAR_CHARS = 300


def normalise(text: str) -> str:
    """A prompt as compared for duplicates: lower case, whitespace collapsed to single spaces."""
    return " ".join(str(text).lower().split())


def question_key(prompt: str) -> str:
    """The question of a prompt: ``q:`` and 12 hex chars of the SHA-256 of its normalised text."""
    return "q:" + hashlib.sha256(normalise(prompt).encode("utf-8")).hexdigest()[:12]


def pair_prompts(pairs: pd.DataFrame) -> list[str]:
    """The prompt of each pair of a pair table (instruction, then a blank line and the input)."""
    ins = pairs["instruction"].tolist() if "instruction" in pairs.columns else [""] * len(pairs)
    inp = pairs["input"].tolist() if "input" in pairs.columns else [None] * len(pairs)
    return [join_instruction(i, x) for i, x in zip(ins, inp, strict=True)]


def preference_rows(pairs: pd.DataFrame, pref_columns: Sequence[str], source: str,
                    dropped: Counter[str] | None = None) -> list[dict[str, Any]]:
    """One preference row per pair of ``pairs`` whose annotators' majority (plurality without a tie of
    counts) prefers A or B; ties and pairs without a majority are counted in ``dropped``."""
    if not pref_columns:
        raise EvalignError(f"{source}: no preference columns (pref_*) to read")
    labels = pairs[list(pref_columns)].to_numpy(dtype=float)
    major = majority_vote(labels, fallback=np.nan)
    prompts = pair_prompts(pairs)
    ids = pairs["id"].astype(str).tolist() if "id" in pairs.columns else [str(i) for i in range(len(pairs))]
    out: list[dict[str, Any]] = []
    for i, m in enumerate(major):
        votes = labels[i][np.isfinite(labels[i])]
        if votes.size == 0:
            continue  # an unlabelled pair is not a preference
        if not np.isfinite(m) or m == 0:
            if dropped is not None:
                dropped["tie" if np.isfinite(m) else "no_majority"] += 1
            continue
        a, b = pairs["response_a"].iat[i], pairs["response_b"].iat[i]
        a, b = ("" if is_missing(a) else str(a)), ("" if is_missing(b) else str(b))
        chosen, rejected = (a, b) if m > 0 else (b, a)
        out.append({"prompt": prompts[i], "chosen": chosen, "rejected": rejected, "source": source,
                    "question": question_key(prompts[i]), "pair_id": f"{source}/{ids[i]}",
                    "agreement": float(np.mean(votes == m))})
    return out


def held_out_prompts(specs: Sequence[str], data_dir: str | Path | None = None) -> dict[str, list[str]]:
    """The prompts of each held-out dataset spec (its pair table, else its item table)."""
    out: dict[str, list[str]] = {}
    for spec in specs:
        ds = load_dataset_spec(spec, data_dir)
        table = ds.pairs if ds.pairs is not None else ds.items
        if table is None:
            raise EvalignError(f"{spec}: neither pairs nor items to deduplicate against")
        out[spec] = pair_prompts(table)
    return out


def overlapping(prompts: Sequence[str], held: Sequence[str], near_duplicate: float) -> np.ndarray:
    """Which ``prompts`` duplicate a ``held`` prompt: the same normalised text, or a ``rapidfuzz``
    ratio >= ``near_duplicate`` over the first :data:`NEAR_CHARS` normalised characters (100: exact only)."""
    from rapidfuzz import fuzz, process

    a = [normalise(p) for p in prompts]
    b = [normalise(p) for p in held]
    exact = set(b)
    hit = np.array([p in exact for p in a], dtype=bool)
    if near_duplicate < 100 and a and b:
        scores = process.cdist([p[:NEAR_CHARS] for p in a], [p[:NEAR_CHARS] for p in b], scorer=fuzz.ratio,
                               score_cutoff=near_duplicate, dtype=np.uint8, workers=1)
        hit |= (scores >= near_duplicate).any(axis=1)
    return hit


def deduplicated(prompts: Sequence[str], held: Mapping[str, Sequence[str]], near_duplicate: float,
                 keep: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int]]:
    """Which ``prompts`` to keep (``keep``, default all, and none that duplicates a prompt of a held-out
    set, :func:`overlapping`) and, per held-out set of ``held`` (spec -> prompts), how many prompts still
    kept before it were removed as its duplicates (a prompt is counted once, at the first set it duplicates)."""
    keep = np.ones(len(prompts), dtype=bool) if keep is None else np.asarray(keep, dtype=bool).copy()
    overlap: dict[str, int] = {}
    for spec, texts in held.items():
        hit = overlapping(prompts, texts, near_duplicate)
        overlap[spec] = int((hit & keep).sum())
        keep &= ~hit
    return keep, overlap


@dataclass(frozen=True)
class PreferenceSettings:
    """What ``judge-data preference`` builds: ``sets`` (dataset specs), ``files`` (pair table files),
    ``exclude`` (held-out dataset specs the rows are deduplicated against), ``near_duplicate`` (the
    rapidfuzz ratio, 0-100, from which a prompt counts as a duplicate; 100 = exact only), ``held_out``
    (share of questions kept aside) and its ``seed``, ``data_dir`` (external datasets), ``balance_length``
    (subsample each source so that the chosen response is the longer one in half the rows; see the
    module doc)."""

    sets: tuple[str, ...] = ("pandalm", "tulu1")
    files: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    near_duplicate: float = 90.0
    held_out: float = 0.0
    seed: int = 0
    data_dir: str | None = None
    balance_length: bool = False

    def __post_init__(self) -> None:
        if not self.sets and not self.files:
            raise EvalignError("no preference data: give a dataset (--set) or a pair table (--pairs)")
        if not 0 <= self.near_duplicate <= 100:
            raise EvalignError(f"near_duplicate must be in [0, 100], got {self.near_duplicate}")
        if not 0 <= self.held_out <= 1:
            raise EvalignError(f"held_out must be in [0, 1], got {self.held_out}")


@dataclass(frozen=True)
class PreferenceData:
    """Preference rows split by question, what was dropped (``tie``, ``no_majority``), the rows removed
    as duplicates of each held-out set (``overlap``), the rows per source, and the settings."""

    train: list[dict[str, Any]]
    held_out: list[dict[str, Any]]
    train_questions: tuple[str, ...]
    held_out_questions: tuple[str, ...]
    dropped: dict[str, int] = field(default_factory=dict)
    overlap: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        """JSON-friendly summary (what ``manifest.json`` holds)."""
        return {"recipe": "preference", "settings": dict(self.settings),
                "rows": {"train": len(self.train), "held_out": len(self.held_out)},
                "sources": dict(self.sources), "dropped": dict(self.dropped), "overlap_removed": dict(self.overlap),
                "questions": {"train": list(self.train_questions), "held_out": list(self.held_out_questions)}}


def source_rows(settings: PreferenceSettings, dropped: Counter[str]) -> list[dict[str, Any]]:
    """The preference rows of every set and file of ``settings`` (ties counted in ``dropped``)."""
    rows: list[dict[str, Any]] = []
    for spec in settings.sets:
        ds = load_dataset_spec(spec, settings.data_dir)
        if ds.pairs is None or not ds.pref_columns:
            raise EvalignError(f"{spec}: not a pair dataset with human preferences (pref_* columns)")
        rows += preference_rows(ds.pairs, ds.pref_columns, spec, dropped)
    for f in settings.files:
        table = read_pairs(f)
        prefs = [c for c in table.columns if str(c).startswith("pref_")]
        if not prefs:
            raise InputError("no preference column (pref_1 ...: +1 = A better, -1 = B better, 0 = tie)", file=str(f),
                             field="pref_1")
        rows += preference_rows(table, prefs, Path(f).stem, dropped)
    return rows


def length_balanced(rows: Sequence[dict[str, Any]], seed: int, key: str = "source") -> np.ndarray:
    """Which ``rows`` to keep so that, within each group of rows with the same ``row[key]`` (by default
    the ``source``), the chosen response is longer (in characters) than the rejected one in as many rows
    as it is shorter: the smaller side kept whole, as many rows of the larger side drawn without
    replacement (seeded), rows of equal length kept."""
    keep = np.ones(len(rows), dtype=bool)
    rng = np.random.default_rng(seed)
    diff = np.array([len(r["chosen"]) - len(r["rejected"]) for r in rows])
    sources = np.array([r[key] for r in rows], dtype=object)
    for s in dict.fromkeys(sources.tolist()):
        longer = np.flatnonzero((sources == s) & (diff > 0))
        shorter = np.flatnonzero((sources == s) & (diff < 0))
        big, small = (longer, shorter) if longer.size > shorter.size else (shorter, longer)
        drop = rng.choice(big, size=big.size - small.size, replace=False)
        keep[drop] = False
    return keep


def build_preferences(settings: PreferenceSettings) -> PreferenceData:
    """The preference rows of ``settings`` (see the module doc): read, ties dropped, deduplicated
    against the ``exclude`` sets, split by question."""
    dropped: Counter[str] = Counter({"tie": 0, "no_majority": 0})
    rows = source_rows(settings, dropped)
    keep, overlap = deduplicated([r["prompt"] for r in rows], held_out_prompts(settings.exclude, settings.data_dir),
                                 settings.near_duplicate)
    rows = [r for r, k in zip(rows, keep, strict=True) if k]
    if settings.balance_length and rows:
        balanced = length_balanced(rows, settings.seed)
        dropped["length_balance"] = int((~balanced).sum())
        rows = [r for r, k in zip(rows, balanced, strict=True) if k]
    if not rows:
        raise EvalignError("no preference rows left (every pair was a tie or a duplicate of a held-out set)")
    split = split_by_question(rows, held_out=settings.held_out, seed=settings.seed)
    sources = dict(Counter(r["source"] for r in rows))
    return PreferenceData(split.train, split.held_out, split.train_questions, split.held_out_questions,
                          dict(dropped), overlap, sources,
                          {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.__dict__.items()})


def write_preferences(data: PreferenceData, out_dir: str | Path) -> dict[str, Path]:
    """``train.jsonl``, ``held_out.jsonl`` (when anything was held out) and ``manifest.json`` in ``out_dir``
    (:func:`~evalign.train.feedback_data.write_recipe`)."""
    return write_recipe(data, out_dir)


def summary_line(manifest: Mapping[str, Any]) -> str:
    """One line: rows per side, per source, dropped, overlap removed."""
    rows, q = manifest["rows"], manifest["questions"]
    src = ", ".join(f"{k} {v}" for k, v in manifest["sources"].items())
    ov = ", ".join(f"{k} {v}" for k, v in manifest["overlap_removed"].items()) or "no held-out sets given"
    return (f"{manifest.get('recipe', 'preference')}: {rows['train']} training rows ({len(q['train'])} questions), {rows['held_out']} held-out "
            f"rows ({len(q['held_out'])} questions); by source: {src}; dropped {manifest['dropped']}; "
            f"removed as duplicates of held-out sets: {ov}")
