"""Training throughput: where TRL's ``SFTTrainer`` loses time against a plain PyTorch loop, and the fixes.

Measured with ``benchmarks/train_throughput.py`` at its defaults (tiny random Llama, hidden 64, 2 layers,
vocabulary 4,000; 20 full fine-tuning steps of batch 4, ``--threads 1``; TRL 1.16, transformers 5.24,
torch 2.13 CPU) and profiled with cProfile, two things take the time; the collator, the padding and
the logging do not (together under 1 % of a step):

1. **Gradient checkpointing is on.** TRL's ``SFTConfig`` defaults ``gradient_checkpointing=True``;
   ``evalign train-judge`` passes the option only when it is True, so its documented default (False) is
   never applied and every layer's forward runs twice. :func:`sft_config_overrides` passes the setting
   always.
2. **TRL's fused LM head.** ``SFTTrainer`` patches the model with a chunked ("fused") LM head that
   computes the per-token log-probabilities, the entropy and the top-1 hits tile by tile in float32
   and recomputes the logits in its backward pass. It saves GPU memory (no ``batch x length x
   vocabulary`` logits), but on a CPU every position is projected (the compact path is for Triton
   devices only), the tiles run one after the other and the head is projected three times per step;
   with a small model it is most of the step (9.6 s of 15.9 s). :func:`plain_loss_trainer_class`
   (or :func:`use_plain_loss` on a built trainer) computes the loss as ``transformers.Trainer`` does:
   the model's own loss over the full logits (the same masked mean over the completion tokens,
   divided by the tokens of the whole accumulated batch). The losses are the same to 1e-5 at the
   same seed; TRL's ``entropy`` and ``mean_token_accuracy`` log entries are not computed.

Tokens per second in one process each (2 shared cores, load ~7; the plain loop measured right after):
stock 1,924 vs 5,061 (0.38x); without checkpointing 2,738 vs 6,233 (0.44x); without checkpointing and
with the plain loss 4,254 vs 5,048 (0.84x). What remains is per run, not per step: ``accelerate``'s
``gc.collect()`` at the end of ``train()`` (0.2-0.7 s: it scans every object of the loaded libraries)
and the final checkpoint (0.2 s). :func:`evalign.train.train_judge` freezes the objects alive before
training (``gc.freeze()``), so that collection only scans what training made.

With all three in ``evalign train-judge`` (``python benchmarks/train_throughput.py`` at its defaults,
three runs on the 2 shared cores): 0.88x, 0.99x and 0.93x of the plain loop (9,687 / 14,673 / 7,285
tokens/s against 11,050 / 14,750 / 7,814; the absolute figures move with the load of the machine);
without ``gc.freeze()`` 0.78x, 0.72x and 0.48x.
"""

from __future__ import annotations

from typing import Any

from evalign.errors import EvalignError
from evalign.train.settings import TrainSettings

_PLAIN_CLASS: type | None = None


def sft_config_overrides(settings: TrainSettings) -> dict[str, Any]:
    """``SFTConfig`` arguments that TRL would otherwise default differently from evalign's settings:
    ``gradient_checkpointing`` (TRL: True; evalign: ``settings.gradient_checkpointing``, False by default)."""
    return {"gradient_checkpointing": bool(settings.gradient_checkpointing)}


def wants_plain_loss(device: str | None, fused_lm_head: bool | None = None) -> bool:
    """Whether to train with the plain loss: ``fused_lm_head`` when given (True: TRL's fused head), else
    the plain loss on a CPU (``device == "cpu"`` or no GPU) and TRL's fused head on a GPU, where it
    saves the memory of the full logits."""
    if fused_lm_head is not None:
        return not fused_lm_head
    if device == "cpu":
        return True
    import torch

    return not torch.cuda.is_available()


def plain_loss_trainer_class() -> type:
    """A subclass of ``trl.SFTTrainer`` whose ``compute_loss`` is ``transformers.Trainer``'s: one forward
    with the labels, the model's own cross-entropy over the full logits (masked mean over the
    completion tokens, divided by the tokens of the accumulated batch, as TRL's). It keeps TRL's
    ``num_tokens`` log entry; it does not compute TRL's ``entropy`` and ``mean_token_accuracy``."""
    global _PLAIN_CLASS
    if _PLAIN_CLASS is None:
        from transformers import Trainer
        from trl import SFTTrainer

        class PlainLossSFTTrainer(SFTTrainer):
            """``SFTTrainer`` with ``Trainer``'s loss (see :func:`plain_loss_trainer_class`)."""

            def compute_loss(self, model: Any, inputs: Any, return_outputs: bool = False,
                             num_items_in_batch: Any = None) -> Any:
                inputs["use_cache"] = False
                out = Trainer.compute_loss(self, model, inputs, return_outputs=return_outputs,
                                           num_items_in_batch=num_items_in_batch)
                if model.training and "attention_mask" in inputs and hasattr(self, "_total_train_tokens"):
                    n = self.accelerator.gather_for_metrics(inputs["attention_mask"].sum()).sum().item()
                    self._total_train_tokens += n // getattr(self, "_tp_size", 1)
                    self._metrics["train"]["num_tokens"] = [self._total_train_tokens]
                return out

        _PLAIN_CLASS = PlainLossSFTTrainer
    return _PLAIN_CLASS


def use_plain_loss(trainer: Any) -> Any:
    """Switch a built ``trl.SFTTrainer`` (e.g. from :func:`evalign.train.build_trainer`) to the plain
    loss in place (:func:`plain_loss_trainer_class`); returns it."""
    from trl import SFTTrainer

    if not isinstance(trainer, SFTTrainer):
        raise EvalignError(f"use_plain_loss needs a trl.SFTTrainer, got {type(trainer).__name__}")
    cls = plain_loss_trainer_class()
    if type(trainer) is SFTTrainer:
        trainer.__class__ = cls
    elif not isinstance(trainer, cls):
        raise EvalignError(f"use_plain_loss: {type(trainer).__name__} overrides SFTTrainer; subclass "
                           "plain_loss_trainer_class() instead")
    return trainer
