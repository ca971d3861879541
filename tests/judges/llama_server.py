"""A real llama.cpp OpenAI-compatible server for the judge tests, with a tiny random-weight model.

* :func:`build_tiny_gguf` writes a small Llama-architecture GGUF (2 layers, 64-dim, ~2,800-token
  SentencePiece-style vocabulary: byte fallback, digits, ``[RESULT]``, common English and judge-prompt
  words, ChatML control tokens; n_ctx 8192 so real judge prompts fit)
  with seeded random weights, using the ``gguf`` package. No download: the model is made here.
* :func:`cached_tiny_gguf` keeps it under ``~/.cache/evalign-test/`` (``$EVALIGN_TEST_CACHE``),
  named by a hash of this builder, so it is built once per machine.
* :class:`LlamaServer` starts ``python -m llama_cpp.server`` on a free port and waits for
  ``/v1/models``; :class:`ServerInfo` is what the ``llama_server`` fixture yields.

The outputs of a random model are gibberish, but everything a judge needs works for real:
chat templating, sampling, seeds, ``max_tokens`` / ``finish_reason``, logprobs and GBNF grammars.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from evalign.backends.llama_server import LlamaServer as _LlamaServer
from evalign.backends.llama_server import ServerInfo, free_port, require_llama_cpp

__all__ = ["LlamaServer", "ServerInfo", "build_tiny_gguf", "cached_tiny_gguf", "free_port", "require_llama_cpp"]

MODEL_ALIAS = "tiny-judge"

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_LAYER = 2
N_FF = 128
N_CTX_TRAIN = 8192

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Multi-character pieces, so the vocabulary looks like a real one (judge words, digits, tags).
_WORDS = [
    "Feedback", "Score", "score", "RESULT", "[RESULT]", "Assistant", "A", "B", "tie", "Yes", "No",
    "1", "2", "3", "4", "5", "10", "[[", "]]", ":", ".", ",", "###", "**", "\n\n",
]
# Common English and judge-prompt words. Each gets its whole prefix chain (t, th, the), so the
# SentencePiece merges can reach it: prompts take ~0.3 tokens per character instead of ~0.9.
_ENGLISH = """
the of and to in is that for it as was with be by on not he this are or his from at which but have an
they you were her she there been one all we their has would when if so no will more can what out up
other into some them than then its only about also could may these two first over any such after
most made should where between each how must through much before well those very both under our
your does did do use used using same make like who because here while why being give given without
response responses answer answers instruction instructions reference score scores scoring rubric
criteria criterion feedback evaluate evaluation evaluator assess assessment task quality output input
helpful helpfulness harmless harmlessness honest honesty accurate accuracy correct correctly relevant
detailed clear clearly concise complete completely partially mostly fully better worse best worst good
bad poor fair excellent user assistant system model judge judgement following follow format write
written strictly based general generally specific specifically provide provided explain explanation
between compare comparison whether information fact facts factual reasoning logic logical step steps
question questions example examples text content context describe description result results
"""
_ENGLISH_WORDS = [w for w in _ENGLISH.split()]


def _pieces() -> list[str]:
    """The multi-character pieces, with the prefix chains SentencePiece merging needs."""
    out: list[str] = []
    for w in _WORDS:
        out += [w, "\u2581" + w]
    for w in _ENGLISH_WORDS:
        for word in (w, w.capitalize()):
            for k in range(2, len(word) + 1):
                out += [word[:k], "\u2581" + word[:k]]
    return out


def tiny_vocab() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and token types of the tiny SPM vocabulary (ids are list positions).

    0 ``<unk>``, 1 ``<s>``, 2 ``</s>``, 3 ``<|im_start|>``, 4 ``<|im_end|>`` (control), then the
    256 byte tokens ``<0x00>``..``<0xFF>``, then ``▁`` (space), ``\n``, printable ASCII characters,
    ``▁`` + letter, judge words and common English words (with their prefixes, with and without ``▁``).
    """
    import gguf

    T = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL, T.CONTROL, T.CONTROL]
    scores = [0.0] * 5
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(T.BYTE)
        scores.append(0.0)
    pieces: list[str] = ["\u2581", "\n"] + [chr(c) for c in range(33, 127)]
    pieces += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += _pieces()
    seen: set[str] = set()
    for p in pieces:
        if p in seen:
            continue
        seen.add(p)
        tokens.append(p)
        types.append(T.NORMAL)
        scores.append(float(len(p)))  # longer pieces merge first
    return tokens, scores, [int(t) for t in types]


def build_tiny_gguf(path: str | Path, *, seed: int = 0) -> Path:
    """Write the tiny random Llama model to ``path`` (F32 weights, seeded) and return the path."""
    import gguf

    path = Path(path)
    tokens, scores, types = tiny_vocab()
    n_vocab = len(tokens)
    head_dim = N_EMBD // N_HEAD
    rng = np.random.default_rng(seed)

    def w(*shape: int, std: float = 0.08) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("evalign-tiny-judge")
    writer.add_context_length(N_CTX_TRAIN)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_rope_dimension_count(head_dim)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_file_type(0)  # all F32
    writer.add_vocab_size(n_vocab)

    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    writer.add_chat_template(CHATML_TEMPLATE)

    writer.add_tensor("token_embd.weight", w(n_vocab, N_EMBD, std=0.5))
    for i in range(N_LAYER):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", w(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_k.weight", w(head_dim * N_HEAD_KV, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_v.weight", w(head_dim * N_HEAD_KV, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_output.weight", w(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", w(n_vocab, N_EMBD, std=0.5))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def builder_hash() -> str:
    """Hash of this module's builder code and constants: a new hash means a new model file."""
    src = inspect.getsource(sys.modules[__name__])
    return hashlib.sha256(src.encode("utf-8")).hexdigest()[:12]


def cached_tiny_gguf(cache_dir: str | Path | None = None) -> Path:
    """The tiny model, built on first use into ``cache_dir`` (default ``$EVALIGN_TEST_CACHE`` or
    ``~/.cache/evalign-test``). Written to a temporary name and renamed, so parallel runs are safe."""
    base = Path(cache_dir or os.environ.get("EVALIGN_TEST_CACHE") or Path.home() / ".cache" / "evalign-test")
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"tiny-llama-{builder_hash()}.gguf"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        build_tiny_gguf(tmp)
        os.replace(tmp, path)
    return path


class LlamaServer(_LlamaServer):
    """:class:`evalign.backends.llama_server.LlamaServer` with the tests' defaults: the model
    name ``tiny-judge``, the ChatML chat format and one thread."""

    def __init__(self, model_path: str | Path, *, chat_format: str | None = "chatml", alias: str = MODEL_ALIAS,
                 **kw: Any) -> None:
        super().__init__(model_path, chat_format=chat_format, alias=alias, **kw)


if __name__ == "__main__":  # build the model and serve it until Ctrl-C: python tests/judges/llama_server.py
    with LlamaServer(cached_tiny_gguf()) as info:
        print(info.base_url, info.model, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)
