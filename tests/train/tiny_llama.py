"""A tiny random Llama causal LM with a byte-level BPE tokenizer, built offline for the training tests.

The tokenizer is trained here on the judge prompt templates, the built-in rubrics and the scripted
teacher's words (vocabulary 1,000), so a Prometheus prompt takes a few hundred tokens; any text still
tokenizes (byte fallback through the byte-level alphabet). No chat template unless one is given (then
``evalign train-judge`` uses its fallback template).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "synth"))


#: the templates and rubrics the tokenizer learns from: a fixed list, so that a template added to the
#: package later does not change the tiny model (and every loss curve the tests check)
CORPUS_TEMPLATES = (
    "criteria", "criteria_evalign", "geval", "geval_form", "llmbar_cot", "llmbar_metrics", "llmbar_metrics_reference",
    "llmbar_reference", "llmbar_swap", "llmbar_swap_cot", "llmbar_vanilla", "llmbar_vanilla_norules",
    "prometheus1_absolute", "prometheus_absolute", "prometheus_relative", "prometheus_relative_2024_06",
    "prometheus_relative_tie",
)
CORPUS_RUBRICS = (
    "factual_validity", "harmlessness", "helpfulness", "hhh_harmlessness", "hhh_helpfulness", "hhh_honesty",
    "hhh_overall", "honesty", "human_preference", "reasoning",
)


def corpus() -> list[str]:
    from scripted_teacher import WORDS

    from evalign.judges.prompts import _data_dir

    texts = [(_data_dir("templates") / f"{n}.yaml").read_text(encoding="utf-8") for n in CORPUS_TEMPLATES]
    texts += [(_data_dir("rubrics") / f"{n}.yaml").read_text(encoding="utf-8") for n in CORPUS_RUBRICS]
    texts += [" ".join(WORDS), " ".join(w.capitalize() for w in WORDS)]
    texts += ["So the overall score is 1 [RESULT] 1", "[RESULT] A [RESULT] B", "Response A: Response B: is better."]
    texts += ["### System:\n### User:\n### Assistant:\n", "1 2 3 4 5 A B"]
    return texts


def build_tiny_llama(path: Path, *, seed: int = 0, hidden: int = 64, layers: int = 2,
                     chat_template: str | None = None, vocab_size: int = 1000) -> Path:
    """Save a tiny random ``LlamaForCausalLM`` and its tokenizer to ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE(unk_token=None))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    raw.train_from_iterator(corpus(), trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    if chat_template is not None:
        tok.chat_template = chat_template
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, initializer_range=0.05,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path
