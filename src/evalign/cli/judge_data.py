"""``evalign judge-data``: training files for ``train-judge`` from labels that exist already."""

from __future__ import annotations

from pathlib import Path

import typer

from evalign.cli.common import console, emit_json, split_multi
from evalign.train.feedback_data import PROMETHEUS_SETS, RecipeSettings, build_recipe


def judge_data_cmd(
    recipe: str = typer.Argument(..., help="absolute: Prometheus GPT-4 feedback (Vicuna, MT-Bench); pairwise: PandaLM's human majority preferences with LLMBar's Vanilla prompt."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for train.jsonl, held_out.jsonl and manifest.json."),
    held_out: float = typer.Option(None, "--held-out", help="Share of questions held out (split by question, none on both sides). Default: 0.2 absolute, 0 pairwise."),
    seed: int = typer.Option(0, "--seed", help="Seed of the question split."),
    sets: list[str] = typer.Option(None, "--set", help=f"Absolute: Prometheus sets ({', '.join(PROMETHEUS_SETS)}; default both)."),
    per_response: bool = typer.Option(False, "--per-response", help="Absolute: one row per response (the median GPT-4 feedback), not one per feedback."),
    single_order: bool = typer.Option(False, "--single-order", help="Pairwise: only the order of the pair as stored."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Write train-judge training data from existing labels, split into train / held-out by question."""
    default_held = 0.2 if recipe == "absolute" else 0.0
    settings = RecipeSettings(recipe=recipe, held_out=default_held if held_out is None else held_out, seed=seed,
                              sets=tuple(split_multi(sets)) or tuple(PROMETHEUS_SETS),
                              per_feedback=not per_response, both_orders=not single_order)
    data, paths = build_recipe(settings, out)
    manifest = data.manifest()
    if as_json:
        emit_json({**manifest, "files": {k: str(v) for k, v in paths.items()}})
        return
    rows, questions = manifest["rows"], manifest["questions"]
    console.print(f"{recipe}: {rows['train']} training rows ({len(questions['train'])} questions), "
                  f"{rows['held_out']} held-out rows ({len(questions['held_out'])} questions); "
                  f"dropped {manifest['dropped']}", highlight=False, markup=False, soft_wrap=True)
    for name, path in paths.items():
        console.print(f"  {name}: {path}", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``judge-data`` to ``app``."""
    app.command("judge-data")(judge_data_cmd)
