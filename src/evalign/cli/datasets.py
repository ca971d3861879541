"""``evalign datasets``: list the human-judgment datasets, and export one as a table file."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.text import Text

from evalign.cli.common import CliError, console, emit_json, err_console
from evalign.cli.dataset_options import DATA_DIR, LABELS
from evalign.datasets import list_datasets
from evalign.datasets.base import ANNOTATOR_KINDS
from evalign.datasets.catalogue import (
    CATALOGUE,
    TABLE_KINDS,
    DatasetEntry,
    label_set,
    load_dataset_spec,
    table_of,
)
from evalign.errors import UsageError
from evalign.io import STDIO, refuse_output_onto_inputs, write_json_atomic, write_table
from evalign.io.data_dir import default_data_dir


def _data_root(data_dir: Path | None) -> Path:
    return Path(data_dir).expanduser().absolute() if data_dir is not None else default_data_dir()


def _files_found(entry: DatasetEntry, root: Path) -> bool | None:
    """Whether the set folder of a dataset with external files is in ``root`` (None: no such files)."""
    if not entry.folder:
        return None
    return (root / entry.folder).is_dir() or (root.name == entry.folder and root.is_dir())


def catalogue_rows(data_dir: Path | None = None) -> list[dict[str, Any]]:
    """One record per registered dataset (JSON-ready), in the order of :data:`CATALOGUE`; datasets
    registered by others without a catalogue entry are listed with what is unknown left empty."""
    root = _data_root(data_dir)
    names = [n for n in CATALOGUE if n in list_datasets()] + [n for n in list_datasets() if n not in CATALOGUE]
    rows = []
    for name in names:
        e = CATALOGUE.get(name) or DatasetEntry(name, (), "", "", False)
        found = _files_found(e, root)
        rows.append(
            {
                "name": name,
                "tables": list(e.tables),
                "labels": e.labels,
                "licence": e.licence,
                "citation": e.citation or None,
                "annotator_kind": e.annotator_kind,
                "annotator_basis": e.annotator_basis or None,
                "alt_test_epsilon": ANNOTATOR_KINDS.get(e.annotator_kind) if e.annotator_kind else None,
                "has_texts": e.has_texts,
                "ships_with_evalign": e.ships,
                "needs_files": (not e.ships) or any(v.needs_files for v in e.variants.values()),
                "where": e.where or None,
                "folder": str(root / e.folder) if e.folder else None,
                "files_found": found,
                "label_sets": [
                    {"name": k, "kind": ls.kind, "description": ls.description, "annotators": ls.annotators,
                     "column": ls.column, "pref": list(ls.pref), "default": i == 0}
                    for i, (k, ls) in enumerate(e.label_sets.items())
                ],
                "variants": [
                    {"name": f"{name}:{k}", "description": v.description, "needs_files": v.needs_files or not e.ships}
                    for k, v in e.variants.items()
                ],
            }
        )
    return rows


def _print_catalogue(rows: list[dict[str, Any]], root: Path) -> None:
    def wrapped(text: str) -> None:
        # words wrap at the console width with a hanging indent; paths and URLs are never cut
        lines = textwrap.fill(text, width=max(console.width, 40), subsequent_indent="      ",
                              break_long_words=False, break_on_hyphens=False)
        console.print(Text(lines), highlight=False, soft_wrap=True)

    for r in rows:
        if r["ships_with_evalign"]:
            ships = "ships with evalign"
            if r["needs_files"]:
                ships += "; some variants need files"
        else:
            ships = "needs files"
        wrapped(f"{r['name']}  {'+'.join(r['tables'])}  {ships}  {r['licence']}")
        wrapped(f"  labels: {r['labels']}")
        kind = f"{r['annotator_kind']} (Alt-Test epsilon {r['alt_test_epsilon']})" if r["annotator_kind"] else \
            "no kind set"
        wrapped(f"  annotators: {kind}" + (f": {r['annotator_basis']}" if r["annotator_basis"] else ""))
        if not r["has_texts"]:
            wrapped("  texts: none (only the labels and shipped columns: meta, not judge or score)")
        for ls in r["label_sets"]:
            default = " (default)" if ls["default"] and len(r["label_sets"]) > 1 else ""
            wrapped(f"  --labels {ls['name']}{default}: {ls['description']}; {ls['annotators']}")
        if r["citation"]:
            wrapped(f"  cite: {r['citation']}")
        for v in r["variants"]:
            star = " *" if v["needs_files"] and r["ships_with_evalign"] else ""
            wrapped(f"  variant {v['name']}: {v['description']}{star}")
        if r["where"]:
            state = "found" if r["files_found"] else "MISSING"
            wrapped(f"  files: {state} in {r['folder']}")
            wrapped(f"  get them: {r['where']}")
    wrapped(f"Data folder: {root} (--data-dir, else $EVALIGN_DATA_DIR, else ~/.cache/evalign/data). "
            "* = needs files. Use a variant as --dataset NAME:VARIANT, a label set as --labels NAME.")


def dataset_files(name: str, data_dir: Path | None) -> list[Path]:
    """The files a dataset may be read from: those in its folder of the data folder and in its bundled
    folder (``NAME`` of ``NAME:VARIANT``; what ``datasets export -o`` must not replace)."""
    from evalign.datasets.base import bundled_path

    entry = CATALOGUE.get(name.partition(":")[0])
    if entry is None:
        return []
    root = _data_root(data_dir)
    folders = [bundled_path(entry.name)]
    if entry.folder:
        folders += [root / entry.folder, *([root] if root.name == entry.folder else [])]
    return [f for d in folders if d.is_dir() for f in d.rglob("*") if f.is_file()]


def write_system_human(ds: Any, out: Path) -> Path:
    """Write a dataset's system-level human values beside the exported item table ``out``, as
    ``<stem>.system_human.json`` (``{"description", "lower_is_better", "values": {system: value}}``,
    readable by ``--system-human``). Returns the path."""
    path = out.parent / f"{out.stem}.system_human.json"
    lower = not ds.system_human_higher_is_better
    write_json_atomic(path, {
        "description": f"system-level human values of dataset {ds.name} ({'lower' if lower else 'higher'} is better)",
        "lower_is_better": lower,
        "values": dict(ds.system_human),
    })
    return path


AS_JSON: Any = typer.Option(False, "--json", help="Print machine-readable JSON.")
NAME: Any = typer.Argument(..., help="Dataset NAME or NAME:VARIANT.")
OUT: Any = typer.Option(..., "--out", "-o", help="Table file to write (.jsonl, .csv or .parquet).")
AS: Any = typer.Option(
    None,
    "--as",
    help="items (the item table), pairs (the pair table) or pairs-as-items (both sides of each "
    "pair as item rows, for score/judge). Default: items if the dataset has them, else pairs.",
)
AGAINST: Any = typer.Option(
    None, "--against", help="With --as pairs: pair every system of the item table with this SYSTEM (or 'all': every "
    "two systems), for `judge` in relative mode and `leaderboard`.")
EXPORT_JSON: Any = typer.Option(False, "--json", help="Print what was written as JSON.")


def register(app: typer.Typer) -> None:
    """Add ``datasets`` (list) and ``datasets export`` to ``app``."""
    group = typer.Typer(
        help="List the human-judgment datasets, or export one as a table for the other verbs.",
        no_args_is_help=False,
        invoke_without_command=True,
    )
    group.callback()(datasets_cmd)
    group.command("export")(export_cmd)
    app.add_typer(group, name="datasets")


def datasets_cmd(ctx: typer.Context, data_dir: Path = DATA_DIR, as_json: bool = AS_JSON) -> None:
    """Every dataset: its tables and labels, licence, whether it ships with evalign or needs files
    (and where to get them), and its variants."""
    if ctx.invoked_subcommand is not None:
        return
    rows = catalogue_rows(data_dir)
    if as_json:
        emit_json({"data_dir": str(_data_root(data_dir)), "datasets": rows})
        return
    _print_catalogue(rows, _data_root(data_dir))


def export_cmd(name: str = NAME, out: Path = OUT, as_: str = AS, against: str = AGAINST, data_dir: Path = DATA_DIR,
               labels: str = LABELS, as_json: bool = EXPORT_JSON) -> None:
    """Write a dataset's item table or pair table, ready for `score`, `judge`, `meta` and `report`."""
    if as_ is not None and as_ not in TABLE_KINDS:
        raise CliError(f"--as must be one of {', '.join(TABLE_KINDS)}, got '{as_}'")
    to_stdout = str(out) == STDIO
    if to_stdout and as_json:
        raise UsageError("--json: not with -o - (standard output carries the table)")
    refuse_output_onto_inputs({"-o": out, "-o (its system-level human values)": out.parent / f"{out.stem}.system_human.json"
                               if not to_stdout else None}, {"NAME (a file of the dataset)": dataset_files(name, data_dir)})
    info, ds = export_dataset(name, out, as_, data_dir, against=against, labels=labels)
    if as_json:
        emit_json(info)
        return
    say = err_console if to_stdout else console  # with -o -, stdout carries only the table
    say.print(escape(f"wrote {out} ({info['rows']} rows, {info['as']}; columns: {', '.join(info['columns'])})"),
                  highlight=False, soft_wrap=True)
    if to_stdout and ds.system_human and info["as"] == "items":
        say.print(escape(f"note: {name}'s system-level human values are written beside an output file only "
                         "(give -o FILE)"), highlight=False, soft_wrap=True)
    if "system_human" in info:
        flag = "" if ds.system_human_higher_is_better else " --lower-is-better"
        console.print(escape(f"wrote {info['system_human']} (system-level human values: "
                             f"meta {out} --system-human {info['system_human']}{flag} -m METRIC)"), highlight=False, soft_wrap=True)


def export_dataset(name: str, out: Path, as_: str | None, data_dir: Path | None,
                   against: str | None = None, labels: str | None = None) -> tuple[dict[str, Any], Any]:
    """Write the table of dataset ``name`` (``as_``: a table kind, default items if it has them, else
    pairs; ``labels``: a label set, whose table is the default: pairs for preferences, else items;
    ``against``: pairs between the item table's systems, see :func:`table_of`) to ``out``, with
    its system-level human values beside an item table. Returns (what was written, the dataset)."""
    ls = label_set(name, labels) if labels is not None else None
    if ls is not None:
        wanted = ("pairs", "pairs-as-items") if ls.kind == "pairs" else ("items",)
        if as_ is not None and as_ not in wanted:
            raise CliError(f"--labels {labels} is in the {'pair' if ls.kind == 'pairs' else 'item'} table: "
                           f"--as {' or '.join(wanted)}, not {as_}")
        as_ = as_ or wanted[0]
    ds = load_dataset_spec(name, data_dir)
    kind = as_ or ("pairs" if against is not None or ds.items is None else "items")
    table = table_of(ds, as_=kind, against=against)
    write_table(table, out)
    info: dict[str, Any] = {"dataset": name, "as": kind, "against": against, "rows": len(table),
                            "columns": list(map(str, table.columns)), "out": str(out)}
    if labels is not None:
        info["labels"] = labels
    if kind == "items" and ds.system_human and str(out) != STDIO:
        info["system_human"] = str(write_system_human(ds, out))
    return info, ds
