"""Selective judging in an evaluation (``evalign meta --selective``; statistics in
:mod:`evalign.meta.selective`): which verdicts of each judge, or of a cascade of judges, can be
taken with a guarantee of agreement with people, and what share is left to people.

**Confidence per verdict** (pair tables): ``J.confidence`` (in [0, 1], with ``J.confidence_source``
naming where it came from) belongs to the judge's resolved verdict ``J``; without it, ``J.p_a``
(P(A better): logprobs, a reward model's sigmoid) gives ``max(p_a, 1 - p_a)`` for the verdict of its
arg max (``p_a = 0.5``: a tie), named in a note where it differs from the resolved verdict. A judge
with neither is refused, with the reason. A confidence outside [0, 1], infinite or a text is refused
(naming file, row and column); an empty cell or NaN is no confidence.

**Correct** means equal to the humans' majority label; pairs the humans call a tie or split on are
left out and counted; a judge's own tie, or no verdict, is wrong. In an item table (graded judges):
the confidence is ``J.confidence``, else ``J.p`` (the probability of the chosen grade), for the grade
``J.grade`` (else the judge column); correct means the exact grade, the human rating rounded. A pair without a confidence is
left out of that judge's calibration (and out of a cascade's), counted.

``holdout``: a seeded share of the pairs is kept out of calibration; the thresholds are applied to
it and its coverage and agreement reported (what a new set of items would see).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.evaluate.calibrated import unit_column
from evalign.meta.selective import (
    CascadeCalibration,
    SelectiveCalibration,
    SelectiveSettings,
    accuracy_interval,
    apply_thresholds,
    calibrate,
    calibrate_cascade,
)
from evalign.signature import package_version, stable_hash

#: the columns of the selective table (``stage``: ``alone`` for a judge calibrated by itself, the
#: stage number in a cascade; the whole cascade is the row of judge ``(cascade)``, stage ``all``;
#: with a cascade, the judges alone are in :attr:`SelectiveReport.alone`, not in the rows)
ROW_COLUMNS = ("judge", "stage", "n", "threshold", "coverage", "selective_accuracy", "ci_low", "ci_high",
               "risk_bound", "decided", "to_people", "delta", "guarantee", "holdout_n", "holdout_coverage",
               "holdout_accuracy")


@dataclass(frozen=True)
class SelectiveRequest:
    """``evalign meta --selective``: the ``settings`` (risk ``alpha``, error level ``delta``),
    a ``cascade`` order (empty: each judge alone), a ``holdout`` share in (0, 1) or None, its
    ``seed``, and the ``confidence`` level of the accuracy intervals."""

    settings: SelectiveSettings
    cascade: tuple[str, ...] = ()
    holdout: float | None = None
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.holdout is not None and not 0 < self.holdout < 1:
            raise InputError(f"must lie strictly between 0 and 1, got {self.holdout}", field="holdout")
        if not 0 < self.confidence < 1:
            raise InputError(f"must lie strictly between 0 and 1, got {self.confidence}", field="confidence")
        if len(set(self.cascade)) != len(self.cascade):
            raise InputError(f"a judge is named twice: {', '.join(self.cascade)}", field="cascade")


@dataclass(frozen=True)
class JudgeConfidence:
    """One judge's confidences on the pairs of a table: ``confidence`` (NaN: none), the ``verdict``
    code the confidence belongs to (+1 A, -1 B, 0 tie, NaN none), ``source`` (where the confidence
    came from) and ``differs`` (pairs where that verdict is not the judge's resolved one)."""

    judge: str
    confidence: np.ndarray = field(repr=False)
    verdict: np.ndarray = field(repr=False)
    source: str
    differs: int = 0


@dataclass(frozen=True, eq=False)
class SelectiveReport:
    """What ``--selective`` found: ``rows`` (:data:`ROW_COLUMNS`), each judge's calibration alone
    (``alone``), the ``cascade`` (or None), the judges ``refused`` (judge -> why), ``curves`` (judge
    -> the risk-coverage curve: candidates, coverages, bounds, and the chosen threshold), ``notes``
    and the ``record`` (what ``--save-calibration`` writes, see :func:`calibration_record`)."""

    settings: SelectiveSettings
    rows: pd.DataFrame
    alone: Mapping[str, SelectiveCalibration]
    cascade: CascadeCalibration | None
    refused: Mapping[str, str]
    curves: Mapping[str, Mapping[str, Any]]
    notes: tuple[str, ...]
    record: Mapping[str, Any]
    holdout: float | None = None

    @property
    def promise(self) -> str:
        """The guarantee of one judge in words."""
        return self.settings.promise()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (thresholds of abstaining judges as null)."""
        rows = self.rows.astype(object).where(self.rows.notna(), None).to_dict("records")
        for r in rows:
            if isinstance(r["threshold"], float) and math.isinf(r["threshold"]):
                r["threshold"] = None
        return {"alpha": self.settings.alpha, "delta": self.settings.delta, "min_items": self.settings.min_items,
                "grid": self.settings.grid, "holdout": self.holdout, "promise": self.promise, "rows": rows,
                "alone": {j: c.to_json() for j, c in self.alone.items()},
                "cascade": None if self.cascade is None else self.cascade.to_json(),
                "refused": dict(self.refused), "notes": list(self.notes),
                "curves": {j: {k: (list(v) if isinstance(v, np.ndarray) else v) for k, v in c.items()}
                           for j, c in self.curves.items()}}


def _numbers(table: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)


def pair_confidence(table: pd.DataFrame, judge: str, verdict: np.ndarray, *,
                    source: str | None = None) -> JudgeConfidence | str:
    """The confidence of ``judge``'s verdicts in the pair table (see the module doc), given its
    resolved ``verdict`` codes; the reason as a string when it has none."""
    if f"{judge}.confidence" in table.columns:
        conf = unit_column(table, f"{judge}.confidence", source=source, what="a confidence")
        src_col = f"{judge}.confidence_source"
        names = (sorted({str(v) for v in table[src_col].dropna()}) if src_col in table.columns else [])
        return JudgeConfidence(judge, conf, verdict, "; ".join(names) or f"{judge}.confidence")
    if f"{judge}.p_a" in table.columns:
        p = unit_column(table, f"{judge}.p_a", source=source)
        conf = np.maximum(p, 1.0 - p)
        argmax = np.where(np.isfinite(p), np.sign(p - 0.5), np.nan)
        differs = int(np.sum(np.isfinite(argmax) & (argmax != verdict)))
        return JudgeConfidence(judge, conf, argmax, "max(J.p_a, 1 - J.p_a) (P(A better))", differs)
    return (f"{judge} has no confidence: no {judge}.confidence or {judge}.p_a column (a judge with logprobs, a "
            "reward model, or a confidence given as J.confidence): it cannot be calibrated")


def item_confidence(table: pd.DataFrame, judge: str, *, source: str | None = None) -> JudgeConfidence | str:
    """A graded judge's confidence in an item table: ``J.confidence`` (else ``J.p``, the probability
    of the grade it chose) for its grade ``J.grade`` (else the judge column itself); the reason as a
    string when it has none."""
    grade = _numbers(table, f"{judge}.grade" if f"{judge}.grade" in table.columns else judge)
    for col, name in ((f"{judge}.confidence", None), (f"{judge}.p", "J.p (the probability of the chosen grade)")):
        if col in table.columns:
            conf = unit_column(table, col, source=source, what="a confidence" if name is None else "a probability")
            src_col = f"{judge}.confidence_source"
            names = (sorted({str(v) for v in table[src_col].dropna()}) if src_col in table.columns else [])
            return JudgeConfidence(judge, conf, grade, name or "; ".join(names) or col)
    return (f"{judge} has no confidence: no {judge}.confidence or {judge}.p column (a graded judge with logprobs, "
            "or a confidence given as J.confidence): it cannot be calibrated")


def item_correct(conf: JudgeConfidence, ratings: np.ndarray) -> np.ndarray:
    """Whether each grade is the humans' (the rating rounded to the nearest grade); NaN without a rating."""
    r = np.asarray(ratings, dtype=float)
    right = np.isfinite(conf.verdict) & (conf.verdict == np.rint(r))
    return np.where(np.isfinite(r), right.astype(float), np.nan)


def pair_correct(conf: JudgeConfidence, labels: np.ndarray) -> np.ndarray:
    """Whether each verdict agrees with the humans' majority (+1 / -1); NaN where the humans are
    tied or absent. No verdict or the judge's own tie is wrong."""
    v = conf.verdict
    ok = np.isfinite(labels) & (labels != 0)
    right = np.isfinite(v) & (v == labels)
    return np.where(ok, right.astype(float), np.nan)


def selective_report(confidences: Mapping[str, JudgeConfidence | str], labels: np.ndarray, keep: np.ndarray,
                     request: SelectiveRequest, *, graded: bool = False) -> SelectiveReport:
    """The :class:`SelectiveReport` of the judges ``confidences`` (judge -> confidence, or why it has
    none) against the humans' majority ``labels`` (+1 / -1 / 0 tie, NaN none) on the pairs ``keep``;
    ``graded``: against the human ratings of an item table (the exact grade is correct)."""
    correct = item_correct if graded else pair_correct
    s = request.settings
    refused, confs = _usable(confidences, request)
    labels = np.asarray(labels, dtype=float)
    notes = _notes(confs, labels, keep, graded)
    cal_mask, test_mask = _split(keep, len(labels), request)
    rows: list[dict[str, Any]] = []
    alone: dict[str, SelectiveCalibration] = {}
    curves: dict[str, dict[str, Any]] = {}
    for j, c in confs.items():
        y = correct(c, labels)
        use = cal_mask & np.isfinite(c.confidence) & np.isfinite(y)
        missing = int(np.sum(cal_mask & np.isfinite(y) & ~np.isfinite(c.confidence)))
        if missing:
            notes.append(f"{j}: {missing} labelled items without a confidence are left out of its calibration")
        cal = calibrate(c.confidence[use], y[use].astype(bool), s)
        alone[j] = cal
        curves[j] = {"candidates": cal.candidates, "coverages": cal.coverages, "bounds": cal.bounds,
                     "risks": cal.risks, "threshold": None if cal.abstains else cal.threshold,
                     "coverage": cal.coverage, "risk": 1 - cal.selective_accuracy if cal.n_decided else None}
        if not request.cascade:
            row = _row(j, "alone", cal, cal.coverage, s, s.delta, request.confidence)
            row.update(_holdout([c], [y], [cal.threshold], test_mask))
            rows.append(row)
    cascade = None
    if request.cascade:
        ys = {j: correct(confs[j], labels) for j in request.cascade}
        use = cal_mask & np.isfinite(labels) & ((labels != 0) | graded)
        cascade, cascade_rows = _cascade(confs, ys, use, test_mask, request)
        rows += cascade_rows
    table = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return SelectiveReport(s, table, alone, cascade, refused, curves, tuple(notes),
                           calibration_record(request, alone, cascade, confs), request.holdout)


def _usable(confidences: Mapping[str, JudgeConfidence | str],
            request: SelectiveRequest) -> tuple[dict[str, str], dict[str, JudgeConfidence]]:
    """The judges refused (judge -> why) and those with a confidence; an error when a cascade names a
    refused or unknown judge, or when no judge has a confidence."""
    refused = {j: c for j, c in confidences.items() if isinstance(c, str)}
    confs = {j: c for j, c in confidences.items() if not isinstance(c, str)}
    for j in request.cascade:
        if j not in confidences:
            raise InputError(f"{j} is not a judge column of this evaluation", field="cascade")
        if j in refused:
            raise InputError(refused[j], field="cascade")
    if not confs:
        raise InputError("no judge carries a confidence: " + "; ".join(refused.values()), field="selective")
    return refused, confs


def _notes(confs: Mapping[str, JudgeConfidence], labels: np.ndarray, keep: np.ndarray, graded: bool) -> list[str]:
    """What was left out (human ties) and where a confidence's verdict is not the resolved one."""
    ties = 0 if graded else int(np.sum(keep & np.isfinite(labels) & (labels == 0)))
    notes = []
    if ties:
        notes.append(f"{ties} pairs the humans call a tie (or split on) are left out of the selective calibration")
    for c in confs.values():
        if c.differs:
            notes.append(f"{c.judge}: the verdict its confidence belongs to (the arg max of J.p_a) differs from its "
                         f"resolved verdict on {c.differs} pairs; the arg max is the verdict calibrated")
    return notes


def _cascade(confs: Mapping[str, JudgeConfidence], ys: Mapping[str, np.ndarray], use: np.ndarray,
             test_mask: np.ndarray, request: SelectiveRequest) -> tuple[CascadeCalibration, list[dict[str, Any]]]:
    """The cascade of ``request`` calibrated on the items ``use`` where every judge has a confidence,
    and its rows: one per stage and the whole cascade's."""
    s, order = request.settings, request.cascade
    for j in order:
        use = use & np.isfinite(confs[j].confidence)
    cascade = calibrate_cascade({j: (confs[j].confidence[use], ys[j][use].astype(bool)) for j in order}, order, s)
    rows = [_row(j, str(k + 1), st, cascade.decided[j], s, s.delta, request.confidence)
            for k, (j, st) in enumerate(zip(order, cascade.stages, strict=True))]
    n_dec = round(cascade.coverage * cascade.n)
    n_right = round(cascade.selective_accuracy * n_dec) if n_dec else 0
    lo, hi = accuracy_interval(n_right, n_dec, request.confidence)
    total = {"judge": "(cascade)", "stage": "all", "n": cascade.n, "threshold": np.nan,
             "coverage": cascade.coverage, "selective_accuracy": cascade.selective_accuracy, "ci_low": lo,
             "ci_high": hi, "risk_bound": np.nan, "decided": cascade.coverage, "to_people": cascade.to_people,
             "delta": cascade.delta_union,
             "guarantee": (s.promise(cascade.delta_union) + _union_words(cascade)
                           if cascade.coverage > 0 else "no stage gives a verdict: every item goes to people")}
    total.update(_holdout([confs[j] for j in order], [ys[j] for j in order], list(cascade.thresholds), test_mask))
    rows.append(total)
    return cascade, rows


def _union_words(cascade: CascadeCalibration) -> str:
    k = sum(not x.abstains for x in cascade.stages)
    return (" (the one stage that gives verdicts)" if k == 1 else
            f" (union bound: delta summed over the {k} stages that give verdicts)")


def _split(keep: np.ndarray, n: int, request: SelectiveRequest) -> tuple[np.ndarray, np.ndarray]:
    """The calibration pairs and the held-out ones (none without ``holdout``)."""
    keep = np.asarray(keep, dtype=bool)
    if request.holdout is None:
        return keep, np.zeros(n, dtype=bool)
    idx = np.flatnonzero(keep)
    rng = np.random.default_rng(request.seed)
    held = rng.permutation(idx)[: round(len(idx) * request.holdout)]
    test = np.zeros(n, dtype=bool)
    test[held] = True
    return keep & ~test, test


def _row(judge: str, stage: str, cal: SelectiveCalibration, decided: float, s: SelectiveSettings, delta: float,
         confidence: float) -> dict[str, Any]:
    lo, hi = accuracy_interval(cal.n_correct, cal.n_decided, confidence)
    guarantee = cal.reason if cal.abstains else s.promise(delta)
    return {"judge": judge, "stage": stage, "n": cal.n, "threshold": cal.threshold, "coverage": cal.coverage,
            "selective_accuracy": cal.selective_accuracy, "ci_low": lo, "ci_high": hi, "risk_bound": cal.risk_bound,
            "decided": decided, "to_people": (1.0 - cal.coverage) if stage == "alone" else np.nan,
            "delta": delta, "guarantee": guarantee}


def _holdout(confs: Sequence[JudgeConfidence], ys: Sequence[np.ndarray], thresholds: Sequence[float],
             test: np.ndarray) -> dict[str, Any]:
    """Coverage and agreement of the thresholds on the held-out pairs (NaN without a holdout)."""
    labelled = test.copy()
    for y in ys:
        labelled &= np.isfinite(y)
    for c in confs:
        labelled &= np.isfinite(c.confidence)
    n = int(labelled.sum())
    if not n:
        return {"holdout_n": np.nan, "holdout_coverage": np.nan, "holdout_accuracy": np.nan}
    who = apply_thresholds([c.confidence[labelled] for c in confs], thresholds)
    right = sum(int(np.sum(ys[i][labelled][who == i] == 1)) for i in range(len(confs)))
    decided = int(np.sum(who >= 0))
    return {"holdout_n": n, "holdout_coverage": decided / n,
            "holdout_accuracy": right / decided if decided else np.nan}


def calibration_record(request: SelectiveRequest, alone: Mapping[str, SelectiveCalibration],
                       cascade: CascadeCalibration | None, confs: Mapping[str, JudgeConfidence]) -> dict[str, Any]:
    """What ``--save-calibration`` writes: risk, delta, the settings, per judge its threshold and
    signature (its column, where its confidence comes from), and the cascade's order and thresholds.
    Never a credential: nothing of a backend (keys, URLs) is recorded."""
    s = request.settings

    def judge(j: str, t: float) -> dict[str, Any]:
        sig = {"column": j, "confidence_source": confs[j].source}
        return {"column": j, "threshold": None if math.isinf(t) else t, "signature": sig,
                "signature_hash": stable_hash(sig)}

    out: dict[str, Any] = {
        "kind": "evalign selective calibration", "risk": s.alpha, "delta": s.delta, "min_items": s.min_items,
        "grid": s.grid, "evalign": package_version("evalign"),
    }
    if cascade is not None:
        out["cascade"] = True
        out["judges"] = [judge(j, t) for j, t in zip(cascade.order, cascade.thresholds, strict=True)]
        out["delta_union"] = cascade.delta_union
    else:
        out["cascade"] = False
        out["judges"] = [judge(j, c.threshold) for j, c in alone.items()]
    return out


__all__ = ["ROW_COLUMNS", "JudgeConfidence", "SelectiveReport", "SelectiveRequest", "calibration_record",
           "item_confidence", "item_correct", "pair_confidence", "pair_correct", "selective_report"]
