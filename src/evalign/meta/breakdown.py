"""Agreement statistics broken down by group (task, task type, language, system), one call per table.

Two kinds of input table:

* an **item table** (one row per item x system, see :mod:`evalign.io`) with a numeric human rating
  column, or with system-level human values given as a ``{system: value}`` mapping;
* a **pair table** (see :mod:`evalign.datasets.base`) with annotator columns coded +1 (A better),
  -1 (B better), 0 (tie), NaN (no label), and per metric the columns ``<metric>_a`` / ``<metric>_b``
  (the metric's score of response A / B; :func:`pair_scores` builds them from scored items).

Tie thresholds are calibrated **once per metric on the whole table** and then held fixed in every
group (preference accuracy without ties uses epsilon 0: the metric must pick a side) (Doostmohammadi et al. 2024, "How Reliable Are Automatic Evaluation Methods for
Instruction-Tuned LLMs?": calibrate on the pool of all tasks, report per task). Groups with fewer
than ``min_group_size`` items (item tables: distinct ids; pair tables: pairs) are reported with the
status ``too small`` and NaN values, never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.meta.pairwise import calibrate_epsilon, pairwise_accuracy, pairwise_preference_accuracy
from evalign.meta.significance import Statistic, make_statistic

ALL = "(all)"
TIE_RATE = "tie_rate"
HUMAN_ROW = "(human)"


@dataclass(frozen=True)
class ItemArrays:
    """An item table as matrices: ``human`` is ``systems x items`` (or ``systems`` for system-level
    human values), each metric ``systems x items``; NaN = missing."""

    systems: tuple[str, ...]
    items: tuple[str, ...]
    human: np.ndarray
    metrics: Mapping[str, np.ndarray]


@dataclass(frozen=True)
class PairArrays:
    """A pair table as arrays: ``human`` is ``annotators x pairs``, each metric ``2 x pairs``."""

    items: tuple[str, ...]
    human: np.ndarray
    metrics: Mapping[str, np.ndarray]


def _require(table: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    source = table.attrs.get("source")
    for c in cols:
        if c not in table.columns:
            raise InputError(f"no {what} column '{c}' (columns: {', '.join(map(str, table.columns))})",
                             file=source, field=c)


def item_arrays(
    table: pd.DataFrame,
    human: str | Mapping[str, float],
    metrics: Sequence[str],
    *,
    human_higher_is_better: bool = True,
    lower_is_better: Sequence[str] = (),
) -> ItemArrays:
    """Matrices of an item table, oriented so that higher is better for humans and every metric.

    ``human``: a rating column, or ``{system: value}`` (systems missing from the table are ignored;
    table systems missing from the mapping are an error). Values of ``lower_is_better`` metrics and
    of a lower-is-better human are negated.
    """
    _require(table, ["id", "system"], "item")
    _require(table, list(metrics), "metric")
    source = table.attrs.get("source")
    systems = tuple(sorted(map(str, table["system"].unique())))
    items = tuple(dict.fromkeys(_texts(table["id"])))
    # each row's cell, found once for every column (a pandas unstack per column cost ~10 ms each)
    rows_at = pd.Index(systems).get_indexer(table["system"].astype(str))
    cols_at = pd.Index(items).get_indexer(table["id"].astype(str))
    cells_unique = np.unique(rows_at * len(items) + cols_at).size == len(table)
    if not cells_unique:  # a repeated (id, system) repeats its cell: only then is the (slower) pandas check needed
        dup = table.duplicated(["id", "system"])
        if dup.any():
            i = int(np.flatnonzero(dup.to_numpy())[0])
            raise InputError("duplicate (id, system)", file=source, line=i + 1, field="id")

    def pivot(col: str) -> np.ndarray:
        try:
            vals = pd.to_numeric(table[col], errors="raise").astype(float)
        except (ValueError, TypeError) as e:
            raise InputError(f"must be numeric ({e})", file=source, field=col) from e
        inf = np.flatnonzero(np.isinf(vals.to_numpy()))
        if len(inf):  # a table that did not come through the readers' checks
            i = int(inf[0])
            raise InputError(f"must be a finite number, got {vals.iloc[i]} (id {table['id'].iloc[i]!r}, system "
                             f"{table['system'].iloc[i]!r})", file=source, line=i + 1, field=col, line_word="row")
        if cells_unique:
            out = np.full((len(systems), len(items)), np.nan)
            out[rows_at, cols_at] = vals.to_numpy()
            return out
        wide = pd.Series(vals.to_numpy(), index=pd.MultiIndex.from_arrays(
            [table["system"].astype(str), table["id"].astype(str)])).unstack()
        return wide.reindex(index=list(systems), columns=list(items)).to_numpy(dtype=float)

    sign = 1.0 if human_higher_is_better else -1.0
    if isinstance(human, str):
        _require(table, [human], "human rating")
        h = sign * pivot(human)
    else:
        missing = [s for s in systems if s not in human]
        if missing:
            raise InputError(f"system-level human values lack systems: {', '.join(missing)}", field="system")
        h = sign * np.array([float(human[s]) for s in systems])
    lower = set(lower_is_better)
    ms = {m: (-1.0 if m in lower else 1.0) * pivot(m) for m in metrics}
    return ItemArrays(systems, items, h, ms)


def _texts(col: pd.Series) -> tuple[str, ...]:
    """``tuple(map(str, col))``, without a Python call per row for a text column with no missing value."""
    if pd.api.types.is_string_dtype(col.dtype) and not col.isna().any():
        return tuple(col.astype(str).tolist())
    return tuple(map(str, col))


def pair_arrays(
    pairs: pd.DataFrame,
    pref_columns: Sequence[str],
    metrics: Sequence[str],
    *,
    lower_is_better: Sequence[str] = (),
) -> PairArrays:
    """Arrays of a pair table: annotator codes (``annotators x pairs``) and per metric ``2 x pairs``
    from the columns ``<metric>_a`` / ``<metric>_b`` (negated for ``lower_is_better`` metrics)."""
    prefs, ms = pair_matrices(pairs, pref_columns, metrics, lower_is_better=lower_is_better)
    ids = _texts(pairs["id"]) if "id" in pairs.columns else tuple(map(str, range(len(pairs))))
    return PairArrays(ids, prefs, ms)


def pair_matrices(
    pairs: pd.DataFrame,
    pref_columns: Sequence[str],
    metrics: Sequence[str],
    *,
    lower_is_better: Sequence[str] = (),
    first_line: int = 1,
    source: str | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The numbers of :func:`pair_arrays` (annotator codes ``annotators x pairs``, per metric ``2 x
    pairs``), checked; ``first_line``: the line (row) number of the table's first row in its file,
    for the errors (a chunk of a longer file); ``source``: the file (default ``pairs.attrs["source"]``)."""
    _require(pairs, list(pref_columns), "preference")
    _require(pairs, [f"{m}_{s}" for m in metrics for s in ("a", "b")], "pair score")
    source = source if source is not None else pairs.attrs.get("source")
    prefs = pairs[list(pref_columns)].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float).T
    bad = np.isfinite(prefs) & ~np.isin(prefs, (-1.0, 0.0, 1.0))
    if bad.any():
        k, i = map(int, np.argwhere(bad)[0])
        raise InputError(f"preference must be +1, -1, 0 or empty, got {prefs[k, i]}", file=source,
                         line=first_line + i, field=pref_columns[k])
    lower = set(lower_is_better)
    ms = {}
    for m in metrics:
        x = np.empty((2, len(pairs)))  # one row a side, each contiguous
        for row, side in enumerate(("a", "b")):
            try:
                x[row] = pairs[f"{m}_{side}"].to_numpy(dtype=float)
            except (ValueError, TypeError) as e:
                raise InputError(f"pair scores must be numeric ({e})", file=source, field=f"{m}_{side}") from e
        if m in lower:
            np.negative(x, out=x)
        ms[m] = x
    return prefs, ms


def pair_scores(pairs: pd.DataFrame, scored_items: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """A copy of ``pairs`` with ``<metric>_a`` / ``<metric>_b`` columns taken from ``scored_items``, an
    item table made by :func:`evalign.datasets.pairs_to_items` (columns ``id`` and ``side``) and scored."""
    _require(scored_items, ["id", "side", *metrics], "scored item")
    out = pairs.copy()
    for side in ("a", "b"):
        part = scored_items[scored_items["side"] == side]
        part = part.set_index(part["id"].astype(str))
        part = part[~part.index.duplicated()]
        ids = out["id"].astype(str)
        missing = ids[~ids.isin(part.index)]
        if len(missing):
            raise InputError(f"no scored side '{side}' for pair id '{missing.iloc[0]}'",
                             file=scored_items.attrs.get("source"), field="id")
        for m in metrics:
            out[f"{m}_{side}"] = part.loc[ids.to_numpy(), m].to_numpy(dtype=float)
    return out


def group_label(g: Any) -> str:
    """The name of the group of a ``by`` value: ``(none)`` for None or NaN, else ``str(g)``."""
    return "(none)" if g is None or (isinstance(g, float) and math.isnan(g)) else str(g)


def _groups(labels: Sequence[Any]) -> dict[str, np.ndarray]:
    out: dict[str, list[int]] = {}
    for i, g in enumerate(labels):
        out.setdefault(group_label(g), []).append(i)
    return {k: np.asarray(v) for k, v in sorted(out.items())}


def calibrate_pool(
    human: np.ndarray, metric: np.ndarray, statistic: str, grouping: str = "item", pairs: bool = False
) -> float | None:
    """The tie threshold of one metric calibrated on all its data, or None for statistics without one."""
    if statistic in ("pairwise_accuracy", TIE_RATE) and not pairs:
        return float(calibrate_epsilon(human, metric, grouping=grouping).epsilon)  # type: ignore[arg-type]
    if statistic == "preference_accuracy_no_ties" and pairs:
        return 0.0  # without ties the metric must pick a side: only equal scores tie
    if statistic in ("preference_accuracy", TIE_RATE) and pairs:
        return float(pairwise_preference_accuracy(human.T, metric[0], metric[1], epsilon=None).epsilon)
    return None


def _tie_rates(human: np.ndarray, metric: np.ndarray, grouping: str, eps: float, pairs: bool) -> tuple[float, float]:
    """(metric tie rate, human tie rate) from the pairwise statistics of the stats module."""
    if pairs:
        rp = pairwise_preference_accuracy(human.T, metric[0], metric[1], epsilon=eps)
        return float(rp.metric_tie_rate), (rp.n_human_ties / rp.n if rp.n else float("nan"))
    r = pairwise_accuracy(human, metric, grouping=grouping, epsilon=eps)  # type: ignore[arg-type]
    return float(r.metric_tie_rate), float(r.human_tie_rate)


def breakdown(
    table: pd.DataFrame,
    *,
    human: str | Sequence[str] | Mapping[str, float],
    metrics: Sequence[str],
    by: str | None = "task",
    statistic: str = "pairwise_accuracy",
    level: str = "item",
    grouping: str = "item",
    variant: str | None = None,
    epsilon: float | Mapping[str, float] | None = None,
    min_group_size: int = 10,
    human_higher_is_better: bool = True,
    lower_is_better: Sequence[str] = (),
    wide: bool = True,
) -> pd.DataFrame:
    """The table "metric x group" of one statistic.

    ``human``: a rating column or ``{system: value}`` (item table), or a list of annotator columns
    (pair table). ``by``: a column (``task``, ``language``, any task-type column, or ``system``), or
    None for the whole table only. ``statistic``: a name of :func:`evalign.meta.significance.make_statistic`
    or ``tie_rate`` (the share of pairs each metric calls a tie, with a ``(human)`` row for the humans'
    share). ``epsilon``: None = calibrate each metric once on the whole table; a number or a
    ``{metric: epsilon}`` mapping fixes it. ``by="system"``: item tables use the pairs of items within
    that system (``grouping="system"``), pair tables the pairs where the system is A or B.

    Returns, when ``wide``, one row per metric and one column per group plus ``(all)``; the frame's
    ``attrs`` hold ``n`` (group sizes), ``too_small`` (groups under ``min_group_size``, with NaN
    values) and ``epsilon`` (per metric). Otherwise the long table with columns ``metric``,
    ``group``, ``n``, ``value``, ``status`` (``ok`` / ``too small`` / ``undefined``).
    """
    is_pairs = not isinstance(human, str | Mapping)
    if min_group_size < 1:
        raise InputError(f"min_group_size must be at least 1, got {min_group_size}", field="min_group_size")
    if by is not None:
        _require(table, ["system_a", "system_b"] if (is_pairs and by == "system") else [by], "group")
    arrays: ItemArrays | PairArrays
    if isinstance(human, str | Mapping):
        arrays = item_arrays(table, human, metrics, human_higher_is_better=human_higher_is_better,
                             lower_is_better=lower_is_better)
    else:
        arrays = pair_arrays(table, list(human), metrics, lower_is_better=lower_is_better)
    eps = _pool_epsilons(arrays, statistic, grouping, epsilon, is_pairs)
    groups = group_index(table, arrays, by, is_pairs)
    rows: list[dict[str, Any]] = []
    for gname, sel in groups.items():
        for mname, (value, n, status) in _group_values(arrays, sel, statistic, level, grouping, variant, eps,
                                                      min_group_size, is_pairs).items():
            rows.append({"metric": mname, "group": gname, "n": n, "value": value, "status": status})
    long = pd.DataFrame(rows, columns=["metric", "group", "n", "value", "status"])
    long.attrs["epsilon"] = eps
    long.attrs["statistic"] = statistic
    if not wide:
        return long
    order = list(groups)
    out = long.pivot(index="metric", columns="group", values="value").reindex(
        index=list(dict.fromkeys(long["metric"])), columns=order)
    out.columns.name = None
    sizes = long.drop_duplicates("group").set_index("group")["n"]
    out.attrs["n"] = {g: int(sizes[g]) for g in order}
    out.attrs["too_small"] = sorted(set(long.loc[long["status"] == "too small", "group"]))
    out.attrs["epsilon"] = eps
    out.attrs["statistic"] = statistic
    return out


def _pool_epsilons(
    arrays: ItemArrays | PairArrays,
    statistic: str,
    grouping: str,
    epsilon: float | Mapping[str, float] | None,
    is_pairs: bool,
) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for m, arr in arrays.metrics.items():
        if isinstance(epsilon, Mapping):
            out[m] = float(epsilon[m]) if m in epsilon else calibrate_pool(arrays.human, arr, statistic, grouping, is_pairs)
        elif epsilon is not None:
            out[m] = float(epsilon)
        else:
            out[m] = calibrate_pool(arrays.human, arr, statistic, grouping, is_pairs)
    return out


def group_index(
    table: pd.DataFrame, arrays: ItemArrays | PairArrays, by: str | None, is_pairs: bool
) -> dict[str, np.ndarray]:
    """Group name -> selection, ``(all)`` first: item tables: column (item) indices, or for
    ``by="system"`` the marker ``[-1 - row]`` of each system's row; pair tables: pair indices
    (``by="system"``: the pairs where the system is A or B)."""
    n = len(arrays.items)
    groups: dict[str, np.ndarray] = {ALL: np.arange(n)}
    if by is None:
        return groups
    if is_pairs:
        if by == "system":
            sys_a = table["system_a"].astype(str).to_numpy()
            sys_b = table["system_b"].astype(str).to_numpy()
            for s in sorted(set(sys_a) | set(sys_b)):
                groups[s] = np.flatnonzero((sys_a == s) | (sys_b == s))
        else:
            groups.update(_groups(table[by].tolist()))
        return groups
    assert isinstance(arrays, ItemArrays)
    if by == "system":
        for r, s in enumerate(arrays.systems):
            groups[s] = np.array([-1 - r])  # marker: a system row
        return groups
    first = table.drop_duplicates("id").set_index(table.drop_duplicates("id")["id"].astype(str))[by]
    labels = [first.get(i) for i in arrays.items]
    groups.update(_groups(labels))
    return groups


def _stat_for(
    statistic: str, level: str, grouping: str, variant: str | None, eps: float | None
) -> Statistic:
    return make_statistic(statistic, level=level, grouping=grouping, variant=variant,
                          epsilon=0.0 if eps is None and statistic == "pairwise_accuracy" else eps)


def _n_labelled(h: np.ndarray, x: np.ndarray, is_pairs: bool) -> int:
    """The items (pairs) of a group with both a label and a score: the ``n`` of a breakdown cell.
    Item tables: items with a (system, item) cell holding both (system-level human values: a system
    with a value); pair tables: pairs with an annotator's label and both sides scored."""
    if is_pairs:
        return int((np.isfinite(h).any(axis=0) & np.isfinite(x).all(axis=0)).sum())
    labelled = np.isfinite(h)[:, None] if h.ndim == 1 else np.isfinite(h)
    return int((labelled & np.isfinite(x)).any(axis=0).sum())


def _group_values(
    arrays: ItemArrays | PairArrays,
    sel: np.ndarray,
    statistic: str,
    level: str,
    grouping: str,
    variant: str | None,
    eps: Mapping[str, float | None],
    min_group_size: int,
    is_pairs: bool,
) -> dict[str, tuple[float, int, str]]:
    out: dict[str, tuple[float, int, str]] = {}
    system_row = (not is_pairs) and len(sel) == 1 and sel[0] < 0
    if system_row:
        r = -1 - int(sel[0])
        if arrays.human.ndim == 1:
            raise InputError("by='system' needs item-level human ratings, not one human value per system", field="by")
        h = arrays.human[r : r + 1]
        cols = np.arange(len(arrays.items))
        n = int(np.isfinite(next(iter(arrays.metrics.values()))[r]).sum()) if arrays.metrics else len(cols)
        grouping_g = "system"
    else:
        h = arrays.human if (arrays.human.ndim == 1 and not is_pairs) else arrays.human[..., sel]
        grouping_g = grouping
        counts = {m: _n_labelled(h, arr[..., sel], is_pairs) for m, arr in arrays.metrics.items()}
        n = max(counts.values()) if counts else len(sel)
    names = list(arrays.metrics) + ([HUMAN_ROW] if statistic == TIE_RATE else [])
    if n < min_group_size:
        return {m: (float("nan"), n, "too small") for m in names}
    human_tie = float("nan")
    for m, arr in arrays.metrics.items():
        x = arr[r : r + 1] if system_row else arr[..., sel]
        if not system_row:
            n = counts[m]
            if n < min_group_size:
                out[m] = (float("nan"), n, "too small")
                continue
        if statistic == TIE_RATE:
            e = eps[m]
            v, human_tie = _tie_rates(h, x, grouping_g, 0.0 if e is None else e, is_pairs)
        else:
            v = _stat_for(statistic, level, grouping_g, variant, eps[m])(h, x)
        out[m] = (float(v), n, "ok" if math.isfinite(v) else "undefined")
    if statistic == TIE_RATE:
        out[HUMAN_ROW] = (human_tie, n, "ok" if math.isfinite(human_tie) else "undefined")
    return out


__all__ = ["ALL", "ItemArrays", "PairArrays", "breakdown", "calibrate_pool", "group_index", "group_label", "item_arrays",
           "pair_arrays", "pair_matrices", "pair_scores"]
