"""Conversations in item and pair tables: the ``messages`` column (``messages_a`` / ``messages_b`` in a
pair table), checked and turned into the fields a single-turn judge reads.

A conversation is a list of ``{"role", "content"}`` messages (OpenAI style) holding the whole
exchange up to and including the graded assistant turn: an optional ``system`` message first, then
``user`` and ``assistant`` turns in turn, from a user turn to an assistant turn. In a JSONL file it is
a JSON array; in a CSV or Parquet file a JSON string (a Parquet list of structs is read too).

From it the row gets (see :func:`conversation_fields`): ``response`` = the last assistant turn's
content, ``instruction`` = the last user turn's content (so single-turn judges still work) and
``turn`` = the 1-based number of the graded assistant turn. A pair's two conversations share their
user turns (each side has its own assistant turns, and may have its own system message).

Every error names the file, the line and the field down to the message (``messages[3].role``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from evalign.errors import InputError, did_you_mean

if TYPE_CHECKING:
    import pandas as pd

#: the roles a conversation message may have
ROLES = ("system", "user", "assistant")
#: the conversation column of an item table and the two of a pair table
MESSAGES = "messages"
PAIR_MESSAGES = ("messages_a", "messages_b")

Message = dict[str, str]


def parse_messages(value: Any, *, file: str | None, line: int | None, field: str = MESSAGES,
                   line_word: str = "line") -> list[Message]:
    """A conversation cell checked and normalised to a list of ``{"role", "content"}`` dicts.

    ``value``: a list of mappings, or its JSON text (CSV / Parquet cells). Errors
    (:class:`~evalign.errors.InputError`, naming ``file``, ``line`` and ``field`` down to the message):
    not a list, an empty list, a message that is not a ``{role, content}`` object, an unknown role, a
    content that is not text, a system message after the first message, two user or two assistant
    turns in a row, a first turn that is not the user's, and a conversation that does not end with an
    assistant turn (the graded answer)."""

    def err(msg: str, where: str = "") -> InputError:
        return InputError(msg, file=file, line=line, field=f"{field}{where}", line_word=line_word)

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError) as e:
            raise err(f"not a JSON array of messages (malformed JSON: {getattr(e, 'msg', e)})") from None
    if hasattr(value, "tolist") and not isinstance(value, list | str):
        value = value.tolist()  # a Parquet list column read as a numpy array
    if not isinstance(value, list | tuple):
        raise err(f"must be a list of {{role, content}} messages, got {type(value).__name__}")
    if not value:
        raise err("empty conversation (it needs a user turn and the assistant turn graded)")
    out = [_message(m, i, err) for i, m in enumerate(value)]
    _check_order(out, err)
    return out


def _message(m: Any, i: int, err: Any) -> Message:
    """One message checked: a mapping with exactly a known ``role`` and a text ``content``."""
    where = f"[{i}]"
    if not isinstance(m, Mapping):
        raise err(f"must be a {{role, content}} object, got {type(m).__name__}", where)
    for key in ("role", "content"):
        if key not in m:
            raise err(f"missing{did_you_mean(key, [str(k) for k in m if k not in ('role', 'content')])}",
                      f"{where}.{key}")
    extra = [str(k) for k in m if k not in ("role", "content")]
    if extra:
        raise err(f"unexpected key '{extra[0]}' (a message has exactly 'role' and 'content')", where)
    role, content = m["role"], m["content"]
    if not isinstance(role, str) or role not in ROLES:
        hint = did_you_mean(str(role), ROLES) if isinstance(role, str) else ""
        raise err(f"must be one of {', '.join(ROLES)}, got {role!r:.40}{hint}", f"{where}.role")
    if not isinstance(content, str):
        raise err(f"must be a string, got {type(content).__name__}", f"{where}.content")
    return {"role": role, "content": content}


def _check_order(messages: Sequence[Message], err: Any) -> None:
    """An optional system message first, then user and assistant turns in turn, ending with an
    assistant turn."""
    start = 1 if messages[0]["role"] == "system" else 0
    if start == len(messages):
        raise err("only a system message (a conversation needs a user turn and the assistant turn graded)")
    for i in range(start, len(messages)):
        want = "user" if (i - start) % 2 == 0 else "assistant"
        got = messages[i]["role"]
        if got != want:
            why = ("a system message may only come first" if got == "system" else
                   f"turns alternate user and assistant, from a user turn; message {i} should be the {want}'s")
            raise err(f"must be '{want}', got '{got}' ({why})", f"[{i}].role")
    if messages[-1]["role"] != "assistant":
        raise err(f"must end with an assistant turn (the graded answer); it ends with a user turn "
                  f"(message {len(messages) - 1})")


def user_turns(messages: Sequence[Message]) -> list[str]:
    """The user turns' contents, in order."""
    return [m["content"] for m in messages if m["role"] == "user"]


def assistant_turns(messages: Sequence[Message]) -> list[str]:
    """The assistant turns' contents, in order."""
    return [m["content"] for m in messages if m["role"] == "assistant"]


def system_message(messages: Sequence[Message]) -> str | None:
    """The system message's content, or None."""
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else None


def conversation_fields(messages: Sequence[Message]) -> dict[str, Any]:
    """``instruction`` (the last user turn), ``response`` (the last assistant turn) and ``turn`` (the
    1-based number of that assistant turn) of a checked conversation."""
    users, answers = user_turns(messages), assistant_turns(messages)
    return {"instruction": users[-1], "response": answers[-1], "turn": len(answers)}


def truncate_to_turn(messages: Sequence[Message], turn: int) -> list[Message]:
    """The conversation up to and including its ``turn``-th assistant turn (1-based)."""
    seen = 0
    for i, m in enumerate(messages):
        if m["role"] == "assistant":
            seen += 1
            if seen == turn:
                return [dict(x) for x in messages[: i + 1]]
    raise ValueError(f"the conversation has {seen} assistant turn(s), not {turn}")


def check_derived(out: dict[str, Any], derived: Mapping[str, Any], *, field: str, file: str | None,
                  line: int | None, line_word: str, names: Mapping[str, str] | None = None) -> None:
    """Fill ``out`` with the fields ``derived`` from its conversation column ``field``; a field the
    record gives with another value is an error (the conversation and the text must say the same).
    ``names``: the record's names of the derived fields (``response`` -> ``response_a``)."""
    names = names or {}
    for key, value in derived.items():
        name = names.get(key, key)
        given = out.get(name)
        if given is None or (isinstance(given, float) and given != given) or (given == "" and key == "instruction"):
            out[name] = value
            continue
        ok = (not isinstance(given, bool) and _number(given) == value) if key == "turn" else given == value
        if not ok:
            what = {"instruction": "the last user turn", "response": "the last assistant turn",
                    "turn": "the number of assistant turns"}[key]
            raise InputError(f"{given!r:.40} differs from {what} of '{field}' ({value!r:.40}); give one or make "
                             "them equal", file=file, line=line, field=name, line_word=line_word)
        out[name] = value


def _number(v: Any) -> float | None:
    """A turn number given as a number or as text (a CSV cell), else None."""
    try:
        return float(v) if isinstance(v, int | float | str) else None
    except ValueError:
        return None


def pair_conversations(out: dict[str, Any], *, file: str | None, line: int | None, line_word: str) -> None:
    """A pair record's ``messages_a`` / ``messages_b`` checked (in place): both or neither, the same
    user turns, and ``instruction``, ``response_a``, ``response_b``, ``turn`` filled from them."""
    have = [f for f in PAIR_MESSAGES if out.get(f) is not None]
    if not have:
        return
    if len(have) == 1:
        other = PAIR_MESSAGES[1 - PAIR_MESSAGES.index(have[0])]
        raise InputError(f"missing (a pair with '{have[0]}' needs both conversations)", file=file, line=line,
                         field=other, line_word=line_word)
    a = parse_messages(out["messages_a"], file=file, line=line, field="messages_a", line_word=line_word)
    b = parse_messages(out["messages_b"], file=file, line=line, field="messages_b", line_word=line_word)
    ua, ub = user_turns(a), user_turns(b)
    if len(ua) != len(ub):
        raise InputError(f"has {len(ub)} user turn(s), messages_a has {len(ua)} (the two sides of a pair share "
                         "their user turns)", file=file, line=line, field="messages_b", line_word=line_word)
    for k, (x, y) in enumerate(zip(ua, ub, strict=True)):
        if x != y:
            idx = [i for i, m in enumerate(b) if m["role"] == "user"][k]
            raise InputError(f"user turn {k + 1} differs from messages_a's (the two sides of a pair share their "
                             "user turns)", file=file, line=line, field=f"messages_b[{idx}].content",
                             line_word=line_word)
    out["messages_a"], out["messages_b"] = a, b
    fa, fb = conversation_fields(a), conversation_fields(b)
    check_derived(out, {"instruction": fa["instruction"], "response": fa["response"], "turn": fa["turn"]},
                  field="messages_a", file=file, line=line, line_word=line_word, names={"response": "response_a"})
    check_derived(out, {"response": fb["response"]}, field="messages_b", file=file, line=line, line_word=line_word,
                  names={"response": "response_b"})


def expand_turns(table: pd.DataFrame, pairwise: bool) -> pd.DataFrame:
    """One row per assistant turn of each conversation row (``messages``; a pair table's ``messages_a``
    and ``messages_b``): turn ``k``'s row holds the conversation cut after the k-th assistant turn, with
    its ``instruction``, ``response`` (``response_a`` / ``response_b``) and ``turn`` = k; its other
    columns (labels included) are copied. Rows without a conversation stay as they are."""
    cols = PAIR_MESSAGES if pairwise else (MESSAGES,)
    if not all(c in table.columns for c in cols):
        return table
    rows: list[dict[str, Any]] = []
    for rec in table.to_dict("records"):
        convs = [rec[c] for c in cols]
        if not all(isinstance(m, list) and m for m in convs):
            rows.append(rec)
            continue
        for k in range(1, len(assistant_turns(convs[0])) + 1):
            row = dict(rec)
            for c, m in zip(cols, convs, strict=True):
                cut = truncate_to_turn(m, k)
                row[c] = cut
                f = conversation_fields(cut)
                row["instruction"], row["turn"] = f["instruction"], k
                row["response" if c == MESSAGES else f"response_{c[-1]}"] = f["response"]
            rows.append(row)
    import pandas as pd  # the item readers import this module: pandas only where a table is built

    out = pd.DataFrame(rows, columns=list(dict.fromkeys([*table.columns, "turn"])))
    out.attrs.update(table.attrs)
    return out


__all__ = [
    "MESSAGES",
    "PAIR_MESSAGES",
    "ROLES",
    "assistant_turns",
    "check_derived",
    "conversation_fields",
    "expand_turns",
    "pair_conversations",
    "parse_messages",
    "system_message",
    "truncate_to_turn",
    "user_turns",
]
