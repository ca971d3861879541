"""Filters of the generated data: near-duplicates by ROUGE-L (Self-Instruct's rule, used by the
Prometheus paper) and the balance step giving every score the same number of rows.

ROUGE-L is evalign's own fast path (:mod:`evalign.metrics.lexical`: tokens encoded once, bit-parallel
LCS from rapidfuzz, rouge-score's arithmetic), with the Unicode-aware tokenizer so non-English text is
compared too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np

from evalign.metrics.lexical import RougeL, encode_token_sequences, lcs_lengths, rouge_l_prf

#: Self-Instruct's threshold: a new text is kept when its ROUGE-L with every kept text is below it
DEFAULT_THRESHOLD = 0.7


def novel(candidates: Sequence[str], existing: Sequence[str] = (), *, threshold: float = DEFAULT_THRESHOLD,
          tokenizer: str = "unicode") -> list[bool]:
    """Greedy near-duplicate filter: ``candidates`` are visited in order and one is kept (True) when its
    ROUGE-L F-measure with every ``existing`` text and every candidate kept before it is below
    ``threshold`` (in [0, 1]). A candidate without tokens is kept only if no kept text lacks tokens too."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    metric = RougeL(tokenizer=tokenizer)
    texts = [*existing, *candidates]
    seqs, lengths = encode_token_sequences(texts, metric.tokenize, metric.max_char_vocab)
    kept: list[int] = list(range(len(existing)))
    out: list[bool] = []
    for j in range(len(existing), len(texts)):
        keep = True
        if kept:
            lcs = lcs_lengths([seqs[j]] * len(kept), [seqs[k] for k in kept])
            n_kept = lengths[kept]
            _, _, f = rouge_l_prf(lcs, n_kept, np.full(len(kept), lengths[j]))
            empty_clash = lengths[j] == 0 and bool((n_kept == 0).any())
            keep = bool((f < threshold).all()) and not empty_clash
        out.append(keep)
        if keep:
            kept.append(j)
    return out


def balance(scores: Sequence[int], groups: Sequence[Hashable]) -> list[bool]:
    """Equal counts per score: every score keeps ``min`` (over the scores present) rows. Rows of groups
    (instructions) with more valid scores are kept first, then the earlier rows; returns a keep mask.
    With a score missing entirely nothing can be balanced, so nothing is kept."""
    if len(scores) != len(groups):
        raise ValueError(f"{len(scores)} scores but {len(groups)} groups")
    present = Counter(scores)
    if not present or set(present) != set(range(1, 6)):
        return [False] * len(scores)
    n = min(present.values())
    size = Counter(groups)
    order = sorted(range(len(scores)), key=lambda i: (-size[groups[i]], i))
    taken: Counter[int] = Counter()
    keep = [False] * len(scores)
    for i in order:
        if taken[scores[i]] < n:
            taken[scores[i]] += 1
            keep[i] = True
    return keep
