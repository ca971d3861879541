"""Fixtures for the dataset adapter tests: the shared folder of public datasets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalign.io.data_dir import ENV_VAR

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public datasets: ``$EVALIGN_DATA_DIR`` when set (a worktree beside no ``shared/``), else
    ``shared/data`` beside the checkout; their absence is an error, not a skip."""
    root = Path(os.environ[ENV_VAR]) if os.environ.get(ENV_VAR) else SHARED_DATA
    if not (root / "tulu1_human_eval").is_dir():
        pytest.fail(f"the public datasets are missing: expected them in {root} (see each SOURCE.md)")
    return root
