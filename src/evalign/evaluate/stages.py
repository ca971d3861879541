"""The stages of one evaluation, written once for item and pair tables.

:class:`Evaluation` runs the pipeline; its subclasses (:class:`evalign.evaluate.items.ItemEvaluation`,
:class:`evalign.evaluate.pairs.PairEvaluation`) supply the steps that depend on the table:

1. **align** (:meth:`Evaluation.align`): read the labels and columns (``presence``), leave out the
   columns without a value, keep the cells where every column has one (``mask``), or refuse;
2. **compute** (``compute``): the overview of every column on all aligned data (no intervals);
3. **group** (:meth:`Evaluation.group`): the groups of ``by`` (and the baselines' response lengths);
4. **annotators** (:meth:`Evaluation.judges_vs_annotators`): when asked for, each judge against the
   individual annotators: the Alt-Test and the agreement against the human ceiling
   (:mod:`evalign.evaluate.annotators`), on all aligned data;
5. **rank** (:meth:`Evaluation.rank`): per trust request, the predictors (columns and trivial
   baselines) ranked by :func:`evalign.meta.trust.rank_predictors` (resample, rank, guard), the human
   ceiling beside them, the judges' Alt-Test and ceiling figures on their rows, and the baseline warnings;
6. **breakdown**, **curves** and the closing notes (``breakdown``, ``curves``, ``closing_notes``);
7. **sign** (:meth:`Evaluation.result`): one :class:`EvalResult` with its reproducibility signature.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd

import evalign
from evalign.errors import InputError, unknown_name
from evalign.evaluate import baselines as B
from evalign.evaluate import guards as G
from evalign.evaluate.annotators import AnnotatorLabels, add_judge_columns, run_alt_test, run_ceiling
from evalign.evaluate.result import EPSILON_RULE, EvalResult, TrustTable
from evalign.evaluate.selective import SelectiveReport
from evalign.evaluate.spec import Column, EvalSpec, TrustRequest
from evalign.judges.usage import JudgeUsage, has_usage, table_models, table_usage
from evalign.meta.alt_test import AltTestReport
from evalign.meta.calibration import Calibration
from evalign.meta.ceiling import CeilingReport
from evalign.meta.significance import CORRELATIONS
from evalign.meta.trust import Predictor, rank_predictors

#: at most this many points of an accuracy-vs-epsilon curve are kept (thinned evenly)
MAX_CURVE_POINTS = 2000

#: a progress callback: ``(stage, done, total or None)``
Progress = Callable[[str, int, "int | None"], None]

#: the progress callback of the running :func:`evalign.evaluate.evaluate` (read by the rank stage)
PROGRESS: ContextVar[Progress | None] = ContextVar("evalign_evaluate_progress", default=None)

#: why a group's statistic is undefined: ``(human, data) -> reason or None``
Undefined = Callable[[np.ndarray, Mapping[str, np.ndarray]], "str | None"]
#: the human ceiling of a group: ``selection -> value``
Ceiling = Callable[[np.ndarray], float]


def require(table: pd.DataFrame, names: Sequence[str], what: str, source: str) -> None:
    """Raise :class:`InputError` (with a close match) for the first of ``names`` not in ``table``."""
    for n in names:
        if n not in table.columns:
            hint = difflib.get_close_matches(n, [str(c) for c in table.columns], n=1)
            more = f"; did you mean '{hint[0]}'?" if hint else ""
            raise InputError(f"no {what} column '{n}'{more}", file=source, field=n)


def signature(spec: EvalSpec, req: TrustRequest | None = None, test: str | None = None,
              resampling: str | None = None) -> dict[str, Any]:
    """The reproducibility signature of a result or one of its trust tables. ``resampling``: how the
    table's intervals and tests were drawn (:func:`evalign.meta.trust.resampling_label`:
    ``sufficient``, ``items``, ``sufficient+items``); default: the method setting (``auto`` / ``items``)."""
    r = spec.resampling
    sig: dict[str, Any] = {}
    if req is not None:
        sig.update({"statistic": req.statistic, "level": req.level,
                    "grouping": req.grouping if req.level == "item" and spec.mode == "items" else None})
        sig["test"] = ("paired bootstrap" if test == "bootstrap" else "paired permutation (item swaps)")
    sig.update({
        "labels": f"{spec.human.kind} ({spec.human.label})",
        "epsilon_rule": EPSILON_RULE,
        "resampling": resampling or r.method,
        "resamples": r.n_resamples,
        "permutations": r.n_permutations,
        "confidence": r.confidence,
        "alpha": r.alpha,
        "seed": r.seed,
        "evalign": evalign.__version__,
    })
    sig["text"] = "|".join(f"{k}:{v}" for k, v in sig.items() if k not in ("epsilon_rule", "text") and v is not None)
    return sig


#: the cost column group of a trust table (judges with usage columns; whole table, the same in every
#: group), after ``s_per_1000``: answered calls, tokens, mean seconds per call, parse rate, cost per 1,000 items
#: from the run's real token split (prompt cache, batch) and at the list price of the same tokens
COST_COLUMNS = ("calls", "prompt_tokens", "completion_tokens", "s_per_call", "parse_rate", "cost_per_1000",
                "list_cost_per_1000")


def add_cost_columns(rows: pd.DataFrame, usage: Mapping[str, JudgeUsage]) -> None:
    """The cost column group (:data:`COST_COLUMNS`) of the judges in ``usage`` (NaN for other rows; no
    column when no judge has usage), and their ``s_per_1000`` where the table has none (in place)."""
    if not usage:
        return
    metrics = rows["metric"].tolist()

    def col(f: Callable[[JudgeUsage], float]) -> list[float]:
        return [float(f(usage[m])) if m in usage else np.nan for m in metrics]

    rows["s_per_1000"] = [u if m not in usage or np.isfinite(u) else usage[m].seconds_per_1000
                          for m, u in zip(metrics, pd.to_numeric(rows["s_per_1000"]), strict=True)]
    rows["calls"] = col(lambda u: u.calls)
    rows["prompt_tokens"] = col(lambda u: u.prompt_tokens)
    rows["completion_tokens"] = col(lambda u: u.completion_tokens)
    rows["s_per_call"] = col(lambda u: u.seconds_per_call)
    rows["parse_rate"] = col(lambda u: u.parse_rate)
    rows["cost_per_1000"] = col(lambda u: u.cost_per_1000)
    rows["list_cost_per_1000"] = col(lambda u: u.list_cost_per_1000)


def paired_test_of(req: TrustRequest) -> str:
    """The paired test of a trust table: bootstrap at system level, else permutation."""
    return "bootstrap" if req.level == "system" else "permutation"


def columns_json(cols: Sequence[Column]) -> tuple[dict[str, Any], ...]:
    """The evaluated columns as JSON-ready dicts."""
    return tuple({"name": c.name, "kind": c.kind, "higher_is_better": c.higher_is_better, "verdict": c.verdict,
                  "system_level": c.system_level, "system_label": c.system_label} for c in cols)


def align_note(counts: Mapping[str, int], common: int, unit: str) -> str | None:
    """The note that the columns were aligned on their ``common`` cells (None when nothing was left out)."""
    if len(set(counts.values())) <= 1 and all(v == common for v in counts.values()):
        return None
    listing = ", ".join(f"{k} {v}" for k, v in counts.items())
    return (f"aligned on the {common} {unit} where every column has a value (of {listing}); "
            "each column is evaluated on these only")


def common_cells(cols: Sequence[Column], have: Mapping[str, np.ndarray], notes: list[str], one: str,
                 same: str, unit: str) -> tuple[np.ndarray, str | None]:
    """The cells (``one``: ``pair`` / ``(system, item) cell``) where every column has a value, and
    why nothing can be compared when there is none; an alignment note is added to ``notes``."""
    common = np.logical_and.reduce([have[c.name] for c in cols])
    counts = {c.name: int(have[c.name].sum()) for c in cols}
    if not common.any():
        listing = ", ".join(f"{k}: {v}" for k, v in counts.items())
        return common, (f"no {one} has a value of every column ({listing}): nothing to compare on the same {same}; "
                        "evaluate them separately")
    note = align_note(counts, int(common.sum()), unit)
    if note:
        notes.append(note)
    return common, None


def thin_curve(eps: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An accuracy-vs-epsilon curve thinned evenly to :data:`MAX_CURVE_POINTS` (its best point kept)."""
    if len(eps) <= MAX_CURVE_POINTS:
        return eps, acc
    keep = np.unique(np.r_[np.linspace(0, len(eps) - 1, MAX_CURVE_POINTS).astype(int), int(np.nanargmax(acc))])
    return eps[keep], acc[keep]


def with_ceiling(rows: pd.DataFrame, group_rows: pd.DataFrame, groups: Mapping[str, np.ndarray],
                 ceiling: Ceiling) -> pd.DataFrame:
    """``rows`` with a ``human_ceiling`` baseline row in each ranked group where it is defined
    (placed by value within its group)."""
    extra = []
    for g in group_rows.itertuples():
        if g.status == "too small":
            continue
        v = ceiling(groups[g.group])
        if np.isfinite(v):
            extra.append({"group": g.group, "n": g.n, "kind": "baseline", "metric": "human_ceiling", "value": v})
    if not extra:
        return rows
    rows = pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)
    rows["_o"] = rows.groupby("group", sort=False).ngroup()
    return rows.sort_values(["_o", "value"], ascending=[True, False], kind="stable",
                            na_position="last").drop(columns="_o").reset_index(drop=True)


def _best_trivial(rows: pd.DataFrame) -> pd.Series | None:
    trivial = rows[(rows["kind"] == "baseline") & (rows["metric"] != "human_ceiling") & rows["value"].notna()]
    if not len(trivial):
        return None
    return trivial.sort_values("value", ascending=False, kind="stable").iloc[0]


def _beats(rows: pd.DataFrame) -> dict[str, Any]:
    return {m: (None if b is None or (isinstance(b, float) and np.isnan(b)) else bool(b))
            for m, b, k in zip(rows["metric"], rows["beats_baselines"], rows["kind"], strict=True) if k != "baseline"}


def baseline_warnings(rows: pd.DataFrame, alpha: float, statistic: str = "") -> list[str]:
    """The warnings of the metrics and judges that do not beat the best trivial baseline of ``(all)``
    (naming ``statistic`` and the baseline's value)."""
    main = rows[rows["group"] == "(all)"]
    best = _best_trivial(main)
    if best is None:
        return []
    return G.baseline_warnings(_beats(main), str(best["metric"]), float(best["value"]), alpha, statistic)


def withhold_ranks(rows: pd.DataFrame, statistic: str) -> tuple[pd.DataFrame, str | None]:
    """When no metric or judge beats the best trivial baseline on all data (group ``(all)``): the
    rows without ranks and clusters (in every group: the table answers nothing) and the table's
    headline that says so; else ``rows`` and None (a group's ``beats_baselines`` tells the rest)."""
    if rows.empty:
        return rows, None
    main = rows[rows["group"] == "(all)"]
    best = _best_trivial(main)
    if best is None or not G.no_answer(_beats(main)):
        return rows, None
    rows = rows.copy()
    rows["rank"] = rows["cluster"] = np.nan
    return rows, G.no_answer_headline(statistic, str(best["metric"]), float(best["value"]))


def nothing_ranked(tables: Sequence[TrustTable]) -> str | None:
    """Why nothing is ranked: the first table's statistic is undefined on all data; else None."""
    if not tables:
        return None
    groups = tables[0].groups
    status = groups.loc[groups["group"] == "(all)", "status"]
    if not all(str(s).startswith("undefined") for s in status):
        return None
    return f"nothing is ranked: {str(status.iloc[0])[len('undefined: '):]}"


class Evaluation:
    """One evaluation of ``spec`` in stages (see the module doc); :meth:`run` gives its result.

    After :meth:`align`: ``cols`` (the columns with a value), ``data`` (each column's array, NaN
    outside the common cells), ``human`` (the labels, likewise), ``common`` (the common cells) and
    ``missing`` (per column and system, cells and cells without a value)."""

    mode = "items"
    is_pairs = False
    #: how the align stage names a labelled unit, a cell, the units compared and the cells
    labelled = "item with a human label"
    cell_words = ("(system, item) cell", "items", "(system, item) cells")

    def __init__(self, spec: EvalSpec) -> None:
        self.spec = spec
        self.source = spec.source
        self.cols: list[Column] = list(spec.columns)
        self.data: dict[str, np.ndarray] = {}
        self.human = np.empty(0)
        self.common = np.empty(0, dtype=bool)
        self.missing = pd.DataFrame()
        self.table = pd.DataFrame()
        self.n_items_all = self.n_systems_all = 0
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.tie_rates: dict[str, float] = {}
        self.epsilons: dict[str, float] = {}
        self.lengths: np.ndarray | None = None
        self.alt: AltTestReport | None = None
        self.ceil: CeilingReport | None = None
        #: the calibration of each judge that states a probability (J.p_a / J.p)
        self.calib: list[Calibration] = []
        #: ``spec.selective``: the thresholds with a guarantee
        self.sel: SelectiveReport | None = None

    def run(self) -> EvalResult:
        """The pipeline: align, compute, group, rank, breakdown, curves, sign."""
        self.warnings += list(self.spec.human.warnings)
        refusal = self.align()
        if refusal is not None:
            return refusal
        overview = self.compute()
        self.warnings += G.tie_warnings(self.tie_rates, self.epsilons, self.spec.human.rater)
        groups = self.group()
        self.judges_vs_annotators()
        self.calib = self.calibrations()
        if self.spec.selective is not None:
            self.sel = self.selective()
        tables = [self.rank(req, groups) for req in self.spec.trust_requests()]
        bd = self.breakdown()
        curves = self.curves()
        self.notes += self.closing_notes(tables)
        return self.result(overview, tables, bd, curves)

    # -- align ---------------------------------------------------------------------------------

    def align(self) -> EvalResult | None:
        """Stage ``align``: the columns with a value, on the cells where all of them have one; or a
        refusal when no column has a value or no cell has all of them."""
        have = self.presence()
        cols = self.cols
        empty = [c.name for c in cols if not have[c.name].any()]
        hcol = self.spec.human.column
        if hcol is not None and hcol in self.table.columns and not self.table[hcol].notna().any():
            return self.refuse(f"{self.spec.dataset or self.source}: the human rating column '{hcol}' has no value "
                               "on any row: nothing to compare with")
        if len(empty) == len(cols):
            has_refs = "reference" in self.table.columns and self.table["reference"].notna().any()
            computed = [c.name for c in cols if c.metric is not None]
            return self.refuse(G.no_values_reason(self.spec.dataset or self.source, [c.name for c in cols],
                                                  bool(has_refs), computed))
        for e in empty:
            self.notes.append(f"{e} has no value on any {self.labelled}: left out")
        self.cols = [c for c in cols if c.name not in empty]
        common, reason = common_cells(self.cols, have, self.notes, *self.cell_words)
        if reason:
            return self.refuse(reason)
        self.common = common
        self.mask()
        return None

    def refuse(self, reason: str) -> EvalResult:
        """The result that ranks nothing, and why."""
        spec = self.spec
        human = spec.human
        return EvalResult(
            mode=spec.mode, source=spec.source, title=human.title, label_source=human.source,
            n_items=self.n_items_all, n_systems=self.n_systems_all, columns=columns_json(spec.columns),
            overview=pd.DataFrame(), trust=(), missing=self.missing, signature=signature(spec),
            notes=tuple(self.notes), refused=reason,
            human=human.column or ("system-level" if human.kind == "system" else ", ".join(human.pref_columns)),
        )

    def presence(self) -> dict[str, np.ndarray]:
        """Read the labels and columns into arrays (``data``, ``human``, ``missing``, ``table``, the
        counts of all items and systems); returns, per column, where it has a labelled value."""
        raise NotImplementedError

    def mask(self) -> None:
        """Set the labels and every column to NaN outside ``common``."""
        raise NotImplementedError

    # -- compute and group ---------------------------------------------------------------------

    def compute(self) -> pd.DataFrame:
        """Stage ``compute``: the overview table (fills ``tie_rates`` and ``epsilons``)."""
        raise NotImplementedError

    def group(self) -> dict[str, np.ndarray]:
        """Stage ``group``: the groups of ``by`` (``(all)`` first; ``by="system"`` is left to the
        breakdown), after the baselines' response lengths."""
        spec = self.spec
        self.lengths = self.baseline_lengths() if spec.baselines else None
        by = spec.by if spec.by and spec.by != "system" else None
        if spec.by:
            require(self.table, self.by_columns(spec.by), "group", self.source)
        return self.groups_of(by)

    def baseline_lengths(self) -> np.ndarray | None:
        raise NotImplementedError

    def by_columns(self, by: str) -> list[str]:
        return [by]

    def groups_of(self, by: str | None) -> dict[str, np.ndarray]:
        raise NotImplementedError

    # -- annotators ----------------------------------------------------------------------------

    def judges_vs_annotators(self) -> None:
        """Stage ``annotators``: the Alt-Test (``spec.alt_test``) and the agreement against the human
        ceiling (``spec.agreement``) of every judge, on the aligned data; a note when the labels do
        not allow them (fewer than 2 annotator columns, no judge)."""
        spec = self.spec
        if spec.alt_test is None and spec.agreement is None:
            return
        labels, why = self.annotator_labels()
        if labels is None or not labels.judges:
            what = " and ".join(x for x, on in (("Alt-Test", spec.alt_test is not None),
                                                ("human-ceiling agreement", spec.agreement is not None)) if on)
            reason = why or "no judge column on the annotators' scale"
            self.notes.append(f"no {what}: {reason}")
            self.notes += list(labels.notes) if labels is not None else []
            return
        if spec.alt_test is not None:
            self.alt = run_alt_test(labels, spec.alt_test, spec.source)
        if spec.agreement is not None:
            self.ceil = run_ceiling(labels, spec.agreement, spec.resampling)

    def annotator_labels(self) -> tuple[AnnotatorLabels | None, str | None]:
        """The annotators' and the judges' labels on the aligned data, or None and why not."""
        return None, "the labels are not per annotator"

    def calibrations(self) -> list[Calibration]:
        """The calibration of each judge with a stated probability (``J.p_a`` / ``J.p``)."""
        return []

    def selective(self) -> SelectiveReport:
        """Stage ``selective``: each judge's threshold with a guarantee, or a cascade's (``spec.selective``)."""
        raise InputError("--selective needs labels per item or pair (not system-level values) and judges with a "
                         "confidence", field="selective")

    # -- rank ----------------------------------------------------------------------------------

    def rank(self, req: TrustRequest, groups: Mapping[str, np.ndarray]) -> TrustTable:
        """Stage ``rank``: one trust table (resample, rank and guard in
        :func:`~evalign.meta.trust.rank_predictors`), with the human ceiling and the baseline warnings."""
        spec = self.spec
        also = self.also(req)
        preds = self.predictors(req, also)
        test = paired_test_of(req)
        rows, group_rows, notes, how = rank_predictors(
            self.human, preds, groups, statistic=req.statistic, also=also if spec.overview else (), level=req.level, grouping=req.grouping,
            is_pairs=self.is_pairs, resampling=spec.resampling, min_group_size=spec.group_floor(), test=test,
            undefined=self.undefined(req), progress=PROGRESS.get(), clusters=spec.clusters)
        ceiling = self.ceiling(req)
        if ceiling is not None and not rows.empty:
            rows = with_ceiling(rows, group_rows, groups, ceiling)
        if not rows.empty:
            self.extra_columns(rows, groups)
            add_cost_columns(rows, self.judge_usage())
            self.judge_columns(rows, groups)
            if req == spec.trust_requests()[0]:
                add_judge_columns(rows, self.alt, self.ceil)
            defs = B.definitions(req.statistic, self.labels_have_ties(req), self.spec.human.rater)
            rows["definition"] = [defs.get(str(m)) if k == "baseline" else None
                                  for m, k in zip(rows["metric"], rows["kind"], strict=True)]
        rows, headline = withhold_ranks(rows, req.statistic)
        warned = baseline_warnings(rows, spec.resampling.alpha, req.statistic)
        self.warnings += warned
        return TrustTable(statistic=req.statistic, level=req.level, grouping=req.grouping, rows=rows,
                          groups=group_rows, signature=signature(spec, req, test, how), notes=notes,
                          headline=headline, warnings=tuple(warned))

    def labels_have_ties(self, req: TrustRequest) -> bool:
        """Whether the aligned human labels contain a tie among the pairs ``req`` compares (the
        outcomes of the random baseline; see :func:`evalign.evaluate.baselines.human_ties`)."""
        return B.human_ties(self.human, level=req.level, grouping=req.grouping, is_pairs=self.is_pairs)

    def also(self, req: TrustRequest) -> list[str]:
        """The statistics shown beside the ranking statistic."""
        return [s for s in CORRELATIONS if s != req.statistic]

    def predictors(self, req: TrustRequest, also: Sequence[str]) -> list[Predictor]:
        raise NotImplementedError

    def undefined(self, req: TrustRequest) -> Undefined:
        raise NotImplementedError

    def ceiling(self, req: TrustRequest) -> Ceiling | None:
        return None

    def extra_columns(self, rows: pd.DataFrame, groups: Mapping[str, np.ndarray]) -> None:
        """Add table-specific columns to the ranked ``rows`` (in place)."""

    def judge_usage(self) -> dict[str, JudgeUsage]:
        """Each judge column's :class:`~evalign.judges.usage.JudgeUsage` over the whole table, from its
        per-row usage columns (in the evaluated table, else in the item table of the scored sides), at
        its price in ``spec.prices``; judges without usage columns are left out."""
        out: dict[str, JudgeUsage] = {}
        tables = [t for t in (self.table, self.spec.items) if t is not None]
        book = self.spec.prices
        judges = [c.name for c in self.cols if c.kind == "judge"]
        for name in book.columns if book is not None else ():
            if name not in judges:  # a price for a judge this table does not hold is a typo, not a no-op
                raise unknown_name("judge column", name, judges, where="--price")
        for c in self.cols:
            if c.kind != "judge":
                continue
            t = next((t for t in tables if has_usage(t, c.name)), None)
            if t is None:
                continue
            book = self.spec.prices
            price = book.price(c.name, table_models(t, c.name)) if book is not None else None
            u = table_usage(t, c.name, price)
            if u is not None:
                out[c.name] = u
        return out

    def judge_columns(self, rows: pd.DataFrame, groups: Mapping[str, np.ndarray]) -> None:
        """Add the judges' probability columns (the weighted verdict) to the ranked ``rows`` (in place)."""

    # -- breakdown, curves, sign ---------------------------------------------------------------

    def breakdown(self) -> pd.DataFrame | None:
        raise NotImplementedError

    def curves(self) -> dict[str, tuple[Any, Any, float]]:
        raise NotImplementedError

    def closing_notes(self, tables: Sequence[TrustTable]) -> list[str]:
        return []

    def result_fields(self, req0: TrustRequest, bd: pd.DataFrame | None) -> dict[str, Any]:
        """The fields of the result that depend on the table (counts, signature, system table, ...)."""
        raise NotImplementedError

    def result(self, overview: pd.DataFrame, tables: Sequence[TrustTable], bd: pd.DataFrame | None,
               curves: Mapping[str, tuple[Any, Any, float]]) -> EvalResult:
        """Stage ``sign``: the signed result."""
        spec = self.spec
        human = spec.human
        fields = self.result_fields(spec.trust_requests()[0], bd)
        if tables:  # the first table's signature: it names how that table was resampled
            fields["signature"] = tables[0].signature
        return EvalResult(
            mode=self.mode, source=self.source, title=human.title, label_source=human.source,
            columns=columns_json(self.cols), overview=overview, trust=tuple(tables), missing=self.missing,
            breakdown=bd, breakdown_by=spec.by, curves=dict(curves), notes=tuple(dict.fromkeys(self.notes)),
            warnings=tuple(dict.fromkeys(self.warnings)), refused=nothing_ranked(tables),
            alt_test=self.alt, ceiling=self.ceil, calibration=tuple(self.calib), selective=self.sel,
            **fields,
        )


__all__ = [
    "COST_COLUMNS",
    "MAX_CURVE_POINTS",
    "PROGRESS",
    "Ceiling",
    "Evaluation",
    "Progress",
    "Undefined",
    "add_cost_columns",
    "align_note",
    "baseline_warnings",
    "columns_json",
    "common_cells",
    "nothing_ranked",
    "paired_test_of",
    "require",
    "signature",
    "thin_curve",
    "with_ceiling",
    "withhold_ranks",
]
