"""The report's plots, drawn with matplotlib's object API (Agg canvas, no pyplot state) and
returned as PNG bytes. Each function takes already-computed tables; nothing here computes a
statistic."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalign.report.data import by_task_matrix, interval_columns, ranks

DPI = 100
#: at most this many distinct human grades are shown as they are; more are binned into quantiles
MAX_GRADES = 10

#: Okabe & Ito's colour-blind-safe palette (blue, orange, green, vermillion, sky blue, purple, yellow)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442")
BLUE, ORANGE, GREEN, VERMILLION, SKY, PURPLE, _YELLOW = PALETTE
GREY = "#7f7f7f"
#: fixed colour and axis scales: accuracies in [0, 1] and correlations in [-1, 1], the same in every
#: report (a colour means the same value everywhere); sequential / diverging maps that stay readable
#: with colour-vision deficiencies and in grey
ACCURACY_SCALE = (0.0, 1.0, "cividis")
CORRELATION_SCALE = (-1.0, 1.0, "PuOr")


def scale_for(statistic: str) -> tuple[float, float, str]:
    """The fixed (low, high, colour map) of a statistic: correlations (kendall, pearson, spearman
    and their variants) in [-1, 1], everything else (accuracies) in [0, 1]."""
    s = statistic.lower()
    corr = any(k in s for k in ("kendall", "pearson", "spearman", "correlation", "tau"))
    return CORRELATION_SCALE if corr else ACCURACY_SCALE


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
    rater: str = "human",
) -> bytes:
    """Systems (rows, in the labels' order) x [the labels (named by their ``rater``), metrics]: each
    cell the system's rank (1 = best)."""
    lb = leaderboard.set_index("system")
    cols = ([human_col] if human_col else []) + [m for m in metric_cols if m in lb.columns]
    r = pd.DataFrame({c: ranks(lb[c].astype(float), human_higher_is_better if c == human_col else higher_is_better.get(c, True)) for c in cols})
    if human_col:
        r = r.sort_values(human_col, kind="stable")
    mat = r.to_numpy(dtype=float)
    fig = _figure(max(5.5, 2.5 + 0.9 * len(cols)), 1.4 + 0.38 * len(r))
    ax = fig.add_subplot()
    im = ax.imshow(mat, cmap="cividis_r", aspect="auto", vmin=1, vmax=max(len(r), 2))
    ax.set_xticks(range(len(cols)), [(rater if c == human_col else c) for c in cols], rotation=90)
    ax.set_yticks(range(len(r)), [str(s) for s in r.index])
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            if np.isfinite(mat[i, j]):
                ax.text(j, i, f"{mat[i, j]:.0f}", ha="center", va="center", color="white" if mat[i, j] > len(r) / 2 else "black", fontsize=8)
    ax.set_title("System ranks (1 = best)", fontsize=10)
    cb = fig.colorbar(im, ax=ax, label="rank", shrink=0.8)
    cb.set_ticks(range(1, max(len(r), 2) + 1, max(1, len(r) // 8)))
    return _png(fig)


def interval_plot(table: pd.DataFrame, title: str, label_cols: Sequence[str], xlabel: str = "value", *,
                  scale: tuple[float, float] | None = None, rater: str = "human") -> bytes:
    """Each row's ``value`` as a dot with its ``low``-``high`` interval as a bar (a forest plot).

    Rows of ``kind`` baseline are grey squares; the best trivial baseline of each block of rows is
    a dashed line and the ``human_ceiling`` row a dotted line; metrics and judges are coloured by
    significance ``cluster`` (cluster 1 = not significantly worse than the best). ``scale``: fixed
    x limits (see :func:`scale_for`), widened only if a value lies outside. ``rater``: who gave the
    labels (``human``, ``GPT-4``), naming the ceiling line."""
    low, high = interval_columns(table)
    labels = [" / ".join(str(v) for v in row) for row in table[list(label_cols)].itertuples(index=False)] \
        if label_cols else [str(i) for i in table.index]
    y = np.arange(len(table))[::-1]
    width = 5.5 + 0.075 * max((len(s) for s in labels), default=0)
    fig = _figure(min(width, 12.0), 1.6 + 0.3 * len(table))
    ax = fig.add_subplot()
    v = table["value"].to_numpy(dtype=float)
    kinds = table["kind"].astype(str).to_numpy() if "kind" in table.columns else np.full(len(table), "metric")
    names = table["metric"].astype(str).to_numpy() if "metric" in table.columns else np.full(len(table), "")
    clusters = pd.to_numeric(table["cluster"], errors="coerce").to_numpy() if "cluster" in table.columns \
        else np.full(len(table), np.nan)
    lo = hi = None
    if low and high:
        # a percentile interval may lie beside its estimate: the bar then starts at the dot
        lo = np.clip(v - table[low].to_numpy(dtype=float), 0, None)
        hi = np.clip(table[high].to_numpy(dtype=float) - v, 0, None)
    base = kinds == "baseline"
    shown: set[str] = set()
    _interval_points(ax, v, y, lo, hi, base, names, clusters, shown)
    _baseline_lines(ax, table, label_cols, v, y, base, names, shown, rater)
    ax.set_yticks(y, labels)
    if scale is not None:
        _interval_limits(ax, v, lo, hi, scale)
    if scale is not None and scale[0] < 0 < scale[1]:
        ax.axvline(0, color="#bbbbbb", lw=0.8, zorder=0)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10, loc="left", wrap=True)  # a long title wraps inside the figure
    ax.grid(axis="x", alpha=0.3)
    if shown:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    return _png(fig)


def _interval_points(ax: Any, v: np.ndarray, y: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
                     base: np.ndarray, names: np.ndarray, clusters: np.ndarray, shown: set[str]) -> None:
    """The dots and bars of :func:`interval_plot` (``shown``: legend labels used so far)."""
    for i in range(len(v)):
        if not np.isfinite(v[i]) or names[i] == "human_ceiling":
            continue
        if base[i]:
            colour, marker, label = GREY, "s", "baseline"
        else:
            c = int(clusters[i]) if np.isfinite(clusters[i]) else 0
            colour = PALETTE[(c - 1) % len(PALETTE)] if c else BLUE
            marker, label = "o", f"cluster {c}" if c else "metric / judge"
        xerr = None if lo is None or hi is None else [[lo[i]], [hi[i]]]
        ax.errorbar([v[i]], [y[i]], xerr=xerr, fmt=marker, color=colour, ecolor=colour, elinewidth=1.2, capsize=3,
                    ms=5, label=None if label in shown else label)
        shown.add(label)


def _baseline_lines(ax: Any, table: pd.DataFrame, label_cols: Sequence[str], v: np.ndarray, y: np.ndarray,
                    base: np.ndarray, names: np.ndarray, shown: set[str], rater: str = "human") -> None:
    """Per block of rows: the best trivial baseline (dashed) and the ``rater``'s ceiling (dotted)."""
    label_set = [c for c in label_cols if c not in ("metric", "kind", "rank", "cluster")]
    blocks = table[label_set].map(str).agg(" / ".join, axis=1) if label_set else pd.Series("", index=table.index)
    for b in dict.fromkeys(blocks):
        sel = (blocks == b).to_numpy()
        ymin, ymax = y[sel].min() - 0.4, y[sel].max() + 0.4
        trivial = sel & base & (names != "human_ceiling") & np.isfinite(v)
        if trivial.any():
            ax.vlines(float(np.max(v[trivial])), ymin, ymax, colors=VERMILLION, linestyles="--", lw=1.2,
                      label=None if "best trivial baseline" in shown else "best trivial baseline")
            shown.add("best trivial baseline")
        ceiling = sel & (names == "human_ceiling") & np.isfinite(v)
        if ceiling.any():
            ax.vlines(float(v[ceiling][0]), ymin, ymax, colors=GREEN, linestyles=":", lw=1.8,
                      label=None if "ceiling" in shown else f"{rater} ceiling ("
                      + ("annotators" if rater == "human" else "grades") + " vs each other)")
            shown.add("ceiling")


def _interval_limits(ax: Any, v: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
                     scale: tuple[float, float]) -> None:
    """The fixed x limits, widened to every dot and bar end that lies outside."""
    ends = [] if lo is None or hi is None else [(v - lo)[np.isfinite(v - lo)], (v + hi)[np.isfinite(v + hi)]]
    finite = np.concatenate([v[np.isfinite(v)], *ends])
    left = min(scale[0], float(finite.min()) if finite.size else scale[0])
    right = max(scale[1], float(finite.max()) if finite.size else scale[1])
    ax.set_xlim(left - 0.02 * (right - left), right + 0.02 * (right - left))


def task_heatmap(by_task: pd.DataFrame, label: str, *, n: Mapping[str, int] | None = None,
                 scale: tuple[float, float, str] | None = None, title: str | None = None) -> bytes:
    """The task x metric matrix as a heatmap with each value written in its cell; rows labelled
    with their size ``n`` (task -> items or pairs); the colour scale is fixed (``scale``: low, high,
    colour map; default :func:`scale_for` ``label``) so a colour means the same in every report."""
    m = by_task_matrix(by_task)
    mat = m.to_numpy(dtype=float)
    rows = [f"{t} (n={n[t]})" if n and t in n else str(t) for t in m.index]
    longest = max((len(r) for r in rows), default=0)
    vmin, vmax, cmap = scale or scale_for(label)
    fig = _figure(max(6.0, 3.2 + 0.075 * longest + 0.95 * m.shape[1]), 1.9 + 0.34 * m.shape[0])
    ax = fig.add_subplot()
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax)
    ax.set_facecolor("#dddddd")  # cells without a value
    ax.set_xticks(range(m.shape[1]), list(m.columns), rotation=90)
    ax.set_yticks(range(m.shape[0]), rows)
    cm = im.get_cmap()
    for i in range(mat.shape[0]):
        for j in range(mat.shape[1]):
            x = mat[i, j]
            if not np.isfinite(x):
                ax.text(j, i, "-", ha="center", va="center", fontsize=7, color="black")
                continue
            r, g, b, _a = cm(im.norm(x))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            ax.text(j, i, f"{x:.2f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
    ax.set_title(title or f"{label} per task", fontsize=10, loc="left")
    fig.colorbar(im, ax=ax, shrink=0.8, label=f"{label} (fixed scale {vmin:g} to {vmax:g})")
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


def distributions(item_table: pd.DataFrame, human_col: str, metric_cols: Sequence[str], rater: str = "human") -> bytes:
    """One box plot per metric: the metric's item scores grouped by the labels' grade (``rater``:
    who gave them, ``human`` or e.g. ``GPT-4``)."""
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
                ax.plot(x, d, ".", ms=2, alpha=0.25, color=BLUE)
        ax.set_xticks(range(1, len(order) + 1), order, rotation=30 if len(order) > 5 else 0)
        ax.set_title(m, fontsize=10)
        ax.set_xlabel(f"{rater}: {human_col}")
        ax.grid(axis="y", alpha=0.3)
    for k in range(len(metric_cols), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle(f"Metric scores per {rater} grade", fontsize=11)
    return _png(fig)


def degenerate_curve(curve: Sequence[Any]) -> str | None:
    """Why a tie-calibration curve is not worth a panel (one threshold, or the same accuracy at
    every threshold), or None."""
    eps = np.asarray(curve[0], dtype=float)
    acc = np.asarray(curve[1], dtype=float)
    ok = np.isfinite(eps) & np.isfinite(acc)
    if np.unique(eps[ok]).size < 2:
        return "one tie threshold only (its scores never differ by a positive amount between a pair's sides)" \
            if ok.any() else "no threshold with an accuracy"
    if np.ptp(acc[ok]) == 0:
        return f"the same accuracy ({acc[ok][0]:.3f}) at every threshold"
    return None


def _linear_below(positive: np.ndarray) -> float:
    """Where a symlog epsilon axis turns linear: the smallest positive epsilon, but at least 1e-4 of the
    largest, rounded down to a power of ten; so a difference at float noise (~1e-8 for float32
    embeddings, and not the same on two processors) does not set the scale of the figure."""
    largest = float(positive.max())
    smallest = max(float(positive.min()), largest * 1e-4)
    return 10.0 ** math.floor(math.log10(smallest))


def _symlog_axis(ax: Any, smallest: float, largest: float) -> None:
    """A symmetric-log x axis (linear below ``smallest``) with at most 5 labelled ticks: 0 and
    powers of ten from ten times ``smallest`` (so that labels keep apart)."""
    ax.set_xscale("symlog", linthresh=smallest, linscale=0.5)
    lo = math.ceil(math.log10(smallest)) + 1
    hi = math.floor(math.log10(largest)) if largest > 0 else lo
    decades = list(range(lo, hi + 1))
    step = max(1, math.ceil(len(decades) / 4))
    ticks = [0.0, *(10.0**k for k in decades[::step])]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())


def reliability_diagram(calibrations: Sequence[Any]) -> bytes:
    """The reliability diagram of each judge that states a probability
    (:class:`~evalign.meta.calibration.Calibration`), one panel each: per bin the mean stated
    probability against how often it came true (dot size = items in the bin), the diagonal of perfect
    calibration, ECE and Brier score in the title."""
    nrows, ncols = _grid(len(calibrations))
    fig = _figure(3.6 * ncols, 3.4 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, c in enumerate(calibrations):
        ax = axes[k // ncols][k % ncols]
        b = c.bins
        ax.plot([0, 1], [0, 1], ls="--", lw=1, color="0.5")
        if len(b):
            sizes = 20 + 200 * b["n"].to_numpy() / max(1, int(b["n"].max()))
            ax.plot(b["mean_p"], b["observed"], lw=1, color=BLUE)
            ax.scatter(b["mean_p"], b["observed"], s=sizes, color=BLUE, zorder=3)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        what = "P(A better)" if c.kind == "pairwise" else "P(chosen grade)"
        ax.set_xlabel(f"stated {what}")
        ax.set_ylabel("observed: humans say A" if c.kind == "pairwise" else "observed: the humans' grade")
        ax.set_title(f"{c.judge}\nECE {c.ece:.3f}, Brier {c.brier:.3f}, n {c.n}", fontsize=8)
        ax.grid(alpha=0.3)
    for k in range(len(calibrations), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    return _png(fig)


def epsilon_curves(curves: Mapping[str, Sequence[Any]]) -> bytes:
    """Pairwise accuracy as a function of the tie threshold epsilon, one panel per metric (metrics
    have their own units; a symmetric-log x axis so that small thresholds are not squashed at the
    edge); the chosen epsilon (third element of a curve, else the curve's maximum) is marked.
    Degenerate curves (:func:`degenerate_curve`) get no panel; call with those left out."""
    names = list(curves)
    nrows, ncols = _grid(len(names))
    fig = _figure(4.3 * ncols, 3.2 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, name in enumerate(names):
        ax = axes[k // ncols][k % ncols]
        curve = curves[name]
        eps = np.asarray(curve[0], dtype=float)
        acc = np.asarray(curve[1], dtype=float)
        ax.plot(eps, acc, lw=1.5, color=BLUE)
        positive = eps[eps > 0]
        if positive.size:
            _symlog_axis(ax, _linear_below(positive), float(positive.max()))
        best = None
        if len(curve) > 2 and curve[2] is not None and np.isfinite(float(curve[2])):
            best = float(curve[2])
        elif acc.size and np.isfinite(acc).any():
            best = float(eps[int(np.nanargmax(acc))])
        if best is not None:
            y = float(np.interp(best, eps, acc))
            ax.plot([best], [y], "o", color=VERMILLION, label=f"chosen: eps={best:.3g}, acc={y:.3f}")
            ax.legend(fontsize=7, loc="lower left", frameon=False)
        ax.set_ylim(0, 1)
        ax.set_xlabel("tie threshold epsilon (metric units, symlog)")
        ax.set_ylabel("accuracy with ties")
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    for k in range(len(names), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle("Tie calibration: pairwise accuracy with ties vs the threshold epsilon (dot = chosen)", fontsize=10)
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
        ax.plot(words, s + jitter, ".", ms=3, alpha=0.35, color=BLUE)
        means = s.groupby(bins, observed=True).mean()
        mids = words.groupby(bins, observed=True).median()
        ax.plot(mids.to_numpy(), means.to_numpy(), "-o", color=VERMILLION, lw=1.5, ms=4, label="mean per length quintile")
        ax.set_xlabel("response length (words)")
        ax.set_ylabel("score")
        ax.set_title(j, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(len(judge_cols), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    fig.suptitle("Judge score vs response length", fontsize=11)
    return _png(fig)


def agreement_vs_cost(table: pd.DataFrame, cost: str, xlabel: str, ylabel: str, *,
                      scale: tuple[float, float] | None = None) -> bytes:
    """Each judge (and metric) with a cost as a point: x = its ``cost`` column (cost or seconds per 1,000
    items), y = its agreement ``value`` with the interval as a bar; the best trivial baseline of the
    table (rows of ``kind`` baseline) as a dashed line. A log x axis when the costs span more than
    100x. ``scale``: the fixed y limits of the statistic (see :func:`scale_for`)."""
    low, high = interval_columns(table)
    x = pd.to_numeric(table[cost], errors="coerce").to_numpy(dtype=float)
    v = table["value"].to_numpy(dtype=float)
    kinds = table["kind"].astype(str).to_numpy() if "kind" in table.columns else np.full(len(table), "judge")
    names = table["metric"].astype(str).to_numpy()
    pts = np.isfinite(x) & np.isfinite(v) & (kinds != "baseline")
    fig = _figure(6.4, 4.2)
    ax = fig.add_subplot()
    for k, i in enumerate(np.flatnonzero(pts)):
        colour = PALETTE[k % len(PALETTE)]
        yerr = None
        if low and high:
            lo, hi = float(table[low].iloc[i]), float(table[high].iloc[i])
            if np.isfinite(lo) and np.isfinite(hi):
                yerr = [[max(0.0, v[i] - lo)], [max(0.0, hi - v[i])]]
        ax.errorbar([x[i]], [v[i]], yerr=yerr, fmt="o", color=colour, ecolor=colour, capsize=3, ms=6, label=names[i])
    trivial = (kinds == "baseline") & (names != "human_ceiling") & np.isfinite(v)
    if trivial.any():
        ax.axhline(float(np.max(v[trivial])), color=VERMILLION, ls="--", lw=1.2, label="best trivial baseline")
    ceiling = (names == "human_ceiling") & np.isfinite(v)
    if ceiling.any():
        ax.axhline(float(v[ceiling][0]), color=GREEN, ls=":", lw=1.8, label="human ceiling")
    xs = x[pts]
    if xs.size and xs.min() > 0 and xs.max() / xs.min() > 100:
        ax.set_xscale("log")
    if scale is not None:
        ax.set_ylim(min(scale[0], float(np.nanmin(v)) if np.isfinite(v).any() else scale[0]),
                    max(scale[1], float(np.nanmax(v)) if np.isfinite(v).any() else scale[1]))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    return _png(fig)


def risk_coverage_lines(curves: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What :func:`risk_coverage` draws, per judge: per candidate threshold its ``coverage`` (x), the
    disagreement among the verdicts taken (``risk``, solid) and its upper bound (``bound``, dashed),
    and the chosen threshold's point (``chosen``: (coverage, risk), None when the judge abstains)."""
    out: dict[str, dict[str, Any]] = {}
    for judge, c in curves.items():
        chosen = None
        if c.get("threshold") is not None and c.get("risk") is not None:
            chosen = (float(c["coverage"]), float(c["risk"]))
        out[judge] = {"threshold": c.get("threshold"), "coverage": np.asarray(c["coverages"], dtype=float),
                      "risk": np.asarray(c["risks"], dtype=float), "bound": np.asarray(c["bounds"], dtype=float),
                      "chosen": chosen}
    return out


def risk_coverage(curves: Mapping[str, Mapping[str, Any]], alpha: float) -> bytes:
    """The risk-coverage curve of each judge (:func:`risk_coverage_lines`), one panel each: coverage
    against the disagreement of the verdicts taken (solid) and its upper bound (dashed), the risk
    ``alpha`` asked for (dotted), and the chosen threshold marked (a dot; an abstaining judge says so)."""
    lines = risk_coverage_lines(curves)
    nrows, ncols = _grid(len(lines))
    fig = _figure(3.6 * ncols, 3.2 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, (judge, d) in enumerate(lines.items()):
        ax = axes[k // ncols][k % ncols]
        ax.plot(d["coverage"], d["risk"], lw=1.2, color=BLUE, label="disagreement")
        ax.plot(d["coverage"], d["bound"], lw=1, ls="--", color=ORANGE, label="upper bound")
        ax.axhline(alpha, lw=1, ls=":", color=GREY, label=f"risk {alpha:g}")
        if d["chosen"] is not None:
            ax.scatter([d["chosen"][0]], [d["chosen"][1]], s=40, color=VERMILLION, zorder=3,
                       label=f"threshold {d['threshold']:.4f}")
            what = f"threshold {d['threshold']:.4f}, coverage {d['chosen'][0]:.3f}"
        else:
            what = "abstains: no threshold holds the guarantee"
        ax.set_xlim(0, 1)
        ax.set_ylim(0, max(0.5, float(np.nanmax(d["bound"])) if len(d["bound"]) else 0.5))
        ax.set_xlabel("coverage (share of verdicts taken)")
        ax.set_ylabel("disagreement with people")
        ax.set_title(f"{judge}\n{what}", fontsize=8)
        ax.legend(fontsize=6, loc="upper left")
        ax.grid(alpha=0.3)
    for k in range(len(lines), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    return _png(fig)
