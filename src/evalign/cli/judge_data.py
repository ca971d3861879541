"""``evalign judge-data``: training files for ``train-judge`` from labels that exist already."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from evalign.cli.common import console, emit_json, split_multi
from evalign.errors import ModelLoadError, UsageError
from evalign.train.feedback_data import PROMETHEUS_SETS, RecipeSettings, build_recipe

if TYPE_CHECKING:
    from evalign.train.contrastive_data import ContrastiveSettings

#: how the bundled embedding model is named to ``score`` / ``meta`` (the hint of a model that does not
#: load, :data:`evalign.backends.models.MINILM_HINT`); judge-data names its own option instead
SEMSCORE_MINILM = "--option semscore.model=minilm"
#: the datasets ``judge-data preference`` reads when no --set is given
PREFERENCE_SETS = ("pandalm", "tulu1")
#: the files every recipe writes into its ``-o`` folder
RECIPE_FILES = ("train.jsonl", "held_out.jsonl", "manifest.json")


def judge_data_cmd(
    recipe: str = typer.Argument(..., help="absolute: Prometheus GPT-4 feedback (Vicuna, MT-Bench); pairwise: PandaLM's human majority preferences with LLMBar's Vanilla prompt; preference: prompt / chosen / rejected rows for train-judge --kind reward from human pair labels (ties left out); contrastive: the same rows built so that length and style do not give the answer away (a neighbouring instruction's good response, a truncated or off-topic one, the response with the instruction's constraint broken)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for train.jsonl, held_out.jsonl and manifest.json."),
    held_out: float = typer.Option(None, "--held-out", help="Share of questions held out (split by question, none on both sides). Default: 0.2 absolute, 0 pairwise."),
    seed: int = typer.Option(0, "--seed", help="Seed of the question split."),
    sets: list[str] = typer.Option(None, "--set", help=f"Absolute: Prometheus sets ({', '.join(PROMETHEUS_SETS)}; default both). Preference: pair datasets with human labels, NAME[:VARIANT] (default {', '.join(PREFERENCE_SETS)}; e.g. llmbar:llmeval2, autoj)."),
    pairs: list[Path] = typer.Option(None, "--pairs", help="Preference: a pair table file (instruction, response_a, response_b, pref_* coded +1 A / -1 B / 0 tie); repeatable."),
    exclude: list[str] = typer.Option(None, "--exclude", help="Preference: a held-out dataset (NAME[:VARIANT]); rows whose instruction duplicates one of its instructions are removed and counted (repeatable). Contrastive: default every set of the held-out table; 'none' for none."),
    near_duplicate: float = typer.Option(90.0, "--near-duplicate", help="Preference: rapidfuzz ratio (0-100) of the first 300 normalised characters from which an instruction counts as a duplicate (100: exact only)."),
    balance_length: bool = typer.Option(False, "--balance-length", help="Preference: subsample each source so that the chosen response is the longer one in exactly half the rows (a reward model then cannot learn 'longer wins' from the labels)."),
    neighbor_band: str = typer.Option("0.45,0.85", "--neighbor-band", help="Contrastive: LO,HI cosine band (embedding model) of a neighbouring instruction: similar, not a paraphrase."),
    length_band: str = typer.Option(None, "--length-band", help="Contrastive: LO,HI; keep rows whose length ratio (characters of chosen / rejected) lies in the band."),
    mix: float = typer.Option(0.0, "--mix", help="Contrastive: add human preference rows (preference's) at R per contrastive row."),
    constructions: str = typer.Option("neighbor,truncated,off_topic,constraint", "--constructions", help="Contrastive: the kinds of rejected response to build (comma-separated)."),
    embedding_model: str = typer.Option("minilm", "--embedding-model", help="Contrastive: sentence-transformers model for neighbours and near-duplicates (minilm: the bundled all-MiniLM-L6-v2)."),
    embedding_duplicate: float = typer.Option(0.9, "--embedding-duplicate", help="Contrastive: cosine from which an instruction duplicates a held-out one."),
    per_response: bool = typer.Option(False, "--per-response", help="Absolute: one row per response (the median GPT-4 feedback), not one per feedback."),
    single_order: bool = typer.Option(False, "--single-order", help="Pairwise: only the order of the pair as stored."),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Write train-judge training data from existing labels, split into train / held-out by question."""
    from evalign.io import OutputFolder, refuse_output_onto_inputs
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(held_out=held_out, seed=seed, mix=mix, near_duplicate=near_duplicate,
                  embedding_duplicate=embedding_duplicate)
    refuse_output_onto_inputs({"-o": OutputFolder(out, RECIPE_FILES)}, {"--pairs": pairs})
    for flag, given, own in (("--per-response", per_response, "absolute"), ("--single-order", single_order, "pairwise")):
        if given and recipe != own:  # an option of another recipe is refused, not silently ignored
            raise UsageError(f"{flag} applies to the {own} recipe, not to {recipe}")
    if recipe == "preference":
        _preference(out, held_out, seed, sets, pairs, exclude, near_duplicate, balance_length, as_json)
        return
    if recipe == "contrastive":
        from evalign.train.contrastive_data import ContrastiveSettings

        ex = split_multi(exclude)
        contrastive = ContrastiveSettings(
            sets=tuple(split_multi(sets)) or (() if pairs else PREFERENCE_SETS), files=tuple(str(p) for p in pairs or []),
            exclude=None if not ex else tuple(x for x in ex if x.lower() != "none"), near_duplicate=near_duplicate,
            embedding_duplicate=embedding_duplicate, neighbor_band=_band(neighbor_band, "--neighbor-band"),
            length_band=None if length_band is None else _band(length_band, "--length-band"),
            constructions=tuple(split_multi([constructions])), balance_length=balance_length, mix=mix,
            held_out=held_out or 0.0, seed=seed, embedding_model=embedding_model)
        _contrastive(contrastive, out, as_json)
        return
    if pairs or exclude or balance_length:
        raise UsageError("--pairs, --exclude and --balance-length apply to the preference and contrastive recipes")
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


def _preference(out: Path, held_out: float | None, seed: int, sets: list[str] | None, pairs: list[Path] | None,
                exclude: list[str] | None, near_duplicate: float, balance_length: bool, as_json: bool) -> None:
    """``judge-data preference``: the rows, the files, one summary line (or the manifest as JSON)."""
    from evalign.train.preference_data import (
        PreferenceSettings,
        build_preferences,
        summary_line,
        write_preferences,
    )

    chosen = tuple(split_multi(sets))
    settings = PreferenceSettings(sets=chosen or (() if pairs else PREFERENCE_SETS),
                                  files=tuple(str(p) for p in pairs or []), exclude=tuple(split_multi(exclude)),
                                  near_duplicate=near_duplicate, held_out=held_out or 0.0, seed=seed,
                                  balance_length=balance_length)
    data = build_preferences(settings)
    paths = write_preferences(data, out)
    manifest = data.manifest()
    if as_json:
        emit_json({**manifest, "files": {k: str(v) for k, v in paths.items()}})
        return
    console.print(summary_line(manifest), highlight=False, markup=False, soft_wrap=True)
    for name, path in paths.items():
        console.print(f"  {name}: {path}", highlight=False, markup=False, soft_wrap=True)


def _band(text: str, option: str) -> tuple[float, float]:
    """``LO,HI`` as two numbers (a UsageError naming ``option`` otherwise)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise UsageError(f"{option} must be LO,HI (two numbers), got '{text}'") from None
    if lo > hi:
        raise UsageError(f"{option} must be LO,HI with LO <= HI, got '{text}'")
    return lo, hi


def _contrastive(settings: ContrastiveSettings, out: Path, as_json: bool) -> None:
    """``judge-data contrastive``: the rows, the files, one summary line (or the manifest as JSON)."""
    from evalign.train.contrastive_data import build_contrastive, contrastive_summary
    from evalign.train.preference_data import write_preferences

    try:
        data = build_contrastive(settings)
    except ModelLoadError as e:  # the hint names this command's option, not semscore's
        raise ModelLoadError(str(e).replace(SEMSCORE_MINILM, "--embedding-model minilm")) from None
    paths = write_preferences(data, out)
    manifest = data.manifest()
    if as_json:
        emit_json({**manifest, "files": {k: str(v) for k, v in paths.items()}})
        return
    console.print(contrastive_summary(manifest), highlight=False, markup=False, soft_wrap=True)
    for note in manifest["notes"]:
        console.print(f"  note: {note}", highlight=False, markup=False, soft_wrap=True)
    for name, path in paths.items():
        console.print(f"  {name}: {path}", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``judge-data`` to ``app``."""
    app.command("judge-data")(judge_data_cmd)
