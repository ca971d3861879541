"""Contrastive preference rows (``evalign judge-data contrastive``): pairs built so that the surface
(length, style) does not give the better response away, as LLMBar built its Adversarial sets.

**The good response** of each instruction of a source: the response the annotators' majority preferred
in a labelled pair (:func:`~evalign.train.preference_data.preference_rows`; with several pairs of the same
instruction, the response preferred most often, then the one with the higher agreement), else the
top-rated response of a rated item table (the set's first human rating column), else the reference.
Any evalign dataset spec (``NAME[:VARIANT]``) or pair table file (``--pairs``) is a source.

**Rejected responses** (``construction`` says which; several rows per instruction):

* ``neighbor``: the good response of the *nearest neighbouring instruction* whose embedding cosine lies
  inside ``neighbor_band`` (default 0.45-0.85 with the bundled all-MiniLM-L6-v2: related, but not a
  paraphrase): a fluent, on-topic looking answer to a different request (LLMBar's Neighbor set);
* ``truncated``: the good response cut at about half its words (at the last sentence or line end of that half
  when it keeps at least a quarter), for responses of at least :data:`MIN_TRUNCATE_WORDS` words;
* ``off_topic``: the good response of a randomly drawn instruction whose cosine is at most ``off_topic_max``;
* ``constraint``: the good response itself, changed to break the explicit constraint the instruction
  states, where a rule checks it (:mod:`evalign.train.constraints`: word, sentence and item counts,
  JSON, bullet and numbered lists); ``detail`` names the constraint.

**Before building**, instructions that duplicate a held-out set's (``exclude``, by default every set of
the held-out table, :data:`DEFAULT_EXCLUDE`) are removed with ``preference``'s rule (same normalised
text, or a rapidfuzz ratio >= ``near_duplicate`` over the first 300 characters;
:func:`~evalign.train.preference_data.deduplicated`) and then by embedding (cosine >= ``embedding_duplicate``);
so neither the prompts nor the responses borrowed from neighbours come from a held-out question. The
manifest counts both per set (``overlap_removed``, ``overlap_embedding``).

**After building**: ``length_band`` keeps rows whose length ratio (characters of chosen / rejected) lies
in the band; ``mix`` adds ``preference`` rows (human majority labels of the same sources, deduplicated the
same way; ``construction`` = ``human``) at ``mix`` rows per contrastive row; ``balance_length`` then
subsamples each source so that the chosen response is the longer one in exactly half the rows (truncation
and mixed rows included; :func:`~evalign.train.preference_data.length_balanced`); the rows are split by
question (:func:`~evalign.train.feedback_data.split_by_question`).

Everything but :func:`build_contrastive` is a pure function of its arguments (the embeddings are
passed in as a matrix), so the construction is tested on small data without a model.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.datasets import load_dataset_spec
from evalign.errors import EvalignError
from evalign.io import read_pairs
from evalign.judges.base import is_missing
from evalign.train.constraints import broken, find_constraint
from evalign.train.feedback_data import split_by_question
from evalign.train.preference_data import (
    PreferenceData,
    PreferenceSettings,
    build_preferences,
    deduplicated,
    held_out_prompts,
    length_balanced,
    pair_prompts,
    preference_rows,
    question_key,
    summary_line,
)

#: every set of the held-out table (benchmarks/make_reward_judge.py): the default ``exclude``
DEFAULT_EXCLUDE = ("llmbar:natural", "llmbar:adversarial", "hhh", "llmbar:mt-bench", "alttest-mtbench",
                   "judgebench:gpt-4o")
#: the constructions, in the order rows are built
CONSTRUCTIONS = ("neighbor", "truncated", "off_topic", "constraint")
#: the shortest good response (in words) that is truncated
MIN_TRUNCATE_WORDS = 20
#: a row: what ``train-judge --kind reward`` reads (the first three), then provenance
COLUMNS = ("prompt", "chosen", "rejected", "source", "question", "pair_id", "construction", "detail")


@dataclass(frozen=True)
class Instruction:
    """One instruction and its good response: ``prompt`` (instruction, blank line, input), ``good``,
    ``source`` (dataset spec or file stem), ``item`` (its id in the source) and ``how`` (``preferred``,
    ``top_rated`` or ``reference``)."""

    prompt: str
    good: str
    source: str
    item: str
    how: str


def _text(v: Any) -> str:
    return "" if is_missing(v) else str(v)


def preferred_instructions(pairs: pd.DataFrame, pref_columns: Sequence[str], source: str,
                           dropped: Counter[str] | None = None) -> list[Instruction]:
    """The good response of each instruction of a labelled pair table: the response the majority
    preferred (ties and pairs without a majority left out, counted in ``dropped``); with several pairs of
    one instruction, the response preferred most often, then the one of the pair with the highest agreement."""
    best: dict[str, tuple[int, float, int, str, str]] = {}
    wins: Counter[tuple[str, str]] = Counter()
    rows = preference_rows(pairs, pref_columns, source, dropped)
    for r in rows:
        wins[(r["prompt"], r["chosen"])] += 1
    for order, r in enumerate(rows):
        score = (wins[(r["prompt"], r["chosen"])], r["agreement"], -order, r["chosen"], r["pair_id"])
        if r["prompt"] not in best or score[:3] > best[r["prompt"]][:3]:
            best[r["prompt"]] = score
    return [Instruction(p, s[3], source, s[4].split("/", 1)[-1], "preferred") for p, s in best.items() if s[3].strip()]


def rated_instructions(items: pd.DataFrame, column: str, higher_is_better: bool, source: str) -> list[Instruction]:
    """The good response of each instruction of a rated item table: the response with the best rating
    in ``column`` (the first of equal ones; unrated and empty responses left out)."""
    prompts = pair_prompts(items)
    ratings = pd.to_numeric(items[column], errors="coerce").to_numpy(dtype=float)
    ids = items["id"].astype(str).tolist() if "id" in items.columns else [str(i) for i in range(len(items))]
    best: dict[str, tuple[float, int]] = {}
    for i, (p, v) in enumerate(zip(prompts, ratings, strict=True)):
        resp = _text(items["response"].iat[i])
        if not np.isfinite(v) or not resp.strip():
            continue
        v = v if higher_is_better else -v
        if p not in best or v > best[p][0]:
            best[p] = (v, i)
    return [Instruction(p, _text(items["response"].iat[i]), source, ids[i], "top_rated") for p, (_, i) in best.items()]


def reference_instructions(table: pd.DataFrame, source: str) -> list[Instruction]:
    """The reference of each instruction of a table with a ``reference`` column (the first per instruction)."""
    if "reference" not in table.columns:
        return []
    prompts = pair_prompts(table)
    ids = table["id"].astype(str).tolist() if "id" in table.columns else [str(i) for i in range(len(table))]
    out: dict[str, Instruction] = {}
    for i, p in enumerate(prompts):
        ref = _text(table["reference"].iat[i])
        if ref.strip() and p not in out:
            out[p] = Instruction(p, ref, source, ids[i], "reference")
    return list(out.values())


def source_instructions(sets: Sequence[str], files: Sequence[str], data_dir: str | None = None,
                        dropped: Counter[str] | None = None) -> list[Instruction]:
    """The instructions and good responses of every dataset spec and pair table file (see the module
    doc); an instruction that two sources share is kept once (the first source's)."""
    out: list[Instruction] = []
    for spec in sets:
        ds = load_dataset_spec(spec, data_dir)
        if ds.pairs is not None and ds.pref_columns:
            got = preferred_instructions(ds.pairs, ds.pref_columns, spec, dropped)
        elif ds.items is not None and ds.human_columns and "response" in ds.items.columns:
            got = rated_instructions(ds.items, ds.human_columns[0], ds.human_higher_is_better, spec)
        else:
            got = reference_instructions(ds.pairs if ds.pairs is not None else ds.items, spec)
        if not got:
            raise EvalignError(f"{spec}: no good response to build from (no human preferences, ratings or references)")
        out += got
    for f in files:
        table = read_pairs(f)
        prefs = [c for c in table.columns if str(c).startswith("pref_")]
        got = preferred_instructions(table, prefs, Path(f).stem, dropped) if prefs else \
            reference_instructions(table, Path(f).stem)
        if not got:
            raise EvalignError(f"{f}: no good response to build from (no pref_* column and no reference)")
        out += got
    seen: dict[str, Instruction] = {}
    for ins in out:
        seen.setdefault(question_key(ins.prompt), ins)
    return list(seen.values())


# --- pure construction ------------------------------------------------------------------------------


def cosine_matrix(vectors: np.ndarray, other: np.ndarray | None = None) -> np.ndarray:
    """Cosine similarity of every row of ``vectors`` with every row of ``other`` (default: itself)."""
    a = np.asarray(vectors, dtype=np.float64)
    b = a if other is None else np.asarray(other, dtype=np.float64)

    def unit(x: np.ndarray) -> np.ndarray:
        n = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(n == 0, 1.0, n)

    return np.clip(unit(a) @ unit(b).T, -1.0, 1.0)


def neighbours(sim: np.ndarray, band: tuple[float, float], blocked: np.ndarray | None = None) -> np.ndarray:
    """For each instruction (row of the square ``sim``), the most similar other instruction whose
    cosine lies inside ``band`` (inclusive), or -1 when none does; ``blocked[i, j]`` True excludes j for i."""
    lo, hi = band
    ok = (sim >= lo) & (sim <= hi)
    np.fill_diagonal(ok, False)
    if blocked is not None:
        ok &= ~blocked
    masked = np.where(ok, sim, -np.inf)
    best = masked.argmax(axis=1)
    return np.where(ok.any(axis=1), best, -1)


def off_topic(sim: np.ndarray, max_sim: float, rng: np.random.Generator,
              blocked: np.ndarray | None = None) -> np.ndarray:
    """For each instruction, a randomly drawn other instruction whose cosine is at most ``max_sim``
    (-1 when none is)."""
    ok = sim <= max_sim
    np.fill_diagonal(ok, False)
    if blocked is not None:
        ok &= ~blocked
    out = np.full(len(sim), -1, dtype=np.int64)
    for i in range(len(sim)):
        cand = np.flatnonzero(ok[i])
        if cand.size:
            out[i] = int(rng.choice(cand))
    return out


def truncate(text: str, fraction: float = 0.5, min_words: int = MIN_TRUNCATE_WORDS) -> str | None:
    """The first ``fraction`` of the words of ``text``, cut back to the last sentence or line end of that
    part when it keeps at least half of it (line breaks and spacing kept as they were); None for a text of
    fewer than ``min_words`` words."""
    tokens = list(re.finditer(r"\S+", text))
    if len(tokens) < min_words:
        return None
    n = max(1, int(len(tokens) * fraction))
    ends = [i for i, tok in enumerate(tokens[:n])
            if (tok.group().endswith((".", "!", "?")) and not tok.group()[:-1].isdigit())
            or text[tok.end(): tok.end() + 1] == "\n"]
    last = ends[-1] if ends and ends[-1] + 1 >= n // 2 else n - 1
    return text[tokens[0].start(): tokens[last].end()]


def _row(ins: Instruction, rejected: str, construction: str, detail: str) -> dict[str, Any]:
    return {"prompt": ins.prompt, "chosen": ins.good, "rejected": rejected, "source": ins.source,
            "question": question_key(ins.prompt), "pair_id": f"{ins.source}/{ins.item}/{construction}",
            "construction": construction, "detail": detail}


def contrastive_rows(instructions: Sequence[Instruction], sim: np.ndarray, *,
                     neighbor_band: tuple[float, float] = (0.45, 0.85), off_topic_max: float = 0.15,
                     constructions: Sequence[str] = CONSTRUCTIONS, seed: int = 0,
                     skipped: Counter[str] | None = None) -> list[dict[str, Any]]:
    """The contrastive rows of ``instructions`` (``sim``: their cosine matrix), each with ``construction``
    and ``detail`` (see the module doc); an instruction that gets no row of a construction is counted in
    ``skipped`` (``no_neighbor``, ``too_short``, ``no_off_topic``, ``no_constraint``, ``constraint_unbreakable``)."""
    unknown = set(constructions) - set(CONSTRUCTIONS)
    if unknown:
        raise EvalignError(f"unknown construction(s) {', '.join(sorted(unknown))}; known: {', '.join(CONSTRUCTIONS)}")
    skipped = Counter() if skipped is None else skipped
    goods = np.array([" ".join(i.good.split()) for i in instructions], dtype=object)
    same_good = goods[:, None] == goods[None, :]  # never pair a response against itself
    rng = np.random.default_rng(seed)
    near = neighbours(sim, neighbor_band, same_good) if "neighbor" in constructions else None
    far = off_topic(sim, off_topic_max, rng, same_good) if "off_topic" in constructions else None
    rows: list[dict[str, Any]] = []
    for i, ins in enumerate(instructions):
        if near is not None:
            j = int(near[i])
            if j < 0:
                skipped["no_neighbor"] += 1
            else:
                rows.append(_row(ins, instructions[j].good, "neighbor",
                                 f"cos {sim[i, j]:.3f} to {question_key(instructions[j].prompt)}"))
        if "truncated" in constructions:
            cut = truncate(ins.good)
            if cut is None:
                skipped["too_short"] += 1
            else:
                rows.append(_row(ins, cut, "truncated", f"{len(cut.split())} of {len(ins.good.split())} words"))
        if far is not None:
            j = int(far[i])
            if j < 0:
                skipped["no_off_topic"] += 1
            else:
                rows.append(_row(ins, instructions[j].good, "off_topic",
                                 f"cos {sim[i, j]:.3f} to {question_key(instructions[j].prompt)}"))
        if "constraint" in constructions:
            c = find_constraint(ins.prompt)
            if c is None:
                skipped["no_constraint"] += 1
                continue
            bad = broken(c, ins.good)
            if bad is None:
                skipped["constraint_unbreakable"] += 1
            else:
                rows.append(_row(ins, bad, "constraint", c.describe()))
    return rows


def length_ratio(row: Mapping[str, Any]) -> float:
    """Characters of the chosen response over characters of the rejected one (inf for an empty rejected)."""
    rej = len(row["rejected"])
    return float("inf") if rej == 0 else len(row["chosen"]) / rej


def in_length_band(rows: Sequence[Mapping[str, Any]], band: tuple[float, float] | None) -> np.ndarray:
    """Which ``rows`` have a :func:`length_ratio` inside ``band`` (inclusive; None: all)."""
    if band is None:
        return np.ones(len(rows), dtype=bool)
    lo, hi = band
    return np.array([lo <= length_ratio(r) <= hi for r in rows], dtype=bool)


def embedding_duplicates(sim_to_held: np.ndarray, threshold: float) -> np.ndarray:
    """Which rows of ``sim_to_held`` (instructions x held-out prompts) have a cosine >= ``threshold``
    with some held-out prompt."""
    if sim_to_held.size == 0:
        return np.zeros(sim_to_held.shape[0], dtype=bool)
    return np.asarray((sim_to_held >= threshold).any(axis=1), dtype=bool)


def mixed_sample(rows: Sequence[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` of ``rows`` drawn without replacement (seeded; all of them when there are fewer), in their order."""
    if n >= len(rows):
        return list(rows)
    pick = np.sort(np.random.default_rng(seed).choice(len(rows), size=n, replace=False))
    return [rows[int(i)] for i in pick]


# --- settings, data, build -------------------------------------------------------------------------


def _band(value: tuple[float, float] | None, name: str) -> None:
    if value is None:
        return
    if len(value) != 2 or not value[0] <= value[1]:
        raise EvalignError(f"{name} must be LO,HI with LO <= HI, got {value}")


@dataclass(frozen=True)
class ContrastiveSettings:
    """What ``judge-data contrastive`` builds: ``sets`` / ``files`` (sources), ``exclude`` (held-out sets;
    None = :data:`DEFAULT_EXCLUDE`, those that do not load skipped with a note), ``near_duplicate``
    (rapidfuzz ratio, 0-100), ``embedding_duplicate`` (cosine from which an instruction duplicates a held-out
    one), ``neighbor_band``, ``off_topic_max``, ``constructions``, ``length_band`` (None: no band),
    ``balance_length``, ``mix`` (preference rows per contrastive row), ``held_out`` (share of questions
    kept aside) and ``seed``, ``embedding_model`` (a sentence-transformers model; ``minilm`` = the bundled
    all-MiniLM-L6-v2), ``data_dir``."""

    sets: tuple[str, ...] = ("pandalm", "tulu1")
    files: tuple[str, ...] = ()
    exclude: tuple[str, ...] | None = None
    near_duplicate: float = 90.0
    embedding_duplicate: float = 0.9
    neighbor_band: tuple[float, float] = (0.45, 0.85)
    off_topic_max: float = 0.15
    constructions: tuple[str, ...] = CONSTRUCTIONS
    length_band: tuple[float, float] | None = None
    balance_length: bool = False
    mix: float = 0.0
    held_out: float = 0.0
    seed: int = 0
    embedding_model: str = "minilm"
    data_dir: str | None = None

    def __post_init__(self) -> None:
        if not self.sets and not self.files:
            raise EvalignError("no contrastive data: give a dataset (--set) or a pair table (--pairs)")
        _band(self.neighbor_band, "--neighbor-band")
        _band(self.length_band, "--length-band")
        if not 0 <= self.near_duplicate <= 100:
            raise EvalignError(f"near_duplicate must be in [0, 100], got {self.near_duplicate}")
        if not 0 <= self.held_out <= 1:
            raise EvalignError(f"held_out must be in [0, 1], got {self.held_out}")
        if self.mix < 0:
            raise EvalignError(f"--mix must be >= 0, got {self.mix}")
        if not self.constructions or set(self.constructions) - set(CONSTRUCTIONS):
            raise EvalignError(f"constructions must be among {', '.join(CONSTRUCTIONS)}, got {self.constructions}")


@dataclass(frozen=True)
class ContrastiveData(PreferenceData):
    """:class:`~evalign.train.preference_data.PreferenceData` of contrastive rows, with the rows per
    construction, the instructions removed as embedding duplicates of each held-out set
    (``overlap_embedding``), what the mixed-in preference rows were, and notes."""

    constructions: dict[str, int] = field(default_factory=dict)
    overlap_embedding: dict[str, int] = field(default_factory=dict)
    instructions: dict[str, Any] = field(default_factory=dict)
    mix: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def manifest(self) -> dict[str, Any]:
        """JSON-friendly summary (what ``manifest.json`` holds)."""
        out = super().manifest()
        out["recipe"] = "contrastive"
        out.update({"constructions": dict(self.constructions), "overlap_embedding": dict(self.overlap_embedding),
                    "instructions": dict(self.instructions), "mix": dict(self.mix), "notes": list(self.notes)})
        return out


#: ``embed(texts)``: one vector per text (rows in order)
Embed = Callable[[Sequence[str]], np.ndarray]


def minilm_embed(model: str = "minilm") -> Embed:
    """An :data:`Embed` with a sentence-transformers model (``minilm``: the bundled all-MiniLM-L6-v2),
    each distinct text encoded once and kept in evalign's embedding cache."""
    from evalign.metrics.embedding import SemScore

    metric = SemScore(model=model)

    def embed(texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        return metric.embed(texts).of(texts) if texts else np.zeros((0, 1), np.float32)

    return embed


def _exclusions(settings: ContrastiveSettings, notes: list[str]) -> dict[str, list[str]]:
    if settings.exclude is not None:
        return held_out_prompts(settings.exclude, settings.data_dir)
    out: dict[str, list[str]] = {}
    for spec in DEFAULT_EXCLUDE:
        try:
            out.update(held_out_prompts((spec,), settings.data_dir))
        except EvalignError as e:
            notes.append(f"held-out set {spec} not deduplicated against: {str(e).splitlines()[0][:160]}")
    return out


def build_contrastive(settings: ContrastiveSettings, embed: Embed | None = None) -> ContrastiveData:
    """The contrastive rows of ``settings`` (see the module doc); ``embed`` (default
    :func:`minilm_embed` of ``settings.embedding_model``) embeds the instructions and held-out prompts."""
    embed = embed or minilm_embed(settings.embedding_model)
    notes: list[str] = []
    dropped: Counter[str] = Counter({"tie": 0, "no_majority": 0})
    instructions = source_instructions(settings.sets, settings.files, settings.data_dir, dropped)
    held = _exclusions(settings, notes)
    prompts = [i.prompt for i in instructions]
    keep, overlap = deduplicated(prompts, held, settings.near_duplicate)
    vectors = embed(prompts)
    overlap_emb: dict[str, int] = {}
    for spec, texts in held.items():
        hit = embedding_duplicates(cosine_matrix(vectors, embed(texts)), settings.embedding_duplicate)
        overlap_emb[spec] = int((hit & keep).sum())
        keep &= ~hit
    idx = np.flatnonzero(keep)
    kept = [instructions[i] for i in idx]
    skipped: Counter[str] = Counter()
    rows = contrastive_rows(kept, cosine_matrix(vectors[idx]) if idx.size else np.zeros((0, 0)),
                            neighbor_band=settings.neighbor_band, off_topic_max=settings.off_topic_max,
                            constructions=settings.constructions, seed=settings.seed, skipped=skipped)
    mix: dict[str, int] = {}
    if settings.mix > 0:
        pref = build_preferences(PreferenceSettings(sets=settings.sets, files=settings.files,
                                                    exclude=tuple(held), near_duplicate=settings.near_duplicate,
                                                    data_dir=settings.data_dir))
        questions = {question_key(k.prompt) for k in kept}
        human = [r for r in pref.train if r["question"] in questions]
        want = round(settings.mix * len(rows))
        added = mixed_sample(human, want, settings.seed)
        mix = {"wanted": want, "available": len(human), "added": len(added)}
        rows += [{**{k: r[k] for k in ("prompt", "chosen", "rejected", "source", "question", "pair_id")},
                  "construction": "human", "detail": f"agreement {r['agreement']:.2f}"} for r in added]
    band = in_length_band(rows, settings.length_band)
    dropped["length_band"] = int((~band).sum())
    rows = [r for r, k in zip(rows, band, strict=True) if k]
    if settings.balance_length and rows:
        balanced = length_balanced(rows, settings.seed)
        dropped["length_balance"] = int((~balanced).sum())
        rows = [r for r, k in zip(rows, balanced, strict=True) if k]
    if not rows:
        raise EvalignError("no contrastive rows left (no instruction had a neighbour, a long enough response or a "
                           "checkable constraint, or every row fell outside the length band)")
    split = split_by_question(rows, held_out=settings.held_out, seed=settings.seed)
    how = Counter(f"{i.source}: {i.how}" for i in kept)
    return ContrastiveData(
        split.train, split.held_out, split.train_questions, split.held_out_questions, dict(dropped), overlap,
        dict(Counter(r["source"] for r in rows)),
        {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.__dict__.items()},
        constructions=dict(Counter(r["construction"] for r in rows)), overlap_embedding=overlap_emb,
        instructions={"read": len(instructions), "kept": len(kept), "good_response": dict(how),
                      "skipped": dict(skipped)},
        mix=mix, notes=tuple(notes))


def contrastive_summary(manifest: Mapping[str, Any]) -> str:
    """:func:`~evalign.train.preference_data.summary_line` plus the rows per construction and the
    embedding duplicates removed."""
    cons = ", ".join(f"{k} {v}" for k, v in manifest["constructions"].items())
    emb = ", ".join(f"{k} {v}" for k, v in manifest["overlap_embedding"].items()) or "none"
    return f"{summary_line(manifest)}; by construction: {cons}; removed as embedding duplicates: {emb}"
