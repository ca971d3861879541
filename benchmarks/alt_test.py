"""The Alt-Test: evalign's speed on SummEval's six judges (6,400 items, 3 expert annotators, neg_rmse,
epsilon 0.2) and its results against what upstream's ``alt_test()`` (Calderon et al. 2025) returned on the
same data.

Upstream's code has no licence and is no longer kept anywhere evalign can run it; what it returned on every
set, judge and epsilon is in ``$EVALIGN_DATA_DIR/alttest/reference/upstream_outputs.json``. This script
times evalign (:func:`evalign.meta.alt_test.alt_test_dicts`, all judges in one call, from the same JSON
dicts: the conversion to arrays is inside the timed run; best of ``--repeats``) and checks that the winning
rates and advantage probabilities are identical and every p-value equal to rel 1e-9. The last timing of
upstream on this machine, before its copy was removed, is in changelog.d/trust.md: 20-55x slower.

Usage: ``python benchmarks/alt_test.py [--set summeval] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

#: upstream's epsilon and scoring per set (alttest/SOURCE.md)
SETS = {"summeval": (0.2, "neg_rmse"), "10k_prompts": (0.15, "neg_rmse"), "mtbench": (0.2, "accuracy"),
        "framing": (0.15, "accuracy"), "cebab_aspects": (0.1, "accuracy")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="summeval", choices=sorted(SETS))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from evalign.io.data_dir import default_data_dir
    from evalign.meta.alt_test import AltTestSettings, alt_test_dicts

    root = Path(os.environ.get("EVALIGN_DATA_DIR") or default_data_dir()) / "alttest"
    reference = json.loads((root / "reference" / "upstream_outputs.json").read_text(encoding="utf-8"))
    eps, scoring = SETS[args.set]
    humans = json.loads((root / args.set / "human_annotations.json").read_text())
    judges = json.loads((root / args.set / "llm_annotations.json").read_text())
    n_items = len({i for a in humans.values() for i in a})
    print(f"{args.set}: {n_items} items, {len(humans)} annotators, {len(judges)} judges, epsilon {eps}, {scoring}")

    times: list[float] = []
    mine: dict = {}
    for _ in range(args.repeats):
        t = time.perf_counter()
        mine = alt_test_dicts(humans, judges, settings=AltTestSettings(epsilon=eps))
        times.append(time.perf_counter() - t)
    theirs = {j: r[repr(eps)] for j, r in reference["sets"][args.set]["judges"].items()}
    same = all((mine[j].winning_rate, mine[j].advantage_probability) ==
               (theirs[j]["winning_rate"], theirs[j]["advantage_prob"]) for j in judges)
    p_same = all(len(mine[j].annotators) == len(theirs[j]["p_values"]) and
                 all(abs(a.p_value - b) <= 1e-9 * max(abs(b), 1e-300)
                     for a, b in zip(mine[j].annotators, theirs[j]["p_values"], strict=True)) for j in judges)
    for j in judges:
        print(f"  {j:<14} winning rate {theirs[j]['winning_rate']:.3f} / {mine[j].winning_rate:.3f}   advantage "
              f"{theirs[j]['advantage_prob']:.4f} / {mine[j].advantage_probability:.4f}")
    print(f"evalign alt_test_dicts(): {min(times):.4f} s (best of {args.repeats}); upstream not run (no licence)")
    print(f"identical winning rates and advantage probabilities: {same}; p-values equal (rel 1e-9): {p_same}")
    if not (same and p_same):
        raise SystemExit("results differ")


if __name__ == "__main__":
    main()
