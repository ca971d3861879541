"""Does the selective guarantee hold? On Trust or Escalate's released calibration files (500
human-labelled pairs, three judges' verdicts and confidences; read from the data folder), for each
judge and risk level: ``--draws`` times, calibrate on ``--calibrate`` pairs drawn at random, then
measure the agreement with people of the verdicts given, on all 500 pairs (as issue 36 asks) and on
the pairs not drawn. A draw keeps the promise when that agreement is >= 1 - risk (a judge that gives
no verdict keeps it trivially). The share of draws keeping it should be >= 1 - delta (0.9) up to
Monte-Carlo error (+- 0.019 at 1,000 draws). Beside it, the naive rule: the lowest candidate
threshold whose *calibration* accuracy is >= 1 - risk (no bound), which does not hold it.

    python benchmarks/selective_guarantee.py                       # 1,000 draws, risks 0.1, 0.15, 0.2
    python benchmarks/selective_guarantee.py --draws 200 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from evalign.datasets.trust_or_escalate import JUDGES, load_trust_or_escalate
from evalign.meta.selective import SelectiveSettings, calibrate


def naive_threshold(c: np.ndarray, y: np.ndarray, s: SelectiveSettings) -> float:
    """The lowest grid candidate (>= ``min_items`` items at or above) whose calibration accuracy is
    >= 1 - alpha; inf when none is."""
    order = np.argsort(c, kind="stable")
    cs = c[order]
    right = np.concatenate([np.cumsum(y[order][::-1])[::-1], [0]])
    grid = np.linspace(0, 1, s.grid)
    first = np.searchsorted(cs, grid, side="left")
    m = len(c) - first
    ok = (m >= s.min_items) & (right[first] >= (1 - s.alpha) * np.maximum(m, 1))
    return float(grid[ok][0]) if ok.any() else float("inf")


def accuracy_at(c: np.ndarray, y: np.ndarray, t: float) -> tuple[float, float]:
    """(coverage, accuracy of the verdicts given; NaN when none) of threshold ``t``."""
    sel = c >= t
    return float(sel.mean()), float(y[sel].mean()) if sel.any() else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--calibrate", type=int, default=250)
    ap.add_argument("--risks", default="0.1,0.15,0.2")
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    pairs = load_trust_or_escalate(data_dir=a.data_dir).pairs
    assert pairs is not None
    human = pairs["pref_1"].to_numpy()
    rows = []
    t0 = time.perf_counter()
    print(f"{a.draws} draws of {a.calibrate} of {len(pairs)} pairs; delta {a.delta} (promise kept in >= "
          f"{1 - a.delta:.0%} of draws expected)")
    print(f"{'judge':22} {'risk':>5} | {'kept (all)':>10} {'kept (rest)':>11} {'coverage':>8} {'abstain':>7} | "
          f"{'naive kept (all)':>16} {'naive (rest)':>12} {'coverage':>8}")
    for judge in JUDGES:
        c = pairs[f"judge:{judge}.confidence"].to_numpy(dtype=float)
        y = (pairs[f"judge:{judge}"].map({"A": 1.0, "B": -1.0}).to_numpy() == human)
        for risk in (float(r) for r in a.risks.split(",")):
            s = SelectiveSettings(alpha=risk, delta=a.delta)
            rng = np.random.default_rng(a.seed)
            kept = {"ours_all": 0, "ours_rest": 0, "naive_all": 0, "naive_rest": 0}
            cov = {"ours": [], "naive": []}
            abstain = 0
            for _ in range(a.draws):
                idx = rng.permutation(len(c))
                cal, rest = idx[: a.calibrate], idx[a.calibrate:]
                for rule, t in (("ours", calibrate(c[cal], y[cal], s).threshold),
                                ("naive", naive_threshold(c[cal], y[cal], s))):
                    if rule == "ours" and np.isinf(t):
                        abstain += 1
                    cv, acc = accuracy_at(c, y, t)
                    _, acc_rest = accuracy_at(c[rest], y[rest], t)
                    cov[rule].append(cv)
                    kept[f"{rule}_all"] += not acc < 1 - risk  # no verdict given: kept
                    kept[f"{rule}_rest"] += not acc_rest < 1 - risk
            row = {"judge": judge, "risk": risk, "delta": a.delta, "draws": a.draws, "calibrate": a.calibrate,
                   **{k: v / a.draws for k, v in kept.items()}, "coverage_ours": float(np.mean(cov["ours"])),
                   "coverage_naive": float(np.mean(cov["naive"])), "abstain_share": abstain / a.draws}
            rows.append(row)
            print(f"{judge:22} {risk:5.2f} | {row['ours_all']:10.3f} {row['ours_rest']:11.3f} "
                  f"{row['coverage_ours']:8.3f} {row['abstain_share']:7.3f} | {row['naive_all']:16.3f} "
                  f"{row['naive_rest']:12.3f} {row['coverage_naive']:8.3f}")
    print(f"({time.perf_counter() - t0:.1f} s)")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
