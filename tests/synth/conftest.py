"""Fixtures of the synth tests: the scripted teacher on the path, and the judge tests' llama.cpp server
(a real OpenAI-compatible server with a tiny random-weight GGUF, see tests/judges/llama_server.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))

from llama_server import LlamaServer, ServerInfo, cached_tiny_gguf, require_llama_cpp


@pytest.fixture(scope="session")
def synth_llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """A running llama.cpp server with the tiny random model (fails, does not skip, when it is missing)."""
    try:
        require_llama_cpp()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    with LlamaServer(cached_tiny_gguf(), log_path=tmp_path_factory.mktemp("llama") / "server.log") as info:
        yield info
