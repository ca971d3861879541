"""Judge training throughput, step by step through the fixes of :mod:`evalign.train.throughput`: TRL's
``SFTTrainer`` with TRL's defaults (stock: gradient checkpointing on, the fused LM head), without
gradient checkpointing (evalign's default), and also with ``Trainer``'s loss instead of TRL's fused LM
head (evalign's default on a CPU); each against the plain PyTorch loop of ``benchmarks/train_throughput.py``, measured
right after it in the same process. Same data and model as that benchmark (the scripted teacher's rows,
the tests' tiny random Llama), or ``--base-model`` (a folder, a GGUF file or ``smollm2-135m-instruct``).
Prints tokens per second (input tokens, padding excluded), the ratios and the first losses of each.
Usage: ``python benchmarks/train_throughput_fixes.py [--steps 20] [--batch 4] [--threads 1] [--lora]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "synth"))
sys.path.insert(0, str(ROOT / "tests" / "train"))

VARIANTS = ("stock", "no_checkpointing", "no_checkpointing+plain_loss")


def plain_loop(trainer: object, steps: int, batch: int, device: str) -> float:
    """Tokens per second of forward, backward and AdamW on the trainer's tokenized rows (as in
    ``benchmarks/train_throughput.py``)."""
    import torch

    rows = list(trainer.train_dataset)  # type: ignore[attr-defined]
    model = trainer.model.to(device)  # type: ignore[attr-defined]
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    pad = trainer.processing_class.pad_token_id  # type: ignore[attr-defined]
    tokens = 0
    t0 = time.perf_counter()
    for step in range(steps):
        b = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
        n = max(len(r["input_ids"]) for r in b)
        ids = torch.tensor([r["input_ids"] + [pad] * (n - len(r["input_ids"])) for r in b], device=device)
        lab = torch.tensor([r["labels"] + [-100] * (n - len(r["labels"])) for r in b], device=device)
        att = torch.tensor([[1] * len(r["input_ids"]) + [0] * (n - len(r["input_ids"])) for r in b], device=device)
        model(input_ids=ids, attention_mask=att, labels=lab).loss.backward()
        opt.step()
        opt.zero_grad()
        tokens += int(att.sum())
    return tokens / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lora", action="store_true", help="LoRA adapters (default: full fine-tuning, as the benchmark)")
    ap.add_argument("--base-model", default=None)
    args = ap.parse_args()

    import torch
    from scripted_teacher import ScriptedTeacher
    from tiny_llama import build_tiny_llama

    from evalign.backends.model_source import resolve_base_model
    from evalign.cache import Cache
    from evalign.io import write_table
    from evalign.synth import SynthSettings, load_seed_rubrics, run_synth
    from evalign.train import TrainSettings, build_trainer

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="evalign-train-fixes-"))
    res = run_synth(load_seed_rubrics(), ScriptedTeacher(), SynthSettings(instructions_per_rubric=5),
                    cache=Cache(tmp / "c.sqlite"))
    data = tmp / "data.jsonl"
    write_table(res.table, data)
    if args.base_model:
        base = resolve_base_model(args.base_model, on_message=lambda m: print(m, file=sys.stderr)).path
    else:
        base = build_tiny_llama(tmp / "base", hidden=args.hidden, layers=args.layers, vocab_size=4000)
    settings = TrainSettings(lora=args.lora, max_steps=args.steps, batch_size=args.batch, gradient_accumulation_steps=1,
                             learning_rate=1e-4, device=args.device, save_steps=10_000, logging_steps=1)
    variants = {"stock": replace(settings, gradient_checkpointing=True, fused_lm_head=True),
                "no_checkpointing": replace(settings, fused_lm_head=True),
                "no_checkpointing+plain_loss": replace(settings, fused_lm_head=False)}
    print(f"steps {args.steps}, batch {args.batch}, device {args.device}, threads {torch.get_num_threads()}, "
          f"{'LoRA' if args.lora else 'full fine-tuning'}")
    for variant in VARIANTS:
        trainer = build_trainer(data, base, tmp / variant, variants[variant])
        peer_trainer = build_trainer(data, base, tmp / f"{variant}-peer", variants[variant])
        t0 = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t0
        ours = trainer.state.num_input_tokens_seen / seconds
        peer = plain_loop(peer_trainer, args.steps, args.batch, args.device)
        losses = [round(float(h["loss"]), 5) for h in trainer.state.log_history if "loss" in h][:5]
        print(f"{variant:28s} TRL {ours:8,.0f} tokens/s ({seconds:.2f} s) | plain loop {peer:8,.0f} tokens/s | "
              f"ratio {ours / peer:.2f} | first losses {losses}", flush=True)


if __name__ == "__main__":
    main()
