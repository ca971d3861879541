"""The central question in one call: how well do these metrics and judges agree with the humans on
my DataFrame, and which one to trust?

:func:`meta_evaluate` (item ratings or system-level values) and :func:`meta_evaluate_pairs` (pairwise
preferences) read the DataFrame as the command line reads a file (:func:`evalign.io.read_items` /
:func:`~evalign.io.read_pairs`), compute the named metrics the table lacks (each at its declared
system level, as ``evalign meta`` does), and return the frozen :class:`~evalign.evaluate.EvalResult`
of :func:`~evalign.evaluate.evaluate`: ``.to_pandas()`` is the ranking, ``.trust`` the trust tables,
``.to_json()`` everything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from evalign.datasets import pairs_to_items
from evalign.evaluate.alt_test import as_settings
from evalign.evaluate.prepare import resolve_columns
from evalign.evaluate.result import EvalResult
from evalign.evaluate.run import evaluate
from evalign.evaluate.spec import EvalSpec, Human, Resampling
from evalign.io import read_items, read_pairs
from evalign.meta.alt_test import AltTestSettings

__all__ = ["meta_evaluate", "meta_evaluate_pairs"]


def _names(metrics: Sequence[str] | str, judges: Sequence[str] | str) -> tuple[list[str], list[str]]:
    m = [metrics] if isinstance(metrics, str) else list(metrics)
    j = [judges] if isinstance(judges, str) else list(judges)
    if not m and not j:
        raise ValueError("name at least one metric or judge column")
    return m, j


def _spec(table: pd.DataFrame, human: Human, metrics: list[str], judges: list[str], *, pairs: pd.DataFrame | None,
          source: str, lower_is_better: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None,
          resampling: Resampling, **spec_kw: Any) -> EvalSpec:
    table, cols, runs = resolve_columns(table, [*metrics, *judges], source=source, pairs=pairs,
                                        lower_is_better=lower_is_better, options=options, judges=judges)
    cols = [replace(c, kind="judge") if c.name in judges and c.kind == "metric" else c for c in cols]
    return EvalSpec(human=human, columns=tuple(cols), items=table, pairs=pairs, source=source,
                    costs={r.column: r.seconds_per_1000 for r in runs}, resampling=resampling, **spec_kw)


def meta_evaluate(
    df: pd.DataFrame,
    human: str | Mapping[str, float],
    metrics: Sequence[str] | str = (),
    judges: Sequence[str] | str = (),
    *,
    human_lower_is_better: bool = False,
    lower_is_better: Sequence[str] = (),
    level: str | None = None,
    grouping: str = "item",
    by: str | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    n_resamples: int = 1000,
    n_permutations: int = 1000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
    resampling_method: str = "auto",
    workers: int | None = None,
    baselines: bool = True,
    fields: Mapping[str, str] | None = None,
    annotators: Sequence[str] = (),
    alt_test: AltTestSettings | float | bool | None = None,
    agreement: str | None = None,
) -> EvalResult:
    """Meta-evaluate ``metrics`` and ``judges`` against the human labels of an item table ``df``
    (one row per item and system: ``id``, ``system``, ``response``, ``reference`` when a
    reference-based metric is computed; ``fields`` maps other column names, e.g.
    ``{"response": "output"}``).

    ``human``: the item-level rating column, or ``{system: value}`` system-level values (e.g. ranks
    with ``human_lower_is_better=True``). ``metrics``: metric columns of ``df`` or registered metric
    names (computed when ``df`` lacks them; ``options``: metric name -> options). ``judges``: judge
    score columns of ``df``. ``lower_is_better``: columns where lower is better. ``level``,
    ``grouping``, ``by`` and the resampling settings as for ``evalign meta`` (``resampling_method``
    ``auto`` / ``items`` and ``workers`` are :class:`~evalign.evaluate.Resampling`'s ``method`` and
    ``workers``). Returns the frozen :class:`~evalign.evaluate.EvalResult` (``result.to_pandas()``: the
    ranking).
    """
    m, j = _names(metrics, judges)
    if isinstance(human, str):
        lab = Human(column=human, higher_is_better=not human_lower_is_better, annotators=tuple(annotators))
        table = read_items(df, fields=fields, human=[human, *annotators])
    else:
        lab = Human(system={str(k): float(v) for k, v in human.items()}, higher_is_better=not human_lower_is_better)
        table = read_items(df, fields=fields)
    resampling = Resampling(n_resamples=n_resamples, n_permutations=n_permutations, confidence=confidence,
                            alpha=alpha, seed=seed, method=resampling_method, workers=workers)
    spec = _spec(table, lab, m, j, pairs=None, source=str(df.attrs.get("source", "<DataFrame>")),
                 lower_is_better=lower_is_better, options=options, resampling=resampling, level=level,
                 grouping=grouping, by=by, baselines=baselines, alt_test=as_settings(alt_test), agreement=agreement)
    return evaluate(spec)


def meta_evaluate_pairs(
    pairs: pd.DataFrame,
    prefs: Sequence[str] | str,
    metrics: Sequence[str] | str = (),
    judges: Sequence[str] | str = (),
    *,
    lower_is_better: Sequence[str] = (),
    by: str | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    n_resamples: int = 1000,
    n_permutations: int = 1000,
    confidence: float = 0.95,
    alpha: float = 0.05,
    seed: int = 0,
    resampling_method: str = "auto",
    workers: int | None = None,
    baselines: bool = True,
    alt_test: AltTestSettings | float | bool | None = None,
    agreement: str | None = None,
) -> EvalResult:
    """Meta-evaluate ``metrics`` and ``judges`` against the pairwise human preferences of a pair
    table ``pairs`` (``id``, ``response_a``, ``response_b``, ``reference`` for reference-based
    metrics, and the annotator columns ``prefs``: +1 / -1 / 0, 1 / 2 / 0 or A / B / tie; several
    annotators -> majority vote).

    ``metrics``: registered metric names (both sides scored and compared with a calibrated tie
    threshold) or ``<name>_a`` / ``<name>_b`` columns given as ``name``; ``judges``: pairwise
    verdict columns (A / B / tie). The resampling settings as for :func:`meta_evaluate`. With several
    annotators, ``alt_test`` (``True``, an epsilon or :class:`~evalign.meta.alt_test.AltTestSettings`)
    adds the Alt-Test of each judge and ``agreement`` (``auto``, Cohen's kappa) each judge against the
    human ceiling. Returns the frozen :class:`~evalign.evaluate.EvalResult`."""
    m, j = _names(metrics, judges)
    pref = [prefs] if isinstance(prefs, str) else list(prefs)
    table = read_pairs(pairs, pref=pref)
    resampling = Resampling(n_resamples=n_resamples, n_permutations=n_permutations, confidence=confidence,
                            alpha=alpha, seed=seed, method=resampling_method, workers=workers)
    spec = _spec(pairs_to_items(table), Human(pref_columns=tuple(pref)), m, j, pairs=table,
                 source=str(pairs.attrs.get("source", "<DataFrame>")), lower_is_better=lower_is_better,
                 options=options, resampling=resampling, by=by, baselines=baselines, alt_test=as_settings(alt_test),
                 agreement=agreement)
    return evaluate(spec)
