"""Reward models: scoring and training throughput against the plain loops (issue 30).

* **scoring**: ``evalign judge --backend reward`` as a library call (``run_judge`` of the
  ``reward_pairwise`` judge on a pair table, a fresh cache: rendering, truncation, length-sorted
  batches, caching every score) vs a plain ``transformers`` loop on the same model and the same
  rendered texts (sorted by length, ``tokenizer(batch, padding=True, truncation=True)``, one forward per
  batch, same batch size). Responses per second of both, and the ratio (ours / plain).
* **training**: ``train_reward_model`` (TRL ``RewardTrainer``, full fine-tuning) vs a plain PyTorch
  Bradley-Terry loop (``-log sigmoid(r_chosen - r_rejected)``, AdamW, the same model initialisation, the
  same tokenized pairs in the same order, the same batch size, learning rate and steps). Training tokens
  per second (padding excluded) of both, and the ratio.

Data: LLMBar's pairs (bundled) for scoring; ``judge-data preference`` rows of PandaLM for training.
Model: ``--base`` (``minilm``: all-MiniLM-L6-v2 with a new head; ``smollm2-135m-instruct``; a folder).
Usage: ``python benchmarks/reward_throughput.py [--part both] [--threads 2] [--device cpu]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def scoring(args: argparse.Namespace, model_dir: Path, tmp: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from evalign.backends.reward import RewardModelBackend
    from evalign.cache import Cache
    from evalign.datasets.llmbar import load_llmbar
    from evalign.judges import get_judge, run_judge

    pairs = load_llmbar(["Natural", "Adversarial/Neighbor"]).pairs.head(args.pairs).reset_index(drop=True)
    pairs = pairs[[c for c in pairs.columns if not c.startswith("judge:")]]
    be = RewardModelBackend(str(model_dir), device=args.device, batch_size=args.batch, max_length=args.max_length)
    max_length = be.max_length  # the plain loop reads as much (capped at what the model reads)
    n = 2 * len(pairs)
    t0 = time.perf_counter()
    run = run_judge(pairs, get_judge("reward_pairwise"), be, cache=Cache(tmp / "score-cache.sqlite"))
    ours = time.perf_counter() - t0
    calls = run.summary["calls"]
    # the plain loop: the same rendered texts, the tokenizer's own truncation, sorted by length
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).to(args.device).eval()
    convs = [[{"role": "user", "content": r.instruction}, {"role": "assistant", "content": x}]
             for r in pairs.itertuples() for x in (r.response_a, r.response_b)]
    if tok.chat_template:
        texts: list[Any] = [tok.apply_chat_template(c, tokenize=False) for c in convs]
        lengths = [len(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]
    else:
        texts = [(c[0]["content"], c[1]["content"]) for c in convs]
        lengths = [len(x) for x in tok([a for a, _ in texts], [b for _, b in texts])["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    scores = [0.0] * len(texts)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for s in range(0, len(order), args.batch):
            idx = order[s:s + args.batch]
            if tok.chat_template:
                enc = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                          add_special_tokens=False, return_tensors="pt")
            else:
                enc = tok([texts[i][0] for i in idx], [texts[i][1] for i in idx], padding=True,
                          truncation="longest_first", max_length=max_length, return_tensors="pt")
            out = model(input_ids=enc["input_ids"].to(args.device),
                        attention_mask=enc["attention_mask"].to(args.device)).logits[:, 0]
            for i, v in zip(idx, out.tolist(), strict=True):
                scores[i] = v
    plain = time.perf_counter() - t0
    return {"responses": n, "scored": calls["new"], "from_cache": calls["cached"], "ours_s": round(ours, 2),
            "plain_s": round(plain, 2), "ours_per_s": n / ours, "plain_per_s": n / plain, "ratio": plain / ours}


def training(args: argparse.Namespace, model_dir: Path, tmp: Path) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForSequenceClassification

    from evalign.train import TrainSettings
    from evalign.train.preference_data import PreferenceSettings, build_preferences, write_preferences
    from evalign.train.reward import build_reward_trainer

    data = write_preferences(build_preferences(PreferenceSettings(sets=("pandalm",))), tmp / "prefs")["train"]
    settings = TrainSettings(lora=False, max_steps=args.steps, batch_size=args.batch, gradient_accumulation_steps=1,
                             learning_rate=5e-5, lr_scheduler="constant", device=args.device, save_steps=10_000,
                             logging_steps=10_000, max_length=args.max_length, seed=0)
    trainer = build_reward_trainer(data, model_dir, tmp / "out", settings)
    rows = [trainer.train_dataset[i] for i in range(min(len(trainer.train_dataset), args.steps * args.batch))]
    t0 = time.perf_counter()
    trainer.train()
    ours = time.perf_counter() - t0
    ours_tokens = int(trainer.state.num_input_tokens_seen)

    # the peer: the same initial weights, the same pairs in the same order, a plain Bradley-Terry loop
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).to(args.device)
    model.config.pad_token_id = trainer.processing_class.pad_token_id
    model.train()
    for m in model.modules():  # TRL's disable_dropout, as the trainer does
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
    pad = trainer.processing_class.pad_token_id
    tokens = 0
    t0 = time.perf_counter()
    for s in range(args.steps):
        batch = rows[s * args.batch:(s + 1) * args.batch]
        seqs = [r["chosen_ids"] for r in batch] + [r["rejected_ids"] for r in batch]
        n = max(len(x) for x in seqs)
        ids = torch.full((len(seqs), n), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), n), dtype=torch.long)
        for i, x in enumerate(seqs):
            ids[i, : len(x)] = torch.tensor(x)
            mask[i, : len(x)] = 1
        tokens += int(mask.sum())
        r = model(input_ids=ids.to(args.device), attention_mask=mask.to(args.device)).logits[:, 0]
        rc, rr = r.chunk(2)
        loss = -torch.nn.functional.logsigmoid(rc - rr).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    plain = time.perf_counter() - t0
    return {"steps": args.steps, "batch_pairs": args.batch, "ours_tokens": ours_tokens, "plain_tokens": tokens,
            "ours_s": round(ours, 2), "plain_s": round(plain, 2), "ours_tokens_per_s": ours_tokens / ours,
            "plain_tokens_per_s": tokens / plain, "ratio": (ours_tokens / ours) / (tokens / plain)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["scoring", "training", "both"], default="both")
    ap.add_argument("--base", default="minilm")
    ap.add_argument("--pairs", type=int, default=100, help="scoring: LLMBar pairs (2 responses each)")
    ap.add_argument("--steps", type=int, default=10, help="training: optimizer steps")
    ap.add_argument("--batch", type=int, default=16, help="scoring: responses per batch; training: pairs per step")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    import torch

    from evalign.train.reward import init_reward_model

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="evalign-reward-bench-"))
    model_dir = init_reward_model(args.base, tmp / "model", seed=0, max_length=args.max_length)
    out: dict[str, Any] = {"base": args.base, "device": args.device, "threads": args.threads}
    if args.part in ("scoring", "both"):
        out["scoring"] = s = scoring(args, model_dir, tmp)
        print(f"scoring {s['responses']} responses: reward backend {s['ours_per_s']:.1f}/s, plain transformers loop "
              f"{s['plain_per_s']:.1f}/s: {s['ratio']:.2f}x", flush=True)
    if args.part in ("training", "both"):
        out["training"] = t = training(args, model_dir, tmp)
        print(f"training {t['steps']} steps of {t['batch_pairs']} pairs: RewardTrainer {t['ours_tokens_per_s']:.0f} "
              f"tokens/s, plain Bradley-Terry loop {t['plain_tokens_per_s']:.0f} tokens/s: {t['ratio']:.2f}x", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
