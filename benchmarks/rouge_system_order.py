"""Which configuration of each lexical metric orders the 8 Self-Instruct systems as the humans do?

A measurement, not a tuning: every configuration below is scored once on the 2,016 bundled
Self-Instruct items (252 instructions x 8 GPT-3-family systems) and its system order is compared
with the human order of the SemScore paper (Aynetdinov & Akbik 2024, Table 2, column "Human",
restricted to these 8 of its 12 systems; ``human_system_ranking.json`` of the bundled data).
The paper's per-metric orders (its BLEU, ROUGE-L ... rows) are not bundled, so each configuration
is compared with the human order only.

Configurations: BLEU and chrF as sacrebleu corpus statistics per system and as the mean of
sentence scores; ROUGE-1/2/L/Lsum (F-measure, rouge-score identical) with and without the Porter
stemmer, system score = mean of item scores. Printed per configuration: the system order (best
first, by the human ranks: 3 = text-davinci-003 ... 11 = davinci), Kendall tau-b against the human
ranks, the discordant system pairs (of 28) and whether the order is exactly the human one.

Usage: ``python benchmarks/rouge_system_order.py``
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import scipy.stats

from evalign.datasets import load_dataset
from evalign.io import references_of
from evalign.metrics import get_metric


def configurations() -> list[tuple[str, str, dict[str, object], str]]:
    """(label, metric name, options, system score: ``corpus`` or ``mean``)."""
    out: list[tuple[str, str, dict[str, object], str]] = [
        ("bleu (corpus)", "bleu", {}, "corpus"),
        ("bleu (mean of sentence BLEU)", "bleu", {}, "mean"),
        ("chrf (corpus)", "chrf", {}, "corpus"),
        ("chrf (mean of sentence chrF)", "chrf", {}, "mean"),
    ]
    for name in ("rouge_1", "rouge_2", "rouge_l", "rouge_lsum"):
        for stem in (False, True):
            out.append((f"{name} ({'stemmer' if stem else 'no stemmer'})", name, {"use_stemmer": stem}, "mean"))
    return out


def system_values(items: pd.DataFrame, name: str, options: dict[str, object], how: str) -> pd.Series:
    metric = get_metric(name, **options)
    out = {}
    for system, group in items.groupby("system", sort=True):
        responses = [str(r) for r in group["response"]]
        refs = references_of(group)
        if how == "corpus":
            out[system] = metric.system_score(responses, refs)
        else:
            out[system] = float(np.mean(metric.score(responses, refs).values))
    return pd.Series(out)


def main() -> None:
    ds = load_dataset("self_instruct")
    ranks = pd.Series(ds.system_human).astype(float)  # 1 = best among the paper's 12
    systems = sorted(ranks.index, key=lambda s: ranks[s])
    print("human order (SemScore paper, Table 2 'Human', ranks among 12):",
          ", ".join(f"{s} ({int(ranks[s])})" for s in systems))
    print(f"{'configuration':<32} {'order by metric (human ranks)':<34} {'tau_b':>6} {'disc.':>6}  same order")
    for label, name, options, how in configurations():
        vals = system_values(ds.items, name, options, how)
        order = sorted(vals.index, key=lambda s: -vals[s])
        tau = scipy.stats.kendalltau(-ranks[vals.index], vals).statistic
        disc = sum((ranks[a] - ranks[b]) * (vals[b] - vals[a]) < 0 for a, b in itertools.combinations(vals.index, 2))
        ranks_txt = " ".join(str(int(ranks[s])) for s in order)
        print(f"{label:<32} {ranks_txt:<34} {tau:>6.3f} {disc:>6}  {'yes' if order == systems else 'no'}")


if __name__ == "__main__":
    main()
