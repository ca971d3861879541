"""Leaderboards at arena scale: evalign's Bradley-Terry with 1,000 battle resamples vs FastChat's, same
battles, one run, end to end from a Parquet file, with each side's peak memory.

Data: ``--systems`` systems (100) with normal strengths, battles between random pairs drawn from the
Bradley-Terry model with about 15% ties (seeded), an ``id`` per four battles and response lengths; written
to Parquet once per size (``--sizes``, default 100k, 1M and 3M battles).

* ``evalign``: :func:`evalign.rank.leaderboard_run.run_leaderboard` on the Parquet file (reading and
  checking every row, the full-data fit, ``--resamples`` battle resamples as multinomial draws over the
  (system_a, system_b, outcome) counts, clusters, counts and position agreement), in a fresh process.
* Style control (``--style-sizes``, default 1M battles; length, headers, lists and bold features
  standardised from synthetic counts): evalign's :func:`evalign.rank.style.fit_style_bt` (Newton on the
  structured Hessian, ``O(n d)`` per iteration) and ``--style-resamples`` (100) battle resamples
  (:func:`evalign.rank.style.style_bootstrap`, each warm-started from the full fit) vs arena-hard-auto's
  style control as released (commit ``0489bf384abd010906014dec7b903f7c438eabba``, ``utils_math.py``:
  ``construct_style_matrices`` + scikit-learn ``LogisticRegression`` on the duplicated battle matrix
  (``fit_bt``) + ``get_bootstrap_result_style_control``), loaded with ``git show`` from a clone named by
  ``--arena-hard PATH`` or ``$ARENA_HARD_PATH`` (``git clone https://github.com/lmarena/arena-hard-auto``;
  nothing of it is copied here; without one that part is skipped); ``--peer-resamples`` rounds timed and
  extrapolated, and sizes above ``--style-peer-max-battles`` (default 1M) extrapolated linearly.
* ``FastChat``: ``compute_elo_mle_with_tie`` + ``get_bootstrap_result`` of
  ``fastchat/serve/monitor/elo_analysis.py`` from the installed ``fschat`` (0.2.36, a test dependency),
  taken from its source file as shipped (the module's own imports, plotly and pytz, are for its plots and
  are not needed by these two functions, so the functions are compiled from the file on their own):
  scikit-learn's ``LogisticRegression`` on the full battle matrix (two rows per battle) for the full fit
  and for each resample of ``battles.sample(frac=1.0, replace=True)``. The Parquet file is read with
  pandas. On a shared machine the peer runs ``--peer-resamples`` rounds (default 2) and its time for
  ``--resamples`` rounds is extrapolated linearly from them (printed as "extrapolated"); sizes above
  ``--peer-max-battles`` (default 1M: its design matrix is 16 bytes x 100 x 2 rows per battle) are
  extrapolated linearly from the largest size it ran, and say so.

* Length-controlled win rates (``--lc-sizes``, default 20k and 100k battles, the same battles; baseline
  ``system-000``; difficulty fitted, as ``evalign leaderboard --baseline-system``): :func:`evalign.rank.lc_win_rates`
  on the battle arrays (made before the clock starts) from this tree and from the package as of
  ``LC_OLD_COMMIT`` (the one-fit-at-a-time solver: 51 L1 fits per system, 26 sign-pattern solves each,
  and a dense Newton on systems + items for the difficulty), exported with ``git archive`` into a
  temporary folder, up to ``--lc-old-max`` battles (default 100k); wall and CPU seconds of each and the
  largest difference of their LC win rates.

Each side runs in its own child process (its peak resident memory is the child's ``ru_maxrss``). The
script prints, per size, both times, the ratio, both peaks, and how far the full-data ratings are apart
(Elo points, after centring both; FastChat's fit has scikit-learn's default L2 penalty C=1, so a small
difference is expected). ``uptime``'s load average is printed beside the figures: on a loaded machine
every time is inflated.

Usage: ``nice python benchmarks/arena_scale.py [--sizes 100000,1000000,3000000] [--resamples 1000]
[--peer-resamples 2] [--peer-max-battles 1000000] [--style-sizes 1000000] [--lc-sizes 20000,100000]
[--lc-old-max 100000]``
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve()
LC_OLD_COMMIT = "cd61692"  # main before the batched LC solver


def make_battles(k: int, n: int, seed: int) -> pd.DataFrame:
    """``n`` battles between ``k`` systems; verdicts A / B / tie from a Bradley-Terry model."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(scale=1.0, size=k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b])))
    u = rng.random(n)
    names = np.array([f"system-{i:03d}" for i in range(k)])
    return pd.DataFrame({
        "id": (np.arange(n) // 4).astype(str), "system_a": names[a], "system_b": names[b],
        "verdict": np.where(u < 0.85 * p, "A", np.where(u < 0.85, "B", "tie")),
        "len_a": rng.integers(20, 2000, n), "len_b": rng.integers(20, 2000, n),
    })


def fastchat_functions() -> dict[str, object]:
    """``compute_elo_mle_with_tie`` and ``get_bootstrap_result`` compiled from the installed fschat's
    ``elo_analysis.py`` as shipped (module doc)."""
    import importlib.util

    spec = importlib.util.find_spec("fastchat")
    if spec is None or spec.origin is None:
        raise SystemExit("fschat is not installed (pip install 'fschat==0.2.36')")
    path = Path(spec.origin).parent / "serve" / "monitor" / "elo_analysis.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    wanted = {"compute_elo_mle_with_tie", "get_bootstrap_result"}
    body = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in wanted]
    ns: dict[str, object] = {"np": np, "pd": pd, "math": math, "tqdm": lambda it, **_: it}  # no progress bar
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), ns)
    return ns


def child_evalign(path: str, resamples: int) -> dict[str, float]:
    from evalign.rank import BTSettings, LeaderboardSettings
    from evalign.rank.leaderboard_run import LeaderboardSpec, run_leaderboard

    spec = LeaderboardSpec(board=LeaderboardSettings(bt=BTSettings(n_bootstrap=resamples, seed=0)))
    t = time.perf_counter()
    out = run_leaderboard(path, spec)
    seconds = time.perf_counter() - t
    bt = out.board.bt
    return {"seconds": seconds, "ratings": dict(zip(bt.systems, map(float, bt.rating), strict=True))}


def child_fastchat(path: str, rounds: int) -> dict[str, float]:
    import warnings

    fc = fastchat_functions()
    t = time.perf_counter()
    df = pd.read_parquet(path)
    battles = pd.DataFrame({"model_a": df["system_a"], "model_b": df["system_b"],
                            "winner": df["verdict"].map({"A": "model_a", "B": "model_b", "tie": "tie"})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = fc["compute_elo_mle_with_tie"](battles)  # type: ignore[operator]
        t_full = time.perf_counter() - t
        t = time.perf_counter()
        np.random.seed(0)
        fc["get_bootstrap_result"](battles, fc["compute_elo_mle_with_tie"], rounds)  # type: ignore[operator]
        t_rounds = time.perf_counter() - t
    return {"full_seconds": t_full, "round_seconds": t_rounds / max(rounds, 1),
            "ratings": {str(k): float(v) for k, v in full.items()}}


def style_data(n: int, k: int, seed: int) -> tuple[np.ndarray, ...]:
    """Battles with arena-hard's four style features (length, headers, lists, bold), from synthetic
    per-response counts; verdicts from a Bradley-Terry model with a length effect. Returns ``a, b, y, z``
    (``z`` standardised by :func:`evalign.rank.style.style_covariates`) and the raw counts of A and B."""
    from evalign.rank.style import style_covariates

    rng = np.random.default_rng(seed)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    counts = [np.column_stack([rng.integers(20, 2000, n), rng.poisson(2, n), rng.poisson(5, n), rng.poisson(3, n)])
              for _ in range(2)]
    z, _ = style_covariates(counts[0], counts[1])
    eta = rng.normal(size=k)[a] - rng.normal(size=k)[b] + 0.4 * z[:, 0]
    u = rng.random(n)
    p = 1.0 / (1.0 + np.exp(-eta))
    y = np.where(u < 0.85 * p, 1.0, np.where(u < 0.85, 0.0, 0.5))
    return a, b, y, z, counts[0], counts[1]


def child_style(n: int, resamples: int) -> dict[str, object]:
    from evalign.rank.style import fit_style_bt, style_bootstrap

    a, b, y, z, _, _ = style_data(n, 100, 0)
    t = time.perf_counter()
    full = fit_style_bt(a, b, y, z, 100)[0]
    boot = style_bootstrap(a, b, y, z, 100, n_bootstrap=resamples, seed=0, start=full)
    return {"seconds": time.perf_counter() - t, "boot_sd_length": float(boot[:, 99].std())}


#: arena-hard-auto's style control as released (v0.1, "update style control", 2024-09-01; Apache-2.0):
#: ``utils_math.py`` at this commit has ``construct_style_matrices`` (battles duplicated, a tie = one win
#: and one loss, the four features as (a - b) / (a + b + 1), standardised), ``fit_bt`` (scikit-learn's
#: ``LogisticRegression(fit_intercept=False)``, default L2 C=1) and ``get_bootstrap_result_style_control``
#: (each round: ``np.random.choice`` of battles, the matrices rebuilt, ``fit_bt`` again).
ARENA_HARD_COMMIT = "0489bf384abd010906014dec7b903f7c438eabba"
ARENA_HARD_FILE = "utils_math.py"


def arena_hard_module(repo: str) -> object:
    """``utils_math.py`` of arena-hard-auto at :data:`ARENA_HARD_COMMIT`, read from a git clone of
    https://github.com/lmarena/arena-hard-auto (``git show``; nothing of it is copied into this project)."""
    import importlib.util

    text = subprocess.run(["git", "-C", repo, "show", f"{ARENA_HARD_COMMIT}:{ARENA_HARD_FILE}"], check=True,
                          capture_output=True, text=True).stdout
    folder = Path(tempfile.mkdtemp())
    (folder / "arena_hard_utils_math.py").write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("arena_hard_utils_math", folder / "arena_hard_utils_math.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def child_style_peer(n: int, rounds: int) -> dict[str, object]:
    """arena-hard-auto's style control (:data:`ARENA_HARD_COMMIT`, ``$ARENA_HARD_PATH``) on the same
    battles: ``construct_style_matrices`` once, ``fit_bt`` on the full data, then ``rounds`` rounds of
    ``get_bootstrap_result_style_control`` (their time per round is extrapolated by the caller). Its
    ``tqdm`` bars go to stderr."""
    m = arena_hard_module(os.environ["ARENA_HARD_PATH"])
    a, b, y, _, ca, cb = style_data(n, 100, 0)
    names = np.array([f"m{i:03d}" for i in range(100)])
    keys = ("sum_assistant_{}_tokens", "header_count_{}", "list_count_{}", "bold_count_{}")
    meta = [dict(zip([k.format("a") for k in keys] + [k.format("b") for k in keys], map(int, row), strict=True))
            for row in np.hstack([ca, cb])]
    battles = pd.DataFrame({"model_a": names[a], "model_b": names[b],
                            "winner": np.where(y == 1.0, "model_a", np.where(y == 0.0, "model_b", "tie")),
                            "conv_metadata": meta})
    t = time.perf_counter()
    X, Y, models = m.construct_style_matrices(battles)  # type: ignore[attr-defined]
    m.fit_bt(X, Y, models, baseline_model=names[0])  # type: ignore[attr-defined]
    t_full = time.perf_counter() - t
    t = time.perf_counter()
    m.get_bootstrap_result_style_control(X, Y, battles, models, m.fit_bt, num_round=rounds,  # type: ignore[attr-defined]
                                         baseline_model=names[0])
    return {"full_seconds": t_full, "round_seconds": (time.perf_counter() - t) / max(rounds, 1)}


def child_lc(n: int, k: int) -> dict[str, object]:
    """LC win rates of ``n`` battles of ``k`` systems against system-000 (the package on the path)."""
    from evalign.rank import battle_arrays, lc_win_rates

    ba = battle_arrays(make_battles(k, n, seed=0))
    wall, cpu = time.perf_counter(), time.process_time()
    lc = lc_win_rates(ba, "system-000")
    return {"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
            "lc": [None if math.isnan(v) else float(v) for v in lc.lc_win_rate]}


def run_child(which: str, path: str, count: int, src: str | None = None) -> dict[str, object]:
    """Run one side in a fresh process (with the package in ``src``, default this tree's); its result and
    peak memory (GiB)."""
    env = dict(os.environ)
    src = src or str(HERE.parents[1] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, str(HERE), "--child", which, path, str(count)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"{which} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def lc_table(sizes: list[int], k: int, old_max: int) -> None:
    """The LC win rate, this tree vs ``LC_OLD_COMMIT`` (module doc), one line per size."""
    print(f"LC win rates vs system-000, {k} systems, difficulty fitted: this tree vs {LC_OLD_COMMIT} (cpus {os.cpu_count()})")
    print(f"{'battles':>9}  {'new s':>7}  {'new cpu':>7}  {'old s':>7}  {'old cpu':>7}  {'ratio':>6}  {'max |dLC|':>9}  load")
    data = subprocess.run(["git", "-C", str(HERE.parents[1]), "archive", LC_OLD_COMMIT, "src"], check=True,
                          capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        for n in sizes:
            new = run_child("lc", str(n), k)
            old = run_child("lc", str(n), k, str(Path(tmp) / "src")) if n <= old_max else None
            line = f"{n:>9,}  {float(new['seconds']):>7.2f}  {float(new['cpu']):>7.2f}  "  # type: ignore[arg-type]
            if old is None:
                line += f"{'-':>7}  {'-':>7}  {'-':>6}  {'-':>9}"
            else:
                a = np.array(new["lc"], dtype=float)  # None -> nan
                b = np.array(old["lc"], dtype=float)
                assert np.array_equal(np.isnan(a), np.isnan(b)), "the two codes give LC win rates to different systems"
                diff = float(np.nanmax(np.abs(a - b)))
                line += (f"{float(old['seconds']):>7.1f}  {float(old['cpu']):>7.1f}  "  # type: ignore[arg-type]
                         f"{float(old['seconds']) / float(new['seconds']):>5.0f}x  {diff:>9.1e}")  # type: ignore[arg-type]
            print(f"{line}  {load()}", flush=True)
    print()


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000,3000000")
    ap.add_argument("--systems", type=int, default=100)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--peer-resamples", type=int, default=2)
    ap.add_argument("--peer-max-battles", type=int, default=1_000_000)
    ap.add_argument("--style-sizes", default="1000000", help="battles for the style-control comparison ('' to skip)")
    ap.add_argument("--style-resamples", type=int, default=100)
    ap.add_argument("--arena-hard", default=os.environ.get("ARENA_HARD_PATH", ""),
                    help="a git clone of lmarena/arena-hard-auto (for the style-control peer)")
    ap.add_argument("--style-peer-max-battles", type=int, default=1_000_000)
    ap.add_argument("--lc-sizes", default="20000,100000", help="battles for the LC win rate timing ('' to skip)")
    ap.add_argument("--lc-old-max", type=int, default=100_000, help="largest LC size the old code runs at")
    ap.add_argument("--child", nargs=3, metavar=("WHICH", "PATH", "COUNT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        which, path, count = args.child
        runs = {"evalign": child_evalign, "fastchat": child_fastchat, "style": child_style, "style-peer": child_style_peer,
                "lc": child_lc}
        res = runs[which](path if which in ("evalign", "fastchat") else int(path), int(count))  # type: ignore[operator]
        res["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(json.dumps(res))
        return
    if args.lc_sizes:
        lc_table([int(x) for x in args.lc_sizes.split(",") if x], args.systems, args.lc_old_max)
    print(f"arena scale: {args.systems} systems, BT + {args.resamples} battle resamples, end to end from Parquet "
          f"(cpus {os.cpu_count()}, load {load()})")
    print(f"{'battles':>9}  {'evalign s':>9}  {'GiB':>5}  {'FastChat s':>11}  {'GiB':>5}  {'ratio':>6}  {'max |dElo|':>10}  load")
    last_peer: tuple[int, float, float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.sizes.split(",") if x]:
            path = str(Path(tmp) / f"battles_{n}.parquet")
            make_battles(args.systems, n, seed=0).to_parquet(path, index=False)
            ours = run_child("evalign", path, args.resamples)
            note = "extrapolated from its rounds"
            diff = float("nan")
            if n <= args.peer_max_battles:
                peer = run_child("fastchat", path, args.peer_resamples)
                peer_s = float(peer["full_seconds"]) + args.resamples * float(peer["round_seconds"])  # type: ignore[arg-type]
                peer_gib = float(peer["peak_gib"])  # type: ignore[arg-type]
                last_peer = (n, peer_s, peer_gib)
                a, b = ours["ratings"], peer["ratings"]  # type: ignore[index]
                names = sorted(a)  # type: ignore[arg-type]
                va = np.array([a[s] for s in names])  # type: ignore[index]
                vb = np.array([b[s] for s in names])  # type: ignore[index]
                diff = float(np.max(np.abs((va - va.mean()) - (vb - vb.mean()))))
            elif last_peer is not None:
                peer_s = last_peer[1] * n / last_peer[0]
                peer_gib = last_peer[2] * n / last_peer[0]
                note = f"extrapolated linearly from {last_peer[0]:,} battles (not run)"
            else:
                peer_s = peer_gib = float("nan")
            ours_s = float(ours["seconds"])  # type: ignore[arg-type]
            print(f"{n:>9,}  {ours_s:>9.2f}  {float(ours['peak_gib']):>5.2f}  {peer_s:>11.1f}  {peer_gib:>5.2f}  "  # type: ignore[arg-type]
                  f"{peer_s / ours_s:>5.0f}x  {diff:>10.3f}  {load()}  (FastChat {note})", flush=True)
    if args.style_sizes:
        peer_ok = bool(args.arena_hard) and Path(args.arena_hard).exists()
        if peer_ok:
            os.environ["ARENA_HARD_PATH"] = args.arena_hard
        print(f"\nstyle control (length, headers, lists, bold), {args.style_resamples} resamples; arena-hard-auto "
              f"{ARENA_HARD_COMMIT[:7]} ({ARENA_HARD_FILE}) runs {args.peer_resamples} rounds, extrapolated"
              + ("" if peer_ok else " -- no --arena-hard clone given: peer skipped"))
        print(f"{'battles':>9}  {'evalign s':>9}  {'GiB':>5}  {'arena-hard s':>12}  {'GiB':>5}  {'ratio':>6}  load")
        last: tuple[int, float, float] | None = None
        for n in [int(x) for x in args.style_sizes.split(",") if x]:
            ours = run_child("style", str(n), args.style_resamples)
            ours_s = float(ours["seconds"])  # type: ignore[arg-type]
            note = ""
            if peer_ok and n <= args.style_peer_max_battles:
                peer = run_child("style-peer", str(n), args.peer_resamples)
                peer_s = float(peer["full_seconds"]) + args.style_resamples * float(peer["round_seconds"])  # type: ignore[arg-type]
                peer_gib = float(peer["peak_gib"])  # type: ignore[arg-type]
                last = (n, peer_s, peer_gib)
            elif last is not None:
                peer_s, peer_gib = last[1] * n / last[0], last[2] * n / last[0]
                note = f"  (arena-hard extrapolated linearly from {last[0]:,} battles, not run)"
            else:
                peer_s = peer_gib = float("nan")
            print(f"{n:>9,}  {ours_s:>9.2f}  {float(ours['peak_gib']):>5.2f}  {peer_s:>12.1f}  "  # type: ignore[arg-type]
                  f"{peer_gib:>5.2f}  {peer_s / ours_s:>5.0f}x  {load()}{note}", flush=True)

if __name__ == "__main__":
    main()
