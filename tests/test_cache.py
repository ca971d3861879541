from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest

from evalign.cache import Cache, default_cache_path, make_key


def test_roundtrip_bytes_json_arrays(tmp_path: Path) -> None:
    with Cache(tmp_path / "c.sqlite") as c:
        c.put("ns", "k1", b"abc")
        c.put_json("ns", "k2", {"score": 3, "text": "é"})
        arr = np.arange(12, dtype=np.float32).reshape(3, 4)
        c.put_arrays("emb", {"a": arr, "b": arr[0]})
        assert c.get("ns", "k1") == b"abc"
        assert c.get_json("ns", "k2") == {"score": 3, "text": "é"}
        got = c.get_arrays("emb", ["a", "b", "missing"])
        assert set(got) == {"a", "b"}
        np.testing.assert_array_equal(got["a"], arr)
        assert got["a"].dtype == np.float32 and got["b"].shape == (4,)
        assert c.count("ns") == 2 and c.count() == 4
        assert c.get("other", "k1") is None


def test_persists_across_instances_and_many_keys(tmp_path: Path) -> None:
    p = tmp_path / "c.sqlite"
    with Cache(p) as c:
        c.put_many("ns", {f"k{i}": str(i).encode() for i in range(1500)})
    with Cache(p) as c:
        got = c.get_many("ns", [f"k{i}" for i in range(0, 1600, 3)])
        assert len(got) == len(range(0, 1500, 3))
        assert got["k999"] == b"999"


def test_read_write_switches(tmp_path: Path) -> None:
    p = tmp_path / "c.sqlite"
    with Cache(p) as c:
        c.put("ns", "k", b"v")
    with Cache(p, read=False) as c:
        assert c.get("ns", "k") is None
        c.put("ns", "k2", b"v2")
    with Cache(p, write=False) as c:
        assert c.get("ns", "k2") == b"v2"
        c.put("ns", "k3", b"v3")
        assert c.get("ns", "k3") is None
    d = Cache.disabled()
    d.put("ns", "k", b"v")
    assert d.get("ns", "k") is None and d.count() == 0


def test_make_key_is_stable_and_sensitive() -> None:
    assert make_key("m", {"a": 1, "b": 2}, "text") == make_key("m", {"b": 2, "a": 1}, "text")
    assert make_key("m", "text") != make_key("m", "text ")
    assert len(make_key("x")) == 32


def test_default_path_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "x.sqlite"))
    assert default_cache_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("EVALIGN_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_path() == tmp_path / "evalign" / "cache.sqlite"


def _writer(path: str, start: int) -> None:
    with Cache(path) as c:
        for i in range(start, start + 200):
            c.put("ns", f"k{i}", b"x")


def test_two_processes_write_concurrently(tmp_path: Path) -> None:
    p = str(tmp_path / "c.sqlite")
    Cache(p).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(p, s)) for s in (0, 200)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(60)
        assert pr.exitcode == 0
    with Cache(p) as c:
        assert c.count("ns") == 400


def test_unusable_cache_path_is_one_clear_error(tmp_path: Path) -> None:
    from evalign.errors import EvalignError

    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(EvalignError, match=r"cache .*file/c\.sqlite: cannot open .*EVALIGN_CACHE.*--no-cache"):
        Cache(tmp_path / "file" / "c.sqlite")
    (tmp_path / "garbage.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(EvalignError, match="cannot open"):
        Cache(tmp_path / "garbage.sqlite")


def test_hashes_never_fail_on_lone_surrogates() -> None:
    from evalign.signature import stable_hash, text_hash

    assert text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # plain SHA-256
    assert len(text_hash("x\ud800")) == 64 and text_hash("x\ud800") != text_hash("x\udc00")
    assert stable_hash({"t": "\ud800"}) != stable_hash({"t": "\udc00"})


def test_full_disk_is_one_line_naming_the_cache(tmp_path: Path) -> None:
    """SQLite's "database or disk is full" (the file may not grow: max_page_count, as on a full disk)."""
    from evalign.errors import EvalignError

    path = tmp_path / "c.sqlite"
    with Cache(path) as c:
        c.put("judge", "small", b"x")
        assert c._conn is not None
        pages = c._conn.execute("PRAGMA page_count").fetchone()[0]
        c._conn.execute(f"PRAGMA max_page_count={pages}")
        with pytest.raises(EvalignError) as info:
            c.put("judge", "big", b"y" * 1_000_000)
        msg = str(info.value)
        assert msg.startswith(f"cache {path}: cannot write (database or disk is full)") and "\n" not in msg
        assert c.get("judge", "small") == b"x" and c.get("judge", "big") is None  # the cache is still usable


def test_leases_one_owner_per_key_and_expiry(tmp_path: Path) -> None:
    import time

    a, b = Cache(tmp_path / "c.sqlite"), Cache(tmp_path / "c.sqlite")
    assert a.claim("judge", ["k1", "k2"]) == ["k1", "k2"]
    assert b.claim("judge", ["k1", "k2", "k3"]) == ["k3"]
    assert b.leased_elsewhere("judge", ["k1", "k2", "k3"]) == {"k1", "k2"}
    a.put("judge", "k1", b"v")  # a stored value frees its lease and is never claimed again
    assert b.claim("judge", ["k1"]) == [] and b.leased_elsewhere("judge", ["k1"]) == set()
    a.release()  # a failed call: the key is free for the other run
    assert b.claim("judge", ["k2"]) == ["k2"]
    assert a.claim("judge", ["k4"], seconds=0.2) == ["k4"]  # a run that dies: its lease expires
    time.sleep(0.3)
    assert b.claim("judge", ["k4"]) == ["k4"]
    off = Cache(tmp_path / "c.sqlite", read=False)  # --no-cache: no leases, every call made anew
    assert off.claim("judge", ["k2", "k4"]) == ["k2", "k4"]
    for c in (a, b, off):
        c.close()
