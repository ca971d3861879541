"""System-vs-system significance: evalign vs ``sacrebleu.significance.PairedTest``, same data, one run.

Data: the bundled Self-Instruct items (252 per system) of ``--systems`` systems (sorted names), the
first one the baseline; metric BLEU. Both sides run the paired bootstrap (1,000 resamples) and
approximate randomization (10,000 trials) with seed 12345; sacrebleu runs one PairedTest per test
(single process). Prints the times, the ratio (sacrebleu / evalign: > 1 means evalign is faster)
and whether every p-value, mean and CI is equal.
Usage: ``python benchmarks/system_significance.py [--systems 4]``.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", type=int, default=4)
    args = ap.parse_args()

    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    from evalign.datasets import load_dataset
    from evalign.metrics import get_metric
    from evalign.rank.system_significance import compare_systems, table_statistics

    items = load_dataset("self_instruct").items
    systems = sorted(items["system"].unique())[: args.systems]
    items = items[items["system"].isin(systems)]

    t0 = time.perf_counter()
    ts = table_statistics(items, get_metric("bleu"), systems)
    ours = compare_systems(ts.statistics, baseline=systems[0])
    t_ours = time.perf_counter() - t0

    by = {s: items[items["system"] == s].set_index("id") for s in systems}
    ids = list(ts.ids)
    refs = [[by[systems[0]].at[i, "reference"] for i in ids]]
    named = [(s, [by[s].at[i, "response"] for i in ids]) for s in systems]
    t0 = time.perf_counter()
    _, bs = PairedTest(named, {"BLEU": BLEU()}, refs, test_type="bs")()
    _, ar = PairedTest(named, {"BLEU": BLEU()}, refs, test_type="ar")()
    t_peer = time.perf_counter() - t0

    equal = all(
        r.bootstrap_p == b.p_value and r.ar_p == a.p_value and abs(r.mean - b.mean) < 1e-9 and abs(r.ci - b.ci) < 1e-9
        for r, b, a in zip(ours, bs["BLEU"][1:], ar["BLEU"][1:], strict=True)
    )
    print(f"{len(systems)} systems x {len(ids)} items, BLEU, bootstrap 1000 + AR 10000")
    print(f"evalign   {t_ours:8.2f} s")
    print(f"sacrebleu {t_peer:8.2f} s")
    print(f"ratio (sacrebleu / evalign): {t_peer / t_ours:.2f}; all p-values, means and CIs equal: {equal}")


if __name__ == "__main__":
    main()
