"""``evalign cache info|clear``: where the cache is, what it holds, and emptying it."""

from __future__ import annotations

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
    as_json: bool = AS_JSON,
) -> None:
    """Delete cached entries (all, or one kind). Asks for confirmation unless --yes."""
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
    after = cache_stats()
    if as_json:
        emit_json({"deleted": deleted, "kind": kind, "path": after["path"], "size_bytes": after["size_bytes"]})
        return
    console.print(escape(f"deleted {deleted} entries from {after['path']} (now {human_size(after['size_bytes'])})"),
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``cache info`` and ``cache clear`` to ``app``."""
    group = typer.Typer(help="Show what the cache holds (embeddings, judge outputs) or clear it.", no_args_is_help=True)
    group.command("info")(info_cmd)
    group.command("clear")(clear_cmd)
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
