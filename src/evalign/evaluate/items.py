"""The evaluation of an item table (one row per item x system) against item-level human ratings
or system-level human values: the table-specific steps of :class:`~evalign.evaluate.stages.Evaluation`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.evaluate import baselines as B
from evalign.evaluate import guards as G
from evalign.evaluate.annotators import AnnotatorLabels, item_labels
from evalign.evaluate.calibrated import item_calibrations
from evalign.evaluate.result import TrustTable
from evalign.evaluate.selective import SelectiveReport, item_confidence, selective_report
from evalign.evaluate.spec import Column, TrustRequest
from evalign.evaluate.stages import (
    Ceiling,
    Evaluation,
    Undefined,
    paired_test_of,
    require,
    signature,
    thin_curve,
)
from evalign.meta.breakdown import ItemArrays, breakdown, group_index, item_arrays
from evalign.meta.correlation import correlation, system_means
from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy
from evalign.meta.significance import CORRELATIONS
from evalign.meta.system_level import CorpusStats, corpus_statistic, corpus_stats, index_array
from evalign.meta.trust import Predictor


class ItemEvaluation(Evaluation):
    """An item table: ``human`` is ``systems x items`` (item ratings) or one value per system;
    every column is ``systems x items``; the common cells are ``(system, item)`` cells."""

    mode = "items"
    is_pairs = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrays: ItemArrays | None = None
        self.h_spec: str | dict[str, float] = ""
        self.lower: list[str] = []
        self.cstats: dict[str, CorpusStats] = {}
        self.idx = np.empty(0)
        self.sys_scores: dict[str, np.ndarray] = {}
        self.h_sys = np.empty(0)
        self.systems: pd.DataFrame | None = None
        self.ann_arrays: list[np.ndarray] = []
        self.n_systems_common = self.n_items_common = 0

    @property
    def item_level(self) -> bool:
        """Whether the labels are item-level ratings (else system-level values)."""
        return self.spec.human.kind == "item"

    # -- align ---------------------------------------------------------------------------------

    def presence(self) -> dict[str, np.ndarray]:
        spec = self.spec
        table = spec.items
        assert table is not None
        hum = spec.human
        cols = self.cols
        require(table, ["id", "system"], "item", self.source)
        require(table, [c.name for c in cols], "metric or judge", self.source)
        if hum.column is not None:
            require(table, [hum.column], "human rating", self.source)
            self.h_spec = hum.column
        else:
            assert hum.system is not None
            self.h_spec = {str(k): float(v) for k, v in hum.system.items()}
            table = table[table["system"].astype(str).isin(self.h_spec)].reset_index(drop=True)
            if table.empty:
                raise InputError("no system of the table has a system-level human value", file=self.source,
                                 field="system")
        self.table = table
        self.lower = [c.name for c in cols if not c.higher_is_better]
        arrays = self.arrays = item_arrays(table, self.h_spec, [c.name for c in cols],
                                           human_higher_is_better=hum.higher_is_better, lower_is_better=self.lower)
        n_sys, n_it = len(arrays.systems), len(arrays.items)
        self.n_systems_all, self.n_items_all = n_sys, n_it
        exists_m = np.zeros((n_sys, n_it), dtype=bool)  # the cells with a row of the table
        exists_m[pd.Index(arrays.systems).get_indexer(table["system"].astype(str)),
                 pd.Index(arrays.items).get_indexer(table["id"].astype(str))] = True
        h_present = np.isfinite(arrays.human) if arrays.human.ndim == 2 else np.ones((n_sys, n_it), dtype=bool)
        h_present &= exists_m
        self.missing = self.missing_table(exists_m)
        return {c.name: np.isfinite(arrays.metrics[c.name]) & h_present for c in cols}

    def missing_table(self, exists: np.ndarray) -> pd.DataFrame:
        """Per column and system: the cells in the table and those without a value."""
        assert self.arrays is not None
        rows = []
        for c in self.cols:
            arr = self.arrays.metrics[c.name]
            for i, s in enumerate(self.arrays.systems):
                rows.append({"metric": c.name, "system": s, "n": int(exists[i].sum()),
                             "missing": int((exists[i] & ~np.isfinite(arr[i])).sum())})
        return pd.DataFrame(rows, columns=["metric", "system", "n", "missing"])

    def mask(self) -> None:
        assert self.arrays is not None
        common = self.common
        h = self.arrays.human.copy()
        if h.ndim == 2:
            h[~common] = np.nan
        self.human = h
        self.data = {c.name: np.where(common, self.arrays.metrics[c.name], np.nan) for c in self.cols}
        self.n_systems_common = int(common.any(axis=1).sum())
        self.n_items_common = int(common.any(axis=0).sum())
        if self.n_systems_common < self.n_systems_all:
            dropped = [s for s, k in zip(self.arrays.systems, common.any(axis=1), strict=True) if not k]
            self.notes.append(f"systems without a common cell left out: {', '.join(dropped)}")

    # -- compute -------------------------------------------------------------------------------

    def compute(self) -> pd.DataFrame:
        """The overview (system-level and, for item ratings, item-level statistics of each column)
        and the table of system scores; system scores as each column declares them."""
        assert self.arrays is not None
        for c in self.cols:  # corpus statistics (texts present and the metric object known)
            if c.system_level == "corpus":
                if c.metric is None or "response" not in self.table.columns:
                    raise InputError(f"'{c.name}': a corpus system score needs the metric and the texts", field=c.name)
                self.cstats[c.name] = corpus_stats(self.table, c.metric, self.arrays.systems, self.arrays.items)
        self.idx = index_array(self.n_systems_all, self.n_items_all, self.common)
        self.sys_scores = {c.name: self.system_score(c) for c in self.cols}
        h = self.human
        self.h_sys = h if h.ndim == 1 else system_means(h)
        if h.ndim == 1:
            self.h_sys = np.where(self.common.any(axis=1), self.h_sys, np.nan)
        overview = pd.DataFrame([self.overview_row(c) for c in self.cols] if self.spec.overview else [])
        self.systems = self.system_table()
        return overview

    def sign(self, c: Column) -> float:
        return 1.0 if c.higher_is_better else -1.0

    def system_score(self, c: Column) -> np.ndarray:
        """A column's system scores (higher = better): corpus scores or the mean of its items."""
        if c.name in self.cstats:
            return self.sign(c) * self.cstats[c.name].system_scores(self.idx)
        return system_means(self.data[c.name])

    def overview_row(self, c: Column) -> dict[str, Any]:
        m = self.data[c.name]
        h, h_sys, ms = self.human, self.h_sys, self.sys_scores[c.name]
        grouping = self.spec.grouping
        row: dict[str, Any] = {"metric": c.name, "kind": c.kind}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for method in CORRELATIONS:
                row[f"system_{method}"] = correlation(h_sys, ms, method, "system").value
            if self.item_level:
                for method in CORRELATIONS:
                    row[f"item_{method}"] = correlation(h, m, method, "item", grouping).value  # type: ignore[arg-type]
                pa = pairwise_accuracy(h, m, grouping=grouping)  # type: ignore[arg-type]
                row["pairwise_accuracy"] = pa.accuracy
                row["epsilon"] = pa.epsilon
                row["metric_tie_rate"] = pa.metric_tie_rate
                row["human_tie_rate"] = pa.human_tie_rate
                self.tie_rates[c.name], self.epsilons[c.name] = pa.metric_tie_rate, pa.epsilon
            else:
                row["system_pairwise_accuracy"] = pairwise_accuracy(h_sys, ms, grouping="none", epsilon=0.0).accuracy
        row["system_score"] = c.system_label
        row["n_items"] = int(np.isfinite(m).any(axis=0).sum())
        return row

    def system_table(self) -> pd.DataFrame:
        """Per system: the human value and each column's declared system score, best human first."""
        assert self.arrays is not None
        hum = self.spec.human
        sign_h = 1.0 if hum.higher_is_better else -1.0
        rows = []
        for i, s in enumerate(self.arrays.systems):
            r: dict[str, Any] = {"system": s, "human": float(sign_h * self.h_sys[i])}
            for c in self.cols:
                r[c.system_label] = float(self.sign(c) * self.sys_scores[c.name][i])
            rows.append(r)
        return pd.DataFrame(rows).sort_values("human", ascending=not hum.higher_is_better, kind="stable",
                                              na_position="last").reset_index(drop=True)

    # -- group and rank ------------------------------------------------------------------------

    def baseline_lengths(self) -> np.ndarray | None:
        assert self.arrays is not None
        return B.lengths_items(self.table, self.arrays.systems, self.arrays.items)

    def groups_of(self, by: str | None) -> dict[str, np.ndarray]:
        """The items of each group that have a common cell; and the annotator arrays of the human ceiling."""
        assert self.arrays is not None
        used = self.common.any(axis=0)
        groups = {g: sel[used[sel]] for g, sel in group_index(self.table, self.arrays, by, False).items()}
        hum = self.spec.human
        ann = [a for a in hum.annotators if a in self.table.columns] if self.item_level else []
        if len(ann) >= 2:
            self.ann_arrays = [np.where(self.common, item_arrays(self.table, a, [],
                                                                 human_higher_is_better=hum.higher_is_better).human,
                                        np.nan) for a in ann]
        return groups

    def calibrations(self) -> list[Any]:
        """Each graded judge with ``J.p`` and ``J.grade``: its calibration against the rating column."""
        hum = self.spec.human.column
        if hum is None:
            return []
        return item_calibrations(self.table, [c.name for c in self.cols if c.kind == "judge"], hum, source=self.source)

    def selective(self) -> SelectiveReport:
        """Each graded judge's confidence (``J.confidence``, else ``J.p``) calibrated on the rows with a
        human rating (see :mod:`evalign.evaluate.selective`); a judge without one is refused."""
        req = self.spec.selective
        hum = self.spec.human.column
        assert req is not None
        if hum is None:
            raise InputError("--selective needs item ratings (a rating column) or pair labels", field="selective")
        judges = [c.name for c in self.cols if c.kind == "judge"]
        missing = [j for j in req.cascade if j not in judges]
        if missing:
            raise InputError(f"not a judge column of this evaluation: {', '.join(missing)} (judges: "
                             f"{', '.join(judges) or 'none'})", field="cascade")
        confs = {j: item_confidence(self.table, j, source=self.source) for j in judges}
        ratings = pd.to_numeric(self.table[hum], errors="coerce").to_numpy(dtype=float)
        return selective_report(confs, ratings, np.isfinite(ratings), req, graded=True)

    def annotator_labels(self) -> tuple[AnnotatorLabels | None, str | None]:
        """Each single-annotator rating column and each judge's scores (raw, on the annotators'
        scale) on the common cells; items are the resampling units."""
        hum = self.spec.human
        ann = [a for a in hum.annotators if a in self.table.columns] if self.item_level else []
        if len(ann) < 2:
            return None, (f"{len(ann)} annotator column(s); the labels need at least 2 (Human.annotators)"
                          if self.item_level else "system-level labels have no annotators")
        judges = [c for c in self.cols if c.kind == "judge"]
        notes = [f"{c.name}: its scores run the other way from the annotators' (higher_is_better "
                 f"{c.higher_is_better}): not compared with the annotators" for c in judges
                 if c.higher_is_better != hum.higher_is_better]
        judges = [c for c in judges if c.higher_is_better == hum.higher_is_better]
        if not judges:
            return AnnotatorLabels(np.empty((0, len(ann))), {}, tuple(ann), False, notes=tuple(notes)), \
                "no judge column (a metric's scores are not on the annotators' scale)"
        raw = item_arrays(self.table, ann[0], [*ann[1:], *(c.name for c in judges)])
        ratings = [raw.human, *(raw.metrics[a] for a in ann[1:])]
        scores = {c.name: raw.metrics[c.name] for c in judges}
        return item_labels(ratings, scores, ann, keep=self.common, notes=notes), None

    def predictors(self, req: TrustRequest, also: Sequence[str]) -> list[Predictor]:
        """Each column (a corpus column at system level by its corpus statistic) and the trivial baselines."""
        spec = self.spec
        if req.level == "item" and not self.item_level:
            raise InputError("level 'item' needs item-level human ratings (a rating column)", field="level")
        stats_needed = [req.statistic, *also]
        preds = []
        for c in self.cols:
            cost = spec.costs.get(c.name, np.nan)
            if req.level == "system" and c.name in self.cstats and req.statistic in CORRELATIONS:
                st = {s: corpus_statistic(s, self.cstats[c.name], self.sign(c)) for s in stats_needed
                      if s in CORRELATIONS}
                preds.append(Predictor(c.name, self.idx, kind=c.kind, statistics=st, cost=cost))
            else:
                preds.append(Predictor(c.name, self.data[c.name], kind=c.kind, cost=cost))
        if spec.baselines:
            preds += B.trivial_baselines(stats_needed, (self.n_systems_all, self.n_items_all), level=req.level,
                                         grouping=req.grouping, is_pairs=False, lengths=self.lengths,
                                         present=self.common, labels_have_ties=self.labels_have_ties(req))
        return preds

    def undefined(self, req: TrustRequest) -> Undefined:
        first_name, level, grouping = self.cols[0].name, req.level, req.grouping

        def undefined(hh: np.ndarray, dd: Mapping[str, np.ndarray]) -> str | None:
            ok = np.isfinite(dd[first_name])
            ns = int(ok.any(axis=1).sum())
            ni = int(ok.any(axis=0).sum())
            hv = hh[np.isfinite(hh)] if hh.ndim == 1 else hh[ok & np.isfinite(hh)]
            return G.undefined_items(hv, ns, ni, level, grouping)

        return undefined

    def ceiling(self, req: TrustRequest) -> Ceiling | None:
        if not self.ann_arrays:
            return None
        ann = self.ann_arrays

        def ceiling(sel: np.ndarray) -> float:
            return B.human_ceiling_items([a[:, sel] for a in ann], req.statistic, req.level, req.grouping)

        return ceiling

    # -- breakdown, curves, sign ---------------------------------------------------------------

    def breakdown(self) -> pd.DataFrame | None:
        """The long breakdown of the first trust table's statistic by ``by``, on the common cells."""
        spec = self.spec
        if not spec.by:
            return None
        assert self.arrays is not None
        req0 = spec.trust_requests()[0]
        aligned = self.table.copy()
        keep = pd.Series(self.common.ravel(), index=pd.MultiIndex.from_product([list(self.arrays.systems),
                                                                                list(self.arrays.items)]))
        key = pd.MultiIndex.from_arrays([aligned["system"].astype(str), aligned["id"].astype(str)])
        mask = keep.reindex(key).fillna(False).to_numpy(dtype=bool)
        for c in self.cols:
            aligned.loc[~mask, c.name] = np.nan
        return breakdown(aligned, human=self.h_spec, metrics=[c.name for c in self.cols], by=spec.by,
                         statistic=req0.statistic, level=req0.level, grouping=req0.grouping,
                         min_group_size=spec.group_floor(), human_higher_is_better=spec.human.higher_is_better,
                         lower_is_better=self.lower, wide=False)

    def curves(self) -> dict[str, tuple[Any, Any, float]]:
        """Each column's accuracy-vs-epsilon curve of tie calibration (item ratings only)."""
        curves: dict[str, tuple[Any, Any, float]] = {}
        if not (self.spec.curves and self.item_level):
            return curves
        for c in self.cols:
            cal = calibrate_epsilon(self.human, self.data[c.name], grouping=self.spec.grouping)  # type: ignore[arg-type]
            e, a = thin_curve(np.asarray(cal.epsilons, dtype=float), np.asarray(cal.accuracies, dtype=float))
            curves[c.name] = (e, a, float(cal.epsilon))
        return curves

    def closing_notes(self, tables: Sequence[TrustTable]) -> list[str]:
        notes = []
        for t in tables:
            for g in t.groups.itertuples():
                if str(g.status).startswith("undefined"):
                    notes.append(f"{t.statistic} ({t.level} level), group {g.group}: no rank or cluster: "
                                 f"{str(g.status)[len('undefined: '):]}")
        if self.spec.human.kind == "system":
            notes.append(f"system-level human values over {self.n_systems_common} systems; each column's system "
                         "score as declared (corpus or mean of items); bootstrap over items on the metric side")
        return notes

    def result_fields(self, req0: TrustRequest, bd: pd.DataFrame | None) -> dict[str, Any]:
        hum = self.spec.human
        return {
            "n_items": self.n_items_common, "n_systems": self.n_systems_common, "systems": self.systems,
            "signature": signature(self.spec, req0, paired_test_of(req0)),
            "breakdown_statistic": req0.statistic if self.spec.by else None,
            "human": "system-level" if hum.kind == "system" else str(hum.column),
        }


__all__ = ["ItemEvaluation"]
