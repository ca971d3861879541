"""The labelling page's server: a small Starlette app over a :class:`~evalign.annotate.store.Store`.

Routes: ``/annotate/NAME`` (the page; ``NAME`` is ``[A-Za-z0-9_.-]{1,64}``, case-normalised),
``/api/NAME/state``, ``/api/NAME/label``, ``/api/NAME/undo``, ``/api/NAME/skip`` (the page's calls; POSTs
carry the page's CSRF token in ``X-CSRF-Token``), ``/admin`` and ``/api/admin`` (the progress and
agreement view; ``/agreement`` and ``/api/agreement`` too), ``/static/...``.

Security (:class:`Guard`): the Host header must name this server (DNS rebinding); a request carries a
token (``?token=T`` once, then a cookie, or the header ``Authorization: token T``): the admin token
(alone opens the admin view), an invited annotator's own token (opens only that annotator's page: any
other is 403) or the shared ``--token`` (any annotator not invited). Without a shared token on a
loopback address, the pages of annotators not invited open without a token. Pages are sent with a
Content-Security-Policy that allows only this server's own script and style; item text reaches the page
as Markdown rendered and sanitised on the server (:mod:`~evalign.annotate.render`).
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import math
import secrets
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from evalign.annotate import keys_help
from evalign.annotate.assign import (
    choice_of,
    gold_due,
    gold_order,
    is_ahead,
    label_code,
    normal_name,
    queue,
    shown_order,
    valid_name,
)
from evalign.annotate.export import agreement, annotator_stats, column_prefix
from evalign.annotate.items import choose_task, read_items_to_label
from evalign.annotate.render import markdown_html
from evalign.annotate.store import Flags, Store, StoreSettings
from evalign.annotate.study import StudySettings, check_study, read_gold, read_instructions
from evalign.errors import EvalignError, InputError, UsageError
from evalign.io import check_value_text, json_loads
from evalign.judges.prompts import load_rubric

STATIC = Path(__file__).parent / "static"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
#: the longest comment stored
MAX_COMMENT = 5000
#: the largest request body read, in bytes (a label with the longest comment, escaped, is under 32 KiB)
MAX_BODY = 64 * 1024


@dataclass(frozen=True)
class ServerSettings:
    """Where the page is served and who may open it.

    Attributes:
        host: the address bound (127.0.0.1 by default).
        port: the port bound.
        token: the shared token (any annotator not invited labels with it), or None.
        admin_token: the token of the admin view (progress and agreement), or None (no admin view).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    admin_token: str | None = None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(settings: ServerSettings) -> set[str] | None:
    """The Host header values accepted (None: any, for a wildcard address, where the token guards)."""
    if settings.host in ("0.0.0.0", "::", ""):
        return None
    names = {settings.host.lower(), f"[{settings.host.lower()}]"}
    if is_loopback(settings.host):
        names |= {"localhost", "127.0.0.1", "[::1]"}
    return {n for name in names for n in (name, f"{name}:{settings.port}")}


def csrf_token(secret: str, annotator: str) -> str:
    """The CSRF token of ``annotator``'s page (an HMAC of the name with the store's secret)."""
    return hmac.new(secret.encode(), f"csrf:{annotator}".encode(), hashlib.sha256).hexdigest()


#: the paths of the admin view (the admin token alone opens them)
ADMIN_PATHS = ("/admin", "/agreement", "/api/admin", "/api/agreement")


def route_of(path: str) -> tuple[str, str | None]:
    """What a request path is: ``("admin", None)``, ``("annotator", NAME)`` (NAME case-normalised) or
    ``("public", None)`` (the start page, the static files)."""
    if path.rstrip("/") in ADMIN_PATHS:
        return "admin", None
    parts = path.split("/")
    if (len(parts) >= 3 and parts[1] == "annotate") or (len(parts) >= 4 and parts[1] == "api"):
        return "annotator", normal_name(parts[2])
    return "public", None


class Guard:
    """ASGI middleware: the Host check, who the request's token is (403 where it may not go), and the
    security headers."""

    def __init__(self, app: ASGIApp, *, settings: ServerSettings, store: Store | None = None) -> None:
        self.app = app
        self.token = settings.token
        self.admin_token = settings.admin_token
        self.store = store
        self.open = settings.token is None and is_loopback(settings.host)  # no token needed (loopback)
        self.hosts = allowed_hosts(settings)
        self.cookie = f"evalign_annotate_{settings.port}"

    def _token_given(self, scope: Scope) -> tuple[str | None, bool]:
        """The token the request carries and whether it came in the query (then it is set as a cookie)."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        auth = headers.get("authorization", "")
        if auth.lower().startswith("token "):
            return auth[6:].strip(), False
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return query["token"][0], True
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie:
                return value, False
        return None, False

    def who(self, given: str | None) -> str | None:
        """Whose token ``given`` is: ``"admin"``, ``"shared"``, ``"annotator:NAME"`` or None."""
        if not given:
            return None
        if self.admin_token is not None and hmac.compare_digest(given.encode(), self.admin_token.encode()):
            return "admin"
        if self.token is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            return "shared"
        name = self.store.annotator_of(given) if self.store is not None else None
        return None if name is None else f"annotator:{name}"

    def refusal(self, who: str | None, path: str) -> str | None:
        """Why the request may not go to ``path`` (the text of the 403), or None."""
        kind, name = route_of(path)
        if kind == "admin":
            return None if who == "admin" else "403: the admin view needs the admin token (printed at the server's start)"
        if kind == "public" or who == "admin":
            return None if (who is not None or self.open) else "403: a token is needed (?token=T or 'Authorization: token T')"
        if who is not None and who.startswith("annotator:"):
            return None if who == f"annotator:{name}" else "403: this token labels only as its own annotator"
        invited = self.store is not None and name in self.store.invited()
        if invited:
            return f"403: {name} was invited: open your own link (with your token)"
        return None if (who == "shared" or self.open) else "403: a token is needed (?token=T or 'Authorization: token T')"

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1").lower()
        if self.hosts is not None and host not in self.hosts:
            await PlainTextResponse("403: this server does not answer to that Host name", 403)(scope, receive, send)
            return
        given, from_query = self._token_given(scope)
        who = self.who(given)
        problem = self.refusal(who, scope.get("path", "/"))
        if problem is not None:
            await PlainTextResponse(problem, 403)(scope, receive, send)
            return
        set_cookie = from_query and who is not None

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store")]
                if set_cookie and given is not None:
                    headers.append((b"set-cookie", f"{self.cookie}={given}; Path=/; HttpOnly; "
                                                   "SameSite=Strict".encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _page(name: str, **values: str) -> str:
    text = (STATIC / name).read_text(encoding="utf-8")
    for k, v in values.items():
        text = text.replace("{{" + k + "}}", html.escape(v, quote=True))
    return text


def gold_key(secret: str, key: str) -> str:
    """The key a gold item is shown under (opaque: the page does not tell a gold item from another)."""
    return hmac.new(secret.encode(), f"gold:{key}".encode(), hashlib.sha256).hexdigest()[:16]


def _shown(store: Store, annotator: str, key: str, view: dict[str, Any], order_key: str) -> dict[str, Any]:
    """What the page shows of one item: its texts (and each rendered as sanitised HTML, in ``html``), the
    two responses in the order drawn for ``annotator``."""
    item: dict[str, Any] = {"key": key, "instruction": view["instruction"], "input": view["input"],
                            "context": view["context"], "reference": view["reference"]}
    if store.settings.task == "pairwise":
        order = shown_order(store.seed, annotator, order_key)
        left, right = ("response_a", "response_b") if order == "ab" else ("response_b", "response_a")
        item["left"], item["right"] = view[left], view[right]
        # each side's own earlier turns of a pair of conversations, with its response
        item["context_left"] = view.get(left.replace("response", "context"), [])
        item["context_right"] = view.get(right.replace("response", "context"), [])
        texts: tuple[str, ...] = ("instruction", "input", "reference", "left", "right")
    else:
        item["response"] = view["response"]
        texts = ("instruction", "input", "reference", "response")
    item["html"] = {t: markdown_html(item[t]) for t in texts}
    for part in ("context", "context_left", "context_right"):
        if part in item:
            item[part] = [dict(m, html=markdown_html(m["content"])) for m in item[part]]
    return item


def _gold_next(store: Store, annotator: str, n_done: int, rate: float) -> str | None:
    """The gold item ``annotator`` is shown next (its key), or None (none due, or none left)."""
    keys = [k for k, _, _ in store.gold_items()]
    if not keys:
        return None
    seen = store.gold_done(annotator)
    if not gold_due(n_done, len(seen), rate):
        return None
    return next((k for k in gold_order(store.seed, annotator, keys) if k not in seen), None)


def state(store: Store, annotator: str, *, show: int | None = None, show_gold: str | None = None,
          study: StudySettings = StudySettings()) -> dict[str, Any]:
    """What ``annotator``'s page shows next: the first item of their queue (or ``show``; a gold item when
    one is due, or ``show_gold``), their progress, the task and its choices. Never another annotator's
    labels. Without an item, ``end`` says why: ``done`` (every item of theirs labelled) or ``full`` (they
    came when every item had its labels already)."""
    settings = store.settings
    done = store.done(annotator)
    todo = queue(store.n_items(), counts=store.counts(), done=done, skipped=store.skipped(annotator),
                 per_item=settings.per_item, ahead=is_ahead(annotator, store.labels_per_annotator()))
    idx = show if show is not None and show not in done else (todo[0] if todo else None)
    item: dict[str, Any] | None = None
    gold = show_gold if show_gold is not None else (
        _gold_next(store, annotator, len(done), study.gold_rate) if idx is not None and show is None else None)
    views = {k: v for k, v, _ in store.gold_items()} if gold is not None else {}
    if gold is not None and gold in views:
        item = _shown(store, annotator, gold_key(store.secret, gold), views[gold], f"gold:{gold}")
    elif idx is not None:
        key, view = store.item(idx)
        item = _shown(store, annotator, key, view, key)
    out = {"annotator": annotator, "task": settings.task, "labels": list(settings.labels),
           "rubric": settings.rubric, "item": item, "min_seconds": study.min_seconds, "per_item": settings.per_item,
           "progress": {"done": len(done), "total": len(done) + len(todo) + (1 if idx is not None and idx not in todo
                                                                              else 0)}}
    if item is None:
        out["end"] = "done" if done else "full"
        out["completion_url"] = study.completion_url if done else None
    return out


def _bad_name() -> Response:
    return PlainTextResponse("404: an annotator name is 1 to 64 letters, digits, '_', '.' or '-'", 404)


def _seconds(v: Any) -> float | None:
    """The seconds the page says a label took (a finite number >= 0), else None."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def _flag(body: dict[str, Any], name: str) -> bool:
    return body.get(name) is True


async def json_object(request: Request) -> dict[str, Any] | Response:
    """The JSON object a POST's body holds (an empty body: ``{}``), or the answer refusing it: 413 for a
    body over :data:`MAX_BODY` bytes (read no further), 400 naming what is wrong for one that is not
    UTF-8, not JSON (nested too deeply, a number too long), holds a lone surrogate, or is not an object.
    The one place every POST route reads its body."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        return PlainTextResponse(f"413: the body is over {MAX_BODY} bytes", 413)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            return PlainTextResponse(f"413: the body is over {MAX_BODY} bytes", 413)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return PlainTextResponse(f"400: the body is not UTF-8 text ({e.reason} at byte {e.start})", 400)
    try:
        body = json_loads(text or "{}", file="the body", line=None)
        check_value_text(body, file="the body", line=1, field="body", line_word="line")
    except InputError as e:
        return PlainTextResponse(f"400: the body is not JSON evalign reads: {e.reason}", 400)
    except ValueError as e:  # (a number past Python's digit limit)
        return PlainTextResponse(f"400: the body is not JSON evalign reads: {e}", 400)
    return body if isinstance(body, dict) else PlainTextResponse("400: send a JSON object", 400)


class Handlers:
    """The app's endpoints over one store."""

    def __init__(self, store: Store, study: StudySettings = StudySettings()) -> None:
        self.store = store
        self.secret = store.secret
        self.study = study
        self.instructions = markdown_html(study.instructions) if study.instructions else None

    async def checked_post(self, request: Request) -> tuple[str, dict[str, Any] | Response]:
        """The annotator and the JSON body of a POST, or the response refusing it (bad name, no CSRF
        token, not JSON)."""
        name = str(request.path_params["name"])
        if not valid_name(name):
            return name, _bad_name()
        name = normal_name(name)
        given = request.headers.get("x-csrf-token", "")
        if not hmac.compare_digest(given.encode(), csrf_token(self.secret, name).encode()):
            return name, PlainTextResponse("403: missing or wrong CSRF token (reload the page)", 403)
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return name, PlainTextResponse("415: send JSON", 415)
        return name, await json_object(request)

    def item_index(self, body: dict[str, Any]) -> int | None:
        key = body.get("key")
        return self.store.index_of(key) if isinstance(key, str) else None

    def gold_of(self, body: dict[str, Any]) -> str | None:
        """The gold item whose shown key ``body["key"]`` is, or None."""
        key = body.get("key")
        if not isinstance(key, str):
            return None
        return next((k for k, _, _ in self.store.gold_items() if gold_key(self.secret, k) == key), None)

    def state(self, name: str, **kw: Any) -> dict[str, Any]:
        return state(self.store, name, study=self.study, **kw)

    async def home(self, request: Request) -> Response:
        return HTMLResponse(_page("home.html"))

    async def start(self, request: Request) -> Response:
        name = request.query_params.get("name", "")
        return RedirectResponse(f"/annotate/{normal_name(name)}", 303) if valid_name(name) else _bad_name()

    async def page(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        if not valid_name(name):
            return _bad_name()
        name = normal_name(name)
        keys = keys_help(self.store.settings.task, self.store.settings.labels)
        return HTMLResponse(_page("page.html", annotator=name, csrf=csrf_token(self.secret, name), keys=keys))

    # the store's work runs in the thread pool (sync endpoints, run_in_threadpool): a label's commit never
    # holds up the event loop, and the store's lock keeps one writer at a time
    def get_state(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        if not valid_name(name):
            return _bad_name()
        out = self.state(normal_name(name))
        out["instructions"] = self.instructions
        return JSONResponse(out)

    async def post_label(self, request: Request) -> Response:
        name, body = await self.checked_post(request)
        return body if isinstance(body, Response) else await run_in_threadpool(self.label, name, body)

    def label(self, name: str, body: dict[str, Any]) -> Response:
        """Store ``name``'s label of the item ``body["key"]`` (answer ``body["choice"]``, flags
        ``body["unsure"]`` and ``body["broken"]``); 409 for a duplicate. Answers with the page's next state."""
        idx = self.item_index(body)
        gold = self.gold_of(body) if idx is None else None
        if idx is None and gold is None:
            return PlainTextResponse("400: unknown item", 400)
        task = self.store.settings
        order_key = self.store.item(idx)[0] if idx is not None else f"gold:{gold}"
        order = shown_order(self.store.seed, name, order_key) if task.task == "pairwise" else None
        try:
            value = label_code(task.task, str(body.get("choice", "")), order or "ab", task.labels)
        except ValueError as e:
            return PlainTextResponse(f"400: {e}", 400)
        comment = body.get("comment")
        comment = comment[:MAX_COMMENT] if isinstance(comment, str) and comment.strip() else None
        seconds = _seconds(body.get("seconds"))
        if idx is not None:
            stored = self.store.add_label(name, idx, value, shown=order, seconds=seconds, comment=comment,
                                          flags=Flags(unsure=_flag(body, "unsure"), broken=_flag(body, "broken")))
        else:
            stored = self.store.add_gold_label(name, str(gold), value, shown=order, seconds=seconds)
        out = self.state(name)
        out["stored"] = stored
        return JSONResponse(out, status_code=200 if stored else 409)

    async def post_undo(self, request: Request) -> Response:
        name, body = await self.checked_post(request)
        return body if isinstance(body, Response) else await run_in_threadpool(self.undo, name)

    def undo(self, name: str) -> Response:
        """Remove ``name``'s last label; the page shows that item again, and ``undone`` says which item and
        which answer were removed (``{"key", "choice"}``; None: nothing to undo)."""
        removed = self.store.undo_last(name)
        if removed is None:
            out = self.state(name)
            out["undone"] = None
            return JSONResponse(out)
        kind, where, value = removed
        settings = self.store.settings
        if kind == "gold":
            out = self.state(name, show_gold=str(where))
            order_key = f"gold:{where}"
        else:
            out = self.state(name, show=int(where))
            order_key = self.store.item(int(where))[0]
        order = shown_order(self.store.seed, name, order_key) if settings.task == "pairwise" else "ab"
        choice = None if value is None else choice_of(settings.task, value, order, settings.labels)
        out["undone"] = {"key": out["item"]["key"] if out["item"] else None, "choice": choice}
        return JSONResponse(out)

    async def post_skip(self, request: Request) -> Response:
        name, body = await self.checked_post(request)
        return body if isinstance(body, Response) else await run_in_threadpool(self.skip, name, body)

    def skip(self, name: str, body: dict[str, Any]) -> Response:
        """Put the item ``body["key"]`` at the end of ``name``'s queue (a gold item is not shown again)."""
        idx = self.item_index(body)
        if idx is None:
            gold = self.gold_of(body)
            if gold is None:
                return PlainTextResponse("400: unknown item", 400)
            self.store.add_gold_label(name, gold, None, shown=None, seconds=None)
        else:
            self.store.skip(name, idx)
        return JSONResponse(self.state(name))

    def agreement_json(self, request: Request) -> Response:
        out = agreement(self.store).as_dict()
        out["annotators"] = [s.as_dict() for s in annotator_stats(self.store)]
        return JSONResponse(out)

    def agreement_page(self, request: Request) -> Response:
        return HTMLResponse(agreement_html(self.store))


def create_app(store: Store, settings: ServerSettings, study: StudySettings = StudySettings()) -> Starlette:
    """The Starlette app serving ``store`` (wrapped in :class:`Guard`)."""
    h = Handlers(store, study)
    routes = [
        Route("/", h.home), Route("/start", h.start),
        Route("/annotate/{name}", h.page),
        Route("/api/agreement", h.agreement_json), Route("/api/admin", h.agreement_json),
        Route("/api/{name}/state", h.get_state),
        Route("/api/{name}/label", h.post_label, methods=["POST"]),
        Route("/api/{name}/undo", h.post_undo, methods=["POST"]),
        Route("/api/{name}/skip", h.post_skip, methods=["POST"]),
        Route("/agreement", h.agreement_page), Route("/admin", h.agreement_page),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    outer = Starlette()
    outer.mount("/", Guard(Starlette(routes=routes), settings=settings, store=store))
    return outer


def agreement_html(store: Store) -> str:
    """The admin view (``/admin``, ``/agreement``): per annotator the labels, median seconds per item, gold
    accuracy, unsure and broken flags; Cohen's kappa per pair, Krippendorff's alpha, the items short of K
    (every value escaped)."""
    ag = agreement(store)
    esc = html.escape

    def num(x: float | None, digits: int = 3) -> str:
        return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"

    prefix = column_prefix(store.settings.task)
    rows = "".join(
        f"<tr><td>{esc(s.name)}</td><td><code>{esc(prefix + s.name)}</code></td><td class=n>{s.labels}</td>"
        f"<td class=n>{num(s.median_seconds, 1)}</td>"
        f"<td class=n>{num(s.gold_accuracy)} ({s.gold_correct}/{s.gold_total})</td>"
        f"<td class=n>{s.unsure}</td><td class=n>{s.broken}</td></tr>" for s in annotator_stats(store))
    pairs = "".join(f"<tr><td>{esc(p.a)}</td><td>{esc(p.b)}</td><td class=n>{p.n_items}</td>"
                    f"<td class=n>{num(p.kappa)}</td></tr>" for p in ag.pairs)
    short = ", ".join(esc(k) for k in ag.short[:50]) + (f" … ({len(ag.short) - 50} more)" if len(ag.short) > 50 else "")
    weights = " (quadratic weights)" if store.settings.task == "graded" else ""
    variants = "; ".join(", ".join(esc(n) for n in group) for group in ag.case_variants)
    body = (f"<p>{ag.n_items} items, {ag.per_item} labels wanted on each; "
            f"<strong>{len(ag.short)}</strong> still short of {ag.per_item}.</p>"
            f"<h2>Annotators</h2><div class=scroll><table><tr><th>annotator</th><th>export column</th><th>labels</th>"
            f"<th>median s / item</th><th>gold accuracy</th><th>unsure</th><th>broken</th></tr>"
            f"{rows or '<tr><td colspan=7>none yet</td></tr>'}</table></div>"
            + (f"<p class=notice>Names differing only in case (labels kept apart): {variants}</p>" if variants else "")
            + f"<h2>Cohen's kappa per pair{weights}</h2><div class=scroll><table><tr><th>annotator</th><th>annotator</th>"
            f"<th>items both labelled</th><th>kappa</th></tr>{pairs or '<tr><td colspan=4>two annotators needed</td></tr>'}"
            f"</table></div><h2>Krippendorff's alpha</h2><p class=big>{num(ag.alpha)}</p>"
            + (f"<h2>Items short of {ag.per_item}</h2><p class=keys>{short}</p>" if ag.short else ""))
    return _page("agreement.html", task=store.settings.task).replace("{{body}}", body)


@dataclass(frozen=True)
class PageSettings:
    """What the page asks for (``evalign annotate``'s options).

    Attributes:
        task: pairwise, graded or label; None: by the table (:func:`~evalign.annotate.items.choose_task`).
        labels: the label set of the label task.
        per_item: labels each item needs (K).
        rubric: a rubric NAME or file shown with graded items, or None.
        gold: the gold items' table (the task's shape, the known answer in a column ``gold``), or None.
        instructions: the study's instructions (a Markdown file), or None.
    """

    task: str | None = None
    labels: tuple[str, ...] = ()
    per_item: int = 3
    rubric: str | None = None
    gold: Path | None = None
    instructions: Path | None = None


def check_port(host: str, port: int) -> None:
    """A clear error when ``host:port`` cannot be bound (in use, or not an address of this machine)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise EvalignError(f"cannot serve on {host}:{port} ({e.strerror or e})") from None


def _rubric(name: str | None, task: str) -> dict[str, Any] | None:
    if name is None:
        return None
    if task != "graded":
        raise UsageError("--rubric goes with --task graded")
    r = load_rubric(name)
    return {"name": r.name, "criteria": r.criteria, "descriptions": list(r.descriptions)}


def _announce(say: Callable[[str], None], store: Store, server: ServerSettings) -> None:
    """Print where the pages are: the labelling page (with the shared token), the invited annotators,
    the admin view (with the admin token)."""
    host = server.host
    shown = f"[{host}]" if ":" in host else ("127.0.0.1" if host == "0.0.0.0" else host)
    base, query = f"http://{shown}:{server.port}", f"?token={server.token}" if server.token else ""
    invited = sorted(store.invited())
    if invited:
        say(f"Invited: {', '.join(invited)} (each opens their own link; `evalign annotate invite` makes a new one)")
    if server.token or is_loopback(host):
        say(f"Labelling page: {base}/annotate/NAME{query}  (NAME: each annotator's name)")
    say(f"Admin view (progress, agreement): {base}/admin?token={server.admin_token}   Stop: Ctrl-C")


def serve(items: Path, db: Path, *, page: PageSettings, server: ServerSettings,
          study: StudySettings = StudySettings(), say: Callable[[str], None] = print) -> None:
    """Serve the labelling page of ``items`` (labels stored in ``db``) until stopped; ``say`` prints the
    URLs with their tokens: the admin token (generated when none is given) and the shared token
    (generated when none is given, the host is not loopback and no annotator is invited)."""
    import uvicorn  # the server: only when serving

    task = choose_task(items, page.task, list(page.labels))
    rubric = _rubric(page.rubric, task)
    check_study(study)
    for option, value in (("--token", server.token), ("--admin-token", server.admin_token)):
        if value is not None and not value.strip():
            raise UsageError(f"{option} is empty")
    if server.admin_token is not None and server.admin_token == server.token:
        raise UsageError("--admin-token must differ from --token (the admin view is the admin's alone)")
    if page.instructions is not None:
        study = StudySettings(instructions=read_instructions(page.instructions), completion_url=study.completion_url,
                              min_seconds=study.min_seconds, gold_rate=study.gold_rate)
    to_label = read_items_to_label(items, task)
    gold = read_gold(page.gold, task, page.labels) if page.gold is not None else None
    check_port(server.host, server.port)
    store = Store(db)
    try:
        store.initialise(to_label, StoreSettings(task=task, labels=page.labels, per_item=page.per_item,
                                                 rubric=rubric, source=str(items)))
        if gold is not None:
            store.set_gold(gold)
        token = server.token
        if token is None and not is_loopback(server.host) and not store.invited():
            token = secrets.token_urlsafe(24)
        server = ServerSettings(host=server.host, port=server.port, token=token,
                                admin_token=server.admin_token or secrets.token_urlsafe(24))
        say(f"{len(to_label)} items, {task}, {page.per_item} labels each; {len(store.labels())} labels stored in {db}"
            + (f"; {len(gold)} gold items" if gold else ""))
        _announce(say, store, server)
        config = uvicorn.Config(create_app(store, server, study), host=server.host, port=server.port,
                                log_level="warning", access_log=False, lifespan="off")
        uvicorn.Server(config).run()
    finally:
        store.close()


def invite(db: Path, names: list[str], *, base_url: str = "http://127.0.0.1:8765") -> list[tuple[str, str]]:
    """Invite ``names`` to label in the store at ``db`` (made when new): each gets a token of its own,
    stored hashed (a name invited again gets a new one: the old link stops working). Returns each
    (case-normalised) name with its link ``BASE/annotate/NAME?token=T``."""
    bad = [n for n in names if not valid_name(n)]
    if bad:
        raise UsageError(f"an annotator name is 1 to 64 letters, digits, '_', '.' or '-', got {bad[0]!r}")
    if not names:
        raise UsageError("name at least one annotator to invite")
    store = Store(db)
    try:
        out = []
        for name in dict.fromkeys(normal_name(n) for n in names):
            out.append((name, f"{base_url.rstrip('/')}/annotate/{name}?token={store.invite(name)}"))
        return out
    finally:
        store.close()
