"""sacrebleu's BLEU and chrF sufficient statistics in memory bounded by the input size.

sacrebleu counts *every* n-gram of a hypothesis in a ``Counter`` (BLEU first builds a list of all
of them), so one 50 MB response takes gigabytes. A match can only be an n-gram of the reference,
so these functions count just those: they scan the hypothesis once and, at each position, extend
the n-gram only while it is still an n-gram of the reference (every prefix of a reference n-gram is
a reference n-gram). Hypothesis totals follow from its length. Tokenisation, lowercasing,
punctuation handling, reference merging and the closest reference length are sacrebleu's own
methods; the returned lists are value for value those of sacrebleu's
``_extract_corpus_statistics([hyp], [[r] for r in refs])[0]`` (pinned by a test on random input),
so sacrebleu's ``_compute_score_from_stats`` turns them into its scores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def _matches(units: Sequence[Any], ref: Sequence[Counter], join: Any) -> list[int]:
    """Per order n (1-based index n-1): sum over reference n-grams g of min(count in ``units``, count in ref).

    ``ref[n-1]`` is the Counter of reference n-grams; ``join(units, i, n)`` builds the n-gram at ``i``."""
    max_n = len(ref)
    hits: list[Counter] = [Counter() for _ in range(max_n)]
    size = len(units)
    for i in range(size):
        for n in range(1, min(max_n, size - i) + 1):
            g = join(units, i, n)
            if g not in ref[n - 1]:
                break
            hits[n - 1][g] += 1
    return [sum(min(c, ref[n][g]) for g, c in hits[n].items()) for n in range(max_n)]


def _tuple_gram(units: Sequence[str], i: int, n: int) -> tuple[str, ...]:
    return tuple(units[i : i + n])


def _text_gram(units: str, i: int, n: int) -> str:
    return units[i : i + n]


def _word_gram(units: Sequence[str], i: int, n: int) -> str:
    return " ".join(units[i : i + n])


def bleu_stats(bleu: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
    """``[hyp_len, ref_len, correct_1..N, total_1..N]`` of one hypothesis against its references
    (jointly, as in corpus BLEU; one reference for sentence BLEU) for a ``sacrebleu.metrics.BLEU``."""
    info = bleu._extract_reference_info([bleu._preprocess_segment(r) for r in references])
    ref_ngrams: Counter = info["ref_ngrams"] if info["ref_ngrams"] is not None else Counter()
    order = bleu.max_ngram_order
    by_order: list[Counter] = [Counter() for _ in range(order)]
    for g, c in ref_ngrams.items():
        by_order[len(g) - 1][g] = c
    tokens = bleu._preprocess_segment(hypothesis).split()
    hyp_len = len(tokens)
    ref_len = bleu._get_closest_ref_len(hyp_len, info["ref_lens"])
    correct = _matches(tokens, by_order, _tuple_gram)
    total = [max(0, hyp_len - n) for n in range(order)]
    return [hyp_len, ref_len, *correct, *total]


def _chrf_one(chrf: Any, hyp_chars: str, hyp_words: list[str] | None, reference: str) -> list[int]:
    ref = chrf._preprocess_segment(reference)
    ref_ngrams = chrf._extract_reference_info([ref])["ref_ngrams"][0]  # char orders, then word orders
    stats: list[int] = []
    char_refs = ref_ngrams[: chrf.char_order]
    for n, (r, m) in enumerate(zip(char_refs, _matches(hyp_chars, char_refs, _text_gram), strict=True), start=1):
        stats += [max(0, len(hyp_chars) - n + 1) if r else 0, sum(r.values()), m]
    if chrf.word_order > 0:
        assert hyp_words is not None
        word_refs = ref_ngrams[chrf.char_order :]
        for n, (r, m) in enumerate(zip(word_refs, _matches(hyp_words, word_refs, _word_gram), strict=True), start=1):
            stats += [max(0, len(hyp_words) - n + 1) if r else 0, sum(r.values()), m]
    return stats


def chrf_stats(chrf: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
    """``[hyp, ref, match]`` per order (characters, then words) of one hypothesis against the
    reference with the best chrF (the first on ties, as sacrebleu) for a ``sacrebleu.metrics.CHRF``."""
    hyp = chrf._preprocess_segment(hypothesis)
    hyp_chars = hyp if chrf.whitespace else "".join(hyp.split())
    hyp_words = chrf._remove_punctuation(hyp) if chrf.word_order > 0 else None
    best: list[int] = []
    best_f = -1.0
    for reference in references:
        stats = _chrf_one(chrf, hyp_chars, hyp_words, reference)
        f = chrf._compute_f_score(stats)
        if f > best_f:
            best, best_f = stats, f
    return best
