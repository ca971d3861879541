"""A labelling study run with strangers, request by request (Starlette's TestClient) and on the command
line: invited annotators with tokens of their own (stored hashed; another's page is 403), the admin view
(the admin token alone), case-normalised names, gold items (never exported as labels; each annotator's
accuracy), the unsure / broken flags, the end of the queue for a late annotator, undo saying what it
removed, Markdown rendered inert, and a store of the previous version opened with every label kept."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from annotate_helpers import free_port, pair_store, write_pairs
from starlette.testclient import TestClient
from typer.testing import CliRunner

from evalign.annotate.app import ServerSettings, create_app, gold_key, invite
from evalign.annotate.assign import gold_due, shown_order
from evalign.annotate.export import alttest_labels, long_rows, store_agreement, wide_rows
from evalign.annotate.items import read_items_to_label
from evalign.annotate.render import markdown_html
from evalign.annotate.store import Store
from evalign.annotate.study import StudySettings, read_gold
from evalign.cli import app
from evalign.errors import InputError

LOCAL = "http://127.0.0.1:8765"
ADMIN = "admin-secret-token"


def _csrf(client: TestClient, name: str, token: str | None = None) -> dict[str, str]:
    page = client.get(f"/annotate/{name}", headers={"Authorization": f"token {token}"} if token else {})
    assert page.status_code == 200, page.text
    return {"X-CSRF-Token": re.search(r'name="evalign-csrf" content="([0-9a-f]+)"', page.text).group(1)}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def test_invited_tokens_roles_and_the_admin_view(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 4)
    store.close()
    links = dict(invite(tmp_path / "labels.sqlite", ["Alice", "bob", "alice"], base_url="http://h:9/"))
    assert list(links) == ["alice", "bob"]  # case-normalised, once each
    tokens = {n: re.search(r"\?token=(.+)$", link).group(1) for n, link in links.items()}
    assert links["alice"] == f"http://h:9/annotate/alice?token={tokens['alice']}"
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("labels.sqlite*"))
    assert all(t.encode() not in raw for t in tokens.values())  # stored hashed only
    store = Store(tmp_path / "labels.sqlite")
    client = TestClient(create_app(store, ServerSettings(port=8765, admin_token=ADMIN)), base_url=LOCAL)
    h = _csrf(client, "alice", tokens["alice"]) | _auth(tokens["alice"])
    assert client.post("/api/alice/label", json={"key": "q000", "choice": "tie"}, headers=h).status_code == 200
    # bob's token on alice's page: 403 everywhere, and alice's labels stay
    for path in ("/annotate/alice", "/api/alice/state", "/annotate/Alice"):
        res = client.get(path, headers=_auth(tokens["bob"]))
        assert res.status_code == 403 and "its own annotator" in res.text, path
    bob_on_alice = _csrf(client, "alice", tokens["alice"]) | _auth(tokens["bob"])
    assert client.post("/api/alice/undo", json={}, headers=bob_on_alice).status_code == 403
    assert [lab.annotator for lab in store.labels()] == ["alice"]
    # an invited annotator's page needs their token, even on loopback without a shared token
    client.cookies.clear()
    assert client.get("/annotate/alice").status_code == 403
    assert client.get("/annotate/carol").status_code == 200  # not invited, loopback, no shared token: open
    # the admin view: the admin token alone
    for path in ("/admin", "/api/admin", "/agreement", "/api/agreement"):
        assert client.get(path).status_code == 403, path
        for t in tokens.values():
            assert client.get(path, headers=_auth(t)).status_code == 403, path
        assert client.get(path, headers=_auth(ADMIN)).status_code == 200, path
    page = client.get("/annotate/carol").text
    assert "/agreement" not in page and "/admin" not in page  # the labelling page links to no admin view
    view = client.get("/api/admin", headers=_auth(ADMIN)).json()
    assert [(a["name"], a["labels"]) for a in view["annotators"]] == [("alice", 1), ("bob", 0)]
    # inviting again: a new token, the old one no longer works
    store.close()
    new = dict(invite(tmp_path / "labels.sqlite", ["bob"]))["bob"]
    store = Store(tmp_path / "labels.sqlite")
    client = TestClient(create_app(store, ServerSettings(port=8765, admin_token=ADMIN)), base_url=LOCAL)
    assert client.get("/api/bob/state", headers=_auth(tokens["bob"])).status_code == 403
    assert client.get("/api/bob/state", headers=_auth(new.split("token=")[1])).status_code == 200
    store.close()


def test_shared_token_labels_only_the_annotators_not_invited(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 3)
    alice = store.invite("alice")
    client = TestClient(create_app(store, ServerSettings(host="0.0.0.0", port=8765, token="team", admin_token=ADMIN)),
                        base_url="http://192.0.2.7:8765")
    assert client.get("/api/dan/state", headers=_auth("team")).status_code == 200
    assert client.get("/api/alice/state", headers=_auth("team")).status_code == 403
    assert client.get("/api/dan/state").status_code == 403  # not loopback: a token always
    assert client.get("/api/alice/state", headers=_auth(alice)).status_code == 200
    assert client.get("/static/annotate.js", headers=_auth(alice)).status_code == 200
    assert client.get("/admin", headers=_auth("team")).status_code == 403
    store.close()


def test_names_are_case_normalised_and_old_variants_listed(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 4)
    store.add_label("Alice", 3, 1.0, shown="ab", seconds=1.0, comment=None)  # a label of an earlier version
    client = TestClient(create_app(store, ServerSettings(port=8765)), base_url=LOCAL)
    h = _csrf(client, "ALICE")
    assert h == _csrf(client, "alice")  # one page, one CSRF token
    assert client.post("/api/ALICE/label", json={"key": "q000", "choice": "tie"}, headers=h).status_code == 200
    assert client.get("/start?name=Alice", follow_redirects=False).headers["location"] == "/annotate/alice"
    assert sorted(lab.annotator for lab in store.labels()) == ["Alice", "alice"]
    store.close()
    ag = store_agreement(tmp_path / "labels.sqlite")
    assert ag.case_variants == (("Alice", "alice"),)
    res = CliRunner().invoke(app, ["annotate", "status", str(tmp_path / "labels.sqlite")])
    assert res.exit_code == 0 and "names differing only in case" in res.output and "Alice, alice" in res.output


OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE items (idx INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, record TEXT NOT NULL, view TEXT NOT NULL);
CREATE TABLE labels (id INTEGER PRIMARY KEY AUTOINCREMENT, annotator TEXT NOT NULL,
                     idx INTEGER NOT NULL REFERENCES items(idx), label TEXT NOT NULL,
                     shown TEXT, seconds REAL, comment TEXT, created REAL NOT NULL, UNIQUE (annotator, idx));
CREATE TABLE skips (annotator TEXT NOT NULL, idx INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (annotator, idx));
"""


def test_a_store_of_the_previous_version_opens_with_every_label(tmp_path: Path) -> None:
    """The schema of the previous version (no flags, no annotators, no gold), filled as it filled it."""
    items = tmp_path / "pairs.jsonl"
    write_pairs(items, 5)
    db = tmp_path / "old.sqlite"
    recs = read_items_to_label(items, "pairwise")
    with sqlite3.connect(db) as con:
        con.executescript(OLD_SCHEMA)
        con.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("task", "pairwise"), ("labels", "[]"), ("per_item", "3"), ("rubric", "null"), ("source", str(items)),
            ("items_hash", "x"), ("seed", "00ff00ff00ff00ff"), ("secret", "ab" * 32), ("created", "1")])
        con.executemany("INSERT INTO items VALUES (?, ?, ?, ?)", [
            (i, it.key, json.dumps(it.record), json.dumps(it.view)) for i, it in enumerate(recs)])
        rows = [("ann1", 0, "1.0", "ab", 2.0, "fine", 10.0), ("ann2", 0, "-1.0", "ba", 3.0, None, 11.0),
                ("ann1", 3, "0.0", "ba", 1.5, None, 12.0)]
        con.executemany("INSERT INTO labels (annotator, idx, label, shown, seconds, comment, created) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    store = Store(db)
    got = [(lab.annotator, lab.idx, lab.value, lab.shown, lab.seconds, lab.comment, lab.unsure, lab.broken)
           for lab in store.labels()]
    assert got == [("ann1", 0, 1.0, "ab", 2.0, "fine", False, False), ("ann2", 0, -1.0, "ba", 3.0, None, False, False),
                   ("ann1", 3, 0.0, "ba", 1.5, None, False, False)]
    client = TestClient(create_app(store, ServerSettings(port=8765)), base_url=LOCAL)
    h = {"X-CSRF-Token": re.search(r'evalign-csrf" content="(\w+)"', client.get("/annotate/ann1").text).group(1)}
    res = client.post("/api/ann1/label", json={"key": "q001", "choice": "left", "unsure": True}, headers=h)
    assert res.status_code == 200 and len(store.labels()) == 4 and store.labels()[-1].unsure
    assert [r["unsure"] for r in long_rows(store)] == [False, False, False, True]
    store.close()
    again = Store(db, must_exist=True)  # opened again: nothing added twice
    assert len(again.labels()) == 4
    again.close()


def _gold_table(path: Path, answers: list[str]) -> Path:
    rows = [{"id": f"gold{i}", "instruction": f"Attention check {i}: which says 'blue'?", "response_a": "blue",
             "response_b": "red", "gold": a} for i, a in enumerate(answers)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_gold_items_mixed_in_never_exported_and_scored(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 8, per_item=2)
    gold = read_gold(_gold_table(tmp_path / "gold.jsonl", ["A", "A", "B"]), "pairwise")
    assert [g[2] for g in gold] == [1.0, 1.0, -1.0]
    store.set_gold(gold)
    client = TestClient(create_app(store, ServerSettings(port=8765, admin_token=ADMIN),
                                   StudySettings(gold_rate=0.25, min_seconds=0)), base_url=LOCAL)
    secret_keys = {gold_key(store.secret, f"gold{i}"): f"gold{i}" for i in range(3)}
    seen = {"ann1": [], "ann2": []}
    for name in seen:
        h = _csrf(client, name)
        st = client.get(f"/api/{name}/state").json()
        while st["item"] is not None:
            key = st["item"]["key"]
            seen[name].append(key)
            if key in secret_keys:  # a gold item: ann1 answers right (the side the answer was shown on), ann2 "tie"
                g = secret_keys[key]
                a_left = shown_order(store.seed, name, f"gold:{g}") == "ab"
                answer_a = dict((k, a) for k, _, a in gold)[g] == 1.0
                choice = ("left" if a_left == answer_a else "right") if name == "ann1" else "tie"
                assert "gold" not in json.dumps(st["item"])  # nothing on the page tells it from another item
            else:
                choice = "left"
            st = client.post(f"/api/{name}/label", json={"key": key, "choice": choice}, headers=h).json()
    # one in four items shown is gold (the 4th, the 8th, ...), each gold item at most once per annotator
    for keys in seen.values():
        assert [i for i, k in enumerate(keys) if k in secret_keys] == [3, 7]
        assert len(set(keys)) == len(keys) == 10
    assert [gold_due(n, 0, 0.25) for n in range(4)] == [False, False, False, True]
    # the exports: no gold item among the labels; each annotator's gold accuracy as a column
    assert {lab.key for lab in store.labels()} == {f"q{i:03d}" for i in range(8)}
    wide = wide_rows(store)
    assert len(wide) == 8 and all(r["gold_accuracy_ann1"] == 1.0 and r["gold_accuracy_ann2"] == 0.0 for r in wide)
    long = long_rows(store)
    assert len(long) == 16 and not any(r["id"].startswith("gold") for r in long)
    assert {(r["annotator"], r["gold_accuracy"]) for r in long} == {("ann1", 1.0), ("ann2", 0.0)}
    assert all(not k.startswith("gold") for labs in alttest_labels(store).values() for k in labs)
    view = client.get("/api/admin", headers=_auth(ADMIN)).json()
    assert [(a["name"], a["gold_correct"], a["gold_total"], a["gold_accuracy"]) for a in view["annotators"]] == \
        [("ann1", 2, 2, 1.0), ("ann2", 0, 2, 0.0)]
    html = client.get("/admin", headers=_auth(ADMIN)).text
    assert "1.000 (2/2)" in html and "0.000 (0/2)" in html
    store.close()


def test_gold_answers_checked_with_file_line_field(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bad.jsonl, line 2, field 'gold': a pair's gold answer is A, B or tie"):
        read_gold(_gold_table(tmp_path / "bad.jsonl", ["A", "C"]), "pairwise")
    rows = [{"id": "g1", "system": "m", "instruction": "q", "response": "r", "gold": "maybe"}]
    (tmp_path / "g.jsonl").write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(InputError, match=r"g.jsonl, line 1, field 'gold': a gold label is one of ok, bad"):
        read_gold(tmp_path / "g.jsonl", "label", ("ok", "bad"))
    with pytest.raises(InputError, match=r"field 'gold': a gold grade is 1 to 5"):
        read_gold(tmp_path / "g.jsonl", "graded")


def test_flags_undo_and_the_end_of_the_queue(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 2, per_item=1)
    client = TestClient(create_app(store, ServerSettings(port=8765), StudySettings(
        completion_url="https://app.prolific.com/submissions/complete?cc=C0DE", min_seconds=0)), base_url=LOCAL)
    h = _csrf(client, "ann1")
    st = client.post("/api/ann1/label", json={"key": "q000", "choice": "right", "unsure": True}, headers=h).json()
    undone = client.post("/api/ann1/undo", json={}, headers=h).json()
    assert undone["undone"] == {"key": "q000", "choice": "right"} and undone["item"]["key"] == "q000"
    client.post("/api/ann1/label", json={"key": "q000", "choice": "left", "broken": True}, headers=h)
    st = client.post("/api/ann1/label", json={"key": "q001", "choice": "tie", "unsure": True, "broken": "yes"},
                     headers=h).json()
    assert st["item"] is None and st["end"] == "done" and st["completion_url"].endswith("cc=C0DE")
    assert [(lab.key, lab.unsure, lab.broken) for lab in store.labels()] == [("q000", False, True),
                                                                            ("q001", True, False)]
    wide = wide_rows(store)
    assert [(r["unsure_ann1"], r["broken_ann1"]) for r in wide] == [(False, True), (True, False)]
    late = client.get("/api/ann2/state").json()  # every item has its one label: nothing for ann2
    assert late["item"] is None and late["end"] == "full" and late["completion_url"] is None
    assert late["per_item"] == 1 and late["progress"] == {"done": 0, "total": 0}
    store.close()


XSS_MD = ("Text <script>window.__xss = 1</script> and <img src=x onerror=\"window.__xss = 2\">, "
          "[a link](javascript:alert(1)), <a href=\"javascript:alert(2)\">raw</a> <b id=x>raw bold</b>\n\n"
          "```python\ndef f():\n    return 1\n```\n\nمرحبا بالعالم")


def test_markdown_rendered_inert() -> None:
    out = markdown_html(XSS_MD)
    assert "<script" not in out and "<img" not in out and "javascript:" not in out.replace(
        "[a link](javascript:alert(1))", "").replace("&lt;a href=\"javascript:alert(2)\"&gt;", "")
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in out  # raw HTML is shown as text
    assert "&lt;b id=x&gt;raw bold&lt;/b&gt;" in out and "<b" not in out
    assert "<pre><code>def f():\n    return 1\n</code></pre>" in out  # code keeps its line breaks
    assert '<p dir="auto">مرحبا بالعالم</p>' in out
    assert markdown_html("see [docs](https://example.org)") == \
        '<p dir="auto">see <a href="https://example.org" rel="noopener noreferrer nofollow">docs</a></p>\n'
    assert markdown_html("one\ntwo") == '<p dir="auto">one<br>\ntwo</p>\n'  # a line break stays one


def test_study_options_follow_the_option_rules(tmp_path: Path) -> None:
    write_pairs(tmp_path / "p.jsonl", 3)
    base = ["annotate", str(tmp_path / "p.jsonl"), "--db", str(tmp_path / "l.sqlite")]
    for extra, message in ((["--min-seconds", "-1"], "--min-seconds must be a finite number >= 0 (seconds; 0: off), got -1.0"),
                           (["--gold", str(tmp_path / "p.jsonl"), "--gold-rate", "0"],
                            "--gold-rate must be a number in (0, 1], got 0.0"),
                           (["--gold-rate", "0.2"], "--gold-rate goes with --gold"),
                           (["--completion-url", "javascript:alert(1)"], "--completion-url must be an http"),
                           (["--token", "t", "--admin-token", "t"], "--admin-token must differ from --token")):
        res = CliRunner().invoke(app, base + extra)
        assert res.exit_code == 2 and message in res.output, (extra, res.output)
    res = CliRunner().invoke(app, [*base, "--gold", str(tmp_path / "p.jsonl")])
    assert res.exit_code == 1 and "p.jsonl, line 1, field 'gold': no gold answer" in res.output
    res = CliRunner().invoke(app, [*base, "--instructions", str(tmp_path / "none.md")])
    assert res.exit_code == 1 and "none.md: cannot read the instructions" in res.output
    assert not (tmp_path / "l.sqlite").exists()
    # `invite` is a reserved word, as `export` and `status`
    res = CliRunner().invoke(app, ["annotate", "invite", str(tmp_path / "l.sqlite"), "Ana", "ben", "--url",
                                   "https://study.example.org"])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert [line.split(" ")[0] for line in lines] == ["ana", "ben"]
    assert lines[0].split(" ")[1].startswith("https://study.example.org/annotate/ana?token=")
    res = CliRunner().invoke(app, ["annotate", "invite", str(tmp_path / "l.sqlite"), "a b"])
    assert res.exit_code == 2 and "an annotator name is 1 to 64" in res.output


@pytest.mark.slow
def test_cli_invited_annotators_on_another_host_no_shared_token(tmp_path: Path) -> None:
    """Once annotators are invited, no shared token is made up at start: only their own links and the
    admin link open anything."""
    write_pairs(tmp_path / "pairs.jsonl", 4)
    (token,) = [link.split("token=")[1] for _, link in invite(tmp_path / "l.sqlite", ["Ana"])]
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "evalign", "annotate", "pairs.jsonl", "--db", "l.sqlite", "--host",
                             "0.0.0.0", "--port", str(port)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        assert lines[1].startswith("Invited: ana") and "Labelling page" not in "".join(lines), lines
        admin = re.search(r"/admin\?token=([A-Za-z0-9_-]{20,})", lines[2]).group(1)
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                first = httpx.get(f"{base}/api/x/state", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert first.status_code == 403  # nobody without a token, even on loopback
        assert httpx.get(f"{base}/api/ana/state", headers=_auth(token)).status_code == 200
        assert httpx.get(f"{base}/api/x/state", headers=_auth(token)).status_code == 403
        assert httpx.get(f"{base}/api/admin", headers=_auth(admin)).json()["annotators"][0]["name"] == "ana"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
