"""Applying a selective calibration (``evalign escalate``): the verdicts a judge, or the first judge
of a cascade sure enough, may give, and the items left for people.

The calibration file (``evalign meta --selective --save-calibration CAL.json``, see
:func:`evalign.evaluate.selective.calibration_record`) names each judge's column, threshold and
signature (the column and where its confidence came from). A verdict table must carry each
judge's verdict column and its confidence (``J.confidence``, or ``J.p_a`` when the calibration
used it; in an item table of graded judges ``J.confidence`` or ``J.p``, the grade as the verdict); a
table whose ``J.confidence_source`` differs from the calibrated one holds verdicts of another judge
and is refused. The people's file is a pair table (what ``read_pairs`` reads) or an item table (what
``read_items`` reads), both what ``evalign annotate`` reads.

The items left to people are the hard ones, not a random sample: an estimate from them alone (the
Alt-Test, PPI) would be biased. ``audit`` adds a seeded random share of the *decided* items to the
people's file, marked ``audit = true``, so that the judges' verdicts can be checked where they were
trusted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.evaluate.columns import verdict_codes
from evalign.evaluate.selective import JudgeConfidence, item_confidence, pair_confidence
from evalign.meta.selective import apply_thresholds

KIND = "evalign selective calibration"
#: the pair-table columns the people's file keeps (what ``read_pairs`` and ``evalign annotate`` read)
PAIR_FIELDS = ("id", "turn", "instruction", "input", "reference", "system_a", "system_b", "response_a", "response_b",
               "messages_a", "messages_b", "task")
#: the item-table columns the people's file keeps (graded judges: what ``read_items`` and ``evalign annotate`` read)
ITEM_FIELDS = ("id", "turn", "system", "instruction", "input", "reference", "response", "messages", "task")
_CODE = {1.0: "A", -1.0: "B", 0.0: "tie"}


def read_calibration(path: str | Path) -> dict[str, Any]:
    """A calibration file, checked: its kind, risk, delta and judges (column, threshold or null)."""
    name = str(path)
    try:
        cal = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such file", file=name) from None
    except IsADirectoryError:
        raise InputError("is a folder, not a calibration file", file=name) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start})", file=name) from None
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON ({e.msg})", file=name, line=e.lineno) from None
    if not isinstance(cal, dict) or cal.get("kind") != KIND:
        raise InputError(f"not a calibration file (kind must be {KIND!r}; write one with evalign meta --selective "
                         "--save-calibration)", file=name, field="kind")
    for f in ("risk", "delta"):
        if not isinstance(cal.get(f), (int, float)) or not 0 < cal[f] < 1:
            raise InputError("must be a number in (0, 1)", file=name, field=f)
    judges = cal.get("judges")
    if not isinstance(judges, list) or not judges:
        raise InputError("must list the calibrated judges", file=name, field="judges")
    for k, j in enumerate(judges):
        if not isinstance(j, dict) or not isinstance(j.get("column"), str) or not isinstance(j.get("signature"), dict):
            raise InputError("each judge needs a column and a signature", file=name, field=f"judges[{k}]")
        t = j.get("threshold")
        if t is not None and (not isinstance(t, (int, float)) or not 0 <= t <= 1):
            raise InputError(f"must be a number in [0, 1] or null, got {t!r}", file=name, field=f"judges[{k}].threshold")
    return cal


def is_pair_table(table: pd.DataFrame) -> bool:
    """Whether ``table`` is a pair table (``response_a`` and ``response_b``), else an item table."""
    return "response_a" in table.columns and "response_b" in table.columns


def judge_confidence(table: pd.DataFrame, column: str, *, source: str = "<table>") -> JudgeConfidence:
    """The confidence of the judge ``column`` in ``table`` (a pair table: ``J.confidence`` or ``J.p_a``;
    an item table: ``J.confidence`` or ``J.p``), refused with the reason when it has none."""
    if is_pair_table(table):
        codes, _ = verdict_codes(table, column)
        c = pair_confidence(table, column, codes, source=source)
    else:
        c = item_confidence(table, column, source=source)
    if isinstance(c, str):
        raise InputError(c, file=source, field=column)
    return c


def escalate(cal: dict[str, Any], table: pd.DataFrame, *, audit: float = 0.0, seed: int = 0,
             source: str = "<table>") -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Split the verdict ``table`` (a pair table, or an item table of graded judges) by the
    calibration ``cal``: the decided rows (with ``decided_by``, ``verdict`` (A / B / tie, or the grade)
    and ``confidence``), the rows left for people (the pair or item fields, ``reason``: ``no judge sure
    enough`` or ``audit``, and ``audit``), and a summary (counts and shares per judge). A row with no
    confidence for a judge (NaN: that judge did not see it) is never decided by it."""
    if not 0 <= audit < 1:
        raise InputError(f"must lie in [0, 1), got {audit}", field="audit")
    judges = cal["judges"]
    pairs = is_pair_table(table)
    confs, verdicts = [], []
    for j in judges:
        col = j["column"]
        if col not in table.columns:
            raise InputError(f"no column {col!r}: the calibration is of {', '.join(x['column'] for x in judges)}; "
                             "verdicts of another judge are refused", file=source, field=col)
        c = judge_confidence(table, col, source=source)
        want = j["signature"].get("confidence_source")
        if want is not None and c.source != want and np.isfinite(c.confidence).any():
            raise InputError(f"its confidence comes from {c.source!r}, the calibration's from {want!r}: verdicts of "
                             "another judge or confidence are refused", file=source, field=f"{col}.confidence_source")
        confs.append(c.confidence)
        verdicts.append(c.verdict)
    thresholds = [math.inf if j["threshold"] is None else float(j["threshold"]) for j in judges]
    who = apply_thresholds(confs, thresholds)
    n = len(table)
    decided = table[who >= 0].copy()
    idx = np.flatnonzero(who >= 0)
    decided["decided_by"] = [judges[who[i]]["column"] for i in idx]
    decided["verdict"] = [_shown(float(verdicts[who[i]][i]), pairs) for i in idx]
    decided["confidence"] = [float(confs[who[i]][i]) for i in idx]
    keep = [c for c in (PAIR_FIELDS if pairs else ITEM_FIELDS) if c in table.columns]
    rest = table.loc[who < 0, keep].copy()
    rest["reason"] = "no judge sure enough"
    rest["audit"] = False
    n_audit = 0
    if audit > 0 and len(idx):
        rng = np.random.default_rng(seed)
        n_audit = max(1, round(audit * len(idx)))
        picked = np.sort(rng.choice(idx, size=min(n_audit, len(idx)), replace=False))
        extra = table.iloc[picked][keep].copy()
        extra["reason"] = "audit: a random decided item, to check the verdicts given"
        extra["audit"] = True
        rest = pd.concat([rest, extra], ignore_index=True)
        n_audit = len(picked)
    summary = {
        "n": n, "risk": cal["risk"], "delta": cal["delta"], "table": "pairs" if pairs else "items",
        "decided": {j["column"]: int(np.sum(who == k)) for k, j in enumerate(judges)},
        "to_people": int(np.sum(who < 0)), "audit": n_audit, "audit_share": audit, "seed": seed,
        "coverage": float(np.mean(who >= 0)) if n else 0.0,
    }
    return decided.reset_index(drop=True), rest.reset_index(drop=True), summary


def _shown(verdict: float, pairs: bool) -> Any:
    """A verdict code as written: A / B / tie for pairs, the grade for items (``unparseable``: none)."""
    if not np.isfinite(verdict):
        return "unparseable"
    return _CODE.get(verdict, "unparseable") if pairs else verdict


__all__ = ["ITEM_FIELDS", "KIND", "PAIR_FIELDS", "escalate", "is_pair_table", "judge_confidence", "read_calibration"]
