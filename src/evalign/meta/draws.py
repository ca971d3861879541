"""The item-index draws of the bootstrap and of the paired permutation tests, in blocks of resamples.

The item-index path of :mod:`evalign.meta.significance` resamples items by their indices:

* bootstrap: ``numpy.random.default_rng(seed).integers(0, n, (n_resamples, n))`` (the draws of
  :func:`scipy.stats.bootstrap` with ``paired=True`` and the same generator);
* permutation: ``default_rng(seed).random((n_permutations, n)) < 0.5`` (True = swap the item), or every
  one of the ``2**n`` swap patterns when they number at most ``n_permutations``.

Here they are made block by block of rows (resamples), never as one ``n_resamples x n`` matrix: the
generator's stream does not depend on how the rows are cut into blocks, so any block size gives the
same draws, and memory stays at one block (about :data:`BLOCK_ELEMS` entries) whatever ``n`` and the
number of resamples. Draws of at most :data:`CACHE_ELEMS` entries in all (a small ``n x resamples``)
are kept for the next call with the same arguments (every metric of a table, every test), so memory
is bounded by a constant, not by ``n x resamples``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

#: entries of one block of draws (rows x items): ~16 MB of int32 indices
BLOCK_ELEMS = 4_000_000
#: draws of at most this many entries in all are kept between calls (~64 MB as float32), one set per kind
CACHE_ELEMS = 16_000_000
_cache: dict[str, tuple[tuple[Any, ...], list[np.ndarray]]] = {}


def _kept(kind: str, key: tuple[Any, ...], entries: int, make: Callable[[], Iterator[np.ndarray]]) -> Iterable[np.ndarray]:
    """The blocks of ``make()``, kept (read-only) for the next call with the same ``key`` when they are
    at most :data:`CACHE_ELEMS` entries and the seed is a plain integer; else made afresh, block by block."""
    if entries > CACHE_ELEMS or not isinstance(key[-1], int) or isinstance(key[-1], bool):
        return make()
    hit = _cache.get(kind)
    if hit is not None and hit[0] == key:
        return hit[1]
    blocks = list(make())
    for b in blocks:
        b.setflags(write=False)
    _cache[kind] = (key, blocks)
    return blocks


def block_rows(n: int, total: int, blocks_at_least: int = 1) -> int:
    """Rows per block for ``total`` rows of ``n`` items: at most :data:`BLOCK_ELEMS` entries per block,
    and at least ``blocks_at_least`` blocks when there are that many rows (to share them out)."""
    rows = max(1, BLOCK_ELEMS // max(n, 1))
    if blocks_at_least > 1:
        rows = min(rows, max(1, -(-total // blocks_at_least)))
    return rows


def bootstrap_index_blocks(n: int, n_resamples: int, seed: Any, rows: int | None = None) -> Iterator[np.ndarray]:
    """The bootstrap index draws ``default_rng(seed).integers(0, n, (n_resamples, n))`` as consecutive
    int32 blocks of ``rows`` resamples (default :func:`block_rows`)."""
    rng = np.random.default_rng(seed)
    rows = rows or block_rows(n, n_resamples)
    for r0 in range(0, n_resamples, rows):
        yield rng.integers(0, n, (min(n_resamples, r0 + rows) - r0, n), dtype=np.int32)


def counts_of(idx: np.ndarray, n: int, dtype: Any = np.float64) -> np.ndarray:
    """Multiplicity of each item in each resample: ``(B, n)`` from index draws ``(B, n)``."""
    b = idx.shape[0]
    flat = (idx.astype(np.int64) + n * np.arange(b, dtype=np.int64)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(dtype)


def bootstrap_count_blocks(n: int, n_resamples: int, seed: Any, dtype: Any = np.float32) -> Iterable[np.ndarray]:
    """The multiplicity of each item in each bootstrap resample, block by block (``(rows, n)``, read-only)."""
    def make() -> Iterator[np.ndarray]:
        for idx in bootstrap_index_blocks(n, n_resamples, seed):
            yield counts_of(idx, n, dtype)

    key = (n, n_resamples, block_rows(n, n_resamples), np.dtype(dtype).str, seed)
    return _kept("bootstrap", key, n * n_resamples, make)


def enumerated_masks(n: int) -> np.ndarray:
    """All ``2**n`` swap patterns as a ``(2**n, n)`` boolean matrix (row p: the bits of p)."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)


def enumerates(n: int, n_permutations: int) -> bool:
    """Whether a permutation test of ``n`` items enumerates every swap pattern (``2**n <= n_permutations``)."""
    return n <= 20 and 2**n <= n_permutations


def swap_mask_blocks(n: int, n_permutations: int, seed: Any, rows: int | None = None) -> tuple[Iterable[np.ndarray], bool]:
    """The swap masks of a permutation test as consecutive boolean blocks of ``rows`` permutations
    (read-only), and whether they are the exact enumeration (every pattern, one block)."""
    if enumerates(n, n_permutations):
        return [enumerated_masks(n)], True
    step = rows or block_rows(n, n_permutations)

    def blocks() -> Iterator[np.ndarray]:
        rng = np.random.default_rng(seed)
        for r0 in range(0, n_permutations, step):
            yield rng.random((min(n_permutations, r0 + step) - r0, n)) < 0.5

    return _kept("permutation", (n, n_permutations, step, seed), n * n_permutations, blocks), False


def bootstrap_counts(n: int, n_resamples: int, seed: Any) -> np.ndarray:
    """The whole ``(n_resamples, n)`` float32 matrix of :func:`bootstrap_count_blocks` (n x resamples
    memory: for inspection and tests; the resampling paths use the blocks)."""
    return np.concatenate(list(bootstrap_count_blocks(n, n_resamples, seed)), axis=0)


def permutation_swaps(n: int, n_permutations: int, seed: Any) -> tuple[np.ndarray, bool]:
    """The whole float32 0/1 matrix of :func:`swap_mask_blocks` and the exact flag (for inspection and tests)."""
    blocks, exact = swap_mask_blocks(n, n_permutations, seed)
    return np.concatenate([b.astype(np.float32) for b in blocks], axis=0), exact


__all__ = [
    "BLOCK_ELEMS",
    "CACHE_ELEMS",
    "block_rows",
    "bootstrap_count_blocks",
    "bootstrap_counts",
    "bootstrap_index_blocks",
    "counts_of",
    "enumerated_masks",
    "enumerates",
    "permutation_swaps",
    "swap_mask_blocks",
]
