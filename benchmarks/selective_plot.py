"""The risk-coverage curves of Trust or Escalate's three released judges (read from the data
folder): per judge, for every candidate threshold, the share of pairs at or above it (coverage)
against the disagreement with people among them and its Clopper-Pearson upper bound at level
1 - delta; the threshold chosen at ``--risk`` marked. Writes ``docs/img/selective_risk_coverage.png``.

    python benchmarks/selective_plot.py [--risk 0.15] [--delta 0.1] [--out PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from evalign.datasets.trust_or_escalate import JUDGES, load_trust_or_escalate
from evalign.meta.selective import SelectiveSettings, calibrate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--risk", type=float, default=0.15)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--out", type=Path, default=Path("docs/img/selective_risk_coverage.png"))
    a = ap.parse_args()
    pairs = load_trust_or_escalate().pairs
    assert pairs is not None
    human = pairs["pref_1"].to_numpy()
    s = SelectiveSettings(alpha=a.risk, delta=a.delta)
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    for judge, colour in zip(JUDGES, ("tab:orange", "tab:blue", "tab:green"), strict=True):
        c = pairs[f"judge:{judge}.confidence"].to_numpy(dtype=float)
        y = pairs[f"judge:{judge}"].map({"A": 1.0, "B": -1.0}).to_numpy() == human
        cal = calibrate(c, y, s)
        risk = np.array([np.mean(~y[c >= t]) for t in cal.candidates])
        ax.plot(cal.coverages, risk, color=colour, lw=1.2, label=f"{judge}: disagreement")
        ax.plot(cal.coverages, cal.bounds, color=colour, lw=1.2, ls="--", label=f"{judge}: upper bound")
        if not cal.abstains:
            ax.plot([cal.coverage], [cal.risk_bound], "o", color=colour, ms=7)
            ax.annotate(f"threshold {cal.threshold:.3f}\ncoverage {cal.coverage:.2f}", (cal.coverage, cal.risk_bound),
                        textcoords="offset points", xytext=(6, -26), fontsize=8, color=colour)
    ax.axhline(a.risk, color="black", lw=0.8, ls=":")
    ax.text(0.01, a.risk + 0.005, f"risk {a.risk:g}", fontsize=8)
    ax.set_xlabel("coverage (share of the 500 pairs at or above the threshold)")
    ax.set_ylabel("disagreement with people among them")
    ax.set_title(f"Risk-coverage on Trust or Escalate's 500 pairs (bound at level {1 - a.delta:g}; "
                 "dots: chosen thresholds)", fontsize=9)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 0.45)
    ax.legend(fontsize=7, ncol=1, loc="upper left")
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
