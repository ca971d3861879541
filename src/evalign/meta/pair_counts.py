"""A pair table's preference accuracies counted chunk by chunk: a table of any length in bounded memory.

Preference accuracy (with ties at a calibrated epsilon, without ties at epsilon 0) gives every pair a
credit ``(num, den)`` in ``{0, 1} x {0, 1}``, so everything a trust table needs of it is counts
(:mod:`evalign.meta.sufficient`): per group and metric how many pairs take each credit, and per pair of
metrics the joint counts (for the paired tests). This module counts them over the chunks of a table
(slices of a DataFrame, or batches of a Parquet file's row groups), the parts of the table read by up to
``workers`` processes (:func:`~evalign.meta.workers.parallel_map`; the counts do not depend on how
many), in two passes:

1. **calibrate**: per metric, how many usable pairs have each distinct ``|a - b|`` (all, human ties,
   concordant), merged over the chunks; the epsilon is the smallest one maximising the accuracy with
   ties, the same integers and the same first maximum as
   :func:`evalign.meta.pairwise.calibrate_preference_epsilon` on all pairs at once (memory: the
   distinct differences, a handful when scores are rounded);
2. **count**: per group, statistic and metric the counts of the four credit cells, and per pair of
   metrics the ``4 x 4`` joint counts of the ranking statistic's cells (from one count of a code holding
   every metric's cell when there are few metrics, else pair by pair).

Memory is one chunk per process plus ``O(groups x metrics^2)`` counts; the results are the credits of
:func:`evalign.meta.significance.units_of` on the whole table, value for value (so the trust table's
values, epsilons, intervals and p-values are those of the item-array path with the same seed). Pure
functions of the chunks (the reading is the callables' business: :func:`frame_chunks`,
:func:`evalign.io.readers.parquet_parts`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.meta.breakdown import ALL, group_label, pair_matrices
from evalign.meta.pairwise import CONCORDANT, HUMAN_TIE, preference_labels, preference_pairs
from evalign.meta.significance import Units, make_statistic
from evalign.meta.sufficient import Credits, JointCounts, ratio
from evalign.meta.workers import parallel_map

T = TypeVar("T")

#: the statistics counted here, and whether each counts human ties
COUNTED = {"preference_accuracy": True, "preference_accuracy_no_ties": False}
#: the credit cells ``num * 2 + den``: their numerators and denominators
CELL_NUM = np.array([0.0, 0.0, 1.0, 1.0])
CELL_DEN = np.array([0.0, 1.0, 0.0, 1.0])
#: rows per chunk of a DataFrame (a Parquet file is read in batches of this many rows too)
CHUNK_ROWS = 250_000

#: the chunks of a table, in parts read independently (a worker process may read any part): each
#: part a callable giving, each time it is called, an iterator of ``(row number of the chunk's first
#: row, chunk as a DataFrame)`` over that part of the table
Chunks = Sequence[Callable[[], Iterator[tuple[int, pd.DataFrame]]]]


def frame_chunks(frame: pd.DataFrame, rows: int = CHUNK_ROWS) -> Chunks:
    """The :data:`Chunks` of a DataFrame: consecutive slices of at most ``rows`` rows (views, no copy),
    one part each."""
    rows = max(1, int(rows))

    def part(start: int) -> Callable[[], Iterator[tuple[int, pd.DataFrame]]]:
        return lambda: iter([(start + 1, frame.iloc[start:start + rows])])

    return [part(start) for start in range(0, len(frame), rows)]


def _map(fn: Callable[[int], T], chunks: Chunks, workers: int | None) -> list[T]:
    """``fn`` of every part's index, by up to ``workers`` processes (the parts' results in order)."""
    return parallel_map(fn, range(len(chunks)), workers if len(chunks) > 1 else 1)


@dataclass(frozen=True)
class PairTable:
    """What to read of a pair table's chunks: the annotator columns, the metrics (``<m>_a`` / ``<m>_b``),
    those to negate, the ``by`` column (None, a column, or ``system`` for the pairs of each system as A
    or B) and the file named in errors."""

    pref_columns: Sequence[str]
    metrics: Sequence[str]
    lower_is_better: Sequence[str] = ()
    by: str | None = None
    source: str | None = None

    def columns(self) -> list[str]:
        """The columns the counts read, in table order of the request."""
        cols = [*self.pref_columns, *(f"{m}_{s}" for m in self.metrics for s in ("a", "b"))]
        if self.by == "system":
            cols += ["system_a", "system_b"]
        elif self.by is not None:
            cols.append(self.by)
        return list(dict.fromkeys(cols))


@dataclass(frozen=True)
class _Chunk:
    size: int  # rows
    human: np.ndarray  # one checked label per pair (the annotators' majority; no majority = tie)
    metrics: Mapping[str, np.ndarray]  # 2 x pairs
    groups: Mapping[str, np.ndarray]  # group name -> rows of this chunk (``ALL`` left out)


def _groups(frame: pd.DataFrame, by: str | None, source: str | None) -> dict[str, np.ndarray]:
    """The rows of each group of ``by`` in one chunk (as :func:`evalign.meta.breakdown.group_index`)."""
    if by is None:
        return {}
    need = ["system_a", "system_b"] if by == "system" else [by]
    for c in need:
        if c not in frame.columns:
            raise InputError(f"no group column '{c}'", file=source, field=c)
    if by == "system":
        sys_a = frame["system_a"].astype(str).to_numpy()
        sys_b = frame["system_b"].astype(str).to_numpy()
        return {s: np.flatnonzero((sys_a == s) | (sys_b == s)) for s in set(sys_a) | set(sys_b)}
    codes, uniques = pd.factorize(frame[by], use_na_sentinel=False)
    names = [group_label(u) for u in uniques.tolist()]
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(len(names) + 1))
    out: dict[str, list[np.ndarray]] = {}
    for k, name in enumerate(names):  # two values with one label (1 and "1") are one group
        out.setdefault(name, []).append(order[starts[k]:starts[k + 1]])
    return {name: np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0] for name, parts in out.items()}


def _read(part: Callable[[], Iterator[tuple[int, pd.DataFrame]]], table: PairTable) -> Iterator[_Chunk]:
    for first, frame in part():
        prefs, ms = pair_matrices(frame, table.pref_columns, table.metrics, lower_is_better=table.lower_is_better,
                                  first_line=first, source=table.source)
        yield _Chunk(len(frame), preference_labels(prefs.T), ms, _groups(frame, table.by, table.source))


# --------------------------------------------------------------------------------------------
# pass 1: calibration


@dataclass(frozen=True)
class DistanceCounts:
    """Per distinct ``|a - b|`` of the usable pairs (``values``, increasing): how many pairs have it
    (``total``), how many of them are human ties (``ties``) and concordant (``concordant``)."""

    values: np.ndarray
    total: np.ndarray
    ties: np.ndarray
    concordant: np.ndarray


def merge_distance_counts(parts: Iterable[DistanceCounts]) -> DistanceCounts:
    """The :class:`DistanceCounts` of several sets of pairs together (values sorted, counts added)."""
    parts = list(parts)
    values = np.concatenate([p.values for p in parts]) if parts else np.empty(0)
    codes, uniq = pd.factorize(values)
    order = np.argsort(uniq, kind="stable")
    rank = np.empty(order.size, dtype=np.intp)
    rank[order] = np.arange(order.size)
    where = rank[codes]

    def merged(field: str) -> np.ndarray:
        w = np.concatenate([getattr(p, field) for p in parts]) if parts else np.empty(0, dtype=np.int64)
        return np.bincount(where, weights=w, minlength=uniq.size).round().astype(np.int64)  # exact below 2**53

    return DistanceCounts(np.asarray(uniq, dtype=np.float64)[order], merged("total"), merged("ties"),
                          merged("concordant"))


def distance_counts(dist: np.ndarray, code: np.ndarray) -> DistanceCounts:
    """The :class:`DistanceCounts` of usable pairs given by their ``|a - b|`` and pair codes (those of
    :func:`evalign.meta.pairwise.preference_pairs`: 0, 1 or 2), by a hash count (no sort of the pairs)."""
    codes, uniq = pd.factorize(dist)
    k = uniq.size
    both = np.bincount(codes * 3 + code, minlength=3 * k).reshape(k, 3)  # (distance, pair code): one count
    order = np.argsort(uniq, kind="stable")
    return DistanceCounts(np.asarray(uniq, dtype=np.float64)[order], both.sum(axis=1)[order],
                          both[order, HUMAN_TIE], both[order, CONCORDANT])


def calibrated_epsilon(counts: DistanceCounts) -> float:
    """The smallest epsilon maximising the accuracy with ties (candidates: 0 and every distinct
    ``|a - b|``), from the counts: the choice of :func:`evalign.meta.pairwise.calibrate_preference_epsilon`
    on the pairs themselves (the same integer accuracies, the same first maximum); 0 without pairs."""
    if int(counts.total.sum()) == 0:
        return 0.0
    base = float(counts.concordant.sum())
    eps = counts.values
    val = base + (np.cumsum(counts.ties) - np.cumsum(counts.concordant)).astype(np.float64)
    if eps.size == 0 or eps[0] != 0.0:
        eps, val = np.r_[0.0, eps], np.r_[base, val]
    return float(eps[int(np.argmax(val))])


def epsilons(chunks: Chunks, table: PairTable, statistics: Sequence[str],
             workers: int | None = 1) -> dict[str, dict[str, float]]:
    """Pass 1: ``{statistic: {metric: epsilon}}`` calibrated on all pairs (with ties: the calibrated
    epsilon; without ties: 0, the metric must pick a side). ``workers``: processes reading the parts
    (:func:`~evalign.meta.workers.parallel_map`; the result does not depend on it)."""
    unknown = [s for s in statistics if s not in COUNTED]
    if unknown:
        raise InputError(f"statistic '{unknown[0]}' is not counted by chunks (use {' or '.join(COUNTED)})",
                         field="statistic")
    out = {s: dict.fromkeys(table.metrics, 0.0) for s in statistics}
    if not any(COUNTED[s] for s in statistics):
        return out

    def part(k: int) -> dict[str, DistanceCounts]:
        found: dict[str, list[DistanceCounts]] = {m: [] for m in table.metrics}
        for ch in _read(chunks[k], table):
            for m, x in ch.metrics.items():
                _, _, dist, code = preference_pairs(None, x[0], x[1], labels=ch.human)
                found[m].append(distance_counts(dist, code))
        return {m: merge_distance_counts(v) for m, v in found.items()}

    parts: dict[str, list[DistanceCounts]] = {m: [] for m in table.metrics}
    for found in _map(part, chunks, workers):
        for m, c in found.items():
            parts[m].append(c)
            if len(parts[m]) > 8:  # bounded: merge as they come
                parts[m] = [merge_distance_counts(parts[m])]
    for m in table.metrics:
        eps = calibrated_epsilon(merge_distance_counts(parts[m]))
        for s in statistics:
            if COUNTED[s]:
                out[s][m] = eps
    return out


# --------------------------------------------------------------------------------------------
# pass 2: credit counts


@dataclass
class GroupCounts:
    """The counts of one group: ``n`` pairs; ``cells[statistic][metric]``: how many pairs take each
    credit cell (``num * 2 + den``, int64, length 4); ``joint[(i, j)]``: the ``4 x 4`` joint cells of
    metrics ``i < j`` (their positions in the metric list) under the ranking statistic."""

    n: int
    cells: dict[str, dict[str, np.ndarray]]
    joint: dict[tuple[int, int], np.ndarray]


def _cells(human: np.ndarray, x: np.ndarray, eps: Mapping[str, Mapping[str, float]], metric: str
           ) -> dict[str, np.ndarray]:
    """Each statistic's credit cell of every pair of one chunk (uint8; 0 = the pair does not count)."""
    valid, p, dist, code = preference_pairs(None, x[0], x[1], labels=human)
    out = {}
    for s, e in eps.items():
        counts = np.ones(p.size, dtype=bool) if COUNTED[s] else p != 0
        correct = np.where(dist <= e[metric], code == HUMAN_TIE, code == CONCORDANT) & counts
        cell = np.zeros(valid.size, dtype=np.uint8)
        cell[valid] = correct.astype(np.uint8) * 2 + counts
        out[s] = cell
    return out


#: a credit cell's ternary digit (cells 0, 1, 3; cell 2, a numerator without a denominator, never occurs)
_DIGIT = np.array([0, 1, 0, 2], dtype=np.int32)
_CELL_OF_DIGIT = np.array([0, 1, 3])


def _tally(gc: GroupCounts, cells: Mapping[str, Mapping[str, np.ndarray]], metrics: Sequence[str], statistic: str,
           size: int, sel: np.ndarray | None) -> None:
    """Add one chunk's rows ``sel`` (None: all ``size`` rows) to a group's counts."""
    pick = (lambda v: v) if sel is None else (lambda v: v[sel])
    rows = size if sel is None else int(sel.size)
    gc.n += rows
    for s, by_metric in cells.items():
        for m, cell in by_metric.items():
            gc.cells[s][m] += np.bincount(pick(cell), minlength=4)
    first = [pick(cells[statistic][m]) for m in metrics]
    k = len(first)
    if k < 2:
        return
    if 3**k <= max(rows, 729):  # every metric's digit in one code: one count, then each pair's margin
        code = np.zeros(rows, dtype=np.int32)
        for c in first:
            code *= 3
            code += _DIGIT[c]
        table = np.bincount(code, minlength=3**k).reshape((3,) * k)  # axis i = metric i
        grid = np.ix_(_CELL_OF_DIGIT, _CELL_OF_DIGIT)
        for i in range(k):
            for j in range(i + 1, k):
                gc.joint[(i, j)][grid] += table.sum(axis=tuple(a for a in range(k) if a not in (i, j)))
        return
    for i in range(k):  # pair by pair
        scaled = first[i] * np.uint8(4)
        for j in range(i + 1, k):
            gc.joint[(i, j)] += np.bincount(scaled + first[j], minlength=16).reshape(4, 4)


def count_groups(chunks: Chunks, table: PairTable, eps: Mapping[str, Mapping[str, float]],
                 statistic: str, workers: int | None = 1) -> dict[str, GroupCounts]:
    """Pass 2: the :class:`GroupCounts` of every group (``ALL`` first, then by name) at the epsilons of
    pass 1 (``eps``: ``{statistic: {metric: epsilon}}``, the ranking ``statistic`` among them);
    ``workers`` as for :func:`epsilons`."""
    metrics = list(table.metrics)

    def empty() -> GroupCounts:
        return GroupCounts(0, {s: {m: np.zeros(4, dtype=np.int64) for m in metrics} for s in eps},
                           {(i, j): np.zeros((4, 4), dtype=np.int64) for i in range(len(metrics))
                            for j in range(i + 1, len(metrics))})

    def part(k: int) -> dict[str, GroupCounts]:
        found = {ALL: empty()}
        for ch in _read(chunks[k], table):
            cells: dict[str, dict[str, np.ndarray]] = {s: {} for s in eps}
            for m in metrics:
                for s, cell in _cells(ch.human, ch.metrics[m], eps, m).items():
                    cells[s][m] = cell
            _tally(found[ALL], cells, metrics, statistic, ch.size, None)
            for g, sel in ch.groups.items():
                _tally(found.setdefault(g, empty()), cells, metrics, statistic, ch.size, sel)
        return found

    total: dict[str, GroupCounts] = {}
    for found in _map(part, chunks, workers):
        for g, gc in found.items():
            _add(total.setdefault(g, empty()), gc)
    return {ALL: total.pop(ALL, empty()), **dict(sorted(total.items()))}


def _add(into: GroupCounts, more: GroupCounts) -> None:
    into.n += more.n
    for s, by_metric in more.cells.items():
        for m, c in by_metric.items():
            into.cells[s][m] += c
    for key, c in more.joint.items():
        into.joint[key] += c


# --------------------------------------------------------------------------------------------
# counts -> the units of a trust table


def cell_value(cells: np.ndarray) -> float:
    """The statistic of a group from its cell counts: ``sum(num) / sum(den)`` (NaN when no pair counts),
    as :func:`evalign.meta.statistics.units_ratio` computes it on the pairs (integer sums: exact)."""
    num, den = float(cells @ CELL_NUM), float(cells @ CELL_DEN)
    return float(ratio(num, den)) if den else float("nan")


def group_units(gc: GroupCounts, eps: Mapping[str, Mapping[str, float]], statistic: str,
                metrics: Sequence[str]) -> dict[str, Units]:
    """Each metric's :class:`~evalign.meta.significance.Units` of the ranking statistic on one group:
    credits counted without their items, paired through their joint counts (:class:`JointCounts`)."""
    present = {m: np.flatnonzero(gc.cells[statistic][m]) for m in metrics}
    joint = JointCounts()
    for (i, j), mat in gc.joint.items():
        a, b = metrics[i], metrics[j]
        joint.add(a, b, mat[np.ix_(present[a], present[b])])
    out = {}
    for m in metrics:
        cells, keep = gc.cells[statistic][m], present[m]
        cr = Credits(num=CELL_NUM[keep], den=CELL_DEN[keep], counts=cells[keep].astype(np.int64), codes=None, key=m,
                     joint=joint)
        params = make_statistic(statistic, epsilon=eps[statistic][m]).bind(np.empty((1, 0)), np.empty((2, 0))).params
        out[m] = Units(cell_value(cells), credits=cr, params=dict(params))
    return out


__all__ = ["CELL_DEN", "CELL_NUM", "CHUNK_ROWS", "COUNTED", "Chunks", "DistanceCounts", "GroupCounts", "PairTable",
           "calibrated_epsilon", "cell_value", "count_groups", "distance_counts", "epsilons", "frame_chunks",
           "group_units", "merge_distance_counts"]
