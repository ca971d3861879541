"""Embedding metrics: SemScore, pooled-encoder similarity and BERTScore.

* ``semscore`` (Aynetdinov & Akbik, 2024, "SemScore: Automated Evaluation of Instruction-Tuned
  LLMs based on Semantic Textual Similarity"): cosine similarity of the sentence-transformers
  embeddings of response and reference (default ``sentence-transformers/all-mpnet-base-v2``).
* ``pooled_similarity``: the same with any Hugging Face encoder and mean or CLS pooling (the
  paper's ablation with ``microsoft/deberta-xlarge-mnli``).
* ``bertscore`` (Zhang et al., 2020): greedy token matching of contextual embeddings, computed
  exactly as the ``bert-score`` package does (same tokenisation, layer, idf, baseline rescaling).

torch / transformers / sentence-transformers are imported only when scoring.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from evalign.backends import models as M
from evalign.cache import Cache
from evalign.errors import EvalignError
from evalign.metrics import encoders as E
from evalign.metrics.base import (
    Metric,
    MetricResult,
    argmax_by_owner,
    flatten_references,
    max_by_owner,
    register_metric,
)
from evalign.metrics.options import OptionSpec
from evalign.signature import stable_hash


class _LabelledColumn(Metric):
    """Column names show a readable model label (``semscore[model=all-MiniLM-L6-v2]``)."""

    @property
    def column(self) -> str:
        opts = self.options()
        suffix = []
        for k in self.column_options:
            if k in opts and opts[k] != self.defaults.get(k):
                v = M.model_label(str(opts[k])) if k == "model" else _fmt(opts[k])
                suffix.append(f"{k}={v}")
        return self.name if not suffix else f"{self.name}[{','.join(suffix)}]"


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


class _VectorSimilarity(_LabelledColumn):
    """Cosine similarity of one vector per text; shared by ``semscore`` and ``pooled_similarity``.

    Each distinct text (references repeat across systems) is encoded once, in length-sorted
    batches, and its vector is kept in the project's cache (namespace ``"embedding"``), keyed by
    the model's content identity, the settings and the text's hash, so a second run over the same
    texts encodes nothing. Several references: the best (largest) cosine.
    """

    uses_cache: ClassVar[bool] = True
    higher_is_better: ClassVar[bool] = True
    kind: ClassVar[str]
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "model": OptionSpec(str, help="hub id or local folder"),
        "device": OptionSpec(str, none_ok=True),
        "dtype": OptionSpec(str, choices=("fp32", "fp16", "bf16")),
        "batch_size": OptionSpec(int, min=1),
        "token_budget": OptionSpec(int, min=1),
        "max_seq_length": OptionSpec(int, min=1, none_ok=True),
        "use_cache": OptionSpec(bool),
        "cache": OptionSpec(object, none_ok=True, cli=False),
        "progress": OptionSpec(object, none_ok=True, cli=False),
    }

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        dtype: str = "fp32",
        batch_size: int = 32,
        token_budget: int = 16384,
        max_seq_length: int | None = None,
        use_cache: bool = True,
        cache: Cache | None = None,
        progress: M.Progress | None = None,
    ) -> None:
        self.model = str(model)
        self.progress = progress
        self.device = device
        self.dtype = M.check_dtype(dtype)
        self.batch_size = int(batch_size)
        self.token_budget = int(token_budget)
        self.max_seq_length = None if max_seq_length is None else int(max_seq_length)
        self.use_cache = bool(use_cache)
        self._cache = cache
        self._encoder: E.TextEncoder | None = None

    def _settings(self) -> dict[str, Any]:
        return {}

    def options(self) -> dict[str, Any]:
        return {
            "model": M.model_shown(self.model),
            "model_id": M.model_identity(self.model),
            **self._settings(),
            "max_seq_length": self.max_seq_length if self.max_seq_length is not None else "model",
            "dtype": self.dtype,
        }

    def _make_encoder(self) -> E.TextEncoder:
        raise NotImplementedError

    def encoder(self) -> E.TextEncoder:
        """The loaded encoder (loaded on first use)."""
        if self._encoder is None:
            self._encoder = self._make_encoder()
        return self._encoder

    def _key_prefix(self) -> str:
        ident = M.model_identity(self.model)
        if ident == "unresolved":  # a hub id not yet downloaded: load (download) it, then look again
            self.encoder()
            ident = M.model_identity(self.model)
            if ident == "unresolved":
                ident = "name:" + self.model
        return stable_hash(
            {"kind": self.kind, "model": ident, **self._settings(), "max_seq_length": self.max_seq_length,
             "dtype": self.dtype},
            length=32,
        )

    def _open_cache(self) -> Cache:
        if not self.use_cache:
            return Cache.disabled()
        return self._cache if self._cache is not None else Cache()

    def embed(self, texts: Sequence[str]) -> E.Embeddings:
        """Vectors of the distinct ``texts`` (through the cache)."""
        cache = self._open_cache()
        try:
            return E.embed_texts(texts, self.encoder, self._key_prefix(), cache, batch_size=self.batch_size,
                                 token_budget=self.token_budget, progress=self.progress)
        finally:
            if cache is not self._cache:
                cache.close()

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        """Cosine similarity in [-1, 1] of response and reference vectors (best over references)."""
        hyp, ref, owner = flatten_references([str(r) for r in responses], references)
        n = len(responses)
        if not hyp:
            return MetricResult(np.full(n, np.nan), info={"pairs": 0})
        emb = self.embed(hyp + ref)
        cos = E.cosine_rows(emb.of(hyp), emb.of(ref))
        info = {
            "texts": len(emb.index),
            "encoded": emb.encoded,
            "cached": emb.cached,
            "truncated": emb.truncated,
            "max_tokens": emb.max_length,
        }
        return MetricResult(max_by_owner(cos, owner, n), info=info)


@register_metric
class SemScore(_VectorSimilarity):
    """SemScore: cosine similarity of sentence-transformers embeddings of response and reference.

    ``model``: any sentence-transformers hub id or local folder (default
    ``sentence-transformers/all-mpnet-base-v2``, as in the paper). ``device``: ``cuda`` / ``mps`` /
    ``cpu`` (chosen automatically when None). ``dtype``: ``fp32`` (default), ``fp16`` or ``bf16``
    (half precision is meant for GPUs). ``max_seq_length``: override the model's limit; longer
    texts are truncated as the model does and ``info["truncated"]`` counts them (distinct texts).
    ``use_cache=False``: neither read nor write the embedding cache. ``progress(done, total)``: called
    after each encoded batch (texts). Range [-1, 1], higher is better.
    """

    name = "semscore"
    description = "cosine similarity of sentence-transformers embeddings (SemScore, all-mpnet-base-v2)"
    dists = ("sentence-transformers", "transformers", "torch")
    column_options = ("model",)
    defaults: ClassVar[dict[str, Any]] = {"model": "sentence-transformers/all-mpnet-base-v2"}
    kind = "sentence-transformers"

    def __init__(self, model: str = "sentence-transformers/all-mpnet-base-v2", **kwargs: Any) -> None:
        super().__init__(model, **kwargs)

    def _make_encoder(self) -> E.TextEncoder:
        return E.SentenceTransformerEncoder(self.model, device=self.device, dtype=self.dtype,
                                            max_seq_length=self.max_seq_length)


@register_metric
class PooledSimilarity(_VectorSimilarity):
    """Cosine similarity of pooled token vectors of any Hugging Face encoder (``AutoModel``).

    ``pooling="mean"`` (default): mean of the last layer's token vectors over the attention mask;
    ``"cls"``: the first token's vector. Default model ``microsoft/deberta-xlarge-mnli`` (the
    SemScore paper's ablation). Same caching, batching, device and dtype options as ``semscore``.
    Range [-1, 1], higher is better.
    """

    name = "pooled_similarity"
    description = "cosine similarity of mean/CLS-pooled encoder vectors (any Hugging Face encoder)"
    dists = ("transformers", "torch")
    column_options = ("model", "pooling")
    defaults: ClassVar[dict[str, Any]] = {"model": "microsoft/deberta-xlarge-mnli", "pooling": "mean"}
    option_types: ClassVar[dict[str, OptionSpec]] = {
        **_VectorSimilarity.option_types, "pooling": OptionSpec(str, choices=("mean", "cls")),
    }
    kind = "hf-pooled"

    def __init__(self, model: str = "microsoft/deberta-xlarge-mnli", *, pooling: str = "mean",
                 **kwargs: Any) -> None:
        if pooling not in ("mean", "cls"):
            raise EvalignError(f"pooled_similarity: pooling must be 'mean' or 'cls', not '{pooling}'")
        self.pooling = pooling
        super().__init__(model, **kwargs)

    def _settings(self) -> dict[str, Any]:
        return {"pooling": self.pooling}

    def _make_encoder(self) -> E.TextEncoder:
        return E.PooledEncoder(self.model, pooling=self.pooling, device=self.device, dtype=self.dtype,
                               max_seq_length=self.max_seq_length)


# --- BERTScore --------------------------------------------------------------------------------


def default_bertscore_layer(model: str) -> int | None:
    """bert-score's tuned layer for ``model`` (its ``model2layers`` table), or None if unknown."""
    try:
        from bert_score.utils import model2layers
    except ImportError:
        return None
    layer = model2layers.get(model)
    return None if layer is None else int(layer)


def bertscore_baseline_file(model: str, lang: str) -> str | None:
    """The rescaling baseline that the ``bert-score`` package ships for ``model`` and ``lang``
    (``rescale_baseline/<lang>/<model>.tsv``), or None."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("bert_score")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = os.path.join(os.path.dirname(spec.origin), "rescale_baseline", lang, f"{model}.tsv")
    return path if os.path.isfile(path) else None


@register_metric
class BertScore(_LabelledColumn):
    """BERTScore F1 (value) with precision and recall as extras (columns ``bertscore.precision`` and
    ``bertscore.recall``), identical to ``bert_score.score`` with the same model and settings.

    ``model``: a Hugging Face id or local folder (default ``microsoft/deberta-xlarge-mnli``, as in
    the SemScore paper's comparison). ``num_layers``: the layer whose token vectors are matched
    (default: bert-score's tuned layer for the model; required for other models). ``idf``: weight
    tokens by inverse document frequency computed over the references passed to :meth:`score`
    (every reference of every pair, as bert-score does). ``rescale``: rescale P, R, F with a
    baseline (``(x - b) / (1 - b)``) read from ``baseline_path`` or from the file bert-score ships
    for the model and ``lang``; a missing baseline is an error, not a warning. Several references:
    the reference with the best F1 is kept and its P and R are reported (bert-score takes the
    maximum of P, R and F separately; F1 is the same either way). Empty texts score 0 before
    rescaling (as in bert-score). Texts longer than the model's limit are truncated
    (``info["truncated"]`` counts distinct texts). ``progress(done, total)``: called after each
    encoded batch (distinct texts).

    bert-score computes the greedy matching in batches of ``batch_size`` pairs padded to the
    longest sentence of the batch, and the padding takes part in the maximum with similarity 0
    (so a token whose best cosine is negative gets 0 when the other sentence is shorter than the
    batch's longest). evalign reproduces this batching exactly so that scores are identical.
    """

    name = "bertscore"
    higher_is_better = True
    description = "BERTScore F1 (P and R as extras); identical to the bert-score package"
    dists = ("transformers", "torch")
    column_options = ("model", "num_layers", "idf", "rescale")
    defaults: ClassVar[dict[str, Any]] = {
        "model": "microsoft/deberta-xlarge-mnli", "num_layers": "default", "idf": False, "rescale": False,
    }
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "model": OptionSpec(str), "num_layers": OptionSpec(int, min=1, none_ok=True), "idf": OptionSpec(bool),
        "rescale": OptionSpec(bool), "baseline_path": OptionSpec(str, none_ok=True), "lang": OptionSpec(str),
        "batch_size": OptionSpec(int, min=1), "encode_batch_size": OptionSpec(int, min=1),
        "token_budget": OptionSpec(int, min=1), "device": OptionSpec(str, none_ok=True),
        "dtype": OptionSpec(str, choices=("fp32", "fp16", "bf16")), "use_fast_tokenizer": OptionSpec(bool),
        "progress": OptionSpec(object, none_ok=True, cli=False),
    }

    def __init__(
        self,
        model: str = "microsoft/deberta-xlarge-mnli",
        *,
        num_layers: int | None = None,
        idf: bool = False,
        rescale: bool = False,
        baseline_path: str | None = None,
        lang: str = "en",
        batch_size: int = 64,
        encode_batch_size: int = 64,
        token_budget: int = 16384,
        device: str | None = None,
        dtype: str = "fp32",
        use_fast_tokenizer: bool = False,
        progress: M.Progress | None = None,
    ) -> None:
        self.model = str(model)
        self.progress = progress
        self.default_layer = num_layers is None
        layer = default_bertscore_layer(self.model) if num_layers is None else int(num_layers)
        if layer is None:
            raise EvalignError(
                f"bertscore: no default layer known for model '{self.model}'; pass num_layers= "
                "(bert-score's model2layers table lists the tuned layer of known models)"
            )
        self.num_layers = layer
        self.idf = bool(idf)
        self.rescale = bool(rescale)
        self.lang = lang
        self.baseline_path = baseline_path
        if self.rescale:
            path = baseline_path or bertscore_baseline_file(self.model, lang)
            if path is None or not os.path.isfile(path):
                where = f"'{baseline_path}' does not exist" if baseline_path else (
                    f"bert-score ships none for model '{self.model}' and lang '{lang}'")
                raise EvalignError(
                    f"bertscore: rescale=True needs a baseline file, but {where}. Pass baseline_path= "
                    "(a CSV with columns LAYER,P,R,F, one row per layer, as in bert-score's "
                    "rescale_baseline folder) or use rescale=False."
                )
            self.baseline_path = path
        self.batch_size = int(batch_size)
        self.encode_batch_size = int(encode_batch_size)
        self.token_budget = int(token_budget)
        self.device = device
        self.dtype = M.check_dtype(dtype)
        self.use_fast_tokenizer = bool(use_fast_tokenizer)
        self._loaded: tuple[Any, Any, str] | None = None

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "model": M.model_shown(self.model),
            "model_id": M.model_identity(self.model),
            "num_layers": "default" if self.default_layer else self.num_layers,
            "layer": self.num_layers,
            "idf": self.idf,
            "rescale": self.rescale,
        }
        if self.rescale and self.baseline_path:
            opts["baseline"] = M.model_identity(self.baseline_path)
        opts["fast_tokenizer"] = self.use_fast_tokenizer
        opts["dtype"] = self.dtype
        return opts

    # -- model --------------------------------------------------------------------------------
    def _load(self) -> tuple[Any, Any, str]:
        if self._loaded is None:
            device = M.pick_device(self.device)
            layers = self.num_layers
            tok, model = M.load_hf_encoder(
                self.model, device=device, dtype=self.dtype, use_fast=self.use_fast_tokenizer,
                prepare=lambda m: _truncate_layers(m, layers), prepare_key=("bertscore-layers", layers),
            )
            self._loaded = (tok, model, device)
        return self._loaded

    def _token_ids(self, tok: Any, texts: Sequence[str]) -> tuple[list[list[int]], int]:
        """bert-score's ``sent_encode`` for each text (strip, special tokens, truncation at the
        tokenizer's ``model_max_length``; a prefix space for GPT-2/RoBERTa tokenizers), and how many
        texts were truncated."""
        from transformers import GPT2Tokenizer, RobertaTokenizer

        kw: dict[str, Any] = {"add_special_tokens": True}
        if isinstance(tok, (GPT2Tokenizer, RobertaTokenizer)):
            kw["add_prefix_space"] = True
        stripped = [t.strip() for t in texts]
        nonempty = [i for i, t in enumerate(stripped) if t]
        # bert-score encodes an empty text as build_inputs_with_special_tokens([]) (e.g. [CLS] [SEP]);
        # transformers 5 tokenizers no longer have that method, the special tokens of "" are the same
        empty = list(tok("", add_special_tokens=True)["input_ids"])
        out: list[list[int]] = [list(empty) for _ in texts]
        # bert-score truncates at the tokenizer's model_max_length; where that is unset (huge), at the
        # model's position limit instead of failing
        tml = tok.model_max_length
        limit = tml if isinstance(tml, int) and 0 < tml < 1_000_000 else M.tokenizer_limit(tok, self._load()[1].config)
        truncated = 0
        if nonempty:
            full = tok([stripped[i] for i in nonempty], truncation=False, verbose=False, **kw)["input_ids"]
            long = [j for j, ids in enumerate(full) if len(ids) > limit]
            for j, ids in enumerate(full):
                out[nonempty[j]] = list(ids)
            if long:
                truncated = len(long)
                cut = tok([stripped[nonempty[j]] for j in long], truncation=True, max_length=limit, **kw)
                for j, ids in zip(long, cut["input_ids"], strict=True):
                    out[nonempty[j]] = list(ids)
        return out, truncated

    def _embed(self, texts: list[str], ids: list[list[int]]) -> list[Any]:
        """Unit-normalised token vectors (float32, on the model's device) of each text."""
        import torch

        tok, model, device = self._load()
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        out: list[Any] = [None] * len(texts)
        done = 0
        for batch in M.length_batches([len(x) for x in ids], self.encode_batch_size, self.token_budget):
            longest = max(len(ids[i]) for i in batch)
            x = torch.full((len(batch), longest), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), longest), dtype=torch.long)
            for r, i in enumerate(batch):
                x[r, : len(ids[i])] = torch.tensor(ids[i], dtype=torch.long)
                mask[r, : len(ids[i])] = 1
            with torch.inference_mode():
                emb = model(x.to(device), attention_mask=mask.to(device))[0].float()
            emb = emb / emb.norm(dim=-1, keepdim=True)
            for r, i in enumerate(batch):
                out[i] = emb[r, : len(ids[i])]
            done += len(batch)
            if self.progress is not None:
                self.progress(done, len(texts))
        return out

    # -- scoring ------------------------------------------------------------------------------
    def pair_scores(self, hyps: Sequence[str], refs: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """P, R, F (float64, before rescaling) of each (hypothesis, reference) pair, and how many
        distinct texts were truncated."""
        import torch
        from torch.nn.utils.rnn import pad_sequence

        tok, _, _ = self._load()
        distinct = list(dict.fromkeys([*refs, *hyps]))
        index = {t: i for i, t in enumerate(distinct)}
        ids, truncated = self._token_ids(tok, distinct)
        weights = self._idf_weights(tok, ids, [index[r] for r in refs])
        embs = self._embed(distinct, ids)

        P = np.empty(len(hyps))
        R = np.empty(len(hyps))
        F = np.empty(len(hyps))
        with torch.inference_mode():
            for s in range(0, len(hyps), self.batch_size):
                hi = [index[t] for t in hyps[s : s + self.batch_size]]
                ri = [index[t] for t in refs[s : s + self.batch_size]]
                h = pad_sequence([embs[i] for i in hi], batch_first=True)
                r = pad_sequence([embs[i] for i in ri], batch_first=True)
                hl = torch.tensor([len(ids[i]) for i in hi], device=h.device)
                rl = torch.tensor([len(ids[i]) for i in ri], device=r.device)
                hm = torch.arange(h.shape[1], device=h.device)[None, :] < hl[:, None]
                rm = torch.arange(r.shape[1], device=r.device)[None, :] < rl[:, None]
                sim = torch.bmm(h, r.transpose(1, 2)) * (hm[:, :, None] & rm[:, None, :]).float()
                hw = pad_sequence([weights[i] for i in hi], batch_first=True).to(sim.device)
                rw = pad_sequence([weights[i] for i in ri], batch_first=True).to(sim.device)
                hw = hw / hw.sum(dim=1, keepdim=True)
                rw = rw / rw.sum(dim=1, keepdim=True)
                p = (sim.max(dim=2)[0] * hw).sum(dim=1)
                rc = (sim.max(dim=1)[0] * rw).sum(dim=1)
                f = 2 * p * rc / (p + rc)
                empty = hl.eq(2) | rl.eq(2)  # bert-score: only [CLS] [SEP] -> P = R = 0
                p = p.masked_fill(empty, 0.0)
                rc = rc.masked_fill(empty, 0.0)
                f = f.masked_fill(torch.isnan(f), 0.0)
                P[s : s + len(hi)] = p.cpu().numpy()
                R[s : s + len(hi)] = rc.cpu().numpy()
                F[s : s + len(hi)] = f.cpu().numpy()
        return P, R, F, truncated

    def _idf_weights(self, tok: Any, ids: list[list[int]], ref_rows: list[int]) -> list[Any]:
        """Per text, the weight of each token: bert-score's idf over the reference list
        (``log((N + 1) / (df + 1))``), or 1 with [CLS]/[SEP] at 0 when idf is off."""
        import math

        import torch

        if self.idf:
            df: dict[int, int] = {}
            for row in ref_rows:
                for t in set(ids[row]):
                    df[t] = df.get(t, 0) + 1
            n = len(ref_rows)
            unseen = math.log(n + 1)
            table = {t: math.log((n + 1) / (c + 1)) for t, c in df.items()}
            return [torch.tensor([table.get(t, unseen) for t in x], dtype=torch.float32) for x in ids]
        zero = {tok.sep_token_id, tok.cls_token_id}
        return [torch.tensor([0.0 if t in zero else 1.0 for t in x], dtype=torch.float32) for x in ids]

    def _baseline(self) -> np.ndarray:
        import pandas as pd

        assert self.baseline_path is not None
        try:
            row = pd.read_csv(self.baseline_path).iloc[self.num_layers].to_numpy()[1:]
        except Exception as e:
            raise EvalignError(
                f"{self.baseline_path}: cannot read the BERTScore baseline for layer {self.num_layers} ({e})"
            ) from e
        return np.asarray(row, dtype=np.float32)

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        """F1 per item (extras ``precision`` and ``recall``), best reference by F1; NaN without reference."""
        hyp, ref, owner = flatten_references([str(r) for r in responses], references)
        n = len(responses)
        values = np.full(n, np.nan)
        prec = np.full(n, np.nan)
        rec = np.full(n, np.nan)
        if not hyp:
            return MetricResult(values, {"precision": prec, "recall": rec}, {"pairs": 0})
        P, R, F, truncated = self.pair_scores(hyp, [str(r) for r in ref])
        best = argmax_by_owner(F, owner, n)
        has = best >= 0
        p, r, f = P[best[has]], R[best[has]], F[best[has]]
        if self.rescale:
            b = self._baseline()
            p, r, f = ((np.float32(x) - b[k]) / (1 - b[k]) for k, x in enumerate((p, r, f)))
        prec[has], rec[has], values[has] = p, r, f
        info = {"truncated": truncated, "layer": self.num_layers}
        return MetricResult(values, {"precision": prec, "recall": rec}, info)


def _truncate_layers(model: Any, num_layers: int) -> Any:
    """Keep the first ``num_layers`` layers of an encoder (bert-score's ``get_model`` rule)."""
    import torch

    def cut(owner: Any, attr: str) -> None:
        layers = getattr(owner, attr)
        if not 0 <= num_layers <= len(layers):
            raise EvalignError(f"bertscore: num_layers must be between 0 and {len(layers)}, not {num_layers}")
        setattr(owner, attr, torch.nn.ModuleList(list(layers)[:num_layers]))

    if hasattr(model, "n_layers"):  # xlm
        model.n_layers = num_layers
    elif hasattr(model, "layer"):  # xlnet
        cut(model, "layer")
    elif hasattr(model, "encoder"):
        enc = model.encoder
        if hasattr(enc, "albert_layer_groups"):
            enc.config.num_hidden_layers = num_layers
        elif hasattr(enc, "block"):  # t5
            cut(enc, "block")
        else:  # bert, roberta, deberta, mpnet
            cut(enc, "layer")
    elif hasattr(model, "transformer"):  # distilbert
        cut(model.transformer, "layer")
    elif hasattr(model, "layers"):  # bart encoder
        cut(model, "layers")
    else:
        raise EvalignError(f"bertscore: cannot select a layer of a {type(model).__name__}")
    return model
