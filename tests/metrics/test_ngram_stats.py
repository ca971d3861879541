"""The bounded-memory BLEU / chrF statistics equal sacrebleu's own, and the metrics built on them
equal sacrebleu's sentence and corpus scores (random inputs, several settings)."""

from __future__ import annotations

import random

import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from evalign.metrics import get_metric
from evalign.metrics._ngram_stats import bleu_stats, chrf_stats

WORDS = ["a", "b", "c", "the", "cat", "A", "B.", "(x)", "x,", "é", "ß", "Ĳ", "  ", ".", "don't", "x-y", "3.5", "1,000",
         "-\n", "\n", "&amp;", "&quot;x&gt;", "<skipped>", "\u2003", "\x1c", "«»", "$5-6", "a\t"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 15)))


@pytest.mark.parametrize("long_text", [100_000, 0])  # 0: every text through the long-text tokenizer path
@pytest.mark.parametrize("kw", [{}, {"lowercase": True}, {"tokenize": "char"}, {"tokenize": "intl"}, {"max_ngram_order": 2}])
def test_bleu_stats_equal_sacrebleu(kw: dict[str, object], long_text: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalign.metrics._ngram_stats as ns

    monkeypatch.setattr(ns, "LONG_TEXT", long_text)
    rng = random.Random(1)
    b = BLEU(**kw)
    for _ in range(300):
        h, refs = _text(rng), [_text(rng) for _ in range(rng.randint(1, 3))]
        assert bleu_stats(b, h, refs) == b._extract_corpus_statistics([h], [[r] for r in refs])[0], (h, refs)


@pytest.mark.parametrize("kw", [{}, {"word_order": 2}, {"lowercase": True, "whitespace": True, "word_order": 1},
                                {"char_order": 3, "beta": 1}])
def test_chrf_stats_equal_sacrebleu(kw: dict[str, object]) -> None:
    rng = random.Random(2)
    c = CHRF(**kw)
    for _ in range(300):
        h, refs = _text(rng), [_text(rng) for _ in range(rng.randint(1, 3))]
        assert chrf_stats(c, h, refs) == c._extract_corpus_statistics([h], [[r] for r in refs])[0], (h, refs)


@pytest.mark.parametrize("chunk", [50_000, 7, 1])
def test_long_text_tokenizer_equals_sacrebleu_13a(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalign.metrics._ngram_stats as ns

    rng = random.Random(4)
    text = " ".join(rng.choice(WORDS) + rng.choice(["", "", ".", ",", "-", "5", "\t"]) for _ in range(20_000))
    monkeypatch.setattr(ns, "LONG_TEXT", chunk)  # chunks of this size (and every text on the long path)
    for lower in (False, True):
        b = BLEU(lowercase=lower)
        want = Tokenizer13a()((text.lower() if lower else text).rstrip()).split()
        assert list(ns._bleu_tokens(b, text)) == want


@pytest.mark.parametrize(("name", "kw"), [("bleu", {}), ("bleu", {"tokenize": "char", "lowercase": True}),
                                           ("chrf", {}), ("chrf", {"word_order": 2})])
def test_metric_scores_equal_sacrebleu(name: str, kw: dict[str, object]) -> None:
    rng = random.Random(3)
    hyps = [_text(rng) for _ in range(60)]
    refs = [[_text(rng) for _ in range(rng.randint(0, 3))] for _ in hyps]
    m = get_metric(name, **kw)
    values = m.score(hyps, refs).values
    sk = {"tokenize": kw.get("tokenize", "13a"), "lowercase": kw.get("lowercase", False)} if name == "bleu" else kw
    sent = BLEU(effective_order=True, **sk) if name == "bleu" else CHRF(**sk)
    corp = BLEU(**sk) if name == "bleu" else CHRF(**sk)
    for v, h, rs in zip(values, hyps, refs, strict=True):
        want = max((sent.sentence_score(h, [r]).score for r in rs), default=float("nan"))
        assert (v != v and want != want) or v == want
    keep = [i for i, rs in enumerate(refs) if rs]
    n = max(len(refs[i]) for i in keep)
    streams = [[refs[i][k] if k < len(refs[i]) else None for i in keep] for k in range(n)]
    assert m.system_score(hyps, refs) == corp.corpus_score([hyps[i] for i in keep], streams).score
    # a second metric instance (no statistics kept from a score() run) gives the same corpus score
    assert get_metric(name, **kw).system_score(hyps, refs) == m.system_score(hyps, refs)


def test_squad_normalize_equals_its_definition() -> None:
    import string

    from evalign.metrics.lexical import _ARTICLES_RE, collapse_whitespace, squad_normalize

    def reference(text: str) -> str:  # the SQuAD v1.1 script's steps, as written there
        text = text.lower()
        text = "".join(ch for ch in text if ch not in set(string.punctuation))
        text = _ARTICLES_RE.sub(" ", text)
        return " ".join(text.split())

    rng = random.Random(5)
    alphabet = [*"aAnNtThHeE .,!?'-_", "\t", "\n", "\x1c", "\u2003", "\u3000", "\x85", "é", "İ", "ß", "  "]
    for _ in range(3000):
        t = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert squad_normalize(t) == reference(t), repr(t)
        assert collapse_whitespace(t) == " ".join(t.split()), repr(t)
