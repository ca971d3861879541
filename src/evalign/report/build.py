"""Assemble a report from :class:`ReportData` and write it: one HTML file, PNG plots, and the
tables as Markdown and LaTeX."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd

from evalign import __version__
from evalign.evaluate.stages import COST_COLUMNS
from evalign.io import write_files_atomic
from evalign.report import figures as F
from evalign.report.boards import outcome_lines, outcome_title
from evalign.report.data import ReportData, by_task_matrix
from evalign.report.html import Figure, Section, render_html
from evalign.report.probes import probe_section
from evalign.report.tables import (
    alt_test_p_display,
    by_task_display,
    calibration_display,
    format_results,
    judges_vs_humans_display,
    leaderboard_display,
    pairwise_board_display,
    published_display,
    to_latex,
    to_markdown,
)


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


def _leaderboard_section(data: ReportData) -> Section | None:
    if data.leaderboard is None or not len(data.leaderboard):
        return None
    who = data.labels
    s = Section("leaderboard", f"System leaderboard beside the ranking by {who}")
    order = (f"systems in the order of the ranking by {who}" if data.human_system_col
             and data.human_system_col in data.leaderboard.columns else "systems in the table's order")
    s.text = ("Each metric's system-level score with its rank among these systems in brackets (1 = best); "
              + order + (f" ({data.rater} rank = {data.human_scale})." if data.human_scale else "."))
    s.tables["System leaderboard"] = leaderboard_display(data)
    cols = [m for m in data.metric_cols if m in data.leaderboard.columns]
    if cols or data.human_system_col:
        png = F.rank_heatmap(data.leaderboard, data.human_system_col, data.human_system_higher_is_better, cols,
                             data.higher_is_better, rater=data.rater)
        s.figures.append(Figure("leaderboard_ranks", f"System ranks among the {len(data.leaderboard)} systems "
                                                     f"by {who} and by each metric (1 = best)", png))
    return s


def _pairwise_board_sections(data: ReportData) -> list[Section]:
    """A section per leaderboard from pairwise verdicts: the judge and its trust, the system table, the
    Bradley-Terry scores with their intervals (a forest plot) and the win-rate matrix (a heatmap)."""
    out = []
    for i, o in enumerate(data.pairwise_boards):
        key = "pairwise_leaderboard" + (f"_{i + 1}" if len(data.pairwise_boards) > 1 else "")
        table = o.board.table
        s = Section(key, f"Leaderboard from pairwise verdicts: {o.spec.column}")
        s.text = f"{o.judge_line()}. {outcome_title(o)}."
        s.tables[f"Leaderboard: {o.spec.column}"] = format_results(pairwise_board_display(table), 1)
        s.after = outcome_lines(o)
        bt = pd.DataFrame({"metric": table["system"].astype(str), "kind": "metric", "value": table["bt_score"],
                           "ci_low": table["bt_low"], "ci_high": table["bt_high"], "cluster": table["cluster"]})
        boot = o.board.bt.settings.n_bootstrap
        s.figures.append(Figure(f"{key}_bt", "Bradley-Terry scores: dot = estimate, bar = "
                                + (f"{o.board.bt.settings.confidence:.0%} bootstrap interval ({boot} resamples); "
                                   "colours = significance clusters (cluster 1 = not significantly below the best)"
                                   if boot else "no interval (no bootstrap)"),
                                F.interval_plot(bt, f"Bradley-Terry scores: {o.spec.column}", ["metric"],
                                                "Bradley-Terry score (Elo-like scale)")))
        m = o.board.matrix
        rates = pd.DataFrame([{"task": str(a), "metric": str(b), "value": m.rate[r, c]}
                              for r, a in enumerate(m.systems) for c, b in enumerate(m.systems)])
        s.figures.append(Figure(f"{key}_win_rates", "Win rate of the row's system against the column's (ties "
                                                   "count half; '-' = no resolved battle)",
                                F.task_heatmap(rates, "win rate", scale=(0.0, 1.0, "RdBu"),
                                               title=f"Win rates: {o.spec.column} (row vs column)")))
        out.append(s)
    return out


def _result_section(data: ReportData, key: str, title: str, table: pd.DataFrame | None) -> Section | None:
    """A section of one result table (correlations or pairwise accuracy) with an interval plot per
    statistic."""
    if table is None or not len(table):
        return None
    who = data.labels
    pct = f"{round(100 * data.confidence)}%"
    s = Section(key, title)
    s.text = (f"value [low, high] = estimate and its {pct} percentile bootstrap interval over items."
              if "low" in table.columns or "ci_low" in table.columns else "")
    shown = format_results(table.drop(columns=[c for c in COST_COLUMNS if c in table.columns]), data.digits)
    s.tables[title] = shown
    s.main[title], same = main_columns(shown)
    if same:
        s.text = (s.text + " Every row: " + "; ".join(f"{c} {v}" for c, v in same.items()) + ".").strip()
    s.after = list(data.table_notes.get(key, []))
    if "value" in table.columns:
        blocks = _blocks(table)
        several = len({where for _, where, _ in blocks}) > 1
        for stat, where, part in blocks:  # one panel per statistic and per table, each with its own lines
            what = (f"{where}: " if several else "") + _what(part, stat)
            label_cols = [c for c in _label_cols(part) if c not in ("statistic", "kind", "table")] or ["metric"]
            png = F.interval_plot(part, f"{what} with {who} ({pct} bootstrap interval)", label_cols,
                                  _axis_label(part, stat), scale=F.scale_for(stat)[:2], rater=data.rater)
            name = f"{key}_intervals" + (f"_{_slug(f'{where} {stat}'.strip())}" if len(blocks) > 1 else "")
            if any(f.name == name for f in s.figures):  # two tables of one name: numbered
                name += f"_{len(s.figures) + 1}"
            s.figures.append(Figure(name,
                                    f"{what} with {who}: dot = estimate, bar = {pct} percentile bootstrap "
                                    "interval over items; colours = significance clusters (cluster 1 = not "
                                    "significantly worse than the best); grey squares = trivial baselines, "
                                    f"dashed line = the best of them, dotted line = the {data.rater} ceiling", png))
    return s


def _cost_section(data: ReportData) -> Section | None:
    """The judges' cost column group (calls, tokens, seconds, parse rate, cost per 1,000 items) beside
    their agreement, and a plot of agreement against cost per 1,000 items (seconds when no price is
    known), for the first result table whose judges have usage columns."""
    for key, table in (("pair_accuracy", data.pair_accuracy), ("correlations", data.correlations)):
        if table is None or "calls" not in table.columns:
            continue
        for stat, _, part in _blocks(table):
            judges = part[pd.to_numeric(part["calls"], errors="coerce").notna()]
            if not len(judges):
                continue
            priced = "cost_per_1000" in part.columns and pd.to_numeric(part["cost_per_1000"], errors="coerce").notna().any()
            x = "cost_per_1000" if priced else "s_per_1000"
            what = _what(part, stat)
            s = Section("judge_cost", f"Judges: {what} against cost")
            s.text = ("Per judge over the whole table: answered calls (re-asks and cached ones included), the "
                      "server's prompt and completion tokens, mean seconds per call, the share of answers read "
                      "(parse rate), seconds per 1,000 items (the calls' latencies added up: one call at a time) "
                      "and, with a price (--price IN/OUT, --prices FILE), the cost per 1,000 items from the run's real token "
                      "split (prompt-cache reads and writes, batched calls at their multipliers) beside the list "
                      "price of the same tokens. Timings depend "
                      "on the machine and its load.")
            shown = ["metric", "value", "calls", "prompt_tokens", "completion_tokens", "s_per_call", "parse_rate",
                     "s_per_1000", *(["cost_per_1000", "list_cost_per_1000"] if priced else [])]
            s.tables[f"Cost and time of the judges ({key})"] = format_results(judges[[c for c in shown if c in judges.columns]]
                                                                             .rename(columns={"value": stat}), data.digits)
            xlabel = "cost per 1,000 items (price per 1M tokens as given)" if priced else \
                "seconds per 1,000 items (calls one at a time)"
            png = F.agreement_vs_cost(part, x, xlabel, _axis_label(part, stat), scale=F.scale_for(stat)[:2])
            s.figures.append(Figure("agreement_vs_cost", f"{what} with {data.labels} against "
                                    f"{'cost' if priced else 'seconds'} per 1,000 items, per judge (bar = its "
                                    "bootstrap interval; dashed line = the best trivial baseline)", png))
            return s
    return None


def _annotator_sections(data: ReportData) -> list[Section]:
    """Per result with an Alt-Test or a human-ceiling agreement: can these judges replace an
    annotator? The judges' figures, the Alt-Test p-values, the annotators' own agreement."""
    out = []
    for i, r in enumerate(data.annotator_results):
        key = "annotators" + (f"_{i + 1}" if len(data.annotator_results) > 1 else "")
        s = Section(key, "Can these judges replace an annotator?" + (f" ({r.source})" if
                                                                     len(data.annotator_results) > 1 else ""))
        parts = [x.title for x in (r.alt_test, r.ceiling) if x is not None]
        s.text = ". ".join(parts) + "."
        t = r.trust[0]
        s.tables["Judges against the individual annotators"] = format_results(
            judges_vs_humans_display(t.rows, r.alt_test, r.ceiling, t.statistic), data.digits)
        if r.alt_test is not None and r.alt_test.results:
            s.tables["Alt-Test p-value per left-out annotator (* = rejected: the judge wins)"] = alt_test_p_display(
                r.alt_test.p_values())
            s.after = [f"Alt-Test settings: {r.alt_test.describe()}",
                       *(f"Alt-Test left out: {d}" for d in r.alt_test.dropped())]
        if r.ceiling is not None:
            s.tables["The annotators' agreement with each other"] = format_results(r.ceiling.pairs_table(), data.digits)
        s.after += list(dict.fromkeys([*(r.alt_test.notes if r.alt_test else ()),
                                       *(r.ceiling.notes if r.ceiling else ())]))
        out.append(s)
    return out


def _calibration_section(data: ReportData) -> Section | None:
    """The calibration of the judges that state a probability: ECE, Brier score, reliability diagram."""
    if not data.calibration:
        return None
    s = Section("calibration", "Calibration of the judges' stated probabilities")
    first = data.calibration[0]
    s.text = ("Does a stated 70% come true 70% of the time? Pairwise judges state P(A is better) (J.p_a, from the "
              "logprobs of their answer tokens), against the humans' majority (ties left out); graded judges the "
              f"probability of their grade (J.p), against the humans' grade. ECE over {first.binning}; Brier = mean "
              "squared difference of probability and outcome (0 best).")
    s.tables["Calibration"] = format_results(calibration_display(data.calibration), data.digits)
    s.figures.append(Figure("reliability", "Reliability diagram: mean stated probability per bin against how often "
                                           "it came true (dot size = items); dashed = perfect calibration",
                            F.reliability_diagram(data.calibration)))
    return s


def _selective_section(data: ReportData) -> Section | None:
    """``--selective``: each judge's (or cascade stage's) threshold, coverage and guarantee, and the
    risk-coverage curves with the chosen thresholds marked."""
    if not data.selective:
        return None
    s = Section("selective", "Where can each judge be trusted?")
    first = data.selective[0]
    st = first.settings
    s.text = (f"A confidence threshold per judge by fixed-sequence testing (risk {st.alpha:g}, delta {st.delta:g}, "
              "Clopper-Pearson bound of the disagreement): the verdicts at or above it are taken, the rest go to "
              "people (or the next judge of a cascade). Coverage and accuracy on the calibration items.")
    for k, rep in enumerate(data.selective):
        cols = ["judge", "stage", "n", "threshold", "coverage", "selective_accuracy", "ci_low", "ci_high",
                "risk_bound", "decided", "to_people", "guarantee"]
        t = rep.rows[cols].copy()
        t["threshold"] = ["abstain" if isinstance(v, float) and math.isinf(v) else v for v in t["threshold"]]
        s.tables[f"Selective judging {k + 1}" if len(data.selective) > 1 else "Selective judging"] = \
            format_results(t, data.digits)
        if rep.curves:
            s.figures.append(Figure(f"risk_coverage{'' if k == 0 else f'_{k + 1}'}",
                                    "Risk-coverage curve per judge: coverage against the disagreement of the verdicts "
                                    "taken (solid) and its upper bound (dashed); the dot is the chosen threshold",
                                    F.risk_coverage(rep.curves, rep.settings.alpha)))
    s.after += list(dict.fromkeys(n for rep in data.selective for n in rep.notes))
    return s


def _published_section(data: ReportData) -> Section | None:
    """The cross-set table: which judge for my task."""
    t = data.published
    if t is None or t.rows.empty:
        return None
    s = Section("published", "Which judge for my task: every shipped judge and metric on every set")
    s.text = t.title + ". Sets without shipped columns or without their files here are listed under the table."
    s.tables["Every shipped judge and metric on every set"] = published_display(t.rows)
    s.tables["The sets"] = format_results(t.sets, data.digits)
    s.after = list(t.notes)
    return s


#: the columns of a results table shown at first (when present; a label column only when it varies):
#: the rest (further statistics, counts, costs) are behind the table's "all columns" toggle
RESULT_MAIN = ("table", "level", "statistic", "group", "rank", "cluster", "metric", "value [low, high]", "value",
               "p_vs_best", "beats_baselines")
#: label columns that name a row only when they differ between rows
_LABELS = ("table", "level", "statistic", "group", "n systems", "n items", "n pairs", "n")


def main_columns(shown: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The columns of a displayed results table shown at first (:data:`RESULT_MAIN`; a label column
    with one value in every row is left out), and those one-value label columns with their value
    (said once above the table)."""
    same = {c: str(shown[c].iloc[0]) for c in _LABELS if c in shown.columns and len(shown)
            and shown[c].nunique(dropna=False) == 1}
    return [c for c in shown.columns if c in RESULT_MAIN and c not in same], same


def _by_task_section(data: ReportData) -> Section | None:
    if data.by_task is None or not len(data.by_task):
        return None
    m = by_task_matrix(data.by_task)
    s = Section("by_task", f"{data.by_task_label} per task ({data.labels})")
    s.tables[f"{data.by_task_label} per task"] = by_task_display(m, data.digits)
    notes = []
    if data.by_task_left_out:
        notes.append(f"Left out as smaller than {data.min_group_size}: " + ", ".join(
            f"{t} (n={n})" for t, n in data.by_task_left_out.items()) + ".")
    s.text = " ".join(notes)
    if m.shape[0] >= 1 and m.shape[1] >= 1:
        s.figures.append(Figure("by_task_heatmap", f"{data.by_task_label} per task (rows, with their size n) and "
                                                   f"metric (columns), against {data.labels}; fixed colour scale",
                                F.task_heatmap(m, data.by_task_label, n=data.by_task_n)))
    return s


def _distributions_section(data: ReportData) -> Section | None:
    metric_cols = _present(data.metric_cols, data.item_table)
    if data.item_table is None or not data.human_col or data.human_col not in data.item_table.columns \
            or not metric_cols:
        return None
    s = Section("distributions", f"Score distributions per {data.rater} grade")
    s.figures.append(Figure("distributions", f"Item scores of each metric grouped by the {data.rater} rating '{data.human_col}'",
                                 F.distributions(data.item_table, data.human_col, metric_cols, rater=data.rater)))
    return s


def _tie_section(data: ReportData) -> Section | None:
    if not data.epsilon_curves:
        return None
    s = Section("tie_calibration", "Tie calibration")
    flat = {k: why for k, v in data.epsilon_curves.items() if (why := F.degenerate_curve(v)) is not None}
    lines = ["Pairwise accuracy (with ties) when metric differences below epsilon count as ties."]
    lines += [f"{k}: no curve: {why}." for k, why in flat.items()]
    s.text = " ".join(lines)
    curves = {k: v for k, v in data.epsilon_curves.items() if k not in flat}
    if curves:
        s.figures.append(Figure("epsilon_curves", f"Accuracy with ties vs tie threshold epsilon, against {data.labels}",
                                F.epsilon_curves(curves)))
    return s


def _length_section(data: ReportData) -> Section | None:
    judge_cols = _present(data.judge_cols, data.item_table)
    if data.item_table is None or not judge_cols or "response" not in data.item_table.columns:
        return None
    s = Section("length_bias", "Judge score vs response length")
    s.figures.append(Figure("score_vs_length", "Judge scores against response length in words", F.score_vs_length(data.item_table, judge_cols)))
    return s


def _explorer_section(data: ReportData) -> Section | None:
    if data.explorer is None:
        return None
    s = Section("explorer", "Item explorer")
    s.html = data.explorer.html()
    return s


def _more_section(data: ReportData) -> Section | None:
    if not data.extra_tables:
        return None
    s = Section("more", "More results")
    for title, df in data.extra_tables.items():
        s.tables[title] = format_results(df, data.digits)
    return s


def _coverage_section(data: ReportData) -> Section | None:
    if data.coverage is None or not len(data.coverage):
        return None
    s = Section("coverage", "Missing values and truncated texts per metric")
    s.text = ("Cells without a value (not counted in any statistic) and texts a model truncated to its "
              "longest input, per metric or judge column.")
    s.tables["Coverage"] = format_results(data.coverage, data.digits)
    return s


def _notes_section(data: ReportData) -> Section | None:
    if not data.notes:
        return None
    return Section("notes", "Notes", items=[_relative(n) for n in data.notes])


def build_report(data: ReportData) -> Report:
    """Build the sections for what ``data`` holds (missing parts are skipped) and the HTML page."""
    who = data.labels
    candidates = [
        _published_section(data),
        _leaderboard_section(data),
        _result_section(data, "correlations", f"Correlation with {who}", data.correlations),
        _result_section(data, "pair_accuracy", f"Pairwise accuracy against the preferences of {who}",
                        data.pair_accuracy),
        *_pairwise_board_sections(data),
        probe_section(data.probes) if data.probes else None,
        _cost_section(data),
        *_annotator_sections(data),
        _calibration_section(data),
        _selective_section(data),
        _by_task_section(data),
        _distributions_section(data),
        _tie_section(data),
        _length_section(data),
        _explorer_section(data),
        _more_section(data),
        _coverage_section(data),
        _notes_section(data),
    ]
    sections = [s for s in candidates if s is not None]
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
    ``out_dir/assets/tables/tables.md`` (all tables). The files are written together
    (:func:`~evalign.io.write_files_atomic`): on an error, a full disk say, none of them is left behind.
    """
    if data is None:
        known = {f.name for f in fields(ReportData)}
        unknown = sorted(set(fields_) - known)
        if unknown:
            raise TypeError(f"unknown report field(s): {', '.join(unknown)}")
        data = ReportData(**{k: v for k, v in fields_.items() if v is not None})
    elif fields_:
        raise TypeError("give either data= or ReportData fields as keywords, not both")
    report = build_report(data)
    base = Path(assets)
    files: dict[str, bytes] = {}
    keys: dict[str, str] = {}

    def add(key: str, rel: Path, content: str | bytes) -> None:
        files[str(rel)] = content.encode("utf-8") if isinstance(content, str) else content
        keys[key] = str(rel)

    for name, png in report.figures.items():
        add(f"figure:{name}", base / "figures" / f"{name}.png", png)
    all_md = []
    titles = report.table_titles
    for name, df in report.tables.items():
        md = to_markdown(df)
        add(f"markdown:{name}", base / "tables" / f"{name}.md", md)
        add(f"latex:{name}", base / "tables" / f"{name}.tex", to_latex(df, caption=titles[name], label=f"tab:{name}"))
        all_md.append(f"## {titles[name]}\n\n{md}")
    if all_md:
        add("tables_md", base / "tables" / "tables.md", "\n".join(all_md))
    add("html", Path(html_name), report.html)  # last: the page never points at assets not yet there
    written = write_files_atomic(out_dir, files, name=Path(out_dir) / html_name)  # errors name the report
    return {key: written[rel] for key, rel in keys.items()}


def _blocks(table: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """(statistic, table or "", rows) per statistic and per table of the rows (one plot each: the
    statistics have their own scales, and each table its own baselines and ceiling)."""
    keys = [c for c in ("statistic", "table") if c in table.columns]
    if not keys:
        return [("value", "", table)]
    out = []
    for k, g in table.groupby(keys, sort=False):
        k = k if isinstance(k, tuple) else (k,)
        out.append((str(k[0]) if "statistic" in keys else "value", str(k[-1]) if "table" in keys else "", g))
    return out


_NAMES = {"kendall": "Kendall tau", "pearson": "Pearson r", "spearman": "Spearman rho",
          "pairwise_accuracy": "pairwise accuracy", "preference_accuracy": "preference accuracy"}


def _what(part: pd.DataFrame, stat: str) -> str:
    """A statistic's name as people write it, e.g. ``Kendall tau`` / ``preference accuracy (with ties)``."""
    head, _, rest = stat.partition(" ")
    return (_NAMES.get(head, head) + (f" {rest}" if rest else "")).strip()


def _axis_label(part: pd.DataFrame, stat: str) -> str:
    """The x axis: the statistic, its level and its n, e.g. ``Kendall tau (system level, n = 8 systems;
    item level, n = 252 items)``."""
    bits = []
    levels = part["level"].astype(str).unique() if "level" in part.columns else []
    for lv in levels:
        rows = part[part["level"].astype(str) == lv]
        if lv == "system" and "n systems" in rows.columns:
            bits.append(f"system level, n = {int(rows['n systems'].max())} systems")
        elif "n items" in rows.columns or "n" in rows.columns:
            col = "n items" if "n items" in rows.columns else "n"
            bits.append(f"{lv} level, n = {int(pd.to_numeric(rows[col], errors='coerce').max())} items")
    if not len(levels) and "n" in part.columns and part["n"].notna().any():
        bits.append(f"n = {int(pd.to_numeric(part['n'], errors='coerce').max())}")
    return _what(part, stat) + (f" ({'; '.join(bits)})" if bits else "")


def _relative(note: str) -> str:
    """A note with absolute paths shortened: the current folder's prefix removed, a path elsewhere
    reduced to its last two parts (notes carry no user's machine layout); a path inside a
    ``code`` span is an example of a command (``--option bertscore.model=/path/to/model``) and is
    kept as written."""
    cwd = os.getcwd().rstrip("/") + "/"

    def short(m: re.Match[str]) -> str:
        parts = [p for p in m.group(0).split("/") if p]
        return "/".join(parts[-2:]) if len(parts) > 2 else m.group(0)

    pieces = note.split("`")
    for i in range(0, len(pieces), 2):  # outside the code spans
        pieces[i] = re.sub(r"(?<![\w.:])/(?:[\w.@+-]+/)+[\w.@+-]*", short, pieces[i].replace(cwd, ""))
    return "`".join(pieces)
