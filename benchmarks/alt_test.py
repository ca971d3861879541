"""The Alt-Test: evalign vs upstream's ``alt_test()`` (Calderon et al. 2025), the six judges on SummEval
(6,400 items, 3 expert annotators, neg_rmse, epsilon 0.2), same data, one run.

Upstream's function is executed from the data folder's reference copy
(``$EVALIGN_DATA_DIR/alttest/reference/alt_test_upstream.py``; never copied into evalign), one call per
judge as its notebook does. evalign tests all six judges in one call (:func:`evalign.meta.alt_test.alt_test_dicts`,
from the same JSON dicts: the conversion to arrays is inside the timed run). Each side runs ``--repeats``
times; the best time counts. Prints both times, the ratio (upstream / evalign; goal >= 20) and whether the
winning rates, advantage probabilities and p-values are identical.

Usage: ``python benchmarks/alt_test.py [--set summeval] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import time
import warnings
from pathlib import Path

#: upstream's epsilon and scoring per set (alttest/SOURCE.md)
SETS = {"summeval": (0.2, "neg_rmse"), "10k_prompts": (0.15, "neg_rmse"), "mtbench": (0.2, "accuracy"),
        "framing": (0.15, "accuracy"), "cebab_aspects": (0.1, "accuracy")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="summeval", choices=sorted(SETS))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from evalign.datasets.external import default_data_dir
    from evalign.meta.alt_test import AltTestSettings, alt_test_dicts

    root = Path(os.environ.get("EVALIGN_DATA_DIR") or default_data_dir()) / "alttest"
    spec = importlib.util.spec_from_file_location("alt_test_upstream", root / "reference" / "alt_test_upstream.py")
    assert spec is not None and spec.loader is not None
    upstream = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(upstream)
    eps, scoring = SETS[args.set]
    humans = json.loads((root / args.set / "human_annotations.json").read_text())
    judges = json.loads((root / args.set / "llm_annotations.json").read_text())
    n_items = len({i for a in humans.values() for i in a})
    print(f"{args.set}: {n_items} items, {len(humans)} annotators, {len(judges)} judges, epsilon {eps}, {scoring}")

    p_seen: list[float] = []
    ttest = upstream.ttest

    def recording(indicators: list[int], epsilon: float) -> float:
        p = ttest(indicators, epsilon)
        p_seen.append(float(p))
        return p

    def peer() -> dict[str, tuple[float, float]]:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {j: upstream.alt_test(labels, humans, scoring, eps) for j, labels in judges.items()}

    def ours() -> dict:
        return alt_test_dicts(humans, judges, settings=AltTestSettings(epsilon=eps))

    times: dict[str, list[float]] = {"upstream": [], "evalign": []}
    theirs, mine = {}, {}
    for _ in range(args.repeats):
        for name, fn in (("upstream", peer), ("evalign", ours)):
            t = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t)
            if name == "upstream":
                theirs = out
            else:
                mine = out
    upstream.ttest = recording  # one more, untimed, upstream run that records its p-values
    peer()
    upstream.ttest = ttest
    p_ours = [a.p_value for r in mine.values() for a in r.annotators]
    same = all((mine[j].winning_rate, mine[j].advantage_probability) == theirs[j] for j in judges)
    p_same = len(p_ours) == len(p_seen) and all(abs(a - b) <= 1e-9 * max(abs(b), 1e-300)
                                                for a, b in zip(p_ours, p_seen, strict=True))
    best = {k: min(v) for k, v in times.items()}
    for j in judges:
        w, a = theirs[j]
        print(f"  {j:<14} winning rate {w:.3f} / {mine[j].winning_rate:.3f}   advantage {a:.4f} / "
              f"{mine[j].advantage_probability:.4f}")
    print(f"upstream alt_test(): {best['upstream']:.3f} s (best of {args.repeats})")
    print(f"evalign alt_test_dicts(): {best['evalign']:.4f} s (best of {args.repeats})")
    print(f"ratio upstream / evalign: {best['upstream'] / best['evalign']:.1f}x (goal >= 20x)")
    print(f"identical winning rates and advantage probabilities: {same}; p-values equal (rel 1e-9): {p_same}")
    if not (same and p_same):
        raise SystemExit("results differ")


if __name__ == "__main__":
    main()
