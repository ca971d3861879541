"""``evalign cache info|clear|batches``: where the cache is, what it holds, emptying it, and the provider
batches recorded in it (``--batch-api``)."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.markup import escape

from evalign.cache import cache_stats, clear_cache, default_cache_path
from evalign.cli.common import AS_JSON, CliError, console, emit_json, err_console


def human_size(n: int) -> str:
    """A byte count as ``"12.3 MB"`` (powers of 1,000; ``"0 B"`` for 0)."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def cache_created_notice(existed_before: bool) -> str | None:
    """The one line said when a run has just created the cache (None when it existed before or
    still does not exist)."""
    path = default_cache_path()
    if existed_before or not path.is_file():
        return None
    return f"created the evalign cache at {path} (see `evalign cache info`; set EVALIGN_CACHE to move it)"


def info_cmd(as_json: bool = AS_JSON) -> None:
    """Location, size on disk and entries by kind."""
    st = cache_stats()
    if as_json:
        emit_json(st)
        return
    _print_info(st)


def clear_cmd(
    kind: str = typer.Option(None, "--kind", help="Clear only this kind (namespace), e.g. embedding or judge."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Clear without asking."),
    drop_batches: bool = typer.Option(False, "--drop-batches", help="Also delete the records of provider batches "
                                      "still in flight (their billed work at the provider can then no longer be "
                                      "collected; cancel them first with `evalign cache batches --cancel`)."),
    as_json: bool = AS_JSON,
) -> None:
    """Delete cached entries (all, or one kind). Asks for confirmation unless --yes. Records of provider
    batches still in flight are kept unless --drop-batches."""
    st = cache_stats()
    if kind is not None and kind not in st["by_namespace"]:
        known = ", ".join(st["by_namespace"]) or "none"
        raise CliError(f"the cache has no entries of kind '{kind}' (kinds: {known})")
    n = st["by_namespace"][kind]["entries"] if kind else st["entries"]
    what = f"{n} {kind} entries" if kind else f"all {n} entries"
    if n and not yes:
        if as_json:
            raise CliError("--json needs --yes (no confirmation prompt)")
        if not typer.confirm(f"Delete {what} from {st['path']}?", default=False, err=True):
            err_console.print("nothing deleted")
            raise typer.Exit(1)
    deleted = clear_cache(kind)
    kept, dropped = _clear_batches(drop_batches) if kind is None and st["exists"] else (0, 0)
    after = cache_stats()
    if as_json:
        emit_json({"deleted": deleted, "kind": kind, "path": after["path"], "size_bytes": after["size_bytes"],
                   "batches_in_flight_kept": kept, "batches_dropped": dropped})
        return
    console.print(escape(f"deleted {deleted} entries from {after['path']} (now {human_size(after['size_bytes'])})"),
                  highlight=False, soft_wrap=True)
    if kept:
        err_console.print(escape(f"kept the records of {kept} provider batch(es) still in flight (a rerun collects "
                                 "them); --drop-batches deletes them, which leaves their billed work at the provider"),
                          highlight=False, soft_wrap=True)
    if dropped:
        err_console.print(escape(f"dropped the records of {dropped} provider batch(es) still in flight: their work at "
                                 "the provider is billed and can no longer be collected"), highlight=False, soft_wrap=True)


def _clear_batches(drop: bool) -> tuple[int, int]:
    """Delete the collected batch records (and with ``drop`` those in flight); ``(kept, dropped)`` in flight."""
    from evalign.backends.batch_store import BatchStore

    store = BatchStore()
    try:
        in_flight = len(store.records(in_flight_only=True))
        store.clear(in_flight=drop)
    finally:
        store.close()
    return (0, in_flight) if drop else (in_flight, 0)


def batches_cmd(
    cancel: bool = typer.Option(False, "--cancel", help="Cancel every batch still in flight at its provider (the "
                                "key read from the variable whose name the record keeps)."),
    as_json: bool = AS_JSON,
) -> None:
    """The provider batches recorded by --batch-api runs: provider, id, state, lines done / failed, age."""
    from evalign.backends.batch_store import BatchStore

    if not default_cache_path().is_file():
        recs: list[Any] = []
        cancelled: list[Any] = []
    else:
        store = BatchStore()
        try:
            if cancel:
                from evalign.backends.batch_adapters import cancel_in_flight

                cancelled = cancel_in_flight(store)
            else:
                cancelled = []
            recs = store.records()
        finally:
            store.close()
    if as_json:
        emit_json({"batches": [r.to_dict() for r in recs],
                   "cancelled": [{"no": r.no, "batch_id": r.batch_id, "state": s} for r, s in cancelled]})
        return
    for r, state in cancelled:
        console.print(escape(f"cancel {r.provider} {r.batch_id}: {state}"), highlight=False, soft_wrap=True)
    if not recs:
        console.print("no provider batches recorded")
        return
    now = time.time()
    for r in recs:
        flight = "collected" if r.collected else "in flight"
        console.print(escape(f"{r.provider} {r.batch_id or '(submitting)'} {r.state} ({flight}): {r.lines} lines, "
                             f"{r.done} done, {r.failed} failed, age {_age(now - r.created)} [{r.url}, key "
                             f"${r.key_env or '-'}]"), highlight=False, soft_wrap=True)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def register(app: typer.Typer) -> None:
    """Add ``cache info`` and ``cache clear`` to ``app``."""
    group = typer.Typer(help="Show what the cache holds (embeddings, judge outputs) or clear it.", no_args_is_help=True)
    group.command("info")(info_cmd)
    group.command("clear")(clear_cmd)
    group.command("batches")(batches_cmd)
    app.add_typer(group, name="cache")


def _print_info(st: dict[str, Any]) -> None:
    console.print(escape(f"location: {st['path']}"), highlight=False, soft_wrap=True)
    if not st["exists"]:
        console.print("no cache yet (it is created by the first run that stores embeddings or judge outputs)")
        return
    console.print(escape(f"size: {human_size(st['size_bytes'])}, {st['entries']} entries"), highlight=False, soft_wrap=True)
    for ns, d in st["by_namespace"].items():
        console.print(escape(f"  {ns}: {d['entries']} entries, {human_size(d['value_bytes'])} of values"),
                      highlight=False, soft_wrap=True)
    console.print("move it with EVALIGN_CACHE=<file>; clear it with `evalign cache clear`", highlight=False, soft_wrap=True)
