"""Reading the Alt-Test's annotation files (Calderon, Reichart and Dror 2025, ACL; GitHub
``nitaytech/AltTest``): per set, ``human_annotations.json`` = ``{annotator: {item: label}}`` and
``llm_annotations.json`` = ``{llm: {item: label}}`` (six LLM judges: gemini_flash, gemini_pro,
gpt-4o, llama-31, gpt-4o-mini, mistral-v03).

The repository has no licence file: the files are read from ``alttest/<set>/`` in the data folder
(see :mod:`evalign.io.data_dir`), never bundled. Three sets become catalogue datasets
(``alttest-mtbench``, ``summeval``, ``10k-prompts``); :func:`read_alttest` reads any of the nine in
the Alt-Test's own format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.errors import InputError
from evalign.io.data_dir import find_set_dir

FOLDER = "alttest"
WHERE = "https://github.com/nitaytech/AltTest (data/<set>/human_annotations.json, llm_annotations.json)"
#: the nine sets of the Alt-Test paper (folders under ``alttest/``)
SETS = ("mtbench", "summeval", "10k_prompts", "lgbteen", "wax", "framing", "cebab_aspects", "cebab_stars", "lesion")
#: the LLM judges of the Alt-Test files, in upstream's order (lesion: four of them, no Llama or Mistral)
LLMS = ("gemini_flash", "gemini_pro", "gpt-4o", "llama-31", "gpt-4o-mini", "mistral-v03")
CITATION = (
    "Calderon, Reichart and Dror 2025, The Alternative Annotator Test for LLM-as-a-Judge: How to Statistically "
    "Justify Replacing Human Annotators with LLMs, ACL 2025, arXiv 2501.10970 (annotations and LLM labels: "
    "github.com/nitaytech/AltTest, no licence file: read from the data folder)"
)


@dataclass(frozen=True)
class AltTestSet:
    """One Alt-Test set: ``humans`` = ``{annotator: {item: label}}``, ``llms`` = ``{llm: {item:
    label}}`` (labels as in the files: text or numbers), ``folder`` = where they were read."""

    name: str
    humans: dict[str, dict[str, Any]]
    llms: dict[str, dict[str, Any]]
    folder: Path


def _read_json(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=e.lineno) from e
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InputError("expected {name: {item: label}}", file=str(path))
    return data


def set_dir(name: str, data_dir: str | Path | None = None, extra: tuple[str, ...] = ()) -> Path:
    """The folder of Alt-Test set ``name`` (with its two annotation files and ``extra`` files)."""
    if name not in SETS:
        raise InputError(f"unknown Alt-Test set {name!r} (known: {', '.join(SETS)})", field="set")
    need = [f"{name}/human_annotations.json", f"{name}/llm_annotations.json", *(f"{name}/{e}" for e in extra)]
    return find_set_dir(FOLDER, need, data_dir, where=WHERE) / name


def read_alttest(name: str, data_dir: str | Path | None = None) -> AltTestSet:
    """The human and LLM annotations of Alt-Test set ``name`` (one of :data:`SETS`)."""
    folder = set_dir(name, data_dir)
    return AltTestSet(name, _read_json(folder / "human_annotations.json"), _read_json(folder / "llm_annotations.json"),
                      folder)
