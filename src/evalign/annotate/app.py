"""The labelling page's server: a small Starlette app over a :class:`~evalign.annotate.store.Store`.

Routes: ``/annotate/NAME`` (the page; ``NAME`` is ``[A-Za-z0-9_.-]{1,64}``), ``/api/NAME/state``,
``/api/NAME/label``, ``/api/NAME/undo``, ``/api/NAME/skip`` (the page's calls; POSTs carry the page's
CSRF token in ``X-CSRF-Token``), ``/agreement`` and ``/api/agreement``, ``/static/...``.

Security (:class:`Guard`): the Host header must name this server (DNS rebinding); with a token in
force every request without it gets 403 (the token as ``?token=T`` once, then a cookie, or the header
``Authorization: token T``); pages are sent with a Content-Security-Policy that allows only this
server's own script and style, and the page shows item text as text (``textContent``), never as HTML.
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
from evalign.annotate.assign import is_ahead, label_code, queue, shown_order, valid_name
from evalign.annotate.export import agreement, column_prefix
from evalign.annotate.items import choose_task, read_items_to_label
from evalign.annotate.store import Store, StoreSettings
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
        token: the token every request must carry, or None (loopback only).
    """

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None


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


class Guard:
    """ASGI middleware: the Host check, the token (403 without it), and the security headers."""

    def __init__(self, app: ASGIApp, *, settings: ServerSettings) -> None:
        self.app = app
        self.token = settings.token
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

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                      send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1").lower()
        if self.hosts is not None and host not in self.hosts:
            await PlainTextResponse("403: this server does not answer to that Host name", 403)(scope, receive, send)
            return
        set_cookie = False
        if self.token is not None:
            given, from_query = self._token_given(scope)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                await PlainTextResponse("403: a token is needed (?token=T or 'Authorization: token T')", 403)(
                    scope, receive, send)
                return
            set_cookie = from_query

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-store")]
                if set_cookie and self.token is not None:
                    headers.append((b"set-cookie", f"{self.cookie}={self.token}; Path=/; HttpOnly; "
                                                   "SameSite=Strict".encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _page(name: str, **values: str) -> str:
    text = (STATIC / name).read_text(encoding="utf-8")
    for k, v in values.items():
        text = text.replace("{{" + k + "}}", html.escape(v, quote=True))
    return text


def state(store: Store, annotator: str, *, show: int | None = None) -> dict[str, Any]:
    """What ``annotator``'s page shows next: the first item of their queue (or ``show``), their
    progress, the task and its choices. Never another annotator's labels."""
    settings = store.settings
    done = store.done(annotator)
    todo = queue(store.n_items(), counts=store.counts(), done=done, skipped=store.skipped(annotator),
                 per_item=settings.per_item, ahead=is_ahead(annotator, store.labels_per_annotator()))
    idx = show if show is not None and show not in done else (todo[0] if todo else None)
    item: dict[str, Any] | None = None
    if idx is not None:
        key, view = store.item(idx)
        item = {"key": key, "instruction": view["instruction"], "input": view["input"],
                "context": view["context"], "reference": view["reference"]}
        if settings.task == "pairwise":
            order = shown_order(store.seed, annotator, key)
            left, right = ("response_a", "response_b") if order == "ab" else ("response_b", "response_a")
            item["left"], item["right"] = view[left], view[right]
            # each side's own earlier turns of a pair of conversations, with its response
            item["context_left"] = view.get(left.replace("response", "context"), [])
            item["context_right"] = view.get(right.replace("response", "context"), [])
        else:
            item["response"] = view["response"]
    return {"annotator": annotator, "task": settings.task, "labels": list(settings.labels),
            "rubric": settings.rubric, "item": item,
            "progress": {"done": len(done), "total": len(done) + len(todo) + (1 if idx is not None and idx not in todo
                                                                              else 0)}}


def _bad_name() -> Response:
    return PlainTextResponse("404: an annotator name is 1 to 64 letters, digits, '_', '.' or '-'", 404)


def _seconds(v: Any) -> float | None:
    """The seconds the page says a label took (a finite number >= 0), else None."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


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

    def __init__(self, store: Store) -> None:
        self.store = store
        self.secret = store.secret

    async def checked_post(self, request: Request) -> tuple[str, dict[str, Any] | Response]:
        """The annotator and the JSON body of a POST, or the response refusing it (bad name, no CSRF
        token, not JSON)."""
        name = str(request.path_params["name"])
        if not valid_name(name):
            return name, _bad_name()
        given = request.headers.get("x-csrf-token", "")
        if not hmac.compare_digest(given.encode(), csrf_token(self.secret, name).encode()):
            return name, PlainTextResponse("403: missing or wrong CSRF token (reload the page)", 403)
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return name, PlainTextResponse("415: send JSON", 415)
        return name, await json_object(request)

    def item_index(self, body: dict[str, Any]) -> int | None:
        key = body.get("key")
        return self.store.index_of(key) if isinstance(key, str) else None

    async def home(self, request: Request) -> Response:
        return HTMLResponse(_page("home.html"))

    async def start(self, request: Request) -> Response:
        name = request.query_params.get("name", "")
        return RedirectResponse(f"/annotate/{name}", 303) if valid_name(name) else _bad_name()

    async def page(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        if not valid_name(name):
            return _bad_name()
        keys = keys_help(self.store.settings.task, self.store.settings.labels)
        return HTMLResponse(_page("page.html", annotator=name, csrf=csrf_token(self.secret, name), keys=keys))

    # the store's work runs in the thread pool (sync endpoints, run_in_threadpool): a label's commit never
    # holds up the event loop, and the store's lock keeps one writer at a time
    def get_state(self, request: Request) -> Response:
        name = str(request.path_params["name"])
        return JSONResponse(state(self.store, name)) if valid_name(name) else _bad_name()

    async def post_label(self, request: Request) -> Response:
        name, body = await self.checked_post(request)
        return body if isinstance(body, Response) else await run_in_threadpool(self.label, name, body)

    def label(self, name: str, body: dict[str, Any]) -> Response:
        """Store ``name``'s label of the item ``body["key"]`` (answer ``body["choice"]``); 409 for a
        duplicate. Answers with the page's next state."""
        idx = self.item_index(body)
        if idx is None:
            return PlainTextResponse("400: unknown item", 400)
        task = self.store.settings
        order = shown_order(self.store.seed, name, self.store.item(idx)[0]) if task.task == "pairwise" else None
        try:
            value = label_code(task.task, str(body.get("choice", "")), order or "ab", task.labels)
        except ValueError as e:
            return PlainTextResponse(f"400: {e}", 400)
        comment = body.get("comment")
        comment = comment[:MAX_COMMENT] if isinstance(comment, str) and comment.strip() else None
        stored = self.store.add_label(name, idx, value, shown=order, seconds=_seconds(body.get("seconds")),
                                      comment=comment)
        out = state(self.store, name)
        out["stored"] = stored
        return JSONResponse(out, status_code=200 if stored else 409)

    async def post_undo(self, request: Request) -> Response:
        name, body = await self.checked_post(request)
        return body if isinstance(body, Response) else await run_in_threadpool(self.undo, name)

    def undo(self, name: str) -> Response:
        """Remove ``name``'s last label; the page shows that item again."""
        idx = self.store.undo(name)
        out = state(self.store, name, show=idx)
        out["undone"] = idx is not None
        return JSONResponse(out)

    async def post_skip(self, request: Request) -> Response:
        name, body = await self.checked_post(request)
        return body if isinstance(body, Response) else await run_in_threadpool(self.skip, name, body)

    def skip(self, name: str, body: dict[str, Any]) -> Response:
        """Put the item ``body["key"]`` at the end of ``name``'s queue."""
        idx = self.item_index(body)
        if idx is None:
            return PlainTextResponse("400: unknown item", 400)
        self.store.skip(name, idx)
        return JSONResponse(state(self.store, name))

    def agreement_json(self, request: Request) -> Response:
        return JSONResponse(agreement(self.store).as_dict())

    def agreement_page(self, request: Request) -> Response:
        return HTMLResponse(agreement_html(self.store))


def create_app(store: Store, settings: ServerSettings) -> Starlette:
    """The Starlette app serving ``store`` (wrapped in :class:`Guard`)."""
    h = Handlers(store)
    routes = [
        Route("/", h.home), Route("/start", h.start),
        Route("/annotate/{name}", h.page), Route("/api/agreement", h.agreement_json),
        Route("/api/{name}/state", h.get_state),
        Route("/api/{name}/label", h.post_label, methods=["POST"]),
        Route("/api/{name}/undo", h.post_undo, methods=["POST"]),
        Route("/api/{name}/skip", h.post_skip, methods=["POST"]),
        Route("/agreement", h.agreement_page),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    outer = Starlette()
    outer.mount("/", Guard(Starlette(routes=routes), settings=settings))
    return outer


def agreement_html(store: Store) -> str:
    """The ``/agreement`` page (every value escaped)."""
    ag = agreement(store)
    esc = html.escape

    def num(x: float) -> str:
        return "–" if math.isnan(x) else f"{x:.3f}"

    prefix = column_prefix(store.settings.task)
    counts = "".join(f"<tr><td>{esc(a)}</td><td><code>{esc(prefix + a)}</code></td><td class=n>{c}</td></tr>"
                     for a, c in ag.labels_per_annotator.items())
    pairs = "".join(f"<tr><td>{esc(p.a)}</td><td>{esc(p.b)}</td><td class=n>{p.n_items}</td>"
                    f"<td class=n>{num(p.kappa)}</td></tr>" for p in ag.pairs)
    short = ", ".join(esc(k) for k in ag.short[:50]) + (f" … ({len(ag.short) - 50} more)" if len(ag.short) > 50 else "")
    weights = " (quadratic weights)" if store.settings.task == "graded" else ""
    body = (f"<p>{ag.n_items} items, {ag.per_item} labels wanted on each; "
            f"<strong>{len(ag.short)}</strong> still short of {ag.per_item}.</p>"
            f"<h2>Labels per annotator</h2><table><tr><th>annotator</th><th>export column</th><th>labels</th></tr>"
            f"{counts or '<tr><td colspan=3>none yet</td></tr>'}</table>"
            f"<h2>Cohen's kappa per pair{weights}</h2><table><tr><th>annotator</th><th>annotator</th>"
            f"<th>items both labelled</th><th>kappa</th></tr>{pairs or '<tr><td colspan=4>two annotators needed</td></tr>'}"
            f"</table><h2>Krippendorff's alpha</h2><p class=big>{num(ag.alpha)}</p>"
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
    """

    task: str | None = None
    labels: tuple[str, ...] = ()
    per_item: int = 3
    rubric: str | None = None


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


def serve(items: Path, db: Path, *, page: PageSettings, server: ServerSettings,
          say: Callable[[str], None] = print) -> None:
    """Serve the labelling page of ``items`` (labels stored in ``db``) until stopped; ``say`` prints the
    URLs (with the token: generated here when none is given and the host is not loopback)."""
    import uvicorn  # the server: only when serving

    task = choose_task(items, page.task, list(page.labels))
    rubric = _rubric(page.rubric, task)
    if server.token is not None and not server.token.strip():
        raise UsageError("--token is empty")
    if server.token is None and not is_loopback(server.host):
        server = ServerSettings(host=server.host, port=server.port, token=secrets.token_urlsafe(24))
    to_label = read_items_to_label(items, task)
    check_port(server.host, server.port)
    store = Store(db)
    try:
        store.initialise(to_label, StoreSettings(task=task, labels=page.labels, per_item=page.per_item,
                                                 rubric=rubric, source=str(items)))
        host = server.host
        shown = f"[{host}]" if ":" in host else ("127.0.0.1" if host == "0.0.0.0" else host)
        base, query = f"http://{shown}:{server.port}", f"?token={server.token}" if server.token else ""
        say(f"{len(to_label)} items, {task}, {page.per_item} labels each; {len(store.labels())} labels stored in {db}")
        say(f"Labelling page: {base}/annotate/NAME{query}  (NAME: each annotator's name)")
        say(f"Agreement so far: {base}/agreement{query}   Stop: Ctrl-C")
        config = uvicorn.Config(create_app(store, server), host=host, port=server.port, log_level="warning",
                                access_log=False, lifespan="off")
        uvicorn.Server(config).run()
    finally:
        store.close()
