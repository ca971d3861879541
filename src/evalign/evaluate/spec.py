"""What to evaluate: one frozen, typed spec (data, human labels, metric and judge columns, level,
grouping, resampling settings) that :func:`evalign.evaluate.evaluate` turns into one result."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from evalign.errors import InputError
from evalign.evaluate.selective import SelectiveRequest
from evalign.meta.alt_test import AltTestSettings
from evalign.meta.resampling import Resampling
from evalign.meta.system_level import SYSTEM_LEVELS, declares_corpus, system_label

Kind = Literal["metric", "judge", "baseline"]
LabelSource = Literal["human", "model"]
LEVELS = ("system", "item")
GROUPINGS = ("none", "item", "system")
#: the statistics of a judge's agreement against the human ceiling (see :mod:`evalign.meta.ceiling`)
AGREEMENTS = ("auto", "kappa", "quadratic_kappa")
#: how a column's system-level score is made: sacrebleu corpus statistics, or the mean of item scores


#: the smallest group a pair table ranks (pairs) and an item table (items), unless min_group_size says
PAIRS_FLOOR = 30
ITEMS_FLOOR = 10


@dataclass(frozen=True)
class Human:
    """The labels the metrics are compared with.

    Exactly one of: ``column`` (an item-level rating column of the item table), ``system``
    (``{system: value}``, e.g. ranks) or ``pref_columns`` (annotator columns of a pair table coded
    +1 A better, -1 B better, 0 tie). ``annotators``: single-annotator columns of the item table (for
    the ``human_ceiling`` row; pair tables use ``pref_columns``). ``source``: ``human``, or ``model``
    when the labels are model grades (then ``label`` says whose, e.g. ``GPT-4 grades``).
    """

    column: str | None = None
    system: Mapping[str, float] | None = None
    pref_columns: tuple[str, ...] = ()
    higher_is_better: bool = True
    annotators: tuple[str, ...] = ()
    source: LabelSource = "human"
    label: str = "humans"
    #: what to know about these labels, printed with the evaluation's warnings (e.g. one annotator
    #: column of four chosen)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        given = [self.column is not None, self.system is not None, bool(self.pref_columns)]
        if sum(given) != 1:
            raise InputError("give exactly one kind of human label: a rating column, system-level values or "
                             "preference columns", field="human")
        if self.source not in ("human", "model"):
            raise InputError(f"source must be 'human' or 'model', got {self.source!r}", field="source")
        if self.system is not None:
            for k, v in self.system.items():
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
                    raise InputError(f"system-level value must be a finite number, got {v!r}", field=str(k))

    @property
    def kind(self) -> str:
        """``item`` (rating column), ``system`` (system-level values) or ``pairs`` (preferences)."""
        return "item" if self.column is not None else "system" if self.system is not None else "pairs"

    @property
    def title(self) -> str:
        """``Agreement with humans`` or ``Agreement with GPT-4 grades`` (model labels)."""
        return f"Agreement with {self.label}"

    @property
    def rater(self) -> str:
        """Who gave the labels, as a word before ``rank``, ``grade``, ``ceiling`` or ``ties``:
        ``human``, or the grading model for model labels (``GPT-4``)."""
        return rater_of(self.source, self.label)


def rater_of(source: str, label: str) -> str:
    """``human`` for human labels; for model labels the grader (``GPT-4 grades`` -> ``GPT-4``)."""
    if source == "human":
        return "human"
    return label.removesuffix(" grades").removesuffix(" grade").strip() or "model"


@dataclass(frozen=True)
class Column:
    """A metric or judge column to evaluate.

    ``name``: the column of the table (pair tables built from scored sides get ``<name>_a`` /
    ``<name>_b``). ``verdict``: a pairwise judge's verdict column of a pair table (A / B / tie /
    unparseable, see :mod:`evalign.evaluate.columns`): no tie threshold, unparseable verdicts are
    wrong. ``system_level``: ``corpus`` (recomputed from sacrebleu corpus statistics; needs
    ``metric``) or ``mean`` (the mean of item scores). ``metric``: the metric object when the
    scores were computed here (its texts and corpus statistics are then available).
    """

    name: str
    kind: Kind = "metric"
    higher_is_better: bool = True
    verdict: bool = False
    system_level: str = "mean"
    metric: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in ("metric", "judge", "baseline"):
            raise InputError(f"kind must be metric, judge or baseline, got {self.kind!r}", field="kind")
        if self.system_level not in SYSTEM_LEVELS:
            raise InputError(f"system_level must be corpus or mean, got {self.system_level!r}", field=self.name)

    @property
    def system_label(self) -> str:
        """The header of this column's system-level score: ``bleu (corpus)``; ``bleu (mean of items)``
        for a metric that declares a corpus score but came as a score column only; else the name."""
        declared = (getattr(self.metric, "system_level", None) == "corpus" if self.metric is not None
                    else self.kind == "metric" and declares_corpus(self.name))
        return system_label(self.name, self.system_level, declared_corpus=declared)


@dataclass(frozen=True)
class TrustRequest:
    """One trust table to compute: a ranking ``statistic`` at ``level`` (``grouping`` for item level)."""

    statistic: str
    level: str = "item"
    grouping: str = "item"


@dataclass(frozen=True, eq=False)
class EvalSpec:
    """One evaluation.

    ``items``: the item table (one row per item x system) with the metric and judge columns, or,
    for pair labels, the scored sides made by :func:`evalign.datasets.pairs_to_items` (column
    ``side``) when the metric columns are per side; ``pairs``: the pair table (with verdict columns
    and/or ``<metric>_a``/``_b`` columns). ``trust``: the trust tables to compute (default: the one
    ranking table of the labels: pairwise accuracy for item ratings, Kendall for system values,
    preference accuracy for pairs; ``level`` overrides the level). ``by``: a column for the
    breakdown. ``min_group_size``: smallest group ranked (default 10 items, 30 pairs).
    ``alt_test``: run the Alt-Test of every judge against the individual annotators with these
    settings (None: not run; see :mod:`evalign.meta.alt_test`). ``agreement``: each judge's
    agreement with each annotator against the annotators' own (``auto``: Cohen's kappa for
    preferences, quadratic-weighted kappa for ratings; ``kappa``; ``quadratic_kappa``; None: not
    computed; see :mod:`evalign.meta.ceiling`). Both need >= 2 annotator columns. ``clusters``:
    False ranks by value without significance clusters or p-values against the best
    (``beats_baselines`` is still tested).
    ``source``: the data's name in messages (a file or ``dataset NAME``); ``dataset``: the
    registered dataset's name, if any. ``costs``: seconds per 1,000 items per column.
    ``statistics``: statistics the dataset declares for its judges (objects with ``name``,
    ``description`` and ``compute(pairs, column) -> float``, see
    :class:`evalign.datasets.DatasetStatistic`), a column each of a pair table's trust table. ``prices``: the
    judges' prices (:class:`~evalign.judges.usage.PriceBook`; a judge column's cost per 1,000 items is
    computed from its per-row usage columns, see :mod:`evalign.judges.usage`). ``selective``: the
    thresholds with a guarantee of each judge with a confidence, or of a cascade (see
    :mod:`evalign.evaluate.selective`; None: not computed). ``overview``: False computes the trust
    tables' ranking statistic only: no overview of every column's statistics on all data (an empty
    :attr:`~evalign.evaluate.result.EvalResult.overview`, no tie-rate warnings) and no side statistics
    beside the ranking statistic in the trust tables (what the cross-set table of
    :mod:`evalign.evaluate.published` shows; the ranks, values, intervals and tests are the same).
    """

    human: Human
    columns: tuple[Column, ...]
    items: pd.DataFrame | None = None
    pairs: pd.DataFrame | None = None
    level: str | None = None
    grouping: str = "item"
    by: str | None = None
    trust: tuple[TrustRequest, ...] = ()
    min_group_size: int | None = None
    alt_test: AltTestSettings | None = None
    agreement: str | None = None
    clusters: bool = True
    resampling: Resampling = field(default_factory=Resampling)
    source: str = "<table>"
    dataset: str | None = None
    costs: Mapping[str, float] = field(default_factory=dict)
    baselines: bool = True
    curves: bool = False
    statistics: tuple[Any, ...] = ()
    prices: Any = None
    selective: SelectiveRequest | None = None
    overview: bool = True

    def __post_init__(self) -> None:
        if self.level is not None and self.level not in LEVELS:
            raise InputError(f"must be one of {', '.join(LEVELS)}, got {self.level!r}", field="level")
        if self.grouping not in GROUPINGS:
            raise InputError(f"must be one of {', '.join(GROUPINGS)}, got {self.grouping!r}", field="grouping")
        if self.min_group_size is not None and self.min_group_size < 1:
            raise InputError(f"must be at least 1, got {self.min_group_size}", field="min_group_size")
        if not self.columns:
            raise InputError("no metric or judge columns to evaluate", field="metric")
        names = [c.name for c in self.columns]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InputError(f"column given twice: {', '.join(dup)}", field=dup[0])
        if self.human.kind == "pairs" and self.pairs is None:
            raise InputError("preference labels need a pair table", field="pairs")
        if self.human.kind != "pairs" and self.items is None:
            raise InputError("item-level or system-level labels need an item table", field="items")
        if self.human.kind == "system" and self.level == "item":
            raise InputError("level 'item' needs item-level human ratings (a rating column)", field="level")
        if self.agreement is not None and self.agreement not in AGREEMENTS:
            raise InputError(f"must be one of {', '.join(AGREEMENTS)}, got {self.agreement!r}", field="agreement")

    @property
    def mode(self) -> str:
        """``items`` or ``pairs``."""
        return "pairs" if self.human.kind == "pairs" else "items"

    def trust_requests(self) -> tuple[TrustRequest, ...]:
        """The trust tables to compute (``trust``, or the default ranking table)."""
        if self.trust:
            return self.trust
        if self.mode == "pairs":
            return (TrustRequest("preference_accuracy"),)
        level = self.level or ("system" if self.human.kind == "system" else "item")
        stat = "kendall" if level == "system" else "pairwise_accuracy"
        return (TrustRequest(stat, level, self.grouping),)

    def group_floor(self) -> int:
        """The smallest group that is ranked."""
        return self.min_group_size or (PAIRS_FLOOR if self.mode == "pairs" else ITEMS_FLOOR)
