"""``evalign annotate``: a labelling page in the browser (:mod:`evalign.annotate`), and
``evalign annotate export`` / ``status`` / ``invite`` on its store.

``export``, ``status`` and ``invite`` are reserved words after ``annotate`` (an ITEMS file of that name is
given as ``./export``): :class:`AnnotateCommand` hands the rest of the command line to that subcommand. The
server's packages (Starlette, uvicorn: the ``annotate`` extra) are imported only when the page is served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from evalign.annotate import KEYS_HELP
from evalign.cli.common import CliError, console, emit_json, err_console
from evalign.errors import UsageError

#: the words after ``annotate`` that name a subcommand instead of an ITEMS file
SUBCOMMANDS = ("export", "status", "invite")

ITEMS: Any = typer.Argument(..., help="The items: an evalign item table (graded / label tasks) or pair table "
                                      "(pairwise), e.g. the pair table `evalign escalate` leaves for people.",
                            metavar="ITEMS")
DB: Any = typer.Option(..., "--db", help="The label store (SQLite; made on the first run, resumed after).")
PORT: Any = typer.Option(8765, "--port", help="Port of the page (1-65535).")
HOST: Any = typer.Option("127.0.0.1", "--host", help="Address to bind; any other than loopback needs a token "
                                                     "(generated and printed when --token is not given).")
PER_ITEM: Any = typer.Option(3, "--per-item", help="Labels each item needs (K; 3 is what the Alt-Test needs).")
TASK: Any = typer.Option(None, "--task", help="pairwise, graded (1-5) or label (default: pairwise for a pair "
                                              "table, label with --labels, else graded).")
RUBRIC: Any = typer.Option(None, "--rubric", help="A rubric shown with graded items (a shipped NAME or a YAML file).")
LABELS: Any = typer.Option(None, "--labels", help="The label set of --task label, in key order: L1,L2,... "
                                                  "(at most 9).")
TOKEN: Any = typer.Option(None, "--token", envvar="EVALIGN_ANNOTATE_TOKEN", show_envvar=True,
                          help="The token every request must carry (?token=T once, then a cookie; or the header "
                               "'Authorization: token T').")
ADMIN_TOKEN: Any = typer.Option(None, "--admin-token", envvar="EVALIGN_ANNOTATE_ADMIN_TOKEN", show_envvar=True,
                                help="The token of the admin view (/admin: progress, gold accuracy, agreement); "
                                     "generated and printed at start when not given.")
INSTRUCTIONS: Any = typer.Option(None, "--instructions", help="The study's instructions (a Markdown file), shown "
                                                              "before the first item and linked on every item.",
                                 metavar="FILE.md")
COMPLETION_URL: Any = typer.Option(None, "--completion-url", help="A link shown to an annotator who is done (e.g. "
                                                                  "Prolific's completion link).", metavar="URL")
GOLD: Any = typer.Option(None, "--gold", help="Gold (attention-check) items: a table of the task's shape with the "
                                              "known answer in a column gold (A / B / tie, a grade 1-5, or a label); "
                                              "mixed in at --gold-rate, never exported as labels.", metavar="FILE")
GOLD_RATE: Any = typer.Option(None, "--gold-rate", help="The share of the items shown that are gold items, in "
                                                         "(0, 1] (default 0.1 with --gold).")
MIN_SECONDS: Any = typer.Option(1.0, "--min-seconds", help="Seconds an item must be on screen before a label of it "
                                                           "counts (0: off); a key repeated within 0.3 s is ignored.")
NAMES: Any = typer.Argument(..., help="The annotators to invite (1-64 letters, digits, _ . -; case-normalised).",
                            metavar="NAME...")
URL: Any = typer.Option("http://127.0.0.1:8765", "--url", help="The address the annotators open (the server's "
                                                                "--host and --port as they reach it).")
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
    sub.command("invite")(invite_cmd)
    return dict(typer.main.get_group(sub).commands)


class AnnotateCommand(TyperCommand):
    """``annotate``: serves the page, or runs ``export`` / ``status`` when that word comes first."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        if args and args[0] in SUBCOMMANDS:
            sub = _sub_commands()[args[0]]
            return sub.make_context(f"{info_name} {args[0]}", list(args[1:]), parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


def register(app: typer.Typer) -> None:
    """Add ``annotate`` (with its ``export``, ``status`` and ``invite`` words) to ``app``."""
    app.command("annotate", cls=AnnotateCommand, help=_HELP)(annotate_cmd)


_HELP = (
    "A labelling page in the browser: people label ITEMS, each label stored in SQLite at once.\n\n"
    "Each annotator opens http://HOST:PORT/annotate/NAME (NAME: 1-64 letters, digits, _ . -). "
    + KEYS_HELP + "\n\n"
    "Items go to annotators until each has --per-item labels, new items first to the annotators with fewest "
    "labels; the left/right order of a pair is drawn per "
    "annotator and item (a reload shows the same), and labels are stored in the items' own frame. "
    "The admin view (/admin, with the admin token printed at start) shows each annotator's labels, seconds per "
    "item and gold accuracy, Cohen's kappa per pair and Krippendorff's alpha so far.\n\n"
    "A study: `evalign annotate invite LABELS.sqlite NAME...` prints one link per annotator (a token of their own); "
    "--instructions, --completion-url, --gold with --gold-rate, --min-seconds. Small teams can share one --token.\n\n"
    "`evalign annotate export LABELS.sqlite -o TABLE.jsonl [--format wide|long|alttest] [--join JUDGED]` writes the "
    "labels as "
    "evalign's tables; `evalign annotate status LABELS.sqlite` prints the agreement so far (an ITEMS file named "
    "export, status or invite is given as ./export).\n\n"
    "Binds 127.0.0.1 by default; another --host needs a token (printed with the URL). Needs the annotate extra: "
    "pip install 'evalign\\[annotate]'."
)


def annotate_cmd(
    items: Path = ITEMS, db: Path = DB, port: int = PORT, host: str = HOST, per_item: int = PER_ITEM,
    task: str = TASK, rubric: str = RUBRIC, labels: str = LABELS, token: str = TOKEN,
    admin_token: str = ADMIN_TOKEN, instructions: Path = INSTRUCTIONS, completion_url: str = COMPLETION_URL,
    gold: Path = GOLD, gold_rate: float = GOLD_RATE, min_seconds: float = MIN_SECONDS,
) -> None:
    """A labelling page in the browser."""
    from evalign.io import refuse_output_onto_inputs
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(port=port, per_item=per_item, min_seconds=min_seconds, gold_rate=gold_rate)
    refuse_output_onto_inputs({"--db": db}, {"ITEMS": items, "--rubric": rubric})
    try:
        from evalign.annotate.app import PageSettings, ServerSettings, serve  # starlette: only when serving
    except ImportError as e:
        raise CliError(f"evalign annotate needs the annotate extra ({e.name} is missing): "
                       "pip install 'evalign[annotate]'") from None
    from evalign.annotate.study import StudySettings

    if gold_rate is not None and gold is None:
        raise UsageError("--gold-rate goes with --gold")
    page = PageSettings(task=task, labels=tuple(x.strip() for x in (labels or "").split(",") if x.strip()),
                        per_item=per_item, rubric=rubric, gold=gold, instructions=instructions)
    study = StudySettings(completion_url=completion_url, min_seconds=min_seconds,
                          gold_rate=0.1 if gold_rate is None else gold_rate)
    serve(items, db, page=page, server=ServerSettings(host=host, port=port, token=token, admin_token=admin_token),
          study=study, say=lambda line: console.print(line, highlight=False, markup=False, soft_wrap=True))


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


def invite_cmd(store_path: Path = STORE, names: list[str] = NAMES, url: str = URL) -> None:
    """Invite annotators: one link each, with a token of their own (stored hashed in the label store;
    inviting a name again makes a new link and the old one stops working)."""
    try:
        from evalign.annotate.app import invite  # starlette: the annotate extra
    except ImportError as e:
        raise CliError(f"evalign annotate needs the annotate extra ({e.name} is missing): "
                       "pip install 'evalign[annotate]'") from None
    for name, link in invite(store_path, names, base_url=url):
        console.print(f"{name} {link}", highlight=False, markup=False, soft_wrap=True)
