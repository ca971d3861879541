"""What an evaluation returns: one frozen, typed result with every table the command line, the
report and the demo show, the notes and warnings, and a signature."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from evalign.evaluate.selective import SelectiveReport
from evalign.evaluate.spec import rater_of
from evalign.meta.alt_test import AltTestReport
from evalign.meta.calibration import Calibration
from evalign.meta.ceiling import CeilingReport

#: how tie thresholds are chosen (part of every signature)
EPSILON_RULE = ("calibrated once per column on all aligned data (Deutsch et al. 2023), held in every group "
                "and resample; 0 for judge verdicts and the always_* baselines")


@dataclass(frozen=True, eq=False)
class TrustTable:
    """One ranking: ``rows`` (columns ``group, n, kind, rank, cluster, metric, value, ci_low,
    ci_high, p_vs_best, beats_baselines``, further statistics, ``epsilon``, ``s_per_1000`` and
    for judges ``n_unparseable`` and, for a pairwise judge run in both orders, the order diagnostics
    :data:`evalign.meta.order_diagnostics.FIELDS`; when a judge has per-row usage columns, the cost group
    :data:`evalign.evaluate.stages.COST_COLUMNS` (whole table; NaN for the other rows) and its
    ``s_per_1000``; for baselines their ``definition``); ``groups`` (``group, n,
    status``); ``signature``. ``headline``: one line when no metric or judge beats the best trivial
    baseline of ``(all)`` (ranks and clusters are then withheld, None); ``warnings``: the warnings of
    this table (also in :attr:`EvalResult.warnings`)."""

    statistic: str
    level: str
    grouping: str
    rows: pd.DataFrame
    groups: pd.DataFrame
    signature: Mapping[str, Any]
    notes: tuple[str, ...] = ()
    headline: str | None = None
    warnings: tuple[str, ...] = ()

    def for_group(self, group: str = "(all)") -> pd.DataFrame:
        """The rows of one group."""
        return self.rows[self.rows["group"] == group].reset_index(drop=True)

    @property
    def table(self) -> pd.DataFrame:
        """The ranking: the same as :attr:`rows` (the name :class:`evalign.meta.TrustReport` uses)."""
        return self.rows

    def to_pandas(self) -> pd.DataFrame:
        """The ranking as a DataFrame (a copy of :attr:`rows`)."""
        return self.rows.copy()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "statistic": self.statistic,
            "level": self.level,
            "grouping": self.grouping,
            "signature": dict(self.signature),
            "headline": self.headline,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "groups": self.groups.to_dict("records"),
            "rows": self.rows.to_dict("records"),
        }


@dataclass(frozen=True, eq=False)
class EvalResult:
    """Everything an evaluation found.

    ``overview``: one row per metric / judge / baseline with its statistics on all data (no
    intervals). ``systems``: per system the human value and each column's declared system score
    (headers like ``bleu (corpus)``; None for pair tables). ``trust``: the ranking tables.
    ``missing``: per column and system, cells in the table and cells without a value. ``breakdown``:
    the long per-group table of ``by`` (or None). ``curves``: column -> (epsilons, accuracies, chosen
    epsilon) of tie calibration. ``refused``: why nothing is ranked (then exit code 1), or None.
    """

    mode: str
    source: str
    title: str
    label_source: str
    n_items: int
    n_systems: int
    columns: tuple[Mapping[str, Any], ...]
    overview: pd.DataFrame
    trust: tuple[TrustTable, ...]
    missing: pd.DataFrame
    signature: Mapping[str, Any]
    systems: pd.DataFrame | None = None
    breakdown: pd.DataFrame | None = None
    breakdown_by: str | None = None
    breakdown_statistic: str | None = None
    curves: Mapping[str, tuple[Any, Any, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    refused: str | None = None
    human: str = ""
    alt_test: AltTestReport | None = None
    ceiling: CeilingReport | None = None
    calibration: tuple[Calibration, ...] = ()
    #: ``--selective``: each judge's (or a cascade's) thresholds with a guarantee (None: not asked)
    selective: SelectiveReport | None = None

    def to_pandas(self) -> pd.DataFrame:
        """The ranking: the rows of the first trust table (a copy; every group, baselines beside the
        metrics and judges); an empty DataFrame when nothing was ranked."""
        return self.trust[0].to_pandas() if self.trust else pd.DataFrame()

    @property
    def rater(self) -> str:
        """Who gave the labels: ``human``, or the grader of model labels (``GPT-4``)."""
        return rater_of(self.label_source, self.title.removeprefix("Agreement with "))

    @property
    def ok(self) -> bool:
        """False when the evaluation refused to rank (see ``refused``)."""
        return self.refused is None

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict (NaN stays NaN; :func:`evalign.io.write_json_atomic`
        and the command line write it as null)."""
        out: dict[str, Any] = {
            "signature": dict(self.signature),
            "mode": self.mode,
            "source": self.source,
            "title": self.title,
            "labels": self.label_source,
            "human": self.human,
            "n_items": self.n_items,
            "n_systems": self.n_systems,
            "refused": self.refused,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "columns": [dict(c) for c in self.columns],
            "overview": self.overview.to_dict("records"),
            "systems": None if self.systems is None else self.systems.to_dict("records"),
            "missing": self.missing.to_dict("records"),
            "trust": [t.to_json() for t in self.trust],
        }
        if self.alt_test is not None:
            out["alt_test"] = self.alt_test.to_json()
        if self.ceiling is not None:
            out["ceiling"] = self.ceiling.to_json()
        if self.calibration:
            out["calibration"] = [c.to_json() for c in self.calibration]
        if self.selective is not None:
            out["selective"] = self.selective.to_json()
        if self.breakdown is not None:
            out["breakdown"] = {"by": self.breakdown_by, "statistic": self.breakdown_statistic,
                                "rows": self.breakdown.to_dict("records")}
        return out
