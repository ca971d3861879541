"""The page's calls for each task (Starlette's TestClient): graded items with a rubric, a label set,
conversations shown as context, skip and undo, the progress, and what the page never shows."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from annotate_helpers import pair_store
from starlette.testclient import TestClient
from typer.testing import CliRunner

from evalign.annotate.app import PageSettings, ServerSettings, create_app, serve
from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings
from evalign.cli import app
from evalign.errors import InputError, UsageError

LOCAL = "http://127.0.0.1:8765"
CONVERSATION = {"id": "c1", "system": "m", "messages": [
    {"role": "user", "content": "Hi, I need a recipe."}, {"role": "assistant", "content": "Sure, which dish?"},
    {"role": "user", "content": "Pancakes."}, {"role": "assistant", "content": "Mix flour, milk and eggs; fry."}]}


def _item_table(path: Path) -> Path:
    rows = [CONVERSATION] + [{"id": f"i{i}", "system": "m", "instruction": f"Say {i}", "response": f"{i}!"}
                             for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _client(store: Store) -> tuple[TestClient, dict[str, str]]:
    client = TestClient(create_app(store, ServerSettings(port=8765)), base_url=LOCAL)
    page = client.get("/annotate/r1").text
    csrf = re.search(r'name="evalign-csrf" content="([0-9a-f]+)"', page).group(1)
    return client, {"X-CSRF-Token": csrf}


def test_graded_with_rubric_and_conversation(tmp_path: Path) -> None:
    items = _item_table(tmp_path / "items.jsonl")
    store = Store(tmp_path / "g.sqlite")
    rubric = {"name": "r", "criteria": "Is it helpful?", "descriptions": ["no", "little", "some", "mostly", "yes"]}
    store.initialise(read_items_to_label(items, "graded"), StoreSettings(task="graded", per_item=1, rubric=rubric))
    client, h = _client(store)
    assert "1-5 = the grade" in client.get("/annotate/r1").text
    st = client.get("/api/r1/state").json()
    assert st["task"] == "graded" and st["rubric"]["descriptions"][4] == "yes"
    assert st["item"]["key"] == "c1" and st["item"]["instruction"] == "Pancakes."
    assert st["item"]["response"] == "Mix flour, milk and eggs; fry."
    assert [m["content"] for m in st["item"]["context"]] == ["Hi, I need a recipe.", "Sure, which dish?"]
    assert st["progress"] == {"done": 0, "total": 4}
    assert client.post("/api/r1/label", json={"key": "c1", "choice": "6"}, headers=h).status_code == 400
    res = client.post("/api/r1/label", json={"key": "c1", "choice": "4", "seconds": 3}, headers=h).json()
    assert res["stored"] and res["progress"] == {"done": 1, "total": 4} and res["item"]["key"] == "i0"
    res = client.post("/api/r1/skip", json={"key": "i0"}, headers=h).json()
    assert res["item"]["key"] == "i1"
    res = client.post("/api/r1/undo", json={}, headers=h).json()
    assert res["undone"] and res["item"]["key"] == "c1" and res["progress"] == {"done": 0, "total": 4}
    # K = 1: an item r1 labelled is not offered to r2
    client.post("/api/r1/label", json={"key": "c1", "choice": "2"}, headers=h)
    assert client.get("/api/r2/state").json()["progress"] == {"done": 0, "total": 3}
    assert [(lab.key, lab.value, lab.shown) for lab in store.labels()] == [("c1", 2.0, None)]
    store.close()


def test_label_task_and_no_other_annotators_labels(tmp_path: Path) -> None:
    items = _item_table(tmp_path / "items.jsonl")
    store = Store(tmp_path / "l.sqlite")
    store.initialise(read_items_to_label(items, "label"), StoreSettings(task="label", labels=("ok", "wrong", "unsafe")))
    client, h = _client(store)
    assert "1 = ok, 2 = wrong, 3 = unsafe" in client.get("/annotate/r1").text
    assert client.post("/api/r1/label", json={"key": "i1", "choice": "3"}, headers=h).json()["stored"]
    assert store.labels()[0].value == "unsafe"
    other = client.get("/api/r2/state").text
    assert "unsafe" not in other.replace('"labels":["ok","wrong","unsafe"]', "")  # never another's label
    store.close()


def test_pair_state_shows_sides_not_systems(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 3)
    client, _ = _client(store)
    item = client.get("/api/r1/state").json()["item"]
    assert set(item) == {"key", "instruction", "input", "context", "reference", "left", "right", "context_left",
                         "context_right", "html"}
    assert set(item["html"]) == {"instruction", "input", "reference", "left", "right"}  # the texts, rendered
    assert item["context"] == item["context_left"] == item["context_right"] == []
    assert {item["left"][:8], item["right"][:8]} == {"Answer A", "Answer B"}
    store.close()


def test_store_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "notdb.sqlite"
    bad.write_text("this is not a database\n" * 100)
    with pytest.raises(InputError, match=r"notdb.sqlite: not an evalign label store"):
        Store(bad)
    with pytest.raises(InputError, match="cannot open the label store"):
        Store(tmp_path / "missing" / "dir" / "l.sqlite")
    res = CliRunner().invoke(app, ["annotate", "status", str(bad)])
    assert res.exit_code == 1 and "not an evalign label store" in res.output
    # another program's SQLite database (or an empty one) is refused and left exactly as it was
    other, empty = tmp_path / "other.sqlite", tmp_path / "empty.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE people (name TEXT)")
    sqlite3.connect(empty).close()
    for db in (other, empty):
        before = db.read_bytes()
        for args in (["status", str(db)], ["export", str(db), "-o", str(tmp_path / "out.jsonl")]):
            res = CliRunner().invoke(app, ["annotate", *args])
            assert res.exit_code == 1 and f"{db.name}: not an evalign label store" in res.output, res.output
        if db == other:
            with pytest.raises(InputError, match="not an evalign label store"):  # what serving opens
                Store(db)
        assert db.read_bytes() == before and sorted(p.name for p in tmp_path.glob(f"{db.name}*")) == [db.name]
    assert not (tmp_path / "out.jsonl").exists()
    items = _item_table(tmp_path / "items.jsonl")
    with pytest.raises(UsageError, match="--task label needs --labels"):
        serve(items, tmp_path / "x.sqlite", page=PageSettings(task="label"), server=ServerSettings())
    with pytest.raises(UsageError, match="--rubric goes with --task graded"):
        serve(items, tmp_path / "x.sqlite", page=PageSettings(task="label", labels=("a",), rubric="helpfulness"),
              server=ServerSettings())
    with pytest.raises(UsageError, match="is a pair table"):
        store, _, pairs = pair_store(tmp_path, 2)
        store.close()
        serve(pairs, tmp_path / "y.sqlite", page=PageSettings(task="graded"), server=ServerSettings())
    assert not (tmp_path / "x.sqlite").exists() and not (tmp_path / "y.sqlite").exists()  # refused before writing


def test_pair_of_conversations_shows_each_sides_own_earlier_turns(tmp_path: Path) -> None:
    def conversation(side: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": "Hi, I need a recipe."},
                {"role": "assistant", "content": f"Sure ({side}), which dish?"},
                {"role": "user", "content": "Pancakes."}, {"role": "assistant", "content": f"{side}: flour, milk, eggs."}]

    rows = [{"id": "c1", "system_a": "x", "system_b": "y", "messages_a": conversation("A"),
             "messages_b": conversation("B")}]
    items = tmp_path / "conv.jsonl"
    items.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(tmp_path / "c.sqlite")
    store.initialise(read_items_to_label(items, "pairwise"), StoreSettings(task="pairwise"))
    client, _ = _client(store)
    orders = set()
    for name in (f"r{i}" for i in range(40)):  # the store's seed is drawn: look until both orders came
        if len(orders) == 2:
            break
        item = client.get(f"/api/{name}/state").json()["item"]
        assert item["instruction"] == "Pancakes."
        def plain(messages: list[dict]) -> list[dict]:
            return [{"role": m["role"], "content": m["content"]} for m in messages]

        assert plain(item["context"]) == [{"role": "user", "content": "Hi, I need a recipe."}]  # what both share
        assert item["context"][0]["html"] == '<p dir="auto">Hi, I need a recipe.</p>\n'
        for side in ("left", "right"):  # each response with its own system's earlier answer, never the other's
            letter = item[side][0]
            assert plain(item[f"context_{side}"]) == [{"role": "assistant", "content": f"Sure ({letter}), which dish?"}]
        orders.add(item["left"][0])
    assert orders == {"A", "B"}
    store.close()
