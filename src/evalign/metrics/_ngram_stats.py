"""sacrebleu's BLEU and chrF sufficient statistics in memory bounded by the input size.

sacrebleu counts *every* n-gram of a hypothesis in a ``Counter`` (BLEU first builds a list of all
of them), so one 50 MB response takes gigabytes. A match can only be an n-gram of the reference,
so these functions count just those: they scan the hypothesis once and, at each position, extend
the n-gram only while it is still an n-gram of the reference (every prefix of a reference n-gram is
a reference n-gram). Hypothesis totals follow from its length. Tokenisation, lowercasing,
punctuation handling, reference merging and the closest reference length are sacrebleu's own
methods; the returned lists are value for value those of sacrebleu's
``_extract_corpus_statistics([hyp], [[r] for r in refs])[0]`` (pinned by a test on random input),
so sacrebleu turns them into its scores (:func:`evalign.metrics.lexical.sacrebleu_score`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any


def _matches(units: Iterable[Any], ref: Sequence[Counter], join: Any) -> tuple[list[int], int]:
    """Per order n (index n-1): the sum over reference n-grams g of min(count of g in ``units``,
    count in ``ref[n-1]``), and the number of units. ``units`` is consumed once (an iterator is
    fine: only the last ``len(ref)`` units are kept); ``join(window)`` builds an n-gram from the
    last n units. The n-grams ending at each unit are extended backwards only while they are
    reference n-grams (every part of a reference n-gram is one)."""
    max_n = len(ref)
    hits: list[Counter] = [Counter() for _ in range(max_n)]
    window: deque[Any] = deque(maxlen=max(max_n, 1))
    size = 0
    for u in units:
        window.append(u)
        size += 1
        for n in range(1, min(max_n, len(window)) + 1):
            g = join(list(window)[-n:]) if n > 1 else join([u])
            if g not in ref[n - 1]:
                break
            hits[n - 1][g] += 1
    return [sum(min(c, ref[n][g]) for g, c in hits[n].items()) for n in range(max_n)], size


def _words(text: str) -> Iterator[str]:
    """``text.split()`` one word at a time (no list of all words)."""
    return (m.group() for m in _WORD.finditer(text))


_WORD = re.compile(r"\S+")  # \S is the complement of str.split()'s whitespace (same Unicode set)
_SPACE = re.compile(r"\s+")


@functools.cache
def _no_space() -> dict[int, None]:
    """A str.translate table deleting every character that ``str.split()`` splits on."""
    return dict.fromkeys(c for c in range(0x110000) if chr(c).isspace())


def _text_gram(window: list[str]) -> str:
    return "".join(window)


def _word_gram(window: list[str]) -> str:
    return " ".join(window)


#: texts at least this long are tokenised by :func:`_bleu_tokens` in chunks of about this size
LONG_TEXT = 100_000


def _bleu_tokens(bleu: Any, text: str) -> Iterator[str]:
    """The words of ``bleu._preprocess_segment(text)``, one at a time.

    A long text with the default ``13a`` tokenizer is tokenised here, in chunks of about
    :data:`LONG_TEXT` characters cut at whitespace, with sacrebleu's own steps and regular
    expressions: 13a is local to each whitespace-separated word (its patterns see at most two
    characters, and a word's neighbour is always whitespace), so the chunks give the same words
    while sacrebleu's ``" ".join(line.split())`` over the whole text (a list of every word, and
    ``re.sub`` pieces for every space: gigabytes for a 50 MB text) is never built and nothing is
    kept in sacrebleu's tokenizer caches."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok = bleu.tokenizer
    if len(text) < LONG_TEXT or type(tok) is not Tokenizer13a:
        yield from _words(bleu._preprocess_segment(text))
        return
    line = (text.lower() if bleu.lowercase else text).rstrip()
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    start = 0
    while start < len(line):
        cut = _SPACE.search(line, min(start + LONG_TEXT, len(line)))
        end = cut.end() if cut is not None else len(line)  # the chunk ends after a run of whitespace
        chunk = f" {line[start:end]} "
        for regex, repl in tok._post_tokenizer._re:
            chunk = regex.sub(repl, chunk)
        yield from _words(chunk)
        start = end


def bleu_stats(bleu: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
    """``[hyp_len, ref_len, correct_1..N, total_1..N]`` of one hypothesis against its references
    (jointly, as in corpus BLEU; one reference for sentence BLEU) for a ``sacrebleu.metrics.BLEU``."""
    info = bleu._extract_reference_info([bleu._preprocess_segment(r) for r in references])
    ref_ngrams: Counter = info["ref_ngrams"] if info["ref_ngrams"] is not None else Counter()
    order = bleu.max_ngram_order
    by_order: list[Counter] = [Counter() for _ in range(order)]
    for g, c in ref_ngrams.items():
        by_order[len(g) - 1][g] = c
    correct, hyp_len = _matches(_bleu_tokens(bleu, hypothesis), by_order, tuple)
    ref_len = bleu._get_closest_ref_len(hyp_len, info["ref_lens"])
    total = [max(0, hyp_len - n) for n in range(order)]
    return [hyp_len, ref_len, *correct, *total]


def _chrf_one(chrf: Any, hyp_chars: str, hyp_words: list[str] | None, reference: str) -> list[int]:
    ref = chrf._preprocess_segment(reference)
    ref_ngrams = chrf._extract_reference_info([ref])["ref_ngrams"][0]  # char orders, then word orders
    stats: list[int] = []
    char_refs = ref_ngrams[: chrf.char_order]
    char_matches, _ = _matches(hyp_chars, char_refs, _text_gram)
    for n, (r, m) in enumerate(zip(char_refs, char_matches, strict=True), start=1):
        stats += [max(0, len(hyp_chars) - n + 1) if r else 0, sum(r.values()), m]
    if chrf.word_order > 0:
        assert hyp_words is not None
        word_refs = ref_ngrams[chrf.char_order :]
        word_matches, _ = _matches(hyp_words, word_refs, _word_gram)
        for n, (r, m) in enumerate(zip(word_refs, word_matches, strict=True), start=1):
            stats += [max(0, len(hyp_words) - n + 1) if r else 0, sum(r.values()), m]
    return stats


def chrf_stats(chrf: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
    """``[hyp, ref, match]`` per order (characters, then words) of one hypothesis against the
    reference with the best chrF (the first on ties, as sacrebleu) for a ``sacrebleu.metrics.CHRF``."""
    hyp = chrf._preprocess_segment(hypothesis)
    hyp_chars = hyp if chrf.whitespace else hyp.translate(_no_space())  # = "".join(hyp.split()), without a word list
    hyp_words = chrf._remove_punctuation(hyp) if chrf.word_order > 0 else None
    best: list[int] = []
    best_f = -1.0
    for reference in references:
        stats = _chrf_one(chrf, hyp_chars, hyp_words, reference)
        f = chrf._compute_f_score(stats)
        if f > best_f:
            best, best_f = stats, f
    return best
