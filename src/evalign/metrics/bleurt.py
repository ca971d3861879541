"""BLEURT in PyTorch, from the PyTorch conversions of the BLEURT checkpoints.

BLEURT (Sellam, Das & Parikh, 2020, "BLEURT: Learning Robust Metrics for Text Generation"; the
BLEURT-20 checkpoints of Pu et al., 2021, "Learning Compact Metrics for MT") is a BERT-style
encoder fine-tuned to regress human ratings. A (reference, candidate) pair is read as one
sequence ``[CLS] reference [SEP] candidate [SEP]`` (token types 0 for the reference part, 1 for
the candidate part; the reference comes first, as in ``bleurt/encoding.py`` and in the
conversion's ``tokenizer(references, candidates)``), and the score is

    score = w_c . tanh(W_p h_[CLS] + b_p) + b_c

where ``h_[CLS]`` is the last layer's vector of the first token, ``(W_p, b_p)`` the pooler and
``(w_c, b_c)`` the regression head. BLEURT-20 scores lie roughly in [0, 1] (not clipped);
higher is better.

Checkpoint layout (the ``lucadiliello/BLEURT-20``, ``-D12``, ``-D6``, ``-D3`` conversions made by
github.com/lucadiliello/bleurt-pytorch): ``config.json`` (``model_type: "bleurt"``: BERT fields plus
``embedding_size``; when set, word/position/type embeddings have that width and
``encoder.embedding_projection`` maps them to ``hidden_size``, as in RemBERT), weights
``pytorch_model.bin`` or ``model.safetensors`` named ``bleurt.embeddings.*``, ``bleurt.encoder.*``,
``bleurt.pooler.dense.*`` and ``classifier.*``, and the SentencePiece model ``spm.model`` (or a
WordPiece ``vocab.txt`` for the older BLEURT-base checkpoints). evalign builds the encoder from
transformers' own ``RemBertModel`` (with ``embedding_size``) or ``BertModel`` (without), loads the
renamed weights strictly, and applies the head itself; the ``bleurt-pytorch`` package is not
needed. Pairs longer than ``max_length`` tokens (512, as BLEURT-20) are truncated as BLEURT does
(``truncate_seq_pair``: drop the last token of the longer part, the candidate on ties);
``info["truncated"]`` counts them.

torch / transformers / sentencepiece are imported only when scoring.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evalign.backends import models as M
from evalign.cache import Cache
from evalign.errors import EvalignError, ModelLoadError
from evalign.metrics._pair_cache import PairScoringMetric
from evalign.metrics.base import MetricResult, flatten_references, max_by_owner, register_metric
from evalign.metrics.options import OptionSpec
from evalign.signature import stable_hash

DEFAULT_CHECKPOINT = "lucadiliello/BLEURT-20"

#: short names of the published conversions (case-insensitive)
ALIASES: dict[str, str] = {
    "bleurt-20": "lucadiliello/BLEURT-20",
    "bleurt-20-d12": "lucadiliello/BLEURT-20-D12",
    "bleurt-20-d6": "lucadiliello/BLEURT-20-D6",
    "bleurt-20-d3": "lucadiliello/BLEURT-20-D3",
    "d12": "lucadiliello/BLEURT-20-D12",
    "d6": "lucadiliello/BLEURT-20-D6",
    "d3": "lucadiliello/BLEURT-20-D3",
}

_SPM_FILES = ("spm.model", "sent_piece.model", "sentencepiece.model")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def resolve_checkpoint(model: str) -> str:
    """The checkpoint named by ``model``: an alias (``BLEURT-20``, ``BLEURT-20-D12``, ``D12``,
    ``D6``, ``D3``, any case) becomes its ``lucadiliello/...`` hub id; anything else is kept."""
    if os.path.exists(os.path.expanduser(model)):
        return model
    return ALIASES.get(model.strip().lower(), model)


def missing_checkpoint_error(model: str, why: str) -> ModelLoadError:
    """The error for a BLEURT checkpoint that cannot be found: which, why, and where to get it."""
    repo = model if (not M.looks_like_path(model) and "/" in model) else DEFAULT_CHECKPOINT
    return ModelLoadError(
        f"bleurt: checkpoint '{model}' is not available ({why}). Get the PyTorch conversion from the "
        f"Hugging Face hub (https://huggingface.co/{repo}; e.g. `huggingface-cli download {repo} "
        f"--local-dir DIR`) and pass model=DIR (CLI: --option bleurt.model=DIR), or keep it in a Hugging "
        "Face cache and set HF_HOME to that cache's folder. Smaller distilled checkpoints: "
        "lucadiliello/BLEURT-20-D12, -D6, -D3. The original TensorFlow checkpoints "
        "(github.com/google-research/bleurt) must first be converted to this layout "
        "(github.com/lucadiliello/bleurt-pytorch)."
    )


# --- the checkpoint -------------------------------------------------------------------------


class PieceTokenizer:
    """Token ids of BLEURT inputs: SentencePiece (``spm.model``, BLEURT-20 family: the pieces of
    ``SentencePieceProcessor.encode``) or WordPiece (``vocab.txt``, older checkpoints), with the ids
    of ``[CLS]``, ``[SEP]`` and ``[PAD]``."""

    def __init__(self, folder: Path, tokenizer_config: dict[str, Any]) -> None:
        self.lower = bool(tokenizer_config.get("do_lower_case", False))
        spm_file = next((folder / f for f in _SPM_FILES if (folder / f).is_file()), None)
        self._sp: Any = None
        self._wp: Any = None
        if spm_file is not None:
            import sentencepiece

            self._sp = sentencepiece.SentencePieceProcessor(model_file=str(spm_file))

            def piece_id(piece: str) -> int:
                i = int(self._sp.piece_to_id(piece))
                if i == self._sp.unk_id() and piece != "[UNK]":
                    raise ModelLoadError(f"bleurt: {spm_file} has no '{piece}' piece")
                return i

            self.cls_id, self.sep_id, self.pad_id = piece_id("[CLS]"), piece_id("[SEP]"), piece_id("[PAD]")
            self.kind = "sentencepiece"
        elif (folder / "vocab.txt").is_file():
            from transformers import BertTokenizer

            self.lower = bool(tokenizer_config.get("do_lower_case", True))
            self._wp = BertTokenizer(vocab_file=str(folder / "vocab.txt"), do_lower_case=self.lower)
            self.cls_id, self.sep_id, self.pad_id = (
                self._wp.cls_token_id, self._wp.sep_token_id, self._wp.pad_token_id)
            self.kind = "wordpiece"
        else:
            raise ModelLoadError(f"bleurt: {folder} has no tokenizer ({' / '.join(_SPM_FILES)} or vocab.txt)")

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens."""
        if self._sp is not None:
            texts = [t.lower() for t in texts] if self.lower else list(texts)
            return [list(x) for x in self._sp.encode(texts)]
        return [list(x) for x in self._wp(list(texts), add_special_tokens=False)["input_ids"]]


def truncate_seq_pair(a: list[int], b: list[int], max_tokens: int) -> tuple[list[int], list[int]]:
    """BLEURT's ``truncate_seq_pair``: while ``len(a) + len(b) > max_tokens``, drop the last token
    of the longer one (of ``b`` when they are equally long)."""
    na, nb = len(a), len(b)
    while na + nb > max_tokens:
        if na > nb:
            na -= 1
        else:
            nb -= 1
    return a[:na], b[:nb]


def pair_input(ref: list[int], cand: list[int], tok: PieceTokenizer, max_length: int) -> tuple[list[int], list[int], bool]:
    """``[CLS] ref [SEP] cand [SEP]`` ids and token types (0 for ``[CLS] ref [SEP]``, 1 for
    ``cand [SEP]``), truncated to ``max_length`` tokens, and whether it was truncated."""
    r, c = truncate_seq_pair(ref, cand, max_length - 3)
    ids = [tok.cls_id, *r, tok.sep_id, *c, tok.sep_id]
    types = [0] * (len(r) + 2) + [1] * (len(c) + 1)
    return ids, types, (len(r), len(c)) != (len(ref), len(cand))


class BleurtCheckpoint:
    """A loaded BLEURT checkpoint: ``tokenizer``, ``encoder`` (a transformers ``RemBertModel`` or
    ``BertModel`` with pooler), ``head`` (``torch.nn.Linear(hidden_size, 1)``), ``max_positions``."""

    def __init__(self, folder: Path, *, device: str, dtype: str) -> None:
        import torch
        from transformers import BertConfig, BertModel, RemBertConfig, RemBertModel

        cfg_file = folder / "config.json"
        if not cfg_file.is_file():
            raise ModelLoadError(f"bleurt: {folder} has no config.json")
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        archs = cfg.get("architectures") or []
        if cfg.get("model_type") != "bleurt" and "BleurtForSequenceClassification" not in archs:
            raise ModelLoadError(
                f"bleurt: {cfg_file} is not a BLEURT checkpoint (model_type '{cfg.get('model_type')}'; "
                "expected 'bleurt', the layout of the lucadiliello/BLEURT-20 conversions)")
        tok_cfg_file = folder / "tokenizer_config.json"
        tok_cfg = json.loads(tok_cfg_file.read_text(encoding="utf-8")) if tok_cfg_file.is_file() else {}
        self.tokenizer = PieceTokenizer(folder, tok_cfg)

        common = {
            "vocab_size": cfg.get("vocab_size", 30522),
            "hidden_size": cfg.get("hidden_size", 768),
            "num_hidden_layers": cfg.get("num_hidden_layers", 12),
            "num_attention_heads": cfg.get("num_attention_heads", 12),
            "intermediate_size": cfg.get("intermediate_size", 3072),
            "hidden_act": cfg.get("hidden_act", "gelu"),
            "max_position_embeddings": cfg.get("max_position_embeddings", 512),
            "type_vocab_size": cfg.get("type_vocab_size", 2),
            "layer_norm_eps": cfg.get("layer_norm_eps", 1e-12),
            "pad_token_id": cfg.get("pad_token_id", 0),
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
        }
        emb = cfg.get("embedding_size")
        if emb:
            encoder: Any = RemBertModel(RemBertConfig(input_embedding_size=emb, output_embedding_size=emb,
                                                      bos_token_id=None, eos_token_id=None, **common))
        else:
            encoder = BertModel(BertConfig(**common))
        state = _read_weights(folder)
        enc_state, head_state = _split_state(state)
        missing, unexpected = encoder.load_state_dict(enc_state, strict=False)
        missing = [k for k in missing if not k.endswith(("position_ids", "token_type_ids"))]
        if missing or unexpected or set(head_state) != {"weight", "bias"}:
            raise ModelLoadError(
                f"bleurt: weights in {folder} do not fit its config.json (missing: {', '.join(missing[:5]) or '-'}; "
                f"unexpected: {', '.join(unexpected[:5]) or '-'}; head: {', '.join(sorted(head_state)) or '-'})")
        head = torch.nn.Linear(common["hidden_size"], int(head_state["weight"].shape[0]))
        head.load_state_dict(head_state)
        if head.out_features != 1:
            raise ModelLoadError(f"bleurt: the regression head of {folder} has {head.out_features} outputs, not 1")
        self.encoder = encoder.eval().to(device)
        self.head = head.eval().to(device)
        if dtype != "fp32":
            self.encoder.to(M.torch_dtype(dtype))
            self.head.to(M.torch_dtype(dtype))
        self.device = device
        self.max_positions = int(common["max_position_embeddings"])

    def scores(self, batch: Sequence[tuple[list[int], list[int]]]) -> np.ndarray:
        """Scores (float64) of one batch of (ids, token types) inputs."""
        import torch

        longest = max(len(ids) for ids, _ in batch)
        x = torch.full((len(batch), longest), self.tokenizer.pad_id, dtype=torch.long)
        tt = torch.zeros((len(batch), longest), dtype=torch.long)
        mask = torch.zeros((len(batch), longest), dtype=torch.long)
        for r, (ids, types) in enumerate(batch):
            x[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            tt[r, : len(ids)] = torch.tensor(types, dtype=torch.long)
            mask[r, : len(ids)] = 1
        with torch.inference_mode():
            out = self.encoder(input_ids=x.to(self.device), attention_mask=mask.to(self.device),
                               token_type_ids=tt.to(self.device))
            y = self.head(out.pooler_output).squeeze(-1).float()
        return y.cpu().numpy().astype(np.float64)


def _read_weights(folder: Path) -> dict[str, Any]:
    import torch

    for name in _WEIGHT_FILES:
        f = folder / name
        if f.is_file():
            try:
                if name.endswith(".safetensors"):
                    from safetensors.torch import load_file

                    return dict(load_file(str(f)))
                return dict(torch.load(str(f), map_location="cpu", weights_only=True))
            except Exception as e:
                raise M.model_load_error(str(f), "BLEURT weights", e) from e
    raise ModelLoadError(f"bleurt: {folder} has no weights ({' or '.join(_WEIGHT_FILES)})")


def _split_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The conversion's names -> (transformers encoder state, head state)."""
    enc: dict[str, Any] = {}
    head: dict[str, Any] = {}
    for k, v in state.items():
        if k.startswith("classifier."):
            head[k[len("classifier."):]] = v
            continue
        if not k.startswith("bleurt."):
            enc[k] = v  # reported as unexpected
            continue
        k = k[len("bleurt."):]
        if k.endswith(("embeddings.position_ids", "embeddings.token_type_ids")):
            continue
        enc[k.replace("encoder.embedding_projection.", "encoder.embedding_hidden_mapping_in.")] = v
    return enc, head


def checkpoint_folder(model: str) -> Path:
    """The local folder of a BLEURT checkpoint (a path, or a hub id in the Hugging Face cache,
    downloaded first unless ``HF_HUB_OFFLINE`` is set); :class:`ModelLoadError` when absent."""
    path = Path(model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise missing_checkpoint_error(model, "not a folder")
        return path.resolve()
    if M.looks_like_path(model):
        raise missing_checkpoint_error(model, "no such folder")
    local = M.local_model_dir(model)
    if local is not None:
        return local
    if M.hub_offline():
        raise missing_checkpoint_error(model, "not in the Hugging Face cache and HF_HUB_OFFLINE is set")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, allow_patterns=["*.json", "*.model", "vocab.txt", *_WEIGHT_FILES]))
    except Exception as e:
        raise missing_checkpoint_error(model, f"download failed: {str(e).strip().splitlines()[0][:200]}") from e


# --- the metric -----------------------------------------------------------------------------


@register_metric
class Bleurt(PairScoringMetric):
    """BLEURT score of each response against its reference (see the module docstring).

    Options:

    * ``model`` (str): checkpoint folder or hub id, default ``lucadiliello/BLEURT-20``; the aliases
      ``BLEURT-20``, ``BLEURT-20-D12`` / ``D12``, ``BLEURT-20-D6`` / ``D6``, ``BLEURT-20-D3`` / ``D3``
      name the distilled conversions.
    * ``max_length`` (int, default 512): tokens of ``[CLS] ref [SEP] cand [SEP]``; never more than the
      checkpoint's position limit.
    * ``batch_size`` (int, default 16) pairs per model call; ``token_budget`` (int, default 8192)
      padded tokens per call.
    * ``device`` (``cuda`` / ``mps`` / ``cpu``; automatic when None), ``dtype`` (``fp32`` default,
      ``fp16``, ``bf16``).
    * ``use_cache`` (bool, default True): keep each distinct pair's score in the project's cache
      (namespace ``pair_score``, keyed by the checkpoint's content identity and ``max_length``).
    * ``progress(done, total)``: called after each batch (distinct pairs).

    Several references: the best (largest) score. ``info``: ``pairs`` (distinct), ``computed``,
    ``cached``, ``truncated`` (distinct pairs cut to ``max_length``, among those computed now).
    Higher is better.
    """

    name = "bleurt"
    higher_is_better = True
    description = "BLEURT regression score of (reference, response) (PyTorch conversions of BLEURT-20)"
    dists = ("transformers", "torch", "sentencepiece")
    column_options = ("model",)
    defaults: ClassVar[dict[str, Any]] = {"model": DEFAULT_CHECKPOINT}
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "model": OptionSpec(str, help="checkpoint folder, hub id or alias (BLEURT-20, D12, D6, D3)"),
        "max_length": OptionSpec(int, min=4, help="tokens of [CLS] ref [SEP] cand [SEP]"),
        **PairScoringMetric.RUN_OPTIONS,
    }

    def __init__(
        self,
        model: str = DEFAULT_CHECKPOINT,
        *,
        max_length: int = 512,
        batch_size: int = 16,
        token_budget: int = 8192,
        device: str | None = None,
        dtype: str = "fp32",
        use_cache: bool = True,
        cache: Cache | None = None,
        progress: M.Progress | None = None,
    ) -> None:
        self.model = resolve_checkpoint(str(model))
        if int(max_length) < 4:
            raise EvalignError(f"bleurt: max_length must be >= 4, not {max_length}")
        self.max_length = int(max_length)
        if int(batch_size) < 1:
            raise EvalignError(f"bleurt: batch_size must be >= 1, not {batch_size}")
        self._set_run_options(batch_size=batch_size, token_budget=token_budget, device=device, dtype=dtype,
                              use_cache=use_cache, cache=cache, progress=progress)
        self._loaded: BleurtCheckpoint | None = None

    def options(self) -> dict[str, Any]:
        return {"model": M.model_shown(self.model), "model_id": M.model_identity(self.model), "max_length": self.max_length,
                "dtype": self.dtype}

    def checkpoint(self) -> BleurtCheckpoint:
        """The loaded checkpoint (loaded on first use; kept in memory per process)."""
        if self._loaded is None:
            folder = checkpoint_folder(self.model)
            device = M.pick_device(self.device)
            key = ("bleurt", str(folder), M.model_identity(str(folder)), device, self.dtype)
            self._loaded = M.load_model(key, str(folder), "BLEURT",
                                        lambda _local: BleurtCheckpoint(folder, device=device, dtype=self.dtype))
        return self._loaded

    def _key_prefix(self) -> str:
        ident = M.model_identity(self.model)
        if ident == "unresolved":
            ident = M.model_identity(str(checkpoint_folder(self.model)))
        return stable_hash({"kind": "bleurt", "model": ident, "max_length": self.max_length, "dtype": self.dtype},
                           length=32)

    def pair_scores(self, refs: Sequence[str], cands: Sequence[str]) -> tuple[np.ndarray, dict[str, int]]:
        """BLEURT score of each (reference, candidate) pair, and run facts (``pairs``, ``computed``,
        ``cached``, ``truncated``)."""
        pairs = list(zip(refs, cands, strict=True))
        truncated = 0

        def compute(todo: list[tuple[str, str]], store: Callable[[list[int], np.ndarray], None]) -> None:
            nonlocal truncated
            ck = self.checkpoint()
            limit = min(self.max_length, ck.max_positions)
            texts = list(dict.fromkeys([t for p in todo for t in p]))
            ids = dict(zip(texts, ck.tokenizer.encode(texts), strict=True))
            inputs = []
            for r, c in todo:
                x, tt, cut = pair_input(ids[r], ids[c], ck.tokenizer, limit)
                inputs.append((x, tt))
                truncated += int(cut)
            done = 0
            for batch in M.length_batches([len(x) for x, _ in inputs], self.batch_size, self.token_budget):
                store(batch, ck.scores([inputs[i] for i in batch])[:, None])
                done += len(batch)
                if self.progress is not None:
                    self.progress(done, len(todo))

        values, info = self.cached_scores(pairs, compute, self._key_prefix())
        return values, {**info, "truncated": truncated}

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        """BLEURT per item (best over references; NaN without reference)."""
        hyp, ref, owner = flatten_references([str(r) for r in responses], references)
        n = len(responses)
        if not hyp:
            return MetricResult(np.full(n, np.nan), info={"pairs": 0})
        values, info = self.pair_scores([str(r) for r in ref], hyp)
        return MetricResult(max_by_owner(values, owner, n), info=info)
