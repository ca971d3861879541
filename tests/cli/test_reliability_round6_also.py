"""Issue 48, "also": a template whose declared mode is not ``--mode`` is refused before any call, naming
both; a cache file cut short is refused with what happened to its answers and the ways on (never a
silent empty cache); every YAML file evalign reads goes through the one bounded reader (a 9^8 alias
bomb in a probe file, a price file, a rubric or a template is refused at once)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cache import Cache, damage
from evalign.cli import app
from evalign.judges.prompts import TEMPLATES

runner = CliRunner()


@pytest.fixture()
def server() -> Iterator[tuple[str, list[str]]]:
    """A server that counts the requests it gets (and answers none usefully)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}/v1", seen
    srv.shutdown()


def _template(tmp: Path, source: str, mode: str) -> Path:
    """A copy of the shipped ``source`` template that declares ``mode``."""
    text = Path(TEMPLATES.get(source)).read_text(encoding="utf-8")
    lines = [f"mode: {mode}" if ln.startswith("mode:") else f"name: {source}_as_{mode}" if ln.startswith("name:")
             else ln for ln in text.splitlines()]
    path = tmp / f"{mode}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _pairs(tmp: Path) -> Path:
    path = tmp / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "instruction": "q", "response_a": "a", "response_b": "b"})
                            + "\n" for i in range(3)), encoding="utf-8")
    return path


def test_a_template_of_another_mode_is_refused_before_any_call(tmp_path: Path, server: tuple[str, list[str]]) -> None:
    url, seen = server
    abs_yaml = _template(tmp_path, "prometheus_relative", "absolute")  # a pair prompt, declared absolute
    res = runner.invoke(app, ["judge", str(_pairs(tmp_path)), "--mode", "pairwise", "--template", str(abs_yaml),
                              "--model", "m", "--base-url", url, "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code == 2, res.output
    line = " ".join(res.output.split())
    assert f"template '{abs_yaml}' declares mode absolute" in line and "the mode asked for is pairwise" in line
    assert "give --mode absolute with this template" in line
    assert seen == [] and not (tmp_path / "out.jsonl").exists()
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "i", "system": "s", "instruction": "q", "response": "r"}) + "\n")
    rel_yaml = _template(tmp_path, "prometheus_absolute", "relative")
    res = runner.invoke(app, ["judge", str(items), "--mode", "absolute", "--template", str(rel_yaml), "--rubric",
                              "helpfulness", "--model", "m", "--base-url", url])
    assert res.exit_code == 2 and "declares mode relative" in res.output and "asked for is absolute" in res.output
    assert seen == []


# --- a cache file cut short --------------------------------------------------------------------------


def _filled_cache(path: Path, n: int = 600) -> bytes:
    with Cache(path) as c:
        c.put_many("judge", {f"k{i}": os.urandom(400) for i in range(n)})
    return path.read_bytes()


@pytest.mark.parametrize("cut", ["empty", "header", "half"])
def test_a_cache_cut_short_is_refused_saying_what_happened(tmp_path: Path, cut: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache.sqlite"
    whole = _filled_cache(cache)
    for side in (Path(f"{cache}-wal"), Path(f"{cache}-shm")):
        side.unlink(missing_ok=True)
    size = {"empty": 0, "header": 60, "half": len(whole) // 2}[cut]
    os.truncate(cache, size)
    monkeypatch.setenv("EVALIGN_CACHE", str(cache))
    res = runner.invoke(app, ["bench", "--judge", "x=openai:M@http://127.0.0.1:9/v1", "--sets", "hhh", "--per-set", "3"])
    assert res.exit_code == 1, res.output
    line = " ".join(res.output.split())
    assert line.startswith(f"error: cache {cache}: the file is ")
    assert {"empty": "empty (0 bytes", "header": "cut short (60 bytes", "half": f"cut short ({size:,} bytes of the "
            f"{len(whole):,}"}[cut] in line
    assert "the answers stored in it cannot be read" in line and "--no-cache" in line and f"mv {cache} " in line
    assert cache.stat().st_size == size  # left as it was


def test_damage_reads_only_the_header(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    _filled_cache(cache, 50)
    assert damage(cache) is None and damage(tmp_path / "none.sqlite") is None
    copy = tmp_path / "copy.sqlite"
    shutil.copy(cache, copy)
    os.truncate(copy, copy.stat().st_size - 1)
    assert damage(copy).startswith("the file is cut short")
    (tmp_path / "other.sqlite").write_bytes(b"this is not a database" * 100)  # not ours: SQLite says so
    assert damage(tmp_path / "other.sqlite") is None


def test_a_new_cache_file_is_never_seen_empty(tmp_path: Path) -> None:
    """Made whole beside its place and linked in: a run opening it meanwhile never finds 0 bytes."""
    path = tmp_path / "new.sqlite"
    with Cache(path) as c:
        assert c.count() == 0
    assert path.stat().st_size > 0 and sorted(p.name for p in tmp_path.iterdir() if ".new" in p.name) == []


# --- one bounded YAML reader -------------------------------------------------------------------------


def _bomb(path: Path, head: str) -> Path:
    """``head`` and a key holding 9^8 leaves through aliases (505 bytes of YAML)."""
    lines = [*head.splitlines(), "fields:", '  a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_an_alias_bomb_in_a_probe_file_fails_fast(tmp_path: Path) -> None:
    probe = _bomb(tmp_path / "bomb.yaml", "name: bomb\nversion: 1\nbias: position\nedit: swap\nsource: x")
    t0 = time.perf_counter()
    res = runner.invoke(app, ["probe", str(_pairs(tmp_path)), "--probe", str(probe), "--model", "m", "--base-url",
                              "http://127.0.0.1:9/v1"])
    assert time.perf_counter() - t0 < 10
    assert res.exit_code == 1, res.output
    line = " ".join(res.output.split())
    assert f"error: {probe}, line " in line and "the YAML expands to more than 100,000 values (through its aliases)" in line


@pytest.mark.parametrize("kind", ["price file", "rubric", "template"])
def test_every_yaml_reader_is_bounded(tmp_path: Path, kind: str) -> None:
    from evalign.errors import InputError
    from evalign.judges.prompts import load_rubric, load_template
    from evalign.judges.usage import read_prices

    path = _bomb(tmp_path / "bomb.yaml", "name: bomb")
    read = {"price file": read_prices, "rubric": load_rubric, "template": load_template}[kind]
    t0 = time.perf_counter()
    with pytest.raises(InputError, match="expands to more than 100,000 values") as info:
        read(path)
    assert time.perf_counter() - t0 < 5 and info.value.file == str(path) and info.value.line is not None
    tagged = tmp_path / "tagged.yaml"
    tagged.write_text("name: !!python/object/apply:os.system ['true']\n", encoding="utf-8")
    with pytest.raises(InputError, match="YAML tags are not read"):
        read(tagged)


def test_no_module_reads_yaml_but_the_one_reader() -> None:
    src = Path(__file__).resolve().parents[2] / "src" / "evalign"
    users = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                   if any(f"yaml.{f}(" in p.read_text(encoding="utf-8") for f in ("safe_load", "load", "full_load",
                                                                                   "unsafe_load", "compose")))
    assert users == ["io/yaml_files.py"], users


# --- numbers out of range on meta / report --------------------------------------------------------------


@pytest.mark.parametrize(("verb", "option", "value", "says"), [
    ("meta", "--seed", "-1", "--seed must be an integer >= 0, got -1"),
    ("meta", "--bootstrap", "99999999999999999999", "--bootstrap must be at most 1,000,000, got 99,999,999,999,999,999,999"),
    ("meta", "--permutations", "2000000", "--permutations must be at most 1,000,000, got 2,000,000"),
    ("report", "--seed", "-1", "--seed must be an integer >= 0, got -1"),
    ("report", "--bootstrap", "2000000", "--bootstrap must be at most 1,000,000, got 2,000,000"),
])
def test_resampling_options_out_of_range_are_named(tmp_path: Path, verb: str, option: str, value: str,
                                                   says: str) -> None:
    """Were ``unexpected ValueError: expected non-negative integer`` / ``Maximum allowed dimension
    exceeded`` (this is a bug), exit 1."""
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{k}", "system": s, "response": f"{s}{k}", "reference": "r",
                                         "human": k % 3, "m": k % 4}) + "\n" for k in range(8) for s in "ab"))
    argv = [verb, str(items), "-m", "m", "--human", "human", option, value]
    if verb == "report":
        argv += ["-o", str(tmp_path / "r.html")]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert " ".join(res.output.split()) == f"error: {says}"


@pytest.mark.parametrize(("argv", "says"), [
    (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["--bootstrap", "99999999999999999999"], "--bootstrap must be at most 1,000,000, got 99,999,999,999,999,999,999"),
])
def test_leaderboard_seed_and_bootstrap_out_of_range(tmp_path: Path, argv: list[str], says: str) -> None:
    """Were ``unexpected ValueError`` and a run that never ended."""
    battles = tmp_path / "b.jsonl"
    battles.write_text("".join(json.dumps({"id": f"b{k}", "system_a": "s1", "system_b": "s2", "verdict": "AB"[k % 2]})
                               + "\n" for k in range(8)))
    res = runner.invoke(app, ["leaderboard", str(battles), *argv])
    assert res.exit_code == 2 and " ".join(res.output.split()) == f"error: {says}", res.output


@pytest.mark.parametrize(("argv", "says"), [
    (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["--resamples", "2000000"], "--resamples must be at most 1,000,000, got 2,000,000"),
])
def test_bench_seed_and_resamples_out_of_range(argv: list[str], says: str, server: tuple[str, list[str]]) -> None:
    url, seen = server
    res = runner.invoke(app, ["bench", "--judge", f"x=openai:m@{url}", "--sets", "hhh", "--per-set", "2", *argv])
    assert res.exit_code == 2 and " ".join(res.output.split()) == f"error: {says}", res.output
    assert seen == []  # before any call
