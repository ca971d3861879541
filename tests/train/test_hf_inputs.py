"""The hf judge backend passes the model only the inputs its forward names (a tokenizer that returns
``token_type_ids`` made ``generate()`` fail on Llama-type models) and takes a folder as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evalign.backends import GenerationRequest, HFLocalBackend


def test_token_type_ids_are_not_passed_to_generate(tiny_llama: Callable[..., Path]) -> None:
    backend = HFLocalBackend(str(tiny_llama("native")), device="cpu")
    assert backend.source.kind == "folder" and backend.display_model == tiny_llama("native").name
    backend.tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    enc = backend.tokenizer(["a short prompt"], return_tensors="pt")
    assert "token_type_ids" in enc
    with pytest.raises(ValueError, match="token_type_ids"):  # what the unfiltered call did
        backend.model.generate(**enc, max_new_tokens=2, do_sample=False)
    assert set(backend.model_inputs(enc)) == {"input_ids", "attention_mask"}
    gen = backend.run([GenerationRequest(messages=[{"role": "user", "content": "Grade this answer."}], max_tokens=4)])[0]
    assert gen.usage.prompt_tokens > 0 and 1 <= gen.usage.completion_tokens <= 4
