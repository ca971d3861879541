"""Near-duplicate filter (pinned to rouge-score on random texts) and the balance step."""

from __future__ import annotations

import random

from rouge_score import rouge_scorer

from evalign.synth.filters import balance, novel


def _brute(cands: list[str], existing: list[str], threshold: float) -> list[bool]:
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    kept = list(existing)
    out = []
    for c in cands:
        keep = all(scorer.score(k, c)["rougeL"].fmeasure < threshold for k in kept)
        out.append(keep)
        if keep:
            kept.append(c)
    return out


def test_novel_matches_rouge_score_on_random_texts() -> None:
    rng = random.Random(7)
    vocab = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]
    for trial in range(20):
        base = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12))) for _ in range(12)]
        texts = base + [t + " " + rng.choice(vocab) for t in base[:4]]  # some near-duplicates
        rng.shuffle(texts)
        thr = rng.choice([0.3, 0.5, 0.7, 0.9])
        assert novel(texts[3:], texts[:3], threshold=thr, tokenizer="rouge") == _brute(texts[3:], texts[:3], thr), trial


def test_novel_unicode_and_empty() -> None:
    assert novel(["Çok güzel bir gün", "çok güzel bir gün!", "başka bir şey"]) == [True, False, True]
    assert novel(["", "?", "words"]) == [True, False, True]  # two texts without tokens are duplicates


def test_balance() -> None:
    scores = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 3]
    groups = [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 3, 3]
    keep = balance(scores, groups)
    kept = [s for s, k in zip(scores, keep, strict=True) if k]
    assert sorted(kept) == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert keep[:5] == [True] * 5 and keep[10:] == [False, False]  # complete instruction kept, group 3 dropped
    assert balance([1, 2, 3, 4], [0, 0, 0, 0]) == [False] * 4  # no score 5: nothing balances
