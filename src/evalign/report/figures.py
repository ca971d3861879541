"""The report's plots, drawn with matplotlib's object API (Agg canvas, no pyplot state) and
returned as PNG bytes. Each function takes already-computed tables; nothing here computes a
statistic."""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalign.report.data import by_task_matrix, interval_columns, ranks

DPI = 100
#: at most this many distinct human grades are shown as they are; more are binned into quantiles
MAX_GRADES = 10


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


def rank_heatmap(
    leaderboard: pd.DataFrame,
    human_col: str | None,
    human_higher_is_better: bool,
    metric_cols: Sequence[str],
    higher_is_better: Mapping[str, bool],
) -> bytes:
    """Systems (rows, in human order) x [human, metrics]: each cell the system's rank (1 = best)."""
    lb = leaderboard.set_index("system")
    cols = ([human_col] if human_col else []) + [m for m in metric_cols if m in lb.columns]
    r = pd.DataFrame({c: ranks(lb[c].astype(float), human_higher_is_better if c == human_col else higher_is_better.get(c, True)) for c in cols})
    if human_col:
        r = r.sort_values(human_col, kind="stable")
    mat = r.to_numpy(dtype=float)
    fig = _figure(max(5.5, 2.5 + 0.9 * len(cols)), 1.4 + 0.38 * len(r))
    ax = fig.add_subplot()
    im = ax.imshow(mat, cmap="viridis_r", aspect="auto", vmin=1, vmax=max(len(r), 2))
    ax.set_xticks(range(len(cols)), [("human" if c == human_col else c) for c in cols], rotation=30, ha="right")
    ax.set_yticks(range(len(r)), [str(s) for s in r.index])
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if np.isfinite(mat[i, j]):
                ax.text(j, i, f"{mat[i, j]:.0f}", ha="center", va="center", color="white" if mat[i, j] > len(r) / 2 else "black", fontsize=8)
    ax.set_title("System ranks (1 = best)", fontsize=10)
    cb = fig.colorbar(im, ax=ax, label="rank", shrink=0.8)
    cb.set_ticks(range(1, max(len(r), 2) + 1, max(1, len(r) // 8)))
    return _png(fig)


def interval_plot(table: pd.DataFrame, title: str, label_cols: Sequence[str], xlabel: str = "value") -> bytes:
    """Each row's ``value`` as a dot with its ``low``-``high`` interval as a bar (a forest plot)."""
    low, high = interval_columns(table)
    labels = [" / ".join(str(v) for v in row) for row in table[list(label_cols)].itertuples(index=False)] if label_cols else [str(i) for i in table.index]
    y = np.arange(len(table))[::-1]
    width = 4.0 + 0.07 * max((len(s) for s in labels), default=0)
    fig = _figure(min(width, 11.0), 1.0 + 0.32 * len(table))
    ax = fig.add_subplot()
    v = table["value"].to_numpy(dtype=float)
    if low and high:
        # a percentile interval may lie beside its estimate: the bar then starts at the dot
        lo = np.clip(v - table[low].to_numpy(dtype=float), 0, None)
        hi = np.clip(table[high].to_numpy(dtype=float) - v, 0, None)
        ax.errorbar(v, y, xerr=np.vstack([lo, hi]), fmt="o", color="#1f5f8b", ecolor="#7fa7c6", capsize=3)
    else:
        ax.plot(v, y, "o", color="#1f5f8b")
    ax.set_yticks(y, labels)
    ax.axvline(0, color="#999999", lw=0.8)
    if "kind" in table.columns:  # the best trivial baseline of each block of rows: a dashed line
        kinds = table["kind"].astype(str).to_numpy()
        block_cols = [c for c in label_cols if c not in ("metric", "kind", "rank", "cluster")]
        blocks = table[block_cols].map(str).agg(" / ".join, axis=1) if block_cols else pd.Series("", index=table.index)
        names = table["metric"].astype(str).to_numpy() if "metric" in table.columns else np.full(len(table), "")
        shown = False
        for b in dict.fromkeys(blocks):
            sel = (blocks == b).to_numpy()
            base = sel & (kinds == "baseline") & (names != "human_ceiling") & np.isfinite(v)
            if not base.any():
                continue
            best = float(np.max(v[base]))
            ax.vlines(best, y[sel].min() - 0.4, y[sel].max() + 0.4, colors="#c44e52", linestyles="--", lw=1,
                      label=None if shown else "best trivial baseline")
            shown = True
        if shown:
            ax.legend(fontsize=7, loc="best")
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def task_heatmap(by_task: pd.DataFrame, label: str) -> bytes:
    """The task x metric matrix as a heatmap with each value written in its cell."""
    m = by_task_matrix(by_task)
    mat = m.to_numpy(dtype=float)
    longest = max((len(str(t)) for t in m.index), default=0)
    fig = _figure(max(5.5, 2.5 + 0.07 * longest + 0.9 * m.shape[1]), 1.6 + 0.34 * m.shape[0])
    ax = fig.add_subplot()
    finite = mat[np.isfinite(mat)]
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmin == vmax:
        vmin, vmax = vmin - 0.5, vmax + 0.5
    with warnings.catch_warnings():  # a 1 x 1 matrix makes matplotlib warn about singular limits
        warnings.simplefilter("ignore", UserWarning)
        im = ax.imshow(np.ma.masked_invalid(mat), cmap="RdYlGn", aspect="auto", vmin=vmin, vmax=vmax)
    ax.set_xticks(range(m.shape[1]), list(m.columns), rotation=30, ha="right")
    ax.set_yticks(range(m.shape[0]), list(m.index))
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            ax.text(j, i, "-" if not np.isfinite(mat[i, j]) else f"{mat[i, j]:.2f}", ha="center", va="center", fontsize=7)
    ax.set_title(f"{label} per task", fontsize=10, wrap=True)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return _png(fig)


def _grades(human: pd.Series) -> tuple[pd.Series, list[str]]:
    """Human values as ordered grade labels (cut into 5 equal-width bins when there are many values)."""
    h = human.astype(float)
    values = np.sort(h.dropna().unique())
    if len(values) <= MAX_GRADES:
        return h.map(lambda x: None if pd.isna(x) else f"{x:g}"), [f"{x:g}" for x in values]
    binned = pd.cut(h, bins=5, include_lowest=True)
    cats = [iv for iv in binned.cat.categories if (binned == iv).any()]
    lo = float(values[0])
    labels = {iv: f"{max(iv.left, lo):.3g} to {iv.right:.3g}" for iv in cats}
    return binned.map(lambda iv: labels.get(iv) if not pd.isna(iv) else None).astype(object), list(labels.values())


def distributions(item_table: pd.DataFrame, human_col: str, metric_cols: Sequence[str]) -> bytes:
    """One box plot per metric: the metric's item scores grouped by human grade."""
    grades, order = _grades(item_table[human_col])
    nrows, ncols = _grid(len(metric_cols))
    fig = _figure(4.0 * ncols, 3.0 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, m in enumerate(metric_cols):
        ax = axes[k // ncols][k % ncols]
        vals = item_table[m].astype(float)
        data = [vals[(grades == g).to_numpy()].dropna().to_numpy() for g in order]
        ax.boxplot(data, showfliers=False, widths=0.6)
        for j, d in enumerate(data):  # the points, jittered, so small groups are visible
            if len(d):
                x = j + 1 + (np.random.default_rng(j).random(len(d)) - 0.5) * 0.35
                ax.plot(x, d, ".", ms=2, alpha=0.25, color="#1f5f8b")
        ax.set_xticks(range(1, len(order) + 1), order, rotation=30 if len(order) > 5 else 0)
        ax.set_title(m, fontsize=10)
        ax.set_xlabel(f"human: {human_col}")
        ax.grid(axis="y", alpha=0.3)
    for k in range(len(metric_cols), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle("Metric scores per human grade", fontsize=11)
    return _png(fig)


def epsilon_curves(curves: Mapping[str, Sequence[Any]]) -> bytes:
    """Pairwise accuracy as a function of the tie threshold epsilon, one panel per metric (metrics
    have their own units); the chosen epsilon (third element of a curve, else the curve's maximum)
    is marked."""
    names = list(curves)
    nrows, ncols = _grid(len(names))
    fig = _figure(4.0 * ncols, 3.0 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, name in enumerate(names):
        ax = axes[k // ncols][k % ncols]
        curve = curves[name]
        eps = np.asarray(curve[0], dtype=float)
        acc = np.asarray(curve[1], dtype=float)
        ax.plot(eps, acc, lw=1.5, color="#1f5f8b")
        best = None
        if len(curve) > 2 and curve[2] is not None and np.isfinite(float(curve[2])):
            best = float(curve[2])
        elif acc.size and np.isfinite(acc).any():
            best = float(eps[int(np.nanargmax(acc))])
        if best is not None:
            y = float(np.interp(best, eps, acc))
            ax.plot([best], [y], "o", color="#c44e52")
            ax.annotate(f"eps={best:.3g}, acc={y:.3f}", (best, y), textcoords="offset points", xytext=(6, -12), fontsize=8)
        ax.set_xlabel("tie threshold epsilon (metric units)")
        ax.set_ylabel("pairwise accuracy")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    for k in range(len(names), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle("Tie calibration: accuracy vs epsilon (dot = chosen epsilon)", fontsize=11)
    return _png(fig)


def score_vs_length(item_table: pd.DataFrame, judge_cols: Sequence[str]) -> bytes:
    """Each judge's score against the response length in words, with the mean score per length
    quintile as a line (length bias shows as a rising line)."""
    words = item_table["response"].map(lambda t: len(str(t).split())).astype(float)
    nrows, ncols = _grid(len(judge_cols))
    fig = _figure(4.2 * ncols, 3.2 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    bins = pd.qcut(words, q=min(5, max(1, words.nunique())), duplicates="drop")
    for k, j in enumerate(judge_cols):
        ax = axes[k // ncols][k % ncols]
        s = item_table[j].astype(float)
        jitter = (np.random.default_rng(k).random(len(s)) - 0.5) * 0.15
        ax.plot(words, s + jitter, ".", ms=3, alpha=0.35, color="#1f5f8b")
        means = s.groupby(bins, observed=True).mean()
        mids = words.groupby(bins, observed=True).median()
        ax.plot(mids.to_numpy(), means.to_numpy(), "-o", color="#c44e52", lw=1.5, ms=4, label="mean per length quintile")
        ax.set_xlabel("response length (words)")
        ax.set_ylabel("score")
        ax.set_title(j, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(len(judge_cols), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle("Judge score vs response length", fontsize=11)
    return _png(fig)
