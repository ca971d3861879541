"""The bench's fixed, seeded, stratified sample of one set.

A unit is a pair (pair tables: its ``id``) or a graded response (item tables: ``id`` and ``system``).
The units are split into strata by the ``stratify`` columns (``label``: the annotators' majority label
of a pair, A / B / tie); ``n`` units are shared among the strata in proportion to their sizes (largest
remainders; ties of remainders to the larger stratum, then the first in sorted order), and within a
stratum the units with the smallest ``sha256(seed, set, unit)`` are taken. The sample depends only on
the seed, the set's key and the units' own names: not on the row order, the platform or a random
generator's algorithm, and a unit drawn at ``n`` stays drawn at a larger ``n`` whenever its stratum's
share does not shrink (largest remainders can, rarely, give a stratum one unit less for a larger ``n``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalign.bench.suite import LABEL
from evalign.errors import InputError
from evalign.meta.agreement import majority_vote
from evalign.signature import stable_hash

_LABEL_NAMES = {1.0: "A", -1.0: "B", 0.0: "tie"}


def unit_names(table: pd.DataFrame) -> list[str]:
    """The name of each row's unit: a pair's ``id``; a graded response's ``id`` and ``system``."""
    ids = table["id"].astype(str)
    if "system" in table.columns and "response" in table.columns:
        return [f"{i}\x1f{s}" for i, s in zip(ids, table["system"].astype(str), strict=True)]
    return ids.tolist()


def pair_labels(table: pd.DataFrame, pref: Sequence[str]) -> list[str]:
    """Each pair's majority label among the annotator columns ``pref``: ``A``, ``B``, ``tie`` (no
    majority) or ``none`` (no label)."""
    votes = majority_vote(table[list(pref)].to_numpy(dtype=float), fallback=0.0)
    return [_LABEL_NAMES.get(float(v), "none") for v in votes]


def strata(table: pd.DataFrame, stratify: Sequence[str], pref: Sequence[str] = (), *, source: str = "") -> list[str]:
    """Each row's stratum (the values of the ``stratify`` columns, joined); ``label`` is the pair's
    majority label (:func:`pair_labels` of ``pref``)."""
    parts: list[list[str]] = []
    for col in stratify:
        if col == LABEL and col not in table.columns:
            if not pref:
                raise InputError("the 'label' stratum needs the annotator columns of a pair table", file=source or None,
                                 field="stratify")
            parts.append(pair_labels(table, pref))
        elif col not in table.columns:
            raise InputError(f"no column '{col}' to stratify by", file=source or None, field="stratify")
        else:
            parts.append(["" if pd.isna(v) else str(v) for v in table[col].tolist()])
    return ["\x1f".join(p) for p in zip(*parts, strict=True)] if parts else [""] * len(table)


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """How many of ``n`` units each stratum gets: proportional to its size, the remainders given to
    the largest fractions (ties: the larger stratum, then the first name in sorted order); never
    more than a stratum holds."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    quota = {k: n * v / total for k, v in sizes.items()}
    out = {k: min(sizes[k], math.floor(q)) for k, q in quota.items()}
    left = n - sum(out.values())
    order = sorted(sizes, key=lambda k: (-(quota[k] - math.floor(quota[k])), -sizes[k], k))
    while left > 0:
        for k in order:
            if left and out[k] < sizes[k]:
                out[k] += 1
                left -= 1
    return out


def sample_set(table: pd.DataFrame, n: int | None, *, seed: int, key: str, stratify: Sequence[str] = (),
               pref: Sequence[str] = (), source: str = "") -> pd.DataFrame:
    """The sample of ``n`` units of ``table`` (all of them when ``n`` is None or at least their
    number), in the table's order, index reset. ``key``: the set's name (part of every unit's hash);
    ``pref``: the annotator columns (for the ``label`` stratum)."""
    if n is not None and n < 1:
        raise InputError(f"the sample size must be >= 1, got {n}", field="per_set")
    units = unit_names(table)
    if len(set(units)) < len(units):
        dup = next(u for u in units if units.count(u) > 1)
        raise InputError(f"unit {dup.replace(chr(31), ' / ')!r} appears twice: cannot sample it", file=source or None,
                         field="id")
    if n is None or n >= len(table):
        return table.reset_index(drop=True)
    layers = strata(table, stratify, pref, source=source)
    sizes: dict[str, int] = {}
    for s in layers:
        sizes[s] = sizes.get(s, 0) + 1
    quota = allocate(sizes, n)
    ranks = [stable_hash([seed, key, u]) for u in units]
    keep = np.zeros(len(table), dtype=bool)
    for s, k in quota.items():
        rows = [i for i, lay in enumerate(layers) if lay == s]
        for i in sorted(rows, key=lambda i: ranks[i])[:k]:
            keep[i] = True
    return table[keep].reset_index(drop=True)


__all__ = ["allocate", "pair_labels", "sample_set", "strata", "unit_names"]
