"""Golden outputs of the command line: what ``evalign datasets``, ``metrics``, ``score``, ``meta``,
``report`` and ``run`` print and write, compared byte for byte with files under ``tests/golden/``
recorded from the code before the issue-21 restructuring ("every number, table and output byte stays
the same"). The demo's goldens are checked in ``tests/test_demo.py`` (same files, same normaliser).

Each command runs as a real process (``python -m evalign ...``) with ``COLUMNS=120``, offline, in a fresh
short temporary folder (its working directory, so written paths are relative) with its own cache, on
bundled data or ``$EVALIGN_DATA_DIR``, with offline metrics only and 100 resamples / permutations.

What the normaliser masks (wall-clock timings, the temporary folder, the data folder, site-packages) is
documented in ``tests/golden/compare.py``; everything else is compared byte for byte.

Regenerate the golden files (only when an output is meant to change)::

    EVALIGN_UPDATE_GOLDEN=1 python -m pytest -p no:cacheprovider tests/test_golden.py tests/test_demo.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from golden.compare import check_files, check_text, normalise_stderr, normalise_stdout

COLUMNS = "120"
RESAMPLING = ["--bootstrap", "100", "--permutations", "100"]


@pytest.fixture(scope="module", autouse=True)
def data_dir_of_fixed_length() -> Iterator[None]:
    """``$EVALIGN_DATA_DIR`` as a link of 17 characters (``/tmp/evXXXXXXXX/d``, as long as the data folder
    the goldens were recorded with, ``/work/shared/data``): listings wrap their lines before ``<DATA>`` is
    masked, so where the data folder lies (CI's clone sits elsewhere) must not move a line break."""
    real = Path(os.environ.get("EVALIGN_DATA_DIR", "")).absolute()
    folder = Path(tempfile.mkdtemp(prefix="ev", dir="/tmp"))
    link = folder / "d"
    link.symlink_to(real, target_is_directory=True)
    assert len(str(link)) == len("/work/shared/data"), link
    saved = os.environ.get("EVALIGN_DATA_DIR")
    os.environ["EVALIGN_DATA_DIR"] = str(link)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("EVALIGN_DATA_DIR", None)
        else:
            os.environ["EVALIGN_DATA_DIR"] = saved
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def work() -> Iterator[Path]:
    """A fresh temporary folder with a short name of fixed length (so wrapped lines stay the same)."""
    path = Path(tempfile.mkdtemp(prefix="evgold"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def evalign(args: list[str], cwd: Path, code: int = 0, columns: str = COLUMNS) -> tuple[str, str]:
    """``python -m evalign ARGS`` in ``cwd``: its normalised stdout and stderr (exit code checked)."""
    env = {**os.environ, "COLUMNS": columns, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "EVALIGN_CACHE": str(cwd / "cache.sqlite")}
    proc = subprocess.run([sys.executable, "-m", "evalign", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == code, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return normalise_stdout(proc.stdout, [cwd]), normalise_stderr(proc.stderr, [cwd])


def check_run(name: str, args: list[str], cwd: Path, code: int = 0, columns: str = COLUMNS) -> str:
    """Run ``evalign ARGS`` and compare its stdout and stderr with ``NAME.stdout`` / ``NAME.stderr``."""
    out, err = evalign(args, cwd, code, columns)
    check_text(f"{name}.stdout", out)
    check_text(f"{name}.stderr", err)
    return out


# ------------------------------------------------------------------------------------------------
# help texts

HELP = [[], ["score"], ["metrics"], ["meta"], ["judge"], ["report"], ["demo"], ["synth"], ["train-judge"],
        ["verify-judge"], ["run"], ["datasets"], ["datasets", "export"], ["leaderboard"], ["cache"], ["cache", "info"],
        ["cache", "clear"], ["probe"]]


def test_help_texts(work: Path) -> None:
    """``evalign [VERB...] --help`` of every verb (run four at a time)."""
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda verb: evalign([*verb, "--help"], work), HELP))
    for verb, (out, err) in zip(HELP, outs, strict=True):
        name = "_".join(["help", *verb]).replace("-", "_")
        check_text(f"help/{name}.stdout", out)
        assert err == "", (verb, err)

# ------------------------------------------------------------------------------------------------
# error messages

ERRORS = [  # (name, args, exit code)
    ("missing_file", ["meta", "missing.jsonl", "-m", "bleu"], 1),
    ("unknown_metric", ["score", "--dataset", "self_instruct", "-m", "nosuch"], 2),
    ("unknown_option", ["score", "--dataset", "self_instruct", "-m", "bleu", "--option", "bleu.nosuch=1"], 2),
    ("bad_config", ["run", "bad.yaml"], 2),
    ("malformed_jsonl", ["score", "broken.jsonl", "-m", "bleu"], 1),
    ("unknown_dataset", ["meta", "--dataset", "nosuch", "-m", "bleu"], 1),
    ("unknown_variant", ["datasets", "export", "llmbar:nosuch", "-o", "x.jsonl"], 1),
    ("judge_without_texts", ["judge", "--dataset", "summeval", "--mode", "absolute", "--backend", "openai",
                             "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], 1),
]


def test_error_messages(work: Path) -> None:
    """The messages and exit codes of common mistakes (run four at a time)."""
    (work / "bad.yaml").write_text("version: 1\nname: bad\nmetrics: [bleu]\nevaluations:\n  - name: x\n"
                                   "    data: {dataset: nosuch}\n    colour: red\n", encoding="utf-8")
    (work / "broken.jsonl").write_text('{"id": "1", "system": "s", "response": "a"}\n{"id": "2", "system": "s"\n',
                                       encoding="utf-8")
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda e: evalign(e[1], work, e[2]), ERRORS))
    for (name, _args, _code), (out, err) in zip(ERRORS, outs, strict=True):
        check_text(f"errors/{name}.stdout", out)
        check_text(f"errors/{name}.stderr", err)


# ------------------------------------------------------------------------------------------------
# datasets and metrics listings


def test_datasets_listing(work: Path) -> None:
    check_run("datasets", ["datasets"], work)
    check_run("datasets_json", ["datasets", "--json"], work)


def test_metrics_listing(work: Path) -> None:
    check_run("metrics", ["metrics"], work)
    check_run("metrics_options", ["metrics", "--options"], work)


def test_datasets_export(work: Path) -> None:
    out = work / "out"
    out.mkdir()
    check_run("export_hhh", ["datasets", "export", "hhh", "-o", "out/hhh.csv"], work)
    check_run("export_llmbar_natural", ["datasets", "export", "llmbar:natural", "-o", "out/llmbar.jsonl",
                                        "--json"], work)
    check_run("export_pandalm_items", ["datasets", "export", "pandalm", "--as", "pairs-as-items",
                                       "-o", "out/pandalm_items.jsonl"], work)
    check_files("export_files", out)


# ------------------------------------------------------------------------------------------------
# score


def test_score_self_instruct(work: Path) -> None:
    check_run("score_self_instruct", ["score", "--dataset", "self_instruct", "-m", "bleu", "-m", "chrf",
                                      "-m", "rouge_l", "-m", "exact_match", "-o", "out/scored.jsonl",
                                      "--system-out", "out/systems.csv"], work)
    check_files("score_self_instruct_files", work / "out")


def test_score_significance_json(work: Path) -> None:
    check_run("score_significance", ["score", "--dataset", "self_instruct", "-m", "bleu", "-m", "rouge_l",
                                     "--significance", "--json"], work)


def test_score_shards_local_engine(work: Path) -> None:
    """``score FILE --out-dir``: the local engine's Parquet shards, their manifest and summary, and a
    re-run that resumes every shard. The manifest records the SHA-256 of the input (the mtime is pinned as before)."""
    evalign(["datasets", "export", "self_instruct", "-o", "items.jsonl"], work)
    os.utime(work / "items.jsonl", ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    args = ["score", "items.jsonl", "-m", "bleu", "-m", "rouge_l", "--out-dir", "shards", "--shard-rows", "500"]
    check_run("score_shards", args, work)
    check_files("score_shards_files", work / "shards", tmp=[work])
    check_run("score_shards_resumed", args, work)
    check_run("score_out_dir_needs_a_file", ["score", "--dataset", "self_instruct", "-m", "bleu",
                                             "--out-dir", "shards2"], work, code=2)


# ------------------------------------------------------------------------------------------------
# meta


def test_meta_self_instruct(work: Path) -> None:
    args = ["meta", "--dataset", "self_instruct", "-m", "bleu", "-m", "rouge_l", *RESAMPLING]
    check_run("meta_self_instruct", args, work)
    check_run("meta_self_instruct_json", [*args, "--json"], work)
    check_run("meta_self_instruct_80", args, work, columns="80")  # tables folded to 80 columns


def test_meta_pandalm_pairs(work: Path) -> None:
    args = ["meta", "--dataset", "pandalm", "-m", "bleu", "-m", "chrf", "-m", "judge:gpt-3.5-turbo",
            "--by", "task", *RESAMPLING]
    check_run("meta_pandalm", args, work)
    check_run("meta_pandalm_json", [*args, "--json"], work)


def test_meta_tulu1_item_level(work: Path) -> None:
    """A dataset from $EVALIGN_DATA_DIR: item-level human acceptability ratings."""
    check_run("meta_tulu1_self_instruct", ["meta", "--dataset", "tulu1:self_instruct", "-m", "bleu",
                                           "-m", "rouge_l", *RESAMPLING], work)


def test_meta_llmbar_judge_column(work: Path) -> None:
    """LLMBar (no references) as a pair table with a judge verdict column made here (the longer response
    wins): the judge path of the pair trust table."""
    evalign(["datasets", "export", "llmbar:natural", "-o", "pairs.jsonl"], work)
    pairs = pd.read_json(work / "pairs.jsonl", lines=True, dtype=False)
    la, lb = pairs["response_a"].str.len(), pairs["response_b"].str.len()
    pairs["judge:longer"] = ["A" if a > b else "B" if b > a else "tie" for a, b in zip(la, lb, strict=True)]
    pairs.to_json(work / "judged.jsonl", orient="records", lines=True)
    args = ["meta", "judged.jsonl", "-m", "judge:longer", "--pref", "pref_1", *RESAMPLING]
    check_run("meta_llmbar_judge", args, work)
    check_run("meta_llmbar_judge_json", [*args, "--json"], work)


def test_meta_without_references_fails(work: Path) -> None:
    """HHH has no reference answers: reference-based metrics are refused (exit 1) after the coverage table."""
    check_run("meta_hhh_error", ["meta", "--dataset", "hhh", "-m", "bleu", *RESAMPLING], work, code=1)


# ------------------------------------------------------------------------------------------------
# report


def test_report_json(work: Path) -> None:
    check_run("report_self_instruct", ["report", "--dataset", "self_instruct", "-m", "bleu", "-m", "rouge_l",
                                       "--bootstrap", "100", "-o", "out/report.html", "--json"], work)
    check_files("report_self_instruct_files", work / "out")


# ------------------------------------------------------------------------------------------------
# run


SMALL_CONFIG = """\
version: 1
name: small
metrics: [bleu, rouge_l]
evaluations:
  - name: self_instruct
    data: {dataset: self_instruct}
    meta:
      resampling: {n_resamples: 100, n_permutations: 100, seed: 0}
  - name: pandalm
    data: {dataset: pandalm}
    columns: [judge:gpt-3.5-turbo, judge:pandalm-7b]
    meta:
      by: task
      curves: true
      resampling: {n_resamples: 100, n_permutations: 100, seed: 0}
report:
  title: "small golden study"
"""


def test_run_shipped_demo_dry_run(work: Path) -> None:
    check_run("run_demo_dry_run", ["run", "demo", "--dry-run"], work)


def test_run_small_config(work: Path) -> None:
    """A run config in the shipped demo's shape with two offline metrics and 100 resamples. The step
    cache under ``.steps/`` (pickles named by hashes) is an internal detail, left out."""
    (work / "small.yaml").write_text(SMALL_CONFIG, encoding="utf-8")
    check_run("run_small", ["run", "small.yaml", "-o", "out"], work)
    check_files("run_small_files", work / "out", skip=(".steps/",))
    again = check_run("run_small_again_json", ["run", "small.yaml", "-o", "out", "--json"], work)
    json.loads(again)
