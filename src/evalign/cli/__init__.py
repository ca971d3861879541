"""The ``evalign`` command line (typer). Each verb lives in its own module, imported only when the
verb runs or shows its help.

**Adding a verb** (the rule that keeps ``evalign --help`` instant): write ``evalign/cli/NAME.py``
with a ``register(app)`` that adds the command(s), and add one row per command to :data:`VERBS`
(module and the first paragraph of the command's help, which ``evalign --help`` lists without
importing anything). ``evalign VERB --help`` imports only that verb's module, so keep the module
itself light: no pandas / numpy / scipy / matplotlib / torch / transformers / ray at module level,
directly or through an evalign module that loads them; import the library function the command
calls inside the command body (see :mod:`evalign.cli.leaderboard`). ``tests/cli/test_startup.py``
checks both: the table matches what the modules register, and which modules each ``--help`` loads.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from evalign import __version__
from evalign.cache import default_cache_path
from evalign.cli.cache import cache_created_notice
from evalign.cli.common import (
    STATE,
    bad_value_errors,
    err_console,
    exit_on_sigterm,
    handle_errors,
    print_error,
)
from evalign.interrupt import Terminated, exiting, guard, say_terminated

#: every command, in the order ``evalign --help`` lists them: name -> (module that registers it, the
#: first paragraph of its help as ``evalign --help`` shows it)
VERBS: dict[str, tuple[str, str]] = {
    "score": ("evalign.cli.score", "Score every response against its reference(s) with the given metrics."),
    "metrics": ("evalign.cli.metrics", "List the metrics evalign knows, with their direction, default options and "
                                       "description (or their options)."),
    "meta": ("evalign.cli.meta", "Correlations, pairwise accuracy with tie calibration, baselines, breakdowns and "
                                 "the trust table."),
    "alt-test": ("evalign.cli.alt_test", "The Alt-Test: can a judge replace an annotator? Winning rate, advantage "
                                         "probability, p-values."),
    "judge": ("evalign.cli.judge", "Grade every response with an LLM judge (Prometheus absolute / pairwise, G-Eval, "
                                   "criteria)."),
    "escalate": ("evalign.cli.escalate", "Give the verdicts a calibrated judge (or cascade) may give; send the rest "
                                         "to people."),
    "probe": ("evalign.cli.probe", "Probe a pair judge for biases: perturb each pair, judge it again, count the "
                                   "verdicts that moved."),
    "leaderboard": ("evalign.cli.leaderboard", "Rank systems from pairwise verdicts: Bradley-Terry scores with "
                                               "intervals, win rates, LC win rates."),
    "report": ("evalign.cli.report", "Compare metrics (and judges) with human judgments; write an HTML report with "
                                     "plots and tables."),
    "bench": ("evalign.cli.bench", "A judge's trust profile across every human-judgment set: beside the published "
                                   "judges and the\nbaselines, per set and per category, with intervals."),
    "demo": ("evalign.cli.demo", "Score the bundled Self-Instruct and PandaLM data with every offline metric and "
                                 "show which\nmetric agrees best with the human judgments (with --judge: how a small "
                                 "local judge compares\nwith the published ones on LLMBar)."),
    "synth": ("evalign.cli.synth", "Generate judge training data with a teacher model (Prometheus Feedback "
                                   "Collection procedure)."),
    "judge-data": ("evalign.cli.judge_data", "Write train-judge training data from existing labels, split into "
                                             "train / held-out by question."),
    "train-judge": ("evalign.cli.train_judge", "Fine-tune a causal LM as a judge (TRL SFT, LoRA by default, loss on "
                                               "the output only), or train a\nreward model (--kind reward)."),
    "verify-judge": ("evalign.cli.train_judge", "Grade a labelled set with local judge models and print their trust "
                                                "table against the labels."),
    "annotate": ("evalign.cli.annotate", "A labelling page in the browser: people label ITEMS, each label stored "
                                         "in SQLite at once."),
    "run": ("evalign.cli.run", "Run the study a config file describes; write its outputs, report and resolved "
                               "config."),
    "datasets": ("evalign.cli.datasets", "List the human-judgment datasets, or export one as a table for the other "
                                         "verbs."),
    "cache": ("evalign.cli.cache", "Show what the cache holds (embeddings, judge outputs) or clear it."),
}


def load_commands(module: str) -> dict[str, Any]:
    """The commands ``module``'s ``register(app)`` adds, by name (imports the module)."""
    sub = typer.Typer(add_completion=False)
    importlib.import_module(module).register(sub)
    return dict(typer.main.get_group(sub).commands)


#: the commands of each verb module imported so far
_LOADED: dict[str, dict[str, Any]] = {}


class _Group(TyperGroup):
    """The root command: lists :data:`VERBS` without importing them, imports a verb's module when it
    is called, and runs every verb inside :func:`handle_errors` (one clear line, exit 1, no
    traceback)."""

    listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(VERBS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in VERBS:
            return None
        module, help_text = VERBS[cmd_name]
        if self.listing:  # (the table's line, nothing imported)
            return TyperCommand(cmd_name, help=help_text)
        if module not in _LOADED:
            _LOADED[module] = load_commands(module)
        return _LOADED[module][cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """The verb ``args[0]``; a misspelt one is a usage error with the closest verbs (difflib)."""
        name = args[0] if args else ""
        if name and name not in VERBS and not name.startswith("-"):
            from evalign.errors import did_you_mean

            hint = did_you_mean(name, VERBS)
            if hint:
                ctx.fail(f"No such command '{name}'{hint}.")
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """``evalign --help``: a plain listing (usage, the options, every verb with the first
        paragraph of its help), without typer's rich formatter (loading it took 0.2 s)."""
        self.format_usage(ctx, formatter)
        if self.help:
            formatter.write_paragraph()
            with formatter.indentation():
                formatter.write_text(self.help)
        options = [rec for p in self.get_params(ctx) if (rec := p.get_help_record(ctx)) is not None]
        if options:
            with formatter.section("Options"):
                formatter.write_dl(options)
        with formatter.section("Commands"):
            formatter.write_dl([(name, " ".join(text.split())) for name, (_, text) in VERBS.items()])
        formatter.write_paragraph()
        formatter.write_text("Run `evalign COMMAND --help` for a command's options.")

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and self.no_args_is_help and not ctx.resilient_parsing:  # `evalign`: the listing, exit 2
            typer.echo(ctx.get_help())
            ctx.exit(2)
        return list(super().parse_args(ctx, args))

    def invoke(self, ctx: Any) -> Any:
        existed = default_cache_path().is_file()
        try:
            with handle_errors():
                result = super().invoke(ctx)
        except bad_value_errors() as e:  # a text where a number goes: one line, as evalign's own usage errors
            print_error(e.format_message())
            raise SystemExit(2) from None
        notice = cache_created_notice(existed)  # after a success only: a failure says one line
        if notice:
            err_console.print(f"[dim]{escape(notice)}[/dim]", highlight=False)
        return result


def _version(value: bool) -> None:
    if value:
        typer.echo(f"evalign {__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=_Group,
    name="evalign",
    help="Score LLM responses, judge them with LLMs, and check metrics and judges against human ratings.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print evalign's version and exit."),
) -> None:
    STATE["debug"] = debug


def main() -> None:
    """Entry point of the ``evalign`` script: Ctrl-C prints one line and exits 130 at any moment
    (:mod:`evalign.interrupt`); SIGTERM ends it like Ctrl-C does (see :func:`exit_on_sigterm`)."""
    guard()
    exit_on_sigterm()
    try:
        try:
            app()
        except SystemExit as e:
            if isinstance(e, Terminated):
                say_terminated()  # (a SIGTERM outside a verb: parsing options, printing help)
            exiting(e.code)  # the status the process ends with, even if a Ctrl-C or SIGTERM lands as it exits
            raise
    except Terminated as e:  # a SIGTERM that landed while the status was being recorded
        say_terminated()
        exiting(e.code)
        raise
