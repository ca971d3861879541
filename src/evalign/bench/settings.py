"""The settings of one bench, as one frozen object passed by keyword."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalign.backends.batch import BatchSettings
from evalign.bench.judges import BENCH_DECODING
from evalign.errors import UsageError
from evalign.judges.option_rules import CONSTRAIN_MODES, check_constrain
from evalign.judges.prompts import sampling_problem
from evalign.meta.resampling import Resampling
from evalign.rank.panel import PanelSettings

#: which published judges stand beside yours: the suite's choice per set, every one the set ships, none
PUBLISHED = ("suite", "all", "none")
#: whether each judge's answers are constrained to its template's shape (``Judge.constrain``)
CONSTRAIN = CONSTRAIN_MODES
#: the smallest set or category a bench ranks (its samples are small by design: 20 units a set)
MIN_GROUP = 5


@dataclass(frozen=True)
class BenchSettings:
    """What a bench runs and how.

    ``per_set``: units sampled per set (pairs, or graded responses; None = every unit: ``--full``);
    ``seed``: the sample's seed; ``sets``: set or category keys of the suite (empty: its default sets;
    ``("all",)``: every set); ``templates``: set / category / kind key -> template, over the suite's;
    ``suite``: a suite file (None: the one that ships); ``data_dir``: where the sets that do not ship
    are read; ``published``: one of :data:`PUBLISHED`; ``decoding``: the decoding every judge gets
    unless its spec says otherwise (temperature 0 and seed 0 by default, so two runs agree);
    ``constrain``: each generative judge's answers constrained to its template's shape (``auto``: where
    the backend can, ``on``: or stop, ``off``), unless its spec says otherwise; ``panels``: panel name
    -> member judges (majority verdicts, mean grades); ``panel_rules``: panel name -> its rule where the
    config gives one (:class:`~evalign.rank.panel.PanelSettings`: the mapping form ``{members, rule, tie,
    min}``; the panel gets a confidence from the votes); ``resampling``: intervals and tests;
    ``min_group_size``: the smallest set or category ranked.
    """

    per_set: int | None = 20
    seed: int = 0
    sets: tuple[str, ...] = ()
    templates: Mapping[str, str] = field(default_factory=dict)
    suite: Path | None = None
    data_dir: Path | None = None
    published: str = "suite"
    decoding: Mapping[str, Any] = field(default_factory=lambda: dict(BENCH_DECODING))
    constrain: str = "auto"
    panels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    panel_rules: Mapping[str, PanelSettings] = field(default_factory=dict)
    resampling: Resampling = field(default_factory=Resampling)
    min_group_size: int = MIN_GROUP
    #: ``--batch-api``: each judge's calls of a set sent through its provider's batch API (None: one request each)
    batch: BatchSettings | None = None

    def __post_init__(self) -> None:
        if self.per_set is not None and (isinstance(self.per_set, bool) or self.per_set < 1):
            raise UsageError(f"--per-set must be >= 1, got {self.per_set!r}")
        if self.published not in PUBLISHED:
            raise UsageError(f"--published must be one of {', '.join(PUBLISHED)}, got {self.published!r}")
        check_constrain(self.constrain)
        if self.min_group_size < 1:
            raise UsageError(f"the smallest group ranked must be >= 1, got {self.min_group_size}")
        for key, value in self.decoding.items():  # the rules of `evalign judge`'s --temperature, --max-tokens, ...
            problem = sampling_problem(str(key), value)
            if problem:
                raise UsageError(f"--{str(key).replace('_', '-')} {problem}")
        for name, members in self.panels.items():
            if len(members) < 2:
                raise UsageError(f"panel {name}: name at least two judges, got {', '.join(members) or 'none'}")
            twice = sorted({m for m in members if list(members).count(m) > 1})
            if twice:
                raise UsageError(f"panel {name}: judge {twice[0]} named twice (a panel counts each judge once)")
        unknown = sorted(set(self.panel_rules) - set(self.panels))
        if unknown:
            raise UsageError(f"panel {unknown[0]}: a rule without members")


__all__ = ["CONSTRAIN", "MIN_GROUP", "PUBLISHED", "BenchSettings"]
