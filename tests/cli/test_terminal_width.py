"""Terminal tables never split a cell: the demo's tables at 80 columns, and random tables at
several widths (folded into parts that repeat the key column)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from evalign.cli.common import fmt_value, render_table


def _render(tables: list[tuple[str, pd.DataFrame]], width: int, digits: int) -> list[str]:
    c = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for title, df in tables:
        for t in render_table(df, title, digits, width=width):
            c.print(t)
    return c.export_text().splitlines()


def _cells(lines: list[str]) -> set[str]:
    """Every cell of the rendered tables' body rows, as printed on one line."""
    out: set[str] = set()
    for line in lines:
        if line.startswith("│"):
            out.update(part.strip() for part in line.strip("│").split("│"))
    return out


def _assert_unsplit(tables: list[tuple[str, pd.DataFrame]], width: int, digits: int) -> list[str]:
    lines = _render(tables, width, digits)
    assert max(len(line) for line in lines) <= width
    cells = _cells(lines)
    for _title, df in tables:
        for c in df.columns:
            for v in df[c]:
                assert fmt_value(v, digits) in cells, (c, v)
        for c in df.columns:  # header words are never broken either
            text = " ".join(lines)
            assert all(w in text for w in str(c).split()), c
    return lines


@pytest.fixture(scope="module")
def demo_result():
    from evalign.demo import run_demo

    return run_demo(n_resamples=50)


def test_demo_tables_at_80_columns(demo_result) -> None:
    from evalign.cli.demo import demo_legend, demo_tables

    tables = demo_tables(demo_result)
    lines = _assert_unsplit(tables, 80, 3)
    text = "\n".join(lines)
    # folded, not squeezed: every part repeats the row names
    assert text.count("davinci-self-instruct-and-superni-ft") == 2
    assert text.count("judge:gpt-3.5-turbo") >= 2 and "PandaLM (continued)" in text
    assert "[0.000, 0.000]" in _cells(lines)
    assert "LLMBar Natural + Adversarial (continued)" in text and text.count("judge:gpt-4/vanilla") >= 2
    legend = demo_legend(demo_result)
    assert "semscore = semscore[model=all-MiniLM-L6-v2]" in legend
    assert any(line.startswith("human rank = rank among 12 models") for line in legend)
    # a wide terminal keeps each table whole, headers on one line
    wide = _assert_unsplit(tables, 200, 3)
    assert "(continued)" not in "\n".join(wide) and any("beats baselines" in line for line in wide)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_random_tables_fold_without_splitting(width: int) -> None:
    rng = np.random.default_rng(width)
    for _ in range(5):
        n_cols = int(rng.integers(2, 14))
        df = pd.DataFrame({"metric": [f"m{'x' * int(rng.integers(0, 20))}{i}" for i in range(6)]})
        for k in range(n_cols):
            name = "_".join(f"h{k}" + "y" * int(rng.integers(0, 6)) for _ in range(int(rng.integers(1, 3))))
            name += " " + "z" * int(rng.integers(1, 8))
            df[name] = rng.normal(0, 10 ** rng.integers(0, 5), 6)
        _assert_unsplit([("a random table: numbers", df)], width, 3)


def test_missing_values_print_as_a_dash() -> None:
    df = pd.DataFrame({"metric": ["a", "b"], "n": pd.array([3, None], dtype="Int64"), "v": [0.5, float("nan")]})
    cells = _cells(_render([("t", df)], 80, 3))
    assert {"3", "-", "0.500"} <= cells and "<NA>" not in cells and "nan" not in cells
