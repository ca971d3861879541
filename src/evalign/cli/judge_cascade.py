"""``evalign judge --cascade CAL.json``: run a calibrated cascade of judges on new items, each judge
called only on what the earlier ones left (the work is :func:`evalign.evaluate.cascade.run_cascade`);
the decided items (``-o``, with the judge that gave each verdict) and the items left for people
(``--rest``, a pair or item table ``evalign annotate`` reads), as ``evalign escalate`` writes them."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from evalign.cli.common import CliError, check_outputs, console, emit_json, err_console

#: ``evalign judge`` options that name a judge: with ``--cascade`` the judges are the calibration's
_JUDGE_OPTIONS = ("model", "template", "base_url", "rubric", "rubric_column", "name", "grammar", "top_logprobs")
FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")


def summary_spec(o: Any, mode: str, options: dict[str, Any]) -> dict[str, Any]:
    """What rebuilds the judge of an ``evalign judge`` call (stored in its summary, read by ``evalign
    meta --save-calibration``): the judge's ``mode``, its constructor ``options`` and the backend as a
    :class:`~evalign.backends.BackendSpec` dict (URLs without credentials, the key's variable name)."""
    from evalign.backends import BackendSpec

    backend = {"api_key_env": o.api_key_env, "system_prompt": o.system_prompt, "concurrency": o.concurrency,
               "timeout": o.timeout, "connect_timeout": o.connect_timeout, "idle_timeout": o.idle_timeout,
               "max_retries": o.max_retries}
    if o.backend == "hf":
        backend.update(device=o.device, batch_size=o.batch_size)
    if o.constraint_format != "auto":
        backend["constraint_format"] = o.constraint_format
    spec = BackendSpec(kind=o.backend, model=o.model or "-", url=tuple(o.base_url or ()),
                       options={k: v for k, v in backend.items() if v is not None})
    return {"judge": mode, "options": {k: v for k, v in options.items() if v is not None}, "backend": spec.to_dict()}


def cascade_cmd(o: Any, load_table: Any) -> None:
    """``evalign judge FILE --cascade CAL.json -o decided.jsonl --rest to_people.jsonl [--audit F]``;
    ``load_table``: the judge command's table reader (``(options, pairwise) -> table``)."""
    given = [f"--{k.replace('_', '-')}" for k in _JUDGE_OPTIONS if getattr(o, k, None)]
    if given:
        raise CliError(f"--cascade runs the judges its calibration file names: {', '.join(given)} do not apply")
    if o.out is None or o.rest is None:
        raise CliError("--cascade writes the decided items (-o FILE) and those left for people (--rest FILE)")
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(audit=o.audit, seed=o.seed)  # (the seed of the audit draw)
    check_outputs(("-o", o.out, FORMATS), ("--rest", o.rest, FORMATS), stdout_used=o.as_json)
    from evalign.backends import BackendSpec, open_backend
    from evalign.cache import Cache
    from evalign.cli.batch_options import with_batch
    from evalign.cli.escalate import show_summary
    from evalign.evaluate.cascade import check_signature, run_cascade, stage_specs
    from evalign.evaluate.escalate import read_calibration
    from evalign.io import write_table
    from evalign.judges.runner import decide_reference, run_judge
    from evalign.judges.spec import get_judge

    cal = read_calibration(o.cascade)
    specs = stage_specs(cal, str(o.cascade))
    first = get_judge(specs[0]["judge"], **specs[0]["options"])
    table = load_table(o, first.pairwise)
    cache = Cache.for_command(o.no_cache)

    def run_stage(k: int, judge: Any, spec: dict[str, Any], rows: Any) -> Any:
        entry = cal["judges"][k]
        with open_backend(BackendSpec.from_dict(spec["backend"]), name=entry["column"]) as be:
            check_signature(judge, be.identity(), decide_reference(judge, rows), entry, str(o.cascade))
            if not o.as_json:
                err_console.print(f"[dim]stage {k + 1}: {escape(entry['column'])} on {len(rows)} items[/dim]",
                                  highlight=False)
            return run_judge(rows, judge, with_batch(be, o, quiet=o.as_json), cache=cache)  # --batch-api: stage by stage

    source = str(o.file or o.dataset)
    decided, people, summary = run_cascade(cal, table, run_stage, audit=o.audit, seed=o.seed or 0, source=source,
                                           cal_source=str(o.cascade))
    write_table(decided, o.out)
    write_table(people, o.rest)
    if o.as_json:
        emit_json(summary)
        return
    for k, st in enumerate(summary["stages"]):
        console.print(escape(f"stage {k + 1} ({st['judge']}): " + (st["note"] or (
            f"judged {st['sent']} items ({st['calls']} calls made, {st['cached']} from the cache), "
            f"decided {st['decided']}"))), highlight=False)
    show_summary(summary, cal)
    err_console.print(f"[dim]written: {escape(str(o.out))} (decided), {escape(str(o.rest))} (to people)[/dim]",
                      highlight=False)


__all__ = ["cascade_cmd", "summary_spec"]
