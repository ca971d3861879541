"""Finding a metric's column in a scored table by the metric's name."""

from __future__ import annotations

from collections.abc import Iterable

from evalign.errors import EvalignError


def resolve_metric_column(columns: Iterable[object], name: str) -> str | None:
    """The column of ``columns`` that holds metric ``name``.

    * ``name`` itself when it is a column;
    * else the one column named ``name[...]`` (a metric with options, e.g. ``semscore`` ->
      ``semscore[model=all-MiniLM-L6-v2]``); extra columns ``name[...].suffix`` do not count;
    * None when there is no such column (the caller may compute the metric);
    * an :class:`~evalign.errors.EvalignError` listing the candidates when several match.
    """
    cols = [str(c) for c in columns]
    if name in cols:
        return name
    prefix = f"{name}["
    matches = [c for c in cols if c.startswith(prefix) and c.endswith("]")]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise EvalignError(f"metric '{name}' matches several columns ({', '.join(matches)}): name one of them")
    return None
