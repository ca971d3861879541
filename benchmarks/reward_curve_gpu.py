"""What a made judge learns, checkpoint by checkpoint (issue 40, item 3), on one GPU: SmolLM2-135M-Instruct
with a sequence-classification head (the reward recipe, :mod:`make_reward_judge`) trained on human-only,
contrastive-only and mixed preference rows, every checkpoint judged on the held-out sets.

Per data kind (``--data``): the recipe with every checkpoint kept (``--keep-checkpoints``), its held-out
tables (``$OUT/make_reward_judge_gpu_smollm2_<kind>.md``); then every checkpoint (and the untrained model,
step 0) judges the first ``--curve-first`` pairs of each held-out set: the accuracy and the share of its
decided verdicts that prefer the longer response. Checkpoint judging is timed apart from training.
Writes ``$OUT/curve.json`` (rows: data, step, set, accuracy, prefers_longer, n), ``$OUT/curve.png`` (the
figure: :func:`draw_curve`) and ``$OUT/timings.json``.

The training rows can be built beforehand on a CPU (``--prep DIR``: ``DIR/<kind>/data``, the contrastive
rows need the MiniLM embedding model, which need not travel); a work folder with ``data/manifest.json``
reuses its rows. Run from the repository root::

    PYTHONPATH=src python benchmarks/reward_curve_gpu.py --prep .gpu/prep                  # CPU: the rows
    PYTHONPATH=src python benchmarks/reward_curve_gpu.py --base SMOLLM2.gguf --rows .gpu/prep  # the GPU run
    PYTHONPATH=src python benchmarks/reward_curve_gpu.py --tiny --device cpu --out /tmp/c     # a CPU check
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import make_reward_judge as recipe

KINDS = ("human", "contrastive", "mixed")


def recipe_argv(args: argparse.Namespace, kind: str, work: Path) -> list[str]:
    """The recipe's arguments for one data kind."""
    argv = ["--out", str(work), "--base", args.base, "--device", args.device, "--data", kind,
            "--max-length", str(args.max_length), "--max-steps", str(args.max_steps), "--batch-size",
            str(args.batch_size), "--learning-rate", str(args.learning_rate), "--eval-batch-size", "64",
            "--save-steps", str(args.save_steps), "--logging-steps", "10", "--keep-checkpoints", "--warmup", "10",
            "--threads", str(os.cpu_count() or 1), "--balance-length",
            "--results", str(args.out / f"make_reward_judge_gpu_smollm2_{kind}.md")]
    if args.tiny:
        argv += ["--max-steps", "2", "--batch-size", "2", "--max-length", "64", "--first", "4", "--save-steps", "1",
                 "--logging-steps", "1", "--train-sets", "pandalm", "--held-out", "llmbar:natural", "hhh"]
    return argv


def checkpoints(work: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every kept checkpoint, by step; each gets the trained model's reward record."""
    found = []
    for c in (work / "trained" / "checkpoints").glob("checkpoint-*"):
        record = work / "trained" / "evalign_reward.json"
        if record.exists():
            shutil.copy(record, c / record.name)
        found.append((int(c.name.split("-")[1]), c))
    return sorted(found)


def curve_rows(args: argparse.Namespace, kind: str, work: Path) -> list[dict[str, Any]]:
    """Accuracy and share preferring the longer response of the untrained model (step 0) and every
    checkpoint, on the first ``--curve-first`` pairs of each held-out set (and the kept-aside questions)."""
    from evalign.cache import Cache

    r_args = recipe.parse_args(recipe_argv(args, kind, work))
    r_args.first = 4 if args.tiny else args.curve_first
    notes: list[str] = []
    sets = recipe.loadable(r_args.held_out, notes)
    val = work / "data" / "held_out.jsonl"
    if val.exists():
        import pandas as pd

        sets = {"val": recipe._val_set(pd.read_json(val, lines=True)), **sets}
    rows = []
    for step, folder in [(0, work / "untrained"), *checkpoints(work)]:
        cache = Cache(work / f"curve_cache_{step}.sqlite")
        for spec, ds in sets.items():
            res = recipe.evaluate_set(r_args, spec, ds, {"trained": folder}, cache)
            t = res.table.set_index("judge")
            acc = float(t.at["trained", "accuracy"])
            longer = recipe.LONGER_SHARE.get(spec, math.nan)
            rows.append({"data": kind, "step": step, "set": spec, "accuracy": acc,
                         "prefers_longer": None if not math.isfinite(longer) else longer,
                         "n": int(t.at["trained", "n"])})
    return rows


def curve_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per data kind: ``steps`` (sorted), and for ``accuracy`` and ``prefers_longer`` the mean over the
    unseen sets at each step (``unseen``; a missing share left out of the mean) and the kept-aside
    questions' value (``val``; None where not judged)."""
    import numpy as np

    out: dict[str, dict[str, Any]] = {}
    for kind in dict.fromkeys(r["data"] for r in rows):
        mine = [r for r in rows if r["data"] == kind]
        steps = sorted({r["step"] for r in mine})
        entry: dict[str, Any] = {"steps": steps}
        for key in ("accuracy", "prefers_longer"):
            unseen = []
            for s in steps:
                vals = [r[key] for r in mine if r["step"] == s and r["set"] != "val" and r[key] is not None]
                unseen.append(float(np.mean(vals)) if vals else None)
            val = [next((r[key] for r in mine if r["step"] == s and r["set"] == "val"), None) for s in steps]
            entry[key] = {"unseen": unseen, "val": val}
        out[kind] = entry
    return out


def draw_curve(rows: list[dict[str, Any]], path: Path) -> Path:
    """The curve (:func:`curve_summary`): per data kind, the mean held-out accuracy over the unseen
    sets and the share of decided verdicts preferring the longer response, against the training step
    (the kept-aside questions of the training sets dashed); written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    for kind, entry in curve_summary(rows).items():
        for ax, key in zip(axes, ("accuracy", "prefers_longer"), strict=True):
            nan = float("nan")
            unseen = [nan if v is None else v for v in entry[key]["unseen"]]
            line = ax.plot(entry["steps"], unseen, marker="o", label=f"{kind} (unseen sets)")[0]
            val = entry[key]["val"]
            if any(v is not None for v in val):
                ax.plot(entry["steps"], [nan if v is None else v for v in val], linestyle="--",
                        color=line.get_color(), label=f"{kind} (kept-aside questions)")
    for ax, title in zip(axes, ("held-out accuracy", "share of decided verdicts preferring the longer"), strict=True):
        ax.axhline(0.5, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.set_xlabel("training step")
        ax.set_ylim(0, 1)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def prep(args: argparse.Namespace) -> None:
    """Build the training rows of every kind into ``--prep``/<kind>/data (on a CPU)."""
    for kind in args.data:
        work = args.prep / kind
        r_args = recipe.parse_args(recipe_argv(args, kind, work))
        notes: list[str] = []
        held = recipe.loadable(r_args.held_out, notes)
        recipe.make_data(r_args, list(held), notes)
        for n in notes:
            print(f"{kind}: {n}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/reward_curve")))
    ap.add_argument("--work", type=Path, default=Path("/tmp/reward_curve_work"))
    ap.add_argument("--base", default="smollm2-135m-instruct", help="a SmolLM2 folder, GGUF file or alias")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data", type=lambda s: s.split(","), default=list(KINDS), help="kinds, comma-separated")
    ap.add_argument("--rows", type=Path, help="rows built by --prep: ROWS/<kind>/data is copied into the work folder")
    ap.add_argument("--prep", type=Path, help="only build the training rows into PREP/<kind>/data, then stop")
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--save-steps", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--learning-rate", type=float, default=1e-5)
    ap.add_argument("--max-length", type=int, default=768)
    ap.add_argument("--curve-first", type=int, default=100, help="pairs per held-out set judged per checkpoint")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    if args.prep:
        prep(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    for kind in args.data:
        work = args.work / kind
        if args.rows and (args.rows / kind / "data").exists() and not (work / "data").exists():
            shutil.copytree(args.rows / kind / "data", work / "data")
        t0 = time.perf_counter()
        recipe.run(recipe.parse_args(recipe_argv(args, kind, work)),
                   "python benchmarks/reward_curve_gpu.py " + " ".join(sys.argv[1:]))
        timings[f"{kind}_recipe_s"] = round(time.perf_counter() - t0, 1)
        result = json.loads((work / "train_result.json").read_text(encoding="utf-8"))
        timings[f"{kind}_training_s"] = result.get("seconds", math.nan)
        t0 = time.perf_counter()
        rows += curve_rows(args, kind, work)
        timings[f"{kind}_checkpoint_judging_s"] = round(time.perf_counter() - t0, 1)
        (args.out / "curve.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        draw_curve(rows, args.out / "curve.png")
        (args.out / "timings.json").write_text(json.dumps(timings, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(timings), flush=True)


if __name__ == "__main__":
    main()
