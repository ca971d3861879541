"""``evalign synth``: generate judge training data (the Prometheus Feedback Collection procedure).

Every teacher call is cached as soon as it returns; an interrupted run resumes by running the same
command again. The table is written atomically at the end, its summary beside it as ``OUT.summary.json``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import typer
from rich.markup import escape

from evalign.backends import BackendOptions
from evalign.backends.spec import api_key_env_problem, key_env_of
from evalign.cache import Cache
from evalign.cli.batch_options import (
    BATCH_API,
    BATCH_MAX_REQUESTS,
    BATCH_POLL,
    BATCH_RETRIES,
    BATCH_RETRY,
    batch_block,
    check_batch_options,
    with_batch,
)
from evalign.cli.common import (
    CliError,
    cache_input,
    console,
    emit_json,
    err_console,
    named_as_options,
    print_table,
)
from evalign.cli.judge import checked_backend
from evalign.errors import UsageError
from evalign.io import detect_format, refuse_output_onto_inputs, write_json_atomic, write_table
from evalign.judges.option_rules import backend_option_problem
from evalign.judges.prompts import SAMPLING_RULES, sampling_problem
from evalign.synth import SynthSettings, load_seed_rubrics, run_synth
from evalign.synth.parsing import REASONS

#: SynthSettings' fields by the option that sets them (an error names the option)
_OPTIONS = {"rounds": "--rounds", "rubrics_per_round": "--rubrics-per-round", "rubric_threshold": "--rubric-threshold",
            "instructions_per_rubric": "--instructions-per-rubric", "instruction_threshold": "--instruction-threshold",
            "max_pairs_per_instruction": "--max-pairs"}


def check_options(**values: Any) -> None:
    """The sampling and backend options, checked by the rules `judge` and `bench` apply (before any call)."""
    for key, value in values.items():
        if key == "api_key_env":  # (the value is not repeated: it may be the key)
            problem = api_key_env_problem(value)
        else:
            problem = sampling_problem(key, value) if key in SAMPLING_RULES else backend_option_problem(key, value)
        if problem:
            raise UsageError(f"--{key.replace('_', '-')} {problem}")


def make_teacher(kind: str, model: str | None, base_url: str | None, api_key_env: str | None, concurrency: int,
                 batch_size: int, device: str | None, timeout: float, max_retries: int) -> Any:
    """A backend from the command-line options (``openai`` needs ``--base-url``; ``hf`` a model folder)."""
    options = BackendOptions(model=model, base_url=base_url, api_key_env=key_env_of(kind, api_key_env), concurrency=concurrency,
                             timeout=timeout, max_retries=max_retries, device=device, batch_size=batch_size)
    return checked_backend(kind, options)


def register(app: typer.Typer) -> None:
    """Add ``synth`` to ``app``."""

    @app.command("synth")
    def synth_cmd(
        out: Path = typer.Option(..., "--out", "-o", help="Output table (.jsonl or .parquet)."),
        backend: str = typer.Option("openai", "--backend", help="Teacher backend: openai (any OpenAI-compatible server), anthropic, gemini or hf."),
        base_url: str = typer.Option(None, "--base-url", help="API root of the teacher, e.g. http://localhost:8000/v1."),
        model: str = typer.Option(None, "--model", help="Teacher model name (openai) or local model directory (hf)."),
        api_key_env: str = typer.Option(None, "--api-key-env", help="Environment variable holding the API key (never logged); default by backend: OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY."),
        seed_rubric: list[str] = typer.Option(None, "--seed-rubric", help="Seed rubric: built-in name, .yaml/.json file or folder (repeat; default: all built-in)."),
        rounds: int = typer.Option(1, "--rounds", help="Brainstorming rounds."),
        rubrics_per_round: int = typer.Option(4, "--rubrics-per-round", help="Brainstorming prompts per round."),
        no_paraphrase: bool = typer.Option(False, "--no-paraphrase", help="Do not add a paraphrased rubric per new rubric."),
        include_seed_rubrics: bool = typer.Option(False, "--include-seed-rubrics", help="Also write instructions for the seed rubrics."),
        instructions_per_rubric: int = typer.Option(20, "--instructions-per-rubric", help="Instruction samples per rubric (paper: 20)."),
        rubric_threshold: float = typer.Option(0.7, "--rubric-threshold", help="ROUGE-L at or above which a rubric is a near-duplicate."),
        instruction_threshold: float = typer.Option(0.7, "--instruction-threshold", help="ROUGE-L at or above which an instruction is a near-duplicate."),
        no_balance: bool = typer.Option(False, "--no-balance", help="Keep unequal counts per score."),
        template: str = typer.Option("prometheus_absolute", "--template", help="Training prompt template (prometheus_absolute or prometheus1_absolute)."),
        relative: bool = typer.Option(False, "--relative", help="Also write pairwise (relative) rows, as Prometheus 2."),
        max_pairs: int = typer.Option(None, "--max-pairs", help="Pairwise rows per instruction at most (default: all)."),
        temperature: float = typer.Option(1.0, "--temperature", help="Teacher sampling temperature."),
        top_p: float = typer.Option(0.9, "--top-p", help="Teacher nucleus sampling."),
        max_tokens: int = typer.Option(2048, "--max-tokens", help="Most tokens per teacher output."),
        seed: int = typer.Option(0, "--seed", help="Seed of the rubric sampling and of every request."),
        concurrency: int = typer.Option(8, "--concurrency", help="Requests in flight at most (openai)."),
        batch_size: int = typer.Option(8, "--batch-size", help="Prompts per batch (hf)."),
        device: str = typer.Option(None, "--device", help="Device of the hf backend."),
        timeout: float = typer.Option(300.0, "--timeout", help="Seconds per request attempt (openai)."),
        max_retries: int = typer.Option(6, "--max-retries", help="Retries per request on 429/5xx/timeouts."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Ask every call anew (new outputs are stored)."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        batch_api: bool = BATCH_API, batch_max_requests: int = BATCH_MAX_REQUESTS, batch_retries: int = BATCH_RETRIES,
        batch_retry: str = BATCH_RETRY, batch_poll: float = BATCH_POLL,
    ) -> None:
        """Generate judge training data with a teacher model (Prometheus Feedback Collection procedure)."""
        batch = SimpleNamespace(batch_api=batch_api, batch_max_requests=batch_max_requests, batch_retries=batch_retries,
                                batch_retry=batch_retry, batch_poll=batch_poll)
        check_batch_options(batch)
        if detect_format(out) == "csv":
            raise CliError("--out must be .jsonl or .parquet")
        refuse_output_onto_inputs({"-o": out, "-o (its summary)": f"{out}.summary.json"},
                                  {"--seed-rubric": [f for s in seed_rubric or [] for f in _rubric_files(s)],
                                   **cache_input()})
        check_options(temperature=temperature, top_p=top_p, max_tokens=max_tokens, concurrency=concurrency,
                      batch_size=batch_size, timeout=timeout, max_retries=max_retries, api_key_env=api_key_env)
        with named_as_options(_OPTIONS):
            settings = SynthSettings(
                rounds=rounds, rubrics_per_round=rubrics_per_round, paraphrase=not no_paraphrase,
                include_seed_rubrics=include_seed_rubrics, instructions_per_rubric=instructions_per_rubric,
                rubric_threshold=rubric_threshold, instruction_threshold=instruction_threshold, balance=not no_balance,
                template=template, relative=relative, max_pairs_per_instruction=max_pairs, temperature=temperature,
                top_p=top_p, max_tokens=max_tokens, seed=seed,
            )  # fmt: skip
        seeds = load_seed_rubrics(seed_rubric)
        teacher = with_batch(make_teacher(backend, model, base_url, api_key_env, concurrency, batch_size, device,
                                          timeout, max_retries), batch, quiet=as_json)
        result = run_synth(seeds, teacher, settings, cache=Cache.for_command(no_cache))
        empty = result.summary.empty_reason()
        if empty is None:
            write_table(result.table, out)
        summary = result.summary.as_dict()
        if batch_block(teacher) is not None:  # --batch-api: batches, lines, failed / retried lines by reason
            summary["batch"] = batch_block(teacher)
        summary["out"] = None if empty else str(out)
        write_json_atomic(Path(f"{out}.summary.json"), summary)
        if as_json:
            emit_json(summary)
        else:
            print_summary(summary)
        if empty is not None:
            raise CliError(f"no training row to write, {out} not written: {empty} (the counts are in "
                           f"{out}.summary.json)")
        if as_json:
            return
        console.print(f"wrote {out} ({summary['rows']} rows, {summary['relative_rows']} pairwise) and {out}.summary.json",
                      highlight=False, markup=False)


def _rubric_files(spec: str) -> list[Path]:
    """The files a ``--seed-rubric`` value names: the file, or a folder's rubric files."""
    p = Path(spec)
    return sorted([*p.glob("*.yaml"), *p.glob("*.yml"), *p.glob("*.json")]) if p.is_dir() else [p]


def print_summary(summary: dict[str, Any]) -> None:
    """The synth summary as terminal tables: counts, filters, rejected by reason, length by score."""
    counts = pd.DataFrame(
        [("seed rubrics", summary["seed_rubrics"]), ("rubrics kept", summary["rubrics"]),
         ("instructions kept", summary["instructions"]), ("rows (absolute)", summary["rows"]),
         ("rows (pairwise)", summary["relative_rows"]), ("teacher calls", summary["calls"]["total"]),
         ("  from cache", summary["calls"]["cached"]), ("  made", summary["calls"]["new"]),
         ("  failed", summary["calls"]["failed"])], columns=["", "count"])  # fmt: skip
    print_table(counts, title="Synth")
    print_table(pd.DataFrame(list(summary["filters"].items()), columns=["filter", "removed"]), title="Filters")
    rej = [(step, r, n, REASONS.get(r, "")) for step, by in summary["rejected"].items() for r, n in by.items()]
    if rej:
        print_table(pd.DataFrame(rej, columns=["step", "reason", "count", "meaning"]), title="Unparseable, by reason")
    lb = summary["length_by_score"]
    before = summary["length_by_score_before_balance"]
    rows = [(k, summary["rows_by_score"][k], lb[k], before[k]) for k in lb]
    print_table(pd.DataFrame(rows, columns=["score", "rows", "mean words", "mean words before balance"]),
                title="Length balance (mean response length per score)", digits=1)
    line = f"teacher {summary['backend']} · template {summary['template']}"
    err_console.print(f"[dim]{escape(line)}[/dim]", highlight=False)
