"""The ``--significance`` part of ``evalign score``: run the paired tests on a scored table and show
them compactly (one line per compared pair, never wider than the names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.markup import escape

from evalign.cli.common import CliError, console, progress

#: p-values at or below this are marked with ``*`` (sacrebleu marks p < 0.05)
ALPHA = 0.05


def _systems(scored: Any, baseline: str | None, all_pairs: bool) -> tuple[list[str], str]:
    """The systems compared (the baseline first unless ``all_pairs``) and the baseline, checked."""
    systems = sorted(map(str, scored["system"].unique()))
    if len(systems) < 2:
        raise CliError(f"--significance needs at least two systems, the table has {len(systems)}")
    if baseline is not None and baseline not in systems:
        raise CliError(f"--baseline-system '{baseline}' is not a system of the table (systems: {', '.join(systems)})")
    if baseline is not None and all_pairs:
        raise CliError("give either --baseline-system or --all-pairs, not both")
    base = baseline or systems[0]
    if not all_pairs:  # the baseline first, as in sacrebleu's tables
        systems = [base] + [s for s in systems if s != base]
    return systems, base


def run_significance(
    scored: Any,
    metrics: Sequence[Any],
    *,
    baseline: str | None,
    all_pairs: bool,
    n_bootstrap: int = 1000,
    n_ar: int = 10000,
    seed: int | None = 12345,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Paired bootstrap and approximate randomization of every system against ``baseline`` (default:
    the first system in sorted order), or between every pair, for each metric. JSON-ready."""
    from evalign.rank.system_significance import (  # imports scipy: keeps `evalign --help` fast
        SignificanceSettings,
        compare_systems,
        results_table,
        table_statistics,
    )

    systems, base = _systems(scored, baseline, all_pairs)
    settings = SignificanceSettings(n_bootstrap=n_bootstrap, n_ar=n_ar, seed=seed)
    out: dict[str, Any] = {
        "baseline": None if all_pairs else base,
        "all_pairs": all_pairs,
        "n_bootstrap": n_bootstrap,
        "n_ar_trials": n_ar,
        "seed": seed,
        "tests": "paired bootstrap resampling and approximate randomization (as sacrebleu); "
        "corpus BLEU/chrF recomputed from sufficient statistics, mean for other metrics",
        "metrics": {},
    }
    with progress(transient=True, disable=not show_progress) as bar:
        task = bar.add_task("significance", total=len(metrics))
        for m in metrics:
            try:
                ts = table_statistics(scored, m, systems)
            except ValueError as e:
                raise CliError(f"--significance: {e}") from None
            sub = bar.add_task(f"  {m.column}", total=None)

            def tick(done: int, total: int, sub: Any = sub) -> None:
                bar.update(sub, completed=done, total=total)

            res = compare_systems(ts.statistics, baseline=None if all_pairs else base, all_pairs=all_pairs,
                                  settings=settings, on_progress=tick)
            bar.update(sub, visible=False)
            bar.advance(task)
            out["metrics"][m.column] = {
                "score": ts.statistics.scale,
                "n_items": len(ts.ids),
                "n_dropped": ts.n_dropped,
                "comparisons": results_table(res),
            }
    return out


def _p(p: float) -> str:
    return f"{p:.4f}{'*' if p < ALPHA else ' '}"


def print_significance(sig: dict[str, Any]) -> None:
    """One block per metric: for each compared pair, the scores, the difference and both p-values."""
    what = "every pair of systems" if sig["all_pairs"] else f"baseline {sig['baseline']}"
    console.print(
        escape(f"Significance ({what}; paired bootstrap {sig['n_bootstrap']} resamples, approximate randomization "
               f"{sig['n_ar_trials']} trials, seed {sig['seed']}; * = p < {ALPHA})"),
        highlight=False,
    )
    for col, block in sig["metrics"].items():
        rows = block["comparisons"]
        kind = "corpus score" if block["score"] == "corpus" else "mean"
        dropped = f", {block['n_dropped']} left out" if block["n_dropped"] else ""
        console.print(escape(f"{col} ({kind}, {block['n_items']} items{dropped})"), style="bold", highlight=False)
        width = max(len(f"{r['system']} vs {r['baseline']}") for r in rows)
        for r in rows:
            pair = f"{r['system']} vs {r['baseline']}"
            nums = (f"{r['score']:.4g} vs {r['baseline_score']:.4g} ({r['difference']:+.3g})  "
                    f"p_bs {_p(r['bootstrap_p'])} p_ar {_p(r['ar_p'])}")
            if 2 + width + 2 + len(nums) <= console.width:  # one line per pair when it fits, else two
                console.print(escape(f"  {pair.ljust(width)}  {nums}"), highlight=False, soft_wrap=True)
            else:
                console.print(escape(f"  {pair}"), highlight=False, soft_wrap=True)
                console.print(escape(f"      {nums}"), highlight=False, soft_wrap=True)
