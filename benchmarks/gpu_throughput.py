"""GPU throughput of evalign's encoders: texts/s, tokens/s and fraction of peak FLOP/s, fp32 vs bf16.

Two randomly initialised models built from configs in code (no download): one shaped like
``sentence-transformers/all-mpnet-base-v2`` (MPNet, 12 layers x 768) and one like
``microsoft/deberta-xlarge-mnli`` (DeBERTa, 48 layers x 1024). Random weights do not change the
amount of work, so throughput equals that of the real models. Inputs: random token ids whose
lengths follow a typical instruction-response distribution (``--lengths``), batched exactly as
evalign batches texts (:func:`evalign.metrics._models.length_batches`, longest first, bounded by
``--batch-size`` texts and ``--token-budget`` padded tokens), then mean pooling as in
``pooled_similarity`` / SemScore.

FLOPs per batch are estimated as ``2 * params_in_layers * tokens + 4 * layers * hidden * sum(len^2)``
(matmuls of the dense layers plus attention scores and weighted sums; DeBERTa's disentangled
attention adds more, so its fraction of peak is a lower bound). Peak: ``--peak-tflops`` or a table
of dense tensor-core peaks for known GPUs (H100/H200 SXM bf16 989, fp32-via-TF32 494; A100 bf16 312,
TF32 156; L4 bf16 121, TF32 60).

Usage (needs a CUDA GPU): ``python benchmarks/gpu_throughput.py [--texts 4096] [--models mpnet,deberta]``.
``--smoke`` runs tiny versions of both models on the CPU to check the script itself.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

PEAKS_TFLOPS = {  # dense tensor-core peaks: (bf16, tf32)
    "H200": (989.0, 494.0),
    "H100": (989.0, 494.0),
    "A100": (312.0, 156.0),
    "L40S": (362.0, 183.0),
    "L4": (121.0, 60.0),
    "A10": (125.0, 62.5),
}


def mpnet_config(smoke: bool) -> Any:
    from transformers import MPNetConfig

    if smoke:
        return MPNetConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=514)
    return MPNetConfig(vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072, max_position_embeddings=514, relative_attention_num_buckets=32)


def deberta_config(smoke: bool) -> Any:
    from transformers import DebertaConfig

    common = dict(relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=-1,
                  position_biased_input=False, max_position_embeddings=512, type_vocab_size=0)
    if smoke:
        return DebertaConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=128, **common)
    return DebertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=48, num_attention_heads=16,
                         intermediate_size=4096, **common)


def lengths_sample(n: int, mean: float, cap: int, seed: int) -> np.ndarray:
    """Token lengths: log-normal around ``mean`` (instruction-tuning responses), 3..cap."""
    rng = np.random.default_rng(seed)
    raw = rng.lognormal(mean=np.log(mean), sigma=0.8, size=n)
    return np.clip(raw.astype(int), 3, cap)


def layer_params(model: Any) -> int:
    """Parameters that take part in per-token matmuls (all but the embeddings)."""
    emb = sum(p.numel() for n, p in model.named_parameters() if "embeddings" in n)
    return sum(p.numel() for p in model.parameters()) - emb


def run(name: str, config: Any, dtype: str, lengths: np.ndarray, args: argparse.Namespace, device: str) -> dict:
    import torch
    from evalign.metrics._models import length_batches
    from transformers import AutoModel

    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval().to(device)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    n_layer_params = layer_params(model)
    hidden, n_layers = config.hidden_size, config.num_hidden_layers
    rng = np.random.default_rng(1)
    ids = [rng.integers(5, config.vocab_size, size=int(n)) for n in lengths]
    batches = length_batches(lengths.tolist(), args.batch_size, args.token_budget)

    def one_pass() -> tuple[float, int, float]:
        tokens, flops = 0, 0.0
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for b in batches:
            longest = int(max(lengths[i] for i in b))
            x = torch.zeros((len(b), longest), dtype=torch.long)
            m = torch.zeros((len(b), longest), dtype=torch.long)
            for r, i in enumerate(b):
                x[r, : lengths[i]] = torch.from_numpy(ids[i])
                m[r, : lengths[i]] = 1
            x, m = x.to(device, non_blocking=True), m.to(device, non_blocking=True)
            with torch.inference_mode():
                h = model(input_ids=x, attention_mask=m)[0]
                mf = m.unsqueeze(-1).to(h.dtype)
                _ = ((h * mf).sum(1) / mf.sum(1)).float().cpu()
            padded = len(b) * longest
            tokens += int(sum(lengths[i] for i in b))
            flops += 2.0 * n_layer_params * padded + 4.0 * n_layers * hidden * len(b) * longest**2
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, tokens, flops

    one_pass()  # warm-up (kernels, allocator)
    secs, tokens, flops = min((one_pass() for _ in range(args.repeats)), key=lambda r: r[0])
    model.to("cpu")
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"model": name, "dtype": dtype, "seconds": secs, "texts_per_s": len(lengths) / secs,
            "tokens_per_s": tokens / secs, "tflops": flops / secs / 1e12}


def peak_for(device_name: str, dtype: str, override: float | None) -> float | None:
    if override:
        return override
    for key, (bf16, tf32) in PEAKS_TFLOPS.items():
        if key in device_name:
            return bf16 if dtype == "bf16" else tf32
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--texts", type=int, default=4096)
    ap.add_argument("--mean-tokens", type=float, default=120.0)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--token-budget", type=int, default=65536)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="mpnet,deberta")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the device's peak (TFLOP/s)")
    ap.add_argument("--smoke", action="store_true", help="tiny models on CPU: checks that the script runs")
    args = ap.parse_args()

    import torch

    if args.smoke:
        device, dev_name = "cpu", "cpu"
        args.texts, args.repeats = min(args.texts, 64), 1
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA GPU: run with --smoke to check the script on a CPU")
        device, dev_name = "cuda", torch.cuda.get_device_name(0)
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 matmuls on tensor cores, as users run them
        torch.backends.cudnn.allow_tf32 = True
    makers = {"mpnet": ("all-mpnet-base-v2-shaped", mpnet_config), "deberta": ("deberta-xlarge-shaped", deberta_config)}
    print(f"device: {dev_name}; {args.texts} texts, mean {args.mean_tokens} tokens; batch <= {args.batch_size} texts,"
          f" <= {args.token_budget} padded tokens")
    print(f"{'model':26s} {'dtype':5s} {'texts/s':>10s} {'tokens/s':>12s} {'TFLOP/s':>9s} {'of peak':>8s}")
    for key in args.models.split(","):
        label, make = makers[key]
        config = make(args.smoke)
        cap = 512 if not args.smoke else 128
        lengths = lengths_sample(args.texts, args.mean_tokens if not args.smoke else 20, cap, seed=0)
        for dtype in args.dtypes.split(","):
            r = run(label, config, dtype, lengths, args, device)
            peak = peak_for(dev_name, dtype, args.peak_tflops)
            frac = f"{100 * r['tflops'] / peak:7.1f}%" if peak else "     n/a"
            print(f"{label:26s} {dtype:5s} {r['texts_per_s']:10.1f} {r['tokens_per_s']:12.0f} "
                  f"{r['tflops']:9.2f} {frac}")


if __name__ == "__main__":
    main()
