"""System-level scores as each metric declares them (``Metric.system_level``).

``corpus`` metrics (BLEU, chrF) score a system from its summed per-item sufficient statistics
(sacrebleu's own segment statistics, the numbers sacrebleu's ``corpus_score`` and its paired
bootstrap add up); every other metric scores a system by the mean of its item scores. The
bootstrap of a system-level statistic resamples items and recomputes the declared system score of
each resample (:func:`corpus_statistic`).

This module imports nothing of :mod:`evalign.metrics`: a metric is found by name through the
registry of its kind (``evalign.registry.registry("metric")``), and its statistics come from the
metric object's own hooks, ``item_stats`` (per-item statistics) and ``score_from_stats`` (summed
statistics -> system score), as sacrebleu's metrics offer them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import EvalignError
from evalign.io import references_of
from evalign.meta.correlation import correlation, system_means
from evalign.meta.significance import Statistic
from evalign.registry import registry

#: the two system levels a metric declares (``Metric.system_level``)
SYSTEM_LEVELS = ("corpus", "mean")


def registered_metric(name: str) -> Any | None:
    """The registered metric class named ``name``, or None (not a metric, or its dependency missing)."""
    try:
        return registry("metric").find(name)  # find, not get: no "did you mean" built for every column
    except (EvalignError, ImportError):
        return None


def declares_corpus(name: str) -> bool:
    """Whether ``name`` is a registered metric whose declared system score is a corpus score."""
    cls = registered_metric(name)
    return cls is not None and getattr(cls, "system_level", "mean") == "corpus"


def corpus_metric(name: str, table: pd.DataFrame | None) -> Any | None:
    """The metric object of a score column named after a registered corpus metric with its default
    options (``bleu``, ``chrf``), when ``table`` has the texts (``response`` and ``reference``) to
    recompute its corpus statistics; None otherwise (the column's system score is then the mean of
    its items, named so: :func:`system_label`)."""
    if table is None or "response" not in table.columns or "reference" not in table.columns:
        return None
    if not declares_corpus(name):
        return None
    m = registry("metric").create(name)  # the default options, as ``get_metric(name)``
    return m if m.column == name else None


def system_label(name: str, level: str, *, declared_corpus: bool) -> str:
    """The name of a column's system-level score wherever it is shown: ``bleu (corpus)`` for a
    corpus score, ``bleu (mean of items)`` for the mean item score of a metric that declares a corpus
    score (only its item scores were given), else the column's name (a mean is that metric's score)."""
    if level == "corpus":
        return f"{name} (corpus)"
    return f"{name} (mean of items)" if declared_corpus else name


@dataclass(frozen=True)
class CorpusStats:
    """Per-item sufficient statistics of a corpus metric: ``stats`` is ``systems x items x k``
    (NaN where the cell is missing or has no reference); ``score_fn`` turns summed statistics (a
    list of ints) into the corpus score (the metric's ``score_from_stats``)."""

    systems: tuple[str, ...]
    items: tuple[str, ...]
    stats: np.ndarray
    score_fn: Callable[[list[int]], Any]

    def score(self, summed: np.ndarray) -> float:
        """The corpus score of summed statistics (NaN when nothing was summed)."""
        if not np.isfinite(summed).all() or summed.size == 0:
            return float("nan")
        return float(self.score_fn([round(float(x)) for x in summed]))

    def system_scores(self, index: np.ndarray | None = None) -> np.ndarray:
        """The corpus score of each system over ``index`` (``systems x n`` item positions, NaN =
        left out; default: every item once)."""
        n_sys, n_items, _ = self.stats.shape
        if index is None:
            index = np.tile(np.arange(n_items, dtype=float), (n_sys, 1))
        out = np.full(n_sys, np.nan)
        for s in range(n_sys):
            idx = index[s]
            idx = idx[np.isfinite(idx)].astype(int)
            cells = self.stats[s, idx]
            cells = cells[np.isfinite(cells).all(axis=1)]
            if len(cells):
                out[s] = self.score(cells.sum(axis=0))
        return out


def corpus_stats(table: pd.DataFrame, metric: Any, systems: Sequence[str], items: Sequence[str]) -> CorpusStats:
    """Per-item statistics of ``metric`` (a metric with ``system_level == "corpus"``: its
    ``item_stats`` and ``score_from_stats`` hooks) for every (system, item) cell of an item table
    with ``response`` and ``reference``."""
    responses = [str(r) for r in table["response"].tolist()]
    refs = references_of(table)
    per_item = metric.item_stats(responses, refs)
    keep = [i for i, st in enumerate(per_item) if st is not None]
    seg = np.asarray([per_item[i] for i in keep], dtype=float) if keep else np.empty((0, 0))
    k = seg.shape[1] if seg.ndim == 2 and seg.size else 1
    s_index = {s: i for i, s in enumerate(systems)}
    i_index = {s: i for i, s in enumerate(items)}
    out = np.full((len(systems), len(items), k), np.nan)
    sys_col = table["system"].astype(str).tolist()
    id_col = table["id"].astype(str).tolist()
    for row, j in enumerate(keep):
        si, ii = s_index.get(sys_col[j]), i_index.get(id_col[j])
        if si is not None and ii is not None:
            out[si, ii] = seg[row]
    return CorpusStats(tuple(systems), tuple(items), out, metric.score_from_stats)


def index_array(n_systems: int, n_items: int, present: np.ndarray | None = None) -> np.ndarray:
    """The ``systems x items`` matrix of item positions that a corpus statistic is bootstrapped
    over (NaN where ``present`` is False): resampling its columns resamples items."""
    idx = np.tile(np.arange(n_items, dtype=float), (n_systems, 1))
    if present is not None:
        idx[~present] = np.nan
    return idx


def corpus_statistic(method: str, cs: CorpusStats, sign: float = 1.0) -> Statistic:
    """A system-level correlation (``kendall`` / ``pearson`` / ``spearman``) between the human
    system values and the corpus scores of ``cs``, for data made by :func:`index_array` (the
    resampled item positions): each call recomputes every system's corpus score from the summed
    statistics of the items drawn. A 2-D human (item ratings) is averaged per system first."""
    def fn(h: np.ndarray, idx: np.ndarray) -> float:
        hs = h if h.ndim == 1 else system_means(h)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(correlation(hs, sign * cs.system_scores(idx), method, "system").value)

    return Statistic(method, "generic", fn=fn, standardize=False, params={"level": "system", "system_score": "corpus"})
