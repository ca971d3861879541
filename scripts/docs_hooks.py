"""MkDocs hooks (``hooks:`` in ``mkdocs.yml``): the pages generated from the code at build time.

- ``<!-- generated: cli-reference -->`` in a page becomes the help of every verb in
  :data:`evalign.cli.VERBS` (and of each sub-command), as ``evalign VERB --help`` prints it at 100
  columns without colour;
- ``<!-- generated: dataset-catalogue -->`` becomes the dataset catalogue
  (:data:`evalign.datasets.catalogue.CATALOGUE`), a summary table and one section per set;
- ``<!-- generated: api-top-level -->`` becomes a mkdocstrings block for every name of
  ``evalign.__all__``, documented in the module that defines it;
- ``<!-- generated: rooms -->`` becomes the table of the rooms of ``src/evalign`` by layer;
- ``docs/img/structure.svg`` is drawn from ``scripts/structure.py``'s import graph: one box per room
  of ``src/evalign``, rows by layer (lowest at the bottom), one line per pair of rooms that import
  each other, as thick as the number of import statements.

Everything is computed offline and deterministically (no clock, no machine paths, sorted orders):
two builds of one commit give the same pages. ``python scripts/docs_hooks.py cli|datasets|svg|rooms|api`` prints
one of them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:  # document this checkout's code, installed or not
    sys.path.insert(0, str(ROOT / "src"))
CLI_MARK = "<!-- generated: cli-reference -->"
DATASETS_MARK = "<!-- generated: dataset-catalogue -->"
API_MARK = "<!-- generated: api-top-level -->"
ROOMS_MARK = "<!-- generated: rooms -->"
SVG_PATH = "img/structure.svg"
#: the environment the help is rendered in (fixed width, no colour, no machine paths)
_HELP_ENV = {"COLUMNS": "100", "LINES": "50", "NO_COLOR": "1", "TERM": "dumb", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}


# ---------------------------------------------------------------------------------------------
# the CLI reference


def _help(args: list[str]) -> str:
    from typer.testing import CliRunner

    from evalign.cli import app

    res = CliRunner().invoke(app, [*args, "--help"], env=_HELP_ENV, color=False)
    if res.exit_code != 0:
        raise RuntimeError(f"evalign {' '.join(args)} --help exited {res.exit_code}: {res.output}")
    home = str(Path.home())
    text = res.output.replace(home, "~") if home not in ("", "/") else res.output
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _subcommands(verb: str) -> list[str]:
    """The sub-commands of a verb that is a group (``datasets export``, ``cache clear``), sorted."""
    from evalign.cli import VERBS, load_commands

    cmd = load_commands(VERBS[verb][0])[verb]
    return sorted(getattr(cmd, "commands", {}) or {})


def cli_reference() -> str:
    """Markdown: ``evalign --help``, then every verb's help (and its sub-commands'), in
    :data:`evalign.cli.VERBS` order."""
    from evalign.cli import VERBS

    out = ["## evalign", "", "```text", _help([]), "```", ""]
    for verb in VERBS:
        out += [f"## evalign {verb}", "", "```text", _help([verb]), "```", ""]
        for sub in _subcommands(verb):
            out += [f"### evalign {verb} {sub}", "", "```text", _help([verb, sub]), "```", ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# the dataset catalogue


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def dataset_catalogue() -> str:
    """Markdown: one summary table of every catalogued dataset, then a section per set."""
    from evalign import datasets  # noqa: F401  (registers the built-in adapters)
    from evalign.datasets.base import ANNOTATOR_KINDS
    from evalign.datasets.catalogue import CATALOGUE

    out = ["| set | tables | labels | annotators | texts | files | licence |",
           "|---|---|---|---|---|---|---|"]
    for name, e in CATALOGUE.items():
        files = "ship with evalign" if e.ships else "data folder"
        out.append(f"| [`{name}`](#{name}) | {', '.join(e.tables)} | "
                   f"{_cell(e.labels)} | {e.annotator_kind or '-'} | {'yes' if e.has_texts else 'no'} | {files} | "
                   f"{_cell(e.licence)} |")
    out.append("")
    for name, e in CATALOGUE.items():
        out += [f"### {name}", "", _cell(e.labels), ""]
        facts = [("tables", ", ".join(e.tables)), ("licence", e.licence),
                 ("files", "ship with evalign" if e.ships else f"data folder `{e.folder}/`" if e.folder else "data folder"),
                 ("where", e.where), ("citation", e.citation)]
        if e.annotator_kind:
            facts.append(("annotators", f"{e.annotator_kind} (Alt-Test epsilon "
                                        f"{ANNOTATOR_KINDS[e.annotator_kind]}): {e.annotator_basis}"))
        elif e.annotator_basis:
            facts.append(("annotators", e.annotator_basis))
        if not e.has_texts:
            facts.append(("texts", "none: meta-evaluated from its shipped columns only"))
        out += [f"- **{k}**: {_cell(v)}" for k, v in facts if v]
        if e.label_sets:
            out += ["", "| label set (`--labels`) | kind | labels | annotators |", "|---|---|---|---|"]
            for i, (ls_name, ls) in enumerate(e.label_sets.items()):
                default = " (default)" if i == 0 else ""
                out.append(f"| `{ls_name}`{default} | {ls.kind} | {_cell(ls.description)} | {_cell(ls.annotators)} |")
        if e.variants:
            out += ["", "| variant (`NAME:VARIANT`) | what | files |", "|---|---|---|"]
            for v_name, v in e.variants.items():
                files = "data folder" if v.needs_files else "as the set"
                out.append(f"| `{name}:{v_name}` | {_cell(v.description)} | {files} |")
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# the top-level API


def _api_packages() -> list[str]:
    """The packages the API pages document (each ``::: evalign.x`` line of ``docs/api/*.md``)."""
    found = set()
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("::: "):
                found.add(line[4:].strip())
    return sorted(found)


def api_top_level() -> str:
    """Markdown: every name ``import evalign`` offers (``evalign.__all__``): a link to its entry where a
    package page documents it already, else a mkdocstrings block in the module that defines it."""
    import importlib
    import importlib.util
    import inspect

    import evalign

    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    from docs_griffe import plain_roles

    packages = _api_packages()
    rows, blocks = [], []
    for name in sorted(evalign.__all__, key=str.lower):
        if name == "__version__":
            continue
        module = evalign._LAZY.get(name, "evalign.errors")
        obj = getattr(evalign, name)
        home = next((p for p in packages if (module == p or module.startswith(p + "."))
                     and name in getattr(importlib.import_module(p), "__all__", ())
                     and importlib.util.find_spec(f"{p}.{name}") is None), None)  # not a submodule's name
        if home is None:  # documented here, where it is defined
            home = getattr(obj, "__module__", module) or module
            blocks += [f"::: {home}.{name}", "    options:", "      heading_level: 3", ""]
        doc = plain_roles((inspect.getdoc(obj) or "").split("\n\n")[0])
        rows.append(f"| [`{name}`][{home}.{name}] | `{module}` | {_cell(doc)} |")
    return "\n".join(["| name | defined in | what |", "|---|---|---|", *rows, "",
                      "## Documented here", "", *blocks])


# ---------------------------------------------------------------------------------------------
# the picture of the import structure


def _structure() -> Any:
    spec = importlib.util.spec_from_file_location("_evalign_structure", ROOT / "scripts" / "structure.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@functools.lru_cache(maxsize=1)
def _rooms() -> tuple[dict[int, list[str]], dict[tuple[str, str], int]]:
    """The rooms of ``src/evalign`` by layer (``scripts/structure.py``'s order) and the number of
    import statements from each room to each other room."""
    st = _structure()
    fig = st.measure(ROOT / "src" / "evalign")
    counts: dict[tuple[str, str], int] = {}
    rooms: set[str] = set()
    for a, b in fig.edges:
        ra, rb = _room(a), _room(b)
        rooms.update((ra, rb))
        if ra != rb and a != "evalign":
            counts[(ra, rb)] = counts.get((ra, rb), 0) + 1
    rooms -= {"__init__", "__main__"}
    by_layer: dict[int, list[str]] = {}
    for r in sorted(rooms):
        by_layer.setdefault(st.layer(f"evalign.{r}"), []).append(r)
    return by_layer, counts


def _room_path(room: str) -> Path:
    folder = ROOT / "src" / "evalign" / room
    return folder if folder.is_dir() else folder.with_suffix(".py")


def rooms_table() -> str:
    """Markdown: the rooms by layer, lowest first, with their size and what they import."""
    by_layer, counts = _rooms()
    out = ["| layer | room | modules | lines | imports rooms |", "|---:|---|---:|---:|---|"]
    for lay in sorted(by_layer):
        for room in by_layer[lay]:
            path = _room_path(room)
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            lines = sum(len(f.read_text(encoding="utf-8").splitlines()) for f in files)
            uses = sorted(b for (a, b), _ in counts.items() if a == room)
            name = f"`{room}/`" if path.is_dir() else f"`{room}.py`"
            out.append(f"| {lay} | {name} | {len(files)} | {lines:,} | {', '.join(uses) or '-'} |")
    return "\n".join(out)


def structure_svg() -> str:
    """An SVG of the rooms of ``src/evalign`` by layer, with the imports between rooms."""
    by_layer, counts = _rooms()
    layers = sorted(by_layer)
    box_w, box_h, gap_x, gap_y, margin, label_w = 104, 30, 18, 62, 20, 70
    widest = max(len(v) for v in by_layer.values())
    width = margin * 2 + label_w + widest * box_w + (widest - 1) * gap_x
    height = margin * 2 + len(layers) * box_h + (len(layers) - 1) * gap_y + 24 + gap_y // 2
    pos: dict[str, tuple[float, float]] = {}
    for row, lay in enumerate(reversed(layers)):  # the highest layer on top
        names = by_layer[lay]
        row_w = len(names) * box_w + (len(names) - 1) * gap_x
        x0 = margin + label_w + ((width - margin * 2 - label_w) - row_w) / 2
        y = margin + 24 + row * (box_h + gap_y)
        for i, n in enumerate(names):
            pos[n] = (x0 + i * (box_w + gap_x), y)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="13">',
           "<title>Rooms of src/evalign by layer; a line joins two rooms when one imports the other "
           "(thicker: more import statements; imports point down)</title>",
           '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
           'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5c6bc0"/></marker></defs>',
           f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
           f'<text x="{margin}" y="{margin + 6}" fill="#333">layer</text>']
    for row, lay in enumerate(reversed(layers)):
        label_y = margin + 24 + row * (box_h + gap_y) + box_h / 2 + 4
        out.append(f'<text x="{margin}" y="{label_y:.0f}" fill="#777">{lay}</text>')
    for (a, b), count in sorted(counts.items()):
        if a not in pos or b not in pos:
            continue
        (xa, ya), (xb, yb) = pos[a], pos[b]
        x1, x2 = xa + box_w / 2, xb + box_w / 2
        stroke = min(0.6 + count / 6, 5.0)
        if ya == yb:  # a sideways import: an arc under the row
            y1 = y2 = ya + box_h
            d = f"M{x1:.1f},{y1:.1f} Q{(x1 + x2) / 2:.1f},{y1 + gap_y * 0.7:.1f} {x2:.1f},{y2:.1f}"
        else:
            y1, y2 = (ya + box_h, yb) if ya < yb else (ya, yb + box_h)
            d = f"M{x1:.1f},{y1:.1f} L{x2:.1f},{y2:.1f}"
        out.append(f'<path d="{d}" fill="none" stroke="#5c6bc0" stroke-opacity="0.45" '
                   f'stroke-width="{stroke:.2f}" marker-end="url(#head)">'
                   f'<title>{escape(a)} imports {escape(b)}: {count} import statement(s)</title></path>')
    for room, (bx, by) in sorted(pos.items()):
        out.append(f'<rect x="{bx:.1f}" y="{by:.1f}" width="{box_w}" height="{box_h}" rx="5" fill="#e8eaf6" '
                   f'stroke="#3949ab"/>')
        out.append(f'<text x="{bx + box_w / 2:.1f}" y="{by + box_h / 2 + 4:.1f}" text-anchor="middle">'
                   f'{escape(room)}{"/" if _room_path(room).is_dir() else ".py"}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# the hooks


def on_files(files: Any, config: Any) -> Any:
    """Add the generated picture to the site's files."""
    from mkdocs.structure.files import File

    if files.get_file_from_path(SVG_PATH) is None:
        files.append(File.generated(config, SVG_PATH, content=structure_svg()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each generation mark with what it stands for."""
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if ROOMS_MARK in markdown:
        markdown = markdown.replace(ROOMS_MARK, rooms_table())
    if API_MARK in markdown:
        markdown = markdown.replace(API_MARK, api_top_level())
    if DATASETS_MARK in markdown:
        markdown = markdown.replace(DATASETS_MARK, dataset_catalogue())
    return markdown


if __name__ == "__main__":  # pragma: no cover - a manual look
    os.environ.update(_HELP_ENV)
    what = sys.argv[1] if len(sys.argv) > 1 else "cli"
    print({"cli": cli_reference, "datasets": dataset_catalogue, "svg": structure_svg, "rooms": rooms_table,
           "api": api_top_level}[what]())
