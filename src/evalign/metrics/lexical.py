"""Lexical (string-overlap) metrics: ``bleu``, ``chrf``, the ROUGE family and ``exact_match``.

* ``bleu`` and ``chrf`` are sacrebleu's own implementations: sentence scores per item, corpus
  scores per system. Values are on sacrebleu's 0-100 scale. The n-gram statistics are counted in
  memory bounded by the input (:mod:`evalign.metrics._ngram_stats`, equal to sacrebleu's) and once
  per text: the system score reuses the item statistics.
* ``rouge_l`` is ROUGE-L F-measure, value for value identical to
  ``rouge_score.rouge_scorer.RougeScorer(["rougeL"], use_stemmer=...)`` (same tokenizer, same
  Porter-stemming rule, same arithmetic), but the longest common subsequence is computed by
  rapidfuzz's bit-parallel ``LCSseq`` instead of rouge-score's pure-Python table. Range 0-1.
* ``rouge_1``, ``rouge_2`` (n-gram overlap) and ``rouge_lsum`` (summary-level LCS over the
  newline-separated lines) are value for value identical to rouge-score's ``rouge1``, ``rouge2``
  and ``rougeLsum``, with the tokenizer options, tokenization cache and multi-reference rule of
  ``rouge_l``.
* ``exact_match`` is SQuAD-style normalised exact match, 1.0 or 0.0.

With several references an item's value is the best value over its references (the project
rule); items without a reference get NaN.
"""

from __future__ import annotations

import functools
import itertools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from evalign.errors import EvalignError
from evalign.metrics._ngram_stats import bleu_stats, chrf_stats
from evalign.metrics.base import (
    Metric,
    MetricResult,
    argmax_by_owner,
    best_over_references,
    flatten_references,
    register_metric,
)
from evalign.metrics.options import OptionSpec

# --- sacrebleu metrics ------------------------------------------------------------------------


def _sacrebleu_info(metric: Any) -> dict[str, Any]:
    """The settings part of a sacrebleu metric's own signature (without ``nrefs``/``version``:
    the version goes into evalign's signature through ``dists``)."""
    metric.sentence_score("a", ["a"])  # sacrebleu only builds a signature after a first score
    info = metric.get_signature().info
    return {k: v for k, v in info.items() if v is not None and k not in ("nrefs", "version")}


#: distinct (response, reference) pairs whose statistics a metric object keeps between calls
_MEMO_LIMIT = 200_000


def sacrebleu_score(scorer: Any, stats: Any) -> Any:
    """sacrebleu's score of sufficient statistics for a sacrebleu metric object (``BLEU``, ``CHRF``):
    its ``_compute_score_from_stats(stats).score``, in the statistics' own number type (float32 sums
    give sacrebleu's float32 chrF, as in its own paired bootstrap). sacrebleu has no public function
    for this (chrF has none at all), so this is the one place evalign calls that private method;
    ``tests/metrics/test_lexical_stats_parity.py`` pins it to sacrebleu's ``corpus_score``."""
    return scorer._compute_score_from_stats(stats).score


def _sentence_scores(
    metric: Metric, scorer: Any, stats_fn: Callable[[Any, str, Sequence[str]], list[int]],
    responses: Sequence[str], references: Sequence[Sequence[str]],
) -> np.ndarray:
    """Sentence scores (best single reference) from sacrebleu sufficient statistics computed in
    bounded memory (:mod:`evalign.metrics._ngram_stats`); each distinct (response, reference) pair
    is counted once and its statistics are kept on ``metric`` (up to :data:`_MEMO_LIMIT` pairs,
    across calls) for :func:`_item_stats`, so a text is scored once per run, not again for the
    system score."""
    memo: dict[tuple[str, str], list[int]] | None = getattr(metric, "_pair_stats", None)
    if memo is None or len(memo) > _MEMO_LIMIT:  # kept across calls (e.g. two datasets), bounded
        memo = {}
        metric._pair_stats = memo  # type: ignore[attr-defined]

    def pair_fn(hyps: list[str], refs: list[str]) -> np.ndarray:
        out = np.empty(len(hyps), dtype=float)
        for i, (h, r) in enumerate(zip(hyps, refs, strict=True)):
            st = memo.get((h, r))
            if st is None:
                st = memo[(h, r)] = stats_fn(scorer, h, [r])
            out[i] = float(sacrebleu_score(scorer, st))
        return out

    return best_over_references(pair_fn, responses, references)


def _item_stats(
    metric: Metric, scorer: Any, stats_fn: Callable[[Any, str, Sequence[str]], list[int]],
    responses: Sequence[str], references: Sequence[Sequence[str]],
) -> list[list[int] | None]:
    """Each item's corpus sufficient statistics against all its references (None without a
    reference), reusing those of the last :func:`_sentence_scores` run."""
    if len(responses) != len(references):
        raise ValueError(f"{len(responses)} responses but {len(references)} reference lists")
    memo: dict[tuple[str, str], list[int]] = getattr(metric, "_pair_stats", {})
    out: list[list[int] | None] = []
    for h, refs in zip(responses, references, strict=True):
        if not refs:
            out.append(None)
            continue
        known = memo.get((h, refs[0])) if len(refs) == 1 else None
        out.append(known if known is not None else stats_fn(scorer, str(h), list(refs)))
    return out


class _SacrebleuCorpus(Metric):
    """A sacrebleu metric scored at system level by its corpus score (``system_level = "corpus"``),
    with sacrebleu's sufficient-statistics hooks (as sacrebleu's ``metrics/base.py``):
    :meth:`item_stats` gives each item's statistics, :meth:`score_from_stats` turns summed
    statistics into the corpus score; :meth:`system_score` is the two together."""

    system_level: ClassVar[str] = "corpus"

    @staticmethod
    def _stats_fn(scorer: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
        """The n-gram statistics of one hypothesis against its references (:mod:`evalign.metrics._ngram_stats`)."""
        raise NotImplementedError

    @property
    def corpus_scorer(self) -> Any:
        """The sacrebleu metric object of the corpus score."""
        raise NotImplementedError

    def system_score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
        """sacrebleu's corpus score (all references of an item jointly; items without one left out)
        from the per-item statistics, reusing those of the last :meth:`score` run; NaN without items."""
        stats = [st for st in self.item_stats(responses, references) if st is not None]
        if not stats:
            return float("nan")
        from sacrebleu.utils import sum_of_lists

        return float(self.score_from_stats(sum_of_lists(stats)))

    def item_stats(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> list[list[int] | None]:
        """Each item's corpus sufficient statistics (None for an item without a reference)."""
        return _item_stats(self, self.corpus_scorer, self._stats_fn, responses, references)

    def score_from_stats(self, stats: Any) -> Any:
        """The corpus score of summed per-item statistics (:meth:`item_stats` added up), computed by
        sacrebleu in the statistics' own number type (:func:`sacrebleu_score`)."""
        return sacrebleu_score(self.corpus_scorer, stats)


#: BLEU's effective-order setting at each level: item (sentence) scores use it, the corpus score does not
EFFECTIVE_ORDER = "items-yes,corpus-no"


@register_metric
class Bleu(_SacrebleuCorpus):
    """sacrebleu BLEU.

    Item value: sentence BLEU with effective n-gram order (``BLEU(effective_order=True)
    .sentence_score``), 0-100; with several references, the best single-reference score.
    System value (:meth:`system_score`): sacrebleu corpus BLEU over the system's items with all
    their references (effective order off, as in ``sacrebleu.corpus_bleu``); items with fewer
    references are padded with ``None``, items without a reference are left out. The signature
    states both: ``eff:items-yes,corpus-no``.
    """

    name: ClassVar[str] = "bleu"
    higher_is_better: ClassVar[bool] = True
    description: ClassVar[str] = "sacrebleu BLEU (sentence, effective order; corpus BLEU per system), 0-100"
    dists: ClassVar[tuple[str, ...]] = ("sacrebleu",)
    column_options: ClassVar[tuple[str, ...]] = ("tok",)
    defaults: ClassVar[dict[str, Any]] = {"tok": "13a"}
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "tokenize": OptionSpec(str, help="a sacrebleu tokenizer (13a, intl, char, none, zh, ...; checked by sacrebleu)"),
        "smooth_method": OptionSpec(str, choices=("exp", "floor", "add-k", "none")),
        "smooth_value": OptionSpec(float, min=0, none_ok=True),
        "lowercase": OptionSpec(bool),
    }

    @staticmethod
    def _stats_fn(scorer: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
        return bleu_stats(scorer, hypothesis, references)

    corpus_scorer = property(lambda self: self._corpus, doc="the sacrebleu BLEU object of the corpus score")

    def __init__(
        self,
        tokenize: str = "13a",
        smooth_method: str = "exp",
        smooth_value: float | None = None,
        lowercase: bool = False,
    ) -> None:
        from sacrebleu.metrics import BLEU

        kwargs: dict[str, Any] = {
            "tokenize": tokenize,
            "smooth_method": smooth_method,
            "smooth_value": smooth_value,
            "lowercase": lowercase,
        }
        try:
            self._sentence = BLEU(effective_order=True, **kwargs)
            self._corpus = BLEU(effective_order=False, **kwargs)
        except Exception as e:  # sacrebleu raises plain errors for unknown tokenizers/methods
            raise EvalignError(f"bleu: bad option ({e})") from e
        # sacrebleu's signature says ``eff:yes`` for the sentence object; the corpus score is computed
        # without effective order (as ``sacrebleu.corpus_bleu``), so the signature names both levels
        self._options = {k: (EFFECTIVE_ORDER if k == "eff" else v)
                         for k, v in _sacrebleu_info(BLEU(effective_order=True, **kwargs)).items()}

    def options(self) -> dict[str, Any]:
        return dict(self._options)

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        return MetricResult(values=_sentence_scores(self, self._sentence, bleu_stats, responses, references))


@register_metric
class Chrf(_SacrebleuCorpus):
    """sacrebleu chrF (chrF++ with ``word_order=2``), 0-100.

    Item value: ``CHRF.sentence_score``; several references: the best single-reference score.
    System value: sacrebleu corpus chrF with all references (padding as for ``bleu``).
    """

    name: ClassVar[str] = "chrf"
    higher_is_better: ClassVar[bool] = True
    description: ClassVar[str] = "sacrebleu chrF (character n-gram F-score; corpus chrF per system), 0-100"
    dists: ClassVar[tuple[str, ...]] = ("sacrebleu",)
    column_options: ClassVar[tuple[str, ...]] = ("nw",)
    defaults: ClassVar[dict[str, Any]] = {"nw": 0}
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "char_order": OptionSpec(int, min=1, help="character n-gram order"),
        "word_order": OptionSpec(int, min=0, help="word n-gram order (2 = chrF++)"),
        "beta": OptionSpec(int, min=1, help="recall weight"),
        "lowercase": OptionSpec(bool),
        "whitespace": OptionSpec(bool),
    }

    @staticmethod
    def _stats_fn(scorer: Any, hypothesis: str, references: Sequence[str]) -> list[int]:
        return chrf_stats(scorer, hypothesis, references)

    corpus_scorer = property(lambda self: self._chrf, doc="the sacrebleu CHRF object of the corpus score")

    def __init__(
        self,
        char_order: int = 6,
        word_order: int = 0,
        beta: int = 2,
        lowercase: bool = False,
        whitespace: bool = False,
    ) -> None:
        from sacrebleu.metrics import CHRF

        kwargs: dict[str, Any] = {
            "char_order": char_order,
            "word_order": word_order,
            "beta": beta,
            "lowercase": lowercase,
            "whitespace": whitespace,
        }
        try:
            self._chrf = CHRF(**kwargs)
        except Exception as e:
            raise EvalignError(f"chrf: bad option ({e})") from e
        self._options = {**_sacrebleu_info(CHRF(**kwargs)), "beta": beta}

    def options(self) -> dict[str, Any]:
        return dict(self._options)

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        return MetricResult(values=_sentence_scores(self, self._chrf, chrf_stats, responses, references))


# --- ROUGE-L ----------------------------------------------------------------------------------


class _MemoStemmer:
    """nltk's Porter stemmer (the one rouge-score uses) applied with rouge-score's rule, with a
    memo per word: words longer than 3 characters are stemmed, shorter ones kept; a result that
    fails ``keep`` is dropped."""

    def __init__(self, keep: Callable[[str], Any] = bool) -> None:
        from nltk.stem import porter

        self._stemmer = porter.PorterStemmer()
        self._keep = keep
        self._memo: dict[str, str] = {}  # word -> stem, or "" when the stem is dropped

    def stem_tokens(self, tokens: list[str]) -> list[str]:
        """The stems of ``tokens``, in order, without the dropped ones."""
        memo = self._memo
        for x in set(tokens).difference(memo):
            y = self._stemmer.stem(x) if len(x) > 3 else x
            memo[x] = y if self._keep(y) else ""
        return list(filter(None, map(memo.__getitem__, tokens)))


_ROUGE_TOKEN_RE = re.compile(r"[a-z0-9]+")
_ROUGE_VALID_RE = re.compile(r"^[a-z0-9]+$")  # rouge_score.tokenize.VALID_TOKEN_RE

_NO_SPACE_SCRIPTS = r"\p{Han}\p{Hiragana}\p{Katakana}"
#: one Han/kana character, or a run of letters, marks and digits of any other script
_UNICODE_TOKEN_PATTERN = rf"[{_NO_SPACE_SCRIPTS}]|[[\p{{L}}\p{{M}}\p{{N}}]--[{_NO_SPACE_SCRIPTS}]]+"


@functools.cache
def _unicode_token_re() -> Any:
    import regex

    return regex.compile(_UNICODE_TOKEN_PATTERN, flags=regex.V1)


def rouge_tokens(text: str, stemmer: _MemoStemmer | None = None) -> list[str]:
    """rouge-score's default tokenizer (``rouge_score.tokenize.tokenize``): lower-case, every
    character outside ``[a-z0-9]`` becomes a separator (so non-ASCII letters are dropped), Porter
    stemming of tokens longer than 3 characters when a stemmer is given.

    Implemented as ``[a-z0-9]+`` runs of the lower-cased text, which is what rouge-score's
    replace-then-split-then-filter steps produce (the tests check the two agree).
    """
    tokens: list[str] = _ROUGE_TOKEN_RE.findall(text.lower())
    if stemmer is not None:
        # rouge-score: stem words longer than 3 characters, then drop tokens that are not [a-z0-9]+
        tokens = stemmer.stem_tokens(tokens)
    return tokens


def unicode_tokens(text: str, stemmer: _MemoStemmer | None = None) -> list[str]:
    """evalign's Unicode-aware tokenizer.

    The text is NFC-normalised and lower-cased; a token is a maximal run of Unicode letters,
    combining marks and digits (``\\p{L}\\p{M}\\p{N}``; everything else, ``_`` included, separates),
    except that each Han, Hiragana or Katakana character is a token of its own (those scripts
    do not put spaces between words). On ASCII text it gives exactly rouge-score's tokens.
    With a stemmer, tokens longer than 3 characters are Porter-stemmed (rouge-score's rule).
    """
    tokens: list[str] = _unicode_token_re().findall(unicodedata.normalize("NFC", text).lower())
    if stemmer is not None:
        tokens = stemmer.stem_tokens(tokens)
    return tokens


#: tokenizer registry for ``rouge_l``: name -> function(text, stemmer) -> tokens
ROUGE_TOKENIZERS: dict[str, Callable[[str, _MemoStemmer | None], list[str]]] = {
    "rouge": rouge_tokens,
    "unicode": unicode_tokens,
}


#: code points usable as one-character token ids: all of Unicode except the surrogate block
_CODE_POINTS = (0, 0xD800, 0xE000, 0x110000)


def encode_token_sequences(
    texts: Sequence[str], tokenize: Callable[[str], list[str]], max_char_vocab: int = 0x10F800
) -> tuple[list[Any], np.ndarray]:
    """Tokenize each distinct text once and encode every text's tokens for rapidfuzz.

    Tokens are numbered over all ``texts`` (a per-call vocabulary); a text becomes a string with
    one character per token, so rapidfuzz compares token sequences at string speed. Two texts'
    encodings share a character exactly where their tokens are equal. A vocabulary larger than
    ``max_char_vocab`` (the usable code points) is encoded as lists of ints instead.
    Returns the encoded sequences (aligned with ``texts``) and their token counts.
    """
    tokens = {t: tokenize(t) for t in dict.fromkeys(texts)}
    vocab = dict.fromkeys(itertools.chain.from_iterable(tokens.values()))
    code: dict[str, Any]
    if len(vocab) <= max_char_vocab:
        lo, mid1, mid2, hi = _CODE_POINTS
        points = itertools.chain(range(lo, mid1), range(mid2, hi))
        code = dict(zip(vocab, map(chr, points)))  # noqa: B905 (points outnumber the vocabulary)
        enc: dict[str, Any] = {t: "".join(map(code.__getitem__, toks)) for t, toks in tokens.items()}
    else:
        code = dict(zip(vocab, itertools.count()))
        enc = {t: list(map(code.__getitem__, toks)) for t, toks in tokens.items()}
    lengths = np.fromiter((len(tokens[t]) for t in texts), dtype=np.int64, count=len(texts))
    return [enc[t] for t in texts], lengths


def lcs_lengths(a: Sequence[Any], b: Sequence[Any]) -> np.ndarray:
    """Length of the longest common subsequence of each pair ``(a[i], b[i])`` (strings or
    sequences of hashables), computed with rapidfuzz's bit-parallel ``LCSseq``."""
    from rapidfuzz.distance import LCSseq
    from rapidfuzz.process import cpdist

    if len(a) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(cpdist(a, b, scorer=LCSseq.similarity, dtype=np.int64), dtype=np.int64)


def rouge_l_prf(
    lcs: np.ndarray, n_ref: np.ndarray, n_hyp: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROUGE-L precision, recall and F-measure from LCS lengths and token counts, with
    rouge-score's exact arithmetic (P = lcs/|hyp|, R = lcs/|ref|, F = 2PR/(P+R); all 0 when
    either side has no tokens or P+R = 0)."""
    lcs = np.asarray(lcs, dtype=np.float64)
    defined = (n_ref > 0) & (n_hyp > 0)
    p = np.zeros(len(lcs))
    r = np.zeros(len(lcs))
    np.divide(lcs, n_hyp, out=p, where=defined)
    np.divide(lcs, n_ref, out=r, where=defined)
    f = np.zeros(len(lcs))
    denom = p + r
    np.divide(2 * p * r, denom, out=f, where=denom > 0)
    return p, r, f


class _Rouge(Metric):
    """Shared part of the ROUGE metrics: tokenizer and stemmer options (as rouge-score's
    ``RougeScorer``), and the multi-reference rule (the reference with the best F-measure, first
    one on ties, as ``RougeScorer.score_multi``; extras ``precision`` and ``recall`` belong to it).
    Subclasses give :meth:`score_pairs`."""

    higher_is_better: ClassVar[bool] = True
    dists: ClassVar[tuple[str, ...]] = ("rouge-score", "nltk")
    column_options: ClassVar[tuple[str, ...]] = ("tok", "stem")
    defaults: ClassVar[dict[str, Any]] = {"tok": "rouge", "stem": False}
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "tokenizer": OptionSpec(str, help="rouge or unicode (checked by the class)"),
        "use_stemmer": OptionSpec(bool),
    }

    #: largest token vocabulary encoded as characters (see :func:`encode_token_sequences`)
    max_char_vocab: ClassVar[int] = 0x10F800

    def __init__(self, tokenizer: str = "rouge", use_stemmer: bool = False) -> None:
        if tokenizer not in ROUGE_TOKENIZERS:
            known = ", ".join(sorted(ROUGE_TOKENIZERS))
            raise EvalignError(f"{self.name}: unknown tokenizer '{tokenizer}' (known: {known})")
        self.tokenizer = tokenizer
        self.use_stemmer = bool(use_stemmer)
        keep = _ROUGE_VALID_RE.match if tokenizer == "rouge" else bool
        self._stemmer = _MemoStemmer(keep) if self.use_stemmer else None

    def options(self) -> dict[str, Any]:
        return {"tok": self.tokenizer, "stem": self.use_stemmer}

    def tokenize(self, text: str) -> list[str]:
        """The tokens this metric compares (after stemming, when on)."""
        return ROUGE_TOKENIZERS[self.tokenizer](text, self._stemmer)

    def _encode(self, texts: Sequence[str]) -> tuple[list[Any], np.ndarray]:
        return encode_token_sequences(texts, self.tokenize, self.max_char_vocab)

    def score_pairs(
        self, hyps: Sequence[str], refs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Precision, recall and F-measure of each (hypothesis, reference) pair."""
        raise NotImplementedError

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        hyp, ref, owner = flatten_references(responses, references)
        n = len(responses)
        values = np.full(n, np.nan)
        precision = np.full(n, np.nan)
        recall = np.full(n, np.nan)
        if hyp:
            if len(hyp) != len(ref):
                raise ValueError(f"{len(hyp)} hypotheses but {len(ref)} references")
            p, r, f = self.score_pairs([str(h) for h in hyp], [str(x) for x in ref])
            best = argmax_by_owner(f, owner, n)
            has = best >= 0
            values[has] = f[best[has]]
            precision[has] = p[best[has]]
            recall[has] = r[best[has]]
        return MetricResult(values=values, extras={"precision": precision, "recall": recall})


def _fmeasure(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """rouge-score's ``scoring.fmeasure``: 2PR/(P+R), 0 when P+R = 0 (same operation order)."""
    f = np.zeros(len(p))
    denom = p + r
    np.divide(2 * p * r, denom, out=f, where=denom > 0)
    return f


@register_metric
class RougeL(_Rouge):
    """ROUGE-L F-measure (0-1), identical to rouge-score's ``rougeL``.

    Options: ``tokenizer`` = ``"rouge"`` (rouge-score's tokenizer; drops non-ASCII text) or
    ``"unicode"`` (see :func:`unicode_tokens`); ``use_stemmer``: Porter stemming of tokens
    longer than 3 characters. Several references: the reference with the best F-measure (first
    one on ties, as ``RougeScorer.score_multi``). Extras ``precision`` and ``recall`` belong to
    that reference.
    """

    name: ClassVar[str] = "rouge_l"
    description: ClassVar[str] = "ROUGE-L F-measure (rouge-score tokenizer or Unicode, fast LCS), 0-1"

    def score_pairs(
        self, hyps: Sequence[str], refs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Precision, recall and F-measure of each (hypothesis, reference) pair."""
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
        n = len(hyps)
        seqs, lengths = self._encode([str(h) for h in hyps] + [str(r) for r in refs])
        return rouge_l_prf(lcs_lengths(seqs[n:], seqs[:n]), lengths[n:], lengths[:n])


def _ngram_counts(seq: Any, n: int) -> Counter[Any]:
    """n-gram counts of an encoded token sequence (a string, one character per token: an n-gram
    is a substring; or a list of ints: an n-gram is a tuple)."""
    if isinstance(seq, str):
        return Counter(seq) if n == 1 else Counter(seq[i : i + n] for i in range(len(seq) - n + 1))
    return Counter(tuple(seq[i : i + n]) for i in range(len(seq) - n + 1))


class _RougeN(_Rouge):
    """ROUGE-N F-measure (0-1), identical to rouge-score's ``rouge<N>``: clipped n-gram overlap,
    P = overlap / max(hypothesis n-grams, 1), R = overlap / max(reference n-grams, 1)."""

    n: ClassVar[int] = 1

    def score_pairs(
        self, hyps: Sequence[str], refs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Precision, recall and F-measure of each (hypothesis, reference) pair."""
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
        k = len(hyps)
        seqs, _ = self._encode([*hyps, *refs])
        memo: dict[Any, Counter[Any]] = {}

        def counts(seq: Any) -> Counter[Any]:
            key = seq if isinstance(seq, str) else tuple(seq)
            c = memo.get(key)
            if c is None:
                c = memo[key] = _ngram_counts(seq, self.n)
            return c

        overlap = np.empty(k)
        n_hyp = np.empty(k)
        n_ref = np.empty(k)
        for i in range(k):
            ch, cr = counts(seqs[i]), counts(seqs[k + i])
            small, big = (ch, cr) if len(ch) < len(cr) else (cr, ch)
            overlap[i] = sum(min(v, big[g]) for g, v in small.items() if g in big)
            n_hyp[i] = max(len(seqs[i]) - self.n + 1, 0)
            n_ref[i] = max(len(seqs[k + i]) - self.n + 1, 0)
        p = overlap / np.maximum(n_hyp, 1)
        r = overlap / np.maximum(n_ref, 1)
        return p, r, _fmeasure(p, r)


@register_metric
class Rouge1(_RougeN):
    """ROUGE-1 F-measure (unigram overlap), 0-1, identical to rouge-score's ``rouge1``; options and
    multi-reference rule as ``rouge_l``."""

    name: ClassVar[str] = "rouge_1"
    description: ClassVar[str] = "ROUGE-1 F-measure (unigram overlap, rouge-score identical), 0-1"
    n: ClassVar[int] = 1


@register_metric
class Rouge2(_RougeN):
    """ROUGE-2 F-measure (bigram overlap), 0-1, identical to rouge-score's ``rouge2``; options and
    multi-reference rule as ``rouge_l``."""

    name: ClassVar[str] = "rouge_2"
    description: ClassVar[str] = "ROUGE-2 F-measure (bigram overlap, rouge-score identical), 0-1"
    n: ClassVar[int] = 2


def _lcs_indices(ref: Any, can: Any) -> list[int]:
    """Indices into ``ref`` of the longest common subsequence that rouge-score's ``lcs_ind``
    returns: its dynamic-programming table ``t`` and its backtracking rule (take a match; else step
    left when ``t[i][j-1] > t[i-1][j]``, otherwise up), so ties between several longest subsequences
    are broken the same way.

    The table is not built cell by cell: row ``i`` is kept as one bit-vector ``V_i`` of the
    bit-parallel LCS recurrence (Allison & Dix 1986; Hyyro 2004), ``U = V & match(ref[i])``,
    ``V = (V + U) | (V - U)``, in which ``t[i][j]`` is the number of zero bits among the lowest ``j``
    bits of ``V_i``. The backtrack reads the cells it needs from these rows.
    """
    cols = len(can)
    if not ref or not cols:
        return []
    full = (1 << cols) - 1
    match: dict[Any, int] = {}
    for j, tok in enumerate(can):
        match[tok] = match.get(tok, 0) | (1 << j)
    rows = [full]
    v = full
    get = match.get
    for tok in ref:
        u = v & get(tok, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)
    i, j = len(ref), cols
    left = cols - v.bit_count()  # t[i][j]: LCS length still to collect
    out: list[int] = []
    while left and i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            out.append(i - 1)
            i -= 1
            j -= 1
            left -= 1
        elif (j - 1 - (rows[i] & ((1 << (j - 1)) - 1)).bit_count()
              > j - (rows[i - 1] & ((1 << j) - 1)).bit_count()):  # t[i][j-1] > t[i-1][j]
            j -= 1
        else:
            i -= 1
    out.reverse()
    return out


def split_lines(text: str) -> list[str]:
    """rouge-score's sentence split for ROUGE-Lsum (``split_summaries=False``): the text split on
    ``"\n"``, empty strings dropped (a line of spaces is kept, as a sentence without tokens)."""
    return [x for x in text.split("\n") if len(x)]


@register_metric
class RougeLsum(_Rouge):
    """ROUGE-Lsum F-measure (summary-level LCS, Lin 2004 sec. 3.2), 0-1, identical to rouge-score's
    ``rougeLsum``: sentences are the newline-separated lines (:func:`split_lines`); for each
    reference sentence the union of its LCS with every hypothesis sentence counts, each token at
    most as often as it occurs on both sides (ROUGE 1.5.5). Options and multi-reference rule as
    ``rouge_l``. Each distinct line is tokenized once and each distinct (reference line,
    hypothesis line) LCS is computed once."""

    name: ClassVar[str] = "rouge_lsum"
    description: ClassVar[str] = "ROUGE-Lsum F-measure (summary-level LCS over lines, rouge-score identical), 0-1"

    def score_pairs(
        self, hyps: Sequence[str], refs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Precision, recall and F-measure of each (hypothesis, reference) pair."""
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
        k = len(hyps)
        lines = {t: split_lines(t) for t in dict.fromkeys([*hyps, *refs])}
        all_lines = list(dict.fromkeys(itertools.chain.from_iterable(lines.values())))
        seqs, _ = self._encode(all_lines)
        enc = {line: (s if isinstance(s, str) else tuple(s)) for line, s in zip(all_lines, seqs, strict=True)}
        memo: dict[tuple[Any, Any], list[int]] = {}
        p = np.zeros(k)
        r = np.zeros(k)
        for i in range(k):
            hits, m, n = self._hits([enc[x] for x in lines[refs[i]]], [enc[x] for x in lines[hyps[i]]], memo)
            if hits >= 0:
                r[i] = hits / m
                p[i] = hits / n
        return p, r, _fmeasure(p, r)

    @staticmethod
    def _hits(ref_sents: list[Any], can_sents: list[Any], memo: dict[tuple[Any, Any], list[int]]) -> tuple[int, int, int]:
        """(hits, reference tokens, hypothesis tokens) of rouge-score's ``_summary_level_lcs``;
        hits = -1 where it returns 0 (a side without sentences or without tokens)."""
        if not ref_sents or not can_sents:
            return -1, 0, 0
        m = sum(map(len, ref_sents))
        n = sum(map(len, can_sents))
        if not n or not m:
            return -1, m, n
        cnt_r: Counter[Any] = Counter()
        cnt_c: Counter[Any] = Counter()
        for s in ref_sents:
            cnt_r.update(s)
        for s in can_sents:
            cnt_c.update(s)
        hits = 0
        for ref in ref_sents:
            union: set[int] = set()
            for can in can_sents:
                key = (ref, can)
                idx = memo.get(key)
                if idx is None:
                    idx = memo[key] = _lcs_indices(ref, can)
                union.update(idx)
            for t in (ref[j] for j in sorted(union)):
                if cnt_c[t] > 0 and cnt_r[t] > 0:
                    hits += 1
                    cnt_c[t] -= 1
                    cnt_r[t] -= 1
        return hits, m, n


# --- exact match ------------------------------------------------------------------------------

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_DELETE_PUNCT = str.maketrans("", "", string.punctuation)


def squad_normalize(text: str) -> str:
    """SQuAD v1.1 answer normalisation: lower-case, delete ASCII punctuation
    (``string.punctuation``), replace the articles a/an/the by spaces, collapse whitespace.
    Memory stays a few copies of the text (no list of its characters or words)."""
    text = text.lower().translate(_DELETE_PUNCT)
    text = _ARTICLES_RE.sub(" ", text)
    return collapse_whitespace(text)


def collapse_whitespace(text: str) -> str:
    """``" ".join(text.split())`` without a list of the words: every whitespace character
    (``str.isspace``) becomes a space, runs of spaces become one, and the ends are stripped."""
    if not text.isascii():
        text = text.translate(_space_table())
    elif any(c in text for c in "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"):
        text = text.translate(_ASCII_SPACE)
    while "  " in text:
        text = text.replace("  ", " ")
    return text.strip(" ")


_ASCII_SPACE = {c: " " for c in range(128) if chr(c).isspace()}


@functools.cache
def _space_table() -> dict[int, str]:
    return {c: " " for c in range(0x110000) if chr(c).isspace()}


@register_metric
class ExactMatch(Metric):
    """1.0 if the response equals a reference after SQuAD normalisation (see
    :func:`squad_normalize`; with ``normalize=False`` the raw strings are compared), else 0.0.
    Two empty strings match."""

    name: ClassVar[str] = "exact_match"
    higher_is_better: ClassVar[bool] = True
    description: ClassVar[str] = "exact match after SQuAD normalisation (case, punctuation, articles, spaces), 0/1"
    column_options: ClassVar[tuple[str, ...]] = ("norm",)
    defaults: ClassVar[dict[str, Any]] = {"norm": "squad"}
    option_types: ClassVar[dict[str, OptionSpec]] = {"normalize": OptionSpec(bool)}

    def __init__(self, normalize: bool = True) -> None:
        self.normalize = bool(normalize)

    def options(self) -> dict[str, Any]:
        return {"norm": "squad" if self.normalize else "none"}

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        norm: Callable[[str], str] = squad_normalize if self.normalize else str

        def pair_fn(hyps: list[str], refs: list[str]) -> np.ndarray:
            memo: dict[str, str] = {}

            def n(t: str) -> str:
                if t not in memo:
                    memo[t] = norm(t)
                return memo[t]

            return np.array([float(n(h) == n(r)) for h, r in zip(hyps, refs, strict=True)], dtype=float)

        return MetricResult(values=best_over_references(pair_fn, responses, references))
