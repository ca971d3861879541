"""Trust table at WMT scale: a million pairs x 10 metrics, now vs the code before, and mt-metrics-eval.

What is timed (every configuration in a fresh subprocess: wall and CPU seconds of
:func:`evalign.meta.trust.trust_table_pairs` alone, the data made before; peak resident memory of the
process, data included, and of its largest worker process):

* ``new``: this working tree, ``Resampling(method="auto")`` (accuracies resampled by sufficient
  statistics: one multinomial draw per bootstrap resample, one binomial count per joint credit value
  per permutation; the pair table counted slice by slice, :mod:`evalign.meta.pair_counts`),
  ``--workers`` processes (default 2), at ``--n`` pairs x ``--metrics`` metrics (default 1,000,000 x
  10; goal < 10 s and < 2 GiB on 2 cores; from 10,000,000 pairs on, goal < 30 s and < 4 GiB) and at
  100,000 x 5 (goal < 4 s);
* ``--parquet``: the ``--n`` table is written to a Parquet file first (row groups of 1,000,000 pairs,
  by a process of its own, in a temporary folder), and what is timed is
  :func:`evalign.meta.trust.trust_table_pairs_file` reading it in batches of its default
  ``chunk_rows`` (250,000 rows; two passes, each row group by either worker; the frame is never in
  memory, so the memory figures are the computation's: a batch per worker plus counts).
  ``python benchmarks/trust_scale.py --n 10000000 --parquet --skip-old --skip-mtme`` is the 10M x 10
  configuration;
* ``old``: the package as of ``OLD_COMMIT`` (main when this work started: item-index draws as n x R
  matrices, one process), exported with ``git archive`` into a temporary folder and run at
  ``--old-n`` pairs (default 100,000; 1,000,000 takes ~6 minutes and ~4.7 GiB on a quiet machine).
  At that size the new code also runs with ``method="items"`` and must give the old table bit for
  bit; with ``method="auto"`` the values and epsilons are identical and the intervals and p-values
  agree within Monte-Carlo error (other draws): their largest differences are printed;
* ``mt-metrics-eval``: ``stats.PermutationSigDiff`` (google-research/mt-metrics-eval, commit 68a481a)
  on a 20,000-pair slice: one paired test of metrics m0 and m1, ``KendallVariants`` ``acc23`` with
  epsilon 0 over items of two "systems" (response A with the pair's majority label as its gold
  score, response B with 0), i.e. preference accuracy with ties at epsilon 0, ``average_by="item"``
  (PERM-BOTH cell swaps). It needs about 8 s per permutation on a quiet core, so it runs
  ``--mtme-permutations`` (default 3) and once with 1, and the time of 1,000 permutations is
  extrapolated linearly (said so in the output). evalign runs the same test (the same statistic,
  its item swaps, 1,000 permutations) on the same slice, and the ratio is printed. Get the code with
  ``git clone https://github.com/google-research/mt-metrics-eval && git -C mt-metrics-eval checkout
  68a481a`` and pass its folder with ``--mtme PATH`` or ``$MTME_PATH`` (default
  ``/work/ext/mt-metrics-eval`` when it exists; none: that part is skipped). Nothing of it is copied here.

Data (as ``benchmarks/resampling.py``): three annotators (+1/-1/0, ~15% ties), metrics of decreasing
quality, scores rounded to 2 decimals; 1,000 resamples and 1,000 permutations, seed 0. The machine's
load (``uptime``) is printed before and after: timings on a shared machine are noisy.

Usage: ``python benchmarks/trust_scale.py [--n 1000000] [--metrics 10] [--workers 2] [--parquet] [--old-n 100000]
[--mtme PATH] [--mtme-permutations 3] [--skip-old] [--skip-mtme]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from io import BytesIO
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resampling import ANNOTATORS, make_pairs

#: main when this work started (before sufficient statistics, blocks and workers)
OLD_COMMIT = "80ebcc2"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MTME = Path("/work/ext/mt-metrics-eval")
COLUMNS = ["metric", "rank", "cluster", "value", "ci_low", "ci_high", "p_vs_best", "epsilon",
           "preference_accuracy_no_ties"]


def _peaks() -> tuple[float, float]:
    """(peak RSS of this process, of its largest finished child) in MiB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, kids


def _pss_mib(pid: int) -> float:
    """Proportional set size of a process (Linux ``smaps_rollup``; shared pages split between sharers)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return out


class PeakMemory(threading.Thread):
    """The peak, over samples every 20 ms, of the summed PSS of this process and its worker processes:
    the memory the computation really holds (forked workers share the parent's pages; their RSS
    would count them twice). 0 where ``/proc`` has no ``smaps_rollup``. ``cpu``: the CPU seconds the
    sampling itself took (reading ``smaps_rollup`` walks a process's page tables: about a millisecond
    per sample per process), left out of the CPU figures."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.stop, self.cpu = 0.0, threading.Event(), 0.0

    def run(self) -> None:
        me = os.getpid()
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, _pss_mib(me) + sum(_pss_mib(c) for c in _children(me)))
            self.cpu = time.thread_time()


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def write_parquet(n: int, n_metrics: int, path: Path) -> None:
    """The benchmark's ``n`` pairs written to ``path`` (row groups of 1,000,000 pairs)."""
    pairs, _ = make_pairs(n, n_metrics, seed=0)
    pairs.to_parquet(path, row_group_size=1_000_000, index=False)


def run_table(n: int, n_metrics: int, method: str | None, workers: int, parquet: Path | None = None) -> dict:
    """One trust table in this process; ``method`` None = the old API (no method, no workers);
    ``parquet``: the table's file, read in batches by ``trust_table_pairs_file`` (the data made before)."""
    import evalign
    from evalign.meta.trust import trust_table_pairs

    if parquet is None:
        pairs, names = make_pairs(n, n_metrics, seed=0)
    else:
        names = [f"m{i}" for i in range(n_metrics)]
    kw: dict = {"n_resamples": 1000, "n_permutations": 1000, "seed": 0}
    if method is not None:
        from evalign.meta.resampling import Resampling

        kw = {"resampling": Resampling(n_resamples=1000, n_permutations=1000, seed=0, method=method, workers=workers)}
    sampler = PeakMemory()
    sampler.start()
    w0, c0 = time.perf_counter(), _cpu()
    if parquet is None:
        rep = trust_table_pairs(pairs, list(ANNOTATORS), names, **kw)
    else:
        from evalign.meta.trust import trust_table_pairs_file

        rep = trust_table_pairs_file(parquet, list(ANNOTATORS), names, **kw)
    wall, cpu = time.perf_counter() - w0, _cpu() - c0
    sampler.stop.set()
    sampler.join()
    cpu -= sampler.cpu
    own, kids = _peaks()
    table = rep.for_group()[COLUMNS]
    records = json.loads(json.dumps(table.to_dict("records"), default=lambda o: o.item()))
    return {"wall": wall, "cpu": cpu, "sampler_cpu": sampler.cpu, "rss": own, "worker_rss": kids, "pss": sampler.peak,
            "table": records,
            "resampling": getattr(rep, "resampling", "items"), "package": str(Path(evalign.__file__).parent),
            "notes": list(rep.notes)}


def _subprocess(args: list[str], pythonpath: str | None = None) -> dict:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([sys.executable, __file__, "--worker", *args], check=True, capture_output=True, text=True,
                         env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_new(n: int, n_metrics: int, method: str, workers: int, parquet: bool = False) -> dict:
    if not parquet:
        return _subprocess(["--n", str(n), "--metrics", str(n_metrics), "--method", method, "--workers", str(workers)])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pairs.parquet"
        _subprocess(["--n", str(n), "--metrics", str(n_metrics), "--method", "write", "--file", str(path)])
        return _subprocess(["--n", str(n), "--metrics", str(n_metrics), "--method", method, "--workers", str(workers),
                            "--file", str(path)])


def run_old(n: int, n_metrics: int, old_src: Path | None = None) -> dict:
    """The same trust table with the package of ``OLD_COMMIT`` (or the ``src`` folder ``old_src``
    exported from it before), in a subprocess."""
    if old_src is not None:
        return _subprocess(["--n", str(n), "--metrics", str(n_metrics), "--method", "old"], str(old_src))
    data = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_COMMIT, "src"], check=True,
                          capture_output=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        return _subprocess(["--n", str(n), "--metrics", str(n_metrics), "--method", "old"], str(Path(tmp) / "src"))


def _slice(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The first ``n`` pairs of the benchmark data: annotators x pairs, majority labels, m0 and m1 (2 x n)."""
    from evalign.meta.agreement import majority_vote

    pairs, _ = make_pairs(n, 2, seed=0)
    prefs = pairs[list(ANNOTATORS)].to_numpy(dtype=float).T
    m0 = pairs[["m0_a", "m0_b"]].to_numpy(dtype=float).T
    m1 = pairs[["m1_a", "m1_b"]].to_numpy(dtype=float).T
    return prefs, majority_vote(prefs.T, fallback=0.0), m0, m1


def run_ours_test(n: int, method: str) -> dict:
    """evalign's paired permutation test of m0 vs m1 (preference accuracy with ties at epsilon 0)."""
    from evalign.meta.resampling import Resampling
    from evalign.meta.significance import make_statistic, paired_permutation_test

    prefs, _, m0, m1 = _slice(n)
    stat = make_statistic("preference_accuracy", epsilon=0.0)
    w0 = time.perf_counter()
    r = paired_permutation_test(stat, prefs, m0, m1, resampling=Resampling(n_permutations=1000, method=method,
                                                                            workers=1))
    return {"wall": time.perf_counter() - w0, "p": r.p_value, "delta": r.delta}


def run_mtme(n: int, k: int, mtme: Path) -> dict:
    """mt-metrics-eval's PermutationSigDiff on the same slice, ``k`` permutations (in a subprocess)."""
    return _subprocess(["--n", str(n), "--method", "mtme", "--mtme-permutations", str(k)],
                       os.pathsep.join([str(mtme), os.environ.get("PYTHONPATH", "")]))


def mtme_worker(n: int, k: int) -> dict:
    from mt_metrics_eval import stats

    _, labels, m0, m1 = _slice(n)
    gold = [float(x) for x in labels] + [0.0] * n  # system 0 = response A (gold: the label), 1 = B (0)
    c0 = stats.Correlation(2, gold, [float(x) for x in m0[0]] + [float(x) for x in m0[1]])
    c1 = stats.Correlation(2, gold, [float(x) for x in m1[0]] + [float(x) for x in m1[1]])
    np.random.seed(0)
    w0 = time.perf_counter()
    p, delta, used, _ = stats.PermutationSigDiff(c1, c0, stats.KendallVariants, "item", k,
                                                 stats.PermutationSigDiffParams(block_size=k), variant="acc23",
                                                 epsilon=0.0)
    return {"wall": time.perf_counter() - w0, "p": float(p), "delta": float(delta), "k": int(used)}


def load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def _row(label: str, n: int, m: int, res: dict, goal: str = "") -> str:
    return (f"{label:<28} {n:>9} {m:>3} {res['wall']:>8.2f} {res['cpu']:>8.2f} {res['pss']:>9.0f} "
            f"{res['rss']:>9.0f} {res['worker_rss']:>9.0f}  {goal}")


def _compare(old: dict, new: dict) -> tuple[bool, float, float]:
    """(values and epsilons identical, largest |difference| of an interval end, of a p-value vs the best)."""
    a, b = pd.DataFrame(old["table"]).set_index("metric"), pd.DataFrame(new["table"]).set_index("metric").loc[
        pd.DataFrame(old["table"])["metric"]]
    same = bool(np.array_equal(a["value"], b["value"]) and np.array_equal(a["epsilon"], b["epsilon"]))
    ci = float(np.nanmax(np.abs(np.r_[a["ci_low"] - b["ci_low"], a["ci_high"] - b["ci_high"]])))
    p = float(np.nanmax(np.abs(a["p_vs_best"] - b["p_vs_best"]))) if a["p_vs_best"].notna().any() else 0.0
    return same, ci, p


def compare_old(args: argparse.Namespace) -> bool:
    """The old code vs the new (items: identical; auto: equal in distribution) at ``--old-n``."""
    old = run_old(args.old_n, args.metrics, args.old_src)
    items = run_new(args.old_n, args.metrics, "items", args.workers)
    auto = run_new(args.old_n, args.metrics, "auto", args.workers)
    print(_row(f"old ({OLD_COMMIT}), 1 process", args.old_n, args.metrics, old))
    print(_row(f"new, items, {args.workers} workers", args.old_n, args.metrics, items))
    print(_row(f"new, auto, {args.workers} workers", args.old_n, args.metrics, auto))
    identical = pd.DataFrame(old["table"]).equals(pd.DataFrame(items["table"]))
    same, ci, p = _compare(old, auto)
    print(f"  ratio old / new (auto): {old['wall'] / auto['wall']:.1f}x wall; method items identical to old: "
          f"{identical}; auto: values and epsilons identical: {same}, largest |diff| of an interval end {ci:.4f}, "
          f"of a p-value {p:.4f} (other draws: Monte-Carlo error)")
    return identical and same


def compare_mtme(args: argparse.Namespace, mtme: Path) -> None:
    ours = run_ours_test(args.mtme_n, "auto")
    ours_items = run_ours_test(args.mtme_n, "items")
    one = run_mtme(args.mtme_n, 1, mtme)
    k = max(2, args.mtme_permutations)
    more = run_mtme(args.mtme_n, k, mtme)
    per = (more["wall"] - one["wall"]) / (more["k"] - one["k"])
    thousand = one["wall"] + 999 * per
    print(f"one paired test, {args.mtme_n} pairs, 1000 permutations (preference accuracy with ties, epsilon 0):")
    print(f"  evalign (sufficient statistics): {ours['wall']:.3f} s, p = {ours['p']:.4f} (two-sided, +1); "
          f"item swaps: {ours_items['wall']:.3f} s, p = {ours_items['p']:.4f}")
    print(f"  mt-metrics-eval PermutationSigDiff: {one['wall']:.1f} s with 1 permutation, {more['wall']:.1f} s with "
          f"{more['k']}: {per:.2f} s per permutation; 1000 permutations extrapolated: {thousand:.0f} s "
          f"(p = {more['p']:.3f} one-sided after {more['k']}, delta {more['delta']:.4f})")
    print(f"  ratio mt-metrics-eval / evalign: {thousand / ours['wall']:.0f}x (sufficient), "
          f"{thousand / ours_items['wall']:.0f}x (item swaps)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--old-n", type=int, default=100_000)
    ap.add_argument("--mtme", type=Path, default=None, help="mt-metrics-eval checkout (or $MTME_PATH)")
    ap.add_argument("--mtme-n", type=int, default=20_000)
    ap.add_argument("--mtme-permutations", type=int, default=3)
    ap.add_argument("--skip-old", action="store_true")
    ap.add_argument("--old-src", type=Path, default=None,
                    help="the src folder of OLD_COMMIT exported before (git archive OLD_COMMIT src | tar -x), "
                         "where the checkout has no git history")
    ap.add_argument("--skip-mtme", action="store_true")
    ap.add_argument("--parquet", action="store_true",
                    help="write the --n table to Parquet first and time trust_table_pairs_file reading it in batches")
    ap.add_argument("--method", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.method == "mtme":
            print(json.dumps(mtme_worker(args.n, args.mtme_permutations)))
        elif args.method == "write":
            write_parquet(args.n, args.metrics, args.file)
            print(json.dumps({"file": str(args.file)}))
        else:
            method = None if args.method == "old" else args.method
            print(json.dumps(run_table(args.n, args.metrics, method, args.workers, args.file)))
        return

    print(f"load before: {load()}; {len(os.sched_getaffinity(0))} cores available to this process")
    print(f"{os.cpu_count()} CPU cores; 3 annotators; 1000 resamples and 1000 permutations; seed 0; seconds wall / "
          "CPU (CPU includes the workers, not the memory sampling); memory in MiB (data included): peak PSS of the process and its workers "
          "together (sampled every 20 ms), peak RSS of the process, of its largest worker")
    print(f"{'configuration':<28} {'pairs':>9} {'m':>3} {'wall s':>8} {'CPU s':>8} {'PSS MiB':>9} {'RSS MiB':>9} "
          f"{'worker':>9}")
    big = run_new(args.n, args.metrics, "auto", args.workers, args.parquet)
    secs, mib = (30, 4096) if args.n >= 10_000_000 else (10, 2048)
    label = f"new, auto, {args.workers} workers" + (", Parquet" if args.parquet else "")
    print(_row(label, args.n, args.metrics, big,
               f"goal < {secs} s, < {mib // 1024} GiB: {'met' if big['wall'] < secs and big['pss'] < mib else 'NOT met'}"))
    print(f"  (the memory sampling itself took {big['sampler_cpu']:.2f} CPU s, left out of the CPU figure)")
    small = run_new(100_000, 5, "auto", args.workers)
    print(_row(f"new, auto, {args.workers} workers", 100_000, 5, small,
               f"goal < 4 s: {'met' if small['wall'] < 4 else 'NOT met'}"))
    ok = True
    if not args.skip_old and args.old_n:
        ok = compare_old(args)
    mtme = args.mtme or (Path(os.environ["MTME_PATH"]) if os.environ.get("MTME_PATH") else None)
    mtme = mtme or (DEFAULT_MTME if DEFAULT_MTME.exists() else None)
    if args.skip_mtme or mtme is None:
        print("mt-metrics-eval: skipped (give --mtme PATH or $MTME_PATH; see the module doc)")
    else:
        compare_mtme(args, mtme)
    print(f"load after: {load()}")
    if not ok:
        raise SystemExit("MISMATCH: method items differs from the old code, or the values / epsilons differ")


if __name__ == "__main__":
    main()
