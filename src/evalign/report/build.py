"""Assemble a report from :class:`ReportData` and write it: one HTML file, PNG plots, and the
tables as Markdown and LaTeX."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.report import figures as F
from evalign.report.data import ReportData, by_task_matrix
from evalign.report.html import Figure, Section, render_html
from evalign.report.tables import by_task_display, format_results, leaderboard_display, to_latex, to_markdown


@dataclass
class Report:
    """A built report: the HTML page, the sections (display tables and figures)."""

    html: str
    sections: list[Section]

    @property
    def figures(self) -> dict[str, bytes]:
        """File stem -> PNG bytes."""
        return {f.name: f.png for s in self.sections for f in s.figures}

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """File stem -> display table (strings)."""
        out: dict[str, pd.DataFrame] = {}
        for s in self.sections:
            for k, (title, df) in enumerate(s.tables.items()):
                out[s.key if k == 0 else f"{s.key}_{_slug(title)}"] = df
        return out

    @property
    def table_titles(self) -> dict[str, str]:
        """File stem -> table title."""
        out: dict[str, str] = {}
        for s in self.sections:
            for k, title in enumerate(s.tables):
                out[s.key if k == 0 else f"{s.key}_{_slug(title)}"] = title
        return out


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text.lower()).strip("_")[:40] or "table"


def _label_cols(df: pd.DataFrame) -> list[str]:
    """Text columns that tell the rows apart (columns with one value for all rows are left out)."""
    skip = {"value", "low", "high", "ci_low", "ci_high", "lo", "hi", "lower", "upper", "rank", "cluster",
            "beats_baselines", "epsilon"}
    text = [c for c in df.columns if c not in skip and not pd.api.types.is_numeric_dtype(df[c])]
    varying = [c for c in text if df[c].nunique(dropna=False) > 1]
    return varying or text[:1]


def _present(cols: list[str], table: pd.DataFrame | None) -> list[str]:
    if table is None:
        return []
    return [c for c in cols if c in table.columns and pd.api.types.is_numeric_dtype(table[c])]


def build_report(data: ReportData) -> Report:
    """Build the sections for what ``data`` holds (missing parts are skipped) and the HTML page."""
    from evalign import __version__

    sections: list[Section] = []
    if data.leaderboard is not None and len(data.leaderboard):
        s = Section("leaderboard", "System leaderboard and human ranking")
        s.text = "Each metric's system-level score with its rank in brackets (1 = best); systems in human order."
        s.tables["System leaderboard"] = leaderboard_display(data)
        cols = [m for m in data.metric_cols if m in data.leaderboard.columns]
        if cols or data.human_system_col:
            png = F.rank_heatmap(data.leaderboard, data.human_system_col, data.human_system_higher_is_better, cols, data.higher_is_better)
            s.figures.append(Figure("leaderboard_ranks", "System ranks by human and by each metric (1 = best)", png))
        sections.append(s)
    for key, title, table, xlabel in (
        ("correlations", "Correlation with human judgments", data.correlations, "correlation"),
        ("pair_accuracy", "Pairwise accuracy against human preferences", data.pair_accuracy, "accuracy"),
    ):
        if table is None or not len(table):
            continue
        s = Section(key, title)
        s.text = "value [low, high] = estimate and its bootstrap confidence interval." if "low" in table.columns else ""
        s.tables[title] = format_results(table, data.digits)
        if "value" in table.columns:
            s.figures.append(Figure(f"{key}_intervals", f"{title} (dot = estimate, bar = interval)", F.interval_plot(table, title, _label_cols(table), xlabel)))
        sections.append(s)
    if data.by_task is not None and len(data.by_task):
        m = by_task_matrix(data.by_task)
        s = Section("by_task", f"{data.by_task_label} per task")
        s.tables[f"{data.by_task_label} per task"] = by_task_display(m, data.digits)
        s.figures.append(Figure("by_task_heatmap", f"{data.by_task_label} per task (rows) and metric (columns)", F.task_heatmap(m, data.by_task_label)))
        sections.append(s)
    metric_cols = _present(data.metric_cols, data.item_table)
    if data.item_table is not None and data.human_col and data.human_col in data.item_table.columns and metric_cols:
        s = Section("distributions", "Score distributions per human grade")
        s.figures.append(Figure("distributions", f"Item scores of each metric grouped by the human rating '{data.human_col}'", F.distributions(data.item_table, data.human_col, metric_cols)))
        sections.append(s)
    if data.epsilon_curves:
        s = Section("tie_calibration", "Tie calibration")
        s.text = "Pairwise accuracy (with ties) when metric differences below epsilon count as ties."
        s.figures.append(Figure("epsilon_curves", "Accuracy vs tie threshold epsilon", F.epsilon_curves(data.epsilon_curves)))
        sections.append(s)
    judge_cols = _present(data.judge_cols, data.item_table)
    if data.item_table is not None and judge_cols and "response" in data.item_table.columns:
        s = Section("length_bias", "Judge score vs response length")
        s.figures.append(Figure("score_vs_length", "Judge scores against response length in words", F.score_vs_length(data.item_table, judge_cols)))
        sections.append(s)
    if data.explorer is not None:
        s = Section("explorer", "Item explorer")
        s.html = data.explorer.html()
        sections.append(s)
    if data.extra_tables:
        s = Section("more", "More results")
        for title, df in data.extra_tables.items():
            s.tables[title] = format_results(df, data.digits)
        sections.append(s)
    if data.notes:
        sections.append(Section("notes", "Notes", text="\n".join(data.notes)))
    page = render_html(data.title, data.subtitle, sections, f"Made with evalign {__version__}.")
    return Report(page, sections)


def write_report(
    out_dir: str | Path,
    data: ReportData | None = None,
    *,
    html_name: str = "report.html",
    assets: str = ".",
    **fields_: Any,
) -> dict[str, Path]:
    """Build a report and write it; returns ``{"html": path, "figure:<name>": path,
    "markdown:<name>": path, "latex:<name>": path, "tables_md": path}``.

    Give either ``data`` or the :class:`ReportData` fields as keywords, e.g.
    ``write_report(out, leaderboard=lb, correlations=corr, pair_accuracy=None, by_task=bt,
    item_table=items, metric_cols=["rouge_l"], human_col="acceptable", epsilon_curves=curves,
    judge_cols=["prometheus"])``. Files: ``out_dir/html_name`` (self-contained),
    ``out_dir/assets/figures/*.png``, ``out_dir/assets/tables/*.md`` and ``*.tex`` and
    ``out_dir/assets/tables/tables.md`` (all tables). Writes are atomic.
    """
    from evalign.io import atomic_path, write_text_atomic

    if data is None:
        known = {f.name for f in fields(ReportData)}
        unknown = sorted(set(fields_) - known)
        if unknown:
            raise TypeError(f"unknown report field(s): {', '.join(unknown)}")
        data = ReportData(**{k: v for k, v in fields_.items() if v is not None})
    elif fields_:
        raise TypeError("give either data= or ReportData fields as keywords, not both")
    report = build_report(data)
    out = Path(out_dir)
    base = out / assets
    written: dict[str, Path] = {}
    for name, png in report.figures.items():
        p = base / "figures" / f"{name}.png"
        with atomic_path(p) as tmp:
            tmp.write_bytes(png)
        written[f"figure:{name}"] = p
    all_md = []
    titles = report.table_titles
    for name, df in report.tables.items():
        md = to_markdown(df)
        p = base / "tables" / f"{name}.md"
        write_text_atomic(p, md)
        written[f"markdown:{name}"] = p
        p = base / "tables" / f"{name}.tex"
        write_text_atomic(p, to_latex(df, caption=titles[name], label=f"tab:{name}"))
        written[f"latex:{name}"] = p
        all_md.append(f"## {titles[name]}\n\n{md}")
    if all_md:
        p = base / "tables" / "tables.md"
        write_text_atomic(p, "\n".join(all_md))
        written["tables_md"] = p
    p = out / html_name
    write_text_atomic(p, report.html)
    written["html"] = p
    return written
