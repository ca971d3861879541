"""Fixtures for the judge tests: a real llama.cpp server with a tiny random model, and a fault proxy.

``llama_server`` (session scope) yields :class:`llama_server.ServerInfo` — ``base_url, model``::

    @pytest.mark.server
    def test_x(llama_server):
        backend = OpenAICompatibleBackend(llama_server.base_url, llama_server.model)

It FAILS (does not skip) when llama-cpp-python[server] is missing: CI installs it with
``scripts/build_llama_server.sh``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_proxy import FaultProxy
from llama_server import LlamaServer, ServerInfo, cached_tiny_gguf, require_llama_cpp


@pytest.fixture(scope="session")
def tiny_gguf() -> Path:
    """Path of the tiny random-weight GGUF model (built once per machine, then cached)."""
    return cached_tiny_gguf()


@pytest.fixture(scope="session")
def llama_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """A running llama.cpp OpenAI-compatible server (ChatML, n_ctx 8192, logprobs on) for the session."""
    try:
        require_llama_cpp()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LlamaServer(tiny_gguf, log_path=log) as info:
        yield info


@pytest.fixture
def fault_proxy(llama_server: ServerInfo) -> Iterator[FaultProxy]:
    """A :class:`fault_proxy.FaultProxy` in front of ``llama_server`` (forwards everything until
    given a schedule with ``proxy.reset(schedule)``); ``proxy.base_url`` ends in ``/v1``."""
    with FaultProxy(llama_server.root_url) as proxy:
        yield proxy


# -- a tiny random Hugging Face causal LM for the local backend ------------------------------------
#: Chat templates by how they treat a system message.
HF_TEMPLATES = {
    # Gemma / Mistral style: a system message is an error.
    "raise": (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    # Silently drops system messages.
    "drop": (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] != 'system' %}"
        "<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    # Supports a system role.
    "native": (
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
        "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
}

_CORPUS = [
    "Feedback: the response is helpful and accurate. [RESULT] 4",
    "Feedback: the answer is wrong. [RESULT] 1",
    "Score the response from 1 to 5 using the rubric.",
    "Which assistant is better, A or B? Answer A, B or tie.",
    "<|system|> <|user|> <|assistant|> 1 2 3 4 5",
]


def build_tiny_hf_model(path: Path, template: str | None, seed: int = 0) -> Path:
    """Save a tiny random LlamaForCausalLM (2 layers, 32-dim) and a byte-level BPE tokenizer trained
    on a few judge sentences to ``path``; ``template`` is a key of :data:`HF_TEMPLATES` or None."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE(unk_token=None))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )  # fmt: skip
    raw.train_from_iterator(_CORPUS, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    if template is not None:
        tok.chat_template = HF_TEMPLATES[template]
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.2,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_hf_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str | None], Path]:
    """``tiny_hf_model(template)`` -> directory of a tiny random HF causal LM whose chat template is
    ``HF_TEMPLATES[template]`` (``"raise"``, ``"drop"``, ``"native"``) or absent (None). Cached per session."""
    made: dict[str | None, Path] = {}

    def get(template: str | None) -> Path:
        if template not in made:
            made[template] = build_tiny_hf_model(tmp_path_factory.mktemp(f"hf-{template}"), template)
        return made[template]

    return get
