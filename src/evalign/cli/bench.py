"""``evalign bench``: a judge's trust profile across every human-judgment set, beside the published
judges and the baselines.

The command parses its options into judge specs and one :class:`~evalign.bench.BenchSettings`
(with a ``--config`` file's values under the options given), runs :func:`~evalign.bench.run_bench`
and renders the :class:`~evalign.bench.BenchProfile`. Every judge call is cached as it returns: the
same command again (after Ctrl-C, a crash, or to add a judge) repeats none.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.batch_options import (
    BATCH_API,
    BATCH_MAX_REQUESTS,
    BATCH_POLL,
    BATCH_RETRIES,
    BATCH_RETRY,
    check_batch_options,
)
from evalign.cli.common import (
    CliError,
    cache_input,
    console,
    emit_json,
    err_console,
    resampling_of,
    split_multi,
)
from evalign.errors import OutputError
from evalign.judges.option_rules import BATCH_OPTIONS, check_options

LIST: Any = typer.Option(False, "--list", help="List the suite: each set's category, dataset, kind and template.")
JUDGE: Any = typer.Option([], "--judge", help="A judge: NAME=BACKEND:MODEL[@BASE_URL][,KEY=VALUE...], e.g. "
                          "smol=llama:smollm2-135m-instruct (llama.cpp's server started on the GGUF), "
                          "q=openai:qwen2.5-7b@http://localhost:8000/v1, h=hf:PATH; repeatable.")
BACKEND: Any = typer.Option(None, "--backend", help="One judge without --judge: its backend (openai, hf, llama, ...).")
MODEL: Any = typer.Option(None, "--model", help="One judge without --judge: its model (a name, folder, GGUF or alias).")
BASE_URL: Any = typer.Option(None, "--base-url", help="One judge without --judge: its server's API root.")
NAME: Any = typer.Option(None, "--name", help="One judge without --judge: its name (default: the model's).")
PANEL: Any = typer.Option([], "--panel", help="NAME=J1,J2,...: the judges' majority verdicts (mean grades) as one "
                          "more judge; repeatable.")
CONFIG: Any = typer.Option(None, "--config", help="A bench config (YAML: judges, panels, per_set, sets, ...); the "
                           "options given here win over its values.")
PER_SET: Any = typer.Option(None, "--per-set", help="Units sampled per set (pairs or graded responses; default 20).")
FULL: Any = typer.Option(False, "--full", help="Every unit of every set (no sample).")
SEED: Any = typer.Option(None, "--seed", help="Seed of the sample and of the judges' decoding (default 0).")
SETS: Any = typer.Option([], "--sets", help="Set or category keys (comma-separated or repeated; 'all': every set; "
                         "default: the suite's default sets).")
TEMPLATE: Any = typer.Option([], "--template", help="KEY=TEMPLATE: judge a set, a category or a kind (pairwise / "
                             "graded) with another template; repeatable.")
SUITE: Any = typer.Option(None, "--suite", help="A suite file in suite.yaml's format (default: the one that ships).")
DATA_DIR: Any = typer.Option(None, "--data-dir", help="Folder of the sets that do not ship (else $EVALIGN_DATA_DIR).")
PUBLISHED: Any = typer.Option(None, "--published", help="Published judges beside yours: suite (each set's choice, "
                              "default), all, none.")
TEMPERATURE: Any = typer.Option(None, "--temperature", help="Decoding temperature of every judge (default 0).")
MAX_TOKENS: Any = typer.Option(None, "--max-tokens", help="Most tokens per judge answer (default: each template's).")
CONSTRAIN: Any = typer.Option(None, "--constrain", help="Constrain each answer to its template's shape: auto (where "
                              "the backend can, default), on (or stop), off.")
RESAMPLES: Any = typer.Option(None, "--resamples", help="Bootstrap resamples and permutations (default 1000).")
MIN_GROUP: Any = typer.Option(None, "--min-group", help="The fewest units a set or category needs to be ranked "
                              "(default 5).")
NO_CACHE: Any = typer.Option(False, "--no-cache", help="Make every call anew (new answers are stored).")
OUT: Any = typer.Option(None, "--out", "-o", help="Folder for profile.json, profile.html and each set's judged sample.")
HTML: Any = typer.Option(None, "--html", help="Write the HTML page to this file.")
AS_JSON: Any = typer.Option(False, "--json", help="Print the profile as JSON.")
DETAIL: Any = typer.Option(True, "--detail/--summary", help="Print each set's table (default) or the summary only.")


#: what ``bench --out`` writes in its folder
BENCH_FILES = ("profile.json", "profile.html", "sets/*", "partial/*")


def register(app: typer.Typer) -> None:
    """Add ``bench`` to ``app``."""
    app.command("bench")(bench_cmd)


def bench_cmd(
    list_: bool = LIST, judge: list[str] = JUDGE, backend: str = BACKEND, model: str = MODEL, base_url: str = BASE_URL,
    name: str = NAME, panel: list[str] = PANEL, config: Path = CONFIG, per_set: int = PER_SET, full: bool = FULL,
    seed: int = SEED, sets: list[str] = SETS, template: list[str] = TEMPLATE, suite: Path = SUITE,
    data_dir: Path = DATA_DIR, published: str = PUBLISHED, temperature: float = TEMPERATURE,
    max_tokens: int = MAX_TOKENS, constrain: str = CONSTRAIN, resamples: int = RESAMPLES, min_group: int = MIN_GROUP, no_cache: bool = NO_CACHE,
    out: Path = OUT,
    html: Path = HTML, as_json: bool = AS_JSON, detail: bool = DETAIL, batch_api: bool = BATCH_API,
    batch_max_requests: int = BATCH_MAX_REQUESTS, batch_retries: int = BATCH_RETRIES, batch_retry: str = BATCH_RETRY,
    batch_poll: float = BATCH_POLL,
) -> None:
    """A judge's trust profile across every human-judgment set: beside the published judges and the
    baselines, per set and per category, with intervals."""
    from evalign.bench.config import read_bench_config
    from evalign.io import OutputFolder, refuse_output_onto_inputs

    cfg = read_bench_config(config) if config is not None else None
    opts = dict(locals())
    settings = _settings(opts, cfg)
    if list_:
        _print_listing(settings, as_json)
        return
    judges = _judges(opts, cfg)
    if not judges:
        raise CliError("name a judge: --judge NAME=BACKEND:MODEL[@BASE_URL] (or --model, or a --config with judges); "
                       "`evalign bench --list` shows the suite")
    out_dir = out if out is not None else (cfg.out if cfg is not None else None)
    refuse_output_onto_inputs({"--out": OutputFolder(out_dir, BENCH_FILES) if out_dir is not None else None,
                               "--html": html},
                              {"--config": config, "--suite": settings.suite,
                               "--template": list(settings.templates.values()), **cache_input()})
    _check_outputs(out_dir, html)
    profile = _run(judges, settings, no_cache=no_cache, out=out_dir, quiet=as_json)
    _write(profile, out_dir, html)
    if as_json:
        emit_json(profile.to_json())
        return
    render(profile, detail=detail)


def _pairs(values: list[str], option: str) -> dict[str, str]:
    out = {}
    for v in values:
        k, eq, rest = v.partition("=")
        if not eq or not k.strip() or not rest.strip():
            raise CliError(f"{option} must be KEY=VALUE, got {v!r}")
        out[k.strip()] = rest.strip()
    return out


def _settings(o: dict[str, Any], cfg: Any) -> Any:
    """The bench settings: the config's, with the options given on the command line over them."""
    from dataclasses import replace

    from evalign.bench import BenchSettings

    base = cfg.settings if cfg is not None else BenchSettings()
    kw: dict[str, Any] = {}
    if o["full"]:
        kw["per_set"] = None
    elif o["per_set"] is not None:
        kw["per_set"] = o["per_set"]
    if o["seed"] is not None:
        kw["seed"] = o["seed"]
    if o["sets"]:
        kw["sets"] = tuple(split_multi(o["sets"]))
    if o["template"]:
        kw["templates"] = {**base.templates, **_pairs(o["template"], "--template")}
    if o["panel"]:
        given = {k: tuple(split_multi([v])) for k, v in _pairs(o["panel"], "--panel").items()}
        kw["panels"] = {**base.panels, **given}
        kw["panel_rules"] = {k: r for k, r in base.panel_rules.items() if k not in given}  # --panel: the list form
    for key in ("suite", "data_dir", "published", "constrain"):
        if o[key] is not None:
            kw[key] = o[key]
    check_batch_options(SimpleNamespace(**{k: o[k] for k in ("batch_api", *BATCH_OPTIONS)}))
    if o["batch_api"]:
        from evalign.backends.batch import BatchSettings

        kw["batch"] = BatchSettings(max_requests=o["batch_max_requests"], retries=o["batch_retries"],
                                    retry=o["batch_retry"], poll=o["batch_poll"])
    decoding = dict(base.decoding)
    decoding["seed"] = kw.get("seed", base.seed)
    for key in ("temperature", "max_tokens"):  # checked by BenchSettings with the rules of `evalign judge`
        if o[key] is not None:
            decoding[key] = o[key]
    kw["decoding"] = decoding
    if o["resamples"] is not None:  # named as the option, not Resampling's field
        kw["resampling"] = resampling_of({"n_resamples": "--resamples", "n_permutations": "--resamples"},
                                         n_resamples=o["resamples"], n_permutations=o["resamples"])
    check_options(seed=o["seed"])  # the rules every command's options follow
    if o["min_group"] is not None:
        kw["min_group_size"] = o["min_group"]
    return replace(base, **kw)


def _judges(o: dict[str, Any], cfg: Any) -> list[Any]:
    """The judges of the config, of ``--judge`` and of ``--model`` (in that order)."""
    from evalign.bench.judges import BenchJudge, parse_judge

    out = list(cfg.judges) if cfg is not None else []
    out += [parse_judge(j) for j in o["judge"]]
    if o["model"] is not None:
        be = o["backend"] or "openai"
        name = o["name"] or Path(str(o["model"])).stem.replace(":", "-")
        out.append(BenchJudge(name=name, backend=be, model=o["model"], base_url=(o["base_url"],) if o["base_url"] else ()))
    elif o["backend"] or o["base_url"] or o["name"]:
        raise CliError("--backend, --base-url and --name describe one judge: give its --model too (or use --judge)")
    return out


def _run(judges: list[Any], settings: Any, *, no_cache: bool, out: Path | None, quiet: bool) -> Any:
    from evalign.bench import run_bench
    from evalign.cache import Cache
    from evalign.cli.common import progress

    with progress(transient=True, disable=quiet) as bar:
        task = bar.add_task("bench", total=None)

        def on_progress(judge: str, key: str, c: Any) -> None:
            bar.update(task, completed=c["done"], total=c["total"],
                       description=f"{judge} on {key} [dim]cached {c['cached']} · unread {c['unscored']} · failed "
                       f"{c['failed']}[/dim]")

        def stage(msg: str) -> None:
            bar.update(task, description=msg, completed=0, total=None)

        return run_bench(judges, settings, cache=Cache.for_command(no_cache),
                         out=out / "partial" if out is not None else None, progress=on_progress, stage=stage)


def _check_outputs(out: Path | None, html: Path | None) -> None:
    """Before the run: the output folder and the HTML page's folder exist or can be made, and the page
    is not a folder (an output that cannot be written fails now, not after every judge call)."""
    if html is not None and (str(html).endswith(("/", os.sep)) or html.is_dir()):
        raise OutputError(f"--html {html}: is a directory; give a file name, e.g. {html / 'profile.html'}")
    for option, folder in (("--out", out), ("--html", html.parent if html is not None else None)):
        if folder is None:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{option} {out if option == '--out' else html}: cannot create the folder {folder} "
                              f"({e.strerror or type(e).__name__})") from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputError(f"{option} {out if option == '--out' else html}: cannot write in {folder} "
                              "(permission denied)")


def _write(profile: Any, out: Path | None, html: Path | None) -> None:
    from evalign.bench.page import render_page
    from evalign.io import write_json_atomic, write_table

    if out is not None:
        (out / "sets").mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "profile.json", profile.to_json())
        for key, table in profile.tables.items():
            write_table(table, out / "sets" / f"{key}.jsonl")
        html = html or out / "profile.html"
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_page(profile), encoding="utf-8")
        err_console.print(f"[dim]wrote {escape(str(html))}[/dim]", highlight=False)


def _print_listing(settings: Any, as_json: bool) -> None:
    """The suite grouped by category: each set's key, dataset, kind, template and rubric."""
    from evalign.bench import suite_listing

    t = suite_listing(settings)
    if as_json:
        emit_json({"suite": t.attrs.get("suite"), "sets": t.to_dict("records")})
        return
    console.print(escape(f"Bench suite {t.attrs.get('suite')}"), style="bold", highlight=False)
    for cat, part in t.groupby("category_title", sort=False):
        console.print(escape(str(cat)), style="bold", highlight=False)
        for r in part.itertuples(index=False):
            key = f"{r.key}{'' if r.chosen else ' *'}"
            line = f"  {key:<22}{r.dataset:<20}{r.kind:<9} {r.template or r.mode}"
            console.print(escape(line), highlight=False, soft_wrap=True)
            if isinstance(r.rubric, str):
                console.print(escape(f"{'':<51} rubric {r.rubric}"), style="dim", highlight=False, soft_wrap=True)
    console.print("* = not in this bench (name it with --sets KEY, or --sets all)", highlight=False)


#: how each role's rows look in the terminal
_ROLE_STYLE = {"yours": "bold", "panel": "bold italic", "published": "", "baseline": "dim", "ceiling": "dim italic"}
#: the widest judge name shown (longer names end in an ellipsis; the JSON has them whole)
JUDGE_WIDTH = 20


def _table(df: Any, title: str) -> Any:
    """A compact table (no side borders, one space between columns) of a display frame with
    ``judge`` and ``role`` columns: roles in their own sections and styles; ``title`` is printed above it."""
    from rich import box
    from rich.table import Table

    console.print(escape(title), style="bold", highlight=False)
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 1))
    t.add_column("judge", max_width=JUDGE_WIDTH, overflow="ellipsis", no_wrap=True)
    cols = [c for c in df.columns if c not in ("judge", "role")]
    for c in cols:
        t.add_column(escape(str(c)), justify="left" if c == "set" else "right", no_wrap=True)
    last = None
    for r in df.to_dict("records"):
        role = str(r.get("role", "yours"))
        if last is not None and role != last:
            t.add_section()
        last = role
        name = str(r["judge"]).removeprefix("judge:")
        t.add_row(escape(name), *(escape(str(r[c])) for c in cols), style=_ROLE_STYLE.get(role, ""))
    return t


def render(p: Any, *, detail: bool = True) -> None:
    """The profile at the terminal's width: the category table, each set's table (``detail``), your
    judges' calls, the notes and the signature."""
    from evalign.bench.display import (
        own_statistic_note,
        runs_table,
        runs_totals,
        set_table,
        set_title,
        summary_table,
    )

    sig = p.signature
    n = len(p.sets)
    console.print(escape(f"evalign bench: {n} set{'s' * (n != 1)}, {sig['per_set']} per set, seed {sig['seed']}, "
                         f"{p.seconds:.0f} s (yours in bold, published judges plain, baselines dim)"), highlight=False)
    console.print(_table(summary_table(p), "Profile by category: value over its 95% interval (pairwise: accuracy "
                         "without human ties; graded: Kendall tau)"))
    cats = {c.key for c in p.categories}
    for k, v in p.headlines.items():
        if k in cats:
            console.print(escape(f"{k}: {v}"), style="dim", highlight=False)
    if detail:
        for key in p.sets["key"]:
            console.print()
            console.print(_table(set_table(p, key), set_title(p, key)))
            for line in (own_statistic_note(p, key), p.headlines.get(key)):
                if line:
                    console.print(escape(line), style="dim", highlight=False)
        if not p.runs.empty:
            console.print()
            console.print(_table(runs_table(p), "Your judges' calls per set"))
    if not p.runs.empty:
        console.print()
        console.print(_table(runs_totals(p), "Your judges' calls over the bench"))
    for k, v in p.skipped.items():
        console.print(escape(f"skipped {k}: {v}"), highlight=False)
    for n in p.notes:
        console.print(escape(n), highlight=False)
    err_console.print(f"[dim]{escape(str(sig['text']))}[/dim]", highlight=False)


__all__ = ["bench_cmd", "register", "render"]
