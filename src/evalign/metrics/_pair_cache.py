"""Per-pair scores kept in the project's cache (namespace ``"pair_score"``).

Metrics that score a (reference, response) pair as a whole (BLEURT, DiscoScore) cannot reuse
per-text vectors; they keep one small array per distinct pair instead, keyed by everything the
score depends on (``key_prefix``: model content, settings) and the SHA-256 of both texts. A
second run over the same pairs computes nothing; an interrupted run keeps every finished batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evalign.cache import Cache, make_key
from evalign.signature import text_hash

#: the cache namespace of per-pair metric values
PAIR_NAMESPACE = "pair_score"

#: ``compute(pairs) -> rows``: one float64 row per pair (same width for every pair); it may call
#: ``store(indices, rows)`` as batches finish so that they are cached at once
Compute = Callable[[list[tuple[str, str]], Callable[[list[int], np.ndarray], None]], None]


@dataclass
class PairValues:
    """Rows of the distinct pairs of a run: ``rows[index[pair]]``; ``computed`` / ``cached`` count
    distinct pairs computed now / read from the cache."""

    rows: np.ndarray
    index: dict[tuple[str, str], int]
    computed: int
    cached: int

    def of(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The rows of ``pairs`` (in order)."""
        return self.rows[np.asarray([self.index[p] for p in pairs], dtype=np.int64)]


def cached_pair_values(pairs: Sequence[tuple[str, str]], compute: Compute, key_prefix: str, cache: Cache,
                       width: int) -> PairValues:
    """Values (``width`` floats each) of each distinct pair of ``pairs``, read from ``cache`` when
    present; the others are computed by ``compute(missing_pairs, store)``, which must call
    ``store(indices_into_missing_pairs, rows)`` for every batch it finishes (stored at once)."""
    distinct = list(dict.fromkeys(pairs))
    index = {p: i for i, p in enumerate(distinct)}
    keys = [make_key(key_prefix, text_hash(a), text_hash(b)) for a, b in distinct]
    got = cache.get_arrays(PAIR_NAMESPACE, keys)
    rows = np.full((len(distinct), width), np.nan)
    missing: list[int] = []
    for i, k in enumerate(keys):
        v = got.get(k)
        if v is None or v.shape != (width,):
            missing.append(i)
        else:
            rows[i] = v
    filled = np.ones(len(distinct), dtype=bool)
    filled[missing] = False

    def store(idx: list[int], values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64).reshape(len(idx), width)
        out: dict[str, np.ndarray] = {}
        for j, row in zip(idx, values, strict=True):
            i = missing[j]
            rows[i] = row
            filled[i] = True
            out[keys[i]] = row
        cache.put_arrays(PAIR_NAMESPACE, out)

    if missing:
        compute([distinct[i] for i in missing], store)
        if not filled.all():
            raise RuntimeError("pair scorer returned without scoring every pair")
    return PairValues(rows, index, computed=len(missing), cached=len(distinct) - len(missing))
