"""Paired comparison of the trained models of several ``make_reward_judge.py`` runs (issue 40).

For every held-out set, the first run's trained model against each other run's: the accuracy difference
and the paired permutation p (:func:`evalign.train.before_after.held_out_table`), on the same pairs
(``--first N``). The verdicts come from each run's own cache (``RUN/cache.sqlite``), so nothing is scored
again when the runs judged the same pairs. Example::

    python benchmarks/compare_reward_runs.py /tmp/crw/contrastive /tmp/crw/human /tmp/crw/mixed --first 50
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import make_reward_judge as recipe
from evalign.cache import Cache
from evalign.train.before_after import held_out_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="work folders of make_reward_judge.py (the first is compared)")
    ap.add_argument("--held-out", nargs="+", default=list(recipe.HELD_OUT))
    ap.add_argument("--first", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    rargs = recipe.parse_args(["--out", str(args.runs[0]), "--device", args.device])
    names = [p.name for p in args.runs]
    target, others = names[0], names[1:]
    print("| set | " + " | ".join(f"{target} - {o} (p)" for o in others) + " |")
    print("|---|" + "---|" * len(others))
    for spec, ds in recipe.loadable(args.held_out, []).items():
        pairs = ds.pairs.reset_index(drop=True)
        if args.first:
            pairs = pairs.head(args.first).reset_index(drop=True)
        verdicts = {}
        for name, run in zip(names, args.runs, strict=True):
            v = recipe.judged(rargs, "trained", run / "trained", pairs, Cache(run / "cache.sqlite"))
            verdicts[name] = (v, v)
        gold = pairs[ds.pref_columns].to_numpy(dtype=float)
        gold = gold[:, 0] if gold.shape[1] == 1 else np.sign(np.nansum(gold, axis=1))
        gold = np.where(gold == 0, np.nan, gold)
        t = held_out_table(verdicts, gold, target=target, seed=0).table.set_index("judge")
        print(f"| {spec} | " + " | ".join(f"{t.at[o, 'difference']:+.3f} ({t.at[o, 'p_value']:.3f})" for o in others)
              + " |", flush=True)


if __name__ == "__main__":
    main()
