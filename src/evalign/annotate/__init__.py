"""``evalign annotate``: a labelling page in the browser that stores every label in SQLite at once
and exports straight into evalign's tables.

Modules: :mod:`~evalign.annotate.items` (the items to label, read by the project's readers),
:mod:`~evalign.annotate.assign` (who labels what next, and the left/right order: pure functions),
:mod:`~evalign.annotate.store` (the SQLite store, WAL), :mod:`~evalign.annotate.export` (wide, long and
Alt-Test exports, agreement so far) and :mod:`~evalign.annotate.app` (the Starlette app; needs the
``annotate`` extra: ``pip install 'evalign[annotate]'``).
"""

from __future__ import annotations

#: keys of the page, per task (shown by ``evalign annotate --help`` and on the page)
KEYS_HELP = (
    "Keys: pairwise: a = the left response is better (the top one where they are stacked), b = the right "
    "(bottom) one, t = tie; graded: 1-5; labels: 1-9 in the order of --labels; ? = unsure of this label, "
    "x = the item is broken (both go with the label); u = undo your last label; s = skip (the item goes to the "
    "end of your queue). The comment box never takes the focus: the keys work as soon as the page loads."
)


def keys_help(task: str, labels: tuple[str, ...] = ()) -> str:
    """The keys of one task's page, in one line."""
    if task == "pairwise":
        keys = "a = the left response is better (the top one where they are stacked), b = the right (bottom) one, t = tie"
    elif task == "graded":
        keys = "1-5 = the grade"
    else:
        keys = ", ".join(f"{i} = {lab}" for i, lab in enumerate(labels, start=1))
    return (f"Keys: {keys}; ? = unsure of this label, x = the item is broken (both go with the label); "
            "u = undo your last label; s = skip (the item goes to the end of your queue). "
            "The comment box takes the keys only while you write in it (Esc leaves it).")
