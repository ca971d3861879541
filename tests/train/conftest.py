"""Fixtures of the training tests: tiny random Llama models built offline, small training files."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "synth"))

from tiny_llama import build_tiny_llama

#: chat templates by how they treat a system message (as in tests/judges/conftest.py)
TEMPLATES = {
    "native": (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    "raise": (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
}


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str | None], Path]:
    """``tiny_llama(template)`` -> folder of a tiny random Llama (no chat template when None)."""
    made: dict[str | None, Path] = {}

    def get(template: str | None = None) -> Path:
        if template not in made:
            made[template] = build_tiny_llama(tmp_path_factory.mktemp(f"llama-{template}"), vocab_size=4000,
                                              chat_template=TEMPLATES[template] if template else None)
        return made[template]

    return get


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def small_data(tmp_path: Path) -> Path:
    """Eight short judge rows: the prompt names a score, the output repeats it in the Prometheus format."""
    rows = [{"instruction": f"Grade answer {i}: the apple river is {'good' if i % 2 else 'bad'}.",
             "output": f"The response covers apple river. So the overall score is {1 + i % 5} [RESULT] {1 + i % 5}",
             "system": "You are a fair judge." if i % 2 else None}
            for i in range(8)]
    return write_jsonl(tmp_path / "train.jsonl", rows)
