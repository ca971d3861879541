"""The profile as one self-contained HTML page: the judge x category table, one plot (each judge's
value with its interval, per category, the best trivial baseline as a line), each set's table, your
judges' calls and the signature. It renders the profile; it computes nothing."""

from __future__ import annotations

import pandas as pd

from evalign.bench.display import (
    STATISTIC_NAMES,
    runs_table,
    runs_totals,
    set_table,
    set_title,
    summary_table,
)
from evalign.bench.result import BenchProfile
from evalign.report.figures import interval_plot, scale_for
from evalign.report.html import Figure, Section, render_html


def plot_rows(p: BenchProfile) -> pd.DataFrame:
    """The rows of the plot: every category's judges and trivial baselines (``metric``, ``kind``,
    ``value``, ``ci_low``, ``ci_high``, ``cluster``, ``category``: the category's title)."""
    cat = p.scope("category")
    cat = cat[cat["role"] != "ceiling"]
    titles = {c.key: c.title for c in p.categories}
    return pd.DataFrame({
        "category": [titles.get(k, k) for k in cat["key"]], "metric": cat["judge"],
        "kind": ["baseline" if r == "baseline" else "judge" for r in cat["role"]], "value": cat["value"],
        "ci_low": cat["ci_low"], "ci_high": cat["ci_high"], "cluster": cat["cluster"],
    })  # fmt: skip


def figures(p: BenchProfile) -> list[Figure]:
    """The page's one plot per kind of statistic (accuracies and correlations share no axis)."""
    rows = plot_rows(p)
    stats = p.scope("category").groupby("key")["statistic"].first()
    out = []
    for stat in dict.fromkeys(stats):
        keys = [k for k, s in stats.items() if s == stat]
        titles = [c.title for c in p.categories if c.key in keys]
        part = rows[rows["category"].isin(titles)].reset_index(drop=True)
        if part.empty:
            continue
        name = STATISTIC_NAMES.get(stat, stat)
        lo, hi, _ = scale_for(stat)
        png = interval_plot(part, f"Judge x category: {name} with its interval", ["category", "metric"], name,
                            scale=(lo, hi))
        out.append(Figure(f"bench-{stat}", f"Each judge's {name} per category with its interval; the dashed line is "
                          "the best trivial baseline of the category", png))
    return out


def render_page(p: BenchProfile, title: str = "evalign bench: judge profile") -> str:
    """The page as a string."""
    sig = p.signature
    sections = [Section("profile", "Profile by category", text="Each cell: the category's headline value and its "
                        "interval below it (pairwise: accuracy on the pairs without a human tie, each judge's "
                        "verdict resolved over both orders; graded: the correlation, averaged over the sets).",
                        tables={"Profile by category": summary_table(p)}, figures=figures(p),
                        items=[f"{k}: {v}" for k, v in p.headlines.items() if k in {c.key for c in p.categories}])]
    for key in p.sets["key"]:
        head = p.headlines.get(key)
        sections.append(Section(f"set-{key}", f"Set {key}", text=set_title(p, key), tables={key: set_table(p, key)},
                                after=[head] if head else []))
    if not p.runs.empty:
        sections.append(Section("runs", "Your judges' calls", tables={"Per set": runs_table(p),
                                                                       "Over the bench": runs_totals(p)}))
    notes = [*(f"{k}: skipped: {v}" for k, v in p.skipped.items()), *p.notes]
    sections.append(Section("signature", "Signature", text=str(sig.get("text", "")), items=notes))
    sub = f"{len(p.sets)} sets, {sig.get('per_set')} per set, seed {sig.get('seed')}; judges: {', '.join(p.judges) or 'none'}"
    return render_html(title, sub, sections, f"evalign {sig.get('evalign', '')}")


__all__ = ["figures", "plot_rows", "render_page"]
