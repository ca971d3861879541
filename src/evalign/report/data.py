"""What a report shows: :class:`ReportData`, filled by ``evalign report``, ``evalign demo`` or a user.

The report only renders: every number in it comes from the tables given here, which are computed by
:mod:`evalign.meta` (correlations, pairwise accuracy, tie calibration, bootstrap intervals).

Table conventions (extra columns are shown as they are):

* ``leaderboard``: one row per system; a ``system`` column, the human system-level value in
  ``human_system_col`` and one column per metric (the metric's system-level score).
* ``correlations`` / ``pair_accuracy``: one row per metric (and per level / statistic if wanted);
  the estimate in ``value`` and, when there is an interval, its bounds in ``low`` and ``high``
  (as :class:`evalign.meta.significance.BootstrapResult`). Shown as ``value [low, high]``.
* ``by_task``: the statistic per task and metric, either wide (index = task, columns = metrics) or
  long (columns ``task``, ``metric``, ``value``).
* ``item_table``: the scored item table (one row per item x system, see :mod:`evalign.io`);
  used for score distributions per human grade (``human_col``) and score-vs-length plots
  (``judge_cols``, lengths from ``response``).
* ``epsilon_curves``: metric -> (epsilons, accuracies) of tie calibration (the curve returned by
  :func:`evalign.meta.pairwise.calibrate_epsilon`), optionally a third element, the chosen epsilon.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

#: names of interval bound columns, in order of preference
LOW_NAMES = ("low", "ci_low", "lo", "lower")
HIGH_NAMES = ("high", "ci_high", "hi", "upper")


@dataclass
class ReportData:
    """Everything a report can show; leave out what you do not have (sections are skipped)."""

    title: str = "evalign report"
    #: free text under the title (dataset, description, citation); shown escaped
    subtitle: str | None = None
    leaderboard: pd.DataFrame | None = None
    #: column of ``leaderboard`` with the human system-level value (None: no human column)
    human_system_col: str | None = None
    #: whether a higher human system-level value is better (False for ranks, 1 = best)
    human_system_higher_is_better: bool = True
    correlations: pd.DataFrame | None = None
    pair_accuracy: pd.DataFrame | None = None
    by_task: pd.DataFrame | None = None
    #: name of the statistic in ``by_task`` (heatmap colour-bar label)
    by_task_label: str = "statistic"
    item_table: pd.DataFrame | None = None
    #: metric (and judge) columns to show; judges may be listed here and in ``judge_cols``
    metric_cols: list[str] = field(default_factory=list)
    #: numeric human rating column of ``item_table`` (None: no distribution plots)
    human_col: str | None = None
    epsilon_curves: Mapping[str, Sequence[Any]] | None = None
    #: LLM-judge score columns of ``item_table`` (score-vs-length plots)
    judge_cols: list[str] = field(default_factory=list)
    #: whether each metric is better when higher (default True); ranks in the leaderboard use it
    higher_is_better: Mapping[str, bool] = field(default_factory=dict)
    #: leaderboard header of each metric's system-level score, e.g. ``bleu (corpus)``
    system_labels: Mapping[str, str] = field(default_factory=dict)
    #: further tables to show as they are: title -> DataFrame
    extra_tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    #: lines shown directly under a result table (``correlations`` / ``pair_accuracy``): its
    #: headline when it ranks nothing and its warnings
    table_notes: Mapping[str, list[str]] = field(default_factory=dict)
    #: lines shown at the end (metric signatures, settings, licences)
    notes: list[str] = field(default_factory=list)
    #: digits after the decimal point in tables
    digits: int = 3
    #: the item (or pair) explorer: an :class:`evalign.report.explorer.ExplorerSpec`, or None
    explorer: Any = None
    #: whose labels the metrics are compared with, named in every title ("humans", "GPT-4 grades")
    labels: str = "humans"
    #: who gave the labels, before ``rank`` / ``grade`` / ``ceiling``: ``human`` or the grader (``GPT-4``)
    rater: str = "human"
    #: confidence level of the intervals (named in titles: "95% bootstrap")
    confidence: float = 0.95
    #: what the human system value is when it is a rank, e.g. "rank among 12 models in the source
    #: table (1 best)": then the leaderboard shows this one human column
    human_scale: str | None = None
    #: per task of ``by_task``: its size (items or pairs)
    by_task_n: Mapping[str, int] = field(default_factory=dict)
    #: tasks left out of ``by_task`` as too small: task -> size
    by_task_left_out: Mapping[str, int] = field(default_factory=dict)
    #: smallest group reported per task
    min_group_size: int | None = None
    #: leaderboards ranked from pairwise verdicts (:class:`evalign.rank.leaderboard_run.LeaderboardOutcome`):
    #: a section each, beside the trust sections (system table, Bradley-Terry forest plot, win-rate heatmap)
    pairwise_boards: list[Any] = field(default_factory=list)
    #: bias probes' report cards (the JSON form of :class:`evalign.evaluate.probe.ProbeCard`, one per
    #: judge): a "Judge bias probes" section (:func:`evalign.report.probes.probe_section`)
    probes: list[Any] = field(default_factory=list)
    #: per metric: rows, cells without a value, texts truncated (columns ``metric``, ``rows``,
    #: ``missing``, ``truncated``); None: not shown
    coverage: pd.DataFrame | None = None
    #: the results (:class:`evalign.evaluate.EvalResult`) with an Alt-Test or a human-ceiling agreement:
    #: a section "Can these judges replace an annotator?" each
    annotator_results: list[Any] = field(default_factory=list)
    #: the calibration of the judges that state a probability (:class:`evalign.meta.calibration.Calibration`):
    #: a table and a reliability diagram
    calibration: list[Any] = field(default_factory=list)
    #: the cross-set table (:class:`evalign.evaluate.published.PublishedTable`): every shipped judge and
    #: metric on every set, a page of its own
    published: Any = None
    #: ``--selective``: the :class:`~evalign.evaluate.selective.SelectiveReport` of each result that has
    #: one: a section "Where can each judge be trusted?" with its table and risk-coverage curves
    selective: list[Any] = field(default_factory=list)


def interval_columns(df: pd.DataFrame) -> tuple[str | None, str | None]:
    """The (low, high) interval columns of a results table, or (None, None)."""
    low = next((c for c in LOW_NAMES if c in df.columns), None)
    high = next((c for c in HIGH_NAMES if c in df.columns), None)
    if low is None or high is None:
        return None, None
    return low, high


def by_task_matrix(by_task: pd.DataFrame) -> pd.DataFrame:
    """``by_task`` as a task x metric matrix of floats (long tables are pivoted)."""
    if {"task", "metric", "value"} <= set(by_task.columns):
        m = by_task.pivot_table(index="task", columns="metric", values="value", aggfunc="first", sort=False)
    else:
        m = by_task.copy()
        if "task" in m.columns:
            m = m.set_index("task")
        m = m.select_dtypes(include=[np.number])
    m.index = m.index.map(str)
    m.columns = m.columns.map(str)
    return m.astype(float)


def ranks(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """Competition ranks (1 = best, ties share the best rank); NaN stays NaN."""
    return values.rank(ascending=not higher_is_better, method="min")


#: the column of task labels merged by :func:`merge_labels` (beside the original ``task``)
MERGED_TASK = "task (merged)"


def label_key(label: str) -> str:
    """A label compared without case and punctuation: ``"(Wolfram alpha)?"`` and ``"Wolfram Alpha"``
    -> ``"wolfram alpha"``."""
    import re

    return " ".join(re.sub(r"[^\w]+", " ", str(label).lower()).split())


def merge_labels(values: Sequence[Any]) -> tuple[dict[str, str], list[str]]:
    """Labels that differ only in case or punctuation (e.g. task ``Yelp`` and ``yelp``) merged into
    the most frequent spelling (ties: the first seen): returns (original -> merged label, for the
    labels that change) and one line per merge naming what was merged, to show beside the results."""
    counts = pd.Series([str(v) for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))])
    counts = counts.value_counts(sort=False)
    groups: dict[str, list[str]] = {}
    for label in counts.index:
        groups.setdefault(label_key(label), []).append(label)
    mapping: dict[str, str] = {}
    lines: list[str] = []
    for members in groups.values():
        if len(members) < 2:
            continue
        keep = max(members, key=lambda m: (counts[m], -members.index(m)))
        for m in members:
            if m != keep:
                mapping[m] = keep
        lines.append("task labels merged (case and punctuation ignored): "
                     + ", ".join(f"'{m}' ({counts[m]})" for m in members) + f" -> '{keep}'")
    return mapping, lines
