"""Make a judge on a CPU: the pairwise recipe of issue 19, end to end, with its before/after table.

1. data: ``evalign judge-data pairwise`` (PandaLM's 3-annotator majority; ties dropped; both
   presentation orders; LLMBar's Vanilla prompt and answer format), then only the pairs whose chat
   text (system + prompt + answer) fits ``--max-length`` tokens in both orders (short sequences);
2. train: ``evalign train-judge --base-model smollm2-135m-instruct`` (LoRA; with ``--top-layers K`` the
   adapters sit in the top K decoder layers only, so the backward pass stops there: the cheap option on
   a CPU), ``--max-steps`` steps, checkpoints every ``--save-steps``; run again to resume (``--resume``);
3. judge: LLMBar (``--subsets``; ``--first N``: the first N pairs of each subset) in both orders with the
   base and the trained model through the ``hf`` backend, LLMBar's Vanilla prompt, greedy, the verdict
   read by :func:`evalign.judges.llmbar_parsing.parse_llmbar` (``direct``); generation stops at the
   first newline (a direct answer is its first line) or ``--max-tokens`` (an output cut off there has no
   verdict). Every verdict is appended to ``OUT/verdicts.jsonl`` as it comes (keyed by model, pair, order
   and ``--max-tokens``), so a rerun judges only what is missing;
4. report: :func:`evalign.train.before_after.before_after_table` per subset group (accuracy per order,
   mean, both, positional agreement, prefers-first; baselines; the paired test base -> trained),
   written as markdown to ``--results``.

With ``--recipe absolute`` (the Prometheus paper's): the data is ``evalign judge-data absolute`` (GPT-4
feedback on Vicuna and MT-Bench in the Prometheus format, 20% of the questions held out, seed 0), the
model learns to write ``Feedback: ... [RESULT] k``, and the check is (a) absolute grading of the first
``--held-out-items`` held-out Vicuna responses (parse rate; Pearson / Spearman / Kendall with the mean
GPT-4 grade, labelled as model grades) and (b) ranking by absolute grading on ``--hhh-pairs`` HHH pairs
(the same number from each subset; accuracy against the human labels beside the baselines), base and
trained side by side, each with a paired permutation test of base -> trained (on the parsed share, and
on the correct share). Every grade is cached in ``OUT/verify-cache.sqlite``: a rerun grades only what
is missing.

Not a test: it takes tens of minutes on one CPU thread. Example (what benchmarks/results/make_judge_cpu.md
records)::

    python benchmarks/make_judge.py --out /tmp/make_judge --threads 1 --max-steps 40 --top-layers 8 \\
        --subsets Natural --results benchmarks/results/make_judge_cpu.md

On a GPU: ``--device cuda --batch-size 8 --grad-accum 4 --max-length 2048 --top-layers 0 --max-steps 500``
(all layers, all pairs, bf16 is chosen by train-judge on a GPU that supports it) and every subset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends import HFLocalBackend
from evalign.backends.model_source import resolve_base_model
from evalign.backends.types import GenerationRequest
from evalign.cache import Cache
from evalign.datasets.llmbar import load_llmbar
from evalign.judges.llmbar_parsing import parse_llmbar
from evalign.meta.order_diagnostics import text_lengths
from evalign.train.before_after import BeforeAfter, PairedChange, before_after_table, score_change
from evalign.train.feedback_data import RecipeSettings, build_recipe, vanilla_messages, write_rows
from evalign.train.verify import (
    VerifyOptions,
    VerifyReport,
    dataset_table,
    grade_dataset,
    held_out_rows,
    verify_judges,
)

BASE = "smollm2-135m-instruct"
MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def chat_tokens(tok: Any, row: dict[str, Any]) -> int:
    """Tokens of one training row as the chat template renders it (system, prompt, answer)."""
    msgs = [{"role": "system", "content": row["system"]}, {"role": "user", "content": row["instruction"]},
            {"role": "assistant", "content": row["output"]}]
    return len(tok(tok.apply_chat_template(msgs, tokenize=False))["input_ids"])


def make_data(out: Path, max_length: int) -> Path:
    """PandaLM pairwise rows (both orders), only pairs that fit ``max_length`` in both orders."""
    from transformers import AutoTokenizer

    path = out / "data" / f"train_max{max_length}.jsonl"
    if path.exists():
        return path
    data, _ = build_recipe(RecipeSettings(recipe="pairwise", held_out=0.0), out / "data")
    tok = AutoTokenizer.from_pretrained(str(resolve_base_model(BASE).path))
    by_pair: dict[str, list[dict[str, Any]]] = {}
    for r in data.train:
        by_pair.setdefault(str(r["pair_id"]), []).append(dict(r))
    keep = [r for rows in by_pair.values() if all(chat_tokens(tok, x) <= max_length for x in rows) for r in rows]
    write_rows(keep, path)
    print(f"data: {len(keep)} of {len(data.train)} rows fit {max_length} tokens -> {path}", flush=True)
    return path


def train(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """``evalign train-judge`` in a subprocess (``OMP_NUM_THREADS`` = ``--threads``), resumed when a
    checkpoint exists; returns its ``--json`` result."""
    model_dir = args.out / "trained"
    cmd = [sys.executable, "-m", "evalign", "train-judge", str(data), "--base-model", BASE, "-o", str(model_dir),
           "--max-steps", str(args.max_steps), "--batch-size", str(args.batch_size), "--grad-accum",
           str(args.grad_accum), "--max-length", str(args.max_length), "--learning-rate", str(args.learning_rate),
           "--save-steps", str(args.save_steps), "--save-total-limit", "3", "--logging-steps", "1", "--json"]
    if args.top_layers:
        first = args.n_layers - args.top_layers
        cmd += ["--lora-targets", ",".join(f"layers.{i}.{m}" for i in range(first, args.n_layers) for m in MODULES)]
    if args.device:
        cmd += ["--device", args.device]
    if any((model_dir / "checkpoints").glob("checkpoint-*")):
        cmd.append("--resume")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    t0 = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:  # progress lines pass through; the --json result is collected
            if lines or line.startswith("{"):
                lines.append(line)
            else:
                print(line, end="", flush=True)
    if proc.returncode:
        raise SystemExit(f"train-judge failed (exit {proc.returncode})")
    result = json.loads("".join(lines))
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    (args.out / "train_result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def llmbar_pairs(subsets: list[str], first: int | None) -> pd.DataFrame:
    """The LLMBar pairs of ``subsets`` (the ``first`` N of each subset, in the bundled order, when given:
    a larger N later reuses every verdict already judged)."""
    pairs = load_llmbar(subsets).pairs
    if first:
        pairs = pairs.groupby("task", group_keys=False, sort=False).head(first)
    return pairs.reset_index(drop=True)


def judge(args: argparse.Namespace, name: str, model: str, pairs: pd.DataFrame) -> dict[tuple[str, str], str | None]:
    """Verdicts (``A`` / ``B`` in the original orientation, None = no verdict) of one model on every
    pair in both orders, read from and appended to ``OUT/verdicts.jsonl``."""
    log = args.out / "verdicts.jsonl"
    done: dict[tuple[str, str], str | None] = {}
    if log.exists():
        for line in log.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r["judge"] == name and r.get("max_tokens", 16) == args.max_tokens:
                done[(r["id"], r["order"])] = r["verdict"]
    todo = [(str(p.id), order, p) for p in pairs.itertuples() for order in ("ab", "ba") if (str(p.id), order) not in done]
    if not todo:
        return done
    backend = HFLocalBackend(model, device=args.device, batch_size=args.eval_batch_size)
    t0, n_prompt = time.perf_counter(), 0
    with log.open("a", encoding="utf-8") as fh:
        for start in range(0, len(todo), args.eval_batch_size):
            chunk = todo[start:start + args.eval_batch_size]
            reqs = []
            for _, order, p in chunk:
                inst = str(p.instruction) if not str(p.input or "").strip() else f"{p.instruction}\n\n{p.input}"
                first, second = (p.response_a, p.response_b) if order == "ab" else (p.response_b, p.response_a)
                reqs.append(GenerationRequest(messages=vanilla_messages(inst, str(first), str(second)),
                                              max_tokens=args.max_tokens, temperature=0.0, stop=["\n"]))
            gens = asyncio.run(backend.generate_many(reqs, raise_errors=True))
            for (pid, order, _), g in zip(chunk, gens, strict=True):
                res = parse_llmbar(g.text, g.finish_reason, style="direct")
                v = res.verdict if res.ok else None
                if v is not None and order == "ba":
                    v = {"A": "B", "B": "A"}[v]
                done[(pid, order)] = v
                n_prompt += int(g.usage.prompt_tokens or 0)
                fh.write(json.dumps({"judge": name, "id": pid, "order": order, "verdict": v, "text": g.text,
                                     "finish_reason": g.finish_reason, "max_tokens": args.max_tokens}) + "\n")
            fh.flush()
            el = time.perf_counter() - t0
            k = start + len(chunk)
            print(f"judge {name}: {k}/{len(todo)} calls, {el:.0f} s, {n_prompt / el:.0f} prompt tokens/s, "
                  f"ETA {el / k * (len(todo) - k):.0f} s", flush=True)
    return done


def report(pairs: pd.DataFrame, verdicts: dict[str, dict[tuple[str, str], str | None]], seed: int,
           published: list[str] | None = None) -> BeforeAfter:
    """The before/after table of the judges' verdicts on ``pairs`` (base first, then trained), beside the
    ``published`` judge columns of the dataset (both orders each: ``J.ab`` / ``J.ba``)."""
    ids = [str(i) for i in pairs["id"]]
    per = {name: ([v.get((i, "ab")) for i in ids], [v.get((i, "ba")) for i in ids]) for name, v in verdicts.items()}
    shipped = {c: (pairs[f"{c}.ab"].tolist(), pairs[f"{c}.ba"].tolist()) for c in published or []
               if f"{c}.ab" in pairs.columns}
    gold = pairs["pref_1"].to_numpy(dtype=float)
    return before_after_table(per, gold, published=shipped, length_a=text_lengths(pairs["response_a"].tolist()),
                              length_b=text_lengths(pairs["response_b"].tolist()), seed=seed)


def markdown(result: BeforeAfter) -> str:
    """The table as markdown (figures to 3 decimals, n = 0 rows unranked)."""
    t = result.table.copy()
    cols = ["judge", "kind", "n", "accuracy_ab", "accuracy_ba", "accuracy_mean", "accuracy_both",
            "position_agreement", "prefers_first", "rank", "note"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in t[cols].to_dict("records"):
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, float):
                cells.append("-" if not np.isfinite(v) else f"{v:.3f}")
            else:
                cells.append("-" if v is None or v is pd.NA else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    if result.change is not None:
        lines += ["", result.change.sentence()]
    return "\n".join(lines)


def make_absolute_data(out: Path) -> tuple[Path, Path]:
    """``judge-data absolute`` (20% of the questions held out, seed 0): the training file and the manifest."""
    folder = out / "data"
    if not (folder / "manifest.json").exists():
        data, _ = build_recipe(RecipeSettings(recipe="absolute", held_out=0.2, seed=0), folder)
        print(f"data: {len(data.train)} training rows, {len(data.held_out_questions)} held-out questions", flush=True)
    return folder / "train.jsonl", folder / "manifest.json"


def grade_check(name: str, table: pd.DataFrame, kind: str, models: dict[str, str], options: VerifyOptions,
                cache: Cache) -> tuple[VerifyReport, pd.DataFrame, dict[str, str]]:
    """Grade ``table`` with every model (cached) and its trust table against the set's labels."""
    _, _, labels, note, source = dataset_table(name)
    t0 = time.perf_counter()
    graded, cols, reasons = grade_dataset(table, kind, models, options, cache=cache)
    print(f"{name}: graded {len(graded)} rows with {len(models)} models in {time.perf_counter() - t0:.0f} s",
          flush=True)
    report = verify_judges(graded, cols, kind=kind, labels=labels, label_note=note, label_source=source, dataset=name,
                           reasons=reasons, n_resamples=1000, seed=options.seed)
    return report, graded, cols


def report_markdown(report: VerifyReport, change: PairedChange) -> str:
    """A verify report as markdown (judges and baselines, n, the statistic with its interval, the
    other statistics, notes) and the paired test."""
    cols = ["judge", "kind", "n", "statistic", "value", "ci_low", "ci_high", "extra", "note"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in report.table[cols].to_dict("records"):
        cells = [("-" if not np.isfinite(v) else f"{v:.3f}") if isinstance(v, float) else str(v or "-")
                 for v in (r[c] for c in cols)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", change.sentence(), *(f"- {n}" for n in report.notes)])


def absolute_recipe(args: argparse.Namespace) -> list[str]:
    """The absolute recipe: data, training, then the held-out Vicuna check and HHH by ranking."""
    data, manifest = make_absolute_data(args.out)
    models = {"base": BASE}
    parts: list[str] = []
    if not args.skip_train:
        res = train(args, data)
        parts.append(f"training: {res.get('global_step')} steps, {res.get('tokens_seen')} tokens, "
                     f"{res.get('seconds')} s, {res.get('tokens_per_second', 0):.1f} tokens/s")
    models["trained"] = str(args.out / "trained")
    cache = Cache(args.out / "verify-cache.sqlite")
    opts = VerifyOptions(max_tokens=args.max_tokens, device=args.device, batch_size=args.eval_batch_size,
                         seed=args.seed, temperature=0.0)
    vicuna = held_out_rows(dataset_table("prometheus_vicuna")[0], "prometheus_vicuna", manifest)
    vicuna = vicuna.head(args.held_out_items).reset_index(drop=True)
    rep, graded, cols = grade_check("prometheus_vicuna", vicuna, "absolute", models, opts, cache)
    parsed = {m: np.isfinite(graded[c].to_numpy(dtype=float)).astype(float) for m, c in cols.items()}
    change = score_change(parsed["base"], parsed["trained"], before="base", after="trained", statistic="parse rate",
                          seed=args.seed)
    parts += ["", f"## Held-out Vicuna questions ({len(vicuna)} responses of "
              f"{vicuna['id'].nunique()} questions held out of training; labels: GPT-4 grades)", "",
              f"greedy, at most {args.max_tokens} tokens; parse rate: base "
              f"{parsed['base'].mean():.3f}, trained {parsed['trained'].mean():.3f}", "", report_markdown(rep, change)]
    hhh = dataset_table("hhh")[0]
    hhh = hhh.groupby("task", group_keys=False, sort=False).head(max(1, args.hhh_pairs // 4)).reset_index(drop=True)
    ropts = VerifyOptions(max_tokens=args.max_tokens, device=args.device, batch_size=args.eval_batch_size,
                          seed=args.seed, ranking=True, max_rounds=args.max_rounds)
    rep, graded, cols = grade_check("hhh", hhh, "pairwise", models, ropts, cache)
    gold = hhh["pref_1"].to_numpy(dtype=float)
    right = {m: (graded[c].to_numpy(dtype=float) == gold).astype(float) for m, c in cols.items()}
    some = tuple(bool(np.isfinite(graded[c].to_numpy(dtype=float)).any()) for c in cols.values())
    change = score_change(right["base"], right["trained"], before="base", after="trained", statistic="accuracy",
                          judged=(some[0], some[1]), seed=args.seed)
    parts += ["", f"## HHH by ranking by absolute grading ({len(hhh)} pairs, {args.hhh_pairs // 4} per subset; "
              "human labels)", "", f"temperature 1.0, at most {args.max_rounds} rounds per pair, at most "
              f"{args.max_tokens} tokens per grade", "", report_markdown(rep, change)]
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="work folder (data, model, verdicts)")
    ap.add_argument("--recipe", choices=["pairwise", "absolute"], default="pairwise")
    ap.add_argument("--held-out-items", type=int, default=16, help="absolute: held-out Vicuna responses graded")
    ap.add_argument("--hhh-pairs", type=int, default=12, help="absolute: HHH pairs (the same number per subset)")
    ap.add_argument("--max-rounds", type=int, default=2, help="absolute: ranking rounds per HHH pair")
    ap.add_argument("--results", type=Path, help="markdown file for the before/after tables")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--max-steps", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--grad-accum", type=int, default=2)
    ap.add_argument("--learning-rate", type=float, default=3e-4)
    ap.add_argument("--save-steps", type=int, default=5)
    ap.add_argument("--top-layers", type=int, default=8, help="LoRA in the top K layers only (0: all layers)")
    ap.add_argument("--n-layers", type=int, default=30, help="decoder layers of the base (SmolLM2-135M: 30)")
    ap.add_argument("--subsets", nargs="+", default=["Natural"])
    ap.add_argument("--first", type=int, default=None, help="only the first N pairs of each subset")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--eval-batch-size", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--published", default="vanilla", help="pairwise: the published LLMBar judges of this strategy "
                    "shown beside base and trained (one per evaluator)")
    ap.add_argument("--skip-train", action="store_true", help="judge with the model already in OUT/trained")
    ap.add_argument("--only", choices=["base", "trained"], help="judge with this model only (e.g. the base while "
                    "the model trains); a later run without it reads both from the cache and reports")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.recipe == "absolute":
        text = "\n".join([f"# Make a judge on a CPU: the absolute recipe ({args.threads} thread(s))", "",
                          *absolute_recipe(args)]) + "\n"
        print(text)
        if args.results:
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(text, encoding="utf-8")
        return
    pairs = llmbar_pairs(args.subsets, args.first)
    models = {"base": BASE}
    train_result: dict[str, Any] = {}
    if args.only != "base":
        if not args.skip_train:
            train_result = train(args, make_data(args.out, args.max_length))
        elif (args.out / "train_result.json").exists():
            train_result = json.loads((args.out / "train_result.json").read_text(encoding="utf-8"))
        models["trained"] = str(args.out / "trained")
    t0 = time.perf_counter()
    verdicts = {name: judge(args, name, path, pairs) for name, path in models.items() if args.only in (None, name)}
    judge_seconds = time.perf_counter() - t0
    parts = [f"# Make a judge on a CPU ({args.threads} thread(s))", "",
             f"pairs: {len(pairs)} LLMBar ({', '.join(args.subsets)}"
             + (f", the first {args.first} of each" if args.first else "") + "), both orders"]
    if train_result:
        parts.append(f"training: {train_result.get('global_step')} steps, {train_result.get('tokens_seen')} tokens, "
                     f"{train_result.get('seconds')} s, {train_result.get('tokens_per_second', 0):.1f} tokens/s")
    parts.append(f"judging (this run): {judge_seconds:.0f} s; greedy, at most {args.max_tokens} tokens, "
                 "stopped at the first newline")
    groups = {"all": pairs} if len(args.subsets) == 1 else {
        **{s: pairs[pairs["task"] == s] for s in args.subsets}, "all": pairs}
    published = [c for c in pairs.columns if c.startswith("judge:") and c.endswith(f"/{args.published}")]
    for label, sub in groups.items():
        parts += ["", f"## {label} ({len(sub)} pairs)", "", markdown(report(sub.reset_index(drop=True), verdicts,
                                                                          args.seed, published))]
    text = "\n".join(parts) + "\n"
    print(text)
    if args.results:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
