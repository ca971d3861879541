"""The profile as display tables (text cells), for the terminal and the HTML page: formatting only."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evalign.bench.profile import ROLES
from evalign.bench.result import BenchProfile

#: the headline statistics' names as a table says them
STATISTIC_NAMES = {"preference_accuracy_no_ties": "accuracy without human ties", "kendall": "Kendall tau",
                   "spearman": "Spearman rho", "pearson": "Pearson r"}
ROLE_MARKS = {"yours": "", "panel": " (panel)", "published": "", "baseline": " (baseline)",
              "ceiling": " (human ceiling)"}


def num(v: Any, digits: int = 2) -> str:
    """A value with ``digits`` decimals; ``-`` when missing."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(f) else f"{f:.{digits}f}"


def _short(v: float) -> str:
    """``.25`` / ``-.30`` / ``1.0``: an interval end in four characters at most."""
    if math.isnan(v):
        return "-"
    if v >= 1.0:
        return "1.0"
    if v <= -1.0:
        return "-1.0"
    s = f"{v:.2f}"
    return s.replace("0.", ".", 1)


def interval(lo: Any, hi: Any) -> str:
    """``.25–.70`` (``-.30–.44``): the interval's ends, two decimals, no leading zero; empty when the
    interval is missing."""
    try:
        a, b = float(lo), float(hi)
    except (TypeError, ValueError):
        return ""
    if math.isnan(a) or math.isnan(b):
        return ""
    return f"{_short(a)}\u2013{_short(b)}"


def rank_cell(row: pd.Series) -> str:
    """``2/7 c1``: rank of the contenders and significance cluster; ``-`` when withheld or none."""
    r, of, c = row.get("rank"), row.get("of"), row.get("cluster")
    if r is None or (isinstance(r, float) and math.isnan(r)):
        return "-"
    out = f"{int(r)}/{int(of)}" if of is not None and not (isinstance(of, float) and math.isnan(of)) else f"{int(r)}"
    if c is not None and not (isinstance(c, float) and math.isnan(c)):
        out += f" c{int(c)}"
    return out


def judge_label(row: pd.Series) -> str:
    """The judge's name with its role (``longer_is_better (baseline)``)."""
    return f"{row['judge']}{ROLE_MARKS.get(str(row['role']), '')}"


def by_role(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (with a ``role`` column) in the order of :data:`ROLES` (stable within a role)."""
    order = {r: i for i, r in enumerate(ROLES)}
    return df.assign(_o=df["role"].map(lambda r: order.get(str(r), len(order)))).sort_values(
        "_o", kind="stable").drop(columns="_o").reset_index(drop=True)


def summary_table(p: BenchProfile, *, baselines: bool = True, titles: bool = False) -> pd.DataFrame:
    """Judge x category: each cell the category's headline value over its interval (two lines);
    columns ``judge``, ``role`` and one per category (its key, or its title with ``titles``)."""
    s = by_role(p.summary())
    if not baselines:
        s = s[s["role"] != "baseline"]
    out = pd.DataFrame({"judge": s["judge"].to_numpy(), "role": s["role"].to_numpy()})
    for c in p.categories:
        if c.key not in s.columns:
            continue
        out[c.title if titles else c.key] = [
            f"{num(v)}\n{interval(lo, hi)}" if not math.isnan(float(v)) else "-"
            for v, lo, hi in zip(s[c.key], s[f"{c.key}.low"], s[f"{c.key}.high"], strict=True)]
    return out


def own_statistic_note(p: BenchProfile, key: str) -> str | None:
    """What a set table's ``own`` column is (the set's own statistic), or None."""
    own = p.scope("set", key)["dataset_statistic"].dropna()
    return f"own: {own.iloc[0]}, the set's own statistic as its authors compute it" if len(own) else None


def set_title(p: BenchProfile, key: str) -> str:
    """A set's heading: its category, dataset, sample, template and statistic."""
    s = p.sets.set_index("key").loc[key]
    cat = next((c.title for c in p.categories if c.key == s["category"]), s["category"])
    unit = "pairs" if s["kind"] == "pairwise" else "responses"
    stat = STATISTIC_NAMES.get(str(s["statistic"]), str(s["statistic"]))
    return (f"{key} ({cat}): {s['n']} of {s['n_total']} {unit}, template {s['template']}; "
            f"{stat}, 95% interval")


def set_table(p: BenchProfile, key: str) -> pd.DataFrame:
    """One set's rows: the judge, the value and its interval, the accuracy with ties (pairwise) or
    the other correlations (graded), the order diagnostics, unparseable verdicts, rank and cluster."""
    rows = by_role(p.scope("set", key))
    pairwise = bool((rows["kind"] == "pairwise").any())
    out = pd.DataFrame({"judge": rows["judge"].to_numpy(), "role": rows["role"].to_numpy()})
    out["value"] = [num(v) for v in rows["value"]]
    out["interval"] = [interval(lo, hi) for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)]
    if pairwise:
        out["ties"] = [num(v) for v in rows["with_ties"]]
        out["pos."] = [num(v) for v in rows["position_agreement"]]
        out["longer"] = [num(v) for v in rows["prefers_longer"]]
    else:
        out["pearson"] = [num(v) for v in rows["pearson"]]
        out["spearm."] = [num(v) for v in rows["spearman"]]
    if rows["dataset_statistic"].notna().any():  # the set's own published statistic (e.g. JudgeBench's accuracy)
        out["own"] = [num(v) for v in rows["dataset_statistic_value"]]
    if "coverage_at_risk" in rows.columns:  # profiles written before the column: none
        out["cov@0.15"] = [num(v) for v in rows["coverage_at_risk"]]
    out["rank"] = [rank_cell(r) for _, r in rows.iterrows()]
    return out


def runs_table(p: BenchProfile) -> pd.DataFrame:
    """Your judges' calls per set: calls, from the cache, parse rate, seconds per call made."""
    r = p.runs
    if r.empty:
        return pd.DataFrame()
    return pd.DataFrame({
        "judge": r["judge"], "set": r["set"], "calls": r["calls"].astype(int), "cached": r["cached"].astype(int),
        "parsed": [f"{100 * v:.0f}%" if not math.isnan(v) else "-" for v in r["parse_rate"]],
        "s/call": [num(v, 2) for v in r["s_per_call"]], "seconds": [num(v, 1) for v in r["seconds"]],
        **_cost_cells(r),
    })  # fmt: skip


def _cost_cells(r: pd.DataFrame) -> dict[str, list[str]]:
    """The tokens and, with a price, the cost columns of run rows (this run's token split / the list
    price of the same tokens); none for a profile written before they were kept."""
    if "prompt_tokens" not in r.columns:
        return {}
    out = {"tokens in/out": [f"{int(a):,}/{int(b):,}" for a, b in zip(r["prompt_tokens"], r["completion_tokens"],
                                                                       strict=True)]}
    if (r["cache_read_tokens"].fillna(0) + r["cache_write_tokens"].fillna(0)).any():
        out["cache read/write"] = [f"{int(a):,}/{int(b):,}" for a, b in zip(r["cache_read_tokens"],
                                                                            r["cache_write_tokens"], strict=True)]
    if pd.to_numeric(r["cost"], errors="coerce").notna().any():
        out["cost (list)"] = [f"{num(c, 4)} ({num(lc, 4)})" for c, lc in zip(pd.to_numeric(r["cost"], errors="coerce"),
                                                                            pd.to_numeric(r["list_cost"], errors="coerce"),
                                                                            strict=True)]
    return out


def runs_totals(p: BenchProfile) -> pd.DataFrame:
    """Per judge over every set: calls, from the cache, parse rate, seconds."""
    r = p.runs
    if r.empty:
        return pd.DataFrame()
    g = r.groupby("judge", sort=False)
    calls, unparsed, failed = g["calls"].sum(), g["unparsed"].sum(), g["failed"].sum()
    new, secs = g["new"].sum(), g["seconds"].sum()
    return pd.DataFrame({
        "judge": calls.index, "calls": calls.to_numpy(), "cached": g["cached"].sum().to_numpy(),
        "parsed": [f"{100 * (c - u - f) / c:.0f}%" if c else "-" for c, u, f in zip(calls, unparsed, failed, strict=True)],
        "s/call": [num(s / n, 2) if n else "-" for s, n in zip(secs, new, strict=True)],
        "seconds": [num(v, 1) for v in secs],
        **_cost_cells(_summed(g, r)),
    })  # fmt: skip


def _summed(g: Any, r: pd.DataFrame) -> pd.DataFrame:
    """The token and cost columns of run rows summed per judge (a cost only where every set had one)."""
    cols = [c for c in ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens") if c in r]
    out = g[cols].sum().reset_index(drop=True) if cols else pd.DataFrame()
    for c in ("cost", "list_cost"):
        if c in r.columns:
            out[c] = g[c].apply(lambda v: pd.to_numeric(v, errors="coerce").sum(min_count=len(v))).to_numpy()
    return out


__all__ = [
    "STATISTIC_NAMES",
    "by_role",
    "interval",
    "judge_label",
    "num",
    "own_statistic_note",
    "rank_cell",
    "runs_table",
    "runs_totals",
    "set_table",
    "set_title",
    "summary_table",
]
