"""Settings of ``evalign train-judge`` (one frozen object, every field overridable)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from evalign.errors import EvalignError


@dataclass(frozen=True)
class TrainSettings:
    """How a judge is fine-tuned. Defaults follow the Prometheus paper (Kim et al. 2023, Appendix F)
    where they fit: AdamW, learning rate 1e-5, max length 4096 tokens, batch 28 (4 per device x 7
    accumulation steps), loss on the output only, 1 epoch. The paper's StepLR is not one of the
    Hugging Face schedulers; the default here is ``constant``.

    * ``lora``: train LoRA adapters (PEFT) and merge them at the end (False: full fine-tuning).
      ``lora_r``, ``lora_alpha``, ``lora_dropout``; ``lora_target_modules`` (None: all linear layers).
      With LoRA a higher learning rate (1e-4 .. 2e-4) is usual; 1e-5 is the paper's full fine-tuning rate.
    * ``learning_rate`` (> 0), ``optimizer`` (a ``transformers`` ``optim`` name), ``lr_scheduler``,
      ``warmup_steps``, ``weight_decay``.
    * ``batch_size`` per device, ``gradient_accumulation_steps``; ``epochs``; ``max_steps`` (None:
      from the epochs) — a resumed run continues its step count up to ``max_steps``.
    * ``max_length``: tokens per example (longer ones are truncated by TRL).
    * ``mask_prompt``: loss on the output tokens only (the paper: not masking the instruction hurts).
    * ``system_prompt``: system turn for rows without a ``system`` column value (None: no system turn).
    * ``save_steps``, ``save_total_limit``, ``logging_steps``; ``seed``; ``bf16`` (None: when the GPU
      supports it); ``gradient_checkpointing``; ``device`` (``"cpu"`` forces the CPU; None: GPU if any).
    * ``fused_lm_head``: TRL's chunked LM head loss (saves the memory of the full logits; slow on a
      CPU) when True, the plain loss of ``transformers.Trainer`` (same losses) when False; None: the
      fused head on a GPU, the plain loss on a CPU (:func:`evalign.train.throughput.wants_plain_loss`).
    """

    lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: tuple[str, ...] | None = None
    learning_rate: float = 1e-5
    optimizer: str = "adamw_torch"
    lr_scheduler: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    batch_size: int = 4
    gradient_accumulation_steps: int = 7
    epochs: float = 1.0
    max_steps: int | None = None
    max_length: int = 4096
    mask_prompt: bool = True
    system_prompt: str | None = None
    save_steps: int = 500
    save_total_limit: int | None = 2
    logging_steps: int = 10
    seed: int = 0
    bf16: bool | None = None
    gradient_checkpointing: bool = False
    device: str | None = None
    fused_lm_head: bool | None = None

    def __post_init__(self) -> None:
        positive = ("lora_r", "batch_size", "gradient_accumulation_steps", "max_length", "save_steps", "logging_steps")
        for name in positive:
            if getattr(self, name) < 1:
                raise EvalignError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise EvalignError(f"learning_rate must be a finite number > 0, got {self.learning_rate}")
        if self.max_steps is not None and self.max_steps < 1:
            raise EvalignError(f"max_steps must be >= 1, got {self.max_steps}")
        if not (math.isfinite(self.epochs) and self.epochs > 0):
            raise EvalignError(f"epochs must be a finite number > 0, got {self.epochs}")
        if self.warmup_steps < 0:
            raise EvalignError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise EvalignError(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if not 0 <= self.lora_dropout < 1:
            raise EvalignError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (for the signature)."""
        d = asdict(self)
        if d["lora_target_modules"] is not None:
            d["lora_target_modules"] = list(d["lora_target_modules"])
        return d
