"""What a label store holds, as evalign's tables: the wide table (every column of ITEMS, one column per
annotator, the majority ``verdict``), the long one (one row per label) and the Alt-Test's
``{annotator: {item: label}}``; and the agreement so far (the project's :mod:`evalign.meta.agreement`)."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

import numpy as np

from evalign.annotate.assign import short_items
from evalign.annotate.store import GoldLabel, Label, Store
from evalign.errors import InputError, UsageError
from evalign.io.writers import check_output, write_json_atomic, write_table
from evalign.meta.agreement import cohen_kappa, krippendorff_alpha, majority_vote

#: the export formats
FORMATS = ("wide", "long", "alttest")
#: a pairwise code as the Alt-Test file and the ``verdict`` column write it
VERDICT_WORD = {1.0: "A", -1.0: "B", 0.0: "tie"}


def column_prefix(task: str) -> str:
    """The prefix of an annotator's column: ``pref_`` (pairwise), ``rating_`` (graded), ``label_``."""
    return {"pairwise": "pref_", "graded": "rating_"}.get(task, "label_")


def _by_annotator(labels: list[Label]) -> dict[str, dict[int, Label]]:
    out: dict[str, dict[int, Label]] = {}
    for lab in labels:
        out.setdefault(lab.annotator, {})[lab.idx] = lab
    return {a: out[a] for a in sorted(out)}


def majority(task: str, values: list[Any]) -> Any:
    """The majority ``verdict`` of one item's labels: pairwise ``A`` / ``B`` / ``tie`` (``tie`` without a
    plurality), graded the plurality grade (the median without one), label the plurality label (None
    without one); None without labels."""
    if not values:
        return None
    if task == "label":
        counts: dict[Any, int] = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        top = max(counts.values())
        winners = [v for v, c in counts.items() if c == top]
        return winners[0] if len(winners) == 1 else None
    arr = np.asarray([values], dtype=float)
    if task == "pairwise":
        return VERDICT_WORD[float(majority_vote(arr, fallback=0.0)[0])]
    won = float(majority_vote(arr, fallback=math.nan)[0])
    return won if not math.isnan(won) else float(np.median(arr))


def read_join(path: str | Path, keys: list[str]) -> dict[str, dict[str, Any]]:
    """The records of the table at ``path`` (any evalign table: e.g. the judged pair table ``evalign
    escalate`` split) by item key, for :func:`wide_rows` / :func:`long_rows` ``join``: keyed by ``id``,
    or ``id#turn`` where the store's keys are per turn. Raises :class:`~evalign.errors.InputError` for a
    record without an id, a duplicate key, or a table that holds none of ``keys``."""
    from evalign.annotate.items import plain_value
    from evalign.io.readers import detect_format, iter_records

    meta: dict[str, Any] = {}
    wanted = set(keys)
    out: dict[str, dict[str, Any]] = {}
    for line, rec in iter_records(Path(path), detect_format(path), meta):
        if rec.get("id") is None:
            raise InputError("no id to join on", file=str(path), line=line, field="id",
                             line_word=meta.get("line_word", "line"))
        key = str(plain_value(rec["id"]))
        turn = plain_value(rec.get("turn"))
        if key not in wanted and isinstance(turn, int | float) and f"{key}#{int(turn)}" in wanted:
            key = f"{key}#{int(turn)}"
        if key in out:
            raise InputError(f"duplicate id {key!r}: the rows to join must have one id each", file=str(path),
                             line=line, field="id", line_word=meta.get("line_word", "line"))
        out[key] = {str(k): plain_value(v) for k, v in rec.items()}
    if not wanted & set(out):
        raise InputError("holds none of the labelled items' ids: nothing to join", file=str(path), field="id")
    return out


def _joined(row: dict[str, Any], key: str, join: Mapping[str, Mapping[str, Any]] | None,
            columns: list[str]) -> dict[str, Any]:
    """``row`` with the ``columns`` of ``join``'s record of ``key`` (None without one)."""
    if join is not None:
        rec = join.get(key, {})
        for col in columns:
            row[col] = rec.get(col)
    return row


def _join_columns(join: Mapping[str, Mapping[str, Any]] | None, present: list[str]) -> list[str]:
    """The columns a join adds: those of the joined table the items lack (first seen first), never
    ``verdict`` (the export's own)."""
    if join is None:
        return []
    have = set(present) | {"verdict"}
    cols: dict[str, None] = {}
    for rec in join.values():
        cols.update((c, None) for c in rec if c not in have)
    return list(cols)


def wide_rows(store: Store, join: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The wide export: each item's record (then, with ``join`` (:func:`read_join`), the columns of the
    joined table the items lack, e.g. the judges' verdicts), then ``pref_NAME`` / ``rating_NAME`` /
    ``label_NAME`` for every annotator (None where that annotator gave none), then the majority
    ``verdict``."""
    task = store.settings.task
    labels = store.labels()
    by = _by_annotator(labels)
    prefix = column_prefix(task)
    records = store.records()
    extra = _join_columns(join, [c for _, rec in records for c in rec])
    flagged = any(lab.unsure or lab.broken for lab in labels)
    gold = gold_accuracy(store)
    rows = []
    for idx, (key, rec) in enumerate(records):
        row = _joined(dict(rec), key, join, extra)
        given = []
        for name, labs in by.items():
            lab = labs.get(idx)
            row[f"{prefix}{name}"] = None if lab is None else lab.value
            if lab is not None:
                given.append(lab.value)
        row["verdict"] = majority(task, given)
        for name, labs in by.items() if flagged else ():
            lab = labs.get(idx)
            row[f"unsure_{name}"] = None if lab is None else lab.unsure
            row[f"broken_{name}"] = None if lab is None else lab.broken
        for name in by if gold else ():
            row[f"gold_accuracy_{name}"] = gold.get(name)
        rows.append(row)
    return rows


def long_rows(store: Store, join: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The long export: one row per label, in the order given: the item's record (and the columns
    ``join`` adds, as in :func:`wide_rows`), then ``annotator``, ``label``, ``shown`` (the left/right order
    of a pair: ``ab`` = response_a on the left), ``seconds``, ``comment``, ``unsure`` and ``broken`` (the
    annotator's flags), ``labelled_at`` (UTC, ISO 8601) and, where the store has gold items,
    ``gold_accuracy`` (the annotator's). Gold items' labels are not rows."""
    records = store.records()
    extra = _join_columns(join, [c for _, rec in records for c in rec])
    gold = gold_accuracy(store)
    out = []
    for lab in store.labels():
        row = _joined(dict(records[lab.idx][1]), lab.key, join, extra)
        row.update({"annotator": lab.annotator, "label": lab.value, "shown": lab.shown, "seconds": lab.seconds,
                    "comment": lab.comment, "unsure": lab.unsure, "broken": lab.broken,
                    "labelled_at": _dt.datetime.fromtimestamp(lab.created, _dt.timezone.utc).isoformat()})
        if gold:
            row["gold_accuracy"] = gold.get(lab.annotator)
        out.append(row)
    return out


def _gold_by_annotator(labels: list[GoldLabel]) -> dict[str, tuple[int, int]]:
    """Each annotator's (correct, answered) gold labels (skipped ones left out)."""
    out: dict[str, tuple[int, int]] = {}
    for g in labels:
        if g.value is None:
            continue
        right, n = out.get(g.annotator, (0, 0))
        out[g.annotator] = (right + (g.value == g.answer), n + 1)
    return out


def gold_accuracy(store: Store) -> dict[str, float | None]:
    """Each annotator's share of gold items answered right (None for one without a gold answer yet);
    empty when the store has no gold items."""
    if not store.gold_items():
        return {}
    counts = _gold_by_annotator(store.gold_labels())
    names = set(store.labels_per_annotator()) | set(counts)
    return {a: (counts[a][0] / counts[a][1] if a in counts else None) for a in sorted(names)}


@dataclass(frozen=True)
class AnnotatorStats:
    """One annotator's work so far (the admin view).

    Attributes:
        name: the annotator.
        labels: labels given (gold items aside).
        median_seconds: median seconds an item was on screen before its label, or None.
        gold_correct: gold items answered right.
        gold_total: gold items answered (skipped ones aside).
        unsure: labels marked unsure.
        broken: labels flagging a broken item.
    """

    name: str
    labels: int
    median_seconds: float | None
    gold_correct: int
    gold_total: int
    unsure: int
    broken: int

    @property
    def gold_accuracy(self) -> float | None:
        """``gold_correct / gold_total`` (None without a gold answer)."""
        return self.gold_correct / self.gold_total if self.gold_total else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values."""
        return {"name": self.name, "labels": self.labels, "median_seconds": self.median_seconds,
                "gold_correct": self.gold_correct, "gold_total": self.gold_total,
                "gold_accuracy": self.gold_accuracy, "unsure": self.unsure, "broken": self.broken}


def annotator_stats(store: Store) -> list[AnnotatorStats]:
    """Per annotator (every one with a label, and every one invited), by name: labels, median seconds
    per item, gold accuracy, unsure and broken flags."""
    by = _by_annotator(store.labels())
    gold = _gold_by_annotator(store.gold_labels())
    out = []
    for name in sorted(set(by) | set(gold) | store.invited()):
        labs = list(by.get(name, {}).values())
        secs = [lab.seconds for lab in labs if lab.seconds is not None]
        right, n = gold.get(name, (0, 0))
        out.append(AnnotatorStats(name, len(labs), float(np.median(secs)) if secs else None, right, n,
                                  sum(lab.unsure for lab in labs), sum(lab.broken for lab in labs)))
    return out


def case_variants(names: list[str]) -> tuple[tuple[str, ...], ...]:
    """The groups of ``names`` that differ only in case (labels of a store from before names were
    case-normalised)."""
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(n.lower(), []).append(n)
    return tuple(tuple(sorted(g)) for g in groups.values() if len(g) > 1)


def alttest_labels(store: Store) -> dict[str, dict[str, Any]]:
    """The Alt-Test's annotators file: ``{annotator: {item key: label}}`` (pairs as ``A`` / ``B`` / ``tie``)."""
    task = store.settings.task
    out: dict[str, dict[str, Any]] = {}
    for name, labs in _by_annotator(store.labels()).items():
        out[name] = {lab.key: VERDICT_WORD[float(lab.value)] if task == "pairwise" else lab.value
                     for lab in sorted(labs.values(), key=lambda x: x.idx)}
    return out


@dataclass(frozen=True)
class PairAgreement:
    """Cohen's kappa of two annotators on the items both labelled (weighted, quadratic, for grades)."""

    a: str
    b: str
    n_items: int
    kappa: float


@dataclass(frozen=True)
class Agreement:
    """The agreement so far.

    Attributes:
        n_items: items in the store.
        per_item: labels each item needs (K).
        labels_per_annotator: labels each annotator gave.
        pairs: Cohen's kappa of each annotator pair.
        alpha: Krippendorff's alpha of every annotator (nominal for pairs and labels, ordinal for grades).
        short: keys of the items still short of K labels.
        case_variants: annotator names differing only in case (from before names were case-normalised).
    """

    n_items: int
    per_item: int
    labels_per_annotator: Mapping[str, int]
    pairs: tuple[PairAgreement, ...]
    alpha: float
    short: tuple[str, ...]
    case_variants: tuple[tuple[str, ...], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The agreement as JSON-ready values (NaN as None)."""
        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 4)

        return {"n_items": self.n_items, "per_item": self.per_item,
                "labels_per_annotator": dict(self.labels_per_annotator),
                "pairs": [{"a": p.a, "b": p.b, "n_items": p.n_items, "kappa": num(p.kappa)} for p in self.pairs],
                "krippendorff_alpha": num(self.alpha), "short_of_k": list(self.short),
                "case_variants": [list(g) for g in self.case_variants]}


def agreement(store: Store) -> Agreement:
    """Per annotator pair Cohen's kappa (quadratic weights for grades), Krippendorff's alpha of all,
    labels per annotator and the items still short of K (the project's :mod:`evalign.meta.agreement`)."""
    settings = store.settings
    n = store.n_items()
    by = _by_annotator(store.labels())
    codes: dict[Any, float] = {lab: float(i) for i, lab in enumerate(settings.labels)}
    matrix = np.full((len(by), n), np.nan)
    for r, labs in enumerate(by.values()):
        for idx, lab in labs.items():
            matrix[r, idx] = codes[lab.value] if settings.task == "label" else float(lab.value)
    weights: Literal["quadratic"] | None = "quadratic" if settings.task == "graded" else None
    cats = [1.0, 2.0, 3.0, 4.0, 5.0] if settings.task == "graded" else None
    pairs = []
    names = list(by)
    for i, j in combinations(range(len(names)), 2):
        both = int((~np.isnan(matrix[i]) & ~np.isnan(matrix[j])).sum())
        kappa = cohen_kappa(matrix[i], matrix[j], weights=weights, labels=cats) if both else math.nan
        pairs.append(PairAgreement(names[i], names[j], both, float(kappa)))
    level: Literal["ordinal", "nominal"] = "ordinal" if settings.task == "graded" else "nominal"
    alpha = krippendorff_alpha(matrix, level=level) if len(names) >= 2 else math.nan
    counts = store.counts()
    keys = [k for k, _ in store.records()]
    return Agreement(n_items=n, per_item=settings.per_item,
                     labels_per_annotator={a: len(labs) for a, labs in by.items()}, pairs=tuple(pairs),
                     alpha=float(alpha), short=tuple(keys[i] for i in short_items(counts, settings.per_item)),
                     case_variants=case_variants(names))


def agreement_text(ag: Agreement) -> str:
    """The agreement as ``annotate status`` prints it."""
    def num(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.3f}"

    lines = [f"{ag.n_items} items, {ag.per_item} labels each wanted; {len(ag.short)} still short of {ag.per_item}"]
    lines.append("labels per annotator: " + (", ".join(f"{a} {c}" for a, c in ag.labels_per_annotator.items())
                                             or "none yet"))
    for p in ag.pairs:
        lines.append(f"  kappa {p.a} ~ {p.b}: {num(p.kappa)} on {p.n_items} items")
    lines.append(f"Krippendorff's alpha: {num(ag.alpha)}")
    for group in ag.case_variants:
        lines.append(f"names differing only in case (labels kept apart; new labels go to the lower-case name): "
                     f"{', '.join(group)}")
    if ag.short:
        shown = ", ".join(ag.short[:10]) + (f", ... ({len(ag.short) - 10} more)" if len(ag.short) > 10 else "")
        lines.append(f"short of {ag.per_item}: {shown}")
    return "\n".join(lines)


def write_export(store_path: str | Path, out: str, format: str = "wide", join: str | Path | None = None) -> int:
    """Write the labels of the store at ``store_path`` to ``out`` in ``format`` (:data:`FORMATS`); the
    number of rows (wide) or labels (long, alttest) written. The store keeps the items: no ITEMS needed.
    ``join``: a table whose columns the items lack are added, joined by id (:func:`read_join`)."""
    if format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if format == "alttest" and not str(out).endswith(".json"):
        raise UsageError(f"{out}: --format alttest writes JSON ({{annotator: {{item: label}}}}); name a .json file")
    if format == "alttest" and join is not None:
        raise UsageError("--join goes with --format wide or long (the Alt-Test file holds labels only)")
    if format != "alttest":
        check_output(out)
    store = Store(store_path, must_exist=True)
    try:
        store.settings  # noqa: B018  (a store without a task is refused here)
        if format == "alttest":
            labels = alttest_labels(store)
            write_json_atomic(out, labels)
            return sum(len(v) for v in labels.values())
        import pandas as pd  # pandas is imported where a table is written

        joined = None if join is None else read_join(join, [k for k, _ in store.records()])
        rows = wide_rows(store, joined) if format == "wide" else long_rows(store, joined)
        write_table(pd.DataFrame(rows), out)
        return len(rows)
    finally:
        store.close()


def store_agreement(store_path: str | Path) -> Agreement:
    """The agreement so far of the store at ``store_path`` (``evalign annotate status``)."""
    store = Store(store_path, must_exist=True)
    try:
        return agreement(store)
    finally:
        store.close()
