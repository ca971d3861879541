"""``evalign judge``: grade responses (or response pairs) with an LLM judge.

Every call is cached as soon as it returns, so an interrupted run resumes by running the same command
again; ``OUT.partial.jsonl`` logs finished calls while the run goes on and the final table is written
atomically at the end (with ``OUT``'s summary beside it as ``OUT.summary.json``).

Output columns (``J`` = the judge's column, ``--name`` or e.g. ``prometheus_absolute[helpfulness]``):
``J`` is the score (item judges; direction in the summary's ``higher_is_better``, False for G-Eval) or
the verdict ``A`` / ``B`` / ``tie`` / ``unparseable`` (pair judges); ``J.status`` (scored / unscored /
skipped), ``J.reason``, ``J.feedback``, ``J.error`` (the backend's message), plus per mode ``J.method``
(G-Eval), ``J.code`` (+1 A, -1 B, 0 tie), ``J.naturalness`` / ``J.relatedness`` / ``J.correctness``,
``J.score_a`` / ``J.score_b`` / ``J.rounds`` (ranking).

Prometheus' ranking protocol on preference data (grade A and B with the absolute prompt, re-grade
ties at temperature 1.0 up to ``--max-rounds``), with the papers' criteria::

    # HHH alignment (bundled): each subset's rubric of the Prometheus HHH benchmark
    evalign judge --dataset hhh --mode absolute --ranking --rubric-column task --rubric-map hhh \
        --base-url http://localhost:8000/v1 --model prometheus-7b-v2.0 -o hhh_ranking.jsonl
    # MT-Bench human judgments (LLMBar's processed subset, read from $EVALIGN_DATA_DIR/llmbar)
    evalign judge --dataset llmbar:mt-bench --mode absolute --ranking --rubric human_preference \
        --base-url http://localhost:8000/v1 --model prometheus-7b-v2.0 -o mtbench_ranking.jsonl

The column ``J`` of the output holds the verdicts, read into preference accuracy like a relative judge's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer

from evalign.cli.common import (
    ID_FIELD,
    INPUT_FIELD,
    INSTRUCTION_FIELD,
    REFERENCE_FIELD,
    RESPONSE_FIELD,
    SYSTEM_FIELD,
    CliError,
    console,
    emit_json,
    err_console,
    field_map,
    fmt_value,
    progress,
)
from evalign.cli.dataset_options import DATA_DIR, DATASET
from evalign.errors import UsageError


def register(app: typer.Typer) -> None:
    """Add ``judge`` to ``app``."""

    @app.command("judge")
    def judge_cmd(
        file: Path = typer.Argument(None, help="Items (or, for pairwise, a pair table): JSONL, JSON, CSV, Parquet."),
        mode: str = typer.Option("absolute", "--mode", help="absolute | pairwise (relative) | geval | criteria (or a plugin judge)."),
        ranking: bool = typer.Option(False, "--ranking", help="With --mode absolute on a pair table: grade A and B "
                                     "independently, re-grade ties (Prometheus' ranking protocol)."),
        max_rounds: int = typer.Option(5, "--max-rounds", help="--ranking: most grading rounds before a tie is called."),
        dataset: str = DATASET,
        data_dir: Path = DATA_DIR,
        rubric: str = typer.Option(None, "--rubric", help="Built-in rubric name or a .yaml/.json rubric file."),
        rubric_column: str = typer.Option(None, "--rubric-column", help="Column with a rubric per row (JSON or a rubric name)."),
        rubric_map: list[str] = typer.Option(None, "--rubric-map", help="VALUE=RUBRIC for the rubric column's values "
                                             "(repeatable), or a built-in map: hhh (the HHH subsets' rubrics)."),
        template: str = typer.Option(None, "--template", help="Built-in template name or a template file."),
        backend: str = typer.Option("openai", "--backend", help="openai (any OpenAI-compatible server), hf, or a plugin backend."),
        system_prompt: str = typer.Option("role", "--system-prompt", help="openai: 'role' (a system message) or 'fold' "
                                          "(prepended to the user turn, for chat templates without a system role)."),
        base_url: list[str] = typer.Option(None, "--base-url", help="API root, e.g. http://localhost:8000/v1; "
                                           "repeat it to spread calls over several servers of the same model."),
        model: str = typer.Option(None, "--model", help="Model name (openai) or local model directory (hf)."),
        api_key_env: str = typer.Option(
            "OPENAI_API_KEY", "--api-key-env", help="Environment variable holding the API key (never logged)."
        ),
        samples: int = typer.Option(1, "--samples", help="Grades drawn per item (mean, median, std reported)."),
        concurrency: int = typer.Option(8, "--concurrency", help="Requests in flight at most (openai)."),
        batch_size: int = typer.Option(8, "--batch-size", help="Prompts per batch (hf)."),
        device: str = typer.Option(None, "--device", help="Device of the hf backend (cpu, cuda, ...)."),
        temperature: float = typer.Option(None, "--temperature", help="Sampling temperature (judge default)."),
        top_p: float = typer.Option(None, "--top-p", help="Nucleus sampling (judge default)."),
        max_tokens: int = typer.Option(None, "--max-tokens", help="Most tokens per judge output."),
        repetition_penalty: float = typer.Option(None, "--repetition-penalty", help="Where the server supports it; 0 = not sent."),
        seed: int = typer.Option(None, "--seed", help="Sampling seed (sample s uses seed + s)."),
        grammar: Path = typer.Option(None, "--grammar", help="GBNF grammar file constraining the output (llama.cpp)."),
        reask: int = typer.Option(0, "--reask", help="Ask again up to K times when an output cannot be parsed."),
        tie: bool = typer.Option(False, "--tie", help="Pairwise: offer TIE as an answer."),
        single_order: bool = typer.Option(False, "--single-order", help="Pairwise: judge only the A/B order."),
        no_reference: bool = typer.Option(False, "--no-reference", help="Use the reference-free template."),
        skip_self: list[str] = typer.Option(None, "--skip-self", help="Skip rows whose system matches this glob "
                                            "(repeatable, e.g. 'gpt-4*'; 'self' = the judge model's name)."),
        geval_fallback: str = typer.Option("samples", "--geval-fallback", help="G-Eval when the server returns no "
                                           "logprobs: 'samples' (read the sampled score) or 'error' (row unscored)."),
        geval_min_mass: float = typer.Option(0.5, "--geval-min-mass", help="G-Eval: least total probability of the "
                                             "score tokens at the score position (0-1); below it the row is unscored."),
        score_criterion: str = typer.Option(None, "--score-criterion", help="criteria: the score column's criterion "
                                            "(naturalness, relatedness, correctness; default correctness)."),
        max_failed: float = typer.Option(0.5, "--max-failed", help="Exit 1 when more than this fraction of the calls "
                                         "failed after retries (0-1)."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Make every call anew (new outputs are stored)."),
        human: str = typer.Option(None, "--human", help="Human rating column (length bias within each grade)."),
        length_unit: str = typer.Option("chars", "--length-unit", help="chars or words (length-bias audit)."),
        name: str = typer.Option(None, "--name", help="Column name of the judge's scores."),
        limit: int = typer.Option(None, "--limit", help="Judge only the first N rows."),
        timeout: float = typer.Option(120.0, "--timeout", help="Seconds per request attempt (openai)."),
        connect_timeout: float = typer.Option(10.0, "--connect-timeout", help="Seconds to connect to the server (openai)."),
        deadline: float = typer.Option(None, "--deadline", help="Seconds for all requests together; past it the run "
                                       "stops (finished calls stay cached)."),
        max_retries: int = typer.Option(6, "--max-retries", help="Retries per request on 429/5xx/timeouts."),
        out: Path = typer.Option(None, "--out", "-o", help="Judged table (.jsonl/.csv/.parquet)."),
        id_field: str = ID_FIELD,
        system_field: str = SYSTEM_FIELD,
        instruction_field: str = INSTRUCTION_FIELD,
        input_field: str = INPUT_FIELD,
        reference_field: str = REFERENCE_FIELD,
        response_field: str = RESPONSE_FIELD,
        system: str = typer.Option(None, "--system", help="System name for records without one."),
        as_json: bool = typer.Option(False, "--json", help="Print the run summary as JSON."),
    ) -> None:
        """Grade every response with an LLM judge (Prometheus absolute / pairwise, G-Eval, criteria)."""
        from evalign.cache import Cache
        from evalign.io import write_json_atomic, write_table
        from evalign.judges.bias import LENGTH_UNITS
        from evalign.judges.grading import get_judge, judge_class
        from evalign.judges.runner import failed_too_often, run_judge

        _validate(
            backend=backend, base_url=base_url, concurrency=concurrency, batch_size=batch_size, timeout=timeout,
            connect_timeout=connect_timeout, deadline=deadline, max_retries=max_retries, limit=limit,
            temperature=temperature, top_p=top_p, max_tokens=max_tokens, samples=samples, reask=reask,
            max_failed=max_failed, max_rounds=max_rounds, geval_min_mass=geval_min_mass,
            geval_fallback=geval_fallback, system_prompt=system_prompt, length_unit=length_unit,
            repetition_penalty=repetition_penalty,
        )  # fmt: skip
        if length_unit not in LENGTH_UNITS:
            raise CliError(f"--length-unit must be one of {', '.join(LENGTH_UNITS)}, got '{length_unit}'")
        if ranking:
            if judge_class(mode).name != "prometheus_absolute":
                raise UsageError("--ranking applies to --mode absolute (Prometheus' ranking by absolute grading)")
            mode = "ranking"
        cls = judge_class(mode)
        table = _load_table(
            file, dataset, data_dir, cls.pairwise, human,
            field_map(id_field, system_field, instruction_field, input_field, reference_field, response_field),
            system,
        )  # fmt: skip
        if limit is not None:
            table = table.head(limit).reset_index(drop=True)
        opts: dict[str, Any] = {
            "samples": samples,
            "reask": reask,
            "column": name,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "repetition_penalty": repetition_penalty,
            "seed": seed,
        }
        if template:
            opts["template"] = template
        if no_reference:
            opts["reference"] = False
        if grammar is not None:
            opts["grammar"] = grammar.read_text(encoding="utf-8")
        if cls.uses_rubric:
            opts["rubric"] = rubric
            opts["rubric_column"] = rubric_column
            opts["rubric_map"] = list(rubric_map) if rubric_map else None
        elif rubric or rubric_column or rubric_map:
            raise CliError(f"--mode {mode} does not use a rubric")
        if cls.name == "prometheus_relative":
            opts["tie"] = tie
            opts["both_orders"] = not single_order
        elif tie or single_order:
            raise CliError("--tie and --single-order apply to --mode pairwise")
        if cls.name == "prometheus_ranking":
            opts["max_rounds"] = max_rounds
        if cls.name == "geval":
            opts["fallback"] = geval_fallback
            opts["min_mass"] = geval_min_mass
        if score_criterion is not None:
            if cls.name != "criteria":
                raise CliError("--score-criterion applies to --mode criteria")
            opts["score_criterion"] = score_criterion
        judge = get_judge(mode, **opts)
        be = _make_backend(backend, base_url=base_url, model=model, api_key_env=api_key_env, concurrency=concurrency,
                           batch_size=batch_size, device=device, timeout=timeout, max_retries=max_retries,
                           connect_timeout=connect_timeout, deadline=deadline, system_prompt=system_prompt)
        cache = Cache(read=not no_cache, write=True)
        partial = Path(f"{out}.partial.jsonl") if out else None

        with progress(transient=True, disable=as_json) as bar:
            task = bar.add_task("judging", total=None)

            def on_progress(c: dict[str, int]) -> None:
                bar.update(
                    task,
                    completed=c["done"],
                    total=c["total"],
                    description=f"judging [dim]done {c['done']} · cached {c['cached']} · unscored {c['unscored']}"
                    f" · retried {c['retried']} · failed {c['failed']}[/dim]",
                )

            run = run_judge(table, judge, be, cache=cache, skip_self=list(skip_self or []), human=human,
                            length_unit=length_unit, partial_path=partial, on_progress=on_progress)
        summary = run.summary.as_dict()
        if hasattr(be, "endpoint_stats"):  # several --base-url: calls per endpoint, endpoints taken out
            summary["endpoints"] = be.endpoint_stats()
        if out:
            write_table(run.table, out)
            summary_path = Path(f"{out}.summary.json")
            summary["out"] = str(out)
            summary["summary_out"] = str(summary_path)
            write_json_atomic(summary_path, summary)
            if partial is not None:
                with contextlib.suppress(FileNotFoundError):
                    partial.unlink()
        if as_json:
            emit_json(summary)
        else:
            print_summary(summary)
            if out:
                from rich.markup import escape

                console.print(f"wrote {escape(str(out))} and {escape(str(out))}.summary.json")
        if failed_too_often(run.summary, max_failed):
            calls = summary["calls"]
            raise CliError(
                f"{calls['failed']} of {calls['failed'] + calls['new']} judge calls failed after retries "
                f"(more than --max-failed {max_failed:g}); last backend error: {summary['last_error']}"
            )


def _load_table(
    file: Path | None,
    dataset: str | None,
    data_dir: Path | None,
    pairwise: bool,
    human: str | None,
    fields: dict[str, str],
    system: str | None,
) -> Any:
    from evalign.io import read_items
    from evalign.judges.runner import read_pairs

    if (file is None) == (dataset is None):
        raise CliError("give either FILE or --dataset NAME")
    if pairwise and human:
        raise CliError("--human applies to item tables (absolute, geval, criteria)")
    if dataset is not None:
        from evalign.cli.dataset_options import dataset_table

        # pair judges read the pair table; item judges the item table, else both sides of each pair
        table = dataset_table(dataset, data_dir, as_="pairs" if pairwise else "auto-items")
        if pairwise:
            return read_pairs(table)
        return read_items(table, human=[human] if human else [])
    assert file is not None
    if pairwise:
        return read_pairs(file)
    return read_items(file, fields=fields, human=[human] if human else [], default_system=system)


def _make_backend(kind: str, **kw: Any) -> Any:
    """The backend by registry name; the CLI options each backend takes."""
    from evalign.judges.backends import backend_class

    cls = backend_class(kind)  # unknown names: one line with "did you mean"
    if not kw.get("model"):
        raise CliError("--model is required (the model name, or a local model directory for --backend hf)")
    if kind == "openai":
        if not kw.get("base_url"):
            raise CliError("--base-url is required for --backend openai (e.g. http://localhost:8000/v1)")
        urls = list(kw["base_url"])
        if len(urls) > 1:  # one model on several servers (the cache key does not name them)
            cls = backend_class("multi")
            if len(set(urls)) < len(urls):
                raise UsageError(f"--base-url given twice: {next(u for u in urls if urls.count(u) > 1)}")
        where = {"base_urls": urls} if len(urls) > 1 else {"base_url": urls[0]}
        return cls(
            **where, model=kw["model"], api_key_env=kw["api_key_env"] or None,
            concurrency=kw["concurrency"], timeout=kw["timeout"], max_retries=kw["max_retries"],
            connect_timeout=kw["connect_timeout"], deadline=kw["deadline"], system_prompt=kw["system_prompt"],
        )  # fmt: skip
    if kind == "hf":
        return cls(model_path=kw["model"], device=kw["device"], batch_size=kw["batch_size"])
    return cls(model=kw["model"])  # a plugin backend: configured through its own environment


def _validate(**o: Any) -> None:
    """Check every option value before any work; the first bad one is a usage error naming it."""

    def check(ok: bool, option: str, need: str) -> None:
        if not ok:
            value = o[option.lstrip("-").replace("-", "_")]
            raise UsageError(f"{option} must be {need}, got {value!r}")

    for url in (o["base_url"] or []) if o["backend"] == "openai" else []:
        from urllib.parse import urlparse

        parsed = urlparse(url)
        if not (parsed.scheme in ("http", "https") and bool(parsed.netloc)):
            raise UsageError(f"--base-url must be an http:// or https:// URL (e.g. http://localhost:8000/v1), got {url!r}")
    check(o["concurrency"] >= 1, "--concurrency", ">= 1")
    check(o["batch_size"] >= 1, "--batch-size", ">= 1")
    check(o["timeout"] > 0, "--timeout", "> 0 seconds")
    check(o["connect_timeout"] > 0, "--connect-timeout", "> 0 seconds")
    check(o["deadline"] is None or o["deadline"] > 0, "--deadline", "> 0 seconds")
    check(o["max_retries"] >= 0, "--max-retries", ">= 0")
    check(o["limit"] is None or o["limit"] >= 1, "--limit", ">= 1")
    check(o["temperature"] is None or 0 <= o["temperature"] <= 2, "--temperature", "in [0, 2]")
    check(o["top_p"] is None or 0 < o["top_p"] <= 1, "--top-p", "in (0, 1]")
    check(o["max_tokens"] is None or o["max_tokens"] >= 1, "--max-tokens", ">= 1")
    check(o["repetition_penalty"] is None or o["repetition_penalty"] >= 0, "--repetition-penalty", ">= 0")
    check(o["samples"] >= 1, "--samples", ">= 1")
    check(o["reask"] >= 0, "--reask", ">= 0")
    check(0 <= o["max_failed"] <= 1, "--max-failed", "a fraction in [0, 1]")
    check(o["max_rounds"] >= 1, "--max-rounds", ">= 1")
    check(0 <= o["geval_min_mass"] <= 1, "--geval-min-mass", "in [0, 1]")
    check(o["geval_fallback"] in ("samples", "error"), "--geval-fallback", "'samples' or 'error'")
    check(o["system_prompt"] in ("role", "fold"), "--system-prompt", "'role' or 'fold'")


def print_summary(summary: dict[str, Any]) -> None:
    """The run summary as terminal tables: counts, unscored reasons, score distribution, bias audit."""
    from rich.markup import escape
    from rich.table import Table

    from evalign.judges.parsing import REASONS

    calls = summary["calls"]
    t = Table(title=f"Judge {escape(summary['column'])} ({summary['items']} items)", title_justify="left",
              header_style="bold")
    t.add_column("")
    t.add_column("count", justify="right")
    for k in ("scored", "unscored", "skipped"):
        t.add_row(k, str(summary[k]))
    t.add_row("calls made", str(calls["new"]))
    t.add_row("calls from cache", str(calls["cached"]))
    t.add_row("re-asked", str(calls["reasked"]))
    t.add_row("failed (backend)", str(calls["failed"]))
    t.add_row("HTTP retries", str(calls["http_retries"]))
    for method, n in sorted(summary.get("methods", {}).items()):
        t.add_row(f"G-Eval method {method}", str(n))
    console.print(t)
    if summary.get("endpoints"):
        ep = Table(title="Endpoints", title_justify="left", header_style="bold")
        for c in ("base URL", "calls", "failed attempts", "taken out", "healthy at the end"):
            ep.add_column(c, justify="left" if c == "base URL" else "right")
        for e in summary["endpoints"]:
            ep.add_row(escape(e["base_url"]), str(e["calls"]), str(e["failures"]), str(e["taken_out"]),
                       "yes" if e["healthy"] else "no")
        console.print(ep)
    if summary.get("rounds"):
        r = Table(title="Ranking rounds used (pairs)", title_justify="left", header_style="bold")
        r.add_column("rounds")
        r.add_column("pairs", justify="right")
        for k, v in summary["rounds"].items():
            r.add_row(k, str(v))
        console.print(r)
    if summary.get("errors"):
        e = Table(title="Backend errors (after retries)", title_justify="left", header_style="bold")
        e.add_column("calls", justify="right")
        e.add_column("message")
        for msg, n in list(summary["errors"].items())[:5]:
            e.add_row(str(n), escape(msg))
        console.print(e)
    if summary["unscored_by_reason"] or calls["unscored_by_reason"]:
        r = Table(title="Unscored, by reason", title_justify="left", header_style="bold")
        r.add_column("reason")
        r.add_column("items", justify="right")
        r.add_column("calls", justify="right")
        r.add_column("meaning")
        reasons = dict.fromkeys([*summary["unscored_by_reason"], *calls["unscored_by_reason"]])
        for k in reasons:
            r.add_row(k, str(summary["unscored_by_reason"].get(k, 0)), str(calls["unscored_by_reason"].get(k, 0)),
                      REASONS.get(k, ""))
        console.print(r)
    if summary["distribution"]:
        pairs = summary.get("kind") == "verdict"
        title = "Verdicts" if pairs else "Score distribution" + ("" if summary["higher_is_better"] else " (lower is better)")
        d = Table(title=title, title_justify="left", header_style="bold")
        d.add_column("verdict" if pairs else "score")
        d.add_column("items", justify="right")
        for k, v in summary["distribution"].items():
            d.add_row(k, str(v))
        d.add_row("mean code (+1 = A)" if pairs else "mean", fmt_value(summary.get("mean")))
        console.print(d)
    b = Table(title="Bias audit", title_justify="left", header_style="bold")
    b.add_column("check")
    b.add_column("value", justify="right")
    b.add_column("n", justify="right")
    length = summary["bias"]["length"]
    unit = length["unit"]
    what = "verdict vs length(A) - length(B)" if "longer_wins" in length else f"score vs length ({unit})"
    ov = length["overall"]
    b.add_row(f"Spearman {what}", fmt_value(ov["spearman"], 3), str(ov["n"]))
    b.add_row(f"Kendall {what}", fmt_value(ov["kendall"], 3), str(ov["n"]))
    for g, c in length.get("by_human", {}).items():
        b.add_row(f"Spearman score vs length | human = {g}", fmt_value(c["spearman"], 3), str(c["n"]))
    if "longer_wins" in length:
        b.add_row("longer response wins", fmt_value(length["longer_wins"], 3), str(length["n_decided"]))
    swap = summary["bias"].get("order_swap")
    if swap:
        b.add_row("order-swap agreement", fmt_value(swap["agreement"], 3), str(swap["n_pairs"]))
        b.add_row("first position picked", fmt_value(swap["first_position_rate"], 3), str(swap["n_verdicts"]))
    console.print(b)
    err_console.print(f"[dim]{escape(summary['signature'])}[/dim]", highlight=False)
