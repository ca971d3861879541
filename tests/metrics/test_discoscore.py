"""DiscoScore (DS-Focus NN, DS-Sent NN) on the tiny random BERT with a small injected tagger.

Expected values are computed here by hand from the encoder's hidden states (transformers'
``BertModel`` run on the token ids written out below) and the definitions in the module
docstring; token positions are derived by hand from the tiny vocabulary (one piece per word).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from evalign.cache import Cache
from evalign.errors import EvalignError
from evalign.metrics import get_metric, metric_class
from evalign.metrics.discoscore import DiscoScore, sentence_graph
from evalign.metrics.pos_tagger import NounTagger

NOUNS = {"cat": "cat", "cats": "cat", "mat": "mat", "dog": "dog", "house": "house", "tree": "tree",
         "book": "book", "city": "city", "water": "water", "car": "car", "world": "world",
         "zebra": "zebra"}


class WordTagger:
    """Sentences end at . ! ? followed by a space; nouns are the words listed in NOUNS."""

    name = "test-word-tagger"

    def sentences(self, text: str) -> list[str]:
        return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]

    def noun_lemmas(self, sentence: str) -> list[str]:
        return [NOUNS[w] for w in re.findall(r"[a-z]+", sentence) if w in NOUNS]


def hidden(model_dir: str, pieces: str, layers: int | None = None) -> np.ndarray:
    """Token vectors (after ``layers`` layers; all by default) of ``[CLS]`` + the word pieces
    written in ``pieces`` (separated by spaces)."""
    import torch
    from transformers import BertModel, BertTokenizer

    tok = BertTokenizer.from_pretrained(model_dir, do_lower_case=False)
    ids = tok.convert_tokens_to_ids(["[CLS]", *pieces.split(" ")])
    assert tok.unk_token_id not in ids
    model = BertModel.from_pretrained(model_dir).eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states[layers if layers is not None else -1][0].double().numpy()


def unit(x: np.ndarray) -> np.ndarray:
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + 1e-30)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def make(model: str, **kw: object) -> DiscoScore:
    kw.setdefault("use_cache", False)
    return DiscoScore(model, tagger=WordTagger(), device="cpu", **kw)  # type: ignore[arg-type]


HYP = "the cat sat on the mat. the cat is red"
REF = "a cat and a dog sat on a mat"


def test_focus_hand_computed(tiny_bert: str) -> None:
    # foci of HYP: {cat} ("mat." is not the lemma "mat"); cat = words 2 and 9 (after [CLS] at 0)
    h = unit(hidden(tiny_bert, "the cat sat on the mat . the cat is red"))
    r = unit(hidden(tiny_bert, "a cat and a dog sat on a mat"))
    want = float(((h[2] + h[9] - r[2]) ** 2).sum()) / (1 + 1e-9)
    got = make(tiny_bert).score([HYP], [[REF]]).values[0]
    assert got == pytest.approx(want, rel=1e-5)
    # foci of REF: {cat, dog, mat}; as hypothesis: common {cat, mat}? no: HYP has no focus "mat"
    want_rev = float(((r[2] - h[2] - h[9]) ** 2).sum()) / (3 + 1e-9)
    assert make(tiny_bert).score([REF], [[HYP]]).values[0] == pytest.approx(want_rev, rel=1e-5)


def test_focus_vector_is_the_last_piece_of_the_word(tiny_bert: str) -> None:
    # "zebra" is not in the tiny vocabulary: z ##e ##b ##r ##a; its focus vector is at ##a
    h = unit(hidden(tiny_bert, "the z ##e ##b ##r ##a sat on the cat"))
    r = unit(hidden(tiny_bert, "a big z ##e ##b ##r ##a sat on a cat"))
    want = float(((h[6] - r[7]) ** 2).sum() + ((h[10] - r[11]) ** 2).sum()) / (2 + 1e-9)
    got = make(tiny_bert).score(["the zebra sat on the cat"], [["a big zebra sat on a cat"]]).values[0]
    assert got == pytest.approx(want, rel=1e-5)


def test_focus_uses_the_first_layers(tiny_bert: str) -> None:
    h = unit(hidden(tiny_bert, "the cat sat on the mat . the cat is red", layers=2))
    r = unit(hidden(tiny_bert, "a cat and a dog sat on a mat", layers=2))
    want = float(((h[2] + h[9] - r[2]) ** 2).sum())
    got = make(tiny_bert, num_layers=2).score([HYP], [[REF]]).values[0]
    assert got == pytest.approx(want, rel=1e-5)
    assert abs(got - make(tiny_bert).score([HYP], [[REF]]).values[0]) > 1e-4


def test_sent_hand_computed(tiny_bert: str) -> None:
    hyp = "the cat sat. a dog sat. the cat is red."
    # sentences 0, 1, 2 with nouns [cat], [dog], [cat]: A[0, 2] = 1/2
    np.testing.assert_array_equal(sentence_graph([["cat"], ["dog"], ["cat"]]),
                                  [[1, 0, 0.5], [0, 1, 0], [0, 0, 1]])
    hh = hidden(tiny_bert, "the cat sat . a dog sat . the cat is red .")
    s = np.stack([hh[0:5].mean(0), hh[5:9].mean(0), hh[9:14].mean(0)])  # [CLS] joins sentence 0
    e = unit(np.stack([s[0] + 0.5 * s[2], s[1], s[2]]))
    # a one-sentence reference: mean cosine with each hypothesis sentence
    r1 = unit(hidden(tiny_bert, "the dog sat on the mat .").mean(0, keepdims=True))
    want1 = np.mean([cos(r1[0], x) for x in e])
    # a two-sentence reference sharing "cat": pooled [min, mean, max, sum]
    rr = hidden(tiny_bert, "a cat sat . the cat is big .")
    rs = np.stack([rr[0:5].mean(0), rr[5:10].mean(0)])
    re_ = unit(np.stack([rs[0] + rs[1], rs[1]]))

    def pools(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x.min(0), x.mean(0), x.max(0), x.sum(0)])

    want2 = cos(pools(re_), pools(e))
    m = make(tiny_bert, variant="sent")
    got = m.score([hyp, hyp], [["the dog sat on the mat."], ["a cat sat. the cat is big."]]).values
    np.testing.assert_allclose(got, [want1, want2], rtol=1e-5)


def test_identical_texts_score_best(tiny_bert: str) -> None:
    texts = [HYP, REF, "the dog sat on the mat. the dog is big. a cat sat on the dog."]
    other = ["the cat is on a red mat. the house is big", "a dog and a cat sat in a car", "the dog is big."]
    focus = make(tiny_bert)
    same = focus.score(texts, [[t] for t in texts]).values
    np.testing.assert_array_equal(same, 0.0)  # a distance: 0 is best
    diff = focus.score(other, [[t] for t in texts]).values
    assert (diff > 0).all()
    sent = make(tiny_bert, variant="sent")
    np.testing.assert_allclose(sent.score(texts, [[t] for t in texts]).values, 1.0, atol=1e-6)
    assert (sent.score(other, [[t] for t in texts]).values < 1 - 1e-4).all()


def test_no_common_focus_scores_zero_as_the_code(tiny_bert: str) -> None:
    # the authors' code returns 0 when hypothesis and reference share no noun
    assert make(tiny_bert).score(["the house is big"], [["a dog sat on a mat"]]).values[0] == 0.0
    assert make(tiny_bert).score(["it is big"], [["a dog sat on a mat"]]).values[0] == 0.0


def test_empty_texts(tiny_bert: str) -> None:
    refs = [["the cat sat."], ["a dog"], [""]]
    np.testing.assert_array_equal(make(tiny_bert).score(["", "  ", "the cat"], refs).values, 0.0)  # no focus
    assert np.isnan(make(tiny_bert, variant="sent").score(["", "  ", "the cat"], refs).values).all()


def test_direction_declared() -> None:
    assert metric_class("discoscore").higher_is_better is False
    assert get_metric("discoscore", tagger=WordTagger()).higher_is_better is False
    m = get_metric("discoscore", variant="sent", tagger=WordTagger())
    assert m.higher_is_better is True and m.column == "discoscore[variant=sent]"
    assert get_metric("discoscore", tagger=WordTagger()).model == "bert-base-uncased"
    with pytest.raises(EvalignError, match="variant"):
        get_metric("discoscore", variant="entity")


def test_batches_equal_single_texts_and_references_are_averaged(tiny_bert: str) -> None:
    hyps = [HYP, "a dog sat on the mat. the dog is big", "the cat and the dog sat in the house. the house is red"]
    refs = [REF, "the dog is on a mat", "a cat sat in a big house. the dog sat on the cat"]
    for variant in ("focus", "sent"):
        batched = make(tiny_bert, variant=variant, batch_size=3).score(hyps, [[r] for r in refs]).values
        single = [make(tiny_bert, variant=variant, batch_size=1).score([h], [[r]]).values[0]
                  for h, r in zip(hyps, refs, strict=True)]
        np.testing.assert_allclose(batched, single, rtol=1e-5, atol=1e-7)
        multi = make(tiny_bert, variant=variant).score([hyps[0]], [refs]).values[0]
        pair = [make(tiny_bert, variant=variant).score([hyps[0]], [[r]]).values[0] for r in refs]
        assert multi == pytest.approx(np.mean(pair), rel=1e-6)


def test_truncation_drops_foci_beyond_the_limit(tiny_bert: str) -> None:
    # [CLS] the cat sat on the mat . the cat is red: with 5 tokens only the first "cat" is read
    h = unit(hidden(tiny_bert, "the cat sat on"))
    r = unit(hidden(tiny_bert, "a cat and a"))
    res = make(tiny_bert, max_length=5).score([HYP], [[REF]])
    assert res.info["truncated"] == 2
    assert res.values[0] == pytest.approx(float(((h[2] - r[2]) ** 2).sum()), rel=1e-5)


def test_cache(tiny_bert: str, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    calls: list[tuple[int, int]] = []
    first = make(tiny_bert, cache=cache, use_cache=True, batch_size=1,
                 progress=lambda d, t: calls.append((d, t))).score([HYP, REF], [[REF], [HYP]])
    assert first.info["computed"] == 2 and first.info["texts"] == 2
    assert calls == [(1, 2), (2, 2)]
    second = make(tiny_bert, cache=cache, use_cache=True).score([HYP, REF], [[REF], [HYP]])
    assert second.info["computed"] == 0 and second.info["cached"] == 2
    np.testing.assert_array_equal(first.values, second.values)
    third = make(tiny_bert, cache=cache, use_cache=True, variant="sent").score([HYP], [[REF]])
    assert third.info["computed"] == 1


def test_tagger_is_pluggable_and_spacy_missing_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(WordTagger(), NounTagger)
    with pytest.raises(EvalignError, match="tagger must have"):
        DiscoScore(tagger=object())  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "spacy", None)  # import spacy -> ImportError
    with pytest.raises(EvalignError, match=r"spacy download en_core_web_sm"):
        DiscoScore().tagger()


def test_metrics_cli_lists_bleurt_and_discoscore_with_defaults() -> None:
    import json

    from typer.testing import CliRunner

    from evalign.cli import app

    res = CliRunner().invoke(app, ["metrics", "--json"])
    assert res.exit_code == 0, res.output
    listed = {m["metric"]: m for m in json.loads(res.stdout)}
    assert listed["discoscore"]["defaults"] == "variant=focus, model=bert-base-uncased"
    assert listed["discoscore"]["higher_is_better"] is False
    assert listed["bleurt"]["defaults"] == "model=lucadiliello/BLEURT-20"
    assert listed["bleurt"]["higher_is_better"] is True


def test_spacy_tagger_wiring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default tagger keeps the lemmas of NOUN / PROPN tokens and names its pipeline (a stand-in
    ``spacy`` module replaces the real one, whose English pipeline is not installed here)."""
    import types

    from evalign.metrics import pos_tagger

    class Tok:
        def __init__(self, text: str, pos: str, lemma: str) -> None:
            self.text, self.pos_, self.lemma_ = text, pos, lemma

    class Span:
        def __init__(self, text: str) -> None:
            self.text = text

    tags = {"cats": ("NOUN", "cat"), "paris": ("PROPN", "paris"), "sat": ("VERB", "sit")}

    class Doc(list):  # type: ignore[type-arg]
        def __init__(self, text: str) -> None:
            super().__init__(Tok(w, *tags.get(w, ("X", w))) for w in text.split())
            self.sents = [Span(s) for s in text.split(" | ")]

    class Nlp:
        def __init__(self) -> None:
            self.meta = {"version": "3.8.0"}

        def __call__(self, text: str) -> Doc:
            return Doc(text)

    loaded: list[str] = []
    fake = types.ModuleType("spacy")
    fake.load = lambda name: loaded.append(name) or Nlp()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "spacy", fake)
    monkeypatch.setattr(pos_tagger, "_punkt_splitter", lambda: None)
    t = DiscoScore(tagger="spacy:en_core_web_md").tagger()
    assert loaded == ["en_core_web_md"] and t.name == "spacy:en_core_web_md@3.8.0+spacy-sents"
    assert t.noun_lemmas("the cats sat in paris") == ["cat", "paris"]
    assert t.sentences("the cats sat | in paris") == ["the cats sat", "in paris"]
    assert DiscoScore().tagger().name.startswith("spacy:en_core_web_sm@")
