"""``evalign annotate``: a labelling page in the browser (:mod:`evalign.annotate`), and
``evalign annotate export`` / ``evalign annotate status`` on its store.

``export`` and ``status`` are reserved words after ``annotate`` (an ITEMS file of that name is given as
``./export``): :class:`AnnotateCommand` hands the rest of the command line to that subcommand. The
server's packages (Starlette, uvicorn: the ``annotate`` extra) are imported only when the page is served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from evalign.annotate import KEYS_HELP
from evalign.cli.common import CliError, console, emit_json, err_console

#: the words after ``annotate`` that name a subcommand instead of an ITEMS file
SUBCOMMANDS = ("export", "status")

ITEMS: Any = typer.Argument(..., help="The items: an evalign item table (graded / label tasks) or pair table "
                                      "(pairwise), e.g. the pair table `evalign escalate` leaves for people.",
                            metavar="ITEMS")
DB: Any = typer.Option(..., "--db", help="The label store (SQLite; made on the first run, resumed after).")
PORT: Any = typer.Option(8765, "--port", help="Port of the page.")
HOST: Any = typer.Option("127.0.0.1", "--host", help="Address to bind; any other than loopback needs a token "
                                                     "(generated and printed when --token is not given).")
PER_ITEM: Any = typer.Option(3, "--per-item", min=1, help="Labels each item needs (K; 3 is what the Alt-Test needs).")
TASK: Any = typer.Option(None, "--task", help="pairwise, graded (1-5) or label (default: pairwise for a pair "
                                              "table, label with --labels, else graded).")
RUBRIC: Any = typer.Option(None, "--rubric", help="A rubric shown with graded items (a shipped NAME or a YAML file).")
LABELS: Any = typer.Option(None, "--labels", help="The label set of --task label, in key order: L1,L2,... "
                                                  "(at most 9).")
TOKEN: Any = typer.Option(None, "--token", envvar="EVALIGN_ANNOTATE_TOKEN", show_envvar=True,
                          help="The token every request must carry (?token=T once, then a cookie; or the header "
                               "'Authorization: token T').")
STORE: Any = typer.Argument(..., help="The label store (SQLite) of `evalign annotate`.", metavar="LABELS.sqlite")
OUT: Any = typer.Option(..., "--out", "-o", help="The table to write (.jsonl / .csv / .tsv / .parquet; .json for "
                                                  "--format alttest).")
FORMAT: Any = typer.Option("wide", "--format", help="wide: ITEMS' columns, one column per annotator (pref_NAME / "
                                                   "rating_NAME / label_NAME) and the majority verdict; long: one row "
                                                   "per label with the order shown, seconds and comment; alttest: the "
                                                   "Alt-Test's {annotator: {item: label}}.")
JOIN: Any = typer.Option(None, "--join", help="A table (e.g. the judged table `evalign escalate` split) whose columns "
                                               "the items lack (the judges' verdicts) are added, joined by id: "
                                               "`evalign meta --alt-test` then runs on the export.", metavar="TABLE")
AS_JSON: Any = typer.Option(False, "--json", help="Print machine-readable JSON.")


def _sub_commands() -> dict[str, Any]:
    sub = typer.Typer(add_completion=False)
    sub.command("export")(export_cmd)
    sub.command("status")(status_cmd)
    return dict(typer.main.get_group(sub).commands)


class AnnotateCommand(TyperCommand):
    """``annotate``: serves the page, or runs ``export`` / ``status`` when that word comes first."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        if args and args[0] in SUBCOMMANDS:
            sub = _sub_commands()[args[0]]
            return sub.make_context(f"{info_name} {args[0]}", list(args[1:]), parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


def register(app: typer.Typer) -> None:
    """Add ``annotate`` (with its ``export`` and ``status`` words) to ``app``."""
    app.command("annotate", cls=AnnotateCommand, help=_HELP)(annotate_cmd)


_HELP = (
    "A labelling page in the browser: people label ITEMS, each label stored in SQLite at once.\n\n"
    "Each annotator opens http://HOST:PORT/annotate/NAME (NAME: 1-64 letters, digits, _ . -). "
    + KEYS_HELP + "\n\n"
    "Items go to annotators until each has --per-item labels, new items first to the annotators with fewest "
    "labels; the left/right order of a pair is drawn per "
    "annotator and item (a reload shows the same), and labels are stored in the items' own frame. "
    "/agreement shows Cohen's kappa per pair and Krippendorff's alpha so far.\n\n"
    "`evalign annotate export LABELS.sqlite -o TABLE.jsonl [--format wide|long|alttest] [--join JUDGED]` writes the "
    "labels as "
    "evalign's tables; `evalign annotate status LABELS.sqlite` prints the agreement so far (an ITEMS file named "
    "export or status is given as ./export).\n\n"
    "Binds 127.0.0.1 by default; another --host needs a token (printed with the URL). Needs the annotate extra: "
    "pip install 'evalign\\[annotate]'."
)


def annotate_cmd(
    items: Path = ITEMS, db: Path = DB, port: int = PORT, host: str = HOST, per_item: int = PER_ITEM,
    task: str = TASK, rubric: str = RUBRIC, labels: str = LABELS, token: str = TOKEN,
) -> None:
    """A labelling page in the browser."""
    from evalign.io import refuse_output_onto_inputs

    refuse_output_onto_inputs({"--db": db}, {"ITEMS": items, "--rubric": rubric})
    try:
        from evalign.annotate.app import PageSettings, ServerSettings, serve  # starlette: only when serving
    except ImportError as e:
        raise CliError(f"evalign annotate needs the annotate extra ({e.name} is missing): "
                       "pip install 'evalign[annotate]'") from None
    page = PageSettings(task=task, labels=tuple(x.strip() for x in (labels or "").split(",") if x.strip()),
                        per_item=per_item, rubric=rubric)
    serve(items, db, page=page, server=ServerSettings(host=host, port=port, token=token),
          say=lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True))


def export_cmd(store_path: Path = STORE, out: str = OUT, format: str = FORMAT, join: Path = JOIN) -> None:
    """Write a label store's labels as evalign's tables (no ITEMS needed: the store keeps the items)."""
    from evalign.annotate.export import write_export  # numpy, pandas: not at every command's start
    from evalign.io import refuse_output_onto_inputs

    refuse_output_onto_inputs({"-o": out}, {"LABELS.sqlite": store_path, "--join": join})

    n = write_export(store_path, out, format, join=join)
    if out != "-":
        err_console.print(f"wrote {n} {'rows' if format == 'wide' else 'labels'} to {out}", highlight=False,
                          markup=False)


def status_cmd(store_path: Path = STORE, as_json: bool = AS_JSON) -> None:
    """The agreement so far: Cohen's kappa per annotator pair, Krippendorff's alpha, labels per annotator,
    the items still short of K."""
    from evalign.annotate.export import agreement_text, store_agreement  # numpy: not at every command's start

    ag = store_agreement(store_path)
    if as_json:
        emit_json(ag.as_dict())
    else:
        console.print(agreement_text(ag), highlight=False, markup=False, soft_wrap=True)
