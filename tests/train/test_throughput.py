"""The faster training loss (``Trainer``'s instead of TRL's fused LM head) gives the same loss curve on the
tiny model at the same seed; TRL's gradient-checkpointing default is overridden."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from evalign.errors import EvalignError
from evalign.train import TrainSettings, build_trainer
from evalign.train.throughput import (
    plain_loss_trainer_class,
    sft_config_overrides,
    use_plain_loss,
    wants_plain_loss,
)


def losses(trainer: object) -> list[float]:
    return [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]  # type: ignore[attr-defined]


@pytest.mark.parametrize("lora", [False, True])
def test_plain_loss_gives_the_same_first_five_losses(tiny_llama: Callable[[str | None], Path], small_data: Path,
                                                     tmp_path: Path, lora: bool) -> None:
    import torch

    torch.set_num_threads(1)
    settings = TrainSettings(lora=lora, max_steps=5, batch_size=2, gradient_accumulation_steps=2,
                             learning_rate=1e-3, logging_steps=1, save_steps=1000, device="cpu", seed=3)
    base = tiny_llama("native")
    from trl import SFTTrainer

    stock = build_trainer(small_data, base, tmp_path / "stock", replace(settings, fused_lm_head=True))
    assert type(stock) is SFTTrainer and stock.args.gradient_checkpointing is False
    stock.train()
    fast = build_trainer(small_data, base, tmp_path / "fast", settings)  # on a CPU: the plain loss by default
    assert isinstance(fast, plain_loss_trainer_class())
    fast.train()
    a, b = losses(stock), losses(fast)
    assert len(a) == len(b) == 5
    assert b == pytest.approx(a, abs=1e-5)
    assert a[0] != a[-1]  # the model did learn something in between
    assert fast.state.num_input_tokens_seen == stock.state.num_input_tokens_seen
    logged = [h for h in fast.state.log_history if "loss" in h]
    assert "num_tokens" in logged[0] and "mean_token_accuracy" not in logged[0]


def test_overrides_and_choice() -> None:
    assert sft_config_overrides(TrainSettings()) == {"gradient_checkpointing": False}
    assert sft_config_overrides(TrainSettings(gradient_checkpointing=True)) == {"gradient_checkpointing": True}
    assert wants_plain_loss("cpu") is True
    assert wants_plain_loss("cuda", fused_lm_head=False) is True
    assert wants_plain_loss("cpu", fused_lm_head=True) is False
    from trl import SFTConfig

    # why the override is needed: TRL's own default differs from evalign's
    assert SFTConfig(output_dir="unused", use_cpu=True).gradient_checkpointing is True


def test_use_plain_loss_needs_an_sft_trainer() -> None:
    with pytest.raises(EvalignError, match=r"needs a trl\.SFTTrainer"):
        use_plain_loss(object())
