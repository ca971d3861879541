"""The one orchestration of a meta-evaluation: :func:`evaluate` turns an :class:`EvalSpec` into an
:class:`EvalResult` (alignment, guards, baselines, system scores, trust tables, breakdown)."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.evaluate import baselines as B
from evalign.evaluate import guards as G
from evalign.evaluate.columns import n_unparseable, verdict_array, verdict_codes, verdict_statistics
from evalign.evaluate.result import EPSILON_RULE, EvalResult, TrustTable
from evalign.evaluate.spec import Column, EvalSpec, TrustRequest
from evalign.evaluate.system import CorpusStats, corpus_statistic, corpus_stats, index_array
from evalign.meta.significance import CORRELATIONS

#: at most this many points of an accuracy-vs-epsilon curve are kept (thinned evenly)
MAX_CURVE_POINTS = 2000
#: epsilons tried for the curve of a pair table (quantiles of |score_a - score_b|)
PAIR_CURVE_POINTS = 60


#: a progress callback: ``(stage, done, total or None)``
Progress = Callable[[str, int, "int | None"], None]

#: the progress callback of the running :func:`evaluate` (read by the resampling steps)
_PROGRESS: ContextVar[Progress | None] = ContextVar("evalign_evaluate_progress", default=None)


def evaluate(spec: EvalSpec, *, progress: Progress | None = None) -> EvalResult:
    """Run the meta-evaluation described by ``spec`` (see :class:`EvalSpec`).

    ``progress(stage, done, total)``, if given (else the one of an enclosing
    :func:`evaluation_progress` block), is called as the resampling advances: ``stage`` is
    ``"bootstrap intervals"`` (``total`` = intervals of the trust table) or ``"permutation tests"`` /
    ``"bootstrap tests"`` (``total`` None: tests are run as the ranking needs them)."""
    with evaluation_progress(progress if progress is not None else _PROGRESS.get()):
        return _evaluate_pairs(spec) if spec.mode == "pairs" else _evaluate_items(spec)


@contextmanager
def evaluation_progress(progress: Progress | None) -> Iterator[None]:
    """Within this block, every :func:`evaluate` reports its resampling to ``progress`` (for a
    command line that calls code which calls :func:`evaluate`)."""
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


# --------------------------------------------------------------------------------------------
# shared pieces


def _require(table: pd.DataFrame, names: Sequence[str], what: str, source: str) -> None:
    for n in names:
        if n not in table.columns:
            hint = difflib.get_close_matches(n, [str(c) for c in table.columns], n=1)
            more = f"; did you mean '{hint[0]}'?" if hint else ""
            raise InputError(f"no {what} column '{n}'{more}", file=source, field=n)


def signature(spec: EvalSpec, req: TrustRequest | None = None, test: str | None = None) -> dict[str, Any]:
    """The reproducibility signature of a result or one of its trust tables."""
    from evalign import __version__

    r = spec.resampling
    sig: dict[str, Any] = {}
    if req is not None:
        sig.update({"statistic": req.statistic, "level": req.level,
                    "grouping": req.grouping if req.level == "item" and spec.mode == "items" else None})
        sig["test"] = ("paired bootstrap" if test == "bootstrap" else "paired permutation (item swaps)")
    sig.update({
        "labels": f"{spec.human.kind} ({spec.human.label})",
        "epsilon_rule": EPSILON_RULE,
        "resamples": r.n_resamples,
        "permutations": r.n_permutations,
        "confidence": r.confidence,
        "alpha": r.alpha,
        "seed": r.seed,
        "evalign": __version__,
    })
    sig["text"] = "|".join(f"{k}:{v}" for k, v in sig.items() if k not in ("epsilon_rule", "text") and v is not None)
    return sig


def _columns_json(cols: Sequence[Column]) -> tuple[dict[str, Any], ...]:
    return tuple({"name": c.name, "kind": c.kind, "higher_is_better": c.higher_is_better, "verdict": c.verdict,
                  "system_level": c.system_level, "system_label": c.system_label} for c in cols)


def _also(statistic: str, is_pairs: bool, verdicts: bool) -> list[str]:
    if is_pairs:
        out = [s for s in ("preference_accuracy", "preference_accuracy_no_ties") if s != statistic]
        return [*out, "accuracy_parsed"] if verdicts else out
    return [s for s in CORRELATIONS if s != statistic]


def _refused(spec: EvalSpec, reason: str, missing: pd.DataFrame, n_items: int, n_systems: int,
             notes: Sequence[str] = ()) -> EvalResult:
    return EvalResult(
        mode=spec.mode, source=spec.source, title=spec.human.title, label_source=spec.human.source,
        n_items=n_items, n_systems=n_systems, columns=_columns_json(spec.columns), overview=pd.DataFrame(),
        trust=(), missing=missing, signature=signature(spec), notes=tuple(notes), refused=reason,
        human=spec.human.column or ("system-level" if spec.human.kind == "system" else ", ".join(spec.human.pref_columns)),
    )


def _align_note(counts: Mapping[str, int], common: int, unit: str) -> str | None:
    if len(set(counts.values())) <= 1 and all(v == common for v in counts.values()):
        return None
    listing = ", ".join(f"{k} {v}" for k, v in counts.items())
    return (f"aligned on the {common} {unit} where every column has a value (of {listing}); "
            "each column is evaluated on these only")


def _common_cells(cols: Sequence[Column], have: Mapping[str, np.ndarray], notes: list[str], one: str,
                  same: str, unit: str) -> tuple[np.ndarray, str | None]:
    """The cells (``one``: ``pair`` / ``(system, item) cell``) where every column has a value, and
    why nothing can be compared when there is none; an alignment note is added to ``notes``."""
    common = np.logical_and.reduce([have[c.name] for c in cols])
    counts = {c.name: int(have[c.name].sum()) for c in cols}
    if not common.any():
        listing = ", ".join(f"{k}: {v}" for k, v in counts.items())
        return common, (f"no {one} has a value of every column ({listing}): nothing to compare on the same {same}; "
                        "evaluate them separately")
    note = _align_note(counts, int(common.sum()), unit)
    if note:
        notes.append(note)
    return common, None


def _thin(eps: np.ndarray, acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(eps) <= MAX_CURVE_POINTS:
        return eps, acc
    keep = np.unique(np.r_[np.linspace(0, len(eps) - 1, MAX_CURVE_POINTS).astype(int), int(np.nanargmax(acc))])
    return eps[keep], acc[keep]


def _ranked(
    spec: EvalSpec,
    req: TrustRequest,
    human: np.ndarray,
    preds: list[Any],
    groups: Mapping[str, np.ndarray],
    also: list[str],
    is_pairs: bool,
    undefined: Any,
    ceiling: Any,
    extra_cols: Any = None,
) -> tuple[TrustTable, list[str]]:
    from evalign.meta.trust import rank_predictors

    r = spec.resampling
    test = "bootstrap" if req.level == "system" else "permutation"
    rows, group_rows, notes = rank_predictors(
        human, preds, groups, statistic=req.statistic, also=also, level=req.level, grouping=req.grouping,
        is_pairs=is_pairs, resampling=r, min_group_size=spec.group_floor(), test=test, undefined=undefined,
        progress=_PROGRESS.get())
    if ceiling is not None and not rows.empty:
        extra = []
        for g in group_rows.itertuples():
            if g.status == "too small":
                continue
            v = ceiling(groups[g.group])
            if np.isfinite(v):
                extra.append({"group": g.group, "n": g.n, "kind": "baseline", "metric": "human_ceiling", "value": v})
        if extra:
            rows = pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)
            rows["_o"] = rows.groupby("group", sort=False).ngroup()
            rows = rows.sort_values(["_o", "value"], ascending=[True, False], kind="stable",
                                    na_position="last").drop(columns="_o").reset_index(drop=True)
    if extra_cols is not None and not rows.empty:
        extra_cols(rows, groups)
    warns: list[str] = []
    main = rows[rows["group"] == "(all)"]
    trivial = main[(main["kind"] == "baseline") & (main["metric"] != "human_ceiling") & main["value"].notna()]
    if len(trivial):
        best = trivial.sort_values("value", ascending=False).iloc[0]
        beats = {m: b for m, b, k in zip(main["metric"], main["beats_baselines"], main["kind"], strict=True)
                 if k != "baseline"}
        warns += G.baseline_warnings(beats, str(best["metric"]), float(best["value"]), r.alpha)
    table = TrustTable(statistic=req.statistic, level=req.level, grouping=req.grouping, rows=rows,
                       groups=group_rows, signature=signature(spec, req, test), notes=notes)
    return table, warns


# --------------------------------------------------------------------------------------------
# item tables


def _evaluate_items(spec: EvalSpec) -> EvalResult:
    from evalign.meta.breakdown import breakdown, group_index, item_arrays
    from evalign.meta.correlation import correlation, system_means
    from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy

    table = spec.items
    assert table is not None
    source = spec.source
    hum = spec.human
    cols = list(spec.columns)
    _require(table, ["id", "system"], "item", source)
    _require(table, [c.name for c in cols], "metric or judge", source)
    h_spec: str | dict[str, float]
    if hum.column is not None:
        _require(table, [hum.column], "human rating", source)
        h_spec = hum.column
    else:
        assert hum.system is not None
        h_spec = {str(k): float(v) for k, v in hum.system.items()}
        table = table[table["system"].astype(str).isin(h_spec)].reset_index(drop=True)
        if table.empty:
            raise InputError("no system of the table has a system-level human value", file=source, field="system")
    lower = [c.name for c in cols if not c.higher_is_better]
    arrays = item_arrays(table, h_spec, [c.name for c in cols], human_higher_is_better=hum.higher_is_better,
                         lower_is_better=lower)
    systems, items = arrays.systems, arrays.items
    n_sys, n_it = len(systems), len(items)
    exists = pd.Series(1.0, index=pd.MultiIndex.from_arrays([table["system"].astype(str), table["id"].astype(str)]))
    exists = exists[~exists.index.duplicated()].unstack().reindex(index=list(systems), columns=list(items))
    exists_m = exists.notna().to_numpy()
    h_present = np.isfinite(arrays.human) if arrays.human.ndim == 2 else np.ones((n_sys, n_it), dtype=bool)
    h_present &= exists_m
    missing_rows = []
    for c in cols:
        arr = arrays.metrics[c.name]
        for i, s in enumerate(systems):
            missing_rows.append({"metric": c.name, "system": s, "n": int(exists_m[i].sum()),
                                 "missing": int((exists_m[i] & ~np.isfinite(arr[i])).sum())})
    missing = pd.DataFrame(missing_rows, columns=["metric", "system", "n", "missing"])
    have = {c.name: np.isfinite(arrays.metrics[c.name]) & h_present for c in cols}
    notes: list[str] = []
    empty = [c.name for c in cols if not have[c.name].any()]
    if len(empty) == len(cols):
        has_refs = "reference" in table.columns and table["reference"].notna().any()
        computed = [c.name for c in cols if c.metric is not None]
        name = spec.dataset or source
        return _refused(spec, G.no_values_reason(name, [c.name for c in cols], bool(has_refs), computed), missing,
                        n_it, n_sys)
    for e in empty:
        notes.append(f"{e} has no value on any item with a human label: left out")
    cols = [c for c in cols if c.name not in empty]
    common, reason = _common_cells(cols, have, notes, "(system, item) cell", "items", "(system, item) cells")
    if reason:
        return _refused(spec, reason, missing, n_it, n_sys, notes)
    h = arrays.human.copy()
    if h.ndim == 2:
        h[~common] = np.nan
    data = {c.name: np.where(common, arrays.metrics[c.name], np.nan) for c in cols}
    n_sys_c = int(common.any(axis=1).sum())
    n_it_c = int(common.any(axis=0).sum())
    if n_sys_c < n_sys:
        dropped = [s for s, k in zip(systems, common.any(axis=1), strict=True) if not k]
        notes.append(f"systems without a common cell left out: {', '.join(dropped)}")
    # corpus statistics (texts present and the metric object known)
    cstats: dict[str, CorpusStats] = {}
    for c in cols:
        if c.system_level == "corpus":
            if c.metric is None or "response" not in table.columns:
                raise InputError(f"'{c.name}': a corpus system score needs the metric and the texts", field=c.name)
            cstats[c.name] = corpus_stats(table, c.metric, systems, items)
    sign = {c.name: (1.0 if c.higher_is_better else -1.0) for c in cols}
    idx = index_array(n_sys, n_it, common)

    def sys_scores(name: str) -> np.ndarray:
        if name in cstats:
            return sign[name] * cstats[name].system_scores(idx)
        return system_means(data[name])

    h_sys = h if h.ndim == 1 else system_means(h)
    if h.ndim == 1:
        h_sys = np.where(common.any(axis=1), h_sys, np.nan)
    item_level = hum.kind == "item"
    over_rows = []
    tie_rates: dict[str, float] = {}
    epsilons: dict[str, float] = {}
    for c in cols:
        m = data[c.name]
        row: dict[str, Any] = {"metric": c.name, "kind": c.kind}
        ms = sys_scores(c.name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for method in CORRELATIONS:
                row[f"system_{method}"] = correlation(h_sys, ms, method, "system").value
            if item_level:
                for method in CORRELATIONS:
                    row[f"item_{method}"] = correlation(h, m, method, "item", spec.grouping).value  # type: ignore[arg-type]
                pa = pairwise_accuracy(h, m, grouping=spec.grouping)  # type: ignore[arg-type]
                row["pairwise_accuracy"] = pa.accuracy
                row["epsilon"] = pa.epsilon
                row["metric_tie_rate"] = pa.metric_tie_rate
                row["human_tie_rate"] = pa.human_tie_rate
                tie_rates[c.name], epsilons[c.name] = pa.metric_tie_rate, pa.epsilon
            else:
                from evalign.meta.pairwise import pairwise_accuracy as pacc

                row["system_pairwise_accuracy"] = pacc(h_sys, ms, grouping="none", epsilon=0.0).accuracy
        row["system_score"] = c.system_label
        row["n_items"] = int(np.isfinite(m).any(axis=0).sum())
        over_rows.append(row)
    overview = pd.DataFrame(over_rows)
    sign_h = 1.0 if hum.higher_is_better else -1.0
    sys_rows = []
    for i, s in enumerate(systems):
        r: dict[str, Any] = {"system": s, "human": float(sign_h * h_sys[i])}
        for c in cols:
            r[c.system_label] = float(sign[c.name] * sys_scores(c.name)[i])
        sys_rows.append(r)
    sys_table = pd.DataFrame(sys_rows)
    sys_table = sys_table.sort_values("human", ascending=not hum.higher_is_better, kind="stable",
                                      na_position="last").reset_index(drop=True)
    warns = G.tie_warnings(tie_rates, epsilons)
    lengths = B.lengths_items(table, systems, items) if spec.baselines else None
    by = spec.by if spec.by and spec.by != "system" else None
    if spec.by:
        _require(table, [spec.by], "group", source)
    used = common.any(axis=0)
    groups = {g: sel[used[sel]] for g, sel in group_index(table, arrays, by, False).items()}
    ann = [a for a in hum.annotators if a in table.columns] if item_level else []
    ann_arrays = [np.where(common, item_arrays(table, a, [], human_higher_is_better=hum.higher_is_better).human, np.nan)
                  for a in ann] if len(ann) >= 2 else []
    tables: list[TrustTable] = []
    for req in spec.trust_requests():
        level = req.level
        if level == "item" and not item_level:
            raise InputError("level 'item' needs item-level human ratings (a rating column)", field="level")
        also = _also(req.statistic, False, False)
        stats_needed = [req.statistic, *also]
        from evalign.meta.trust import Predictor

        preds = []
        for c in cols:
            if level == "system" and c.name in cstats and req.statistic in CORRELATIONS:
                st = {s: corpus_statistic(s, cstats[c.name], sign[c.name]) for s in stats_needed if s in CORRELATIONS}
                preds.append(Predictor(c.name, idx, kind=c.kind, statistics=st, cost=spec.costs.get(c.name, np.nan)))
            else:
                preds.append(Predictor(c.name, data[c.name], kind=c.kind, cost=spec.costs.get(c.name, np.nan)))
        if spec.baselines:
            preds += B.trivial_baselines(stats_needed, (n_sys, n_it), level=level, grouping=req.grouping,
                                         is_pairs=False, lengths=lengths, present=common)

        def undefined(hh: np.ndarray, dd: Mapping[str, np.ndarray], level: str = level,
                      grouping: str = req.grouping) -> str | None:
            first = dd[cols[0].name]
            ok = np.isfinite(first)
            ns = int(ok.any(axis=1).sum())
            ni = int(ok.any(axis=0).sum())
            hv = hh[np.isfinite(hh)] if hh.ndim == 1 else hh[ok & np.isfinite(hh)]
            return G.undefined_items(hv, ns, ni, level, grouping)

        ceiling = None
        if ann_arrays:
            def ceiling(sel: np.ndarray, req: TrustRequest = req) -> float:
                return B.human_ceiling_items([a[:, sel] for a in ann_arrays], req.statistic, req.level, req.grouping)

        tt, w = _ranked(spec, req, h, preds, groups, also, False, undefined, ceiling)
        tables.append(tt)
        warns += w
    bd = None
    req0 = spec.trust_requests()[0]
    if spec.by:
        aligned = table.copy()
        keep = pd.Series(common.ravel(), index=pd.MultiIndex.from_product([list(systems), list(items)]))
        key = pd.MultiIndex.from_arrays([aligned["system"].astype(str), aligned["id"].astype(str)])
        mask = keep.reindex(key).fillna(False).to_numpy(dtype=bool)
        for c in cols:
            aligned.loc[~mask, c.name] = np.nan
        bd = breakdown(aligned, human=h_spec, metrics=[c.name for c in cols], by=spec.by, statistic=req0.statistic,
                       level=req0.level, grouping=req0.grouping, min_group_size=spec.group_floor(),
                       human_higher_is_better=hum.higher_is_better, lower_is_better=lower, wide=False)
    curves: dict[str, tuple[Any, Any, float]] = {}
    if spec.curves and item_level:
        for c in cols:
            cal = calibrate_epsilon(h, data[c.name], grouping=spec.grouping)  # type: ignore[arg-type]
            e, a = _thin(np.asarray(cal.epsilons, dtype=float), np.asarray(cal.accuracies, dtype=float))
            curves[c.name] = (e, a, float(cal.epsilon))
    for t in tables:
        for g in t.groups.itertuples():
            if str(g.status).startswith("undefined"):
                notes.append(f"{t.statistic} ({t.level} level), group {g.group}: no rank or cluster: "
                             f"{str(g.status)[len('undefined: '):]}")
    if hum.kind == "system":
        notes.append(f"system-level human values over {n_sys_c} systems; each column's system score as declared "
                     "(corpus or mean of items); bootstrap over items on the metric side")
    refused = None
    if tables and all(str(s).startswith("undefined") for s in tables[0].groups.loc[
            tables[0].groups["group"] == "(all)", "status"]):
        refused = str(tables[0].groups.loc[tables[0].groups["group"] == "(all)", "status"].iloc[0])
        refused = f"nothing is ranked: {refused[len('undefined: '):]}"
    return EvalResult(
        mode="items", source=source, title=hum.title, label_source=hum.source, n_items=n_it_c, n_systems=n_sys_c,
        columns=_columns_json(cols), overview=overview, trust=tuple(tables), missing=missing,
        signature=signature(spec, req0, "bootstrap" if req0.level == "system" else "permutation"),
        systems=sys_table, breakdown=bd, breakdown_by=spec.by, breakdown_statistic=req0.statistic if spec.by else None,
        curves=curves, notes=tuple(dict.fromkeys(notes)), warnings=tuple(dict.fromkeys(warns)), refused=refused,
        human="system-level" if hum.kind == "system" else str(hum.column),
    )


# --------------------------------------------------------------------------------------------
# pair tables


def _evaluate_pairs(spec: EvalSpec) -> EvalResult:
    from evalign.meta.agreement import majority_vote
    from evalign.meta.breakdown import PairArrays, breakdown, group_index, pair_arrays, pair_scores
    from evalign.meta.pairwise import pairwise_preference_accuracy
    from evalign.meta.trust import Predictor

    pairs = spec.pairs
    assert pairs is not None
    source = spec.source
    hum = spec.human
    pref = list(hum.pref_columns)
    _require(pairs, pref, "preference", source)
    cols = list(spec.columns)
    side_cols = [c.name for c in cols if not c.verdict and not (f"{c.name}_a" in pairs.columns and
                                                                 f"{c.name}_b" in pairs.columns)]
    scored = pairs
    if side_cols:
        items = spec.items
        if items is None or "side" not in items.columns:
            raise InputError(f"no pair score columns '{side_cols[0]}_a' / '{side_cols[0]}_b' and no scored sides "
                             "(an item table with a 'side' column)", file=source, field=side_cols[0])
        _require(items, side_cols, "metric or judge", str(items.attrs.get("source", source)))
        scored = pair_scores(pairs, items, side_cols)
    metric_cols = [c.name for c in cols if not c.verdict]
    lower = [c.name for c in cols if not c.higher_is_better and not c.verdict]
    arrays = pair_arrays(scored, pref, metric_cols, lower_is_better=lower)
    prefs = arrays.human
    n = prefs.shape[1]
    data: dict[str, np.ndarray] = dict(arrays.metrics)
    for c in cols:
        if c.verdict:
            codes, skipped = verdict_codes(pairs, c.name)
            data[c.name] = verdict_array(codes, skipped)
    labels = majority_vote(prefs.T, fallback=0.0)
    labelled = np.isfinite(labels)
    sys_a = pairs["system_a"].astype(str).to_numpy() if "system_a" in pairs.columns else np.full(n, "A")
    sys_b = pairs["system_b"].astype(str).to_numpy() if "system_b" in pairs.columns else np.full(n, "B")
    have = {}
    missing_rows = []
    for c in cols:
        a, b = data[c.name]
        present = ~(np.isnan(a) & np.isnan(b)) if c.verdict else (np.isfinite(a) & np.isfinite(b))
        have[c.name] = present & labelled
        for s in sorted(set(sys_a) | set(sys_b)):
            inv = (sys_a == s) | (sys_b == s)
            missing_rows.append({"metric": c.name, "system": s, "n": int(inv.sum()), "missing": int((inv & ~present).sum())})
    missing = pd.DataFrame(missing_rows, columns=["metric", "system", "n", "missing"])
    notes: list[str] = []
    empty = [c.name for c in cols if not have[c.name].any()]
    n_sys_all = len(set(sys_a) | set(sys_b))
    if len(empty) == len(cols):
        has_refs = "reference" in pairs.columns and pairs["reference"].notna().any()
        computed = [c.name for c in cols if c.metric is not None]
        return _refused(spec, G.no_values_reason(spec.dataset or source, [c.name for c in cols], bool(has_refs),
                                                 computed), missing, n, n_sys_all)
    for e in empty:
        notes.append(f"{e} has no value on any labelled pair: left out")
    cols = [c for c in cols if c.name not in empty]
    common, reason = _common_cells(cols, have, notes, "pair", "pairs", "pairs")
    if reason:
        return _refused(spec, reason, missing, n, n_sys_all, notes)
    prefs = prefs.copy()
    prefs[:, ~common] = np.nan
    for c in cols:
        data[c.name] = np.where(common, data[c.name], np.nan)
    vstats = verdict_statistics()
    over_rows = []
    tie_rates: dict[str, float] = {}
    epsilons: dict[str, float] = {}
    for c in cols:
        a, b = data[c.name]
        row: dict[str, Any] = {"metric": c.name, "kind": c.kind}
        if c.verdict:
            row["accuracy_with_ties"] = vstats["preference_accuracy"](prefs, data[c.name])
            row["accuracy_without_ties"] = vstats["preference_accuracy_no_ties"](prefs, data[c.name])
            row["accuracy_parsed"] = vstats["accuracy_parsed"](prefs, data[c.name])
            row["epsilon"] = float("nan")
            ok = ~np.isnan(a)
            with np.errstate(invalid="ignore"):
                row["metric_tie_rate"] = float(np.mean(a[ok & common] == b[ok & common])) if (ok & common).any() else np.nan
            row["n_unparseable"] = n_unparseable(data[c.name])
        else:
            r = pairwise_preference_accuracy(prefs.T, a, b)
            r0 = pairwise_preference_accuracy(prefs.T, a, b, epsilon=0.0)
            row["accuracy_with_ties"] = r.accuracy_with_ties
            row["accuracy_without_ties"] = r0.accuracy_without_ties
            row["epsilon"] = r.epsilon
            row["metric_tie_rate"] = r.metric_tie_rate
            tie_rates[c.name], epsilons[c.name] = r.metric_tie_rate, r.epsilon
        row["human_tie_rate"] = float(np.mean(labels[common] == 0))
        row["n_pairs"] = int(common.sum())
        over_rows.append(row)
    overview = pd.DataFrame(over_rows)
    if "n_unparseable" in overview.columns:
        overview["n_unparseable"] = overview["n_unparseable"].astype("Int64")
    warns = G.tie_warnings(tie_rates, epsilons)
    verdicts = any(c.verdict for c in cols)
    lengths = B.lengths_pairs(pairs) if spec.baselines else None
    by = spec.by if spec.by and spec.by != "system" else None
    if spec.by:
        _require(pairs, ["system_a", "system_b"] if spec.by == "system" else [spec.by], "group", source)
    groups = group_index(pairs, PairArrays(arrays.items, prefs, {}), by, True)
    tables: list[TrustTable] = []
    for req in spec.trust_requests():
        also = _also(req.statistic, True, verdicts)
        preds = [Predictor(c.name, data[c.name], kind=c.kind, epsilon=None,
                           statistics=vstats if c.verdict else {}, cost=spec.costs.get(c.name, np.nan)) for c in cols]
        if spec.baselines:
            preds += B.trivial_baselines([req.statistic, *also[:1]], (2, n), level="item", grouping="item",
                                         is_pairs=True, lengths=lengths, present=common)

        def undefined(hh: np.ndarray, dd: Mapping[str, np.ndarray]) -> str | None:
            return G.undefined_pairs(majority_vote(hh.T, fallback=0.0))

        ceiling = None
        if len(pref) >= 2:
            def ceiling(sel: np.ndarray, req: TrustRequest = req) -> float:
                return B.human_ceiling_pairs(prefs[:, sel], req.statistic)

        def unparse(rows: pd.DataFrame, grp: Mapping[str, np.ndarray]) -> None:
            vals = []
            for g, m in zip(rows["group"], rows["metric"], strict=True):
                c = next((c for c in cols if c.name == m and c.verdict), None)
                vals.append(n_unparseable(data[m][:, grp[g]]) if c is not None else np.nan)
            rows["n_unparseable"] = vals

        tt, w = _ranked(spec, req, prefs, preds, groups, also, True, undefined, ceiling,
                        unparse if verdicts else None)
        tables.append(tt)
        warns += w
    bd = None
    if spec.by and metric_cols:
        mcols = [c.name for c in cols if not c.verdict]
        aligned = scored.copy()
        for m in mcols:
            for s in ("a", "b"):
                aligned.loc[~common, f"{m}_{s}"] = np.nan
        if mcols:
            bd = breakdown(aligned, human=pref, metrics=mcols, by=spec.by, statistic="preference_accuracy",
                           min_group_size=spec.group_floor(), lower_is_better=lower, wide=False)
    curves: dict[str, tuple[Any, Any, float]] = {}
    if spec.curves:
        for c in cols:
            if c.verdict:
                continue
            a, b = data[c.name]
            diffs = np.abs(a - b)
            diffs = diffs[np.isfinite(diffs)]
            if not diffs.size:
                continue
            best = pairwise_preference_accuracy(prefs.T, a, b).epsilon
            grid = np.unique(np.r_[0.0, best, np.quantile(diffs, np.linspace(0, 0.95, PAIR_CURVE_POINTS))])
            accs = np.array([pairwise_preference_accuracy(prefs.T, a, b, epsilon=float(e)).accuracy_with_ties
                             for e in grid])
            curves[c.name] = (grid, accs, float(best))
    notes.append(f"{len(pref)} annotator column(s), majority vote (no majority = tie); pairs resampled; metric epsilon "
                 "calibrated on all pairs; judge verdicts need none (unparseable = wrong)")
    req0 = spec.trust_requests()[0]
    refused = None
    if tables and all(str(s).startswith("undefined") for s in tables[0].groups.loc[
            tables[0].groups["group"] == "(all)", "status"]):
        refused = "nothing is ranked: no labelled pair"
    return EvalResult(
        mode="pairs", source=source, title=hum.title, label_source=hum.source, n_items=int(common.sum()),
        n_systems=n_sys_all, columns=_columns_json(cols), overview=overview, trust=tuple(tables), missing=missing,
        signature=signature(spec, req0, "permutation"), systems=None, breakdown=bd, breakdown_by=spec.by,
        breakdown_statistic="preference_accuracy" if bd is not None else None, curves=curves,
        notes=tuple(dict.fromkeys(notes)), warnings=tuple(dict.fromkeys(warns)), refused=refused,
        human=", ".join(pref),
    )
