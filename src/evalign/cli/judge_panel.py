"""``evalign judge ITEMS --mode pairwise --panel-member NAME=SPEC ...``: a live panel of judges, called in
order, each member in one wave over the items whose verdict is still open (the work is
:func:`evalign.evaluate.live_panel.run_live_panel`; the rules :mod:`evalign.rank.panel`). ``--panel-all``
calls every member on every item. Every call is cached, so a run that stops resumes by running it again.
With ``--batch-api`` each member's wave is one provider batch submission (the third member's batch of a
majority of three holds only the items the first two left open); the batches are recorded in the cache, so a
rerun re-attaches to them."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from evalign.cli.common import CliError, check_outputs, console, emit_json, err_console

PANEL_MEMBER: Any = typer.Option(None, "--panel-member", help="NAME=KIND:MODEL[@URL][,KEY=VALUE...]: a member of a "
                                 "live panel, in calling order (repeatable; the commas belong to the spec; "
                                 "template=NAME, price=IN/OUT its own).")
PANEL_ALL: Any = typer.Option(False, "--panel-all", help="With --panel-member: call every member on every item (no "
                              "early stopping).")
#: ``evalign judge`` options that name the one judge's backend: a panel's members carry their own
_BACKEND_OPTIONS = ("model", "base_url")
FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")


def panel_cmd(o: Any, load_table: Any, make_spec: Any, judge_mode: Any) -> None:
    """Run the live panel of ``o.panel_member``; ``load_table``, ``make_spec`` and ``judge_mode``: the
    judge command's table reader, judge spec and mode (``(options, ...) -> ...``)."""
    from evalign.backends import open_backend
    from evalign.cache import Cache
    from evalign.cli.batch_options import batch_block, with_batch
    from evalign.cli.panel_options import calibration_weights_of, panel_settings
    from evalign.evaluate.live_panel import check_members, parse_member, run_live_panel
    from evalign.io import write_json_atomic, write_table
    from evalign.judges.runner import run_judge
    from evalign.judges.spec import JudgeSpec, make_judge
    from evalign.judges.usage import price_book

    given = [f"--{k.replace('_', '-')}" for k in _BACKEND_OPTIONS if getattr(o, k, None)]
    if given:
        raise CliError(f"--panel-member names each member's backend: {', '.join(given)} do not apply")
    check_outputs(("-o", o.out, FORMATS), stdout_used=o.as_json)
    members = [parse_member(x) for x in o.panel_member]
    names = [m.name for m in members]
    weights = calibration_weights_of(o.panel_calibration, names, graded=False) if o.panel_calibration else None
    settings = panel_settings(o.panel_rule, o.panel_tie, o.panel_min, o.panel_soft, weights)
    check_members(members, settings)
    if o.batch_api:
        check_batch_members(members)
    base = JudgeSpec(mode=judge_mode(o), template=o.template, constrain=o.constrain)
    if not base.judge_class.pairwise:
        raise CliError("--panel-member: a live panel judges pairs (--mode pairwise)")
    table = load_table(o, True)
    cache = Cache.for_command(o.no_cache)
    book = price_book(o.prices)
    batches: dict[str, dict[str, Any]] = {}

    def run_wave(j: int, rows: Any) -> Any:
        m = members[j]
        spec = make_spec(o, JudgeSpec(mode=base.mode, template=m.template or o.template, constrain=o.constrain))
        judge = make_judge(spec.evolve(column=m.name))
        partial = Path(f"{o.out}.{m.name}.partial.jsonl") if o.out else None
        with open_backend(m.backend, name=m.name) as inner:
            price = m.price or book.for_model(inner.identity().get("model"), m.backend.model)
            if not o.as_json:
                err_console.print(f"[dim]member {j + 1} of {len(members)}: {escape(m.name)} "
                                  f"({escape(m.backend.described)}) on {len(rows)} items"
                                  f"{' (one batch wave)' if o.batch_api else ''}[/dim]", highlight=False)
            be = with_batch(inner, o, quiet=o.as_json)  # --batch-api: this member's wave is one submission
            run = run_judge(rows, judge, be, cache=cache, partial_path=partial, price=price)
            block = batch_block(be)
            if block is not None:
                batches[m.name] = block
        if partial is not None:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        return run

    combined, summary = run_live_panel(table, names, settings, run_wave, call_all=o.panel_all,
                                       column=o.name or "panel")
    if o.batch_api:  # per member: its batches, lines, failed / retried lines (a member not called: none)
        for r in summary["members"]:
            r["batch"] = batches.get(r["member"])
        summary["batch"] = {k: sum(b[k] for b in batches.values()) for k in ("batches", "lines", "failed_lines",
                                                                            "retried_lines")}
    if o.out:
        write_table(combined, o.out)
        summary["out"] = str(o.out)
        write_json_atomic(Path(f"{o.out}.summary.json"), summary)
    if o.as_json:
        emit_json(summary)
        return
    show_panel_summary(summary)
    if o.out:
        console.print(f"wrote {escape(str(o.out))} and {escape(str(o.out))}.summary.json")


def check_batch_members(members: Any) -> None:
    """``--batch-api`` with ``--panel-member``: every member on a backend with a batch API and one URL,
    refused before any member is called (a :class:`UsageError` naming the member)."""
    from evalign.backends.batch_adapters import batch_providers
    from evalign.errors import UsageError

    for m in members:
        if m.backend.kind not in batch_providers() or len(m.backend.url) > 1:
            what = "several URLs" if len(m.backend.url) > 1 else f"the {m.backend.kind} backend"
            raise UsageError(f"--batch-api: --panel-member {m.name} is on {what}, which has no batch API (it takes "
                             f"{', '.join(batch_providers())}, one URL)")


def show_panel_summary(summary: dict[str, Any]) -> None:
    """Per member: items sent and not called, calls made / from the cache / failed / saved, cost; the totals."""
    t = Table(title=f"Panel {summary['panel']} ({summary['rule']}"
                    + (f", tie {summary['tie']}" if summary["rule"] in ("majority", "weighted") else "")
                    + f", min {summary['min']}; early stopping {'on' if summary['early_stopping'] else 'off'})")
    for c in ("member", "items", "not called", "calls", "cached", "failed", "calls saved", "cost"):
        t.add_column(c, justify="left" if c == "member" else "right")
    for r in summary["members"]:
        t.add_row(escape(r["member"]), str(r["sent"]), str(r["not_called"]), str(r["calls"]), str(r["cached"]),
                  str(r["failed"]), "-" if r["calls_saved"] is None else str(r["calls_saved"]),
                  "-" if r["cost"] is None else f"{r['cost']:.4f}")
    t.add_row("all", str(summary["items"]), str(summary["member_items_saved"]), str(summary["calls"]),
              str(summary["cached"]), str(sum(r["failed"] for r in summary["members"])), str(summary["calls_saved"]),
              "-" if summary["cost"] is None else f"{summary['cost']:.4f}")
    console.print(t)
    d = summary["distribution"]
    console.print(escape(f"verdicts: A {d['A']}, B {d['B']}, tie {d['tie']}, none {d['unparseable']} "
                         f"(confidence: {summary['confidence_source']})"), highlight=False)
    if summary.get("batch"):
        b = summary["batch"]
        console.print(f"batch API: {b['batches']} batches, {b['lines']} lines ({b['failed_lines']} failed, "
                      f"{b['retried_lines']} retried)", highlight=False)
    if summary["below_min"]:
        err_console.print(f"note: {summary['below_min']} items with fewer than {summary['min']} members' verdicts: no "
                          "verdict", highlight=False)


__all__ = ["PANEL_ALL", "PANEL_MEMBER", "check_batch_members", "panel_cmd", "show_panel_summary"]
