"""Per-pair scores kept in the project's cache (namespace ``"pair_score"``).

Metrics that score a (reference, response) pair as a whole (BLEURT, DiscoScore) cannot reuse
per-text vectors; they keep one small array per distinct pair instead, keyed by everything the
score depends on (``key_prefix``: model content, settings) and the SHA-256 of both texts. A
second run over the same pairs computes nothing; an interrupted run keeps every finished batch.
:class:`PairScoringMetric` is their common base: the options they take alike (batching, device,
precision, cache, progress) and the cache opened and closed around one run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from evalign.backends import models as M
from evalign.cache import Cache, make_key
from evalign.metrics.base import Metric
from evalign.metrics.options import OptionSpec
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


class PairScoringMetric(Metric):
    """A metric that scores whole (reference, response) pairs with a model and keeps each distinct pair's
    score in the cache (BLEURT, DiscoScore). Subclasses add their own options to
    :data:`RUN_OPTIONS`, call :meth:`_set_run_options` from ``__init__`` and score through
    :meth:`cached_scores`."""

    uses_cache: ClassVar[bool] = True
    #: the options every pair scorer takes: texts per model call and padded tokens per call, the device
    #: and precision, whether to use the cache (and which), and a ``progress(done, total)`` callback
    RUN_OPTIONS: ClassVar[dict[str, OptionSpec]] = {
        "batch_size": OptionSpec(int, min=1),
        "token_budget": OptionSpec(int, min=1),
        "device": OptionSpec(str, none_ok=True),
        "dtype": OptionSpec(str, choices=("fp32", "fp16", "bf16")),
        "use_cache": OptionSpec(bool),
        "cache": OptionSpec(object, none_ok=True, cli=False),
        "progress": OptionSpec(object, none_ok=True, cli=False),
    }

    batch_size: int
    token_budget: int
    device: str | None
    dtype: str
    use_cache: bool
    progress: M.Progress | None

    def _set_run_options(self, *, batch_size: int, token_budget: int, device: str | None, dtype: str,
                         use_cache: bool, cache: Cache | None, progress: M.Progress | None) -> None:
        self.batch_size = int(batch_size)
        self.token_budget = int(token_budget)
        self.device = device
        self.dtype = M.check_dtype(dtype)
        self.use_cache = bool(use_cache)
        self._cache = cache
        self.progress = progress

    def cached_scores(self, pairs: Sequence[tuple[str, str]], compute: Compute,
                      key_prefix: str) -> tuple[np.ndarray, dict[str, int]]:
        """The score of each pair of ``pairs`` (:func:`cached_pair_values`, one float per pair) through the
        metric's cache (the project's cache unless one was given; none with ``use_cache=False``), and
        the run facts ``pairs`` (distinct), ``computed`` and ``cached``."""
        cache = Cache.disabled() if not self.use_cache else (self._cache if self._cache is not None else Cache())
        try:
            vals = cached_pair_values(pairs, compute, key_prefix, cache, width=1)
        finally:
            if cache is not self._cache:
                cache.close()
        return vals.of(pairs)[:, 0], {"pairs": len(vals.index), "computed": vals.computed, "cached": vals.cached}
