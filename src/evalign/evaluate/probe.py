"""Bias probes of a pair judge: judge the original pairs and each probe's perturbed copy in one cached,
resumable run, then count per probe how the verdicts moved (:func:`evalign.meta.probes.flip_stats`).

One spec in (:class:`ProbeSettings`, the judge and its backend), one result out (:class:`ProbeCard`:
the report card, judge x probe, and the judged rows). The probes are data
(:mod:`evalign.judges.perturb`); the run is :func:`evalign.judges.runner.arun_judge` over one table
holding the original rows and every perturbed row (column ``probe``: ``original`` or the probe's name),
so every call is cached as it returns and a second run of the same command makes no call twice.

How each kind of probe is read (the judge's verdict column ``J``, resolved over both orders when the
judge shows both):

* ``swap`` (position): a judge run in both orders has both already: ``J.ab`` (A shown first) against
  ``J.ba`` (B shown first); a single-order judge is run on the swapped pairs. Target: B (moved first).
* response and prompt edits: ``J`` of the original row against ``J`` of its perturbed copy; target: the
  side the probe perturbed (``probe.target``).
* ``self`` (self-enhancement): the pairs where exactly one system is the judge (``self_systems`` glob
  patterns; default the judge model's name): the judge's verdicts against the humans' (``human``
  column: +1 / -1 / 0 or A / B / tie) on those pairs, or without humans its share of own wins against
  one half. ``n/a`` (said so) when no system is the judge.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.cache import Cache
from evalign.errors import InputError, UsageError
from evalign.judges.base import SWAP_VERDICT
from evalign.judges.option_rules import option_problem
from evalign.judges.perturb import (
    CUT_COLUMN,
    MAX_ADDED_CHARS,
    NOTE_COLUMN,
    PROBE_COLUMN,
    TARGET_COLUMN,
    Probe,
    list_probes,
    load_probe,
    perturb_table,
    with_notes,
)
from evalign.judges.runner import arun_judge, skip_patterns
from evalign.meta.probes import FlipStats, OwnWins, flip_stats, own_wins

#: the ``probe`` value of the original rows
ORIGINAL = "original"
#: the built-in probes, in the order of the report card
DEFAULT_PROBES = ("position", "verbosity", "authority", "bandwagon", "distraction", "refinement",
                  "self_enhancement")


@dataclass(frozen=True)
class ProbeSettings:
    """What to probe and how.

    Attributes:
        probes: probe names or files (:func:`evalign.judges.perturb.load_probe`).
        seed: seed of every perturbation's draws (target side, texts).
        confidence: level of the exact intervals.
        self_systems: glob patterns of the judge's own system names (``self_enhancement``); empty: the
            judge model's name and its last path component.
        human: a human preference column of the pair table (+1 / -1 / 0, or A / B / tie) that the
            judge's verdicts on its own pairs are compared with; None: own wins against one half.
    """

    probes: tuple[str, ...] = DEFAULT_PROBES
    seed: int = 0
    confidence: float = 0.95
    self_systems: tuple[str, ...] = ()
    human: str | None = None

    def __post_init__(self) -> None:
        if not self.probes:
            raise UsageError("give at least one probe (--probe NAME; built-in: " + ", ".join(DEFAULT_PROBES) + ")")
        problem = option_problem("confidence", self.confidence)  # the rule every command's --confidence follows
        if problem:
            raise UsageError(f"--confidence {problem}")


@dataclass(frozen=True)
class ProbeResult:
    """One probe's row of the report card: ``status`` ``measured`` or ``n/a`` (``note`` says why);
    ``flips`` (verdicts before -> after, or humans -> judge for self-enhancement), or ``own`` (the
    judge's own wins without humans); ``compared``: what was compared with what."""

    probe: Probe
    status: str
    compared: str
    flips: FlipStats | None = None
    own: OwnWins | None = None
    note: str = ""


@dataclass(frozen=True)
class ProbeCard:
    """The report card of one judge: ``judge`` (its column), ``signature``, ``model``, the source and
    number of pairs, one :class:`ProbeResult` per probe, the run's call counts, the seed, and the judged
    rows (``table``: original and perturbed rows with the judge's columns)."""

    judge: str
    signature: str
    model: str
    source: str
    n_pairs: int
    results: tuple[ProbeResult, ...]
    calls: Mapping[str, Any]
    seed: int
    confidence: float
    table: pd.DataFrame = field(repr=False)

    def frame(self) -> pd.DataFrame:
        """The report card as a table: one row per probe (judge x probe)."""
        rows = []
        for r in self.results:
            f = r.flips
            row: dict[str, Any] = {"judge": self.judge, "probe": r.probe.name, "bias": r.probe.bias,
                                   "status": r.status}
            if f is not None:
                row.update(n=f.n, changed=f.changed, changed_low=f.changed_low, changed_high=f.changed_high,
                           toward=f.toward, away=f.away, net_shift=f.net_shift, p_value=f.p_value,
                           robustness=f.robustness)
            elif r.own is not None:
                row.update(n=r.own.n, own_win_share=r.own.share, own_low=r.own.low, own_high=r.own.high,
                           p_value=r.own.p_value)
            row["compared"] = r.compared
            row["note"] = r.note
            rows.append(row)
        return pd.DataFrame(rows)

    def to_json(self) -> dict[str, Any]:
        """The card, JSON-ready (without the judged rows)."""
        return {
            "judge": self.judge, "signature": self.signature, "model": self.model, "source": self.source,
            "n_pairs": self.n_pairs, "seed": self.seed, "confidence": self.confidence, "calls": dict(self.calls),
            "probes": [{"probe": r.probe.name, "tag": r.probe.tag(), "bias": r.probe.bias, "edit": r.probe.edit,
                        "source": r.probe.source, "description": r.probe.description, "status": r.status,
                        "compared": r.compared, "note": r.note,
                        "flips": r.flips.as_dict() if r.flips is not None else None,
                        "own": r.own.as_dict() if r.own is not None else None} for r in self.results],
        }  # fmt: skip


def probe_table(table: pd.DataFrame, probes: Sequence[Probe], *, seed: int, both_orders: bool) -> pd.DataFrame:
    """The rows to judge: the original pairs (``probe`` = ``original``) and each probe's perturbed copy
    (a ``swap`` probe only for a single-order judge; ``self`` adds none)."""
    parts = [table.assign(**{PROBE_COLUMN: ORIGINAL, TARGET_COLUMN: None, NOTE_COLUMN: None, CUT_COLUMN: False})]
    for p in probes:
        if p.edit == "self" or (p.edit == "swap" and both_orders):
            continue
        parts.append(perturb_table(table, p, seed))
    return pd.concat(parts, ignore_index=True)


def _verdicts(values: Sequence[Any]) -> list[Any]:
    return [v if isinstance(v, str) else None for v in values]


def _human_verdict(v: Any) -> str | None:
    """A human preference cell as A / B / tie (None when missing or not one of them)."""
    if isinstance(v, str):
        return {"a": "A", "b": "B", "tie": "tie"}.get(v.strip().lower())
    if isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v)):
        return "A" if v > 0 else ("B" if v < 0 else "tie")
    return None


def own_sides(table: pd.DataFrame, patterns: Sequence[str]) -> list[str | None]:
    """Per pair: the side (``"A"`` / ``"B"``) whose system matches one of ``patterns`` (glob, case
    insensitive), None when neither or both do."""
    pats = [p.lower() for p in patterns if p]

    def mine(v: Any) -> bool:
        return isinstance(v, str) and any(fnmatch.fnmatchcase(v.lower(), p) for p in pats)

    sa = table["system_a"].tolist() if "system_a" in table.columns else [None] * len(table)
    sb = table["system_b"].tolist() if "system_b" in table.columns else [None] * len(table)
    return ["A" if mine(a) and not mine(b) else ("B" if mine(b) and not mine(a) else None)
            for a, b in zip(sa, sb, strict=True)]


def _self_result(probe: Probe, original: pd.DataFrame, col: str, patterns: Sequence[str],
                 settings: ProbeSettings) -> ProbeResult:
    own = own_sides(original, patterns)
    keep = [i for i, s in enumerate(own) if s is not None]
    shown = ", ".join(patterns) or "(no judge model name)"
    if not keep:
        return ProbeResult(probe, "n/a", "", note=f"no pair has the judge as one of its systems (patterns: {shown})")
    judged = _verdicts(original[col].iloc[keep].tolist())
    target = [own[i] for i in keep]
    if settings.human is not None:
        human = [_human_verdict(v) for v in original[settings.human].iloc[keep].tolist()]
        flips = flip_stats(human, judged, target, confidence=settings.confidence)
        return ProbeResult(probe, "measured", f"humans ({settings.human}) -> judge, toward = the judge's own answer",
                           flips=flips, note=f"{len(keep)} pairs with the judge's own answer ({shown})")
    return ProbeResult(probe, "measured", "the judge's own wins among its decisive verdicts, against 1/2",
                       own=own_wins(judged, target, confidence=settings.confidence),
                       note=f"{len(keep)} pairs with the judge's own answer ({shown}); no human column to compare")


def _result(probe: Probe, judged: pd.DataFrame, col: str, both_orders: bool, settings: ProbeSettings,
            patterns: Sequence[str]) -> ProbeResult:
    """One probe's row of the card from the judged rows."""
    original = judged[judged[PROBE_COLUMN] == ORIGINAL].reset_index(drop=True)
    if probe.edit == "self":
        return _self_result(probe, original, col, patterns, settings)
    if probe.edit == "swap" and both_orders:
        before, after = _verdicts(original[f"{col}.ab"].tolist()), _verdicts(original[f"{col}.ba"].tolist())
        target = ["B"] * len(original)
        compared = "A shown first -> B shown first (both orders of the original run), toward = the response shown first"
    else:
        mine = judged[judged[PROBE_COLUMN] == probe.name].reset_index(drop=True)
        before, after = _verdicts(original[col].tolist()), _verdicts(mine[col].tolist())
        if probe.edit == "swap":
            after = [SWAP_VERDICT.get(v) if v is not None else None for v in after]
            compared = "original order -> swapped order (single-order judge), toward = the response shown first"
        else:
            compared = "original -> perturbed, toward = the perturbed response"
        target = mine[TARGET_COLUMN].tolist()
    return ProbeResult(probe, "measured", compared, flips=flip_stats(before, after, target,
                                                                     confidence=settings.confidence),
                       note=cut_note(judged, probe.name))


def cut_note(rows: pd.DataFrame, probe: str) -> str:
    """What the size bound did to the probe's perturbed rows (``""`` when it cut none)."""
    if CUT_COLUMN not in rows.columns:
        return ""
    cut = rows.loc[rows[PROBE_COLUMN] == probe, CUT_COLUMN].fillna(False).astype(bool)
    if not cut.any():
        return ""
    return (f"{int(cut.sum())} of {len(cut)} perturbations cut at {MAX_ADDED_CHARS:,} added characters "
            "(the probe asks for more)")


async def arun_probes(table: pd.DataFrame, judge: Any, backend: Any, settings: ProbeSettings = ProbeSettings(), *,
                      cache: Cache | None = None, partial_path: str | Path | None = None,
                      on_progress: Callable[[dict[str, int]], None] | None = None) -> ProbeCard:
    """Async form of :func:`run_probes`."""
    if not getattr(judge, "pairwise", False):
        raise UsageError(f"bias probes need a pairwise judge (--mode pairwise), not '{judge.name}'")
    if settings.human is not None and settings.human not in table.columns:
        raise InputError("no such human preference column", file=str(table.attrs.get("source", "<table>")),
                         field=settings.human)
    probes = [load_probe(p) for p in settings.probes]
    names = [p.name for p in probes]
    if len(set(names)) < len(names):
        raise UsageError(f"probe '{next(n for n in names if names.count(n) > 1)}' given twice")
    both = bool(getattr(judge, "both_orders", False))
    rows = probe_table(table, probes, seed=settings.seed, both_orders=both)
    rows.attrs.update(table.attrs)
    noted = with_notes(judge, {p.name: p for p in probes if p.edit == "note"})
    run = await arun_judge(rows, noted, backend, cache=cache, partial_path=partial_path, on_progress=on_progress)
    identity = backend.identity()
    model = str(getattr(backend, "display_model", None) or identity.get("model") or "")
    patterns = list(dict.fromkeys(list(settings.self_systems) or skip_patterns(True, model)))
    results = tuple(_result(p, run.table, run.column, both, settings, patterns) for p in probes)
    return ProbeCard(judge=run.column, signature=run.signature, model=model,
                     source=str(table.attrs.get("source", "<table>")), n_pairs=len(table), results=results,
                     calls=asdict(run.summary.calls),
                     seed=settings.seed, confidence=settings.confidence, table=run.table)


def run_probes(table: pd.DataFrame, judge: Any, backend: Any, settings: ProbeSettings = ProbeSettings(), *,
               cache: Cache | None = None, partial_path: str | Path | None = None,
               on_progress: Callable[[dict[str, int]], None] | None = None) -> ProbeCard:
    """Probe the pair ``judge`` (on ``backend``) on the pair ``table``: judge the original pairs and each
    probe's perturbed copy (cached, resumable: see the module doc) and count per probe how the verdicts
    moved. ``partial_path``: a JSONL log of finished calls; ``on_progress(counts)`` as in
    :func:`evalign.judges.runner.run_judge`."""
    import asyncio

    async def main() -> ProbeCard:
        try:
            return await arun_probes(table, judge, backend, settings, cache=cache, partial_path=partial_path,
                                     on_progress=on_progress)
        finally:
            await backend.aclose()

    return asyncio.run(main())


__all__ = ["DEFAULT_PROBES", "ORIGINAL", "ProbeCard", "ProbeResult", "ProbeSettings", "list_probes", "own_sides",
           "probe_table", "run_probes"]
