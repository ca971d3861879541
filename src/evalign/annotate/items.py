"""The items to label: any evalign item or pair table (or the pair table ``evalign escalate`` leaves for
people), read and checked by the project's readers (errors name the file, line and field), each kept
twice: its record as the file holds it (every column, for the export) and what the page shows."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalign.errors import InputError, UsageError
from evalign.io.readers import detect_format, iter_records
from evalign.io.validation import read_items, read_pairs
from evalign.io.writers import json_default, json_safe

#: the tasks a page can ask for
TASKS = ("pairwise", "graded", "label")


@dataclass(frozen=True)
class Item:
    """One item to label.

    Attributes:
        key: the item's key: its ``id`` (``id#turn`` where per-turn rows of a conversation share an id).
        record: the item's row as the file holds it (JSON values), written back by the export.
        view: what the page shows: ``instruction``, ``input``, ``context`` (earlier messages),
            ``reference`` and ``response`` (graded / label) or ``response_a`` / ``response_b`` with
            ``context_a`` / ``context_b`` (a pair of conversations: the earlier messages where the two
            differ, each system's own earlier answers; ``context`` is then the messages both share).
    """

    key: str
    record: dict[str, Any] = field(repr=False)
    view: dict[str, Any] = field(repr=False)


def plain_value(v: Any) -> Any:
    """A value as JSON holds it (NaN and pandas' missing values -> None, numpy values unboxed, dates as
    ISO 8601 text)."""
    return json.loads(json.dumps(json_safe(v), ensure_ascii=False, default=json_default))


def _context(messages: Any) -> list[dict[str, str]]:
    """The messages before the graded turn's user message (empty without a conversation)."""
    if not isinstance(messages, list) or not messages:
        return []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in messages[:last_user]]


def _text(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return v if isinstance(v, str) else json.dumps(plain_value(v), ensure_ascii=False)


def is_pair_table(path: Path) -> bool:
    """Whether the table's first record has both ``response_a`` and ``response_b`` (or both
    conversations ``messages_a`` / ``messages_b``)."""
    for _, rec in iter_records(path, detect_format(path)):
        return ("response_a" in rec and "response_b" in rec) or ("messages_a" in rec and "messages_b" in rec)
    raise InputError("no records", file=str(path))


def read_items_to_label(path: str | Path, task: str) -> list[Item]:
    """The items of ``path`` for ``task`` (``pairwise`` needs a pair table, ``graded`` / ``label`` an
    item table). Raises :class:`~evalign.errors.InputError` naming the file, line and field."""
    path = Path(path)
    pairs = is_pair_table(path)
    if task == "pairwise" and not pairs:
        raise InputError("a pairwise task needs a pair table (id, instruction, response_a, response_b)",
                         file=str(path), line=1, field="response_a")
    if task != "pairwise" and pairs:
        raise UsageError(f"--task {task} labels one response per item; {path} is a pair table (use --task pairwise)")
    raw = [rec for _, rec in iter_records(path, detect_format(path))]
    table = read_pairs(path) if pairs else read_items(path, default_system="-")  # a system is not needed here
    rows = table.to_dict("records")
    if len(rows) != len(raw):  # the reader expanded or left out rows: export what it read
        raw = rows
    ids = [str(row["id"]) for row in rows]
    shared_ids = len(set(ids)) < len(ids)  # per-turn rows of conversations: the key is id#turn
    items: list[Item] = []
    for rec, row in zip(raw, rows, strict=True):
        turn = row.get("turn")
        per_turn = shared_ids and not (turn is None or (isinstance(turn, float) and math.isnan(turn)))
        key = f"{row['id']}#{int(turn)}" if per_turn else str(row["id"])
        view: dict[str, Any] = {"instruction": _text(row.get("instruction")), "input": _text(row.get("input")),
                                "reference": _text(row.get("reference"))}
        if pairs:
            ctx_a, ctx_b = _context(row.get("messages_a")), _context(row.get("messages_b"))
            shared = 0
            while shared < min(len(ctx_a), len(ctx_b)) and ctx_a[shared] == ctx_b[shared]:
                shared += 1
            view["context"] = ctx_a[:shared]
            view["context_a"], view["context_b"] = ctx_a[shared:], ctx_b[shared:]
            view["response_a"], view["response_b"] = _text(row["response_a"]), _text(row["response_b"])
        else:
            view["context"] = _context(row.get("messages"))
            view["response"] = _text(row.get("response"))
        items.append(Item(key=key, record={str(k): plain_value(v) for k, v in rec.items()}, view=view))
    seen: set[str] = set()
    for line, it in enumerate(items, start=1):
        if it.key in seen:
            raise InputError(f"duplicate item {it.key!r}", file=str(path), line=line, field="id")
        seen.add(it.key)
    return items


def choose_task(items: Path, task: str | None, labels: list[str]) -> str:
    """The task of a page: ``task`` checked, or by default pairwise for a pair table, label with
    ``labels``, else graded. Raises :class:`~evalign.errors.UsageError` for a bad combination."""
    if task is not None and task not in TASKS:
        raise UsageError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    if task is None:
        task = "pairwise" if is_pair_table(items) else ("label" if labels else "graded")
    if task == "label" and not labels:
        raise UsageError("--task label needs --labels L1,L2,...")
    if task != "label" and labels:
        raise UsageError(f"--labels goes with --task label, not --task {task}")
    if len(labels) > 9 or len(set(labels)) != len(labels):
        raise UsageError("--labels takes 1 to 9 different labels (keys 1-9)")
    return task


def items_hash(items: list[Item]) -> str:
    """A hash of the items' records (a restart with another ITEMS file is refused)."""
    body = json.dumps([it.record for it in items], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(body.encode()).hexdigest()
