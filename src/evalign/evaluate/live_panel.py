"""A live panel of judges (``evalign judge --panel-member NAME=SPEC ...``): the members called in order, each
one in one **wave** (one call of the concurrent judge runner over the items still open), a member not called
on an item once the remaining members' votes cannot change the item's verdict under the rule
(:func:`evalign.rank.panel.still_open`; ``call_all``: every member on every item), then the verdicts combined
by the rule (:func:`evalign.rank.panel.combine_votes`) with the panel's confidence from the votes.

The output table has, per member, its columns as ``evalign judge`` writes them on the items it was called on;
on the others its verdict is empty and ``M.status`` is ``skipped`` with ``M.reason`` ``not called`` (a judge
that did not judge the item: missing for it in ``evalign meta``, not wrong); the panel's ``NAME`` verdict,
``NAME.confidence``, ``NAME.confidence_source``, ``NAME.votes`` (members that gave a verdict) and
``NAME.status``. The summary gives per member the items sent, calls made and from the cache, failures, tokens
and cost, and the calls saved by early stopping (the calls the member would have made on the items it was
not sent, at its own calls per item).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends.spec import BackendSpec, split_spec
from evalign.errors import UsageError
from evalign.judges.usage import Price, parse_price
from evalign.rank.panel import PanelSettings, combine_votes, still_open, verdict_names, verdict_votes

#: a member's ``KEY=VALUE`` options that are not the backend's
MEMBER_OPTIONS = ("template", "price")
NOT_CALLED = "not called"


@dataclass(frozen=True)
class PanelMember:
    """One member of a live panel: its ``name`` (its output column), ``backend`` spec, its own
    ``template`` (None: the run's) and ``price`` (None: the run's price file, or none)."""

    name: str
    backend: BackendSpec
    template: str | None = None
    price: Price | None = None


def parse_member(text: str, *, option: str = "--panel-member") -> PanelMember:
    """``NAME=KIND:MODEL[@URL][,KEY=VALUE...]`` (the commas belong to the spec): backend options
    (:data:`evalign.backends.spec.BACKEND_OPTIONS`) and ``template=NAME``, ``price=IN/OUT``."""
    name, eq, spec = text.partition("=")
    if not eq or not name.strip() or ":" not in spec:
        raise UsageError(f"{option} takes NAME=KIND:MODEL[@URL][,KEY=VALUE...], got {text!r}")
    backend, other = split_spec(spec, what=f"{option} {name.strip()}")
    bad = [k for k in other if k not in MEMBER_OPTIONS]
    if bad:
        raise UsageError(f"{option} {name.strip()}: unknown option {bad[0]!r} (a member takes the backend's options "
                         f"and {', '.join(MEMBER_OPTIONS)})")
    price = parse_price(str(other["price"])) if "price" in other else None
    template = str(other["template"]) if "template" in other else None
    return PanelMember(name.strip(), backend, template, price)


def check_members(members: Sequence[PanelMember], settings: PanelSettings) -> None:
    """At least two members, names unique, a rule that decides verdicts."""
    if len(members) < 2:
        raise UsageError("--panel-member: a panel needs at least two members")
    names = [m.name for m in members]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"--panel-member: {twice[0]} named twice")
    if settings.rule == "weighted" and settings.weights is None:
        raise UsageError("--panel-rule weighted needs the members' weights: --panel-calibration FILE (labelled items "
                         "with the members' columns)")
    if settings.rule in ("mean", "median"):
        raise UsageError(f"--panel-rule {settings.rule} averages grades: a live panel of pairwise judges takes "
                         "majority, weighted or dawid-skene")


def _merge(combined: pd.DataFrame, judged: pd.DataFrame, column: str, rows: np.ndarray) -> None:
    """The member's columns of ``judged`` (the rows ``rows`` of ``combined``) into ``combined``; the rows it
    was not called on: verdict empty, status ``skipped``, reason ``not called``."""
    for c in judged.columns:
        if c == column or c.startswith(f"{column}."):
            full = np.full(len(combined), None, dtype=object)
            full[rows] = judged[c].to_numpy(dtype=object)
            combined[c] = full
    status = np.full(len(combined), "skipped", dtype=object)
    reason = np.full(len(combined), NOT_CALLED, dtype=object)
    if f"{column}.status" in judged.columns:
        status[rows] = judged[f"{column}.status"].to_numpy(dtype=object)
        reason[rows] = judged[f"{column}.reason"].to_numpy(dtype=object) if f"{column}.reason" in judged.columns \
            else None
    combined[f"{column}.status"] = status
    combined[f"{column}.reason"] = reason
    if column not in combined.columns:
        combined[column] = None


def _wave_report(name: str, sent: int, n: int, summary: Any) -> dict[str, Any]:
    """One member's figures: items sent, calls new / cached / failed, tokens, cost, calls saved."""
    if summary is None:
        return {"member": name, "sent": 0, "not_called": n, "calls": 0, "cached": 0, "failed": 0,
                "prompt_tokens": 0, "completion_tokens": 0, "cost": None, "calls_saved": None}
    d = summary if isinstance(summary, Mapping) else summary.as_dict()
    calls, usage = d["calls"], d.get("usage") or {}
    made = int(calls["new"]) + int(calls["cached"])
    per_item = made / sent if sent else float("nan")
    return {"member": name, "sent": sent, "not_called": n - sent, "calls": int(calls["new"]),
            "cached": int(calls["cached"]), "failed": int(calls["failed"]),
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
            "cost": usage.get("cost"),
            "calls_saved": None if math.isnan(per_item) else round(per_item * (n - sent))}


def member_weights(settings: PanelSettings, members: Sequence[str]) -> np.ndarray:
    """Each member's vote weight in calling order: the ``weighted`` rule's, else ``1`` each."""
    if settings.rule == "weighted" and settings.weights:
        return np.array([settings.weights[m] for m in members], dtype=float)
    return np.ones(len(members))


def open_rows(votes: np.ndarray, j: int, members: Sequence[str], settings: PanelSettings, *,
              call_all: bool = False) -> np.ndarray:
    """The rows member ``j`` (0-based, in calling order) is called on, given ``votes`` ``(n, k)`` of the
    members called before it (NaN: not called or no verdict): every row with ``call_all`` or a rule that
    needs every vote, else the rows whose verdict the members from ``j`` on can still change
    (:func:`evalign.rank.panel.still_open`)."""
    n = votes.shape[0]
    if call_all or settings.rule not in ("majority", "weighted"):
        return np.arange(n)
    weights = member_weights(settings, members)
    return np.flatnonzero(still_open(votes[:, :j], weights[j:], settings, members=list(members[:j])))


def early_stopping_calls(votes: Any, settings: PanelSettings, members: Sequence[str]) -> np.ndarray:
    """Which member a live panel would call on which item: ``(n, k)`` booleans, given every member's vote
    ``votes`` ``(n, k)`` (+1 A, -1 B, 0 tie, NaN none; a panel whose members all judged every item). It
    replays :func:`run_live_panel`'s calling order exactly, so ``1 - calls.mean()`` is the share of member
    calls early stopping saves on these items."""
    v = np.asarray(votes, dtype=float)
    live = np.full(v.shape, np.nan)
    called = np.zeros(v.shape, dtype=bool)
    for j in range(v.shape[1]):
        rows = open_rows(live, j, members, settings)
        called[rows, j] = True
        live[rows, j] = v[rows, j]
    return called


def run_live_panel(table: pd.DataFrame, members: Sequence[str], settings: PanelSettings,
                   run_wave: Callable[[int, pd.DataFrame], Any], *, call_all: bool = False,
                   column: str = "panel") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the panel ``members`` (in calling order) on the pair ``table``: ``run_wave(j, rows)`` judges the
    ``rows`` with member ``j`` in one call of the concurrent runner and returns its
    :class:`~evalign.judges.runner.JudgeRun` (``table`` with the member's column, ``summary``). Returns the
    combined table and the summary (``members``: each member's figures; ``items``, ``calls``,
    ``calls_saved``, ``cost``; the rule; how many items got no verdict)."""
    n, k = len(table), len(members)
    combined = table.reset_index(drop=True).copy()
    votes = np.full((n, k), np.nan)
    p_a = np.full((n, k), np.nan)
    reports = []
    for j, name in enumerate(members):
        rows = open_rows(votes, j, members, settings, call_all=call_all)
        if not len(rows):
            _merge(combined, pd.DataFrame(), name, rows)
            reports.append(_wave_report(name, 0, n, None))
            continue
        run = run_wave(j, combined.iloc[rows][list(table.columns)].reset_index(drop=True))
        _merge(combined, run.table, name, rows)
        votes[rows, j] = verdict_votes(run.table, [name])[:, 0]
        if f"{name}.p_a" in run.table.columns:
            p_a[rows, j] = pd.to_numeric(run.table[f"{name}.p_a"], errors="coerce").to_numpy(float)
        reports.append(_wave_report(name, len(rows), n, run.summary))
    if settings.soft and np.isnan(p_a[~np.isnan(votes)]).any():
        raise UsageError("--panel-soft needs every member's J.p_a (P(A better)): ask each member for logprobs "
                         "(--top-logprobs K) on a backend that gives them")
    res = combine_votes(votes, settings, members=list(members), p_a=p_a if settings.soft else None)
    combined[column] = verdict_names(res.verdict)
    combined[f"{column}.confidence"] = res.confidence
    combined[f"{column}.confidence_source"] = [None if math.isnan(c) else res.source for c in res.confidence]
    combined[f"{column}.votes"] = res.votes
    combined[f"{column}.status"] = "scored"
    costs = [r["cost"] for r in reports if r["cost"] is not None]
    summary = {
        "panel": column, "members": reports, "rule": settings.rule, "tie": settings.tie, "min": settings.min_members,
        "early_stopping": not call_all and settings.rule in ("majority", "weighted"), "items": n,
        "calls": sum(r["calls"] for r in reports), "cached": sum(r["cached"] for r in reports),
        "calls_saved": sum(r["calls_saved"] or 0 for r in reports),
        "member_items_saved": sum(r["not_called"] for r in reports), "cost": sum(costs) if costs else None,
        "no_verdict": int(np.isnan(res.verdict).sum()), "below_min": res.n_below_min,
        "no_plurality": res.n_no_plurality, "confidence_source": res.source,
        "distribution": {v: int(np.sum(combined[column] == v)) for v in ("A", "B", "tie", "unparseable")},
    }
    return combined, summary


__all__ = ["MEMBER_OPTIONS", "NOT_CALLED", "PanelMember", "check_members", "early_stopping_calls", "member_weights",
           "open_rows", "parse_member", "run_live_panel"]
