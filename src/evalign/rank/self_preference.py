"""The self-preference guard: battles where a judge grades its own system.

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class SelfPreference:
    """Battles in which a judge model is one of the two systems.

    ``mask``: ``(n,)`` True for those battles (drop them as ``--skip-self`` does); ``pairs``: the
    (judge, system) name pairs that matched; ``warning``: one line for the leaderboard header, empty
    when nothing matched.
    """

    mask: np.ndarray = field(repr=False)
    pairs: tuple[tuple[str, str], ...]
    n_battles: int
    warning: str


def self_preference(battles: pd.DataFrame, judges: str | Sequence[str]) -> SelfPreference:
    """Find the battles where a judge is one of the ranked systems (self-enhancement bias: Zheng et
    al. 2023; the SemScore paper leaves GPT-4's own outputs out of its G-Eval ranking).

    ``judges``: judge model names or glob patterns. A system matches a judge when it matches, case
    insensitively (:func:`fnmatch.fnmatchcase` on lower-cased names), the judge's name or the last
    ``/``-separated component of it: the matching of evalign's ``--skip-self``.
    """
    names = [judges] if isinstance(judges, str) else list(judges)
    pats: list[tuple[str, str]] = []
    for j in names:
        if j:
            for p in {j.lower(), j.rstrip("/").rsplit("/", 1)[-1].lower()}:
                pats.append((j, p))
    systems = sorted(set(battles["system_a"].astype(str)) | set(battles["system_b"].astype(str)))
    hit: dict[str, list[str]] = {}
    for sname in systems:
        for j, p in pats:
            if fnmatch.fnmatchcase(sname.lower(), p):
                hit.setdefault(sname, [])
                if j not in hit[sname]:
                    hit[sname].append(j)
    matched = set(hit)
    mask = (battles["system_a"].astype(str).isin(matched) | battles["system_b"].astype(str).isin(matched)).to_numpy()
    pairs = tuple((j, sname) for sname in sorted(hit) for j in hit[sname])
    n = int(mask.sum())
    warning = ""
    if n:
        who = "; ".join(f"judge {j!r} is system {sname!r}" for j, sname in pairs)
        warning = (
            f"self-preference: {who}: {n} of {len(battles)} battles include the judge's own outputs "
            "(LLM judges favour their own answers); drop them with --skip-self"
        )
    return SelfPreference(mask, pairs, n, warning)
