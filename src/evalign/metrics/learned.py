"""Learned metrics that score with a generation model: BARTScore.

BARTScore (Yuan, Neubig & Liu, 2021, "BARTScore: Evaluating Generated Text as Text Generation";
code: github.com/neulab/BARTScore) scores a text pair by the mean log-likelihood per target token
that BART assigns to the target when reading the source:

    score(src -> tgt) = (1 / |tgt|) * sum_t log p(tgt_t | tgt_<t, src)

where ``tgt`` is the tokenised target *with* its special tokens ``<s> ... </s>`` (the BARTScore
repository's ``BARTScorer.score(srcs, tgts)`` counts them in ``|tgt|`` too). Values are <= 0;
higher is better. Directions (names as in the BARTScore repository's analysis code):

* ``"hypo_ref"`` (default): src = response, tgt = reference: log p(reference | response), the
  paper's *recall* direction (h -> r).
* ``"ref_hypo"``: src = reference, tgt = response: log p(response | reference), *precision* (r -> h).
* ``"avg_f"``: the arithmetic mean of both (the paper's *F score*).
* ``"harm_f"``: ``a * b / (a + b)`` of both, exactly as the repository computes ``harm_f``
  (half the harmonic mean; still <= 0).

torch / transformers are imported only when scoring.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from evalign.backends import models as M
from evalign.errors import EvalignError
from evalign.metrics.base import Metric, MetricResult, flatten_references, max_by_owner, register_metric
from evalign.metrics.options import OptionSpec

DIRECTIONS = ("hypo_ref", "ref_hypo", "avg_f", "harm_f")

#: model of each variant; "para" needs the ParaBank2 weights file (see :class:`BartScore`)
VARIANTS: dict[str, str] = {"cnn": "facebook/bart-large-cnn", "para": "facebook/bart-large-cnn"}

PARA_HELP = (
    "the BARTScore 'para' variant is facebook/bart-large-cnn fine-tuned on ParaBank2, distributed by "
    "the BARTScore repository (github.com/neulab/BARTScore, README: download bart_score.pth, loaded "
    "there with BARTScorer.load(path=...)); pass model=/path/to/bart_score.pth (with base_model= a "
    "local copy of facebook/bart-large-cnn when offline)"
)


@register_metric
class BartScore(Metric):
    """BARTScore: mean token log-likelihood under BART (see the module docstring for directions).

    ``model``: a Hugging Face BART id or local folder (default ``facebook/bart-large-cnn``), or a
    PyTorch state-dict file (``.pth``/``.pt``/``.bin``) such as the ParaBank2 weights
    ``bart_score.pth`` of the BARTScore repository, loaded into ``base_model`` (default
    ``facebook/bart-large-cnn``, which also supplies the tokenizer). ``variant``: ``"cnn"`` or
    ``"para"`` (a label; ``"para"`` requires the weights file as ``model``). ``direction``: one of
    ``hypo_ref`` (default, log p(ref | response)), ``ref_hypo``, ``avg_f``, ``harm_f``.
    ``max_length``: tokens kept of source and target (1024 as in BARTScore; never more than the
    model's position limit). Several references:
    the best (largest) score. ``progress(done, total)``: called after each batch (distinct pairs of
    one direction). Range (-inf, 0], higher is better.
    """

    name = "bartscore"
    higher_is_better = True
    description = "BARTScore: mean log-likelihood per token of the reference given the response (BART)"
    dists = ("transformers", "torch")
    column_options = ("model", "variant", "direction")
    defaults: ClassVar[dict[str, Any]] = {
        "model": "facebook/bart-large-cnn", "variant": "cnn", "direction": "hypo_ref",
    }
    option_types: ClassVar[dict[str, OptionSpec]] = {
        "model": OptionSpec(str, none_ok=True), "variant": OptionSpec(str, choices=("cnn", "para")),
        "direction": OptionSpec(str, choices=("hypo_ref", "ref_hypo", "avg_f", "harm_f")),
        "base_model": OptionSpec(str), "max_length": OptionSpec(int, min=1), "batch_size": OptionSpec(int, min=1),
        "token_budget": OptionSpec(int, min=1), "device": OptionSpec(str, none_ok=True),
        "dtype": OptionSpec(str, choices=("fp32", "fp16", "bf16")),
        "progress": OptionSpec(object, none_ok=True, cli=False),
    }

    def __init__(
        self,
        model: str | None = None,
        *,
        variant: str = "cnn",
        direction: str = "hypo_ref",
        base_model: str = "facebook/bart-large-cnn",
        max_length: int = 1024,
        batch_size: int = 4,
        token_budget: int = 4096,
        device: str | None = None,
        dtype: str = "fp32",
        progress: M.Progress | None = None,
    ) -> None:
        self.progress = progress
        if direction not in DIRECTIONS:
            raise EvalignError(f"bartscore: direction must be one of {', '.join(DIRECTIONS)}, not '{direction}'")
        if variant not in VARIANTS:
            raise EvalignError(f"bartscore: variant must be one of {', '.join(VARIANTS)}, not '{variant}'")
        self.variant = variant
        self.model = str(model) if model is not None else VARIANTS[variant]
        self.is_weights_file = self.model.endswith((".pth", ".pt", ".bin")) or os.path.isfile(
            os.path.expanduser(self.model))
        if variant == "para" and not self.is_weights_file and model is None:
            raise EvalignError(f"bartscore: {PARA_HELP}")
        self.base_model = str(base_model)
        self.direction = direction
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.token_budget = int(token_budget)
        self.device = device
        self.dtype = M.check_dtype(dtype)
        self._loaded: tuple[Any, Any, str] | None = None

    def options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"model": M.model_shown(self.model), "model_id": M.model_identity(self.model)}
        if self.is_weights_file:
            opts["base_model"] = self.base_model
        opts.update(variant=self.variant, direction=self.direction, max_length=self.max_length, dtype=self.dtype)
        return opts

    def _load(self) -> tuple[Any, Any, str]:
        if self._loaded is None:
            device = M.pick_device(self.device)
            if not self.is_weights_file:
                tok, model = M.load_hf_encoder(self.model, device=device, dtype=self.dtype, seq2seq=True)
            else:
                path = os.path.expanduser(self.model)
                if not os.path.isfile(path):
                    raise M.model_load_error(self.model, "BART weights", f"no such file ({PARA_HELP})")

                def load_weights(m: Any) -> Any:
                    import torch

                    try:
                        state = torch.load(path, map_location="cpu", weights_only=True)
                        m.load_state_dict(state)
                    except Exception as e:
                        raise M.model_load_error(self.model, "BART weights", e) from e
                    return m

                tok, model = M.load_hf_encoder(
                    self.base_model, device=device, dtype=self.dtype, seq2seq=True, prepare=load_weights,
                    prepare_key=("weights", path, M.model_identity(path)),
                )
            self._loaded = (tok, model, device)
        return self._loaded

    def log_likelihoods(self, srcs: Sequence[str], tgts: Sequence[str]) -> tuple[np.ndarray, int]:
        """Mean log-likelihood per target token of each ``tgt`` given its ``src`` (BARTScorer.score),
        and how many distinct texts were longer than ``max_length`` tokens (truncated)."""
        import torch

        tok, model, device = self._load()
        limit = min(self.max_length, M.tokenizer_limit(tok, model.config))
        pairs = list(dict.fromkeys(zip(srcs, tgts, strict=True)))
        texts = list(dict.fromkeys([t for p in pairs for t in p]))
        enc = tok(texts, max_length=limit, truncation=True)["input_ids"]
        ids = dict(zip(texts, enc, strict=True))
        truncated = int((M.count_tokens(tok, texts) > limit).sum())
        lengths = [len(ids[s]) + len(ids[t]) for s, t in pairs]
        pad = tok.pad_token_id
        result: dict[tuple[str, str], float] = {}
        for batch in M.length_batches(lengths, self.batch_size, self.token_budget):
            bp = [pairs[i] for i in batch]
            src = _pad([ids[s] for s, _ in bp], pad)
            tgt = _pad([ids[t] for _, t in bp], pad)
            src_mask = (src != pad).long()
            tgt_mask = tgt != pad
            labels = tgt.masked_fill(~tgt_mask, -100)
            with torch.inference_mode():
                logits = model(input_ids=src.to(device), attention_mask=src_mask.to(device),
                               labels=labels.to(device)).logits.float()
            tgt_d = tgt.to(device)
            token_lp = logits.gather(-1, tgt_d.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
            m = tgt_mask.to(device)
            mean = (token_lp * m).sum(dim=1) / m.sum(dim=1)
            for p, v in zip(bp, mean.cpu().tolist(), strict=True):
                result[p] = float(v)
            if self.progress is not None:
                self.progress(len(result), len(pairs))
        return np.asarray([result[p] for p in zip(srcs, tgts, strict=True)], dtype=float), truncated

    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        """BARTScore per item in the chosen direction (best over references; NaN without reference)."""
        hyp, ref, owner = flatten_references([str(r) for r in responses], references)
        n = len(responses)
        if not hyp:
            return MetricResult(np.full(n, np.nan), info={"pairs": 0})
        ref = [str(r) for r in ref]
        truncated = 0
        if self.direction in ("hypo_ref", "avg_f", "harm_f"):
            hr, truncated = self.log_likelihoods(hyp, ref)
        if self.direction in ("ref_hypo", "avg_f", "harm_f"):
            rh, truncated = self.log_likelihoods(ref, hyp)
        if self.direction == "hypo_ref":
            pair = hr
        elif self.direction == "ref_hypo":
            pair = rh
        elif self.direction == "avg_f":
            pair = (hr + rh) / 2
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                pair = hr * rh / (hr + rh)
        return MetricResult(max_by_owner(pair, owner, n), info={"truncated": truncated})


def _pad(rows: list[list[int]], pad: int) -> Any:
    import torch

    out = torch.full((len(rows), max(len(r) for r in rows)), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out
