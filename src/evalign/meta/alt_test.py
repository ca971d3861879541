"""The Alternative Annotator Test (Alt-Test): can this judge replace one of the annotators?

Calderon, Reichart and Dror 2025, "The Alternative Annotator Test for LLM-as-a-Judge: How to
Statistically Justify Replacing Human Annotators with LLMs" (ACL 2025, arXiv 2501.10970). For each
annotator ``j`` in turn (leave-one-out), on every item ``j`` labelled:

1. the judge's label and ``j``'s label are each scored against the *remaining* annotators' labels
   with a scoring function (``accuracy`` for labels: the share of the others giving the same label;
   ``neg_rmse`` for numbers: minus the root mean squared difference to the others);
2. the judge wins the item when its score >= ``j``'s (``W^f``), ``j`` wins when ``j``'s score >= the
   judge's (``W^h``; both win a tie);
3. a one-sided one-sample t-test of ``W^h - W^f`` against ``epsilon`` (H0: the annotator's advantage
   is at least ``epsilon``; ``epsilon`` is the cost-benefit margin: 0.2 for experts, 0.15 for skilled
   annotators, 0.1 for crowd workers, as the paper advises) gives ``j``'s p-value.

The Benjamini-Yekutieli procedure at ``q`` (0.05) over the annotators' p-values decides which H0s
are rejected; the **winning rate** is the share of annotators rejected (the judge passes when it is
>= 0.5) and the **advantage probability** the mean over annotators of the share of items the judge
wins (``mean W^f``). The paper's minimums are applied and reported: items need >= 2 annotators and
a judge label, annotators >= 30 such items.

Everything here is a pure function over arrays (labels coded as numbers, NaN = none): one
:class:`AltTestSettings` in, one frozen :class:`AltTestResult` per judge out. Upstream's reference
``alt_test()`` loops over items in Python; this computes the same indicators with array operations
(the tests pin winning rate, advantage probability and p-values to upstream's on its nine sets).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from evalign.errors import InputError
from evalign.registry import Registry

#: the paper's epsilon by who the annotators are (Calderon et al. 2025, Section 3)
EPSILON_BY_KIND: Mapping[str, float] = {"experts": 0.2, "skilled": 0.15, "crowd": 0.1}
#: the epsilon used when the annotators' kind is unknown: the strictest of the paper's values
DEFAULT_EPSILON = 0.1

#: a vectorised scoring function: ``(pred (m,), others (m, k), mask (m, k)) -> (m,)`` alignment of
#: each item's ``pred`` with the labels ``others[i, mask[i]]`` (higher = better aligned)
Scorer = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]

#: the scoring functions by name (``accuracy``, ``neg_rmse``, ``neg_mae``; add one with
#: :func:`register_scoring`, wrapping a per-item function with :func:`per_item_scorer` if need be)
SCORINGS: Registry[Scorer] = Registry("Alt-Test scoring function")
#: scoring by the labels: ``accuracy`` for text labels, ``neg_rmse`` for numbers
AUTO = "auto"
#: the scorings that compare labels for equality: they get category codes (any label type)
CATEGORICAL: set[str] = set()


def register_scoring(name: str, *, categorical: bool = False) -> Callable[[Scorer], Scorer]:
    """Decorator: register a :data:`Scorer` under ``name``. ``categorical``: it compares labels for
    equality only, so labels of any type reach it as category codes; else it gets numbers (and
    non-numeric labels are an error)."""

    def deco(fn: Scorer) -> Scorer:
        SCORINGS.register(name)(fn)
        if categorical:
            CATEGORICAL.add(name)
        return fn

    return deco


@register_scoring("accuracy", categorical=True)
def accuracy(pred: np.ndarray, others: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The share of the other annotators who gave the same label (upstream's ``accuracy``)."""
    hits = np.sum(mask & (others == pred[:, None]), axis=1)
    return hits / np.sum(mask, axis=1)


@register_scoring("neg_rmse")
def neg_rmse(pred: np.ndarray, others: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Minus the root mean squared difference to the other annotators' numbers (upstream's ``neg_rmse``)."""
    with np.errstate(invalid="ignore"):
        sq = np.where(mask, (pred[:, None] - others) ** 2, 0.0)
    return -np.sqrt(np.sum(sq, axis=1) / np.sum(mask, axis=1))


@register_scoring("neg_mae")
def neg_mae(pred: np.ndarray, others: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Minus the mean absolute difference to the other annotators' numbers."""
    with np.errstate(invalid="ignore"):
        ab = np.where(mask, np.abs(pred[:, None] - others), 0.0)
    return -(np.sum(ab, axis=1) / np.sum(mask, axis=1))


def per_item_scorer(fn: Callable[[Any, list[Any]], float]) -> Scorer:
    """A :data:`Scorer` from an upstream-style per-item function ``fn(pred, annotations) -> float``
    over numbers (or category codes, when registered as categorical); slower than the built-in
    ones (one call per item)."""

    def scorer(pred: np.ndarray, others: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.array([float(fn(p, list(o[m]))) for p, o, m in zip(pred, others, mask, strict=True)])

    return scorer


def epsilon_for(kind: str | None) -> tuple[float, str]:
    """The paper's epsilon for annotators of ``kind`` (``experts`` 0.2, ``skilled`` 0.15, ``crowd``
    0.1) and how it was chosen, in words; unknown kind: :data:`DEFAULT_EPSILON` (the strictest)."""
    if kind is None:
        return DEFAULT_EPSILON, f"annotator kind unknown: the strictest of the paper's values ({DEFAULT_EPSILON:g})"
    key = str(kind).strip().lower()
    if key not in EPSILON_BY_KIND:
        raise InputError(f"unknown annotator kind {kind!r} (use {', '.join(EPSILON_BY_KIND)})", field="annotator_kind")
    return EPSILON_BY_KIND[key], f"annotators are {key}: the paper's epsilon for {key}"


@dataclass(frozen=True)
class AltTestSettings:
    """The settings of one Alt-Test.

    ``epsilon``: the cost-benefit margin in [0, 1) (see :func:`epsilon_for`); ``epsilon_source``: how
    it was chosen, in words (stated with every result). ``q``: the false discovery rate of the
    Benjamini-Yekutieli procedure, in (0, 1). ``scoring``: a name of :data:`SCORINGS` or ``auto``
    (``accuracy`` for text labels, ``neg_rmse`` for numbers). ``min_annotators``: annotators an item
    needs (>= 2); ``min_items``: items an annotator needs (>= 2) to be tested."""

    epsilon: float = 0.2
    q: float = 0.05
    scoring: str = AUTO
    min_annotators: int = 2
    min_items: int = 30
    epsilon_source: str = "given"

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, int | float) or not 0 <= self.epsilon < 1:
            raise InputError(f"must be a number in [0, 1), got {self.epsilon!r}", field="epsilon")
        if isinstance(self.q, bool) or not isinstance(self.q, int | float) or not 0 < self.q < 1:
            raise InputError(f"must be a number in (0, 1), got {self.q!r}", field="q")
        for name in ("min_annotators", "min_items"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise InputError(f"must be an integer >= 2, got {v!r}", field=name)
        if self.scoring != AUTO and self.scoring not in SCORINGS:
            raise InputError(f"unknown scoring function {self.scoring!r} (known: auto, "
                             f"{', '.join(SCORINGS.names())})", field="scoring")

    def describe(self) -> str:
        """One line: ``epsilon 0.2 (annotators are experts ...), q 0.05 (Benjamini-Yekutieli), ...``."""
        return (f"epsilon {self.epsilon:g} ({self.epsilon_source}), q {self.q:g} (Benjamini-Yekutieli), "
                f"scoring {self.scoring}, items with >= {self.min_annotators} annotators, annotators with "
                f">= {self.min_items} items")


@dataclass(frozen=True)
class AnnotatorTest:
    """One left-out annotator: ``n_items`` compared, the one-sided ``p_value`` of H0 "the annotator's
    advantage is >= epsilon", whether BY ``rejected`` it, ``advantage_probability`` (share of items
    the judge wins, ``W^f``) and ``human_advantage_probability`` (share the annotator wins, ``W^h``)."""

    annotator: str
    n_items: int
    p_value: float
    rejected: bool
    advantage_probability: float
    human_advantage_probability: float


@dataclass(frozen=True)
class AltTestResult:
    """The Alt-Test of one judge.

    ``winning_rate``: share of the tested annotators whose H0 was rejected (the judge "wins" against
    them), in [0, 1]; ``passed``: ``winning_rate >= 0.5``; ``advantage_probability``: mean over the
    tested annotators of the share of items where the judge scores >= the annotator, in [0, 1].
    ``annotators``: one :class:`AnnotatorTest` per tested annotator; ``dropped_annotators``:
    ``(annotator, items)`` of those under ``min_items``; ``n_items``: items used (>= ``min_annotators``
    annotators and a judge label), ``n_items_few_annotators`` / ``n_items_no_judge``: items left out
    for each reason. ``scoring``: the scoring function used (``auto`` resolved). ``reason``: why the
    test could not run (then the figures are NaN), else None."""

    judge: str
    winning_rate: float
    advantage_probability: float
    annotators: tuple[AnnotatorTest, ...]
    settings: AltTestSettings
    scoring: str
    n_items: int
    n_items_few_annotators: int = 0
    n_items_no_judge: int = 0
    dropped_annotators: tuple[tuple[str, int], ...] = ()
    reason: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool | None:
        """Whether the judge passes (winning rate >= 0.5); None when the test could not run."""
        return None if self.reason is not None else bool(self.winning_rate >= 0.5)

    @property
    def epsilon(self) -> float:
        return self.settings.epsilon

    @property
    def p_values(self) -> dict[str, float]:
        """Each tested annotator's p-value."""
        return {a.annotator: a.p_value for a in self.annotators}

    def dropped(self) -> list[str]:
        """What the paper's minimums left out, in words (empty when nothing)."""
        out = []
        s = self.settings
        if self.n_items_few_annotators:
            out.append(f"{self.n_items_few_annotators} item(s) with fewer than {s.min_annotators} annotators")
        if self.n_items_no_judge:
            out.append(f"{self.n_items_no_judge} item(s) without a label of {self.judge}")
        if self.dropped_annotators:
            listing = ", ".join(f"{a} ({n})" for a, n in self.dropped_annotators)
            out.append(f"{len(self.dropped_annotators)} annotator(s) with fewer than {s.min_items} items: {listing}")
        return out

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (NaN stays NaN)."""
        s = self.settings
        return {
            "judge": self.judge, "winning_rate": self.winning_rate, "advantage_probability": self.advantage_probability,
            "passed": self.passed, "epsilon": s.epsilon, "epsilon_source": s.epsilon_source, "q": s.q,
            "scoring": self.scoring, "min_annotators": s.min_annotators, "min_items": s.min_items,
            "n_items": self.n_items, "n_items_few_annotators": self.n_items_few_annotators,
            "n_items_no_judge": self.n_items_no_judge,
            "dropped_annotators": [{"annotator": a, "n_items": n} for a, n in self.dropped_annotators],
            "annotators": [vars(a).copy() for a in self.annotators], "reason": self.reason, "notes": list(self.notes),
        }


@dataclass(frozen=True, eq=False)
class AltTestReport:
    """The Alt-Tests of several judges against the same annotators, with the settings they share.

    ``results``: one :class:`AltTestResult` per judge, in the order given; ``annotators``: the
    annotators' names; ``source``: what was tested (a file, ``dataset NAME``); ``notes``: what to
    know (e.g. unparseable verdicts counted as a label no annotator gave, judges left out)."""

    results: tuple[AltTestResult, ...]
    settings: AltTestSettings
    annotators: tuple[str, ...] = ()
    source: str = ""
    notes: tuple[str, ...] = ()

    def __getitem__(self, judge: str) -> AltTestResult:
        for r in self.results:
            if r.judge == judge:
                return r
        raise KeyError(judge)

    @property
    def judges(self) -> list[str]:
        return [r.judge for r in self.results]

    @property
    def title(self) -> str:
        """What the table shows and with which epsilon, in one line."""
        s = self.settings
        return (f"Alt-Test (Calderon et al. 2025): can the judge replace an annotator? epsilon {s.epsilon:g} "
                f"({s.epsilon_source}); Benjamini-Yekutieli at q {s.q:g}; passes when the winning rate >= 0.5")

    @property
    def short_title(self) -> str:
        """``Alt-Test at epsilon 0.2 (how it was chosen), q 0.05``."""
        s = self.settings
        return f"Alt-Test at epsilon {s.epsilon:g} ({s.epsilon_source}), q {s.q:g}: passes at winning rate >= 0.5"

    def table(self) -> pd.DataFrame:
        """One row per judge: ``judge, winning_rate, advantage_probability, passed, annotators``
        (tested), ``dropped_annotators``, ``n_items``, ``scoring``, ``epsilon``, ``reason``."""
        rows = [{"judge": r.judge, "winning_rate": r.winning_rate, "advantage_probability": r.advantage_probability,
                 "passed": r.passed, "annotators": len(r.annotators), "dropped_annotators": len(r.dropped_annotators),
                 "n_items": r.n_items, "scoring": r.scoring, "epsilon": r.epsilon, "reason": r.reason}
                for r in self.results]
        return pd.DataFrame(rows, columns=["judge", "winning_rate", "advantage_probability", "passed", "annotators",
                                           "dropped_annotators", "n_items", "scoring", "epsilon", "reason"])

    def p_values(self) -> pd.DataFrame:
        """One row per (judge, tested annotator): ``judge, annotator, n_items, p_value, rejected,
        advantage_probability, human_advantage_probability``."""
        rows = [{"judge": r.judge, **vars(a)} for r in self.results for a in r.annotators]
        return pd.DataFrame(rows, columns=["judge", "annotator", "n_items", "p_value", "rejected",
                                           "advantage_probability", "human_advantage_probability"])

    def describe(self) -> str:
        """The settings in one line, the scoring function as used (``neg_rmse (auto)``)."""
        used = sorted({r.scoring for r in self.results})
        text = self.settings.describe()
        if self.settings.scoring == AUTO and used:
            text = text.replace("scoring auto", f"scoring {'/'.join(used)} (auto: by the labels)")
        return text

    def dropped(self) -> list[str]:
        """What the minimums left out, once per distinct sentence over the judges."""
        return list(dict.fromkeys(d for r in self.results for d in r.dropped()))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        s = self.settings
        return {"title": self.title, "epsilon": s.epsilon, "epsilon_source": s.epsilon_source, "q": s.q,
                "scoring": s.scoring, "min_annotators": s.min_annotators, "min_items": s.min_items,
                "annotators": list(self.annotators), "source": self.source, "notes": list(self.notes),
                "results": [r.to_json() for r in self.results]}


def settings_for(epsilon: float | None = None, annotator_kind: str | None = None, **kw: Any) -> AltTestSettings:
    """The settings of a test: ``epsilon`` when given (source "given"), else the paper's value for
    ``annotator_kind`` (:func:`epsilon_for`); ``kw``: the other fields of :class:`AltTestSettings`."""
    if epsilon is not None:
        return AltTestSettings(epsilon=epsilon, epsilon_source="given", **kw)
    eps, source = epsilon_for(annotator_kind)
    return AltTestSettings(epsilon=eps, epsilon_source=source, **kw)


# ------------------------------------------------------------------------------------------------
# the statistics


def t_test_less(n_pos: np.ndarray, n_neg: np.ndarray, n: np.ndarray, epsilon: float) -> np.ndarray:
    """One-sided one-sample t-test p-values (H1: mean < ``epsilon``) of samples of values in {-1, 0, 1}
    given by their counts: ``n_pos`` ones, ``n_neg`` minus ones, ``n`` values in all; as
    ``scipy.stats.ttest_1samp(d, epsilon, alternative="less").pvalue`` (a constant sample gives 0 or
    1 by the sign of ``mean - epsilon``, NaN when it equals ``epsilon``; NaN for n < 2)."""
    n_pos, n_neg, n = (np.asarray(x, dtype=float) for x in (n_pos, n_neg, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (n_pos - n_neg) / n
        n_zero = n - n_pos - n_neg
        ss = n_pos * (1.0 - mean) ** 2 + n_neg * (1.0 + mean) ** 2 + n_zero * mean**2
        var = ss / (n - 1.0)
        t = (mean - epsilon) / np.sqrt(var / n)
        p = special.stdtr(n - 1.0, t)
    p = np.where(n < 2, np.nan, p)
    return np.asarray(p, dtype=float)


def benjamini_yekutieli(p_values: Sequence[float] | np.ndarray, q: float = 0.05) -> np.ndarray:
    """Which hypotheses the Benjamini-Yekutieli step-up procedure rejects at false discovery rate
    ``q`` (Benjamini and Yekutieli 2001): the ``r`` smallest p-values, ``r`` the largest rank with
    ``p_(r) <= r / m * q / H_m`` (``H_m = 1 + 1/2 + ... + 1/m``). NaN p-values are never rejected
    (and count in ``m``). Returns a bool array in the order of ``p_values``."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    out = np.zeros(m, dtype=bool)
    if m == 0:
        return out
    order = np.argsort(p)  # NaN last
    thresholds = np.arange(1, m + 1) / m * (q / np.sum(1.0 / np.arange(1, m + 1)))
    below = np.flatnonzero(p[order] <= thresholds)
    if below.size:
        out[order[: below[-1] + 1]] = True
    return out


# ------------------------------------------------------------------------------------------------
# labels -> codes


#: label types read as numbers (bool is not one: ``True`` is a category)
_NUMBER_TYPES = (int, float, np.integer, np.floating)
_MISSING_TYPES = (type(None), type(pd.NA))


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float | np.floating) and math.isnan(v))


def _all_numeric(types: set[type]) -> bool:
    return all(issubclass(t, _MISSING_TYPES) or (issubclass(t, _NUMBER_TYPES) and not issubclass(t, bool | np.bool_))
               for t in types)


@dataclass(frozen=True)
class Coded:
    """Labels as numbers: ``humans`` ``(n, k)`` and each judge's ``(n,)`` (NaN = no label);
    ``numeric``: whether the labels were numbers; ``categories``: the label of each code when they
    were coded as categories (else empty)."""

    humans: np.ndarray
    judges: Mapping[str, np.ndarray]
    numeric: bool
    categories: tuple[Any, ...] = ()


def code_labels(humans: Sequence[Sequence[Any]] | np.ndarray, judges: Mapping[str, Sequence[Any] | np.ndarray],
                *, categorical: bool | None = None) -> Coded:
    """Labels of any type (None / NaN = none) as numbers. Labels are compared as Python compares
    them (``1 == 1.0``; ``"1" != 1``). ``categorical``: code every distinct label as a category
    (for ``accuracy``); None: only when some label is not a number."""
    h = np.asarray(humans, dtype=object)
    if h.ndim != 2:
        raise InputError(f"annotator labels must be items x annotators, got shape {h.shape}", field="humans")
    js = {name: np.asarray(v, dtype=object).ravel() for name, v in judges.items()}
    for name, v in js.items():
        if v.shape != (h.shape[0],):
            raise InputError(f"{len(v)} labels for {h.shape[0]} items", field=name)
    parts = [h.ravel().tolist(), *(v.tolist() for v in js.values())]
    numeric = _all_numeric({type(x) for part in parts for x in part})
    if categorical is None:
        categorical = not numeric
    if not categorical:
        if not numeric:
            bad = next(x for part in parts for x in part if not _all_numeric({type(x)}))
            raise InputError(f"numeric scoring needs numbers, got the label {bad!r}", field="labels")
        arrays = [np.array([np.nan if x is None or x is pd.NA else x for x in part], dtype=float) for part in parts]
    else:
        codes: dict[Hashable, float] = {}
        nan = float("nan")
        arrays = [np.array([nan if x is None or x is pd.NA or x != x else codes.setdefault(x, float(len(codes)))
                            for x in part], dtype=float) for part in parts]
    return Coded(arrays[0].reshape(h.shape), dict(zip(js, arrays[1:], strict=True)), numeric,
                 tuple(codes) if categorical else ())


def resolve_scoring(scoring: str, numeric: bool) -> str:
    """``auto`` -> ``neg_rmse`` for numeric labels, ``accuracy`` otherwise; other names as they are."""
    if scoring != AUTO:
        return scoring
    return "neg_rmse" if numeric else "accuracy"


# ------------------------------------------------------------------------------------------------
# the test


def alt_test(humans: Sequence[Sequence[Any]] | np.ndarray, judge: Sequence[Any] | np.ndarray, *,
             annotators: Sequence[str] | None = None, settings: AltTestSettings | None = None,
             judge_name: str = "judge") -> AltTestResult:
    """The Alt-Test of one judge: ``humans`` ``(items, annotators)`` labels (None / NaN = none),
    ``judge`` ``(items,)`` labels (None / NaN = none: the item is left out). See :func:`alt_test_many`."""
    return alt_test_many(humans, {judge_name: judge}, annotators=annotators, settings=settings)[judge_name]


def alt_test_many(humans: Sequence[Sequence[Any]] | np.ndarray, judges: Mapping[str, Sequence[Any] | np.ndarray], *,
                  annotators: Sequence[str] | None = None,
                  settings: AltTestSettings | None = None) -> dict[str, AltTestResult]:
    """The Alt-Test of every judge of ``judges`` (name -> ``(items,)`` labels) against the annotators
    ``humans`` ``(items, annotators)`` (labels of any type, None / NaN = none; ``annotators`` names the
    columns, default ``"0"``, ``"1"``, ...). The annotators' own scores are computed once for all
    judges. Returns judge -> :class:`AltTestResult`."""
    s = settings or AltTestSettings()
    h = np.asarray(humans, dtype=object)
    names = [str(a) for a in annotators] if annotators is not None else [str(j) for j in range(h.shape[1] if h.ndim == 2 else 0)]
    if h.ndim == 2 and len(names) != h.shape[1]:
        raise InputError(f"{len(names)} annotator names for {h.shape[1]} annotator columns", field="annotators")
    categorical = None if s.scoring == AUTO else s.scoring in CATEGORICAL
    coded = code_labels(h, judges, categorical=categorical)
    scoring = resolve_scoring(s.scoring, coded.numeric)
    return alt_test_coded(coded.humans, coded.judges, annotators=names, settings=s, scoring=scoring)


def alt_test_coded(humans: np.ndarray, judges: Mapping[str, np.ndarray], *, annotators: Sequence[str],
                   settings: AltTestSettings, scoring: str) -> dict[str, AltTestResult]:
    """:func:`alt_test_many` on labels already coded as numbers (``humans`` ``(n, k)`` float, NaN =
    none; each judge ``(n,)``) with the scoring function ``scoring`` (a name of :data:`SCORINGS`)."""
    s = settings
    scorer = SCORINGS.get(scoring)
    present = ~np.isnan(humans)
    counts = present.sum(axis=1)
    labelled = counts > 0
    enough = counts >= s.min_annotators
    k = humans.shape[1]
    # the annotators' own scores (shared by every judge): for annotator j, on the items it labelled
    # among those with enough annotators, its label scored against the others'
    own: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for j in range(k):
        rows = np.flatnonzero(enough & present[:, j])
        mask = present[rows].copy()
        mask[:, j] = False
        own.append((rows, mask, scorer(humans[rows, j], humans[rows], mask)))
    out = {}
    for name, judge in judges.items():
        has = ~np.isnan(np.asarray(judge, dtype=float))
        keep = enough & has
        out[name] = _one_judge(name, np.asarray(judge, dtype=float), keep, own, humans, annotators, s, scoring, scorer,
                               n_few=int((labelled & ~enough).sum()), n_no_judge=int((enough & ~has).sum()))
    return out


def _one_judge(name: str, judge: np.ndarray, keep: np.ndarray, own: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
               humans: np.ndarray, annotators: Sequence[str], s: AltTestSettings, scoring: str, scorer: Scorer, *,
               n_few: int, n_no_judge: int) -> AltTestResult:
    tested: list[tuple[str, int, int, int, float, float]] = []
    dropped: list[tuple[str, int]] = []
    for j, (rows, mask, human_score) in enumerate(own):
        sel = keep[rows]
        n = int(sel.sum())
        if n < s.min_items:
            dropped.append((annotators[j], n))
            continue
        r = rows[sel]
        hs = human_score[sel]
        js = scorer(judge[r], humans[r], mask[sel])
        llm_wins = js >= hs
        human_wins = hs >= js
        n_pos = int(np.sum(human_wins & ~llm_wins))
        n_neg = int(np.sum(llm_wins & ~human_wins))
        tested.append((annotators[j], n, n_pos, n_neg, float(np.mean(llm_wins)), float(np.mean(human_wins))))
    common = {"settings": s, "scoring": scoring, "n_items": int(keep.sum()), "n_items_few_annotators": n_few,
              "n_items_no_judge": n_no_judge, "dropped_annotators": tuple(dropped)}
    if not tested:
        reason = (f"no annotator has {s.min_items} items with a label of {name} and >= {s.min_annotators} annotators"
                  if len(annotators) >= 2 else "the Alt-Test needs at least 2 annotators")
        return AltTestResult(name, float("nan"), float("nan"), (), reason=reason, **common)  # type: ignore[arg-type]
    p = t_test_less(np.array([t[2] for t in tested]), np.array([t[3] for t in tested]),
                    np.array([t[1] for t in tested]), s.epsilon)
    rejected = benjamini_yekutieli(p, s.q)
    tests = tuple(AnnotatorTest(a, n, float(pv), bool(rj), adv, hadv)
                  for (a, n, _, _, adv, hadv), pv, rj in zip(tested, p, rejected, strict=True))
    winning = float(rejected.sum()) / len(tests)
    advantage = float(np.mean([t.advantage_probability for t in tests]))
    return AltTestResult(name, winning, advantage, tests, **common)  # type: ignore[arg-type]


def _objects(values: Any) -> np.ndarray:
    """A 1-D object array of ``values`` (kept as they are, even sequences)."""
    vals = list(values)
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out


def alt_test_dicts(humans: Mapping[Any, Mapping[Any, Any]], judges: Mapping[Any, Mapping[Any, Any]], *,
                   settings: AltTestSettings | None = None) -> dict[str, AltTestResult]:
    """The Alt-Test in upstream's own format: ``humans`` ``{annotator: {item: label}}`` and
    ``judges`` ``{judge: {item: label}}`` (an item a judge did not label is left out for that judge).
    Items are those any annotator labelled."""
    items: dict[Any, int] = {}
    for anns in humans.values():
        for i in anns:
            items.setdefault(i, len(items))
    ann_names = list(humans)
    table = np.full((len(items), len(ann_names)), None, dtype=object)
    for j, a in enumerate(ann_names):
        table[[items[i] for i in humans[a]], j] = _objects(humans[a].values())
    cols = {}
    for jn, labels in judges.items():
        col = np.full(len(items), None, dtype=object)
        known = [(items[i], v) for i, v in labels.items() if i in items]
        if known:
            col[[k for k, _ in known]] = _objects(v for _, v in known)
        cols[str(jn)] = col
    return alt_test_many(table, cols, annotators=[str(a) for a in ann_names], settings=settings)


__all__ = [
    "AUTO",
    "DEFAULT_EPSILON",
    "EPSILON_BY_KIND",
    "SCORINGS",
    "AltTestReport",
    "AltTestResult",
    "AltTestSettings",
    "AnnotatorTest",
    "Coded",
    "Scorer",
    "accuracy",
    "alt_test",
    "alt_test_coded",
    "alt_test_dicts",
    "alt_test_many",
    "benjamini_yekutieli",
    "code_labels",
    "epsilon_for",
    "neg_mae",
    "neg_rmse",
    "per_item_scorer",
    "register_scoring",
    "resolve_scoring",
    "settings_for",
    "t_test_less",
]
