"""DiscoScore (Zhao, Strube & Eger, 2023, "DiscoScore: Evaluating Text Generation with BERT and
Discourse Coherence", EACL; code: github.com/AIPHES/DiscoScore): two discourse-aware variants
with noun focus ("NN"), computed as the authors' code computes them (the code the paper's
numbers came from).

Common to both: the text is lower-cased (``lowercase=True``, as the authors' evaluation scripts do
before scoring), split at whitespace into words, and each word is tokenised on its own with the
model's tokenizer (``do_lower_case=False``, as the authors load it); the input is ``[CLS]`` followed
by the word pieces (no ``[SEP]``). The encoder keeps its first ``num_layers`` layers (8, as the
authors' code; fewer if the model has fewer) and the token vectors are that last kept layer's
output. Default encoder: ``bert-base-uncased`` (the authors' ``DiscoScorer`` default; their paper
runs use Conpono for DS-Focus and a BERT fine-tuned on NLI for DS-Sent, which any BERT-family
folder can be given as ``model``).

**DS-Focus (NN)**, ``variant="focus"`` (default; a distance, lower is better, 0 is best). The foci
of a text are its nouns: the lemmas of the ``NOUN`` / ``PROPN`` tokens the tagger finds in its
sentences. A word is an occurrence of focus ``f`` when the word *as written* equals the lemma ``f``
(so ``cats`` or ``mat.`` are not occurrences: the authors' exact-match rule). The vector of a
focus is the sum, over its occurrences, of the L2-normalised vector of the occurrence's last word
piece. With ``F(x)`` the foci of text ``x``::

    DS-Focus(hyp, ref) = sum_{f in F(hyp) & F(ref)} ||v_hyp(f) - v_ref(f)||^2 / |F(hyp)|

and 0 when the two texts share no focus (as the code; so a response without any noun scores 0).
The code also computes a recall-normalised value and an F-mean but returns this precision form.

**DS-Sent (NN)**, ``variant="sent"`` (a similarity in [-1, 1], higher is better, 1 is best). The
vector of sentence ``i`` is the mean of its token vectors (``[CLS]`` belongs to the first
sentence). Sentences ``i < j`` that share a noun lemma are linked with weight ``1 / (j - i)``
(an upper-triangular graph ``A``); the sentence vectors are ``(I + A) S``, each L2-normalised. If
the reference has one sentence the score is the mean cosine between it and each response
sentence; otherwise it is the cosine of the concatenated ``[min, mean, max, sum]`` pools (over
sentences) of the two texts.

Where evalign departs from the authors' code (the paper's full text was not at hand; these
are code details, not definitions):

* Attention: the code passes an all-zero attention mask. That masks every position alike, so
  transformers adds the same large negative number to every attention score and the softmax is
  (up to float rounding) that of full attention. evalign passes the true mask (full attention
  over each text's tokens); on the tiny test model the unmodified code, run with transformers
  5.23, differs from it by at most about 1.5e-4 (700 random pairs).
* Several references: the mean over references, as the code; the code's DS-Sent appends the
  score of a one-sentence reference twice (so it weighs double in that mean): evalign counts
  every reference once.
* Length: the code does not truncate (longer inputs fail); evalign keeps the first ``max_length``
  tokens (the model's limit by default), drops the foci / sentences that fall wholly beyond it,
  and counts truncated texts in ``info["truncated"]``.
* Sentences: the code splits with NLTK's Punkt and tags with UDPipe 1 (spacy-udpipe); evalign
  takes both from the pluggable tagger (default spaCy ``en_core_web_sm``, Punkt when its data is
  installed), so nouns, and scores, can differ where the taggers disagree.
* DS-Sent of an empty text (no sentence) is NaN (the code fails).

DS-Focus (Entity) and DS-Sent (Entity) need the authors' dependency-based word vectors
(``deps.words.bz2``, distributed from a file-sharing link), which cannot be had offline, and are
not offered.

torch / transformers (and the tagger's spaCy) are imported only when scoring.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from evalign.backends import models as M
from evalign.cache import Cache
from evalign.errors import EvalignError
from evalign.metrics._pair_cache import PairScoringMetric
from evalign.metrics.base import MetricResult, flatten_references, register_metric
from evalign.metrics.options import OptionSpec
from evalign.metrics.pos_tagger import NounTagger, get_tagger
from evalign.signature import stable_hash

DEFAULT_MODEL = "bert-base-uncased"
VARIANTS = ("focus", "sent")


@dataclass
class TextInput:
    """One text prepared for the encoder: ``ids`` (``[CLS]`` + word pieces, truncated), whether it
    was truncated, the foci (lemma -> token positions, DS-Focus) and the sentence of each token
    and the sentence graph ``I + A`` (DS-Sent)."""

    ids: list[int]
    truncated: bool
    foci: dict[str, list[int]] = field(default_factory=dict)
    sent_of: list[int] = field(default_factory=list)
    graph: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


def sentence_graph(noun_lemmas: Sequence[Sequence[str]]) -> np.ndarray:
    """``I + A`` for sentences with these noun lemmas: ``A[i, j] = 1 / (j - i)`` for ``i < j`` when
    sentences ``i`` and ``j`` share a lemma, else 0 (the authors' ``EntityGraph``, unweighted)."""
    n = len(noun_lemmas)
    where: dict[str, set[int]] = {}
    for i, lemmas in enumerate(noun_lemmas):
        for lemma in lemmas:
            where.setdefault(lemma, set()).add(i)
    a = np.zeros((n, n))
    for idx in where.values():
        for i, j in itertools.combinations(sorted(idx), 2):
            a[i, j] = 1.0 / (j - i)
    return np.identity(n) + a


def focus_distance(hyp_keys: Sequence[str], hyp_vecs: np.ndarray, ref_keys: Sequence[str], ref_vecs: np.ndarray) -> float:
    """DS-Focus of one (hypothesis, reference) pair from their foci and focus vectors: the summed
    squared distance of the common foci over ``|F(hyp)|`` (``+ 1e-9``, as the code); 0 without a
    common focus."""
    ref_row = {k: i for i, k in enumerate(ref_keys)}
    common = [(i, ref_row[k]) for i, k in enumerate(hyp_keys) if k in ref_row]
    if not common:
        return 0.0
    hi = [i for i, _ in common]
    ri = [j for _, j in common]
    diff = float(((hyp_vecs[hi] - ref_vecs[ri]) ** 2).sum())
    return diff / (len(hyp_keys) + 1e-9)


def sentence_similarity(hyp: np.ndarray, ref: np.ndarray) -> float:
    """DS-Sent of one pair from the normalised graph sentence vectors (rows) of both texts."""
    if len(hyp) == 0 or len(ref) == 0:
        return float("nan")
    if len(ref) == 1:
        return float(np.mean([_cos(ref[0], h) for h in hyp]))

    def pools(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x.min(0), x.mean(0), x.max(0), x.sum(0)])

    return _cos(pools(ref), pools(hyp))


def _cos(a: np.ndarray, b: np.ndarray, eps: float = 1e-8) -> float:
    """torch's ``cosine_similarity``: ``a.b / (max(|a|, eps) * max(|b|, eps))``."""
    return float(a @ b) / (max(float(np.linalg.norm(a)), eps) * max(float(np.linalg.norm(b)), eps))


@register_metric
class DiscoScore(PairScoringMetric):
    """DiscoScore with noun focus (see the module docstring for the definitions).

    Options:

    * ``variant`` (str): ``"focus"`` (default, DS-Focus (NN): a distance, **lower is better**, 0 best)
      or ``"sent"`` (DS-Sent (NN): a similarity, higher is better). ``higher_is_better`` follows.
    * ``model`` (str): any BERT-family encoder (hub id or local folder), default
      ``bert-base-uncased``.
    * ``tagger``: ``"spacy"`` (default, ``en_core_web_sm``), ``"spacy:<pipeline>"`` or an object
      following :class:`evalign.metrics.pos_tagger.NounTagger`.
    * ``num_layers`` (int, default 8): encoder layers kept (all if the model has fewer).
    * ``lowercase`` (bool, default True): lower-case both texts first, as the authors' scripts.
    * ``max_length`` (int or None): tokens read per text (default: the model's limit).
    * ``batch_size`` (texts per encoder call, default 16), ``token_budget`` (padded tokens per call,
      default 8192), ``device``, ``dtype`` (``fp32`` / ``fp16`` / ``bf16``).
    * ``use_cache`` (bool, default True): keep each distinct pair's score in the project's cache
      (namespace ``pair_score``; keyed by model content, tagger name and settings).
    * ``progress(done, total)``: called after each encoded batch (distinct texts).

    Several references: the mean over references (as the authors' code). ``info``: ``pairs``,
    ``computed``, ``cached``, ``texts`` (encoded), ``truncated`` (encoded texts cut).
    """

    name = "discoscore"
    higher_is_better: ClassVar[bool] = False  # the default variant, DS-Focus, is a distance
    description = "DiscoScore DS-Focus (NN) distance, lower is better (variant=sent: DS-Sent (NN) similarity)"
    dists = ("transformers", "torch")
    column_options = ("variant", "model")
    defaults: ClassVar[dict[str, Any]] = {"variant": "focus", "model": DEFAULT_MODEL}
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "model": OptionSpec(str, help="BERT-family encoder: hub id or local folder"),
        "variant": OptionSpec(str, choices=("focus", "sent")),
        "tagger": OptionSpec(object, none_ok=True, help="spacy, spacy:<pipeline> (Python: a NounTagger)"),
        "num_layers": OptionSpec(int, min=1),
        "lowercase": OptionSpec(bool),
        "max_length": OptionSpec(int, min=4, none_ok=True),
        **PairScoringMetric.RUN_OPTIONS,
    }

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        variant: str = "focus",
        tagger: str | NounTagger | None = None,
        num_layers: int = 8,
        lowercase: bool = True,
        max_length: int | None = None,
        batch_size: int = 16,
        token_budget: int = 8192,
        device: str | None = None,
        dtype: str = "fp32",
        use_cache: bool = True,
        cache: Cache | None = None,
        progress: M.Progress | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise EvalignError(f"discoscore: variant must be one of {', '.join(VARIANTS)}, not '{variant}'")
        self.variant = variant
        # DS-Sent is a similarity: this instance's direction differs from the class default
        self.higher_is_better = variant == "sent"  # type: ignore[misc]
        self.model = str(model)
        self._tagger_spec = tagger
        self._tagger: NounTagger | None = (
            get_tagger(tagger) if (tagger is not None and not isinstance(tagger, str)) else None)
        if int(num_layers) < 1:
            raise EvalignError(f"discoscore: num_layers must be >= 1, not {num_layers}")
        self.num_layers = int(num_layers)
        self.lowercase = bool(lowercase)
        self.max_length = None if max_length is None else int(max_length)
        self._set_run_options(batch_size=batch_size, token_budget=token_budget, device=device, dtype=dtype,
                              use_cache=use_cache, cache=cache, progress=progress)
        self._loaded: tuple[Any, Any, str] | None = None

    # -- parts ---------------------------------------------------------------------------------
    def tagger(self) -> NounTagger:
        """The part-of-speech tagger (loaded on first use)."""
        if self._tagger is None:
            spec = self._tagger_spec if isinstance(self._tagger_spec, str) else None
            self._tagger = get_tagger(spec)
        return self._tagger

    def _tagger_name(self) -> str:
        if self._tagger is not None:
            return str(self._tagger.name)
        return str(self._tagger_spec or "spacy")

    def options(self) -> dict[str, Any]:
        return {
            "model": M.model_shown(self.model), "model_id": M.model_identity(self.model), "variant": self.variant,
            "tagger": self._tagger_name(), "num_layers": self.num_layers, "lowercase": self.lowercase,
            "max_length": self.max_length if self.max_length is not None else "model", "dtype": self.dtype,
        }

    def _load(self) -> tuple[Any, Any, str]:
        if self._loaded is None:
            device = M.pick_device(self.device)
            n_layers = self.num_layers

            def loader(local_only: bool) -> tuple[Any, Any]:
                from transformers import AutoModel, AutoTokenizer

                path = os.path.expanduser(self.model)
                tok = AutoTokenizer.from_pretrained(path, do_lower_case=False, local_files_only=local_only)
                m = AutoModel.from_pretrained(path, local_files_only=local_only)
                layers = getattr(getattr(m, "encoder", None), "layer", None)
                if layers is None:
                    raise EvalignError(
                        f"discoscore: '{self.model}' is a {type(m).__name__}, not a BERT-family encoder "
                        "(encoder.layer)")
                import torch

                m.encoder.layer = torch.nn.ModuleList(list(layers)[:n_layers])
                m.eval().to(device)
                if self.dtype != "fp32":
                    m.to(M.torch_dtype(self.dtype))
                return tok, m

            key = ("discoscore", self.model, device, self.dtype, n_layers)
            tok, model = M.load_model(key, self.model, "DiscoScore encoder", loader)
            self._loaded = (tok, model, device)
        return self._loaded

    def _limit(self) -> int:
        tok, model, _ = self._load()
        limit = M.tokenizer_limit(tok, model.config)
        return min(limit, self.max_length) if self.max_length is not None else limit

    def prepare(self, text: str) -> TextInput:
        """Token ids, foci and sentence structure of one text (see :class:`TextInput`)."""
        tok, _, _ = self._load()
        tagger = self.tagger()
        limit = self._limit()
        if self.lowercase:
            text = text.lower()
        sentences = tagger.sentences(text)
        lemmas = [tagger.noun_lemmas(s) for s in sentences]

        def pieces(words: list[str]) -> list[list[int]]:
            return [list(x) for x in tok(words, add_special_tokens=False)["input_ids"]] if words else []

        ids = [int(tok.cls_token_id)]
        if self.variant == "focus":
            nouns = {w for ls in lemmas for w in ls}
            words = text.split()
            foci: dict[str, list[int]] = {}
            for w, p in zip(words, pieces(words), strict=True):
                ids.extend(p)
                if p and w in nouns:
                    foci.setdefault(w, []).append(len(ids) - 1)  # the word's last piece
            kept = {k: [i for i in v if i < limit] for k, v in foci.items()}
            return TextInput(ids[:limit], len(ids) > limit, foci={k: v for k, v in kept.items() if v})
        sent_of = [0]
        for k, s in enumerate(sentences):
            for p in pieces(s.split()):
                ids.extend(p)
                sent_of.extend([k] * len(p))
        n_kept = (max(sent_of[:limit]) + 1) if sentences else 0
        return TextInput(ids[:limit], len(ids) > limit, sent_of=sent_of[:limit],
                         graph=sentence_graph(lemmas)[:n_kept, :n_kept])

    def encode(self, texts: Sequence[TextInput]) -> list[np.ndarray]:
        """Last kept layer's token vectors (float64, ``(len(ids), hidden)``) of each prepared text,
        in length-sorted batches with full attention over each text's tokens."""
        import torch

        tok, model, device = self._load()
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        out: list[np.ndarray | None] = [None] * len(texts)
        done = 0
        for batch in M.length_batches([len(t.ids) for t in texts], self.batch_size, self.token_budget):
            longest = max(len(texts[i].ids) for i in batch)
            x = torch.full((len(batch), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), longest), dtype=torch.long)
            for r, i in enumerate(batch):
                x[r, : len(texts[i].ids)] = torch.tensor(texts[i].ids, dtype=torch.long)
                mask[r, : len(texts[i].ids)] = 1
            with torch.inference_mode():
                hidden = model(input_ids=x.to(device), attention_mask=mask.to(device))[0].float().cpu().numpy()
            for r, i in enumerate(batch):
                out[i] = hidden[r, : len(texts[i].ids)].astype(np.float64)
            done += len(batch)
            if self.progress is not None:
                self.progress(done, len(texts))
        return [o for o in out if o is not None]

    def representation(self, text: TextInput, hidden: np.ndarray) -> Any:
        """DS-Focus: (foci, focus vectors); DS-Sent: normalised graph sentence vectors."""
        if self.variant == "focus":
            unit = hidden / (np.linalg.norm(hidden, axis=-1, keepdims=True) + 1e-30)
            keys = list(text.foci)
            vecs = np.stack([unit[text.foci[k]].sum(0) for k in keys]) if keys else np.zeros((0, hidden.shape[1]))
            return keys, vecs
        n = text.graph.shape[0]
        sums = np.zeros((n, hidden.shape[1]))
        counts = np.zeros(n)
        for pos, k in enumerate(text.sent_of):
            if k < n:  # a text without sentences has only [CLS]
                sums[k] += hidden[pos]
                counts[k] += 1
        sents = sums / np.maximum(counts, 1.0)[:, None]
        e = text.graph @ sents
        return e / (np.linalg.norm(e, axis=-1, keepdims=True) + 1e-30)

    def _key_prefix(self) -> str:
        ident = M.model_identity(self.model)
        if ident == "unresolved":
            self._load()
            ident = M.model_identity(self.model)
            if ident == "unresolved":
                ident = "name:" + self.model
        return stable_hash({"kind": "discoscore", "model": ident, "variant": self.variant,
                            "tagger": self.tagger().name, "num_layers": self.num_layers,
                            "lowercase": self.lowercase, "max_length": self.max_length, "dtype": self.dtype},
                           length=32)

    # -- scoring -------------------------------------------------------------------------------
    def pair_scores(self, hyps: Sequence[str], refs: Sequence[str]) -> tuple[np.ndarray, dict[str, int]]:
        """DiscoScore of each (hypothesis, reference) pair, and run facts."""
        pairs = list(zip(hyps, refs, strict=True))
        facts = {"texts": 0, "truncated": 0}

        def compute(todo: list[tuple[str, str]], store: Callable[[list[int], np.ndarray], None]) -> None:
            texts = list(dict.fromkeys([t for p in todo for t in p]))
            prepared = [self.prepare(t) for t in texts]
            hidden = self.encode(prepared)
            reps = {t: self.representation(p, h) for t, p, h in zip(texts, prepared, hidden, strict=True)}
            facts["texts"] = len(texts)
            facts["truncated"] = sum(p.truncated for p in prepared)
            if self.variant == "focus":
                vals = [focus_distance(*reps[h], *reps[r]) for h, r in todo]
            else:
                vals = [sentence_similarity(reps[h], reps[r]) for h, r in todo]
            store(list(range(len(todo))), np.asarray(vals, dtype=float)[:, None])

        values, info = self.cached_scores(pairs, compute, self._key_prefix())
        return values, {**info, **facts}

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        """DiscoScore per item: the mean over its references (NaN without reference)."""
        hyp, ref, owner = flatten_references([str(r) for r in responses], references)
        n = len(responses)
        values = np.full(n, np.nan)
        if not hyp:
            return MetricResult(values, info={"pairs": 0})
        pair, info = self.pair_scores(hyp, [str(r) for r in ref])
        sums = np.zeros(n)
        counts = np.zeros(n)
        np.add.at(sums, owner, pair)
        np.add.at(counts, owner, 1)
        has = counts > 0
        values[has] = sums[has] / counts[has]
        return MetricResult(values, info=info)
