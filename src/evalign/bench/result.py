"""What a bench returns: one frozen, typed profile that the command line, the JSON and the HTML page
render (they compute nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from evalign.bench.suite import Category


@dataclass(frozen=True, eq=False)
class BenchProfile:
    """A judge's trust profile across the suite.

    ``rows``: one row per (scope, judge) (:data:`evalign.bench.profile.ROW_COLUMNS`): ``scope`` ``set``
    (``key`` a set) or ``category`` (``key`` a category); ``role`` ``yours`` / ``panel`` /
    ``published`` / ``baseline`` / ``ceiling``; the headline ``statistic`` with its interval, rank of
    ``of`` and significance cluster among the judges of that set, the accuracy with ties, the order
    diagnostics (``prefers_longer`` of your judge that sees a pair once, a reward model: its run's
    length audit, the same definition). ``runs``: one row per (judge, set): calls, from the cache, parse rate, seconds per
    call (and tokens where the backend counted them). ``sets``: one row per set: its dataset,
    category, kind, template, sample size, statistic and notes. ``judges``: your judges and panels,
    in order. ``signature``: what makes the profile reproducible (``text``: one line).
    ``skipped``: sets left out and why. ``headlines``: per set or category, why ranks are withheld.
    ``seconds``: the bench's wall time. ``batch``: with ``--batch-api``, the provider batches of all the
    judges (``{batches, lines, failed_lines, retried_lines, by_reason}``), else None. ``tables``: each set's judged sample (not in :meth:`to_json`).
    """

    rows: pd.DataFrame
    runs: pd.DataFrame
    sets: pd.DataFrame
    categories: tuple[Category, ...]
    judges: tuple[str, ...]
    signature: Mapping[str, Any]
    notes: tuple[str, ...] = ()
    skipped: Mapping[str, str] = field(default_factory=dict)
    headlines: Mapping[str, str] = field(default_factory=dict)
    seconds: float = float("nan")
    batch: Mapping[str, Any] | None = None
    #: each set's judged sample (its pair or item table with every judge's columns), by set key
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

    def scope(self, scope: str, key: str | None = None) -> pd.DataFrame:
        """The rows of one scope (``set`` / ``category``), or of one set or category."""
        r = self.rows[self.rows["scope"] == scope]
        if key is not None:
            r = r[r["key"] == key]
        return r.reset_index(drop=True)

    def summary(self) -> pd.DataFrame:
        """One row per judge (yours, panels, published judges with a value on a whole category, the
        baselines), one column per category: the category's headline value (``<cat>``) and interval
        (``<cat>.low`` / ``<cat>.high``)."""
        cat = self.scope("category")
        cat = cat[cat["role"] != "ceiling"]
        order = list(dict.fromkeys([*self.judges, *cat["judge"]]))
        out = pd.DataFrame({"judge": order})
        out["role"] = [next(iter(cat.loc[cat["judge"] == j, "role"]), "yours") for j in order]
        for c in self.categories:
            part = cat[cat["key"] == c.key].set_index("judge")
            if part.empty:
                continue
            for suffix, col in (("", "value"), (".low", "ci_low"), (".high", "ci_high")):
                out[c.key + suffix] = [part[col].get(j, float("nan")) for j in order]
        return out

    def to_json(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict (NaN stays NaN; the writers store it as null); ``batch`` only
        with ``--batch-api``, as in ``evalign judge --json``."""
        out = {
            "signature": dict(self.signature),
            "judges": list(self.judges),
            "categories": [{"key": c.key, "title": c.title} for c in self.categories],
            "sets": self.sets.to_dict("records"),
            "rows": self.rows.to_dict("records"),
            "runs": self.runs.to_dict("records"),
            "summary": self.summary().to_dict("records"),
            "skipped": dict(self.skipped),
            "headlines": dict(self.headlines),
            "notes": list(self.notes),
            "seconds": self.seconds,
        }
        if self.batch is not None:
            out["batch"] = dict(self.batch)
        return out


__all__ = ["BenchProfile"]
