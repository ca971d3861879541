"""``train_judge`` on a tiny random Llama: labels mask the prompt, the loss falls, resume continues the
step count, the merged model loads in the HF judge backend, the signature is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evalign.cli.train_judge import progress_line
from evalign.errors import InputError
from evalign.signature import file_sha256
from evalign.train import SIGNATURE_FILE, TrainSettings, build_trainer, latest_checkpoint, train_judge
from evalign.train.data import prompt_messages, read_examples


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


FAST = {"batch_size": 4, "gradient_accumulation_steps": 1, "device": "cpu", "logging_steps": 1}


@pytest.mark.parametrize("template", [None, "native", "raise"])
def test_loss_only_on_output_tokens(template: str | None, tiny_llama: Callable[..., Path], small_data: Path,
                                    tmp_path: Path) -> None:
    trainer = build_trainer(small_data, tiny_llama(template), tmp_path / "out", TrainSettings(max_steps=1, **FAST))
    tok = trainer.processing_class
    examples = read_examples(small_data)
    system_ok = template != "raise"
    assert len(trainer.train_dataset) == len(examples)
    for ex, row in zip(examples, trainer.train_dataset, strict=True):
        msgs = prompt_messages(ex, system_ok)
        prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
        ids, labels = row["input_ids"], row["labels"]
        assert labels[:n_prompt] == [-100] * n_prompt  # the whole prompt is masked
        assert labels[n_prompt:] == ids[n_prompt:]  # every output token carries loss
        assert tok.decode(ids[n_prompt:]).startswith(ex.output) and tok.eos_token_id in ids[n_prompt:]
        if ex.system:
            assert (ex.system in prompt) and (f"{ex.system}\n\n{ex.instruction}" in prompt) == (not system_ok)
    unmasked = build_trainer(small_data, tiny_llama(template), tmp_path / "o2",
                             TrainSettings(max_steps=1, mask_prompt=False, **FAST))
    assert all(-100 not in r["labels"] for r in unmasked.train_dataset)


@pytest.mark.slow
def test_train_resume_merge_load(tiny_llama: Callable[..., Path], small_data: Path, tmp_path: Path) -> None:
    from evalign.backends import GenerationRequest, HFLocalBackend

    base = tiny_llama(None)
    out = tmp_path / "judge"
    settings = TrainSettings(max_steps=12, save_steps=6, learning_rate=1e-2, seed=1, **FAST)
    first = train_judge(small_data, base, out, settings)
    assert first.global_step == 12 and first.resumed_from is None
    losses = [v for _, v in first.losses]
    assert len(losses) == 12 and losses[-1] < 0.7 * losses[0]  # the loss falls
    assert latest_checkpoint(out).name == "checkpoint-12" and first.tokens_seen > 0
    seen_at_12 = json.loads((latest_checkpoint(out) / "trainer_state.json").read_text())["num_input_tokens_seen"]
    assert first.tokens_seen == seen_at_12
    more = train_judge(small_data, base, out, TrainSettings(max_steps=18, save_steps=6, learning_rate=1e-2, seed=1,
                                                             **FAST), resume=True)
    assert more.resumed_from.endswith("checkpoint-12") and more.global_step == 18
    assert [s for s, _ in more.losses] == list(range(13, 19))  # the step count goes on
    # tokens (and so tokens/s) of the resumed run only, as its seconds are
    seen_at_18 = json.loads((latest_checkpoint(out) / "trainer_state.json").read_text())["num_input_tokens_seen"]
    assert latest_checkpoint(out).name == "checkpoint-18" and more.tokens_seen == seen_at_18 - seen_at_12 > 0
    sig = json.loads((out / SIGNATURE_FILE).read_text())
    assert sig["data"]["sha256"] == file_sha256(small_data) and sig["data"]["rows"] == 8
    assert sig["base_model"]["files"]["config.json"] == file_sha256(base / "config.json")
    assert sig["settings"]["lora"] is True and sig["settings"]["learning_rate"] == 1e-2
    assert sig["global_step"] == 18 and sig["versions"]["trl"] != "none"
    assert not (out / "adapter_config.json").exists()  # merged: a standalone model
    backend = HFLocalBackend(str(out), device="cpu")
    assert backend.tokenizer.chat_template  # the fallback template travels with the model
    gen = backend.run([GenerationRequest(messages=[{"role": "user", "content": "Grade answer 1: the apple river is good."}],
                                         max_tokens=24)])[0]
    assert gen.usage.completion_tokens > 0


def test_bad_training_data(tmp_path: Path, tiny_llama: Callable[..., Path]) -> None:
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"instruction": "a", "output": "b"}, {"instruction": "a", "output": ""}])
    with pytest.raises(InputError, match=r"bad.jsonl, line 2, field 'output'"):
        read_examples(bad)
    from typer.testing import CliRunner

    from evalign.cli import app

    res = CliRunner().invoke(app, ["train-judge", str(bad), "--base-model", str(tiny_llama(None)), "-o",
                                   str(tmp_path / "o")])
    assert res.exit_code == 1
    assert "line 2, field 'output': must be a non-empty string" in res.output and "Traceback" not in res.output


def test_resume_at_max_steps_trains_nothing(tiny_llama: Callable[..., Path], small_data: Path, tmp_path: Path) -> None:
    """A checkpoint already at --max-steps is not trained from (transformers would run a 5th step): its
    weights are merged and written, the signature says where the base model came from."""
    from safetensors.torch import load_file

    base = tiny_llama(None)
    out = tmp_path / "judge"
    settings = TrainSettings(max_steps=4, save_steps=4, learning_rate=1e-2, seed=1, **FAST)
    first = train_judge(small_data, base, out, settings)
    assert first.global_step == 4 and latest_checkpoint(out).name == "checkpoint-4"
    weights = load_file(str(out / "model.safetensors"))
    (out / "model.safetensors").unlink()
    msgs: list[str] = []
    again = train_judge(small_data, base, out, settings, resume=True, on_message=msgs.append)
    assert again.global_step == 4 and again.losses == () and again.tokens_seen == 0 and again.seconds == 0
    assert again.resumed_from.endswith("checkpoint-4") and latest_checkpoint(out).name == "checkpoint-4"
    assert msgs == ["checkpoint-4 is already at --max-steps 4: nothing to train (raise --max-steps to continue); "
                    "writing its merged model"]
    restored = load_file(str(out / "model.safetensors"))
    assert restored.keys() == weights.keys()
    assert all(bool((restored[k] == weights[k]).all()) for k in weights)  # the checkpoint's trained weights
    sig = json.loads((out / SIGNATURE_FILE).read_text())
    assert sig["base_model"]["source"]["kind"] == "folder" and sig["global_step"] == 4
    assert sig["trainer"] == "PlainLossSFTTrainer"  # the plain loss on a CPU by default


def test_cli_base_model_alias_error_and_fused_flag(tmp_path: Path, small_data: Path) -> None:
    from typer.testing import CliRunner

    from evalign.cli import app

    res = CliRunner().invoke(app, ["train-judge", str(small_data), "--base-model", str(tmp_path / "nowhere"),
                                   "-o", str(tmp_path / "o"), "--no-fused-lm-head"])
    assert res.exit_code == 1
    assert "neither a local folder, a GGUF file nor a known alias (smollm2-135m-instruct)" in " ".join(res.output.split())


def test_progress_line() -> None:
    """The training progress line: step of max, loss, tokens/s and the ETA (minutes and seconds)."""
    logs = {"step": 12, "max_steps": 60, "loss": 2.03456, "tokens_per_second": 265.4, "eta_seconds": 250.2}
    assert progress_line(logs) == "step 12/60: loss 2.0346, 265 tokens/s, ETA 4 min 10 s"
    assert progress_line({**logs, "eta_seconds": 9.6}) == "step 12/60: loss 2.0346, 265 tokens/s, ETA 10 s"
    assert progress_line({"step": 3, "loss": 1.0}) == "step 3: loss 1.0000"
