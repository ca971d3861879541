"""Project-wide test settings: an isolated cache and few torch threads."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pytest-xdist's workers export COLUMNS (the controller's terminal width): the CLI's tables see the same
# environment under `-n 2` as in one process
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

# A run started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and so
# would every command the tests start (an ignored signal survives exec): give them Ctrl-C as a terminal does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# the public datasets that are not bundled (the default data folder is never beside the checkout)
os.environ.setdefault("EVALIGN_DATA_DIR", str(SHARED_DATA))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own cache file unless it sets EVALIGN_CACHE itself."""
    path = tmp_path_factory.mktemp("cache") / "cache.sqlite"
    monkeypatch.setenv("EVALIGN_CACHE", str(path))
