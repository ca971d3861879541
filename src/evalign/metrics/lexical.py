"""Lexical (string-overlap) metrics: ``bleu``, ``chrf``, ``rouge_l`` and ``exact_match``.

* ``bleu`` and ``chrf`` are sacrebleu's own implementations: sentence scores per item, corpus
  scores per system. Values are on sacrebleu's 0-100 scale.
* ``rouge_l`` is ROUGE-L F-measure, value for value identical to
  ``rouge_score.rouge_scorer.RougeScorer(["rougeL"], use_stemmer=...)`` (same tokenizer, same
  Porter-stemming rule, same arithmetic), but the longest common subsequence is computed by
  rapidfuzz's bit-parallel ``LCSseq`` instead of rouge-score's pure-Python table. Range 0-1.
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
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from evalign.errors import EvalignError
from evalign.metrics.base import (
    Metric,
    MetricResult,
    argmax_by_owner,
    best_over_references,
    flatten_references,
    register_metric,
)

# --- sacrebleu metrics ------------------------------------------------------------------------


def _sacrebleu_info(metric: Any) -> dict[str, Any]:
    """The settings part of a sacrebleu metric's own signature (without ``nrefs``/``version``:
    the version goes into evalign's signature through ``dists``)."""
    metric.sentence_score("a", ["a"])  # sacrebleu only builds a signature after a first score
    info = metric.get_signature().info
    return {k: v for k, v in info.items() if v is not None and k not in ("nrefs", "version")}


def _pairwise_sentence(scorer: Callable[[str, list[str]], Any]) -> Callable[[list[str], list[str]], np.ndarray]:
    """A pair scorer for :func:`best_over_references` that calls a sacrebleu ``sentence_score``
    once per distinct (hypothesis, reference) pair."""

    def pair_fn(hyps: list[str], refs: list[str]) -> np.ndarray:
        memo: dict[tuple[str, str], float] = {}
        out = np.empty(len(hyps), dtype=float)
        for i, (h, r) in enumerate(zip(hyps, refs, strict=True)):
            key = (h, r)
            if key not in memo:
                memo[key] = float(scorer(h, [r]).score)
            out[i] = memo[key]
        return out

    return pair_fn


def _corpus_streams(
    responses: Sequence[str], references: Sequence[Sequence[str]]
) -> tuple[list[str], Any]:
    """sacrebleu's corpus input: hypotheses and reference *streams*.

    Items without references are left out. Items with fewer references than the most any item
    has are padded with ``None``, sacrebleu's convention for a variable number of references.
    """
    if len(responses) != len(references):
        raise ValueError(f"{len(responses)} responses but {len(references)} reference lists")
    keep = [i for i, refs in enumerate(references) if len(refs) > 0]
    hyps = [str(responses[i]) for i in keep]
    n_streams = max((len(references[i]) for i in keep), default=0)
    streams: list[list[str | None]] = [
        [references[i][k] if k < len(references[i]) else None for i in keep] for k in range(n_streams)
    ]
    return hyps, streams


@register_metric
class Bleu(Metric):
    """sacrebleu BLEU.

    Item value: sentence BLEU with effective n-gram order (``BLEU(effective_order=True)
    .sentence_score``), 0-100; with several references, the best single-reference score.
    System value (:meth:`system_score`): sacrebleu corpus BLEU over the system's items with all
    their references (effective order off, as in ``sacrebleu.corpus_bleu``); items with fewer
    references are padded with ``None``, items without a reference are left out.
    """

    name: ClassVar[str] = "bleu"
    higher_is_better: ClassVar[bool] = True
    description: ClassVar[str] = "sacrebleu BLEU (sentence, effective order; corpus BLEU per system), 0-100"
    dists: ClassVar[tuple[str, ...]] = ("sacrebleu",)
    column_options: ClassVar[tuple[str, ...]] = ("tok",)
    defaults: ClassVar[dict[str, Any]] = {"tok": "13a"}
    system_level: ClassVar[str] = "corpus"
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
        self._options = _sacrebleu_info(BLEU(effective_order=True, **kwargs))

    def options(self) -> dict[str, Any]:
        return dict(self._options)

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        values = best_over_references(_pairwise_sentence(self._sentence.sentence_score), responses, references)
        return MetricResult(values=values)

    def system_score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
        hyps, streams = _corpus_streams(responses, references)
        if not hyps:
            return float("nan")
        return float(self._corpus.corpus_score(hyps, streams).score)


@register_metric
class Chrf(Metric):
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
    system_level: ClassVar[str] = "corpus"
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
        values = best_over_references(_pairwise_sentence(self._chrf.sentence_score), responses, references)
        return MetricResult(values=values)

    def system_score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
        hyps, streams = _corpus_streams(responses, references)
        if not hyps:
            return float("nan")
        return float(self._chrf.corpus_score(hyps, streams).score)


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


@register_metric
class RougeL(Metric):
    """ROUGE-L F-measure (0-1), identical to rouge-score's ``rougeL``.

    Options: ``tokenizer`` = ``"rouge"`` (rouge-score's tokenizer; drops non-ASCII text) or
    ``"unicode"`` (see :func:`unicode_tokens`); ``use_stemmer``: Porter stemming of tokens
    longer than 3 characters. Several references: the reference with the best F-measure (first
    one on ties, as ``RougeScorer.score_multi``). Extras ``precision`` and ``recall`` belong to
    that reference.
    """

    name: ClassVar[str] = "rouge_l"
    higher_is_better: ClassVar[bool] = True
    description: ClassVar[str] = "ROUGE-L F-measure (rouge-score tokenizer or Unicode, fast LCS), 0-1"
    dists: ClassVar[tuple[str, ...]] = ("rouge-score", "nltk")
    column_options: ClassVar[tuple[str, ...]] = ("tok", "stem")
    defaults: ClassVar[dict[str, Any]] = {"tok": "rouge", "stem": False}

    #: largest token vocabulary encoded as characters (see :func:`encode_token_sequences`)
    max_char_vocab: ClassVar[int] = 0x10F800

    def __init__(self, tokenizer: str = "rouge", use_stemmer: bool = False) -> None:
        if tokenizer not in ROUGE_TOKENIZERS:
            known = ", ".join(sorted(ROUGE_TOKENIZERS))
            raise EvalignError(f"rouge_l: unknown tokenizer '{tokenizer}' (known: {known})")
        self.tokenizer = tokenizer
        self.use_stemmer = bool(use_stemmer)
        keep = _ROUGE_VALID_RE.match if tokenizer == "rouge" else bool
        self._stemmer = _MemoStemmer(keep) if self.use_stemmer else None

    def options(self) -> dict[str, Any]:
        return {"tok": self.tokenizer, "stem": self.use_stemmer}

    def tokenize(self, text: str) -> list[str]:
        """The tokens this metric compares (after stemming, when on)."""
        return ROUGE_TOKENIZERS[self.tokenizer](text, self._stemmer)

    def score_pairs(
        self, hyps: Sequence[str], refs: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Precision, recall and F-measure of each (hypothesis, reference) pair."""
        if len(hyps) != len(refs):
            raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
        n = len(hyps)
        seqs, lengths = encode_token_sequences(
            [str(h) for h in hyps] + [str(r) for r in refs], self.tokenize, self.max_char_vocab
        )
        return rouge_l_prf(lcs_lengths(seqs[n:], seqs[:n]), lengths[n:], lengths[:n])

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        hyp, ref, owner = flatten_references(responses, references)
        n = len(responses)
        values = np.full(n, np.nan)
        precision = np.full(n, np.nan)
        recall = np.full(n, np.nan)
        if hyp:
            p, r, f = self.score_pairs(hyp, ref)
            best = argmax_by_owner(f, owner, n)
            has = best >= 0
            values[has] = f[best[has]]
            precision[has] = p[best[has]]
            recall[has] = r[best[has]]
        return MetricResult(values=values, extras={"precision": precision, "recall": recall})


# --- exact match ------------------------------------------------------------------------------

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)


def squad_normalize(text: str) -> str:
    """SQuAD v1.1 answer normalisation: lower-case, delete ASCII punctuation
    (``string.punctuation``), replace the articles a/an/the by spaces, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


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
