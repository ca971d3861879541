"""The report's files and tables: the right numbers in HTML, Markdown and LaTeX."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from evalign.report import ReportData, build_report, write_report
from evalign.report.tables import to_markdown


def test_written_files(written: dict[str, Path]) -> None:
    figs = {k.split(":", 1)[1] for k in written if k.startswith("figure:")}
    assert figs == {
        "leaderboard_ranks", "correlations_intervals", "pair_accuracy_intervals", "by_task_heatmap",
        "distributions", "epsilon_curves", "score_vs_length",
    }
    for k, p in written.items():
        assert p.is_file() and p.stat().st_size > 0, k
        if k.startswith("figure:"):
            img = Image.open(p)
            assert img.format == "PNG" and img.width > 200 and img.height > 100
            assert np.asarray(img.convert("L")).std() > 5  # drawn, not blank
    assert written["html"].name == "report.html"
    assert written["figure:distributions"].parent == written["html"].parent / "report_files" / "figures"


def test_markdown_tables_have_the_numbers(written: dict[str, Path]) -> None:
    corr = written["markdown:correlations"].read_text()
    assert corr.splitlines()[0] == "| metric | level | statistic | value [low, high] | n |"
    assert "| rouge_l | item | kendall_tau_b | 0.457 [0.401, 0.512] | 120 |" in corr
    assert "| bleu | item | kendall_tau_b | -0.031 [-0.120, 0.058] | 120 |" in corr
    pa = written["markdown:pair_accuracy"].read_text()
    assert "| rouge_l | 0.613 [0.550, 0.670] | 0.020 |" in pa
    lb = written["markdown:leaderboard"].read_text().splitlines()
    assert lb[0] == "| system | human rank | rouge_l | bleu | judge |"  # ranks: one human column
    # systems in human order (rank 1 first), each metric's value and its rank (bleu: sys2 best)
    assert lb[2] == "| sys1 | 1 | 0.440 (1) | 10.250 (3) | 3.400 (1) |"
    assert lb[5] == "| sys2 | 4 | 0.300 (4) | 20.000 (1) | 2.200 (4) |"
    bt = written["markdown:by_task"].read_text()
    assert bt.splitlines()[:4] == ["| task | rouge_l | bleu |", "|---|---|---|", "| brainstorm | 0.250 | 0.050 |", "| rewrite | 0.625 | - |"]
    assert "tables_md" in written and "0.457 [0.401, 0.512]" in written["tables_md"].read_text()


def test_latex_tables_have_the_numbers(written: dict[str, Path]) -> None:
    tex = written["latex:correlations"].read_text()
    assert "\\begin{tabular}" in tex and "\\toprule" in tex and "\\label{tab:correlations}" in tex
    assert "rouge\\_l & item & kendall\\_tau\\_b & 0.457 [0.401, 0.512] & 120 \\\\" in tex
    lb = written["latex:leaderboard"].read_text()
    assert "sys2 & 4 & 0.300 (4) & 20.000 (1) & 2.200 (4) \\\\" in lb


def test_html_is_self_contained(written: dict[str, Path]) -> None:
    page = written["html"].read_text()
    assert "<title>Test report &lt;&amp;&gt;</title>" in page
    assert "<script" not in page.lower()
    # every src/href is inline data or an in-page anchor
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(r.startswith(("data:image/png;base64,", "#")) for r in refs)
    assert "http://" not in page and "https://" not in page and "@import" not in page and "url(" not in page
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(imgs) == 7
    for b64 in imgs:
        Image.open(io.BytesIO(base64.b64decode(b64))).verify()
    assert "0.457 [0.401, 0.512]" in page and "rouge_l|tok:default|evalign:0.1.0" in page


def test_sections_are_skipped_without_inputs(tmp_path: Path) -> None:
    corr = pd.DataFrame({"metric": ["bleu"], "value": [0.25]})
    w = write_report(tmp_path, correlations=corr, metric_cols=["bleu"])
    assert sorted(k for k in w if k.startswith("figure:")) == ["figure:correlations_intervals"]
    assert "| bleu | 0.250 |" in w["markdown:correlations"].read_text()
    rep = build_report(ReportData(title="empty"))
    assert rep.figures == {} and "<h1>empty</h1>" in rep.html


def test_wide_by_task_and_many_human_values(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    items = pd.DataFrame({"id": [str(i) for i in range(60)], "system": "a", "human": rng.random(60), "m": rng.random(60)})
    wide = pd.DataFrame({"m": [0.1, 0.2]}, index=pd.Index(["t1", "t2"], name="task"))
    rep = build_report(ReportData(item_table=items, human_col="human", metric_cols=["m"], by_task=wide))
    assert set(rep.figures) == {"by_task_heatmap", "distributions"}
    assert to_markdown(rep.tables["by_task"]).splitlines()[2] == "| t1 | 0.100 |"


def test_unknown_field_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unknown report field"):
        write_report(tmp_path, leaderbord=pd.DataFrame())
