"""Coverage of a win-rate interval when the verdicts come from a judge that errs: the naive bootstrap
of the judge's verdicts (what a leaderboard shows), the humans-only normal interval and the
prediction-powered (PPI++) interval of :func:`evalign.rank.ppi.ppi_mean`, over many synthetic runs with
a judge of known error; the target is the nominal level (95%).

Each run: ``--battles`` battles of one system against a baseline; the truth is the system's expected
score ``p = P(win) + P(tie) / 2``; human verdicts ~ (win, tie, loss) with known probabilities; the
judge sees the human verdict and errs with known rates (scenario ``biased``: it turns a loss into a win
with probability ``--flip-up`` and a win into a loss with ``--flip-down``; ``noisy``: both at the same
rate); ``--humans`` battles drawn at random carry the human verdict. Also times ours against ppi-python
(``ppi_py.ppi_mean_ci``) on the same runs when it is installed.

    python benchmarks/ppi_coverage.py                      # 1,000 runs per scenario
    python benchmarks/ppi_coverage.py --runs 200 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from evalign.rank.ppi import ppi_mean, z_value

PROBS = np.array([0.55, 0.10, 0.35])  # win, tie, loss (the system vs the baseline)
SCORE = np.array([1.0, 0.5, 0.0])


def judge_of(y: np.ndarray, up: float, down: float, rng: np.random.Generator) -> np.ndarray:
    """The judge's scores: a loss becomes a win with probability ``up``, a win a loss with ``down``."""
    out = y.copy()
    u = rng.random(y.size)
    out[(y == 0.0) & (u < up)] = 1.0
    out[(y == 1.0) & (u < down)] = 0.0
    return out


def one_run(rng: np.random.Generator, battles: int, humans: int, up: float, down: float, n_boot: int,
            alpha: float) -> dict[str, tuple[float, float]]:
    y = SCORE[rng.choice(3, size=battles, p=PROBS)]
    yhat = judge_of(y, up, down, rng)
    lab = np.zeros(battles, dtype=bool)
    lab[rng.choice(battles, size=humans, replace=False)] = True
    # the naive bootstrap: resample the judge's verdicts (multinomial counts of the three scores)
    freq = np.array([(yhat == s).mean() for s in SCORE])
    boot = rng.multinomial(battles, freq, size=n_boot) @ SCORE / battles
    naive = (float(np.quantile(boot, alpha / 2)), float(np.quantile(boot, 1 - alpha / 2)))
    z = z_value(alpha)
    h = y[lab]
    se = float(np.std(h) / np.sqrt(h.size))
    humans_only = (float(h.mean()) - z * se, float(h.mean()) + z * se)
    r = ppi_mean(y[lab], yhat[lab], yhat[~lab], alpha=alpha)
    return {"naive bootstrap (judge)": naive, "humans only": humans_only, "PPI++": (r.low, r.high),
            "_data": (y[lab], yhat[lab], yhat[~lab])}  # type: ignore[dict-item]


def scenario(name: str, up: float, down: float, args: argparse.Namespace) -> dict[str, object]:
    rng = np.random.default_rng(args.seed)
    truth = float(PROBS @ SCORE)
    judge_mean = truth + up * PROBS[2] - down * PROBS[0]
    hits: dict[str, list[bool]] = {}
    widths: dict[str, list[float]] = {}
    data = []
    for _ in range(args.runs):
        res = one_run(rng, args.battles, args.humans, up, down, args.bootstrap, args.alpha)
        data.append(res.pop("_data"))
        for k, (lo, hi) in res.items():
            hits.setdefault(k, []).append(lo <= truth <= hi)
            widths.setdefault(k, []).append(hi - lo)
    out: dict[str, object] = {"scenario": name, "flip_up": up, "flip_down": down, "truth": truth,
                              "judge_mean": judge_mean, "runs": args.runs,
                              "coverage": {k: float(np.mean(v)) for k, v in hits.items()},
                              "mean_width": {k: float(np.mean(v)) for k, v in widths.items()}}
    t0 = time.perf_counter()
    for y, yh, yu in data:
        ppi_mean(y, yh, yu, alpha=args.alpha)
    ours = time.perf_counter() - t0
    try:
        from ppi_py import ppi_mean_ci
    except ImportError:
        out["timing"] = {"evalign_s": ours, "ppi_python_s": None}
        return out
    t0 = time.perf_counter()
    for y, yh, yu in data:
        ppi_mean_ci(y, yh, yu, alpha=args.alpha)
    peer = time.perf_counter() - t0
    out["timing"] = {"evalign_s": ours, "ppi_python_s": peer, "ratio_peer_over_ours": peer / ours}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--battles", type=int, default=1000)
    ap.add_argument("--humans", type=int, default=100)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--flip-up", type=float, default=0.30)
    ap.add_argument("--flip-down", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    results = [scenario("biased", args.flip_up, args.flip_down, args),
               scenario("noisy", args.flip_up, args.flip_up, args)]
    print(f"{args.runs} runs per scenario; {args.battles} battles, {args.humans} with a human verdict; "
          f"target coverage {1 - args.alpha:.0%}")
    for r in results:
        print(f"\nscenario {r['scenario']}: judge flips loss->win {r['flip_up']:.2f}, win->loss {r['flip_down']:.2f}; "
              f"true win rate {r['truth']:.3f}, the judge's expected win rate {r['judge_mean']:.3f}")
        print(f"  {'interval':<26}{'coverage':>10}{'mean width':>12}")
        for k, c in r["coverage"].items():  # type: ignore[attr-defined]
            print(f"  {k:<26}{100 * c:>9.1f}%{r['mean_width'][k]:>12.3f}")  # type: ignore[index]
        t = r["timing"]
        if t.get("ppi_python_s") is not None:  # type: ignore[attr-defined]
            print(f"  PPI++ time over the runs: evalign {t['evalign_s']:.3f} s, ppi-python {t['ppi_python_s']:.3f} s "  # type: ignore[index]
                  f"(ppi-python / evalign = {t['ratio_peer_over_ours']:.2f})")  # type: ignore[index]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
