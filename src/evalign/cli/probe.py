"""``evalign probe``: how a pair judge breaks. Judge the pairs and each bias probe's perturbed copy
(position, verbosity, authority, bandwagon, distraction, refinement, self-enhancement; probes are data
files, see :mod:`evalign.judges.perturb`) and print the report card: per probe the share of verdicts
that changed, with its exact interval, how many moved toward the perturbed response, and the exact
sign test of "no effect".

Every call is cached as it returns (the judge runner's cache), so an interrupted run resumes by running
the same command again; ``OUT.partial.jsonl`` logs finished calls while it runs.

    evalign probe --dataset llmbar:natural --limit 40 --mode pairwise --template llmbar_vanilla \
        --base-url http://localhost:8000/v1 --model smollm2 -o card.json --html card.html
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.batch_options import (
    BATCH_API,
    BATCH_MAX_REQUESTS,
    BATCH_POLL,
    BATCH_RETRIES,
    BATCH_RETRY,
    batch_block,
    with_batch,
)
from evalign.cli.common import (
    CliError,
    cache_input,
    check_outputs,
    console,
    emit_json,
    print_table,
    progress,
    split_multi,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET
from evalign.cli.judge import (
    API_KEY_ENV,
    BACKEND,
    BASE_URL,
    BATCH_SIZE,
    CONCURRENCY,
    CONNECT_TIMEOUT,
    CONSTRAIN,
    CONSTRAINT_FORMAT,
    DEVICE,
    FILE,
    IDLE_TIMEOUT,
    LIMIT,
    LOGIT_BIAS,
    MAX_RETRIES,
    MAX_TOKENS,
    MODEL,
    NAME,
    NO_CACHE,
    REASK,
    RUBRIC,
    SEED,
    SINGLE_ORDER,
    SYSTEM_PROMPT,
    TEMPERATURE,
    TEMPLATE,
    TIMEOUT,
    JudgeCommand,
    checked_backend,
    judge_spec,
    load_table,
    validate_options,
)

MODE: Any = typer.Option("pairwise", "--mode", help="A pairwise judge: pairwise (relative) or a plugin pair judge.")
PROBE: Any = typer.Option([], "--probe", "-p", help="Probe name or probe file (.yaml), repeatable or comma-separated "
                                                    "(default: every built-in probe; `evalign probe --list`).")
PROBE_SEED: Any = typer.Option(0, "--probe-seed", help="Seed of the perturbations (which response, which text).")
SELF_SYSTEM: Any = typer.Option([], "--self-system", help="Glob pattern of the judge's own system names "
                                                           "(self-enhancement; default: the --model name).")
HUMAN: Any = typer.Option(None, "--human", help="Human preference column (+1/-1/0 or A/B/tie) to compare the "
                                                "judge's verdicts on its own pairs with (self-enhancement).")
CONFIDENCE: Any = typer.Option(0.95, "--confidence", help="Level of the exact intervals.")
OUT: Any = typer.Option(None, "--out", "-o", help="The report card as JSON.")
TABLE_OUT: Any = typer.Option(None, "--table", help="The judged rows (original and perturbed; .jsonl/.csv/.parquet).")
HTML: Any = typer.Option(None, "--html", help="The report card as an HTML page (a section of the HTML report).")
LIST: Any = typer.Option(False, "--list", help="List the probes (name, bias, edit, source) and exit.")
AS_JSON: Any = typer.Option(False, "--json", help="Print the report card as JSON.")


def register(app: typer.Typer) -> None:
    """Add ``probe`` to ``app``."""
    app.command("probe")(probe_cmd)


def probe_cmd(
    file: Path = FILE, dataset: str = DATASET, data_dir: Path = DATA_DIR, limit: int = LIMIT, mode: str = MODE,
    template: str = TEMPLATE, rubric: str = RUBRIC, single_order: bool = SINGLE_ORDER, logit_bias: bool = LOGIT_BIAS,
    probe: list[str] = PROBE, probe_seed: int = PROBE_SEED, self_system: list[str] = SELF_SYSTEM, human: str = HUMAN,
    confidence: float = CONFIDENCE, backend: str = BACKEND, system_prompt: str = SYSTEM_PROMPT,
    base_url: list[str] = BASE_URL, model: str = MODEL, api_key_env: str = API_KEY_ENV, concurrency: int = CONCURRENCY,
    batch_size: int = BATCH_SIZE, device: str = DEVICE, temperature: float = TEMPERATURE, max_tokens: int = MAX_TOKENS,
    seed: int = SEED, reask: int = REASK, constrain: str = CONSTRAIN, constraint_format: str = CONSTRAINT_FORMAT,
    name: str = NAME, timeout: float = TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT, idle_timeout: float = IDLE_TIMEOUT, max_retries: int = MAX_RETRIES,
    no_cache: bool = NO_CACHE, out: Path = OUT, table_out: Path = TABLE_OUT, html: Path = HTML, list_: bool = LIST,
    as_json: bool = AS_JSON, batch_api: bool = BATCH_API, batch_max_requests: int = BATCH_MAX_REQUESTS,
    batch_retries: int = BATCH_RETRIES, batch_retry: str = BATCH_RETRY, batch_poll: float = BATCH_POLL,
) -> None:
    """Probe a pair judge for biases: perturb each pair, judge it again, count the verdicts that moved."""
    from evalign.judges.perturb import list_probes, load_probe

    if list_:
        for n in list_probes():
            p = load_probe(n)
            console.print(escape(f"{p.name:<18} {p.bias:<18} {p.edit:<8} {p.source}"), highlight=False, soft_wrap=True)
        return
    from evalign.evaluate.probe import DEFAULT_PROBES, ProbeSettings
    from evalign.io import FORMATS, refuse_output_onto_inputs

    for option, path, suffix in (("-o", out, ".json"), ("--html", html, ".html")):
        if path is not None and path.suffix.lower() != suffix:
            raise CliError(f"{option} {path}: this output is written as {suffix}, not {path.suffix or '(no suffix)'}")
    check_outputs(("--table", table_out, FORMATS), stdout_used=as_json)
    refuse_output_onto_inputs(
        {"-o": out, "-o (its log of finished calls)": f"{out}.partial.jsonl" if out else None, "--table": table_out,
         "--html": html},
        {"FILE": file, "--template": template, "--rubric": rubric, "--probe": split_multi(probe), **cache_input()})
    o = JudgeCommand(
        file=file, mode=mode, ranking=False, max_rounds=5, max_unparseable_rounds=2, dataset=dataset,
        data_dir=data_dir, rubric=rubric, rubric_column=None, rubric_map=None, template=template, backend=backend,
        system_prompt=system_prompt, base_url=base_url, model=model, api_key_env=api_key_env, samples=1,
        concurrency=concurrency, batch_size=batch_size, device=device, temperature=temperature, top_p=None,
        max_tokens=max_tokens, repetition_penalty=None, seed=seed, grammar=None, constrain=constrain,
        constraint_format=constraint_format, reask=reask, tie=False, tie_margin=0.0, criteria=None,
        logit_bias=logit_bias, single_order=single_order, no_reference=False, skip_self=None, geval_fallback="samples",
        geval_min_mass=0.5, score_criterion=None, max_failed=1.0, no_cache=no_cache, human=None, length_unit="chars",
        name=name, limit=limit, timeout=timeout, connect_timeout=connect_timeout, deadline=None,
        idle_timeout=idle_timeout, stream=False, max_retries=max_retries, out=None, id_field=None, system_field=None,
        instruction_field=None, input_field=None, reference_field=None, response_field=None, system=None,
        as_json=as_json, batch_api=batch_api, batch_max_requests=batch_max_requests, batch_retries=batch_retries,
        batch_retry=batch_retry, batch_poll=batch_poll,
    )  # fmt: skip
    validate_options(o)
    settings = ProbeSettings(probes=tuple(split_multi(probe)) or DEFAULT_PROBES, seed=probe_seed,
                             confidence=confidence, self_systems=tuple(split_multi(self_system)), human=human)
    card, batch = _run(o, settings, out)
    data = card.to_json()
    if batch is not None:  # --batch-api: batches, lines, failed / retried lines, failures by reason
        data["batch"] = batch
    _write(card, data, out, table_out, html)
    if as_json:
        emit_json(data)
    else:
        render(card)


def _run(o: Any, settings: Any, out: Path | None) -> tuple[Any, dict[str, Any] | None]:
    """Build the judge and its backend and run the probes with a progress bar; the report card and, with
    ``--batch-api``, the ``batch`` block."""
    from evalign.cache import Cache
    from evalign.evaluate.probe import run_probes
    from evalign.judges.spec import JudgeSpec, make_judge

    base = JudgeSpec(mode=o.mode, template=o.template, constrain=o.constrain)
    if not base.judge_class.pairwise:
        raise CliError(f"--mode {o.mode} is not a pairwise judge: bias probes compare two responses")
    table = load_table(o, True)
    judge = make_judge(judge_spec(o, base))
    be = with_batch(checked_backend(o.backend, o.backend_options()), o, quiet=o.as_json)
    partial = Path(f"{out}.partial.jsonl") if out else None
    with progress(transient=True, disable=o.as_json) as bar:
        task = bar.add_task("probing", total=None)

        def on_progress(c: dict[str, int]) -> None:
            bar.update(task, completed=c["done"], total=c["total"],
                       description=f"probing [dim]done {c['done']} · cached {c['cached']} · unscored {c['unscored']}"
                                   f" · failed {c['failed']}[/dim]")

        card = run_probes(table, judge, be, settings, cache=Cache.for_command(o.no_cache),
                          partial_path=partial, on_progress=on_progress)
    if partial is not None:
        partial.unlink(missing_ok=True)
    return card, batch_block(be)


def _write(card: Any, data: dict[str, Any], out: Path | None, table_out: Path | None, html: Path | None) -> None:
    from evalign.io import write_json_atomic, write_table

    if out is not None:
        write_json_atomic(out, data)
    if table_out is not None:
        write_table(card.table, table_out)
    if html is not None:
        from evalign.report.probes import write_probe_report

        write_probe_report([card.to_json()], html)


def render(card: Any) -> None:
    """The report card on the terminal: one row per probe, then what each compared."""
    from evalign.report.probes import card_display

    console.print(escape(f"judge: {card.judge} ({card.model}) on {card.source}: {card.n_pairs} pairs; "
                         f"calls made {card.calls['new']}, from cache {card.calls['cached']}"), highlight=False)
    print_table(card_display([card.to_json()]), title=f"Bias probes ({card.confidence:.0%} exact intervals, "
                                                     f"sign test of no effect; seed {card.seed})", digits=3)
    for r in card.results:
        line = f"{r.probe.name}: {r.compared}" if r.compared else f"{r.probe.name}: n/a"
        console.print(escape(line + (f" ({r.note})" if r.note else "")), highlight=False, soft_wrap=True)
