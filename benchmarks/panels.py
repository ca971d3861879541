"""Panels of published judges on every set with three or more judges' verdicts: each rule's agreement with
people beside the best single member and the mean member (paired permutation tests on the per-item
credits), the calls per item with early stopping (members called in the order listed), and the coverage at
risk 0.15 (delta 0.1, ``evalign.meta.selective``) of the panel's vote confidence beside each member's own.

Sets: LLMBar's published judges per subset (shipped: Natural and the four Adversarial subsets; the three
processed sets from the data folder), and where the data folder has them JudgeBench's verdict files, the
Trust-or-Escalate judges, the Alt-Test sets' judges (MT-Bench pairs; SummEval coherence and 10k-prompts
grades). A set whose files are missing is named as skipped. Pairs: agreement = share of the pairs with a
human preference (not a tie) where the verdict is the people's (a tie or no verdict is wrong). Grades:
agreement = share of items where the panel's grade, rounded, is the people's mean rating, rounded.
``weighted`` is cross-fitted: the items are split in two seeded halves, each half's weights fitted on the
other half (a member's weight is never fitted on the items it decides).

Usage: ``EVALIGN_DATA_DIR=../shared/data python benchmarks/panels.py [--permutations 2000] [--markdown FILE]``
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

#: (dataset, member columns (regex over the judge columns), kind)
SETS = [
    ("llmbar:natural", r"judge:[^/]+/vanilla$", "pairs"),
    ("llmbar:neighbor", r"judge:[^/]+/vanilla$", "pairs"),
    ("llmbar:gptinst", r"judge:[^/]+/vanilla$", "pairs"),
    ("llmbar:gptout", r"judge:[^/]+/vanilla$", "pairs"),
    ("llmbar:manual", r"judge:[^/]+/vanilla$", "pairs"),
    ("llmbar:faireval", r"judge:[^/]+/vanilla_norules$", "pairs"),
    ("llmbar:llmeval2", r"judge:[^/]+/vanilla_norules$", "pairs"),
    ("llmbar:mt-bench", r"judge:[^/]+/vanilla_norules$", "pairs"),
    ("judgebench", r"judge:[^.]+$", "pairs"),
    ("trust-or-escalate", r"judge:[^/]+$", "pairs"),
    ("alttest-mtbench", r"judge:[^./]+$", "pairs"),
    ("summeval", r"judge:[^/]+/coherence$", "grades"),
    ("10k-prompts", r"judge:[^./]+$", "grades"),
]
SUFFIXES = re.compile(r"\.(confidence|confidence_source|p_a|status|reason|ab|ba|verdict|code|feedback|p|grade)$")
RISK, DELTA = 0.15, 0.1


def _load(name: str, kind: str, pattern: str) -> tuple[Any, list[str], np.ndarray] | str:
    inputs_mod = importlib.import_module("evalign.evaluate.inputs")
    agreement = importlib.import_module("evalign.meta.agreement")
    data = Path(os.environ.get("EVALIGN_DATA_DIR", "../shared/data"))
    try:
        inp = inputs_mod.load_inputs(inputs_mod.InputSettings(dataset=name, data_dir=data))
    except Exception as e:  # a set whose files are missing is skipped, and said
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    t = inp.pairs if kind == "pairs" else inp.items
    members = [c for c in t.columns if re.fullmatch(pattern, str(c)) and not SUFFIXES.search(str(c))]
    if len(members) < 3:
        return f"fewer than three judges ({len(members)})"
    if kind == "pairs":
        prefs = np.column_stack([np.asarray(t[c], dtype=float) for c in inp.human.pref_columns])
        labels = agreement.majority_vote(prefs, fallback=0.0)
    else:
        labels = np.asarray(t[inp.human.column], dtype=float)
    return t, members, labels


def _own_confidence(t: Any, m: str) -> np.ndarray | None:
    if f"{m}.confidence" in t.columns:
        return np.asarray(t[f"{m}.confidence"], dtype=float)
    if f"{m}.p_a" in t.columns:
        p = np.asarray(t[f"{m}.p_a"], dtype=float)
        return np.maximum(p, 1 - p)
    return None


def _coverage(conf: np.ndarray | None, correct: np.ndarray) -> float:
    if conf is None:
        return float("nan")
    sel = importlib.import_module("evalign.meta.selective")
    ok = np.isfinite(correct)
    c = np.where(np.isfinite(conf), conf, 0.0)[ok]
    cal = sel.calibrate(c, correct[ok].astype(bool), sel.SelectiveSettings(alpha=RISK, delta=DELTA))
    return float(cal.coverage)


def _credit(verdict: np.ndarray, labels: np.ndarray, kind: str) -> np.ndarray:
    """Per item: 1 agrees with people, 0 not, NaN no usable label."""
    if kind == "pairs":
        ok = np.isfinite(labels) & (labels != 0)
        return np.where(ok, (np.isfinite(verdict) & (verdict == labels)).astype(float), np.nan)
    ok = np.isfinite(labels)
    return np.where(ok, (np.isfinite(verdict) & (np.rint(verdict) == np.rint(labels))).astype(float), np.nan)


def _cross_fitted_weighted(votes: np.ndarray, labels: np.ndarray, members: list[str], kind: str) -> Any:
    panel = importlib.import_module("evalign.rank.panel")
    rng = np.random.default_rng(0)
    half = rng.permutation(len(labels)) < len(labels) // 2
    verdict, conf = np.full(len(labels), np.nan), np.full(len(labels), np.nan)
    y = np.where((labels != 0) | (kind != "pairs"), np.rint(labels) if kind == "grades" else labels, np.nan)
    for fit in (half, ~half):
        w = panel.calibration_weights(votes[fit], y[fit], members)
        res = panel.combine_votes(votes[~fit], panel.PanelSettings(rule="weighted", weights=w), members=members)
        verdict[~fit], conf[~fit] = res.verdict, res.confidence
    return verdict, conf


def _early(votes: np.ndarray, settings: Any) -> tuple[float, np.ndarray]:
    """Calls per item with early stopping (members in order) and the confidence from the votes cast."""
    panel = importlib.import_module("evalign.rank.panel")
    n, k = votes.shape
    seen = np.full((n, k), np.nan)
    called = np.zeros((n, k), dtype=bool)
    for j in range(k):
        rows = panel.still_open(seen[:, :j], np.ones(k - j), settings)
        called[rows, j] = True
        seen[rows, j] = votes[rows, j]
    res = panel.combine_votes(seen, settings)
    return float(called.sum(axis=1).mean()), res.confidence


def _p(a: np.ndarray, b: np.ndarray, permutations: int) -> float:
    sig = importlib.import_module("evalign.meta.significance")
    ok = np.isfinite(a) & np.isfinite(b)
    if (a[ok] == b[ok]).all():
        return 1.0
    res = sig.paired_permutation_test(lambda h, m: float(np.mean(m)), np.ones(int(ok.sum())), a[ok], b[ok],
                                      n_permutations=permutations, seed=0)
    return float(res.p_value)


def evaluate_set(name: str, t: Any, members: list[str], labels: np.ndarray, kind: str, permutations: int) -> list[dict]:
    """The rows of one set: each member, the mean member, each rule (with its early-stopping figures)."""
    panel = importlib.import_module("evalign.rank.panel")
    if kind == "pairs":
        votes = panel.verdict_votes(t, members)
    else:
        votes = np.column_stack([np.asarray(t[m], dtype=float) for m in members])
    credits = {m: _credit(votes[:, j], labels, kind) for j, m in enumerate(members)}
    acc = {m: float(np.nanmean(c)) for m, c in credits.items()}
    best = max(acc, key=acc.__getitem__)
    mean_credit = np.nanmean(np.column_stack(list(credits.values())), axis=1)
    mean_credit = np.where(np.isfinite(labels), mean_credit, np.nan)
    rows = [{"set": name, "row": f"member {m}", "agreement": acc[m], "coverage": _coverage(_own_confidence(t, m),
                                                                                         credits[m])}
            for m in members]
    rows.append({"set": name, "row": "mean member", "agreement": float(np.nanmean(mean_credit))})
    rules = ["majority", "majority/abstain", "weighted", "dawid-skene"] + (["mean", "median"] if kind == "grades" else [])
    for rule in rules:
        name_, _, tie = rule.partition("/")
        s = panel.PanelSettings(rule=name_, tie=tie or "tie", weights=dict.fromkeys(members, 1.0))
        if name_ == "weighted":
            verdict, conf = _cross_fitted_weighted(votes, labels, members, kind)
        else:
            res = panel.combine_votes(votes, s, members=members)
            verdict, conf = res.verdict, res.confidence
        c = _credit(verdict, labels, kind)
        row = {"set": name, "row": f"panel {rule}", "agreement": float(np.nanmean(c)),
               "vs_best": float(np.nanmean(c) - acc[best]), "p_best": _p(c, credits[best], permutations),
               "vs_mean": float(np.nanmean(c) - np.nanmean(mean_credit)), "p_mean": _p(c, mean_credit, permutations),
               "coverage": _coverage(conf, c), "calls": float(votes.shape[1])}
        if name_ == "majority":
            calls, early_conf = _early(votes, s)
            row.update(calls_early=calls, coverage_early=_coverage(early_conf, c))
        rows.append(row)
    return rows


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:+.{digits}f}" if isinstance(v, float) and digits < 0 else f"{v:.{digits}f}"


def _pv(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def markdown(rows: list[dict]) -> str:
    """The results as one markdown table."""
    head = ("| set | row | agreement | vs best member (p) | vs mean member (p) | coverage @0.15 | calls/item "
            "(early stop) | coverage @0.15 (early stop) |\n|---|---|---|---|---|---|---|---|\n")
    out = []
    for r in rows:
        vb = f"{r['vs_best']:+.3f} ({_pv(r['p_best'])})" if "vs_best" in r else ""
        vm = f"{r['vs_mean']:+.3f} ({_pv(r['p_mean'])})" if "vs_mean" in r else ""
        calls = f"{r['calls']:.0f} ({r['calls_early']:.2f})" if "calls_early" in r else (
            f"{r['calls']:.0f}" if "calls" in r else "")
        out.append(f"| {r['set']} | {r['row']} | {r['agreement']:.3f} | {vb} | {vm} | {_fmt(r.get('coverage'))} | "
                   f"{calls} | {_fmt(r.get('coverage_early'))} |")
    return head + "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--permutations", type=int, default=2000)
    ap.add_argument("--markdown", type=Path, default=None, help="also write the table to this file")
    args = ap.parse_args()
    rows: list[dict] = []
    skipped = {}
    for name, pattern, kind in SETS:
        got = _load(name, kind, pattern)
        if isinstance(got, str):
            skipped[name] = got
            continue
        t, members, labels = got
        print(f"{name}: {len(t)} {'pairs' if kind == 'pairs' else 'items'}, members {', '.join(members)}", flush=True)
        rows += evaluate_set(name, t, members, labels, kind, args.permutations)
    table = markdown(rows)
    print(table)
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    if args.markdown:
        args.markdown.write_text(table + "".join(f"\nskipped {k}: {v}" for k, v in skipped.items()) + "\n",
                                 encoding="utf-8")


if __name__ == "__main__":
    main()
