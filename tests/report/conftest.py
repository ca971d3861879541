"""A small scored item table and results tables with known numbers, and a report written from them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalign.report import ReportData, write_report


@pytest.fixture(scope="session")
def report_data() -> ReportData:
    rng = np.random.default_rng(7)
    rows = []
    for s in range(4):
        for i in range(30):
            grade = int(rng.integers(1, 6))
            words = int(rng.integers(3, 120))
            rows.append(
                {
                    "id": str(i),
                    "system": f"sys{s}",
                    "response": " ".join(["word"] * words),
                    "human": float(grade),
                    "rouge_l": 0.1 * grade + 0.2 * rng.random(),
                    "bleu": 30 * rng.random(),
                    "judge": float(min(5, grade + (words > 60))),
                }
            )
    items = pd.DataFrame(rows)
    leaderboard = pd.DataFrame(
        {
            "system": ["sys0", "sys1", "sys2", "sys3"],
            "human_rank": [2.0, 1.0, 4.0, 3.0],
            "rouge_l": [0.41, 0.44, 0.30, 0.35],
            "bleu": [12.5, 10.25, 20.0, 9.0],
            "judge": [3.1, 3.4, 2.2, 2.9],
        }
    )
    correlations = pd.DataFrame(
        {
            "metric": ["rouge_l", "bleu", "judge"],
            "level": ["item", "item", "item"],
            "statistic": ["kendall_tau_b"] * 3,
            "value": [0.4567, -0.0312, 0.8123],
            "low": [0.4012, -0.1203, 0.7644],
            "high": [0.5123, 0.0581, 0.8577],
            "n": [120, 120, 120],
        }
    )
    pair_accuracy = pd.DataFrame(
        {"metric": ["rouge_l", "bleu"], "value": [0.6125, 0.5031], "low": [0.55, 0.44], "high": [0.67, 0.56], "epsilon": [0.02, 1.5]}
    )
    by_task = pd.DataFrame(
        {"task": ["brainstorm", "brainstorm", "rewrite", "rewrite"], "metric": ["rouge_l", "bleu"] * 2, "value": [0.25, 0.05, 0.625, np.nan]}
    )
    eps = np.linspace(0, 0.3, 31)
    curves = {"rouge_l": (eps, 0.5 + 0.3 * eps - eps**2, 0.15), "bleu": (eps * 10, 0.45 + 0.01 * eps)}
    return ReportData(
        title="Test report <&>",
        subtitle="synthetic data",
        leaderboard=leaderboard,
        human_system_col="human_rank",
        human_system_higher_is_better=False,
        correlations=correlations,
        pair_accuracy=pair_accuracy,
        by_task=by_task,
        by_task_label="Kendall tau",
        item_table=items,
        metric_cols=["rouge_l", "bleu", "judge"],
        human_col="human",
        epsilon_curves=curves,
        judge_cols=["judge"],
        notes=["rouge_l|tok:default|evalign:0.1.0"],
    )


@pytest.fixture(scope="session")
def written(report_data: ReportData, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("report")
    return write_report(out, report_data, assets="report_files")


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``shared/data`` beside the checkout (the non-bundled datasets); missing = failure."""
    root = Path(__file__).resolve().parents[2].parent / "shared" / "data"
    if not (root / "tulu1_human_eval").is_dir():
        pytest.fail(f"the public datasets are missing: expected them in {root}")
    return root
