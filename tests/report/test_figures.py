"""The report's figures: no two pieces of text overlap, the layout engine never warns, and each plot
names what it shows (statistic, level, n, interval) on fixed scales."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalign.report import ReportData
from evalign.report import figures as F
from evalign.report.build import build_report


def _texts(fig: Any) -> list[tuple[str, Any]]:
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or (t.axes is not None and not t.axes.get_visible()):
            continue
        out.append((t.get_text(), t.get_window_extent(renderer)))
    return out


def _check(fig: Any) -> list[str]:
    """Draw ``fig`` with every warning an error; return the texts; fail on any two overlapping."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.canvas.draw()
    texts = _texts(fig)
    for (a, ba), (b, bb) in itertools.combinations(texts, 2):
        overlap = min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 0.5 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 0.5
        assert not overlap, f"text {a!r} overlaps {b!r}"
    return [t for t, _ in texts]


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    figs: list[Any] = []
    real = F._png

    def keep(fig: Any) -> bytes:
        figs.append(fig)
        return real(fig)

    monkeypatch.setattr(F, "_png", keep)
    return figs


def test_fixture_report_figures_do_not_overlap(report_data: ReportData, captured: list[Any]) -> None:
    build_report(report_data)
    assert len(captured) >= 6
    for fig in captured:
        _check(fig)


@pytest.fixture(scope="module")
def demo_report_data() -> ReportData:
    from evalign.demo import run_demo

    # 200: with 30 permutations no metric can be shown to beat the baselines (p >= 1/31), so ranks and
    # clusters would be withheld
    return run_demo(n_resamples=200).report


def test_demo_figures_name_what_they_show(demo_report_data: ReportData, captured: list[Any]) -> None:
    report = build_report(demo_report_data)
    names = [f.name for s in report.sections for f in s.figures]
    pandalm, llmbar = "pair_accuracy_intervals_pairs__pandalm__preference_accuracy__wit", \
        "pair_accuracy_intervals_pairs__llmbar__preference_accuracy__with"
    assert names == ["leaderboard_ranks", "correlations_intervals", pandalm, llmbar, "by_task_heatmap",
                     "epsilon_curves"]  # one preference-accuracy panel per table (issue 32)
    texts = {name: _check(fig) for name, fig in zip(names, captured, strict=True)}
    corr = " ".join(texts["correlations_intervals"])
    assert "Kendall tau (system level, n = 8 systems)" in corr and "95% bootstrap interval" in corr
    assert "with humans" in corr and "best trivial baseline" in corr and "cluster 1" in corr
    acc = " ".join(texts[pandalm])
    assert "human ceiling" in acc and "pairs (PandaLM): preference accuracy (with ties) with humans" in acc
    acc = " ".join(texts[llmbar])  # its own lines: LLMBar's gold has no annotators to agree, so no ceiling
    assert "human ceiling" not in acc and "best trivial baseline" in acc and "pairs (LLMBar)" in acc
    assert texts[pandalm].count("random") == 1 and texts[llmbar].count("random") == 1
    heat = texts["by_task_heatmap"]
    assert "Yelp (n=33)" in heat and "yelp (n=10)" not in " ".join(heat)  # merged: 23 + 10 pairs
    assert "Wolfram alpha (n=56)" in heat and not any(t.startswith("Facebook") for t in heat)  # 1 pair: left out
    eps = " ".join(texts["epsilon_curves"])
    assert "exact_match" not in eps  # one threshold only: a line of text instead of a panel
    tie = next(s for s in report.sections if s.key == "tie_calibration")
    assert "exact_match: no curve: one tie threshold only" in tie.text
    heat_section = next(s for s in report.sections if s.key == "by_task")
    assert "Facebook (n=1)" in heat_section.text and "Left out as smaller than 30" in heat_section.text
    # fixed scales: accuracy axis 0-1, correlation axis -1..1, heatmap colours 0-1
    acc_ax = captured[2].axes[0]
    assert acc_ax.get_xlim()[0] < 0 < 1 < acc_ax.get_xlim()[1] < 1.05
    corr_ax = captured[1].axes[0]
    assert corr_ax.get_xlim()[0] < -1 and corr_ax.get_xlim()[1] > 1
    im = captured[4].axes[0].images[0]  # the task heatmap, after the two accuracy panels
    assert im.get_clim() == (0.0, 1.0) and im.get_cmap().name == "cividis"


def test_degenerate_curve() -> None:
    assert F.degenerate_curve(([0.0], [0.4])) is not None
    assert F.degenerate_curve(([0.0, 1.0], [0.4, 0.4])) is not None
    assert F.degenerate_curve(([0.0, 1.0], [0.4, 0.5])) is None


def test_scale_for() -> None:
    assert F.scale_for("kendall")[:2] == (-1.0, 1.0) and F.scale_for("preference_accuracy (with ties)")[:2] == (0, 1)


def test_report_notes_are_a_list_of_relative_paths(report_data: ReportData, tmp_path: Path) -> None:
    import dataclasses
    import os

    data = dataclasses.replace(report_data, notes=[f"model at {os.getcwd()}/models/x", "venv /home/u/venv/lib/site.py"])
    html = build_report(data).html
    notes = html.split('id="notes"', 1)[1]
    assert "<li>model at models/x</li>" in notes and "<li>venv lib/site.py</li>" in notes
    assert "/home/u" not in notes


def test_coverage_section(report_data: ReportData) -> None:
    import dataclasses

    cov = pd.DataFrame({"metric": ["semscore"], "cells": [1976], "missing": [3], "truncated texts": ["320 of 1976"]})
    html = build_report(dataclasses.replace(report_data, coverage=cov)).html
    assert "320 of 1976" in html and "Missing values and truncated texts" in html

