"""One self-contained HTML page: inline CSS, figures as base64 PNG, no external resources (opening
it makes no network request); the only script is the item explorer's own inline one
(:mod:`evalign.report.explorer`)."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field

import pandas as pd

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto; max-width: 1100px;
       padding: 1.5em 2em 4em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
p.subtitle { color: #555; margin-top: 0; white-space: pre-wrap; }
nav ul { padding-left: 1.2em; columns: 2; }
table.tbl { border-collapse: collapse; font-size: 0.88em; margin: 0.8em 0; }
table.tbl th, table.tbl td { border-bottom: 1px solid #e3e3e3; padding: 0.3em 0.7em; text-align: right; }
table.tbl th { background: #f4f6f8; }
table.tbl td:first-child, table.tbl th:first-child { text-align: left; }
table.tbl .iv { white-space: nowrap; }
.tblwrap { max-width: 100%; overflow-x: auto; }
.tblbox .more { display: none; }
.tblbox input.allcols:checked ~ .tblwrap .more { display: table-cell; }
.tblbox label { font-size: 0.8em; color: #555; margin-left: 0.3em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
.note { font-size: 0.85em; color: #555; }
footer { margin-top: 3em; font-size: 0.8em; color: #777; }
"""


@dataclass
class Figure:
    """A rendered plot: file stem, caption and PNG bytes."""

    name: str
    caption: str
    png: bytes


@dataclass
class Section:
    """One part of the page: a heading, text, tables (title -> display table) and figures."""

    key: str
    title: str
    text: str = ""
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    #: a bulleted list shown after the text (notes)
    items: list[str] = field(default_factory=list)
    #: lines shown directly under the tables (a table's headline and warnings)
    after: list[str] = field(default_factory=list)
    #: a ready HTML fragment shown after the figures (the item explorer); its texts are escaped by its maker
    html: str = ""
    #: per table (title): the columns shown at first; the others are behind the table's "all columns"
    #: toggle (so that a wide results table fits the page)
    main: dict[str, list[str]] = field(default_factory=dict)


#: what may not stand raw in an HTML page: C0 control characters other than tab, newline and carriage
#: return (NUL among them), DEL, and lone UTF-16 surrogates (which no UTF-8 file can hold)
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c < 0x20:
        return chr(0x2400 + c)  # the Control Pictures block: NUL -> U+2400
    return "\u2421" if c == 0x7F else "\ufffd"


def visible_controls(page: str) -> str:
    """``page`` with every character an HTML page may not hold raw (a NUL, another control character,
    DEL, a lone surrogate) replaced by a visible stand-in: its Control Pictures symbol (NUL -> ``␀``,
    DEL -> ``␡``) or U+FFFD for a surrogate. Applied to every page and fragment after escaping."""
    return _UNSAFE.sub(_visible, page)


def _table_html(df: pd.DataFrame, main: list[str] | None = None, key: str = "") -> str:
    """A table; with ``main``, the other columns are hidden until its "all columns" box is ticked
    (CSS only), and the table scrolls inside its box rather than the page."""
    if main is None or set(main) >= set(map(str, df.columns)):
        return df.to_html(index=False, escape=True, border=0, classes="tbl", na_rep="-")
    e = html.escape

    def cls(c: str) -> str:
        names = ([] if c in main else ["more"]) + (["iv"] if "[" in c else [])
        return f' class="{" ".join(names)}"' if names else ""

    cols = [str(c) for c in df.columns]
    head = "".join(f"<th{cls(c)}>{e(c)}</th>" for c in cols)
    rows = "".join("<tr>" + "".join(f"<td{cls(c)}>{e('-' if _missing(v) else str(v))}</td>"
                                    for c, v in zip(cols, r, strict=True)) + "</tr>"
                   for r in df.itertuples(index=False))
    box = f"cols-{e(key)}"
    return (f'<div class="tblbox"><input type="checkbox" class="allcols" id="{box}"><label for="{box}">show all '
            f"{len(cols)} columns ({len(cols) - len([c for c in cols if c in main])} more)</label>"
            f'<div class="tblwrap"><table class="tbl"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
            "</div></div>")


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def render_html(title: str, subtitle: str | None, sections: list[Section], footer: str) -> str:
    """The page as a string."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
    ]
    if subtitle:
        parts.append(f'<p class="subtitle">{e(subtitle)}</p>')
    parts.append("<nav><ul>" + "".join(f'<li><a href="#{e(s.key)}">{e(s.title)}</a></li>' for s in sections) + "</ul></nav>")
    for s in sections:
        parts.append(f'<section id="{e(s.key)}"><h2>{e(s.title)}</h2>')
        if s.text:
            parts.append(f'<p class="note">{e(s.text)}</p>')
        if s.items:
            parts.append('<ul class="note">' + "".join(f"<li>{e(i)}</li>" for i in s.items) + "</ul>")
        for name, df in s.tables.items():
            if len(s.tables) > 1 or name != s.title:
                parts.append(f"<h3>{e(name)}</h3>")
            parts.append(_table_html(df, s.main.get(name), f"{s.key}-{len(parts)}"))
        if s.after:
            parts.append('<ul class="note warn">' + "".join(f"<li>{e(i)}</li>" for i in s.after) + "</ul>")
        for f in s.figures:
            data = base64.b64encode(f.png).decode("ascii")
            parts.append(
                f'<figure class="plot" id="fig-{e(f.name)}"><img src="data:image/png;base64,{data}" '
                f'alt="{e(f.caption)}"><figcaption>{e(f.caption)}</figcaption></figure>'
            )
        if s.html:
            parts.append(s.html)
        parts.append("</section>")
    parts.append(f"<footer>{e(footer)}</footer></body></html>")
    return visible_controls("\n".join(parts) + "\n")
