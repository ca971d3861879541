"""``train_judge`` on a tiny random Llama: labels mask the prompt, the loss falls, resume continues the
step count, the merged model loads in the HF judge backend, the signature is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from evalign.errors import InputError
from evalign.train import SIGNATURE_FILE, TrainSettings, build_trainer, latest_checkpoint, train_judge
from evalign.train.data import file_sha256, prompt_messages, read_examples


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
    from evalign.judges.backends import GenerationRequest, HFLocalBackend

    base = tiny_llama(None)
    out = tmp_path / "judge"
    settings = TrainSettings(max_steps=12, save_steps=6, learning_rate=1e-2, seed=1, **FAST)
    first = train_judge(small_data, base, out, settings)
    assert first.global_step == 12 and first.resumed_from is None
    losses = [v for _, v in first.losses]
    assert len(losses) == 12 and losses[-1] < 0.7 * losses[0]  # the loss falls
    assert latest_checkpoint(out).name == "checkpoint-12" and first.tokens_seen > 0
    more = train_judge(small_data, base, out, TrainSettings(max_steps=18, save_steps=6, learning_rate=1e-2, seed=1,
                                                             **FAST), resume=True)
    assert more.resumed_from.endswith("checkpoint-12") and more.global_step == 18
    assert [s for s, _ in more.losses] == list(range(13, 19))  # the step count goes on
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
