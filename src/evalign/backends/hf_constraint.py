"""Output constraints on the ``hf`` backend: a ``transformers`` logits processor driven by llguidance.

llguidance (guidance-ai, MIT; the structured-output engine of the ``guidance`` library and one of
vLLM's and llama.cpp's) compiles a regex, a JSON schema or a GBNF grammar (through its
``gbnf_to_lark``) against the tokenizer and, at each step, gives the set of tokens that keep the
output inside it as a bitmask, lazily (no automaton over the whole vocabulary is built first, so a
long bounded free text costs nothing up front). :class:`ConstraintProcessor` keeps one matcher per
row of the batch, feeds it each generated token and masks every other token's logit to -inf; once
the answer is complete only the end-of-sequence token is left.

torch and llguidance are imported when a processor is made (``pip install llguidance``, in evalign's
``models`` extra).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from evalign.backends.types import Constraint
from evalign.errors import ModelLoadError


def grammar_of(constraint: Constraint) -> str:
    """The llguidance grammar (its JSON form) of ``constraint``: its GBNF (a user's grammar) when
    given, else its regex, else its JSON schema."""
    import llguidance

    if constraint.gbnf is not None:
        from llguidance.gbnf_to_lark import gbnf_to_lark

        return str(llguidance.LLMatcher.grammar_from_lark(gbnf_to_lark(constraint.gbnf)))
    if constraint.regex is not None:
        return str(llguidance.LLMatcher.grammar_from_regex(constraint.regex))
    return str(llguidance.LLMatcher.grammar_from_json_schema(json.dumps(constraint.json_schema)))


def ll_tokenizer(hf_tokenizer: Any, vocab_size: int, eos_ids: Iterable[int]) -> Any:
    """llguidance's view of a fast Hugging Face tokenizer (about a second: made once per backend);
    ``vocab_size``: the model's logits width; ``eos_ids``: the tokens that end an answer."""
    try:
        import llguidance.hf
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelLoadError("output constraints on the 'hf' backend need llguidance: pip install llguidance "
                             "(or 'evalign[models]'), or run with --constrain off") from exc
    return llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=vocab_size, eos_token=sorted(eos_ids))


class ConstraintProcessor:
    """A ``transformers`` logits processor keeping each row of a batch inside ``constraint``.

    ``tokenizer``: from :func:`ll_tokenizer`; ``rows``: the batch size (rows of ``generate``'s
    input, ``num_return_sequences`` included); ``prompt_len``: the padded prompt length (tokens
    after it are the generated ones). A grammar error is a ValueError before generation starts.
    """

    def __init__(self, tokenizer: Any, constraint: Constraint, rows: int, prompt_len: int,
                 eos_ids: Iterable[int] = ()) -> None:
        import llguidance
        import torch

        grammar = grammar_of(constraint)
        msg = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if msg:
            raise ValueError(f"the output constraint is not a valid grammar: {msg}")
        self.matchers = [llguidance.LLMatcher(tokenizer, grammar) for _ in range(rows)]
        self.prompt_len = prompt_len
        self.eos_ids = frozenset(int(t) for t in eos_ids)
        #: rows that have ended (their end-of-sequence token was generated; generate pads them)
        self.ended = [False] * rows
        self.vocab = int(tokenizer.vocab_size)
        self.bitmask = torch.zeros((rows, (self.vocab + 31) // 32), dtype=torch.int32)
        self._bits = torch.arange(32, dtype=torch.int32)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Mask the logits ``scores`` (rows x vocabulary) of the next token of each row."""
        import llguidance.torch
        import torch

        generated = input_ids.shape[1] - self.prompt_len
        for row, matcher in enumerate(self.matchers):
            if generated > 0 and not self.ended[row]:
                token = int(input_ids[row, -1])
                if token in self.eos_ids:
                    self.ended[row] = True
                else:
                    matcher.consume_token(token)
            if self.ended[row]:  # generate pads an ended row, whatever is chosen
                self.bitmask[row] = -1
                continue
            if matcher.is_error():
                raise ValueError(f"the output left its constraint: {matcher.get_error()}")
            llguidance.torch.fill_next_token_bitmask(matcher, self.bitmask, row)
        allowed = ((self.bitmask.unsqueeze(-1) >> self._bits) & 1).bool().reshape(len(self.matchers), -1)
        width = min(scores.shape[1], allowed.shape[1])
        out = scores.clone()
        out[:, :width] = torch.where(allowed[:, :width].to(scores.device), scores[:, :width],
                                     torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
        if scores.shape[1] > width:
            out[:, width:] = float("-inf")
        return out
