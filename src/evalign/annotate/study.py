"""What makes a labelling page a study: the instructions, the completion link, the minimum time an item
is on screen before a label counts, and the gold (attention-check) items with their known answers, mixed
in at a rate. The option values follow the project's one table of option rules
(:data:`evalign.judges.option_rules.BACKEND_RULES`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from evalign.annotate.items import read_items_to_label
from evalign.errors import InputError, UsageError
from evalign.judges.option_rules import check_options

#: the gold answers of a pair, as the ``gold`` column may write them, in the items' frame
PAIR_ANSWERS = {"a": 1.0, "b": -1.0, "tie": 0.0, "1": 1.0, "-1": -1.0, "0": 0.0, "1.0": 1.0, "-1.0": -1.0,
                "0.0": 0.0}


@dataclass(frozen=True)
class StudySettings:
    """A study's settings (``evalign annotate``'s study options).

    Attributes:
        instructions: the study's instructions (Markdown), shown before the first item and linked on
            every item; None: none.
        completion_url: the link an annotator is shown when done (e.g. Prolific's completion link), or None.
        min_seconds: seconds an item must be on screen before a label of it counts (>= 0; 0: off).
        gold_rate: the share of the items shown that are gold items, in (0, 1] (with gold items).
    """

    instructions: str | None = None
    completion_url: str | None = None
    min_seconds: float = 1.0
    gold_rate: float = 0.1


def check_study(settings: StudySettings) -> None:
    """Raise :class:`~evalign.errors.UsageError` naming the option of a bad value."""
    check_options(min_seconds=settings.min_seconds, gold_rate=settings.gold_rate)
    if settings.completion_url is not None:
        url = urlparse(settings.completion_url)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise UsageError(f"--completion-url must be an http:// or https:// URL, got {settings.completion_url!r}")


def read_instructions(path: str | Path) -> str:
    """The instructions file's text (Markdown). Raises :class:`~evalign.errors.InputError` naming the
    file when it cannot be read or is empty."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the instructions ({getattr(e, 'strerror', None) or e})", file=str(path)) from None
    if not text.strip():
        raise InputError("the instructions are empty", file=str(path))
    return text


def gold_answer(value: Any, task: str, labels: tuple[str, ...]) -> float | str:
    """A ``gold`` cell as a label in the items' frame: pairwise ``A`` / ``B`` / ``tie`` (or +1 / -1 / 0)
    -> +1 / -1 / 0; graded a grade 1-5; label one of ``labels``. Raises ValueError saying what it must be."""
    text = str(value).strip().lower() if value is not None else ""
    if task == "pairwise":
        if text not in PAIR_ANSWERS:
            raise ValueError(f"a pair's gold answer is A, B or tie, got {value!r:.30}")
        return PAIR_ANSWERS[text]
    if task == "graded":
        try:
            grade = float(text)
        except ValueError:
            grade = 0.0
        if grade not in (1.0, 2.0, 3.0, 4.0, 5.0):
            raise ValueError(f"a gold grade is 1 to 5, got {value!r:.30}")
        return grade
    if value not in labels:
        raise ValueError(f"a gold label is one of {', '.join(labels)}, got {value!r:.30}")
    return str(value)


def read_gold(path: str | Path, task: str, labels: tuple[str, ...] = ()) -> list[tuple[str, dict[str, Any], float | str]]:
    """The gold items of ``path`` (an item table of the task's shape with the known answer in a column
    ``gold``): ``(key, view, answer)`` each. Raises :class:`~evalign.errors.InputError` naming the file,
    line and field (``gold``) of a missing or bad answer."""
    items = read_items_to_label(path, task)
    out = []
    for line, it in enumerate(items, start=1):
        if it.record.get("gold") is None:
            raise InputError("no gold answer", file=str(path), line=line, field="gold")
        try:
            out.append((it.key, it.view, gold_answer(it.record["gold"], task, labels)))
        except ValueError as e:
            raise InputError(str(e), file=str(path), line=line, field="gold") from None
    if not out:
        raise InputError("no gold items", file=str(path))
    return out
