"""Sentence encoders of the embedding metrics and the cached encoding of a run's distinct texts.

* :class:`TextEncoder` is a loaded model that turns texts into vectors: :class:`SentenceTransformerEncoder`
  (a sentence-transformers model) or :class:`PooledEncoder` (any Hugging Face encoder, mean or CLS pooling).
  Models are found and loaded by :mod:`evalign.backends.models`.
* :func:`embed_texts` encodes the distinct texts of a run with a :class:`TextEncoder`, reading and
  writing the ``"embedding"`` namespace of the project's :class:`~evalign.cache.Cache`.
* :func:`cosine_rows` compares the vectors row by row.

Nothing here imports torch or sentence-transformers at module level.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalign.backends.models import (
    Progress,
    check_dtype,
    count_tokens,
    length_batches,
    load_hf_encoder,
    load_model,
    pick_device,
    resolve_model,
    tokenizer_limit,
    torch_dtype,
)
from evalign.cache import Cache, make_key
from evalign.errors import EvalignError
from evalign.signature import text_hash

#: the cache namespace of text embeddings
EMBEDDING_NAMESPACE = "embedding"



# --- sentence encoders ------------------------------------------------------------------------


class TextEncoder(ABC):
    """A loaded model that turns texts into one vector each."""

    #: the most tokens the model reads; longer texts are truncated
    max_length: int

    @abstractmethod
    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        """Token counts (special tokens included) of ``texts`` before truncation."""

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors (float32, shape ``(len(texts), dim)``) of one batch of texts."""


class SentenceTransformerEncoder(TextEncoder):
    """A sentence-transformers model; vectors are exactly what ``SentenceTransformer.encode`` returns
    (its own tokenisation, truncation at ``max_seq_length``, pooling and normalisation)."""

    def __init__(self, model: str, *, device: str | None = None, dtype: str = "fp32",
                 max_seq_length: int | None = None) -> None:
        self.device = pick_device(device)
        check_dtype(dtype)
        model = resolve_model(model)

        def loader(local_only: bool) -> Any:
            from sentence_transformers import SentenceTransformer

            m = SentenceTransformer(os.path.expanduser(model), device=self.device, local_files_only=local_only)
            if dtype != "fp32":
                m.to(torch_dtype(dtype))
            if max_seq_length is not None:
                m.max_seq_length = int(max_seq_length)
            return m

        key = ("st", model, self.device, dtype, max_seq_length)
        self.model = load_model(key, model, "sentence-transformers", loader)
        self.max_length = int(self.model.max_seq_length or tokenizer_limit(self.model.tokenizer, None))
        self._lower = bool(getattr(self.model[0], "do_lower_case", False))

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        return count_tokens(self.model.tokenizer, [t.lower() if self._lower else t for t in texts])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = self.model.encode(list(texts), batch_size=max(len(texts), 1), convert_to_tensor=True,
                                show_progress_bar=False)
        return out.float().cpu().numpy().astype(np.float32, copy=False)


class PooledEncoder(TextEncoder):
    """Any Hugging Face encoder loaded with ``transformers.AutoModel``; the vector of a text is the
    mean of its last-layer token vectors over the attention mask (``pooling="mean"``) or the vector
    of its first token (``pooling="cls"``). For encoder-decoder models the encoder is used."""

    def __init__(self, model: str, *, pooling: str = "mean", device: str | None = None, dtype: str = "fp32",
                 max_seq_length: int | None = None) -> None:
        if pooling not in ("mean", "cls"):
            raise EvalignError(f"pooling must be 'mean' or 'cls', not '{pooling}'")
        self.pooling = pooling
        self.device = pick_device(device)
        self.tokenizer, self.model = load_hf_encoder(model, device=self.device, dtype=dtype)
        self.max_length = int(max_seq_length or tokenizer_limit(self.tokenizer, self.model.config))

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        return count_tokens(self.tokenizer, texts)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items()}
        with torch.inference_mode():
            hidden = self.model(**enc)[0].float()
        if self.pooling == "cls":
            vec = hidden[:, 0]
        else:
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return vec.cpu().numpy().astype(np.float32, copy=False)




# --- encoding distinct texts with the cache ---------------------------------------------------


@dataclass
class Embeddings:
    """Vectors of the distinct texts of a run.

    ``vectors[index[text]]`` is the vector of ``text``; ``n_tokens`` its token count before
    truncation; ``max_length`` the model's limit; ``encoded`` / ``cached`` how many distinct texts
    were computed / read from the cache; ``batches`` how many model calls were made.
    """

    vectors: np.ndarray
    index: dict[str, int]
    n_tokens: np.ndarray
    max_length: int
    encoded: int
    cached: int
    batches: int

    def of(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts`` (rows in order)."""
        return self.vectors[np.asarray([self.index[t] for t in texts], dtype=np.int64)]

    @property
    def truncated(self) -> int:
        """How many distinct texts were longer than the model reads (and were truncated)."""
        return int((self.n_tokens > self.max_length).sum())


def embed_texts(
    texts: Sequence[str],
    encoder: Callable[[], TextEncoder],
    key_prefix: str,
    cache: Cache,
    *,
    batch_size: int = 32,
    token_budget: int = 16384,
    progress: Progress | None = None,
) -> Embeddings:
    """Encode each distinct text of ``texts`` once.

    Vectors and token counts are read from ``cache`` (namespace ``"embedding"``, key = ``key_prefix``
    + the text's SHA-256) when present; the others are encoded in length-sorted batches and stored
    batch by batch (an interrupted run keeps what it computed). ``encoder`` is only called (the
    model only loaded) when something must be encoded. ``key_prefix`` must name everything the
    vectors depend on (model content, pooling, max length, dtype). ``progress(done, total)`` is
    called after each batch with the number of texts encoded so far and to encode in all.
    """
    distinct = list(dict.fromkeys(texts))
    index = {t: i for i, t in enumerate(distinct)}
    hashes = [text_hash(t) for t in distinct]
    vkeys = [make_key(key_prefix, "vec", h) for h in hashes]
    nkeys = [make_key(key_prefix, "ntok", h) for h in hashes]
    got = cache.get_arrays(EMBEDDING_NAMESPACE, vkeys + nkeys)
    vectors: list[np.ndarray | None] = [None] * len(distinct)
    n_tokens = np.zeros(len(distinct), dtype=np.int64)
    max_length = 0
    missing: list[int] = []
    for i in range(len(distinct)):
        v, n = got.get(vkeys[i]), got.get(nkeys[i])
        if v is None or n is None:
            missing.append(i)
            continue
        vectors[i] = v
        n_tokens[i], max_length = int(n[0]), int(n[1])
    batches = 0
    done = 0
    if missing:
        enc = encoder()
        max_length = enc.max_length
        counts = enc.count_tokens([distinct[i] for i in missing])
        lengths = np.minimum(counts, enc.max_length)
        for batch in length_batches(lengths.tolist(), batch_size, token_budget):
            idx = [missing[j] for j in batch]
            vecs = enc.encode([distinct[i] for i in idx])
            batches += 1
            store: dict[str, np.ndarray] = {}
            for row, (i, j) in enumerate(zip(idx, batch, strict=True)):
                vectors[i] = vecs[row]
                n_tokens[i] = counts[j]
                store[vkeys[i]] = vecs[row]
                store[nkeys[i]] = np.asarray([counts[j], enc.max_length], dtype=np.int64)
            cache.put_arrays(EMBEDDING_NAMESPACE, store)
            done += len(batch)
            if progress is not None:
                progress(done, len(missing))
    dim = next((v.shape[0] for v in vectors if v is not None), 0)
    mat = np.stack([v for v in vectors if v is not None]) if distinct else np.zeros((0, dim), np.float32)
    return Embeddings(mat.astype(np.float32, copy=False), index, n_tokens, max_length,
                      encoded=len(missing), cached=len(distinct) - len(missing), batches=batches)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``a`` with the same row of ``b`` (float64, in [-1, 1];
    NaN where a vector is zero)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    num = np.einsum("ij,ij->i", a, b)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    out[den == 0] = np.nan
    return np.clip(out, -1.0, 1.0)
