"""Fixtures of the evaluation tests: the shared folder of public datasets."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``shared/data`` beside the checkout; its absence is an error, not a skip."""
    if not (SHARED_DATA / "tulu1_human_eval").is_dir():
        pytest.fail(f"the public datasets are missing: expected them in {SHARED_DATA} (see each SOURCE.md)")
    return SHARED_DATA
