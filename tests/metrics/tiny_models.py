"""Tiny, randomly initialised models saved to local folders, for offline and deterministic tests.

Everything is built here with a fixed seed and a fixed vocabulary: no download. Used by
``tests/metrics/conftest.py`` (session fixtures) and by ``benchmarks/bertscore.py``.

* BERT-style encoder with a WordPiece ``BertTokenizer`` (vocabulary written by this module),
* MPNet-style encoder with an ``MPNetTokenizer`` over the same words,
* sentence-transformers models (Transformer + mean Pooling) on top of those two,
* BART-style seq2seq model with a byte-level ``BartTokenizer`` (one token per byte, no merges),
* BLEURT checkpoints in the layout of the lucadiliello/BLEURT-20 conversions (SentencePiece vocabulary).
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


def train_sentencepiece(path: Path, *, vocab_size: int = 120) -> Path:
    """A tiny unigram SentencePiece model over :data:`WORDS` (pieces ``[PAD]`` = 0, ``[UNK]`` = 1 and
    the control pieces ``[CLS]``, ``[SEP]``, ``[MASK]``, as in BLEURT-20's ``spm.model``)."""
    import io
    import random

    import sentencepiece as spm

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(8)) + rng.choice([".", "!", "?", ","]) for _ in range(400)]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab_size, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece="[PAD]", unk_piece="[UNK]",
        control_symbols=["[CLS]", "[SEP]", "[MASK]"], character_coverage=1.0, hard_vocab_limit=False,
        minloglevel=2, num_threads=1,
    )
    path.write_bytes(buf.getvalue())
    return path


def build_bleurt(path: Path, *, seed: int = 3, embedding_size: int | None = 16, hidden: int = 32, layers: int = 2,
                 max_len: int = 48, scale: float = 0.3) -> Path:
    """A tiny random checkpoint in the layout of the lucadiliello/BLEURT-20 PyTorch conversions:
    ``config.json`` (``model_type: "bleurt"``), ``pytorch_model.bin`` (``bleurt.*`` and ``classifier.*``
    names; ``bleurt.encoder.embedding_projection`` when ``embedding_size`` is set), ``spm.model`` and
    ``tokenizer_config.json``. Every weight is drawn from N(0, ``scale``) (LayerNorm weights around 1)."""
    import torch

    path.mkdir(parents=True, exist_ok=True)
    train_sentencepiece(path / "spm.model")
    import sentencepiece as spm

    vocab = spm.SentencePieceProcessor(model_file=str(path / "spm.model")).get_piece_size()
    cfg = {
        "architectures": ["BleurtForSequenceClassification"], "model_type": "bleurt", "vocab_size": vocab,
        "embedding_size": embedding_size, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": 4, "intermediate_size": 2 * hidden, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "max_position_embeddings": max_len,
        "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "num_labels": 1, "tie_word_embeddings": False,
    }
    (path / "config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "tokenizer_class": "BleurtSPTokenizer"}), encoding="utf-8")
    e = embedding_size or hidden
    shapes: dict[str, tuple[int, ...]] = {
        "bleurt.embeddings.word_embeddings.weight": (vocab, e),
        "bleurt.embeddings.position_embeddings.weight": (max_len, e),
        "bleurt.embeddings.token_type_embeddings.weight": (2, e),
        "bleurt.embeddings.LayerNorm.weight": (e,),
        "bleurt.embeddings.LayerNorm.bias": (e,),
    }
    if embedding_size:
        shapes["bleurt.encoder.embedding_projection.weight"] = (hidden, e)
        shapes["bleurt.encoder.embedding_projection.bias"] = (hidden,)
    for i in range(layers):
        p = f"bleurt.encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[p + name + ".weight"] = (hidden, hidden)
            shapes[p + name + ".bias"] = (hidden,)
        shapes[p + "attention.output.LayerNorm.weight"] = (hidden,)
        shapes[p + "attention.output.LayerNorm.bias"] = (hidden,)
        shapes[p + "intermediate.dense.weight"] = (2 * hidden, hidden)
        shapes[p + "intermediate.dense.bias"] = (2 * hidden,)
        shapes[p + "output.dense.weight"] = (hidden, 2 * hidden)
        shapes[p + "output.dense.bias"] = (hidden,)
        shapes[p + "output.LayerNorm.weight"] = (hidden,)
        shapes[p + "output.LayerNorm.bias"] = (hidden,)
    shapes["bleurt.pooler.dense.weight"] = (hidden, hidden)
    shapes["bleurt.pooler.dense.bias"] = (hidden,)
    shapes["classifier.weight"] = (1, hidden)
    shapes["classifier.bias"] = (1,)
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for k, shape in shapes.items():
        w = torch.randn(shape, generator=gen) * scale
        state[k] = w + 1.0 if "LayerNorm.weight" in k else w
    state["bleurt.embeddings.position_ids"] = torch.arange(max_len).unsqueeze(0)  # a buffer the conversion saved
    torch.save(state, path / "pytorch_model.bin")
    return path
