"""The bench tests: scripted judges (``scripted.py``) and the judge tests' llama.cpp server and fault
proxy (``tests/judges``) importable by name."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))

import pytest
from scripted import registered


@pytest.fixture(autouse=True, scope="module")
def scripted_backends() -> object:
    """The scripted backends registered while the bench tests run only."""
    with registered():
        yield
