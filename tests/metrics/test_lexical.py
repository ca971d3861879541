"""Lexical metrics against their reference libraries (sacrebleu, rouge-score).

Parity runs on all 2,016 bundled Self-Instruct items and on Hypothesis-generated text.
"""

from __future__ import annotations

import math
import re
import string

import numpy as np
import pandas as pd
import pytest
import sacrebleu
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU, CHRF

from evalign.datasets import load_dataset
from evalign.errors import EvalignError
from evalign.metrics import get_metric, lexical, list_metrics
from evalign.scoring import score, system_scores
from evalign.signature import package_version

HYP_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def items() -> pd.DataFrame:
    df = load_dataset("self_instruct").items
    assert len(df) == 2016
    return df


def _rouge_ref(hyps: list[str], refs: list[str], stem: bool) -> np.ndarray:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
    return np.array([scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs, strict=True)])


# --- text strategies ---------------------------------------------------------------------------

_WORDS = ["the", "cat", "sat", "running", "runs", "ran", "on", "mat", "Über", "naïve", "日本語", "数据",
          "привет", "mír", "x1", "42", "don't", "e-mail", "caresses", "ponies", "happily", "generously"]
_word_text = st.lists(st.sampled_from(_WORDS), max_size=40).map(" ".join)
_punct_text = st.text(alphabet=string.punctuation + " \t\n", max_size=30)
_space_text = st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003", max_size=10)
_any_text = st.text(max_size=200)  # full Unicode, surrogates excluded by Hypothesis
_mixed = st.lists(st.one_of(_word_text, _punct_text, _any_text), min_size=1, max_size=3).map(" ".join)
texts = st.one_of(st.just(""), _space_text, _punct_text, _word_text, _any_text, _mixed)
ascii_texts = st.one_of(st.text(alphabet=string.printable, max_size=200), _word_text.map(
    lambda t: t.encode("ascii", "ignore").decode()))


# --- ROUGE-L -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stem", [False, True])
def test_rouge_l_parity_self_instruct(items: pd.DataFrame, stem: bool) -> None:
    hyps = items["response"].tolist()
    refs = items["reference"].tolist()
    res = get_metric("rouge_l", use_stemmer=stem).score(hyps, [[r] for r in refs])
    expected = _rouge_ref(hyps, refs, stem)
    assert np.array_equal(res.values, expected)  # exact, not approximate
    assert (expected == 0).sum() >= 8  # the data include references without ASCII tokens
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=stem)
    for i in (0, 500, 2015):
        s = scorer.score(refs[i], hyps[i])["rougeL"]
        assert res.extras["precision"][i] == s.precision
        assert res.extras["recall"][i] == s.recall


@HYP_SETTINGS
@given(pairs=st.lists(st.tuples(texts, texts), min_size=1, max_size=8))
def test_rouge_l_parity_generated(pairs: list[tuple[str, str]]) -> None:
    hyps = [h for h, _ in pairs]
    refs = [r for _, r in pairs]
    for stem in (False, True):
        got = get_metric("rouge_l", use_stemmer=stem).score(hyps, [[r] for r in refs]).values
        assert np.array_equal(got, _rouge_ref(hyps, refs, stem))


@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rouge_l_parity_long_texts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(300)] + ["running", "runner", "runs"]
    hyp = " ".join(rng.choice(vocab, size=int(rng.integers(400, 900))))
    ref = " ".join(rng.choice(vocab, size=int(rng.integers(200, 700))))
    for stem in (False, True):
        got = get_metric("rouge_l", use_stemmer=stem).score([hyp, ref], [[ref], [hyp]]).values
        assert np.array_equal(got, _rouge_ref([hyp, ref], [ref, hyp], stem))


def test_rouge_l_large_vocabulary_skips_surrogates() -> None:
    # 56,000 distinct tokens push later token ids past the surrogate block (0xD800..0xDFFF)
    big = " ".join(f"t{i}" for i in range(56_000))
    hyps = [big, "alpha beta gamma delta", "zeta eta theta", "t5 t55000 omega"]
    refs = ["t3 t9", "beta delta alpha gamma", "eta zeta theta iota", "omega t55000 t5 t4"]
    got = get_metric("rouge_l").score(hyps, [[r] for r in refs]).values
    assert np.array_equal(got, _rouge_ref(hyps, refs, False))


def test_rouge_l_int_sequence_fallback(monkeypatch: pytest.MonkeyPatch, items: pd.DataFrame) -> None:
    # beyond the code-point vocabulary the encoder compares lists of token ids instead of strings
    monkeypatch.setattr(lexical.RougeL, "max_char_vocab", 10)
    seqs, lengths = lexical.encode_token_sequences(["b a", "a c b"], lexical.rouge_tokens, max_char_vocab=2)
    assert seqs == [[0, 1], [1, 2, 0]] and lengths.tolist() == [2, 3]
    hyps = items["response"].tolist()[:200]
    refs = items["reference"].tolist()[:200]
    got = get_metric("rouge_l").score(hyps, [[r] for r in refs]).values
    assert np.array_equal(got, _rouge_ref(hyps, refs, False))


@HYP_SETTINGS
@given(text=texts)
def test_rouge_tokenizer_equals_rouge_score(text: str) -> None:
    from nltk.stem import porter
    from rouge_score import tokenize

    assert lexical.rouge_tokens(text) == tokenize.tokenize(text, None)
    stemmer = lexical._MemoStemmer(lexical._ROUGE_VALID_RE.match)
    assert lexical.rouge_tokens(text, stemmer) == tokenize.tokenize(text, porter.PorterStemmer())


def test_rouge_l_multi_reference_is_best() -> None:
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    hyps = ["the cat sat on the mat", "a b c", "nothing"]
    refs = [["a dog ran", "the cat sat on a mat", "cat mat"], ["a b c", "a b c d"], []]
    res = get_metric("rouge_l").score(hyps, refs)
    for i in (0, 1):
        best = scorer.score_multi(refs[i], hyps[i])["rougeL"]
        assert res.values[i] == best.fmeasure
        assert res.extras["precision"][i] == best.precision
        assert res.extras["recall"][i] == best.recall
    assert res.values[1] == 1.0
    assert math.isnan(res.values[2]) and math.isnan(res.extras["recall"][2])


_EDGE = ["", " ", "\n\t ", "!!!", "a", "A.", "Über", "日本", "a b a b", "the the the", "running runs", "x" * 500]


@pytest.mark.parametrize("stem", [False, True])
def test_rouge_l_edge_cases(stem: bool) -> None:
    hyps = [h for h in _EDGE for _ in _EDGE]
    refs = [r for _ in _EDGE for r in _EDGE]
    got = get_metric("rouge_l", use_stemmer=stem).score(hyps, [[r] for r in refs]).values
    expected = _rouge_ref(hyps, refs, stem)
    assert np.array_equal(got, expected)
    assert got[0] == 0.0  # "" vs "": rouge-score returns 0 when a side has no tokens


# --- ROUGE-1, ROUGE-2, ROUGE-Lsum ----------------------------------------------------------------

FAMILY = {"rouge_1": "rouge1", "rouge_2": "rouge2", "rouge_lsum": "rougeLsum", "rouge_l": "rougeL"}


def _family_ref(name: str, hyps: list[str], refs: list[str], stem: bool) -> tuple[np.ndarray, ...]:
    """(F, P, R) of rouge-score for each (hypothesis, reference) pair."""
    key = FAMILY[name]
    scorer = rouge_scorer.RougeScorer([key], use_stemmer=stem)
    s = [scorer.score(r, h)[key] for h, r in zip(hyps, refs, strict=True)]
    return tuple(np.array([getattr(x, a) for x in s]) for a in ("fmeasure", "precision", "recall"))


def _assert_family_equal(name: str, hyps: list[str], refs: list[str], stem: bool) -> np.ndarray:
    res = get_metric(name, use_stemmer=stem).score(hyps, [[r] for r in refs])
    f, p, r = _family_ref(name, hyps, refs, stem)
    assert np.array_equal(res.values, f)  # exact, not approximate
    assert np.array_equal(res.extras["precision"], p) and np.array_equal(res.extras["recall"], r)
    return f


@pytest.mark.parametrize("stem", [False, True])
@pytest.mark.parametrize("name", ["rouge_1", "rouge_2", "rouge_lsum"])
def test_rouge_family_parity_self_instruct(items: pd.DataFrame, name: str, stem: bool) -> None:
    hyps = items["response"].tolist()
    refs = items["reference"].tolist()
    f = _assert_family_equal(name, hyps, refs, stem)
    assert 0.05 < f.mean() < 0.6 and (f == 0).sum() >= 8
    if name == "rouge_lsum":  # many texts have several lines: Lsum is not ROUGE-L there
        multi = np.array(["\n" in h and "\n" in r for h, r in zip(hyps, refs, strict=True)])
        assert multi.sum() > 300
        rl = get_metric("rouge_l", use_stemmer=stem).score(hyps, [[r] for r in refs]).values
        assert np.mean(f[multi] != rl[multi]) > 0.5


_lines = st.lists(st.one_of(_word_text, st.lists(st.sampled_from(["a", "b", "c", "the", "cat"]), max_size=12)
                            .map(" ".join), _any_text), max_size=6).map("\n".join)


@HYP_SETTINGS
@given(pairs=st.lists(st.tuples(st.one_of(texts, _lines), st.one_of(texts, _lines)), min_size=1, max_size=6))
def test_rouge_family_parity_generated(pairs: list[tuple[str, str]]) -> None:
    hyps = [h for h, _ in pairs]
    refs = [r for _, r in pairs]
    for name in ("rouge_1", "rouge_2", "rouge_lsum"):
        for stem in (False, True):
            _assert_family_equal(name, hyps, refs, stem)


@pytest.mark.parametrize("stem", [False, True])
@pytest.mark.parametrize("name", ["rouge_1", "rouge_2", "rouge_lsum"])
def test_rouge_family_edge_cases(name: str, stem: bool) -> None:
    edge = [*_EDGE, "a\nb", "b a\n\na b\n", "a a b\nb a a", "\n\n", " \n "]
    hyps = [h for h in edge for _ in edge]
    refs = [r for _ in edge for r in edge]
    f = _assert_family_equal(name, hyps, refs, stem)
    assert f[0] == 0.0


def test_rouge_lsum_union_and_clipping_hand_case() -> None:
    # reference lines "a b" and "b a" against hypothesis lines "a b" and "b a": each reference line's
    # union LCS holds both of its tokens, but "a" and "b" occur twice on each side -> 4 hits of 4
    m = get_metric("rouge_lsum")
    assert m.score(["a b\nb a"], [["b a\na b"]]).values[0] == 1.0
    # one hypothesis line "a a": the reference lines "a" and "a" each match it -> union 1 each -> 2 hits,
    # P = 2/2, R = 2/2; ROUGE-L on the whole texts also gives 1, ROUGE-2 on "a a" vs "a a" as well
    assert m.score(["a a"], [["a\na"]]).values[0] == 1.0
    # reference "a\na\na" (3 tokens), hypothesis "a": clipping lets only one hit count
    r = m.score(["a"], [["a\na\na"]])
    assert (r.extras["precision"][0], r.extras["recall"][0]) == (1.0, 1 / 3)


def test_rouge_family_multi_reference_is_best_and_int_fallback(monkeypatch: pytest.MonkeyPatch,
                                                                items: pd.DataFrame) -> None:
    hyps = ["the cat sat on the mat\nit was red", "a b c", "nothing"]
    refs = [["a dog ran", "the cat sat on a mat\nred it was", "cat mat"], ["a b c d", "a b c"], []]
    for name, key in FAMILY.items():
        res = get_metric(name).score(hyps, refs)
        scorer = rouge_scorer.RougeScorer([key])
        for i in (0, 1):
            best = scorer.score_multi(refs[i], hyps[i])[key]
            assert (res.values[i], res.extras["precision"][i], res.extras["recall"][i]) == (
                best.fmeasure, best.precision, best.recall)
        assert math.isnan(res.values[2])
    # beyond the code-point vocabulary, sequences of token ids give the same values
    monkeypatch.setattr(lexical._Rouge, "max_char_vocab", 10)
    h, r = items["response"].tolist()[:150], items["reference"].tolist()[:150]
    for name in ("rouge_1", "rouge_2", "rouge_lsum"):
        _assert_family_equal(name, h, r, False)


def test_rouge_family_unicode_tokenizer_and_names() -> None:
    assert get_metric("rouge_1", tokenizer="unicode").score(["Die Größe"], [["Die Grüße"]]).values[0] == 0.5
    assert get_metric("rouge_1").score(["Die Größe"], [["Die Grüße"]]).values[0] == 1.0
    assert get_metric("rouge_2", use_stemmer=True).column == "rouge_2[stem=True]"
    assert str(get_metric("rouge_lsum").signature()).startswith("rouge_lsum|tok:rouge|stem:no|evalign:")
    with pytest.raises(EvalignError, match="rouge_lsum: unknown tokenizer"):
        get_metric("rouge_lsum", tokenizer="spacy")


def test_bleu_chrf_edge_cases() -> None:
    hyps = [h for h in _EDGE for _ in _EDGE]
    refs = [r for _ in _EDGE for r in _EDGE]
    got_b = get_metric("bleu").score(hyps, [[r] for r in refs]).values
    got_c = get_metric("chrf").score(hyps, [[r] for r in refs]).values
    sb, sc = BLEU(effective_order=True), CHRF()
    assert np.array_equal(got_b, [sb.sentence_score(h, [r]).score for h, r in zip(hyps, refs, strict=True)])
    assert np.array_equal(got_c, [sc.sentence_score(h, [r]).score for h, r in zip(hyps, refs, strict=True)])


def test_unicode_tokenizer_german_umlauts() -> None:
    # rouge-score splits words at non-ASCII letters: "Größe" and "Grüße" both become "gr e"
    hyp, ref = "Die Größe", "Die Grüße"
    assert get_metric("rouge_l").score([hyp], [[ref]]).values[0] == 1.0
    assert get_metric("rouge_l", tokenizer="unicode").score([hyp], [[ref]]).values[0] == 0.5


@pytest.mark.parametrize(
    "text",
    ["我们今天去北京看长城", "Сегодня хорошая погода в Москве", "ελληνικά γράμματα", "すしが好きです", "हिन्दी भाषा"],
)
def test_unicode_tokenizer_scores_non_english(text: str) -> None:
    rouge = get_metric("rouge_l")
    uni = get_metric("rouge_l", tokenizer="unicode")
    assert rouge.score([text], [[text]]).values[0] == 0.0  # rouge-score drops non-ASCII text
    assert uni.score([text], [[text]]).values[0] == 1.0


def test_unicode_tokenizer_tokens_and_partial_overlap() -> None:
    uni = get_metric("rouge_l", tokenizer="unicode")
    assert uni.tokenize("Straße  ist_schön!") == ["straße", "ist", "schön"]
    assert uni.tokenize("我爱北京abc中文") == ["我", "爱", "北", "京", "abc", "中", "文"]
    assert uni.tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # combining vowel signs stay in the word
    assert uni.tokenize("Cafe\u0301") == uni.tokenize("Café")  # NFC
    # LCS of 我爱北京 / 我在北京: 我北京 = 3 of 4 tokens each side
    assert uni.score(["我爱北京"], [["我在北京"]]).values[0] == 0.75
    assert get_metric("rouge_l").score(["我爱北京"], [["我在北京"]]).values[0] == 0.0


@HYP_SETTINGS
@given(pairs=st.lists(st.tuples(ascii_texts, ascii_texts), min_size=1, max_size=6), stem=st.booleans())
def test_unicode_tokenizer_equals_rouge_on_ascii(pairs: list[tuple[str, str]], stem: bool) -> None:
    hyps = [h for h, _ in pairs]
    refs = [[r] for _, r in pairs]
    uni = get_metric("rouge_l", tokenizer="unicode", use_stemmer=stem)
    rouge = get_metric("rouge_l", use_stemmer=stem)
    assert np.array_equal(uni.score(hyps, refs).values, rouge.score(hyps, refs).values)


def test_rouge_l_signature_and_options() -> None:
    sig = get_metric("rouge_l").signature()
    assert str(sig).startswith("rouge_l|tok:rouge|stem:no|evalign:")
    assert sig.versions["rouge-score"] == package_version("rouge-score")
    m = get_metric("rouge_l", tokenizer="unicode", use_stemmer=True)
    assert dict(m.signature().options) == {"tok": "unicode", "stem": True}
    assert m.column == "rouge_l[tok=unicode,stem=True]"
    assert get_metric("rouge_l").column == "rouge_l"
    with pytest.raises(EvalignError, match="unknown tokenizer 'spacy'"):
        get_metric("rouge_l", tokenizer="spacy")


# --- BLEU and chrF -----------------------------------------------------------------------------


def test_bleu_chrf_parity_self_instruct(items: pd.DataFrame) -> None:
    hyps = items["response"].tolist()
    refs = items["reference"].tolist()
    bleu = get_metric("bleu").score(hyps, [[r] for r in refs]).values
    chrf = get_metric("chrf").score(hyps, [[r] for r in refs]).values
    sb = BLEU(effective_order=True)
    sc = CHRF()
    assert np.array_equal(bleu, [sb.sentence_score(h, [r]).score for h, r in zip(hyps, refs, strict=True)])
    assert np.array_equal(chrf, [sc.sentence_score(h, [r]).score for h, r in zip(hyps, refs, strict=True)])
    assert 0 < np.mean(bleu) < 100 and 0 < np.mean(chrf) < 100


def test_corpus_scores_per_system(items: pd.DataFrame) -> None:
    bleu, chrf = get_metric("bleu"), get_metric("chrf")
    chrf_systems = {"davinci", "text-davinci-003"}  # corpus chrF is slow; BLEU is checked for all 8
    for _, g in items.groupby("system"):
        hyps = g["response"].tolist()
        refs = g["reference"].tolist()
        ours_b = bleu.system_score(hyps, [[r] for r in refs])
        ours_c = chrf.system_score(hyps, [[r] for r in refs]) if g["system"].iloc[0] in chrf_systems else None
        assert ours_b == sacrebleu.corpus_bleu(hyps, [refs]).score
        if g["system"].iloc[0] in chrf_systems:
            assert ours_c == sacrebleu.corpus_chrf(hyps, [refs]).score
    table = system_scores(items, ["bleu"])
    assert len(table) == 8
    first = items[items["system"] == table["system"].iloc[0]]
    assert table["bleu"].iloc[0] == sacrebleu.corpus_bleu(first["response"].tolist(), [first["reference"].tolist()]).score


def test_corpus_bleu_variable_references() -> None:
    hyps = ["the cat is on the mat", "there is a dog", "no reference here", "hello world"]
    refs = [["the cat sits on the mat", "a cat is on the mat"], ["a dog is there"], [], ["hello there world", "hi", "hello world"]]
    expected_b = sacrebleu.corpus_bleu(
        [hyps[0], hyps[1], hyps[3]],
        [
            ["the cat sits on the mat", "a dog is there", "hello there world"],
            ["a cat is on the mat", None, "hi"],
            [None, None, "hello world"],
        ],
    ).score
    assert get_metric("bleu").system_score(hyps, refs) == expected_b
    assert math.isnan(get_metric("bleu").system_score(["x"], [[]]))
    expected_c = sacrebleu.corpus_chrf(
        [hyps[0], hyps[1], hyps[3]],
        [["the cat sits on the mat", "a dog is there", "hello there world"], ["a cat is on the mat", None, "hi"],
         [None, None, "hello world"]],
    ).score
    assert get_metric("chrf").system_score(hyps, refs) == expected_c


@HYP_SETTINGS
@given(hyp=texts, refs=st.lists(texts, min_size=1, max_size=3))
def test_bleu_chrf_parity_generated_multi_reference(hyp: str, refs: list[str]) -> None:
    sb = BLEU(effective_order=True)
    sc = CHRF()
    got_b = get_metric("bleu").score([hyp], [refs]).values[0]
    got_c = get_metric("chrf").score([hyp], [refs]).values[0]
    assert got_b == max(sb.sentence_score(hyp, [r]).score for r in refs)
    assert got_c == max(sc.sentence_score(hyp, [r]).score for r in refs)


def test_bleu_options_and_signature() -> None:
    m = get_metric("bleu")
    sig = str(m.signature())
    assert sig.startswith("bleu|case:mixed|eff:items-yes,corpus-no|tok:13a|smooth:exp|evalign:")
    assert sig.endswith(f"sacrebleu:{sacrebleu.__version__}")
    m2 = get_metric("bleu", tokenize="char", smooth_method="floor", lowercase=True)
    assert dict(m2.signature().options) == {"case": "lc", "eff": "items-yes,corpus-no", "tok": "char",
                                                "smooth": "floor[0.10]"}
    assert m2.column == "bleu[tok=char]"
    assert m2.score(["ABC"], [["abc"]]).values[0] == BLEU(
        tokenize="char", smooth_method="floor", lowercase=True, effective_order=True
    ).sentence_score("ABC", ["abc"]).score
    with pytest.raises(EvalignError, match="bleu: bad option"):
        get_metric("bleu", tokenize="no-such-tokenizer")
    c = get_metric("chrf", word_order=2)
    assert str(c.signature()).startswith("chrf|case:mixed|eff:yes|nc:6|nw:2|space:no|beta:2|evalign:")
    assert c.column == "chrf[nw=2]"
    assert c.score(["a cat sat"], [["the cat sat"]]).values[0] == CHRF(word_order=2).sentence_score(
        "a cat sat", ["the cat sat"]
    ).score


def test_bleu_signature_states_each_level_against_sacrebleu() -> None:
    """A 3-item system whose responses share no 4-gram with the references: corpus BLEU is 0.0 as
    ``sacrebleu.corpus_bleu`` (no effective order) computes it, the item scores are sentence BLEU with
    effective order; the signature says so (``eff:yes`` alone claimed the corpus score used it)."""
    hyps = ["the cat sat", "a dog ran", "good"]
    refs = ["the cat sat down", "a dog ran to its home", "very good"]
    table = pd.DataFrame({"id": ["1", "2", "3"], "system": "s", "response": hyps, "reference": refs})
    scored, runs = score(table, ["bleu"])
    corpus = float(system_scores(scored, ["bleu"])["bleu"].iloc[0])
    assert corpus == sacrebleu.corpus_bleu(hyps, [refs]).score == 0.0
    with_eff = BLEU(effective_order=True).corpus_score(hyps, [refs]).score
    assert with_eff > 20  # what the corpus score would be with effective order: not what is computed
    assert list(scored["bleu"]) == [sacrebleu.sentence_bleu(h, [r]).score for h, r in zip(hyps, refs, strict=True)]
    assert "|eff:items-yes,corpus-no|" in runs[0].signature
    assert "eff:yes" not in runs[0].signature


def test_no_reference_gives_nan() -> None:
    for name in ("bleu", "chrf", "rouge_l", "exact_match"):
        vals = get_metric(name).score(["a b", "c"], [["a b"], []]).values
        assert vals[0] > 0 and math.isnan(vals[1]), name


# --- exact match -------------------------------------------------------------------------------


def _squad_oracle(s: str) -> str:
    """normalize_answer from the official SQuAD v1.1 evaluation script."""

    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def test_exact_match_examples() -> None:
    em = get_metric("exact_match")
    hyps = ["The Cat!", "a cat", "Paris, France.", "", "  An apple  "]
    refs = [["cat"], ["cats"], ["London", "paris france"], [""], ["apple"]]
    assert em.score(hyps, refs).values.tolist() == [1.0, 0.0, 1.0, 1.0, 1.0]
    raw = get_metric("exact_match", normalize=False)
    assert raw.score(["The Cat!", "cat"], [["cat"], ["x", "cat"]]).values.tolist() == [0.0, 1.0]
    assert str(em.signature()).startswith("exact_match|norm:squad|evalign:")
    assert raw.column == "exact_match[norm=none]"


@HYP_SETTINGS
@given(hyp=texts, refs=st.lists(texts, min_size=1, max_size=3))
def test_exact_match_matches_squad_definition(hyp: str, refs: list[str]) -> None:
    got = get_metric("exact_match").score([hyp], [refs]).values[0]
    assert got == float(any(_squad_oracle(hyp) == _squad_oracle(r) for r in refs))


# --- registry and table scoring -----------------------------------------------------------------


def test_registered_and_table_scoring(items: pd.DataFrame) -> None:
    names = {m.name for m in list_metrics()}
    assert {"bleu", "chrf", "rouge_l", "exact_match"} <= names
    for name in ("bleu", "chrf", "rouge_l", "exact_match"):
        cls = type(get_metric(name))
        assert cls.higher_is_better and cls.description
    sub = items.iloc[:40]
    out, runs = score(sub, ["rouge_l", "exact_match"])
    assert np.array_equal(out["rouge_l"].to_numpy(), _rouge_ref(sub["response"].tolist(), sub["reference"].tolist(), False))
    assert set(out["exact_match"].unique()) <= {0.0, 1.0}
    assert "rouge_l.precision" in out.columns and runs[0].signature.startswith("rouge_l|tok:rouge")
