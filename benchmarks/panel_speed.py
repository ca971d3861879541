"""Combining a panel's votes (``evalign.rank.panel.combine_votes``): N items x K members by every rule,
timed, against the peer where it is installed (crowd-kit's ``MajorityVote`` and ``DawidSkene``, pandas
over long-format votes) on the same seeded votes; the peer's verdicts are checked to agree with ours.
Target (issue 45): 10^6 x 5 by any rule < 2 s, dawid-skene < 10 s to convergence, on 2 cores.
Usage: ``python benchmarks/panel_speed.py [--n 1000000] [--k 5] [--peer-n 100000]``
"""

from __future__ import annotations

import argparse
import importlib
import time

import numpy as np

#: EM steps of both in the comparison (fixed: the two stopping rules' lower bounds differ, see the tests)
STEPS = 10


def votes(n: int, k: int, seed: int = 0) -> np.ndarray:
    """Pairwise votes (+1 / -1 / 0) of K members of accuracies 0.6..0.85 on N items, 5% missing."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([1.0, -1.0], n)
    acc = np.linspace(0.6, 0.85, k)
    right = rng.random((n, k)) < acc
    wrong = rng.choice([-1.0, 0.0], (n, k), p=[0.8, 0.2]) * truth[:, None]
    out = np.where(right, truth[:, None], wrong)
    out[rng.random((n, k)) < 0.05] = np.nan
    return out


def _peer(v: np.ndarray) -> dict[str, tuple[float, np.ndarray, np.ndarray]] | None:
    try:
        import pandas as pd
        from crowdkit.aggregation import DawidSkene, MajorityVote
    except ImportError:
        return None
    i, j = np.nonzero(~np.isnan(v))
    long = pd.DataFrame({"task": i, "worker": j, "label": v[i, j]})
    out = {}
    for name, model in (("majority", MajorityVote()), ("dawid-skene", DawidSkene(n_iter=STEPS, tol=-1e9))):
        t = time.perf_counter()
        probas = model.fit_predict_proba(long)
        probas = probas.sort_index()
        out[name] = (time.perf_counter() - t, probas.index.to_numpy(), probas.to_numpy().max(axis=1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--peer-n", type=int, default=100_000, help="items for the peer comparison (pandas is slower)")
    args = ap.parse_args()
    panel = importlib.import_module("evalign.rank.panel")
    v = votes(args.n, args.k)
    p_a = np.clip(np.where(np.isnan(v), np.nan, 0.5 + 0.3 * np.nan_to_num(v)), 0, 1)
    names = [f"m{j}" for j in range(args.k)]
    weights = {m: 0.4 + 0.2 * j for j, m in enumerate(names)}
    print(f"{args.n:,} items x {args.k} members:")
    for rule in panel.RULES:
        s = panel.PanelSettings(rule=rule, weights=weights if rule == "weighted" else None, min_members=2)
        grades = rule in ("mean", "median")
        t = time.perf_counter()
        res = panel.combine_votes(v + 2.0 if grades else v, s, members=names)
        dt = time.perf_counter() - t
        extra = f", {res.iterations} EM iterations" if rule == "dawid-skene" else ""
        print(f"  {rule:<12} {dt:6.3f} s{extra}")
    t = time.perf_counter()
    panel.combine_votes(v, panel.PanelSettings(soft=True), members=names, p_a=p_a)
    print(f"  {'majority+soft':<12} {time.perf_counter() - t:6.3f} s")
    t = time.perf_counter()
    panel.still_open(v[:, :2], np.ones(args.k - 2), panel.PanelSettings())
    print(f"  {'still_open':<12} {time.perf_counter() - t:6.3f} s (early stopping after 2 of {args.k})")
    small = v[: args.peer_n]
    peer = _peer(small)
    if peer is None:
        print("peer: crowd-kit is not installed (pip install crowd-kit): no comparison")
        return
    for rule, (t_peer, tasks, conf_peer) in peer.items():
        t = time.perf_counter()
        res = panel.combine_votes(small, panel.PanelSettings(rule=rule, tie="abstain", max_iter=STEPS, tol=-1e9))
        t_ours = time.perf_counter() - t
        gap = float(np.nanmax(np.abs(res.confidence[tasks] - conf_peer)))  # (items with a plurality)
        print(f"{args.peer_n:,} x {args.k}, {rule}: evalign {t_ours:.3f} s, crowd-kit {t_peer:.3f} s, ratio "
              f"{t_peer / t_ours:.1f}x; largest confidence difference {gap:.2e}")


if __name__ == "__main__":
    main()
