"""Supervised fine-tuning of a judge with TRL's ``SFTTrainer`` (and PEFT LoRA adapters by default).

Layout of the output folder ``OUT``:

* ``OUT/`` — the standalone model (LoRA adapters merged into the base weights) and its tokenizer
  (with the chat template it was trained with): ``evalign judge --backend hf --model OUT`` loads it;
* ``OUT/evalign_train.json`` — the signature: data file (path, SHA-256, rows), base model (path, model
  type, SHA-256 of its files), settings, library versions, steps and losses;
* ``OUT/checkpoints/checkpoint-N`` — Trainer checkpoints; ``resume=True`` continues from the latest
  (the step count goes on from N).
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalign.backends.model_source import ResolvedModel, locate_base_model, resolve_base_model
from evalign.errors import EvalignError, ModelLoadError, check_all
from evalign.signature import file_sha256, package_version
from evalign.train.data import conversations, ensure_chat_template, read_examples
from evalign.train.settings import TrainSettings
from evalign.train.throughput import plain_loss_trainer_class, sft_config_overrides, wants_plain_loss

SIGNATURE_FILE = "evalign_train.json"
CHECKPOINTS = "checkpoints"


@dataclass(frozen=True)
class TrainResult:
    """What a training run did: ``model_dir`` (the merged model), ``global_step`` (counting steps of
    earlier runs when resumed), ``resumed_from`` (checkpoint folder or None), ``losses`` ((step, loss)
    as logged), ``n_examples``, ``tokens_seen`` (input tokens of this run, padding excluded),
    ``seconds`` (training time of this run) and the ``signature`` written beside the model."""

    model_dir: Path
    global_step: int
    resumed_from: str | None
    losses: tuple[tuple[int, float], ...]
    n_examples: int
    tokens_seen: int
    seconds: float
    signature: dict[str, Any] = field(repr=False)

    @property
    def tokens_per_second(self) -> float:
        """Training throughput of this run (input tokens per second)."""
        return self.tokens_seen / self.seconds if self.seconds > 0 else float("nan")


def model_identity(path: str | Path) -> dict[str, Any]:
    """Identity of a local model folder: its path, ``model_type``, ``_name_or_path`` and the SHA-256 of
    every file directly in it (names sorted; the hash of all of them as ``sha256``)."""
    p = Path(path)
    if not p.is_dir():
        raise ModelLoadError(f"base model {str(path)!r} is not a local folder (config.json, weights, tokenizer)")
    files = {f.name: file_sha256(f) for f in sorted(p.iterdir()) if f.is_file()}
    cfg: dict[str, Any] = {}
    if (p / "config.json").exists():
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
    import hashlib

    total = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return {"path": str(p.resolve()), "model_type": cfg.get("model_type"), "name_or_path": cfg.get("_name_or_path"),
            "sha256": total, "files": files}


def latest_checkpoint(out: str | Path) -> Path | None:
    """The checkpoint with the highest step under ``OUT/checkpoints``, or None."""
    root = Path(out) / CHECKPOINTS
    cks = [c for c in root.glob("checkpoint-*") if c.is_dir() and c.name.split("-")[-1].isdigit()]
    return max(cks, key=lambda c: int(c.name.split("-")[-1])) if cks else None


def training_arguments(settings: TrainSettings, out: str | Path, max_length: int | None) -> dict[str, Any]:
    """The ``transformers.TrainingArguments`` that every evalign trainer (``trl.SFTConfig``,
    ``trl.RewardConfig``) sets alike from ``settings``: checkpoints under ``out/checkpoints``, the
    optimizer and schedule, the steps, ``max_length``, the seeds, the device (the CPU when
    ``settings.device`` is ``"cpu"`` or there is no GPU) and bf16 (``settings.bf16``, else on a GPU
    that has it), no report and no progress bar."""
    import torch

    cpu = settings.device == "cpu" or not torch.cuda.is_available()
    bf16 = settings.bf16 if settings.bf16 is not None else (not cpu and torch.cuda.is_bf16_supported())
    return {
        "output_dir": str(Path(out) / CHECKPOINTS), "learning_rate": settings.learning_rate,
        "optim": settings.optimizer, "lr_scheduler_type": settings.lr_scheduler,
        "warmup_steps": settings.warmup_steps, "weight_decay": settings.weight_decay,
        "per_device_train_batch_size": settings.batch_size,
        "gradient_accumulation_steps": settings.gradient_accumulation_steps, "num_train_epochs": settings.epochs,
        "max_steps": settings.max_steps if settings.max_steps is not None else -1, "max_length": max_length,
        "save_strategy": "steps", "save_steps": settings.save_steps, "save_total_limit": settings.save_total_limit,
        "logging_steps": settings.logging_steps, "logging_first_step": True, "seed": settings.seed,
        "data_seed": settings.seed, "bf16": bf16, "use_cpu": cpu, "report_to": "none", "disable_tqdm": True,
        "include_num_input_tokens_seen": "non_padding",
        "gradient_checkpointing": bool(settings.gradient_checkpointing), "dataset_num_proc": None,
    }  # fmt: skip


def lora_config(settings: TrainSettings, task_type: str) -> Any:
    """``peft.LoraConfig`` of ``settings`` (rank, alpha, dropout, target modules: all linear layers unless
    named) for ``task_type`` (``"CAUSAL_LM"``, ``"SEQ_CLS"``)."""
    from peft import LoraConfig

    target: Any = list(settings.lora_target_modules) if settings.lora_target_modules else "all-linear"
    return LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                      target_modules=target, task_type=task_type)


def build_trainer(data: str | Path, base_model: str | Path, out: str | Path, settings: TrainSettings) -> Any:
    """The configured ``trl.SFTTrainer`` (data read, tokenized, labels built; nothing trained yet)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import SFTConfig, SFTTrainer

        from datasets import Dataset
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise EvalignError("train-judge needs torch, transformers, trl, peft and datasets: "
                           "pip install 'evalign[models,train]'") from exc
    examples = read_examples(data, system_prompt=settings.system_prompt)
    try:
        tok: Any = AutoTokenizer.from_pretrained(str(base_model))
        model: Any = AutoModelForCausalLM.from_pretrained(str(base_model), dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the base model {str(base_model)!r}: {exc}") from exc
    ensure_chat_template(tok)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    records = conversations(examples, tok)
    args = SFTConfig(**(training_arguments(settings, out, settings.max_length) | sft_config_overrides(settings)),
                     completion_only_loss=settings.mask_prompt)
    peft_config = lora_config(settings, "CAUSAL_LM") if settings.lora else None
    trainer_class = plain_loss_trainer_class() if wants_plain_loss(settings.device, settings.fused_lm_head) else SFTTrainer
    trainer = trainer_class(model=model, args=args, train_dataset=Dataset.from_list(records), processing_class=tok,
                         peft_config=peft_config)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # logs go to on_log, never to stdout (keeps --json clean)
    trainer.evalign_examples = examples  # type: ignore[attr-defined]
    return trainer


def checkpoint_step(checkpoint: str | Path) -> int:
    """The optimizer step a checkpoint was saved at (its ``trainer_state.json``, else its folder name)."""
    state = Path(checkpoint) / "trainer_state.json"
    if state.is_file():
        return int(json.loads(state.read_text(encoding="utf-8")).get("global_step", 0))
    return int(Path(checkpoint).name.rsplit("-", 1)[-1])


def run_or_restore(trainer: Any, resume_from: str | None, max_steps: int | None) -> tuple[float, bool]:
    """Train (from ``resume_from`` when given); a checkpoint already at ``max_steps`` is loaded instead
    of trained from (``transformers`` would run one more step before checking the limit).
    Returns (seconds trained, whether the checkpoint was already done)."""
    if resume_from is not None and max_steps is not None and checkpoint_step(resume_from) >= max_steps:
        from transformers.trainer_callback import TrainerState

        trainer._load_from_checkpoint(resume_from)  # the weights (adapters) of the checkpoint, nothing trained
        trainer.state = TrainerState.load_from_json(str(Path(resume_from) / "trainer_state.json"))
        return 0.0, True
    gc.freeze()  # the objects alive now (libraries, model, data) are not scanned by the collections in train()
    try:
        t0 = time.perf_counter()
        trainer.train(resume_from_checkpoint=resume_from)
        return time.perf_counter() - t0, False
    finally:
        gc.unfreeze()


@dataclass(frozen=True)
class TrainingRun:
    """What :func:`train_logged` did: the logged ``(step, loss)`` pairs, the ``seconds`` trained, whether
    the checkpoint was already ``done`` (nothing trained) and this run's input ``tokens``."""

    losses: tuple[tuple[int, float], ...]
    seconds: float
    done: bool
    tokens: int


def train_logged(trainer: Any, resume_from: str | None, max_steps: int | None,
                 on_log: Callable[[dict[str, Any]], None] | None) -> TrainingRun:
    """Train ``trainer`` (:func:`run_or_restore`) with a :func:`progress_callback` that collects the
    losses and passes each log to ``on_log``."""
    losses: list[tuple[int, float]] = []
    log = progress_callback(losses, on_log)
    trainer.add_callback(log)
    seconds, done = run_or_restore(trainer, resume_from, max_steps)
    # this run's tokens (a resumed run's state counts the earlier runs' too), as ``seconds`` is this run's
    tokens = 0 if done else int(getattr(trainer.state, "num_input_tokens_seen", 0) or 0) - log.start[2]
    return TrainingRun(tuple(losses), seconds, done, tokens)


def train_judge(
    data: str | Path,
    base_model: str | Path,
    out: str | Path,
    settings: TrainSettings | None = None,
    *,
    resume: bool = False,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    on_message: Callable[[str], None] | None = None,
) -> TrainResult:
    """Fine-tune ``base_model`` on ``data`` and write the merged judge to ``out``.

    ``base_model``: a model folder, a GGUF file or a package alias (``smollm2-135m-instruct``),
    resolved by :func:`evalign.backends.model_source.resolve_base_model` (a GGUF is dequantized
    once into the model cache; ``on_message`` gets its one-line report; the signature records it).
    ``resume``: continue from the latest checkpoint in ``out/checkpoints`` (an error when there is none);
    a checkpoint already at ``settings.max_steps`` trains nothing (``on_message`` says so) and only
    writes the merged model. ``on_log(logs)``: called with each Trainer log dict (``loss``, ``step``, ...).
    """
    settings = settings or TrainSettings()
    out = Path(out)
    check_all(lambda: read_examples(data, system_prompt=settings.system_prompt),  # the input first
              lambda: locate_base_model(base_model))
    resume_from = resume_checkpoint(out) if resume else None
    resolved = resolve_base_model(base_model, on_message=on_message)
    trainer = build_trainer(data, resolved.path, out, settings)
    run = train_logged(trainer, resume_from, settings.max_steps, on_log)
    if run.done and on_message is not None:
        on_message(f"{Path(str(resume_from)).name} is already at --max-steps {settings.max_steps}: nothing to "
                   "train (raise --max-steps to continue); writing its merged model")
    _save_merged(trainer, out, settings)
    losses = list(run.losses)
    signature = _signature(data, resolved, settings, trainer, resume_from, losses)
    (out / SIGNATURE_FILE).write_text(json.dumps(signature, indent=2) + "\n", encoding="utf-8")
    return TrainResult(out, int(trainer.state.global_step), resume_from, run.losses, len(trainer.evalign_examples),
                       run.tokens, run.seconds, signature)


def resume_checkpoint(out: str | Path) -> str:
    """The latest checkpoint under ``out/checkpoints`` to resume from (an error when there is none)."""
    ck = latest_checkpoint(out)
    if ck is None:
        raise EvalignError(f"--resume: no checkpoint under {Path(out) / CHECKPOINTS}")
    return str(ck)


def progress_callback(losses: list[tuple[int, float]], on_log: Callable[[dict[str, Any]], None] | None) -> Any:
    """A ``TrainerCallback`` that appends each logged ``(step, loss)`` to ``losses`` and calls
    ``on_log`` with the log dict plus this run's :func:`progress`; its ``start`` is ``(time, step,
    tokens)`` when this run began."""
    from transformers import TrainerCallback

    class _Log(TrainerCallback):  # type: ignore[misc]
        start: tuple[float, int, int] = (0.0, 0, 0)

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.start = (time.perf_counter(), int(state.global_step), int(state.num_input_tokens_seen or 0))

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                losses.append((int(state.global_step), float(logs["loss"])))
            if logs and on_log is not None:
                on_log({"step": int(state.global_step), **logs, **progress(state, self.start)})

    return _Log()


def progress(state: Any, start: tuple[float, int, int]) -> dict[str, Any]:
    """Progress of this run from the Trainer state: ``max_steps``, ``tokens_per_second`` (input tokens
    of this run per second of wall time since it began) and ``eta_seconds`` (the remaining steps at this
    run's pace; None before the first step)."""
    t0, step0, tokens0 = start
    elapsed = max(time.perf_counter() - t0, 1e-9)
    steps = int(state.global_step) - step0
    tokens = int(state.num_input_tokens_seen or 0) - tokens0
    left = max(int(state.max_steps) - int(state.global_step), 0)
    return {"max_steps": int(state.max_steps), "tokens_per_second": tokens / elapsed,
            "eta_seconds": elapsed / steps * left if steps > 0 else None}


def _save_merged(trainer: Any, out: Path, settings: TrainSettings) -> None:
    """The adapters merged into the base weights (LoRA) and the model and tokenizer saved in ``out``."""
    trainer.save_model()  # a last checkpoint-free save of adapters under checkpoints/ is not needed
    model = trainer.model
    if settings.lora:
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    trainer.processing_class.save_pretrained(str(out))


def _signature(data: str | Path, resolved: ResolvedModel, settings: TrainSettings, trainer: Any,
               resume_from: str | None, losses: list[tuple[int, float]]) -> dict[str, Any]:
    """What ``OUT/evalign_train.json`` records: data, base model (folder identity and where it came from:
    folder, GGUF file or alias), settings, library versions, steps and losses."""
    return {
        "data": {"path": str(Path(data).resolve()), "sha256": file_sha256(data),
                 "rows": len(trainer.evalign_examples)},
        "base_model": {**model_identity(resolved.path), "source": resolved.as_dict()},
        "settings": settings.as_dict(),
        "trainer": type(trainer).__name__,
        "versions": {d: package_version(d) for d in ("evalign", "torch", "transformers", "trl", "peft", "datasets")},
        "global_step": int(trainer.state.global_step),
        "resumed_from": resume_from,
        "losses": losses,
    }
