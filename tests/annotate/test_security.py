"""The labelling server's security, request by request (Starlette's TestClient), and the command line's
binding and token: 127.0.0.1 by default, a generated token for another host, 403 without it, the Host
check, CSRF on POSTs, annotator names checked, text shown as text, only the database written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from annotate_helpers import XSS, free_port, pair_store, write_pairs
from starlette.testclient import TestClient

from evalign.annotate.app import ServerSettings, allowed_hosts, create_app, csrf_token
from evalign.annotate.assign import shown_order
from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings

PORT = 8765
LOCAL = f"http://127.0.0.1:{PORT}"


def _client(tmp_path: Path, token: str | None = None, host: str = "127.0.0.1", n: int = 4) -> tuple[TestClient, Store]:
    store, _, _ = pair_store(tmp_path, n)
    base = f"http://{host}:{PORT}" if host not in ("0.0.0.0",) else f"http://192.0.2.7:{PORT}"
    return TestClient(create_app(store, ServerSettings(host=host, port=PORT, token=token)), base_url=base), store


def _csrf(client: TestClient, name: str) -> str:
    page = client.get(f"/annotate/{name}")
    assert page.status_code == 200
    return re.search(r'name="evalign-csrf" content="([0-9a-f]+)"', page.text).group(1)


def test_default_is_loopback_only(tmp_path: Path) -> None:
    client, store = _client(tmp_path)
    assert client.get("/annotate/ann1").status_code == 200
    assert client.get("/api/ann1/state").json()["item"]["key"] == "q000"
    assert allowed_hosts(ServerSettings()) >= {"127.0.0.1:8765", "localhost:8765", "[::1]:8765"}
    store.close()


def test_host_header_is_checked(tmp_path: Path) -> None:
    client, store = _client(tmp_path)
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example:8765", "10.0.0.1:8765"):
        res = client.get("/api/ann1/state", headers={"Host": host})
        assert res.status_code == 403 and "Host" in res.text
    assert client.get("/api/ann1/state", headers={"Host": "localhost:8765"}).status_code == 200
    store.close()


def test_token_in_force_everywhere(tmp_path: Path) -> None:
    client, store = _client(tmp_path, token="s3cret-token")
    for path in ("/", "/annotate/ann1", "/api/ann1/state", "/agreement", "/api/agreement", "/static/annotate.js"):
        assert client.get(path).status_code == 403, path  # loopback included
    assert client.get("/api/ann1/state?token=wrong").status_code == 403
    assert client.get("/api/ann1/state", headers={"Authorization": "token wrong"}).status_code == 403
    assert client.get("/api/ann1/state", headers={"Authorization": "token s3cret-token"}).status_code == 200
    res = client.get("/annotate/ann1?token=s3cret-token")  # the first request: the token becomes a cookie
    assert res.status_code == 200
    cookie = res.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/api/ann1/state").status_code == 200  # the cookie carries it now
    client.cookies.clear()
    assert client.get("/api/ann1/state").status_code == 403
    store.close()


def test_csrf_on_every_post(tmp_path: Path) -> None:
    client, store = _client(tmp_path)
    body = {"key": "q000", "choice": "left"}
    for path in ("label", "undo", "skip"):
        assert client.post(f"/api/ann1/{path}", json=body).status_code == 403
        assert client.post(f"/api/ann1/{path}", json=body, headers={"X-CSRF-Token": "0" * 64}).status_code == 403
    other = _csrf(client, "ann2")  # another annotator's token does not do
    assert client.post("/api/ann1/label", json=body, headers={"X-CSRF-Token": other}).status_code == 403
    token = _csrf(client, "ann1")
    # a form post (what another site could send without the page's token) is refused even with it
    assert client.post("/api/ann1/label", data=body, headers={"X-CSRF-Token": token}).status_code == 415
    assert store.labels() == []
    res = client.post("/api/ann1/label", json=body | {"seconds": 2.5, "comment": "fine"}, headers={"X-CSRF-Token": token})
    assert res.status_code == 200 and res.json()["stored"] is True
    lab = store.labels()[0]
    order = shown_order(store.seed, "ann1", "q000")
    assert (lab.annotator, lab.key, lab.shown, lab.seconds, lab.comment) == ("ann1", "q000", order, 2.5, "fine")
    assert lab.value == (1.0 if order == "ab" else -1.0)  # left = the response shown on the left
    res = client.post("/api/ann1/label", json=body, headers={"X-CSRF-Token": token})  # a second tab
    assert res.status_code == 409 and len(store.labels()) == 1
    assert csrf_token(store.secret, "ann1") == token  # kept in the store: a restart keeps the page working
    store.close()


def test_names_checked(tmp_path: Path) -> None:
    client, store = _client(tmp_path)
    for name in ("a%20b", "%3Cscript%3E", "x" * 65, "a..%2F..%2Fetc"):
        assert client.get(f"/annotate/{name}").status_code == 404
        assert client.get(f"/api/{name}/state").status_code == 404
    assert client.get("/start?name=%3Cb%3E").status_code == 404
    res = client.get("/start?name=ann_1", follow_redirects=False)
    assert res.status_code == 303 and res.headers["location"] == "/annotate/ann_1"
    store.close()


def test_item_text_is_data_never_markup(tmp_path: Path) -> None:
    items = tmp_path / "xss.jsonl"
    write_pairs(items, 6, xss=True)
    store = Store(tmp_path / "x.sqlite")
    store.initialise(read_items_to_label(items, "pairwise"), StoreSettings(task="pairwise"))
    client = TestClient(create_app(store, ServerSettings(port=PORT)), base_url=LOCAL)
    state = client.get("/api/ann1/state").json()
    texts = state["item"]["instruction"] + state["item"]["left"] + state["item"]["right"]
    assert all(x in texts for x in XSS)  # sent as JSON strings, set with textContent by the page
    page = client.get("/annotate/ann1")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    js = client.get("/static/annotate.js").text
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js
    # the agreement page escapes the item keys it lists
    keys = tmp_path / "keys.jsonl"
    keys.write_text(json.dumps({"id": "<script>alert(1)</script>", "instruction": "q", "response_a": "a",
                                "response_b": "b"}) + "\n")
    store2 = Store(tmp_path / "k.sqlite")
    store2.initialise(read_items_to_label(keys, "pairwise"), StoreSettings(task="pairwise"))
    html = TestClient(create_app(store2, ServerSettings(port=PORT, admin_token="adm")), base_url=LOCAL).get(
        "/agreement?token=adm").text
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    store.close()
    store2.close()


def test_static_files_are_plain_and_local() -> None:
    """Plain HTML, CSS and JavaScript shipped with the package: nothing fetched from elsewhere (no CDN),
    nothing to build, and the pages load only this server's script and style."""
    from evalign.annotate.app import STATIC

    files = sorted(p.name for p in STATIC.iterdir())
    assert files == ["agreement.html", "annotate.css", "annotate.js", "home.html", "page.html"]
    for name in files:
        text = (STATIC / name).read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), name  # no URL of another host
        assert "@import" not in text and "import " not in text.replace("!important", ""), name
    for page in ("page.html", "home.html", "agreement.html"):
        refs = re.findall(r'(?:src|href)="([^"]+)"', (STATIC / page).read_text(encoding="utf-8"))
        assert refs and all(r.startswith("/") for r in refs), (page, refs)


def _serve(args: list[str], cwd: Path) -> subprocess.Popen:
    home = cwd / "home"  # nothing may be written there (no cache, no config): only the database
    home.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    env.pop("EVALIGN_CACHE", None)
    return subprocess.Popen([sys.executable, "-m", "evalign", "annotate", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _first_lines(proc: subprocess.Popen, n: int) -> list[str]:
    lines = []
    deadline = time.time() + 60
    while len(lines) < n and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    return lines


def _wait(url: str, **kw: object) -> httpx.Response:
    for _ in range(100):
        try:
            return httpx.get(url, timeout=5, **kw)
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"{url} does not answer")


@pytest.mark.slow
def test_cli_other_host_gets_a_generated_token_and_writes_only_the_db(tmp_path: Path) -> None:
    write_pairs(tmp_path / "pairs.jsonl", 5)
    port = free_port()
    proc = _serve(["pairs.jsonl", "--db", "l.sqlite", "--host", "0.0.0.0", "--port", str(port)], tmp_path)
    try:
        lines = _first_lines(proc, 3)
        url = next(line for line in lines if "Labelling page" in line)
        token = re.search(r"\?token=([A-Za-z0-9_-]{20,})", url).group(1)
        base = f"http://127.0.0.1:{port}"
        assert _wait(f"{base}/api/ann1/state").status_code == 403  # loopback too
        res = httpx.get(f"{base}/api/ann1/state", headers={"Authorization": f"token {token}"})
        assert res.status_code == 200 and res.json()["progress"] == {"done": 0, "total": 5}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    written = {p.name for p in tmp_path.iterdir()}
    assert "l.sqlite" in written and written <= {"l.sqlite", "l.sqlite-shm", "l.sqlite-wal", "pairs.jsonl", "home"}
    assert list((tmp_path / "home").iterdir()) == []


@pytest.mark.slow
def test_cli_loopback_without_token_and_given_token(tmp_path: Path) -> None:
    write_pairs(tmp_path / "pairs.jsonl", 5)
    port = free_port()
    proc = _serve(["pairs.jsonl", "--db", "l.sqlite", "--port", str(port), "--token", "given-token"], tmp_path)
    try:
        lines = _first_lines(proc, 3)
        assert any(f"http://127.0.0.1:{port}/annotate/NAME?token=given-token" in line for line in lines)
        assert _wait(f"http://127.0.0.1:{port}/api/a/state").status_code == 403
        assert httpx.get(f"http://127.0.0.1:{port}/api/a/state?token=given-token").status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    port = free_port()
    proc = _serve(["pairs.jsonl", "--db", "l.sqlite", "--port", str(port)], tmp_path)
    try:
        lines = _first_lines(proc, 3)
        assert any(f"http://127.0.0.1:{port}/annotate/NAME  " in line for line in lines)  # no shared token
        admin = next(line for line in lines if "Admin view" in line)  # the admin view's own, generated
        assert re.search(rf"http://127.0.0.1:{port}/admin\?token=[A-Za-z0-9_-]{{20,}}", admin), admin
        assert _wait(f"http://127.0.0.1:{port}/api/a/state").status_code == 200
        busy = _serve(["pairs.jsonl", "--db", "l.sqlite", "--port", str(port)], tmp_path)
        out, _ = busy.communicate(timeout=60)
        assert busy.returncode == 1 and f"cannot serve on 127.0.0.1:{port}" in out
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    other = tmp_path / "other.jsonl"
    write_pairs(other, 5, seed=3)
    refused = _serve(["other.jsonl", "--db", "l.sqlite", "--port", str(free_port())], tmp_path)
    out, _ = refused.communicate(timeout=60)
    assert refused.returncode == 2 and "labels of other items" in out
