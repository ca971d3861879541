"""Judge training throughput: ``evalign train-judge`` (TRL SFTTrainer, loss on the output only) vs a plain
PyTorch loop (forward, backward, AdamW step) on the same tokenized examples, same model, one run each.

Data: ``--rows`` Feedback-Collection-style rows made by the tests' scripted teacher (``evalign synth``
with an in-process backend), rendered with the prometheus_absolute template. Model: the tests' tiny
random Llama (``--hidden``, ``--layers``), built offline; or ``--base-model`` a folder, GGUF file or alias
(``smollm2-135m-instruct``) for a real one.
Reports training tokens per second (input tokens, padding excluded) of both and the ratio
(ours / plain loop: the cost of TRL's trainer around the same math). Full fine-tuning on both sides.
Usage: ``python benchmarks/train_throughput.py [--steps 20] [--batch 4] [--threads 1] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "synth"))
sys.path.insert(0, str(ROOT / "tests" / "train"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--base-model", default=None)
    args = ap.parse_args()

    import torch
    from scripted_teacher import ScriptedTeacher
    from tiny_llama import build_tiny_llama

    from evalign.backends.model_source import resolve_base_model
    from evalign.cache import Cache
    from evalign.io import write_table
    from evalign.synth import SynthSettings, load_seed_rubrics, run_synth
    from evalign.train import TrainSettings, build_trainer, train_judge

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="evalign-train-bench-"))
    res = run_synth(load_seed_rubrics(), ScriptedTeacher(), SynthSettings(instructions_per_rubric=5),
                    cache=Cache(tmp / "c.sqlite"))
    data = tmp / "data.jsonl"
    write_table(res.table, data)
    base = resolve_base_model(args.base_model).path if args.base_model else build_tiny_llama(tmp / "base", hidden=args.hidden,
                                                                          layers=args.layers, vocab_size=4000)
    settings = TrainSettings(lora=False, max_steps=args.steps, batch_size=args.batch, gradient_accumulation_steps=1,
                             learning_rate=1e-4, device=args.device, save_steps=10_000, logging_steps=10_000)
    ours = train_judge(data, base, tmp / "out", settings)

    # peer: the same tokenized examples (labels from TRL), a plain loop
    trainer = build_trainer(data, base, tmp / "peer", settings)
    rows = list(trainer.train_dataset)
    model = trainer.model.to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    pad = trainer.processing_class.pad_token_id
    tokens = 0
    t0 = time.perf_counter()
    for step in range(args.steps):
        batch = [rows[(step * args.batch + i) % len(rows)] for i in range(args.batch)]
        n = max(len(r["input_ids"]) for r in batch)
        ids = torch.tensor([r["input_ids"] + [pad] * (n - len(r["input_ids"])) for r in batch], device=args.device)
        lab = torch.tensor([r["labels"] + [-100] * (n - len(r["labels"])) for r in batch], device=args.device)
        att = torch.tensor([[1] * len(r["input_ids"]) + [0] * (n - len(r["input_ids"])) for r in batch],
                           device=args.device)
        loss = model(input_ids=ids, attention_mask=att, labels=lab).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        tokens += int(att.sum())
    peer_s = time.perf_counter() - t0
    peer_tps = tokens / peer_s
    print(f"rows {len(rows)}, steps {args.steps}, batch {args.batch}, device {args.device}, threads {torch.get_num_threads()}")
    print(f"evalign train-judge (TRL SFTTrainer): {ours.tokens_seen} tokens in {ours.seconds:.2f} s = "
          f"{ours.tokens_per_second:,.0f} tokens/s")
    print(f"plain PyTorch loop:                   {tokens} tokens in {peer_s:.2f} s = {peer_tps:,.0f} tokens/s")
    print(f"ratio ours / plain loop: {ours.tokens_per_second / peer_tps:.2f}")


if __name__ == "__main__":
    main()
