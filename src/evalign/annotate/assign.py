"""Who labels what next, and in which left/right order: pure functions of the store's state.

Each annotator's queue holds the items still short of ``per_item`` labels that the annotator has not
labelled, new items first to the annotators who have fewest labels: an annotator with no more labels than
any other gets the items with the fewest labels first (new items first, so that the items reach K labels
evenly); an annotator ahead of another (more labels) gets the items others started first (those nearest
K first), new items after them, so that the new items are left to those behind and the started ones
reach K. Ties go by file order; the items the annotator skipped go to the end, in the order skipped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

#: an annotator's name: letters, digits, ``_``, ``.`` and ``-``, 1 to 64 characters
NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def valid_name(name: str) -> bool:
    """Whether ``name`` is an acceptable annotator name (:data:`NAME_RE`, the whole string)."""
    return NAME_RE.fullmatch(name) is not None


def shown_order(seed: str, annotator: str, key: str) -> str:
    """The order the two responses of pair ``key`` are shown to ``annotator``: ``"ab"`` (response_a on
    the left) or ``"ba"``; drawn from a hash of the store's seed, the annotator and the item, so a
    reload (or a restart) shows the same order."""
    digest = hashlib.sha256(f"{seed}\x00{annotator}\x00{key}".encode()).digest()
    return "ab" if digest[0] % 2 == 0 else "ba"


def is_ahead(annotator: str, labels_per_annotator: Mapping[str, int]) -> bool:
    """Whether ``annotator`` has more labels than some other annotator (then new items go to the others
    first). ``labels_per_annotator``: the labels each annotator with a label gave."""
    mine = labels_per_annotator.get(annotator, 0)
    return any(mine > n for name, n in labels_per_annotator.items() if name != annotator)


def queue(n_items: int, *, counts: Sequence[int], done: set[int], skipped: Sequence[int],
          per_item: int, ahead: bool = False) -> list[int]:
    """The indices of the items ``annotator`` should label next, in order.

    Args:
        n_items: items in the store (indices ``0 .. n_items - 1``, file order).
        counts: labels each item has so far (every annotator).
        done: items this annotator labelled.
        skipped: items this annotator skipped, oldest skip first.
        per_item: labels an item needs (K).
        ahead: whether this annotator has more labels than another (:func:`is_ahead`): the items others
            started come first (nearest K first), new items after them.
    """
    skip_rank = {i: r for r, i in enumerate(skipped)}
    open_items = [i for i in range(n_items) if i not in done and counts[i] < per_item]

    def rank(i: int) -> tuple[int, int, int]:
        return (counts[i] == 0, -counts[i], i) if ahead else (0, counts[i], i)

    fresh = sorted((i for i in open_items if i not in skip_rank), key=rank)
    later = sorted((i for i in open_items if i in skip_rank), key=lambda i: skip_rank[i])
    return fresh + later


def label_code(task: str, choice: str, order: str, labels: Sequence[str]) -> float | str:
    """The label an answer on the page means, in the items' own frame.

    pairwise: ``left`` / ``right`` / ``tie`` with the order shown -> +1 (response_a better) / -1 / 0;
    graded: ``"1"`` .. ``"5"`` -> the grade; label: ``"1"`` .. -> the label of that position.
    Raises ValueError for an answer the task does not have."""
    if task == "pairwise":
        if choice == "tie":
            return 0.0
        if choice not in ("left", "right"):
            raise ValueError(f"a pairwise answer is left, right or tie, got {choice!r:.20}")
        a_left = order == "ab"
        return 1.0 if (choice == "left") == a_left else -1.0
    if task == "graded":
        if choice not in ("1", "2", "3", "4", "5"):
            raise ValueError(f"a grade is 1 to 5, got {choice!r:.20}")
        return float(choice)
    if not choice.isdigit() or not 1 <= int(choice) <= len(labels):
        raise ValueError(f"a label is 1 to {len(labels)}, got {choice!r:.20}")
    return labels[int(choice) - 1]


def short_items(counts: Mapping[int, int] | Sequence[int], per_item: int) -> list[int]:
    """The items still short of ``per_item`` labels."""
    pairs = counts.items() if isinstance(counts, Mapping) else enumerate(counts)
    return [i for i, c in pairs if c < per_item]


def normal_name(name: str) -> str:
    """An annotator's name as labels are stored under it: lower case (``Alice`` and ``alice`` are one
    annotator)."""
    return name.lower()


def gold_due(n_labels: int, n_gold: int, rate: float) -> bool:
    """Whether the next item shown to an annotator should be a gold item: when gold items would then be
    at most ``rate`` of the items shown (``n_labels`` items labelled, ``n_gold`` gold items), so that
    one in every ``1 / rate`` items is gold (the first after ``1 / rate - 1`` items)."""
    return rate > 0 and n_gold + 1 <= rate * (n_labels + n_gold + 1) + 1e-9


def gold_order(seed: str, annotator: str, keys: Sequence[str]) -> list[str]:
    """The order ``annotator`` sees the gold items ``keys`` in: drawn per annotator from the store's
    seed (the same on a reload or a restart)."""
    return sorted(keys, key=lambda k: hashlib.sha256(f"{seed}\x00gold\x00{annotator}\x00{k}".encode()).digest())


def choice_of(task: str, value: float | str, order: str, labels: Sequence[str]) -> str:
    """The answer on the page a stored label came from (the inverse of :func:`label_code`): pairwise
    ``left`` / ``right`` / ``tie`` in the order shown, graded ``"1"`` .. ``"5"``, label its position."""
    if task == "pairwise":
        if float(value) == 0.0:
            return "tie"
        return "left" if (float(value) > 0) == (order == "ab") else "right"
    if task == "graded":
        return str(int(float(value)))
    return str(list(labels).index(str(value)) + 1) if value in labels else str(value)
