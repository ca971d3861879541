"""An API key never shows, in any spelling, on any output channel of ``evalign judge``: stdout,
stderr, the output file, the partial file, the summary and the cache. Cases: a malformed key (a
trailing ``\\r`` from a CRLF ``.env`` file, a non-ASCII character) refused before any request; a key
in ``--base-url`` (``user:KEY@host``) moved to the Authorization header; a server that echoes the
key in its completion and in its error bodies (raw, escaped, percent-encoded). The server is the
fault proxy in stub mode (a real local HTTP server); plus property tests (hypothesis) of the
redaction and of the key check."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from fault_proxy import FaultProxy, Rewrite, Status
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evalign.backends import GenerationRequest, OpenAICompatibleBackend
from evalign.backends._http import check_api_key, redact, secret_forms, split_url_credentials
from evalign.backends.base import BackendRequestError
from evalign.errors import EvalignError

KEY = "sk-live-QWESECRET-0123456789"


def spellings(key: str) -> list[str]:
    """Every spelling of ``key`` that must not appear (the forms, and the key stripped)."""
    return [f for f in {*secret_forms(key), key.strip()} if len(f) >= 6]


def channels(proc: subprocess.CompletedProcess[str], tmp_path: Path) -> dict[str, str]:
    """stdout, stderr and every file written (output, partial, summary, cache and its WAL) by name."""
    out = {"stdout": proc.stdout, "stderr": proc.stderr}
    for p in tmp_path.rglob("*"):
        if p.is_file() and p.name != "items.jsonl":
            out[p.name] = p.read_bytes().decode("utf-8", errors="backslashreplace")
    return out


def assert_nowhere(key: str, texts: dict[str, str]) -> None:
    for name, text in texts.items():
        for form in spellings(key):
            assert form not in text, f"{form!r} found in {name}"


def run_judge(args: list[str], tmp_path: Path, env_key: str | None) -> subprocess.CompletedProcess[str]:
    items = tmp_path / "items.jsonl"
    with items.open("w", encoding="utf-8") as fh:
        for i in range(3):
            fh.write(json.dumps({"id": f"q{i}", "system": "s", "instruction": f"Say {i}.", "response": "ok"}) + "\n")
    env = {**os.environ, "EVALIGN_CACHE": str(tmp_path / "cache.sqlite")}
    env.pop("EVALIGN_KEY", None)
    if env_key is not None:
        env["EVALIGN_KEY"] = env_key
    return subprocess.run(
        [sys.executable, "-c", "from evalign.cli import main; main()", "judge", str(items), "--model", "m",
         "--api-key-env", "EVALIGN_KEY", "--max-retries", "0", "-o", str(tmp_path / "out.jsonl"), *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    err = [x for x in proc.stderr.splitlines() if x.startswith("error")]
    assert len(err) == 1, proc.stderr
    return " ".join(proc.stderr[proc.stderr.index("error"):].split())


@pytest.mark.parametrize(("bad", "what"), [(KEY + "\r", "carriage return"), (KEY[:5] + "é" + KEY[5:], "non-ASCII"),
                                           (KEY + "\n", "newline"), ("\t" + KEY, "tab")])
def test_malformed_key_is_one_line_before_any_request(tmp_path: Path, bad: str, what: str) -> None:
    with FaultProxy(None) as proxy:
        proc = run_judge(["--base-url", proxy.base_url], tmp_path, bad)
        assert proxy.seen == []  # refused before any request
    assert proc.returncode == 1
    msg = error_line(proc)
    assert "API key in $EVALIGN_KEY is malformed" in msg and what in msg
    assert_nowhere(bad, channels(proc, tmp_path))


def echo(key: str) -> Rewrite:
    """A server that puts the key in every spelling into its completion (and a usable grade)."""
    text = (f"Feedback: your key {key} / {key!r} / {urllib.parse.quote(key, safe='')} / "
            f"{json.dumps(key)} [RESULT] 3")

    def fn(data: dict) -> dict:
        data["choices"][0]["message"]["content"] = text
        data["echo"] = key
        return data

    return Rewrite(fn)


def test_key_echoed_in_a_completion_is_redacted_from_outputs_and_cache(tmp_path: Path) -> None:
    with FaultProxy(None, lambda seen: echo(KEY)) as proxy:
        proc = run_judge(["--base-url", proxy.base_url], tmp_path, KEY)
        assert {s.authorized for s in proxy.seen} == {f"Bearer {KEY}"}
    assert proc.returncode == 0, proc.stderr
    texts = channels(proc, tmp_path)
    assert {"out.jsonl", "out.jsonl.summary.json", "cache.sqlite"} <= set(texts) or "cache.sqlite-wal" in texts
    assert_nowhere(KEY, texts)
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    col = "prometheus_absolute[helpfulness]"
    assert [r[col] for r in rows] == [3, 3, 3] and all("your key ***" in r[f"{col}.feedback"] for r in rows)


def test_credentials_in_base_url_go_to_the_header_and_are_never_shown(tmp_path: Path) -> None:
    secret = "p@ss/KEY-9876543210"
    with FaultProxy(None, lambda seen: echo(secret)) as proxy:
        url = f"http://alice:{urllib.parse.quote(secret, safe='')}@127.0.0.1:{proxy.port}/v1"
        proc = run_judge(["--base-url", url], tmp_path, None)
        token = base64.b64encode(f"alice:{secret}".encode()).decode()
        assert {s.authorized for s in proxy.seen} == {f"Basic {token}"}
    assert proc.returncode == 0, proc.stderr
    texts = channels(proc, tmp_path)
    assert_nowhere(secret, texts)
    for text in texts.values():
        assert token not in text
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())
    assert f"127.0.0.1:{proxy.port}/v1" in json.dumps(summary)  # the URL is kept, without its credentials


def test_key_in_error_bodies_and_url_is_redacted_on_every_channel(tmp_path: Path) -> None:
    secret = "tok-ZZSECRET-55555"
    body = json.dumps({"error": f"bad {KEY!r} {urllib.parse.quote(KEY + '/', safe='').lower()} "
                                f"{KEY.encode()!r} {secret}"})
    with FaultProxy(None, lambda seen: Status(401, body=body)) as proxy:
        url = f"http://{secret}@127.0.0.1:{proxy.port}/v1"
        proc = run_judge(["--base-url", url], tmp_path, KEY)
        assert {s.authorized for s in proxy.seen} == {f"Bearer {KEY}"}  # the variable wins over the URL
    assert proc.returncode == 1
    assert "HTTP 401" in error_line(proc)
    texts = channels(proc, tmp_path)
    assert_nowhere(KEY, texts)
    assert_nowhere(secret, texts)


# -- properties ---------------------------------------------------------------------------------
BAD = st.one_of(st.characters(max_codepoint=31), st.just("\x7f"), st.characters(min_codepoint=128,
                                                                                 exclude_categories=("Cs",)))
GOOD = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40)


@st.composite
def bad_keys(draw: st.DrawFn) -> str:
    base = "sk-" + draw(GOOD)
    pos = draw(st.integers(0, len(base)))
    return base[:pos] + draw(BAD) + base[pos:]


@settings(max_examples=200, deadline=None)
@given(bad_keys())
def test_property_a_bad_key_is_refused_without_showing_it(key: str) -> None:
    with pytest.raises(EvalignError) as info:
        check_api_key(key, "$K")
    msg = str(info.value)
    assert "malformed" in msg
    for form in spellings(key):
        assert form not in msg


@settings(max_examples=200, deadline=None)
@given(bad_keys(), st.text(max_size=30))
def test_property_redact_removes_every_spelling(key: str, noise: str) -> None:
    shown = [key, repr(key), repr(key.encode("utf-8", "surrogateescape")), json.dumps(key),
             json.dumps(key, ensure_ascii=False), urllib.parse.quote(key, safe=""),
             urllib.parse.quote(key, safe="").lower(), urllib.parse.quote_plus(key), f"Bearer {key}".strip()]
    text = noise.join(shown)
    out = redact(text, key)
    for form in spellings(key):
        assert form not in out


def test_property_backend_sends_nothing_and_shows_nothing() -> None:
    with FaultProxy(None) as proxy:

        @settings(max_examples=40, deadline=None)
        @given(key=bad_keys())
        def check(key: str) -> None:
            assume("\x00" not in key)  # an environment variable cannot hold NUL
            os.environ["EVALIGN_PROP_KEY"] = key
            backend = OpenAICompatibleBackend(proxy.base_url, "m", api_key_env="EVALIGN_PROP_KEY", max_retries=0)

            async def go() -> str:
                try:
                    await backend.generate(GenerationRequest(prompt="hi"))
                except BackendRequestError as exc:
                    assert exc.fatal
                    return f"{exc} {exc!r}"
                finally:
                    await backend.aclose()
                raise AssertionError("a malformed key was accepted")

            msg = asyncio.run(go())
            assert "malformed" in msg
            for form in spellings(key):
                assert form not in msg

        try:
            check()
        finally:
            os.environ.pop("EVALIGN_PROP_KEY", None)
        assert proxy.seen == []  # refused before any request


def test_split_url_credentials() -> None:
    assert split_url_credentials("http://h:1/v1") == ("http://h:1/v1", None, [])
    clean, auth, secrets = split_url_credentials("https://bob:s%40cret@h.example/v1?x=1")
    assert clean == "https://h.example/v1?x=1" and auth == "Basic " + base64.b64encode(b"bob:s@cret").decode()
    assert "s@cret" in secrets and "bob" not in secrets
    clean, auth, secrets = split_url_credentials("http://TOKEN123@h/v1")
    assert (clean, auth) == ("http://h/v1", "Bearer TOKEN123") and "TOKEN123" in secrets
    backend = OpenAICompatibleBackend("http://u:KEYKEY1234@h:8/v1", "m")
    assert "KEYKEY1234" not in repr(backend) + json.dumps(backend.identity()) + backend.url


def test_usage_errors_about_base_url_never_show_its_credentials(tmp_path: Path) -> None:
    url = "http://u:SECRETPW-777@127.0.0.1:9/v1"
    proc = run_judge(["--base-url", url, "--base-url", url], tmp_path, None)
    assert proc.returncode == 2 and "--base-url given twice: http://127.0.0.1:9/v1" in error_line(proc)
    proc = run_judge(["--base-url", "ftp://u:SECRETPW-777@h/v1"], tmp_path, None)
    assert proc.returncode == 2 and "ftp://h/v1" in error_line(proc)
    assert_nowhere("SECRETPW-777", channels(proc, tmp_path))
