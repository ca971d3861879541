"""What a reward model reads: one (instruction, response) conversation as token ids, truncated by one
stated rule. The reward backend (scoring) and ``train-judge --kind reward`` (training) both encode
through :class:`RewardEncoder`, so a trained model is scored exactly as it was trained.

**Rendering.** A tokenizer with a chat template renders the conversation (the user turn(s), then the
graded response as the last assistant turn; no generation prompt) with that template. A tokenizer
without one (an encoder such as all-MiniLM-L6-v2 used as a cross-encoder) encodes the pair as the
model's text pair (``[CLS] instruction [SEP] response [SEP]`` for BERT); earlier turns of a
conversation are written before the last user turn as ``Role: content`` paragraphs. Only
``input_ids`` and ``attention_mask`` are fed to the model (no ``token_type_ids``: TRL's reward
collator does not make them, so training and scoring see the same inputs).

**Truncation** (:data:`TRUNCATION_RULE`): the text is split into the *context* (everything before the
graded response, except the template's markers between the last user turn and the response), the
*response*, and the fixed *markers* (the end of the user turn and the start of the assistant turn,
the end of the assistant turn, a pair encoding's special tokens), each tokenized on its own. When
they do not fit ``max_length`` tokens, the markers are kept whole, the context keeps its first
tokens (its head: the system prompt and the start of the instruction) and the response its last
tokens (its tail, next to the token a decoder reward model reads its score from); the context gets
at most ``max(budget - response, budget // 2)`` tokens of the budget, so the response keeps at least
half of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalign.errors import EvalignError

Message = Mapping[str, str]

#: the truncation rule in one line (recorded in backend identities and training signatures)
TRUNCATION_RULE = "context-head+response-tail@1"
#: stand-ins for the last user turn and the response when the chat template renders the conversation
_USER_MARK = "\u0000EVALIGN-USER\u0000"
_RESPONSE_MARK = "\u0000EVALIGN-RESPONSE\u0000"


def conversation(instruction: str, response: str, messages: Sequence[Message] | None = None) -> list[dict[str, str]]:
    """The conversation a reward model scores: ``messages`` (a whole conversation ending with the
    graded assistant turn) as given, else one user turn (``instruction``) and one assistant turn."""
    if messages:
        out = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        if out[-1]["role"] != "assistant":
            raise EvalignError("a conversation to score must end with the graded assistant turn")
        return out
    return [{"role": "user", "content": instruction}, {"role": "assistant", "content": response}]


@dataclass(frozen=True)
class Parts:
    """One conversation split for truncation: ``context`` (text before the response, markers after
    the last user turn excluded), ``markers`` (text between the last user turn and the response),
    ``response``, ``suffix`` (text after the response); with ``pair``, ``context`` and ``response``
    are the two texts of a pair encoding and the other parts are empty."""

    context: str
    markers: str
    response: str
    suffix: str


def plain_context(messages: Sequence[Message]) -> str:
    """The context of a conversation without a chat template: earlier turns as ``Role: content``
    paragraphs, then the last user turn's content."""
    turns = list(messages[:-1])
    if not turns:
        return ""
    *earlier, last = turns
    head = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in earlier)
    return head + (last["content"] if last["role"] == "user" else f"{last['role'].capitalize()}: {last['content']}")


def split_conversation(tokenizer: Any, messages: Sequence[Message]) -> Parts:
    """The :class:`Parts` of a conversation (ending with the graded assistant turn) as ``tokenizer``
    renders it (see the module doc)."""
    msgs = [dict(m) for m in messages]
    response = msgs[-1]["content"]
    if not getattr(tokenizer, "chat_template", None):
        return Parts(plain_context(msgs), "", response, "")
    users = [i for i, m in enumerate(msgs[:-1]) if m["role"] == "user"]
    marked = [dict(m) for m in msgs]
    marked[-1]["content"] = _RESPONSE_MARK
    if users:
        marked[users[-1]]["content"] = _USER_MARK
    try:
        text = str(tokenizer.apply_chat_template(marked, tokenize=False, add_generation_prompt=False))
    except Exception as exc:  # jinja TemplateError or raise_exception() in the template
        raise EvalignError(f"the chat template rejected the conversation: {exc}") from exc
    before, found, suffix = text.partition(_RESPONSE_MARK)
    if not found:
        raise EvalignError("the chat template dropped the assistant turn: a reward model cannot score it")
    if users:
        head, found_user, markers = before.partition(_USER_MARK)
        if not found_user:
            raise EvalignError("the chat template dropped the user turn")
        context = head + msgs[users[-1]]["content"]
    else:
        context, markers = before, ""
    return Parts(context, markers, response, suffix)


def budget_split(context: int, response: int, budget: int) -> tuple[int, int]:
    """How many context tokens (a head) and response tokens (a tail) fit ``budget`` tokens: all of
    both when they fit; else the context gets at most ``max(budget - response, budget // 2)``."""
    if budget < 0:
        budget = 0
    if context + response <= budget:
        return context, response
    keep_context = min(context, max(budget - response, budget // 2))
    return keep_context, min(response, budget - keep_context)


def _segments(offsets: Sequence[Sequence[int]], p: Parts) -> list[int]:
    """The segment of each token of a rendered conversation by where it starts: 0 context, 1 markers
    or suffix (kept whole), 2 response."""
    ctx_end = len(p.context)
    rsp_start = ctx_end + len(p.markers)
    rsp_end = rsp_start + len(p.response)
    out = []
    for start, end in offsets:
        if end <= start and start == 0:
            out.append(1)  # a special token with no text (kept)
        elif start < ctx_end:
            out.append(0)
        elif rsp_start <= start < rsp_end:
            out.append(2)
        else:
            out.append(1)
    return out


class RewardEncoder:
    """Token ids of conversations for a reward model (see the module doc): ``encode_many`` renders,
    tokenizes (one batched tokenizer call per part) and truncates to ``max_length`` tokens.
    ``truncated`` counts the conversations cut so far."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        if max_length < 8:
            raise EvalignError(f"max_length must be >= 8 tokens, got {max_length}")
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.pair = not getattr(tokenizer, "chat_template", None)
        self.truncated = 0
        if not getattr(tokenizer, "is_fast", False):
            raise EvalignError("a reward model needs a fast tokenizer (token offsets to split the conversation)")

    def rendering(self) -> str:
        """How conversations are rendered: ``chat_template`` or ``text_pair``."""
        return "text_pair" if self.pair else "chat_template"

    def encode_many(self, conversations: Sequence[Sequence[Message]]) -> list[list[int]]:
        """The token ids of each conversation (each ending with the graded assistant turn): the
        tokenizer's own ids of the whole rendered text (one batched call), then, when too long, the
        context's tail and the response's head cut out (see the module doc)."""
        parts = [split_conversation(self.tokenizer, c) for c in conversations]
        if not parts:
            return []
        if self.pair:
            enc = self.tokenizer([p.context for p in parts], [p.response for p in parts], verbose=False)
            segments = [[{0: 0, 1: 2}.get(k, 1) if k is not None else 1 for k in enc.sequence_ids(i)]
                        for i in range(len(parts))]
        else:
            texts = [p.context + p.markers + p.response + p.suffix for p in parts]
            enc = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            segments = [_segments(offsets, p) for offsets, p in zip(enc["offset_mapping"], parts, strict=True)]
        return [self._truncate(list(ids), seg) for ids, seg in zip(enc["input_ids"], segments, strict=True)]

    def _truncate(self, ids: list[int], segment: list[int]) -> list[int]:
        """``ids`` cut to ``max_length``: segment 0 (context) keeps its head, 2 (response) its tail,
        1 (markers, special tokens) stays whole."""
        if len(ids) <= self.max_length:
            return ids
        n_ctx, n_rsp = segment.count(0), segment.count(2)
        keep_ctx, keep_rsp = budget_split(n_ctx, n_rsp, self.max_length - (len(ids) - n_ctx - n_rsp))
        self.truncated += 1
        out, seen_ctx, seen_rsp = [], 0, 0
        for t, seg in zip(ids, segment, strict=True):
            if seg == 0:
                seen_ctx += 1
                if seen_ctx > keep_ctx:
                    continue
            elif seg == 2:
                seen_rsp += 1
                if seen_rsp <= n_rsp - keep_rsp:
                    continue
            out.append(t)
        return out[: self.max_length]

    def encode(self, messages: Sequence[Message]) -> list[int]:
        """The token ids of one conversation."""
        return self.encode_many([messages])[0]
