"""The report's tables: display versions of the results tables (numbers formatted, intervals as
``value [low, high]``) and their Markdown and LaTeX renderings."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import EvalignError
from evalign.report.data import ReportData, interval_columns, ranks


def fmt(v: Any, digits: int = 3) -> str:
    """A table cell: floats with ``digits`` decimals, integers as they are, missing as ``-``."""
    if v is None:
        return "-"
    if isinstance(v, bool | np.bool_):
        return str(bool(v))
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        f = float(v)
        if math.isnan(f):
            return "-"
        if f.is_integer() and abs(f) >= 1000:
            return f"{f:.0f}"
        return f"{f:.{digits}f}"
    return str(v)


def fmt_rank(v: Any) -> str:
    """A rank cell: an integer, or ``-`` when missing."""
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v))


#: columns whose values are integers (ranks, clusters, counts) although a missing cell makes them floats
INTEGER_COLUMNS = ("rank", "cluster", "calls", "prompt_tokens", "completion_tokens")


def integer_column(name: str) -> bool:
    """Whether a results column holds integers: a rank, a cluster or a count (``n``, ``n_items``, ``n systems``,
    a judge's ``calls`` and tokens)."""
    return name in INTEGER_COLUMNS or name == "n" or name.startswith(("n_", "n "))


def fmt_integer(v: Any, digits: int = 3) -> str:
    """A cell of an integer column: an integer-valued number as an integer (``1``, not ``1.000``),
    missing as ``-``, anything else as :func:`fmt` writes it."""
    if isinstance(v, float | np.floating) and math.isfinite(float(v)) and float(v).is_integer():
        return str(int(v))
    return fmt(v, digits)


def format_results(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """A results table as strings; ``value`` with ``low``/``high`` becomes one column
    ``value [low, high]``; ranks, clusters and counts print as integers."""
    low, high = interval_columns(df)
    out = pd.DataFrame(index=df.index)
    for c in df.columns:
        if c in (low, high):
            continue
        if c == "value" and low and high:
            out["value [low, high]"] = [
                f"{fmt(v, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"
                for v, lo, hi in zip(df["value"], df[low], df[high], strict=True)
            ]
        else:
            cell = fmt_integer if integer_column(str(c)) else fmt
            out[str(c)] = [cell(v, digits) for v in df[c]]
    return out.reset_index(drop=True)


def leaderboard_display(data: ReportData) -> pd.DataFrame:
    """Systems in human order: the human value and rank (for human ranks, lower = better: the rank
    alone), then each metric's score with its rank among these systems."""
    assert data.leaderboard is not None
    lb = data.leaderboard.reset_index(drop=True)
    out = pd.DataFrame({"system": lb["system"].astype(str)})
    order = None
    if data.human_system_col and data.human_system_col in lb.columns:
        h = lb[data.human_system_col].astype(float)
        r = ranks(h, data.human_system_higher_is_better)
        if data.human_system_higher_is_better:  # scores: the value and the rank among these systems
            out[f"{data.rater} ({data.human_system_col})"] = [fmt(v, data.digits) for v in h]
            out[f"{data.rater} rank"] = [fmt_rank(v) for v in r]
        else:  # ranks (1 = best): one column, the published rank as it is (its scale named in the text)
            out[f"{data.rater} rank" + (" (published)" if data.human_scale else "")] = [
                fmt_rank(v) if float(v).is_integer() else fmt(v, data.digits) for v in h]
        order = r.to_numpy()
    for m in data.metric_cols:
        if m not in lb.columns:
            continue
        v = lb[m].astype(float)
        r = ranks(v, data.higher_is_better.get(m, True))
        out[data.system_labels.get(m, m)] = [f"{fmt(x, data.digits)} ({fmt_rank(k)})" for x, k in zip(v, r, strict=True)]
    if order is not None:
        out = out.iloc[np.argsort(order, kind="stable")]
    return out.reset_index(drop=True)


#: the system table of a leaderboard from pairwise verdicts as shown: source column -> header (rates as
#: percentages, as alpaca_eval prints them)
BOARD_SHOWN = {
    "rank": "rank", "cluster": "cluster", "system": "system", "bt_score": "bt_score", "bt_low": "bt_low",
    "bt_high": "bt_high", "win_rate": "win %", "lc_win_rate": "lc win %", "n_battles": "battles", "n_ties": "ties",
    "n_unparseable": "unparsed", "mean_length": "mean len", "position_agreement": "pos agree %",
}
BOARD_PERCENT = ("win_rate", "lc_win_rate", "position_agreement")


def pairwise_board_display(table: pd.DataFrame) -> pd.DataFrame:
    """The system table as shown in the terminal (rates in percent; columns with nothing to show left out)."""
    shown = table[[c for c in BOARD_SHOWN if c in table.columns]].copy()
    for c in BOARD_PERCENT:
        if c in shown.columns:
            shown[c] = shown[c] * 100.0
    if "n_unparseable" in shown.columns and not shown["n_unparseable"].any():
        shown = shown.drop(columns="n_unparseable")
    if "cluster" in shown.columns and not shown["cluster"].any():
        shown = shown.drop(columns="cluster")
    shown = shown.drop(columns=[c for c in ("mean_length", "lc_win_rate") if c in shown and shown[c].isna().all()])
    return shown.rename(columns=BOARD_SHOWN)


def alt_test_display(table: pd.DataFrame) -> pd.DataFrame:
    """An Alt-Test table (:meth:`evalign.meta.alt_test.AltTestReport.table`) as shown: rates as
    numbers, ``passed`` as yes / no, ``annotators`` as ``tested (+dropped)``; the reason column only
    when a test could not run."""
    if table.empty:
        return table
    out = pd.DataFrame({
        "judge": table["judge"],
        "winning rate": table["winning_rate"],
        "advantage prob.": table["advantage_probability"],
        "passes": [_yes_no(p) for p in table["passed"]],
        "annotators": [f"{t}" + (f" (+{d} dropped)" if d else "") for t, d in
                       zip(table["annotators"], table["dropped_annotators"], strict=True)],
        "items": table["n_items"],
    })
    if table["reason"].notna().any():
        out["why not"] = table["reason"].fillna("")
    return out


def alt_test_p_display(p_values: pd.DataFrame) -> pd.DataFrame:
    """The per-annotator p-values of an Alt-Test (:meth:`~evalign.meta.alt_test.AltTestReport.p_values`)
    as a judge x annotator grid (one row per judge, or per annotator when there are fewer judges than
    annotators: whichever makes fewer columns): ``p`` with ``*`` when Benjamini-Yekutieli rejects
    (the judge wins against that annotator)."""
    if p_values.empty:
        return p_values
    cell = [(f"{p:.3f}" if p >= 0.001 else f"{p:.1e}") + (" *" if r else "")
            if isinstance(p, float) and math.isfinite(p) else "-"
            for p, r in zip(p_values["p_value"], p_values["rejected"], strict=True)]
    judges, annotators = list(dict.fromkeys(p_values["judge"])), list(dict.fromkeys(p_values["annotator"]))
    rows, cols = ("judge", "annotator") if len(annotators) <= len(judges) else ("annotator", "judge")
    order = {"judge": judges, "annotator": annotators}
    wide = p_values.assign(cell=cell).pivot(index=rows, columns=cols, values="cell")
    wide = wide.reindex(index=order[rows], columns=order[cols]).fillna("-").reset_index()
    wide.columns.name = None
    return wide


def judges_vs_humans_display(rows: pd.DataFrame, alt: Any, ceiling: Any, statistic: str) -> pd.DataFrame:
    """Can these judges replace an annotator? One row per judge of group ``(all)`` of a trust table's
    ``rows``, in its order: the ranking ``statistic``, then the Alt-Test
    (:class:`~evalign.meta.alt_test.AltTestReport` ``alt``) and the agreement against the human
    ceiling (:class:`~evalign.meta.ceiling.CeilingReport` ``ceiling``), either may be None."""
    by_alt = {r.judge: r for r in alt.results} if alt is not None else {}
    by_ceil = {j.judge: j for j in ceiling.judges} if ceiling is not None else {}
    main = rows[(rows["group"] == "(all)") & rows["metric"].isin([*by_alt, *by_ceil])]
    out = pd.DataFrame({"judge": main["metric"].to_numpy(), statistic: main["value"].to_numpy()})
    judges = list(out["judge"])
    if alt is not None:
        out["winning rate"] = [by_alt[j].winning_rate if j in by_alt else math.nan for j in judges]
        out["advantage"] = [by_alt[j].advantage_probability if j in by_alt else math.nan for j in judges]
        out["passes"] = [_yes_no(by_alt[j].passed) if j in by_alt else "-" for j in judges]
    if ceiling is not None:
        kap = "kappa" if ceiling.statistic == "kappa" else "qw kappa"
        pct = round(100 * ceiling.resampling.confidence)
        out[f"{kap} w/ humans"] = [by_ceil[j].value if j in by_ceil else math.nan for j in judges]
        out[f"minus ceiling [{pct}% CI]"] = [_difference(by_ceil.get(j)) for j in judges]
        out["vs ceiling"] = [by_ceil[j].verdict if j in by_ceil else "-" for j in judges]
    return out


def _yes_no(v: Any) -> str:
    return "yes" if v is True else "no" if v is False else "-"


def _difference(j: Any) -> str:
    """A judge's difference from the human ceiling with its interval, ``+0.012 [-0.030, +0.051]``."""
    if j is None or not math.isfinite(j.difference_low):
        return "-"
    return f"{j.difference:+.3f} [{j.difference_low:+.3f}, {j.difference_high:+.3f}]"


#: short names of the ranking statistics in the cross-set table
STAT_SHORT = {"preference_accuracy": "pref. acc.", "pairwise_accuracy": "pairwise acc.", "kendall": "kendall",
              "pearson": "pearson", "spearman": "spearman", "preference_accuracy_no_ties": "pref. acc. (no ties)"}


def published_display(rows: pd.DataFrame, top: int | None = None) -> pd.DataFrame:
    """The cross-set table (:attr:`evalign.evaluate.published.PublishedTable.rows`) as shown: one row
    per set and column, ``value [low, high]``, ``rank`` as ``k/of``, ``beats baselines`` as yes / no
    (with the best baseline's value), the Alt-Test as ``winning rate / advantage`` (``-`` where the
    labels have one annotator); ``top``: the best ``top`` columns of each set only."""
    if rows.empty:
        return rows
    if top is not None:
        rows = rows[rows["rank"] <= top]
    sets = [s if lab in (None, "preference") or pd.isna(lab) else f"{s}/{lab}"
            for s, lab in zip(rows["set"], rows["labels"], strict=True)]
    value = [fmt(v) + (f" [{fmt(lo)}, {fmt(hi)}]" if isinstance(lo, float) and math.isfinite(lo) else "")
             for v, lo, hi in zip(rows["value"], rows["ci_low"], rows["ci_high"], strict=True)]
    beats = [("yes" if b is True else "no" if b is False else "-") + (f" ({fmt(bv, 2)})" if math.isfinite(bv) else "")
             for b, bv in zip(rows["beats_baselines"], rows["best_baseline_value"], strict=True)]
    alt = ["-" if not math.isfinite(w) else f"{w:.2f} / {a:.2f}" + (" pass" if p is True else "")
           for w, a, p in zip(rows["alt_winning_rate"], rows["alt_advantage"], rows["alt_passed"], strict=True)]
    return pd.DataFrame({
        "set": sets, "column": rows["column"].to_numpy(), "n": rows["n"].to_numpy(),
        "statistic": [STAT_SHORT.get(str(s), str(s)) for s in rows["statistic"]], "value [95% CI]": value,
        "rank": [f"{fmt_rank(r)}/{o}" for r, o in zip(rows["rank"], rows["of"], strict=True)],
        "beats baseline (best)": beats, "Alt-Test win / adv.": alt,
    })


def published_blocks(rows: pd.DataFrame, top: int | None = None) -> list[tuple[str, pd.DataFrame]]:
    """The cross-set table as one narrow table per set and label set (for a terminal): its title
    says the set, the statistic, n, the best trivial baseline and the Alt-Test's epsilon; each row a
    column (``judge:`` left out of the name) in rank order with ``value [low, high]``, whether it
    beats the best baseline, and the Alt-Test's winning rate / advantage probability."""
    out = []
    if top is not None:
        rows = rows[rows["rank"] <= top]
    for (name, labels), g in rows.groupby(["set", "labels"], sort=False, dropna=False):
        first = g.iloc[0]
        set_name = name if labels in (None, "preference") or pd.isna(labels) else f"{name}/{labels}"
        base = (f"; best trivial baseline {first['best_baseline']} {fmt(first['best_baseline_value'])}"
                if first["best_baseline"] is not None and not pd.isna(first["best_baseline"]) else "")
        eps = f"; Alt-Test at epsilon {first['epsilon']:g}" if math.isfinite(first["epsilon"]) else ""
        title = (f"{set_name}: {STAT_SHORT.get(str(first['statistic']), str(first['statistic']))}, "
                 f"n {int(first['n'])}, {int(first['of'])} column(s){base}{eps}")
        d = published_display(g)
        d.insert(0, "#", [str(r).split("/")[0] for r in d["rank"]])
        d["column"] = [str(c).removeprefix("judge:") for c in d["column"]]
        d = d.drop(columns=["set", "n", "statistic", "rank"]).rename(
            columns={"beats baseline (best)": "beats", "Alt-Test win / adv.": "Alt-Test"})
        d["beats"] = [b.split(" ")[0] for b in d["beats"]]
        if (d["Alt-Test"] == "-").all():
            d = d.drop(columns=["Alt-Test"])
        out.append((title, d))
    return out


def calibration_display(calibrations: Any) -> pd.DataFrame:
    """One row per judge with a stated probability: ``judge, kind, n, left out, ECE, Brier``."""
    return pd.DataFrame([{"judge": c.judge, "kind": c.kind, "n": c.n, "left out": c.n_left_out, "ECE": c.ece,
                          "Brier": c.brier} for c in calibrations],
                        columns=["judge", "kind", "n", "left out", "ECE", "Brier"])


def by_task_display(matrix: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The task x metric matrix as strings with a ``task`` column."""
    out = matrix.map(lambda v: fmt(v, digits))
    out.columns = [str(c) for c in out.columns]
    out.insert(0, "task", list(matrix.index))
    return out.reset_index(drop=True)


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (cells as strings; ``|`` escaped)."""

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    cols = [cell(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def to_latex(df: pd.DataFrame, caption: str | None = None, label: str | None = None) -> str:
    """A booktabs LaTeX table (pandas ``to_latex``; needs jinja2); special characters escaped."""
    try:
        return df.to_latex(index=False, escape=True, caption=caption, label=label, column_format="l" * df.shape[1])
    except ImportError as e:  # pandas renders LaTeX through jinja2
        raise EvalignError(f"LaTeX tables need jinja2 (pip install jinja2): {e}") from e
