"""Scoring an item table with registered metrics: one column per metric, system-level scores."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from evalign.errors import InputError
from evalign.io import check_systems, references_of, responses_of
from evalign.metrics.base import Metric, get_metric

if TYPE_CHECKING:  # imported where tables are scored, not at every command's start
    import pandas as pd

MetricSpec = str | Metric


@dataclass
class MetricRun:
    """What one metric did in a run: its column, signature, seconds taken and reported facts."""

    column: str
    name: str
    higher_is_better: bool
    signature: str
    seconds: float
    n_items: int
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds_per_1000(self) -> float:
        """Seconds per 1,000 items in this run."""
        return 1000.0 * self.seconds / max(self.n_items, 1)


def resolve_metrics(metrics: Sequence[MetricSpec]) -> list[Metric]:
    """Metric instances from names or instances."""
    return [m if isinstance(m, Metric) else get_metric(m) for m in metrics]


def score(
    table: pd.DataFrame,
    metrics: Sequence[MetricSpec],
    *,
    on_metric: Callable[[Metric, int, int], None] | None = None,
    on_progress: Callable[[Metric, int, int], None] | None = None,
) -> tuple[pd.DataFrame, list[MetricRun]]:
    """Add one column per metric (plus ``<column>.<extra>`` columns) to a copy of ``table``.

    Returns the new table and, per metric, a :class:`MetricRun`. ``on_metric(metric, i, n)`` is
    called before each metric; ``on_progress(metric, done, total)`` as a model metric works
    through its texts (for progress display).

    The table is checked first: a missing ``response`` column, a missing response (None, NaN,
    ``pd.NA``; never scored as the text "nan"), a response that is not text, or a reference that is
    neither text nor a list of texts raise :class:`~evalign.errors.InputError` naming the row.
    """
    import numpy as np

    responses = responses_of(table)
    refs = references_of(table)
    ms = resolve_metrics(metrics)
    out = table.copy()
    runs: list[MetricRun] = []
    for i, m in enumerate(ms):
        if on_metric is not None:
            on_metric(m, i, len(ms))
        own = m.progress
        if on_progress is not None and own is None:
            m.progress = lambda done, total, m=m: on_progress(m, done, total)
        t0 = time.perf_counter()
        try:
            res = m.score(responses, refs)
        finally:
            m.progress = own
        dt = time.perf_counter() - t0
        out[m.column] = np.asarray(res.values, dtype=float)
        for suffix, arr in res.extras.items():
            out[f"{m.column}.{suffix}"] = arr
        runs.append(
            MetricRun(
                column=m.column,
                name=m.name,
                higher_is_better=m.higher_is_better,
                signature=str(m.signature()),
                seconds=dt,
                n_items=len(out),
                info=dict(res.info),
            )
        )
    return out, runs


def system_scores(table: pd.DataFrame, metrics: Sequence[MetricSpec]) -> pd.DataFrame:
    """One row per system, one column per metric: the metric's declared system-level score
    (``Metric.system_level``: ``corpus`` for BLEU and chrF, sacrebleu's corpus score; ``mean``
    otherwise, the mean item score) - the same score ``meta``, ``report`` and the demo use.

    A corpus metric needs the texts (``response`` and ``reference``); when the table has only its
    score column, the column is the mean of its item scores and is named so: ``bleu (mean of items)``.
    """
    import numpy as np
    import pandas as pd

    ms = resolve_metrics(metrics)
    check_systems(table)  # a row without a system is an error, never silently left out
    texts = "response" in table.columns and "reference" in table.columns
    rows = []
    for system, group in table.groupby("system", sort=True):
        row: dict[str, Any] = {"system": system, "n_items": len(group)}
        responses = [str(r) for r in group["response"].tolist()] if texts else []
        refs = references_of(group) if texts else []
        for m in ms:
            corpus = getattr(m, "system_level", "mean") == "corpus"
            if m.column in group.columns and not (corpus and texts):
                vals = group[m.column].to_numpy(dtype=float)
                mean = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
                row[f"{m.column} (mean of items)" if corpus else m.column] = mean
            elif not texts:
                raise InputError(f"cannot score {m.name} per system without its column or the texts "
                                 "(response and reference)", field="response" if "response" not in table.columns
                                 else "reference")
            else:
                row[m.column] = m.system_score(responses, refs)
        rows.append(row)
    return pd.DataFrame(rows)
