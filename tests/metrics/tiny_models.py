"""Tiny, randomly initialised models saved to local folders, for offline and deterministic tests.

Everything is built here with a fixed seed and a fixed vocabulary: no download. Used by
``tests/metrics/conftest.py`` (session fixtures) and by ``benchmarks/bertscore.py``.

* BERT-style encoder with a WordPiece ``BertTokenizer`` (vocabulary written by this module),
* MPNet-style encoder with an ``MPNetTokenizer`` over the same words,
* sentence-transformers models (Transformer + mean Pooling) on top of those two,
* BART-style seq2seq model with a byte-level ``BartTokenizer`` (one token per byte, no merges).
"""

from __future__ import annotations

import json
from pathlib import Path

WORDS = (  # noqa: SIM905
    "the a an and or but if then of to in on at for with from by as is are was were be been it this that "
    "these those i you he she we they me him her us them my your his our their what which who when where "
    "why how all any some no not only very more most much many few other such same so than too can will "
    "just should now good bad new old first last long great little own right big high small large next "
    "early young important public able time person year way day thing man woman child world life hand "
    "part eye place work week case point number group problem fact say get make go know take see come "
    "think look want give use find tell ask seem feel try leave call write answer question text model "
    "score test data cat dog sat mat red blue green house car tree book water fire food city rain sun "
    "please let know scope rate project increase decrease necessary questions about have find hello hi "
    "well catch up tomorrow confident sentence given might wordy"
).split()
PUNCT = list(".,!?;:'\"()-")
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")


def wordpiece_vocab(specials: list[str]) -> list[str]:
    """Special tokens, punctuation, letters and digits (also as ``##`` continuations), then words."""
    vocab = list(specials) + PUNCT + LETTERS + ["##" + c for c in LETTERS]
    vocab += [w for w in dict.fromkeys(WORDS) if w not in vocab]
    return vocab


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def build_bert(path: Path, *, seed: int = 0, layers: int = 3, hidden: int = 32, max_len: int = 64) -> Path:
    """A tiny ``BertModel`` with a ``BertTokenizer`` (lower-cased WordPiece), saved to ``path``."""
    from transformers import BertConfig, BertModel, BertTokenizer

    vocab = wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = BertTokenizer(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=max_len)
    _seed(seed)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=2 * hidden, max_position_embeddings=max_len, pad_token_id=0)
    BertModel(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_mpnet(path: Path, *, seed: int = 1, layers: int = 2, hidden: int = 32, max_len: int = 64) -> Path:
    """A tiny ``MPNetModel`` with an ``MPNetTokenizer`` (lower-cased WordPiece), saved to ``path``."""
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    vocab = wordpiece_vocab(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"])
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = MPNetTokenizer(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=max_len)
    _seed(seed)
    cfg = MPNetConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                      intermediate_size=2 * hidden, max_position_embeddings=max_len + 2, pad_token_id=1,
                      bos_token_id=0, eos_token_id=2)
    MPNetModel(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_sentence_transformer(path: Path, base: Path, *, max_seq_length: int = 48) -> Path:
    """A sentence-transformers model (``Transformer`` + mean ``Pooling``) over the encoder in ``base``."""
    from sentence_transformers import SentenceTransformer, models

    word = models.Transformer(str(base), max_seq_length=max_seq_length)
    pool = models.Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pool], device="cpu").save(str(path))
    return path


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (as in its byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def build_bart(path: Path, *, seed: int = 2, d_model: int = 32, layers: int = 2, max_len: int = 256) -> Path:
    """A tiny ``BartForConditionalGeneration`` with a byte-level ``BartTokenizer`` (one token per
    byte: no merges), saved to ``path``."""
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer

    path.mkdir(parents=True, exist_ok=True)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for ch in _bytes_to_unicode().values():
        vocab[ch] = len(vocab)
    vocab["<mask>"] = len(vocab)
    (path / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (path / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tok = BartTokenizer(vocab=str(path / "vocab.json"), merges=str(path / "merges.txt"), model_max_length=max_len)
    _seed(seed)
    cfg = BartConfig(vocab_size=len(vocab), d_model=d_model, encoder_layers=layers, decoder_layers=layers,
                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=2 * d_model,
                     decoder_ffn_dim=2 * d_model, max_position_embeddings=max_len, pad_token_id=1,
                     bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2)
    BartForConditionalGeneration(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    return path
