"""Make a reward-model judge on a CPU and test it on sets it never saw (issue 30; contrastive data: issue 40).

1. data (``--data``): ``human`` = ``evalign judge-data preference`` of ``--train-sets`` (human majority
   labels; ties left out); ``contrastive`` = ``evalign judge-data contrastive`` of the same sets (the
   preferred response against a neighbouring instruction's, a truncated, an off-topic one and the response
   with its constraint broken; ``--neighbor-band``, ``--length-band``); ``mixed`` = contrastive rows plus
   human rows at ``--mix`` per contrastive row. Every instruction that duplicates one of a ``--held-out``
   set is removed (exact after normalising, or a rapidfuzz ratio >= 90 over the first 300 characters;
   contrastive data also by MiniLM cosine >= 0.9; the overlap removed per set is reported), 10% of the
   questions kept aside as an in-distribution check (``--val``);
2. an untrained reward model: the base (``--base``: ``minilm`` = all-MiniLM-L6-v2 as a cross-encoder, or
   ``smollm2-135m-instruct``) with a new score head initialised from ``--seed`` (the "before");
3. train: ``train_reward_model`` (TRL ``RewardTrainer``, Bradley-Terry loss; full fine-tuning, or LoRA with
   ``--lora``), ``--max-steps``, checkpoints every ``--save-steps``; a rerun resumes;
4. judge: every held-out set with the untrained and the trained model through ``--backend reward``
   (``reward_pairwise``; every score cached in ``OUT/cache.sqlite``, so a rerun only scores what is missing);
5. report: per held-out set, :func:`evalign.train.before_after.held_out_table` (accuracy with a 95%
   bootstrap interval, the paired permutation p of the trained model against every row): untrained,
   trained, the baselines (random, always A / B, longer is better) and the set's published judges
   (LLMBar's evaluators in both orders, JudgeBench's reward models and o1-mini where the adapter ships
   them), then the goal lines: beats random and longer on >= 2 sets (p < 0.05), beats ChatGPT, and a
   summary per set: the trained model's accuracy, the share of its decided verdicts that prefer the longer
   response, and (``--compare DIR``: another run's work folder, e.g. the human-only run) that run's accuracy.
   LLMBar's Adversarial set is judged per subset (Neighbor, GPTInst, GPTOut, Manual).

Dataset names that are not registered yet (``autoj``, ``alttest-mtbench``, ``judgebench``: the data
helper's adapters) are skipped with a note, so the same command picks them up once they are merged.

Not a test: minutes to an hour on a CPU. The command the results record is at the top of the
results file. On a GPU: ``--device cuda --batch-size 32 --max-length 1024`` (benchmarks/reward_gpu.py).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends.reward import RewardModelBackend
from evalign.cache import Cache
from evalign.datasets import load_dataset_spec
from evalign.errors import EvalignError
from evalign.judges import get_judge, run_judge
from evalign.meta.order_diagnostics import text_lengths
from evalign.train.before_after import HeldOut, held_out_table
from evalign.train.contrastive_data import ContrastiveSettings, build_contrastive, contrastive_summary
from evalign.train.preference_data import (
    PreferenceSettings,
    build_preferences,
    summary_line,
    write_preferences,
)
from evalign.train.reward import init_reward_model, train_reward_model
from evalign.train.settings import TrainSettings

TRAIN_SETS = ("pandalm", "tulu1", "llmbar:llmeval2", "autoj")
HELD_OUT = ("llmbar:natural", "llmbar:neighbor", "llmbar:gptinst", "llmbar:gptout", "llmbar:manual", "hhh",
            "llmbar:mt-bench", "alttest-mtbench", "judgebench:gpt-4o")
#: published judges shown on a set (globs); a set with at most 12 judge columns shows them all
PUBLISHED = ("judge:*/vanilla",)
CHATGPT = "judge:chatgpt/vanilla"


def loadable(specs: list[str], notes: list[str]) -> dict[str, Any]:
    """The datasets of ``specs`` that load (a pair table with one gold label); the others noted."""
    out: dict[str, Any] = {}
    for spec in specs:
        try:
            ds = load_dataset_spec(spec)
        except EvalignError as e:
            notes.append(f"{spec}: skipped ({str(e).splitlines()[0][:160]})")
            continue
        if ds.pairs is None or not ds.pref_columns:
            notes.append(f"{spec}: skipped (no pair table with preference labels)")
            continue
        out[spec] = ds
    return out


def make_data(args: argparse.Namespace, held: list[str], notes: list[str]) -> tuple[Path, dict[str, Any]]:
    """The training rows (``OUT/data/train.jsonl``) and their manifest; reused when present."""
    folder = args.out / "data"
    if not (folder / "manifest.json").exists():
        train_specs = tuple(loadable(args.train_sets, notes))
        if args.data == "human":
            data = build_preferences(PreferenceSettings(sets=train_specs, exclude=tuple(held), held_out=args.val,
                                                        seed=args.seed, balance_length=args.balance_length))
        else:
            data = build_contrastive(ContrastiveSettings(
                sets=train_specs, exclude=tuple(held), held_out=args.val, seed=args.seed,
                balance_length=args.balance_length, neighbor_band=args.neighbor_band, length_band=args.length_band,
                mix=args.mix if args.data == "mixed" else 0.0))
        write_preferences(data, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    print(data_line(manifest), flush=True)
    return folder / "train.jsonl", manifest


def data_line(manifest: dict[str, Any]) -> str:
    """The data's summary line (with the rows per construction for contrastive data)."""
    return contrastive_summary(manifest) if manifest.get("recipe") == "contrastive" else summary_line(manifest)


def train(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """The untrained model (``OUT/untrained``) and the trained one (``OUT/trained``, resumed when a
    checkpoint exists); returns what training did."""
    untrained = args.out / "untrained"
    if not (untrained / "config.json").exists():
        init_reward_model(args.base, untrained, seed=args.seed, max_length=args.max_length)
    trained = args.out / "trained"
    if args.skip_train:
        return json.loads((args.out / "train_result.json").read_text(encoding="utf-8"))
    settings = TrainSettings(lora=args.lora, lora_r=args.lora_r, lora_alpha=2 * args.lora_r,
                             learning_rate=args.learning_rate, lr_scheduler=args.scheduler, warmup_steps=args.warmup,
                             weight_decay=0.0, batch_size=args.batch_size, gradient_accumulation_steps=args.grad_accum,
                             max_steps=args.max_steps, max_length=args.max_length, save_steps=args.save_steps,
                             save_total_limit=None if args.keep_checkpoints else 2, logging_steps=args.logging_steps, seed=args.seed, device=args.device)
    resume = any((trained / "checkpoints").glob("checkpoint-*"))

    def on_log(logs: dict[str, Any]) -> None:
        if "loss" in logs:
            eta = logs.get("eta_seconds")
            print(f"step {logs['step']}/{logs.get('max_steps')}: loss {logs['loss']:.4f}, pair accuracy "
                  f"{logs.get('accuracy', float('nan')):.3f}, {logs.get('tokens_per_second', 0):.0f} tokens/s"
                  + (f", ETA {eta / 60:.1f} min" if eta is not None else ""), flush=True)

    t0 = time.perf_counter()
    res = train_reward_model(data, untrained, trained, settings, resume=resume, on_log=on_log, on_message=print)
    out = {"global_step": res.global_step, "tokens_seen": res.tokens_seen, "seconds": round(res.seconds, 1),
           "wall_seconds": round(time.perf_counter() - t0, 1), "tokens_per_second": res.tokens_per_second,
           "examples": res.n_examples, "resumed_from": res.resumed_from, "losses": [list(x) for x in res.losses]}
    prev = args.out / "train_result.json"
    if resume and prev.exists():  # training time over every run of this folder
        before = json.loads(prev.read_text(encoding="utf-8"))
        out["seconds_all_runs"] = round(before.get("seconds_all_runs", before.get("seconds", 0)) + out["seconds"], 1)
    else:
        out["seconds_all_runs"] = out["seconds"]
    prev.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


def judged(args: argparse.Namespace, name: str, model: Path, pairs: pd.DataFrame, cache: Cache) -> list[str | None]:
    """The verdicts (``A`` / ``B`` / ``tie``; None = none) of one reward model on ``pairs``."""
    be = RewardModelBackend(str(model), device=args.device, batch_size=args.eval_batch_size)
    run = run_judge(pairs, get_judge("reward_pairwise", column=f"rm:{name}"), be, cache=cache)
    return [v if v in ("A", "B", "tie") else None for v in run.table[f"rm:{name}"].tolist()]


def published_columns(pairs: pd.DataFrame, globs: list[str]) -> list[str]:
    """The published judge columns of ``pairs`` (``J`` with ``J.ab`` / ``J.ba``) to show."""
    cols = [c[:-3] for c in pairs.columns if str(c).endswith(".ab") and f"{c[:-3]}.ba" in pairs.columns
            and str(c).startswith("judge:")]
    if len(cols) <= 12:
        return cols
    return [c for c in cols if any(fnmatch.fnmatchcase(c, g) for g in globs)]


def evaluate_set(args: argparse.Namespace, spec: str, ds: Any, models: dict[str, Path], cache: Cache) -> HeldOut:
    """The held-out table of one set: the models' verdicts, its published judges, the baselines."""
    pairs = ds.pairs.reset_index(drop=True)
    if args.first:
        pairs = pairs.head(args.first).reset_index(drop=True)
    t0 = time.perf_counter()
    verdicts = {}
    for name, path in models.items():
        v = judged(args, name, path, pairs, cache)
        verdicts[name] = (v, v)  # a reward model scores each response alone: the same verdict in both orders
    print(f"{spec}: judged {len(pairs)} pairs with {len(models)} models in {time.perf_counter() - t0:.0f} s", flush=True)
    published = {c: (pairs[f"{c}.ab"].tolist(), pairs[f"{c}.ba"].tolist())
                 for c in published_columns(pairs, args.published)}
    gold = pairs[ds.pref_columns].to_numpy(dtype=float)
    gold = gold[:, 0] if gold.shape[1] == 1 else np.sign(np.nansum(gold, axis=1))
    gold = np.where(gold == 0, np.nan, gold)  # a human tie has no better response: left out
    la, lb = text_lengths(pairs["response_a"].tolist()), text_lengths(pairs["response_b"].tolist())
    LONGER_SHARE[spec] = longer_share(verdicts["trained"][0], la, lb)
    return held_out_table(verdicts, gold, target="trained", published=published, length_a=la, length_b=lb,
                          seed=args.seed)


#: per set, the share of the trained model's decided verdicts that prefer the longer response
LONGER_SHARE: dict[str, float] = {}


def longer_share(verdicts: list[str | None], length_a: Any, length_b: Any) -> float:
    """Of the A / B verdicts on pairs of unequal length, the share that picks the longer response."""
    la, lb = np.asarray(length_a, dtype=float), np.asarray(length_b, dtype=float)
    picks = [(v == "A") == (a > b) for v, a, b in zip(verdicts, la, lb, strict=True) if v in ("A", "B") and a != b]
    return float(np.mean(picks)) if picks else float("nan")


def summary_table(results: dict[str, HeldOut], compare: dict[str, Any] | None) -> str:
    """Per set: n, the trained model's accuracy, the share of its decided verdicts that prefer the longer
    response, longer-is-better, ChatGPT (Vanilla) where the set has it, and the compared run's trained model."""
    cols = ["set", "n", "trained", "prefers longer", "longer", CHATGPT]
    if compare is not None:
        cols.append("compared run's trained")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def f(v: Any) -> str:
        return "-" if v is None or not math.isfinite(float(v)) else f"{float(v):.3f}"

    for spec, r in results.items():
        t = r.table.set_index("judge")
        row = [spec, str(int(t.at["trained", "n"])), f(t.at["trained", "accuracy"]), f(LONGER_SHARE.get(spec)),
               f(t.at["longer", "accuracy"]) if "longer" in t.index else "-",
               f(t.at[CHATGPT, "accuracy"]) if CHATGPT in t.index else "-"]
        if compare is not None:
            other = {x["judge"]: x for x in compare.get(spec, {}).get("table", [])}
            row.append(f(other["trained"]["accuracy"]) if "trained" in other else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def markdown(result: HeldOut) -> str:
    """One held-out table as markdown."""
    cols = ["judge", "kind", "n", "accuracy", "95% CI", "accuracy_both", "trained - row", "p"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in result.table.to_dict("records"):
        def f(v: float) -> str:
            return "-" if not math.isfinite(v) else f"{v:.3f}"
        lines.append("| " + " | ".join([r["judge"], r["kind"], str(r["n"]), f(r["accuracy"]),
                                         f"[{f(r['ci_low'])}, {f(r['ci_high'])}]", f(r["accuracy_both"]),
                                         "-" if not math.isfinite(r["difference"]) else f"{r['difference']:+.3f}",
                                         "-" if not math.isfinite(r["p_value"]) else f"{r['p_value']:.4f}"]) + " |")
    return "\n".join(lines)


def goal_lines(results: dict[str, HeldOut]) -> list[str]:
    """Whether the goal (beats random and longer on >= 2 sets at p < 0.05) and the aim (beats the
    published ChatGPT judge on two sets) are met, set by set."""
    both = [s for s, r in results.items() if {"random", "longer"} <= set(r.beats)]
    chat = [s for s, r in results.items() if CHATGPT in r.beats]
    has_chat = [s for s, r in results.items() if CHATGPT in set(r.table["judge"])]
    lines = [f"- goal (beats random and longer_is_better, p < 0.05, on >= 2 held-out sets): "
             f"{'MET' if len(both) >= 2 else 'NOT MET'} ({len(both)} set(s): {', '.join(both) or 'none'})",
             f"- aim (beats {CHATGPT} resolved over both orders on 2 unseen sets): "
             f"{'MET' if len(chat) >= 2 else 'NOT MET'} ({len(chat)} of {len(has_chat)} sets with its verdicts: "
             f"{', '.join(chat) or 'none'})"]
    for s, r in results.items():
        t = r.table.set_index("judge")
        gaps = ", ".join(f"{k} {t.at['trained', 'accuracy'] - t.at[k, 'accuracy']:+.3f} (p {t.at[k, 'p_value']:.3f})"
                         for k in ("random", "longer", CHATGPT) if k in t.index)
        lines.append(f"  - {s}: trained {t.at['trained', 'accuracy']:.3f}; vs {gaps}")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The recipe's options (``argv``: None = the command line)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="work folder (data, models, cache)")
    ap.add_argument("--base", default="minilm", help="minilm, smollm2-135m-instruct or a model folder")
    ap.add_argument("--train-sets", nargs="+", default=list(TRAIN_SETS))
    ap.add_argument("--held-out", nargs="+", default=list(HELD_OUT))
    ap.add_argument("--published", nargs="+", default=list(PUBLISHED), help="published judge globs shown")
    ap.add_argument("--data", choices=("human", "contrastive", "mixed"), default="human",
                    help="training rows: human labels, contrastive construction, or both (--mix)")
    ap.add_argument("--mix", type=float, default=1.0, help="mixed: human rows per contrastive row")
    ap.add_argument("--neighbor-band", type=_pair, default=(0.45, 0.85), help="contrastive: LO,HI cosine band")
    ap.add_argument("--length-band", type=_pair, default=None, help="contrastive: LO,HI chosen/rejected length ratio")
    ap.add_argument("--compare", type=Path, help="another run's work folder: its trained accuracy per set beside")
    ap.add_argument("--balance-length", action="store_true",
                    help="training rows subsampled so the chosen response is the longer one in half of them")
    ap.add_argument("--val", type=float, default=0.1, help="share of training questions kept aside")
    ap.add_argument("--results", type=Path, help="markdown file for the tables")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--learning-rate", type=float, default=5e-5)
    ap.add_argument("--scheduler", default="linear")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--lora", action="store_true", help="LoRA adapters (default: full fine-tuning)")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--save-steps", type=int, default=25)
    ap.add_argument("--logging-steps", type=int, default=5)
    ap.add_argument("--keep-checkpoints", action="store_true",
                    help="keep every checkpoint (for the per-checkpoint curve; default: the last two)")
    ap.add_argument("--eval-batch-size", type=int, default=32)
    ap.add_argument("--first", type=int, default=None, help="only the first N pairs of each held-out set")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-train", action="store_true", help="judge with the model already in OUT/trained")
    return ap.parse_args(argv)


def _pair(text: str) -> tuple[float, float]:
    lo, hi = (float(x) for x in text.split(","))
    return lo, hi


def main() -> None:
    import sys

    run(parse_args(), "python " + " ".join(sys.argv))


def run(args: argparse.Namespace, command: str) -> str:
    """The whole recipe (see the module doc); returns the results as markdown (also written to
    ``--results`` and, as JSON, to ``OUT/held_out.json``). ``command``: shown at the top."""
    import torch

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    held_sets = loadable(args.held_out, notes)
    data, manifest = make_data(args, list(held_sets), notes)
    result = train(args, data)
    models = {"untrained": args.out / "untrained", "trained": args.out / "trained"}
    cache = Cache(args.out / "cache.sqlite")
    val = args.out / "data" / "held_out.jsonl"
    if val.exists():  # the in-distribution check: held-out questions of the training sets
        rows = pd.read_json(val, lines=True)
        held_sets = {"val (training sets' held-out questions)": _val_set(rows), **held_sets}
    results = {spec: evaluate_set(args, spec, ds, models, cache) for spec, ds in held_sets.items()}
    compare = None
    if args.compare is not None and (args.compare / "held_out.json").exists():
        compare = json.loads((args.compare / "held_out.json").read_text(encoding="utf-8"))
    parts = [f"# A reward-model judge made on a CPU ({args.base}, {args.data} data, {args.threads} thread(s))", "",
             "```", command, "```", "",
             f"data: {data_line(manifest)}",
             f"training: {result.get('global_step')} steps, {result.get('examples')} preference rows, "
             f"{result.get('tokens_seen')} tokens this run, {result.get('seconds_all_runs')} s of training over all "
             f"runs ({result.get('tokens_per_second', 0):.0f} tokens/s in the last run)", "",
             "## Goal", "", *goal_lines({k: v for k, v in results.items() if not k.startswith("val")}), "",
             "## Per set", "", summary_table(results, compare), ""]
    for spec, r in results.items():
        parts += [f"## {spec}", "", markdown(r), ""]
    parts += [f"- {n}" for n in [*next(iter(results.values())).notes, *notes]] if results else notes
    text = "\n".join(parts) + "\n"
    print(text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(text, encoding="utf-8")
    (args.out / "held_out.json").write_text(json.dumps({k: v.as_dict() for k, v in results.items()}, indent=2),
                                            encoding="utf-8")
    return text


class _Val:
    """The in-distribution check as a dataset: the kept-aside preference rows, chosen as A."""

    def __init__(self, pairs: pd.DataFrame) -> None:
        self.pairs = pairs
        self.pref_columns = ["pref_1"]


def _val_set(rows: pd.DataFrame) -> _Val:
    # chosen shown as A on even rows, as B on odd rows (so always_a / always_b score 1/2)
    swap = np.arange(len(rows)) % 2 == 1
    a = np.where(swap, rows["rejected"], rows["chosen"])
    b = np.where(swap, rows["chosen"], rows["rejected"])
    return _Val(pd.DataFrame({"id": [str(i) for i in range(len(rows))], "instruction": rows["prompt"], "input": "",
                              "response_a": a, "response_b": b, "pref_1": np.where(swap, -1.0, 1.0)}))


if __name__ == "__main__":
    main()
