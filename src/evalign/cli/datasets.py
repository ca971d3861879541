"""``evalign datasets``: list the human-judgment datasets, and export one as a table file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import console, emit_json
from evalign.cli.dataset_options import CATALOGUE, DATA_DIR, TABLE_KINDS, DatasetEntry


def _data_root(data_dir: Path | None) -> Path:
    from evalign.datasets._external import default_data_dir

    return Path(data_dir).expanduser().absolute() if data_dir is not None else default_data_dir()


def _files_found(entry: DatasetEntry, root: Path) -> bool | None:
    """Whether the set folder of a dataset with external files is in ``root`` (None: no such files)."""
    if not entry.folder:
        return None
    return (root / entry.folder).is_dir() or (root.name == entry.folder and root.is_dir())


def catalogue_rows(data_dir: Path | None = None) -> list[dict[str, Any]]:
    """One record per registered dataset (JSON-ready), in the order of :data:`CATALOGUE`; datasets
    registered by others without a catalogue entry are listed with what is unknown left empty."""
    from evalign.datasets import list_datasets

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
                "ships_with_evalign": e.ships,
                "needs_files": (not e.ships) or any(v.needs_files for v in e.variants.values()),
                "where": e.where or None,
                "folder": str(root / e.folder) if e.folder else None,
                "files_found": found,
                "variants": [
                    {"name": f"{name}:{k}", "description": v.description, "needs_files": v.needs_files or not e.ships}
                    for k, v in e.variants.items()
                ],
            }
        )
    return rows


def _print_catalogue(rows: list[dict[str, Any]], root: Path) -> None:
    for r in rows:
        if r["ships_with_evalign"]:
            ships = "ships with evalign"
            if r["needs_files"]:
                ships += "; some variants need files"
        else:
            ships = "needs files"
        head = f"[bold]{escape(r['name'])}[/bold]  {escape('+'.join(r['tables']))}  {escape(ships)}  {escape(r['licence'])}"
        console.print(head, highlight=False)
        console.print(f"  labels: {escape(r['labels'])}", highlight=False)
        for v in r["variants"]:
            star = " *" if v["needs_files"] and r["ships_with_evalign"] else ""
            console.print(f"  variant {escape(v['name'])}: {escape(v['description'])}{star}", highlight=False)
        if r["where"]:
            state = "found" if r["files_found"] else "MISSING"
            console.print(f"  files: {state} in {escape(str(r['folder']))}", highlight=False)
            console.print(f"  get them: {escape(r['where'])}", highlight=False)
    console.print(
        escape(f"Data folder: {root} (--data-dir, else $EVALIGN_DATA_DIR, else ~/.cache/evalign/data). "
               "* = needs files. Use a variant as --dataset NAME:VARIANT."),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add ``datasets`` (list) and ``datasets export`` to ``app``."""
    group = typer.Typer(
        help="List the human-judgment datasets, or export one as a table for the other verbs.",
        no_args_is_help=False,
        invoke_without_command=True,
    )

    @group.callback()
    def datasets_cmd(
        ctx: typer.Context,
        data_dir: Path = DATA_DIR,
        as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON."),
    ) -> None:
        """Every dataset: its tables and labels, licence, whether it ships with evalign or needs files
        (and where to get them), and its variants."""
        if ctx.invoked_subcommand is not None:
            return
        rows = catalogue_rows(data_dir)
        if as_json:
            emit_json({"data_dir": str(_data_root(data_dir)), "datasets": rows})
            return
        _print_catalogue(rows, _data_root(data_dir))

    @group.command("export")
    def export_cmd(
        name: str = typer.Argument(..., help="Dataset NAME or NAME:VARIANT."),
        out: Path = typer.Option(..., "--out", "-o", help="Table file to write (.jsonl, .csv or .parquet)."),
        as_: str = typer.Option(
            None,
            "--as",
            help="items (the item table), pairs (the pair table) or pairs-as-items (both sides of each "
            "pair as item rows, for score/judge). Default: items if the dataset has them, else pairs.",
        ),
        data_dir: Path = DATA_DIR,
        as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
    ) -> None:
        """Write a dataset's item table or pair table, ready for `score`, `judge`, `meta` and `report`."""
        from evalign.cli.common import CliError
        from evalign.cli.dataset_options import load_dataset_spec, table_of
        from evalign.io import write_table

        if as_ is not None and as_ not in TABLE_KINDS:
            raise CliError(f"--as must be one of {', '.join(TABLE_KINDS)}, got '{as_}'")
        ds = load_dataset_spec(name, data_dir)
        kind = as_ or ("items" if ds.items is not None else "pairs")
        table = table_of(ds, as_=kind)
        write_table(table, out)
        info = {"dataset": name, "as": kind, "rows": len(table), "columns": list(map(str, table.columns)), "out": str(out)}
        if as_json:
            emit_json(info)
            return
        console.print(escape(f"wrote {out} ({len(table)} rows, {kind}; columns: {', '.join(info['columns'])})"),
                      highlight=False)

    app.add_typer(group, name="datasets")
