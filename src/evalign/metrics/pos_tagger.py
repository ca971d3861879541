"""Sentence splitting and noun finding for discourse metrics (DiscoScore), as a pluggable part.

A :class:`NounTagger` splits a text into sentences and lists the lemmas of the nouns (universal
POS ``NOUN`` and ``PROPN``) of a sentence. The default, :class:`SpacyTagger`, uses a spaCy English
pipeline (``en_core_web_sm``) when spaCy and that pipeline are installed; spaCy's pipelines are
not on the Python package index, so they are never installed with evalign (see
:data:`SPACY_HINT`). Any object with the same three members can be passed instead (tests use a
small dictionary tagger).

spaCy is imported only when the default tagger is first used.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from evalign.errors import EvalignError

#: universal POS tags that count as nouns (DiscoScore's noun focus)
NOUN_TAGS = frozenset({"NOUN", "PROPN"})

SPACY_HINT = (
    "install spaCy and its English pipeline: `pip install spacy` then `python -m spacy download "
    "en_core_web_sm` (the pipelines come from spaCy's own releases, not from the Python package "
    "index), or pass tagger= an object with `name`, `sentences(text)` and `noun_lemmas(sentence)` "
    "(evalign.metrics.pos_tagger.NounTagger)"
)


@runtime_checkable
class NounTagger(Protocol):
    """What DiscoScore needs from a part-of-speech tagger.

    ``name``: a short identity of the tagger and its model (goes into signatures and cache keys;
    a different tagger finds different nouns). ``sentences(text)``: the sentences of ``text``, in
    order, each a substring that keeps its words as written. ``noun_lemmas(sentence)``: the lemma
    of each ``NOUN`` / ``PROPN`` token of ``sentence``, in order (repeats kept).
    """

    name: str

    def sentences(self, text: str) -> list[str]: ...

    def noun_lemmas(self, sentence: str) -> list[str]: ...


class SpacyTagger:
    """A spaCy pipeline (default ``en_core_web_sm``): lemmas of its ``NOUN`` / ``PROPN`` tokens.
    Sentences come from NLTK's Punkt splitter when its data is installed (as in the DiscoScore
    authors' code), else from the pipeline's own sentence boundaries; ``name`` says which."""

    def __init__(self, model: str = "en_core_web_sm") -> None:
        try:
            import spacy
        except ImportError as e:
            raise EvalignError(f"discoscore needs a part-of-speech tagger: spaCy is not installed; {SPACY_HINT}") from e
        try:
            self._nlp: Any = spacy.load(model)
        except OSError as e:
            raise EvalignError(
                f"discoscore needs a part-of-speech tagger: spaCy pipeline '{model}' is not installed; {SPACY_HINT}"
            ) from e
        self._punkt = _punkt_splitter()
        version = self._nlp.meta.get("version", "?")
        self.name = f"spacy:{model}@{version}+{'punkt' if self._punkt is not None else 'spacy-sents'}"

    def sentences(self, text: str) -> list[str]:
        if self._punkt is not None:
            return [s for s in self._punkt(text) if s.strip()]
        return [s.text for s in self._nlp(text).sents if s.text.strip()]

    def noun_lemmas(self, sentence: str) -> list[str]:
        return [t.lemma_ for t in self._nlp(sentence) if t.pos_ in NOUN_TAGS]


def _punkt_splitter() -> Any:
    """NLTK's ``sent_tokenize`` when the Punkt data is installed, else None."""
    try:
        import nltk

        nltk.data.find("tokenizers/punkt_tab/english/")
        from nltk.tokenize import sent_tokenize
    except (ImportError, LookupError, OSError):
        return None
    return sent_tokenize


def get_tagger(tagger: str | NounTagger | None) -> NounTagger:
    """A tagger from an object, ``None`` / ``"spacy"`` (``en_core_web_sm``) or
    ``"spacy:<pipeline>"`` (e.g. ``"spacy:en_core_web_trf"``)."""
    if tagger is None or tagger == "spacy":
        return SpacyTagger()
    if isinstance(tagger, str):
        if tagger.startswith("spacy:"):
            return SpacyTagger(tagger.split(":", 1)[1])
        raise EvalignError(f"discoscore: tagger must be 'spacy' or 'spacy:<pipeline>', not '{tagger}'")
    if not isinstance(tagger, NounTagger):
        raise EvalignError("discoscore: tagger must have `name`, `sentences(text)` and `noun_lemmas(sentence)`")
    return tagger
