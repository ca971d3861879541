"""The evaluation of a pair table against annotators' preferences (+1 A better, -1 B better, 0 tie):
the table-specific steps of :class:`~evalign.evaluate.stages.Evaluation`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.evaluate import baselines as B
from evalign.evaluate import guards as G
from evalign.evaluate.annotators import AnnotatorLabels, pair_labels
from evalign.evaluate.calibrated import WEIGHTED, pair_calibrations, pair_probabilities, weighted_accuracy
from evalign.evaluate.columns import n_unparseable, verdict_array, verdict_codes, verdict_statistics
from evalign.evaluate.result import TrustTable
from evalign.evaluate.selective import SelectiveReport, pair_confidence, selective_report
from evalign.evaluate.spec import Column, TrustRequest
from evalign.evaluate.stages import Ceiling, Evaluation, Undefined, require, signature
from evalign.meta.agreement import majority_vote
from evalign.meta.breakdown import PairArrays, breakdown, group_index, pair_arrays, pair_scores
from evalign.meta.order_diagnostics import (
    FIELDS,
    OrderDiagnostics,
    as_codes,
    both_order_judges,
    order_diagnostics,
    text_lengths,
)
from evalign.meta.pairwise import pairwise_preference_accuracy
from evalign.meta.significance import Statistic
from evalign.meta.trust import PREFERENCES, Predictor

#: epsilons tried for the curve of a pair table (quantiles of |score_a - score_b|)
PAIR_CURVE_POINTS = 60


class PairEvaluation(Evaluation):
    """A pair table: ``human`` is ``annotators x pairs``, every column ``2 x pairs`` (a metric's
    scores of A and B, or a judge's verdicts); the common cells are pairs."""

    mode = "pairs"
    is_pairs = True
    labelled = "labelled pair"
    cell_words = ("pair", "pairs", "pairs")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scored = pd.DataFrame()
        self.pref: list[str] = list(self.spec.human.pref_columns)
        self.metric_cols: list[str] = []
        self.lower: list[str] = []
        self.arrays: PairArrays | None = None
        self.labels = np.empty(0)
        self.vstats: dict[str, Statistic] = {}

    @property
    def verdicts(self) -> bool:
        """Whether a judge's verdict column is evaluated."""
        return any(c.verdict for c in self.cols)

    # -- align ---------------------------------------------------------------------------------

    def presence(self) -> dict[str, np.ndarray]:
        pairs = self.spec.pairs
        assert pairs is not None
        require(pairs, self.pref, "preference", self.source)
        self.table = pairs
        self.scored = self.scored_sides(pairs)
        cols = self.cols
        self.metric_cols = [c.name for c in cols if not c.verdict]
        self.lower = [c.name for c in cols if not c.higher_is_better and not c.verdict]
        arrays = self.arrays = pair_arrays(self.scored, self.pref, self.metric_cols, lower_is_better=self.lower)
        self.human = arrays.human
        n = self.n_items_all = int(arrays.human.shape[1])
        self.data = dict(arrays.metrics)
        for c in cols:
            if c.verdict:
                codes, skipped = verdict_codes(pairs, c.name)
                self.data[c.name] = verdict_array(codes, skipped)
        self.labels = majority_vote(self.human.T, fallback=0.0)
        labelled = np.isfinite(self.labels)
        sys_a = pairs["system_a"].astype(str).to_numpy() if "system_a" in pairs.columns else np.full(n, "A")
        sys_b = pairs["system_b"].astype(str).to_numpy() if "system_b" in pairs.columns else np.full(n, "B")
        have = {}
        missing_rows = []
        for c in cols:
            a, b = self.data[c.name]
            present = ~(np.isnan(a) & np.isnan(b)) if c.verdict else (np.isfinite(a) & np.isfinite(b))
            have[c.name] = present & labelled
            for s in sorted(set(sys_a) | set(sys_b)):
                inv = (sys_a == s) | (sys_b == s)
                missing_rows.append({"metric": c.name, "system": s, "n": int(inv.sum()),
                                     "missing": int((inv & ~present).sum())})
        self.missing = pd.DataFrame(missing_rows, columns=["metric", "system", "n", "missing"])
        self.n_systems_all = len(set(sys_a) | set(sys_b))
        return have

    def scored_sides(self, pairs: pd.DataFrame) -> pd.DataFrame:
        """The pair table with ``<metric>_a`` / ``_b`` columns, taken from the scored sides (an item
        table with a ``side`` column) for the metrics the pair table lacks."""
        side_cols = [c.name for c in self.cols if not c.verdict and not (f"{c.name}_a" in pairs.columns and
                                                                          f"{c.name}_b" in pairs.columns)]
        if not side_cols:
            return pairs
        items = self.spec.items
        if items is None or "side" not in items.columns:
            raise InputError(f"no pair score columns '{side_cols[0]}_a' / '{side_cols[0]}_b' and no scored sides "
                             "(an item table with a 'side' column)", file=self.source, field=side_cols[0])
        require(items, side_cols, "metric or judge", str(items.attrs.get("source", self.source)))
        return pair_scores(pairs, items, side_cols)

    def mask(self) -> None:
        common = self.common
        self.human = self.human.copy()
        self.human[:, ~common] = np.nan
        for c in self.cols:
            self.data[c.name] = np.where(common, self.data[c.name], np.nan)

    # -- compute -------------------------------------------------------------------------------

    def compute(self) -> pd.DataFrame:
        """The overview: accuracy with and without ties of each metric (epsilon calibrated on all
        pairs) and judge (verdicts, unparseable = wrong), and the order diagnostics
        (:data:`~evalign.meta.order_diagnostics.FIELDS`) of each judge run in both orders."""
        self.vstats = verdict_statistics()
        if not self.spec.overview:
            return pd.DataFrame()
        overview = pd.DataFrame([self.overview_row(c) for c in self.cols])
        if "n_unparseable" in overview.columns:
            overview["n_unparseable"] = overview["n_unparseable"].astype("Int64")
        both = sorted(set(both_order_judges(self.table.columns)) & {c.name for c in self.cols if c.verdict})
        if both:  # they describe a judge over every compared pair, whatever the ranking floor
            diags = self.order_diagnostics(both, {"(all)": np.arange(len(self.table))})
            for f in FIELDS:
                overview[f] = [getattr(diags[("(all)", m)], f) if ("(all)", m) in diags else np.nan
                               for m in overview["metric"]]
        return overview

    def overview_row(self, c: Column) -> dict[str, Any]:
        prefs, common, d = self.human, self.common, self.data[c.name]
        a, b = d
        row: dict[str, Any] = {"metric": c.name, "kind": c.kind}
        if c.verdict:
            row["accuracy_with_ties"] = self.vstats["preference_accuracy"](prefs, d)
            row["accuracy_without_ties"] = self.vstats["preference_accuracy_no_ties"](prefs, d)
            row["accuracy_parsed"] = self.vstats["accuracy_parsed"](prefs, d)
            row["epsilon"] = float("nan")
            ok = ~np.isnan(a)
            with np.errstate(invalid="ignore"):
                row["metric_tie_rate"] = float(np.mean(a[ok & common] == b[ok & common])) if (ok & common).any() else np.nan
            row["n_unparseable"] = n_unparseable(d)
        else:
            r = pairwise_preference_accuracy(prefs.T, a, b)
            r0 = pairwise_preference_accuracy(prefs.T, a, b, epsilon=0.0)
            row["accuracy_with_ties"] = r.accuracy_with_ties
            row["accuracy_without_ties"] = r0.accuracy_without_ties
            row["epsilon"] = r.epsilon
            row["metric_tie_rate"] = r.metric_tie_rate
            self.tie_rates[c.name], self.epsilons[c.name] = r.metric_tie_rate, r.epsilon
        row["human_tie_rate"] = float(np.mean(self.labels[common] == 0))
        row["n_pairs"] = int(common.sum())
        return row

    # -- group and rank ------------------------------------------------------------------------

    def baseline_lengths(self) -> np.ndarray | None:
        return B.lengths_pairs(self.table)

    def by_columns(self, by: str) -> list[str]:
        return ["system_a", "system_b"] if by == "system" else [by]

    def groups_of(self, by: str | None) -> dict[str, np.ndarray]:
        assert self.arrays is not None
        return group_index(self.table, PairArrays(self.arrays.items, self.human, {}), by, True)

    def also(self, req: TrustRequest) -> list[str]:
        out = [s for s in PREFERENCES if s != req.statistic]
        return [*out, "accuracy_parsed"] if self.verdicts else out

    def predictors(self, req: TrustRequest, also: Sequence[str]) -> list[Predictor]:
        """Each metric (epsilon calibrated on all pairs), each judge (its verdict statistics) and the
        trivial baselines."""
        spec = self.spec
        preds = [Predictor(c.name, self.data[c.name], kind=c.kind, epsilon=None,
                           statistics=self.vstats if c.verdict else {}, cost=spec.costs.get(c.name, np.nan))
                 for c in self.cols]
        if spec.baselines:
            preds += B.trivial_baselines([req.statistic, *also[:1]], (2, self.n_items_all), level="item",
                                         grouping="item", is_pairs=True, lengths=self.lengths, present=self.common,
                                         labels_have_ties=self.labels_have_ties(req))
        return preds

    def undefined(self, req: TrustRequest) -> Undefined:
        def undefined(hh: np.ndarray, dd: Mapping[str, np.ndarray]) -> str | None:
            return G.undefined_pairs(majority_vote(hh.T, fallback=0.0))

        return undefined

    def ceiling(self, req: TrustRequest) -> Ceiling | None:
        if len(self.pref) < 2:
            return None
        prefs = self.human

        def ceiling(sel: np.ndarray) -> float:
            return B.human_ceiling_pairs(prefs[:, sel], req.statistic)

        return ceiling

    def calibrations(self) -> list[Any]:
        """Each verdict judge with ``J.p_a``: its calibration on the compared pairs."""
        p = pair_probabilities(self.table, [c.name for c in self.cols if c.verdict], source=self.source)
        return pair_calibrations(p, self.labels, self.common)

    def selective(self) -> SelectiveReport:
        """Each verdict judge's confidence (``J.confidence``, else ``J.p_a``) calibrated on the compared
        pairs (see :mod:`evalign.evaluate.selective`); a judge without one is refused, with the reason."""
        req = self.spec.selective
        assert req is not None
        judges = [c.name for c in self.cols if c.verdict]
        confs = {}
        for j in judges:
            codes, _ = verdict_codes(self.table, j)
            confs[j] = pair_confidence(self.table, j, codes, source=self.source)
        missing = [j for j in req.cascade if j not in confs]
        if missing:
            raise InputError(f"not a judge verdict column of this evaluation: {', '.join(missing)} (judges: "
                             f"{', '.join(judges) or 'none'})", field="cascade")
        return selective_report(confs, self.labels, self.common, req)

    def judge_columns(self, rows: pd.DataFrame, groups: Mapping[str, np.ndarray]) -> None:
        """The probability-weighted verdict's accuracy (:data:`~evalign.evaluate.calibrated.WEIGHTED`) of
        each judge with ``J.p_a`` over its group's compared pairs, beside the hard verdict's."""
        p = pair_probabilities(self.table, [c.name for c in self.cols if c.verdict], source=self.source)
        if not p:
            return
        sel = {g: np.isin(np.arange(len(self.table)), idx) & self.common for g, idx in groups.items()}
        rows[WEIGHTED] = [weighted_accuracy(p[m], self.labels, sel[g]) if m in p else np.nan
                          for g, m in zip(rows["group"], rows["metric"], strict=True)]

    def annotator_labels(self) -> tuple[AnnotatorLabels | None, str | None]:
        """Each annotator column's codes and each judge's verdicts on the compared pairs."""
        if len(self.pref) < 2:
            return None, f"{len(self.pref)} annotator column ({', '.join(self.pref)}); the labels need at least 2"
        verdicts = {c.name: self.data[c.name] for c in self.cols if c.verdict}
        if not verdicts:
            return None, "no judge verdict column"
        return pair_labels(self.human, verdicts, self.pref, keep=self.common), None

    def extra_columns(self, rows: pd.DataFrame, groups: Mapping[str, np.ndarray]) -> None:
        """``n_unparseable`` of each judge's verdicts in each group (when a judge is evaluated), the
        statistics the dataset declares (:attr:`EvalSpec.statistics`) of each judge over the group's
        compared pairs, and the order diagnostics (:data:`evalign.meta.order_diagnostics.FIELDS`) of
        each judge with both orders (``J.ab`` / ``J.ba``) over the same pairs (NaN for the other rows)."""
        if not self.verdicts:
            return
        verdict_cols = {c.name for c in self.cols if c.verdict}
        rows["n_unparseable"] = [n_unparseable(self.data[m][:, groups[g]]) if m in verdict_cols else np.nan
                                 for g, m in zip(rows["group"], rows["metric"], strict=True)]
        at = rows.columns.get_loc("ci_high") + 1 if "ci_high" in rows.columns else len(rows.columns)
        for k, stat in enumerate(self.spec.statistics):  # beside evalign's statistic and its interval
            rows.insert(int(at) + k, stat.name, [self.dataset_statistic(stat, m, groups[g]) if m in verdict_cols
                                                 else np.nan for g, m in zip(rows["group"], rows["metric"], strict=True)])
        both = set(both_order_judges(self.table.columns)) & verdict_cols
        if not both:
            return
        diags = self.order_diagnostics(sorted(both), groups)
        for f in FIELDS:
            rows[f] = [getattr(diags[(g, m)], f) if (g, m) in diags else np.nan
                       for g, m in zip(rows["group"], rows["metric"], strict=True)]

    def dataset_statistic(self, stat: Any, judge: str, idx: np.ndarray) -> float:
        """A statistic the dataset declares, of ``judge`` over the compared pairs among rows ``idx``."""
        sel = np.zeros(len(self.table), dtype=bool)
        sel[idx] = True
        keep = sel & self.common & ~np.isnan(self.data[judge][1])  # compared and not skipped
        return float(stat.compute(self.table[keep], judge)) if keep.any() else float("nan")

    def order_diagnostics(self, judges: Sequence[str],
                          groups: Mapping[str, np.ndarray]) -> dict[tuple[str, str], OrderDiagnostics]:
        """(group, judge) -> the judge's :func:`~evalign.meta.order_diagnostics.order_diagnostics`
        over the group's compared pairs (gold: the annotators' majority; lengths in characters)."""
        t = self.table
        la = text_lengths(t["response_a"].tolist()) if "response_a" in t.columns else None
        lb = text_lengths(t["response_b"].tolist()) if "response_b" in t.columns else None
        codes = {j: (as_codes(t[f"{j}.ab"].tolist()), as_codes(t[f"{j}.ba"].tolist())) for j in judges}
        out: dict[tuple[str, str], OrderDiagnostics] = {}
        for g, idx in groups.items():
            sel = np.zeros(len(t), dtype=bool)
            sel[idx] = True
            for j in judges:
                keep = sel & self.common & ~np.isnan(self.data[j][1])  # compared and not skipped
                ab, ba = codes[j]
                out[(g, j)] = order_diagnostics(
                    ab[keep], ba[keep], self.labels[keep],
                    length_a=la[keep] if la is not None else None, length_b=lb[keep] if lb is not None else None)
        return out

    # -- breakdown, curves, sign ---------------------------------------------------------------

    def breakdown(self) -> pd.DataFrame | None:
        """The long breakdown of preference accuracy by ``by`` for the metrics (not the judges)."""
        spec = self.spec
        mcols = [c.name for c in self.cols if not c.verdict]
        if not (spec.by and self.metric_cols and mcols):
            return None
        aligned = self.scored.copy()
        for m in mcols:
            for s in ("a", "b"):
                aligned.loc[~self.common, f"{m}_{s}"] = np.nan
        return breakdown(aligned, human=self.pref, metrics=mcols, by=spec.by, statistic="preference_accuracy",
                         min_group_size=spec.group_floor(), lower_is_better=self.lower, wide=False)

    def curves(self) -> dict[str, tuple[Any, Any, float]]:
        """Each metric's accuracy-vs-epsilon curve over quantiles of its score differences."""
        curves: dict[str, tuple[Any, Any, float]] = {}
        if not self.spec.curves:
            return curves
        prefs = self.human
        for c in self.cols:
            if c.verdict:
                continue
            a, b = self.data[c.name]
            diffs = np.abs(a - b)
            diffs = diffs[np.isfinite(diffs)]
            if not diffs.size:
                continue
            best = pairwise_preference_accuracy(prefs.T, a, b).epsilon
            grid = np.unique(np.r_[0.0, best, np.quantile(diffs, np.linspace(0, 0.95, PAIR_CURVE_POINTS))])
            accs = np.array([pairwise_preference_accuracy(prefs.T, a, b, epsilon=float(e)).accuracy_with_ties
                             for e in grid])
            curves[c.name] = (grid, accs, float(best))
        return curves

    def closing_notes(self, tables: Sequence[TrustTable]) -> list[str]:
        own = [f"{s.name}: {s.description}" for s in self.spec.statistics] if self.verdicts else []
        return [f"{len(self.pref)} annotator column(s), majority vote (no majority = tie); pairs resampled; metric "
                "epsilon calibrated on all pairs; judge verdicts need none (unparseable = wrong)", *own]

    def result_fields(self, req0: TrustRequest, bd: pd.DataFrame | None) -> dict[str, Any]:
        return {
            "n_items": int(self.common.sum()), "n_systems": self.n_systems_all, "systems": None,
            "signature": signature(self.spec, req0, "permutation"),
            "breakdown_statistic": "preference_accuracy" if bd is not None else None,
            "human": ", ".join(self.pref),
        }


__all__ = ["PAIR_CURVE_POINTS", "PairEvaluation"]
