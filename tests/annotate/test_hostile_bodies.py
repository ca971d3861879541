"""Issue 48: ``evalign annotate`` answers every hostile body on its JSON routes with a clear 400 (413 past
the size cap) and goes on serving: a 10,000-deep nesting once made the server print a RecursionError
traceback. Real requests to the real server (``evalign annotate`` in a subprocess)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from annotate_helpers import free_port, write_pairs

from evalign.annotate.app import MAX_BODY

ROUTES = ("label", "skip", "undo")
#: body -> (status, words the answer holds)
HOSTILE: dict[str, tuple[bytes, int, str]] = {
    "10,000-deep list": (b"[" * 10_000 + b"]" * 10_000, 400, "JSON nested too deeply"),
    "10,000-deep object": (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, 400, "JSON nested too deeply"),
    "over the size cap": (b'{"key": "' + b"x" * (MAX_BODY + 10) + b'"}', 413, f"over {MAX_BODY} bytes"),
    "not UTF-8": (b'{"key": "\xff\xfe"}', 400, "not UTF-8 text"),
    "UTF-16": ('{"key": "x"}'.encode("utf-16"), 400, "not UTF-8 text"),
    "a list": (b"[1, 2]", 400, "send a JSON object"),
    "a number": (b"5", 400, "send a JSON object"),
    "null": (b"null", 400, "send a JSON object"),
    "broken JSON": (b'{"key": ', 400, "malformed JSON"),
    "a lone surrogate": (b'{"key": "\\ud800", "comment": "\\udfff"}', 400, "lone surrogate"),
    "a 5,000-digit number": (b'{"seconds": ' + b"9" * 5000 + b"}", 400, "4300 digits"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, subprocess.Popen, Path]:
    tmp = tmp_path_factory.mktemp("hostile")
    write_pairs(tmp / "pairs.jsonl", 4)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "evalign", "annotate", "pairs.jsonl", "--db", "labels.sqlite",
                             "--port", str(port), "--per-item", "1"], cwd=tmp, stdout=subprocess.DEVNULL,
                            stderr=(tmp / "stderr.txt").open("wb"))
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{base}/api/probe/state", timeout=2)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise AssertionError("the server did not start")
    yield base, proc, tmp
    proc.terminate()
    proc.wait(timeout=30)


def _csrf(base: str) -> str:
    page = httpx.get(f"{base}/annotate/r1").text
    return re.search(r'name="evalign-csrf" content="([0-9a-f]+)"', page).group(1)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_body_gets_a_clear_answer(server: tuple[str, subprocess.Popen, Path], case: str) -> None:
    base, proc, tmp = server
    body, status, words = HOSTILE[case]
    headers = {"X-CSRF-Token": _csrf(base), "Content-Type": "application/json"}
    for route in ROUTES:
        res = httpx.post(f"{base}/api/r1/{route}", content=body, headers=headers, timeout=30)
        assert res.status_code == status, (route, res.status_code, res.text[:200])
        assert res.text.startswith(f"{status}: ") and words in res.text, (route, res.text[:200])
    assert proc.poll() is None
    assert "Traceback" not in (tmp / "stderr.txt").read_text(errors="replace")


def test_the_server_goes_on_after_hostile_bodies(server: tuple[str, subprocess.Popen, Path]) -> None:
    base, proc, tmp = server
    headers = {"X-CSRF-Token": _csrf(base), "Content-Type": "application/json"}
    for body, _, _ in HOSTILE.values():
        httpx.post(f"{base}/api/r1/label", content=body, headers=headers, timeout=30)
    key = httpx.get(f"{base}/api/r1/state").json()["item"]["key"]
    res = httpx.post(f"{base}/api/r1/label", json={"key": key, "choice": "left", "seconds": 2}, headers=headers)
    assert res.status_code == 200 and res.json()["stored"]
    wrong = httpx.post(f"{base}/api/r1/label", json={"key": ["x"], "choice": {"a": 1}}, headers=headers)
    assert wrong.status_code == 400 and wrong.text == "400: unknown item"
    assert proc.poll() is None
    assert "Traceback" not in (tmp / "stderr.txt").read_text(errors="replace")
