"""Bradley-Terry leaderboard at arena scale: evalign vs arena-hard-auto's approach, same data, one run.

Data: ``--systems`` systems with normal strengths, ``--battles`` battles between random pairs (seeded),
verdicts drawn from the Bradley-Terry model with about 15% ties.

* ``evalign``: :func:`evalign.rank.bradley_terry` with ``--resamples`` bootstrap resamples
  (the battles aggregated into per-resample score matrices from multinomial counts of the distinct
  (pair, verdict) cells, fitted by Newton with preconditioned conjugate gradients, warm-started from
  the full-data fit), the full-data fit included; the battle table is encoded once first (timed
  separately).
* ``arena-hard``: arena-hard-auto ``show_result.py`` as written there: ``compute_mle_elo`` builds the
  win / tie pivot tables with pandas, the ``+-ln(10)`` design rows with a-wins and b-wins weighted 2 and
  ties once per side, and fits ``sklearn.linear_model.LogisticRegression(fit_intercept=False,
  penalty=None, tol=1e-6)``; ``get_bootstrap_result`` refits on ``battles.sample(frac=1.0,
  replace=True)`` per round. It runs ``--peer-resamples`` rounds (plus the full-data fit) and its time
  for ``--resamples`` rounds is extrapolated linearly.

The script prints both times, the ratio, how far the two full-data ratings are apart (Elo points;
the peer's lbfgs stops at tol 1e-6), and the ratio of the two bootstraps' standard deviations
(averaged over systems; the peer's from its few rounds, so about 1 +- 0.05 is agreement).

Usage: ``python benchmarks/leaderboard.py [--systems 100] [--battles 100000] [--resamples 1000]
[--peer-resamples 20]``
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np
import pandas as pd

SCALE, BASE, INIT_RATING = 400, 10, 1000


def make_battles(k: int, n: int, seed: int) -> pd.DataFrame:
    """``n`` battles between ``k`` systems; verdicts A / B / tie from a Bradley-Terry model."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(scale=1.0, size=k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(n)
    verdict = np.where(u < 0.85 * p, "A", np.where(u < 0.85, "B", "tie"))
    names = np.array([f"system-{i:03d}" for i in range(k)])
    return pd.DataFrame({"system_a": names[a], "system_b": names[b], "verdict": verdict})


# --- the peer: arena-hard-auto show_result.py, with its column names mapped to ours -------------------


def compute_mle_elo(df: pd.DataFrame) -> pd.Series:
    from sklearn.linear_model import LogisticRegression

    ptbl_a_win = pd.pivot_table(df[df["verdict"] == "A"], index="system_a", columns="system_b", aggfunc="size",
                                fill_value=0)
    ptbl_tie = pd.pivot_table(df[df["verdict"] == "tie"], index="system_a", columns="system_b", aggfunc="size",
                              fill_value=0)
    ptbl_tie = ptbl_tie + ptbl_tie.T
    ptbl_b_win = pd.pivot_table(df[df["verdict"] == "B"], index="system_a", columns="system_b", aggfunc="size",
                                fill_value=0)
    ptbl_win = ptbl_a_win * 2 + ptbl_b_win.T * 2 + ptbl_tie
    models = pd.Series(np.arange(len(ptbl_win.index)), index=ptbl_win.index)
    p = len(models)
    X = np.zeros([p * (p - 1) * 2, p])
    Y = np.zeros(p * (p - 1) * 2)
    cur_row = 0
    sample_weights = []
    for m_a in ptbl_win.index:
        for m_b in ptbl_win.columns:
            if m_a == m_b:
                continue
            if math.isnan(ptbl_win.loc[m_a, m_b]) or math.isnan(ptbl_win.loc[m_b, m_a]):
                continue
            X[cur_row, models[m_a]] = +math.log(BASE)
            X[cur_row, models[m_b]] = -math.log(BASE)
            Y[cur_row] = 1.0
            sample_weights.append(ptbl_win.loc[m_a, m_b])
            X[cur_row + 1, models[m_a]] = math.log(BASE)
            X[cur_row + 1, models[m_b]] = -math.log(BASE)
            Y[cur_row + 1] = 0.0
            sample_weights.append(ptbl_win.loc[m_b, m_a])
            cur_row += 2
    X, Y = X[:cur_row], Y[:cur_row]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # penalty=None is deprecated in scikit-learn 1.8
        lr = LogisticRegression(fit_intercept=False, penalty=None, tol=1e-6)
        lr.fit(X, Y, sample_weight=sample_weights)
    elo_scores = SCALE * lr.coef_[0] + INIT_RATING
    return pd.Series(elo_scores, index=models.index).sort_values(ascending=False)


def get_bootstrap_result(battles: pd.DataFrame, num_round: int) -> pd.DataFrame:
    rows = []
    for _ in range(num_round):
        rows.append(compute_mle_elo(battles.sample(frac=1.0, replace=True)))
    df = pd.DataFrame(rows)
    return df[df.median().sort_values(ascending=False).index]


def run_peer(battles: pd.DataFrame, rounds: int) -> dict:
    np.random.seed(42)  # arena-hard seeds numpy's global generator
    w0, c0 = time.perf_counter(), time.process_time()
    full = compute_mle_elo(battles)
    boot = get_bootstrap_result(battles, rounds)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"wall": wall, "cpu": cpu, "full": full, "sd": boot.std(ddof=1)}


def run_ours(battles: pd.DataFrame, resamples: int) -> dict:
    from evalign.rank import BTSettings, battle_arrays, bradley_terry

    w0 = time.perf_counter()
    arrays = battle_arrays(battles)
    encode = time.perf_counter() - w0
    w0, c0 = time.perf_counter(), time.process_time()
    res = bradley_terry(arrays, settings=BTSettings(n_bootstrap=resamples, seed=0))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    full = pd.Series(res.rating, index=list(res.systems))
    return {"wall": wall, "cpu": cpu, "encode": encode, "full": full,
            "sd": pd.Series(res.boot.std(axis=0, ddof=1), index=list(res.systems)),
            "width": float(np.mean(res.ci_high - res.ci_low)), "nonconverged": res.n_nonconverged}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", type=int, default=100)
    ap.add_argument("--battles", type=int, default=100_000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--peer-resamples", type=int, default=20, help="0 = skip the peer")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    battles = make_battles(args.systems, args.battles, args.seed)
    print(f"Bradley-Terry + bootstrap: {args.systems} systems, {args.battles} battles, "
          f"{args.resamples} resamples; {os.cpu_count()} CPU cores")
    ours = run_ours(battles, args.resamples)
    print(f"evalign     {ours['wall']:7.2f} s wall / {ours['cpu']:6.2f} s CPU  (full fit + {args.resamples} resamples;"
          f" encoding the table {ours['encode']:.2f} s; {ours['nonconverged']} resamples not converged)")
    if args.peer_resamples:
        peer = run_peer(battles, args.peer_resamples)
        per_round = peer["wall"] / (args.peer_resamples + 1)
        extrapolated = per_round * (args.resamples + 1)
        print(f"arena-hard  {peer['wall']:7.2f} s wall / {peer['cpu']:6.2f} s CPU  (full fit + {args.peer_resamples}"
              f" resamples) -> {extrapolated:.1f} s for full fit + {args.resamples} (extrapolated)")
        print(f"ratio (arena-hard extrapolated / evalign): {extrapolated / ours['wall']:.0f}x")
        ref = peer["full"] - peer["full"].mean() + INIT_RATING
        diff = (ours["full"] - ref.loc[ours["full"].index]).abs().max()
        print(f"full-data ratings: max |evalign - arena-hard| = {diff:.2e} Elo points (peer lbfgs tol 1e-6)")
        ratio = (ours["sd"] / peer["sd"].loc[ours["sd"].index]).mean()
        print(f"bootstrap spread: mean over systems of sd(evalign) / sd(arena-hard) = {ratio:.2f} "
              f"(the peer's sd from {args.peer_resamples} rounds); evalign's mean 95% interval width "
              f"{ours['width']:.1f} Elo points")
    total = ours["wall"] + ours["encode"]
    print(f"goal: under 10 s: {'met' if total < 10 else 'NOT met'} ({total:.2f} s wall with encoding)")


if __name__ == "__main__":
    main()
