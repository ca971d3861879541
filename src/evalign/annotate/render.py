"""Item text as the page shows it: Markdown rendered to HTML on the server by markdown-it-py (CommonMark,
raw HTML in the input NOT rendered: it stays text) and then sanitised by nh3 (ammonia's allow-list: no
script, no event handler attribute, no ``javascript:`` URL), so that what reaches the page is inert
whatever an item holds. The page's Content-Security-Policy (no inline script) is a third wall.

Needs the ``annotate`` extra (``markdown-it-py``, ``nh3``)."""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

#: the tags an item's HTML may hold (what CommonMark and its tables make, images aside)
TAGS = {"p", "br", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5",
        "h6", "hr", "table", "thead", "tbody", "tr", "th", "td", "del", "s"}
#: the attributes kept (the link target; a code block's language class is dropped)
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
#: the URL schemes a link may have
URL_SCHEMES = {"http", "https", "mailto"}
#: ``dir="auto"`` on every block of text: a right-to-left paragraph reads right to left
DIR_AUTO = {tag: {"dir": "auto"} for tag in ("p", "li", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th")}

_MD = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable("table")


@lru_cache(maxsize=4096)
def markdown_html(text: str) -> str:
    """``text`` (Markdown, or plain text: single line breaks are kept) as sanitised HTML: raw HTML in
    ``text`` is shown as text, links only to http(s) and mailto, code blocks as ``<pre><code>``."""
    return nh3.clean(_MD.render(text or ""), tags=TAGS, attributes=ATTRIBUTES, url_schemes=URL_SCHEMES,
                     link_rel="noopener noreferrer nofollow", set_tag_attribute_values=DIR_AUTO,
                     strip_comments=True)
