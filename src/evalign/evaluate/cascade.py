"""Running a calibrated cascade of judges (``evalign judge --cascade CAL.json``): each judge is called
only on the items the earlier ones left, so a cascade costs what it decides.

The calibration file (``evalign meta --selective --save-calibration``) names each stage's judge
column, threshold and signature; where the verdicts it was calibrated on were made by ``evalign
judge``, it also holds the stage's **spec** (``{"judge": mode, "options": {...}, "backend": a
:class:`~evalign.backends.BackendSpec` dict}``: the judge and the backend to rebuild, never a key,
URLs without user info) and the judge's **signature** (template with its content hash, model,
decoding). Before a stage makes a call, the judge built from its spec must have the recorded
signature (same template text, model and settings): another judge or template is refused.

A stage that abstains (no threshold held the guarantee) is not called. After each stage, the items
whose confidence reaches its threshold are decided; the rest go to the next stage, and after the
last one to people. The split is that of :func:`evalign.evaluate.escalate.escalate` on the table
with every stage's columns (a stage's columns are empty on the items it did not see), so ``evalign
escalate`` on that table gives the same decided items and the same people's file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends import BackendSpec
from evalign.errors import EvalignError, InputError
from evalign.evaluate.escalate import escalate, judge_confidence
from evalign.judges.spec import get_judge

#: a stage's report: judge column, items sent, calls made and from the cache, items decided, or why skipped
StageReport = dict[str, Any]


def stage_specs(cal: Mapping[str, Any], source: str = "<calibration>") -> list[dict[str, Any]]:
    """Each stage's spec, checked before any call (``source`` names the calibration file in every
    error, with the field): a calibration whose judges carry no spec (verdicts not made by ``evalign
    judge``, e.g. a published set) cannot be run, only applied with ``evalign escalate``; a spec
    whose judge mode, options or backend is not one evalign builds (a hand-edited file) is refused."""
    specs = []
    for k, j in enumerate(cal["judges"]):
        spec = j.get("spec")
        if spec is None:
            raise InputError(f"no judge spec for {j['column']}: its verdicts were not made by evalign judge (the spec is "
                             "read from the OUT.summary.json it writes beside its output); apply the calibration to "
                             "verdicts you have with evalign escalate", file=source, field=f"judges[{k}].spec")
        _check_spec(spec, f"judges[{k}].spec", source)
        specs.append(spec)
    return specs


def _check_spec(spec: Any, where: str, source: str) -> None:
    """One stage's spec: ``{"judge": mode, "options": {...}, "backend": {...}}`` whose judge and
    backend evalign builds; an :class:`~evalign.errors.InputError` naming ``source`` and the field."""
    if not isinstance(spec, dict):
        raise InputError(f"must be a mapping (judge, options, backend), got {type(spec).__name__}", file=source,
                         field=where)
    for key, kind, what in (("judge", str, "a judge mode (text)"), ("options", dict, "a mapping of the judge's options"),
                            ("backend", dict, "a mapping (kind, model, url, options)")):
        if not isinstance(spec.get(key), kind):
            got = "nothing" if spec.get(key) is None else f"{type(spec[key]).__name__} {spec[key]!r}"
            raise InputError(f"must be {what}, got {got}", file=source, field=f"{where}.{key}")
    try:
        get_judge(spec["judge"], **spec["options"])
    except (EvalignError, TypeError, ValueError) as e:
        raise InputError(str(e), file=source, field=f"{where}.judge") from None
    backend = spec["backend"]
    try:
        BackendSpec.from_dict(backend)
    except KeyError as e:
        raise InputError(f"needs {e.args[0]!r}", file=source, field=f"{where}.backend") from None
    except (EvalignError, TypeError, ValueError) as e:
        raise InputError(str(e), file=source, field=f"{where}.backend") from None


def judge_summaries(source: str | Path) -> dict[str, dict[str, Any]]:
    """The summaries ``evalign judge`` wrote beside the verdict table ``source`` (``OUT.summary.json``:
    its own first, then the others in its folder, for judges run one after another): judge column ->
    ``{"spec", "signature"}``, for those that carry a spec."""
    path = Path(source)
    if not path.is_file():
        return {}
    own = Path(f"{path}.summary.json")
    found: dict[str, dict[str, Any]] = {}
    for f in [own, *sorted(p for p in path.parent.glob("*.summary.json") if p != own)]:
        try:
            s = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(s, dict) and isinstance(s.get("column"), str) and isinstance(s.get("spec"), dict):
            found.setdefault(s["column"], {"spec": s["spec"], "signature": s.get("signature")})
    return found


def with_specs(record: Mapping[str, Any], source: str | Path | None) -> dict[str, Any]:
    """The calibration ``record`` with each judge's spec and signature from the summaries beside
    ``source`` (:func:`judge_summaries`; judges without one are left as they are)."""
    out = dict(record)
    found = judge_summaries(source) if source else {}
    judges = []
    for j in record["judges"]:
        j = dict(j)
        got = found.get(j["column"])
        if got is not None:
            j["spec"] = got["spec"]
            if isinstance(got["signature"], str):
                j["signature"] = {**j["signature"], "judge": got["signature"]}
        judges.append(j)
    out["judges"] = judges
    return out


def signature_parts(signature: str) -> set[str]:
    """The ``key:value`` parts of a signature string, without the package versions."""
    return {p for p in signature.split("|")[1:] if not p.startswith("evalign:")}


def check_signature(judge: Any, identity: Mapping[str, Any], reference: bool, entry: Mapping[str, Any],
                    source: str = "<calibration>") -> None:
    """Refuse a stage whose judge (built from its spec, on this backend) differs from the one
    calibrated: its name, template (content hash), model or settings (the recorded signature)."""
    recorded = entry["signature"].get("judge")
    if not isinstance(recorded, str):
        return  # the calibration names no signature of the judge: its column and confidence source are checked
    now = str(judge.signature(identity, reference))
    if now.split("|")[0] != recorded.split("|")[0]:
        raise InputError(f"the judge is {now.split('|')[0]!r}, the calibration's {recorded.split('|')[0]!r}: verdicts "
                         "of another judge are refused", file=source, field=entry["column"])
    differ = sorted(signature_parts(now) - signature_parts(recorded))
    if differ:
        raise InputError(f"the judge differs from the one calibrated ({'; '.join(differ)} not in its signature): "
                         "another judge, template or model is refused", file=source, field=entry["column"])


def _merge(combined: pd.DataFrame, judged: pd.DataFrame, column: str, rows: np.ndarray) -> None:
    """Copy the judge's columns of ``judged`` (the rows ``rows`` of ``combined``) into ``combined``."""
    for c in judged.columns:
        if c == column or c.startswith(f"{column}."):
            full = np.full(len(combined), None, dtype=object)
            full[rows] = judged[c].to_numpy(dtype=object)
            combined[c] = full


def run_cascade(cal: Mapping[str, Any], table: pd.DataFrame, run_stage: Callable[[int, Any, dict[str, Any],
                pd.DataFrame], Any], *, audit: float = 0.0, seed: int = 0, source: str = "<table>",
                cal_source: str = "<calibration>") -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Run the cascade ``cal`` on ``table``: stage by stage, ``run_stage(k, judge, spec, rows)``
    judges the ``rows`` still undecided (returns a :class:`~evalign.judges.runner.JudgeRun`); the
    decided items, the people's file and a summary (that of :func:`escalate`, with ``stages``: per
    stage the items sent, calls made and from the cache, items decided)."""
    specs = stage_specs(cal, cal_source)
    pairs = "response_a" in table.columns and "response_b" in table.columns
    combined = table.copy()
    left = np.ones(len(table), dtype=bool)
    stages: list[StageReport] = []
    for k, (entry, spec) in enumerate(zip(cal["judges"], specs, strict=True)):
        col = entry["column"]
        judge = get_judge(spec["judge"], **spec["options"])
        if judge.column != col:
            raise InputError(f"the spec makes column {judge.column!r}, the calibration's is {col!r}", file=cal_source,
                             field=f"judges[{k}].spec")
        if judge.pairwise != pairs:
            raise InputError(f"{col} judges {'pairs' if judge.pairwise else 'single responses'}; this is "
                             f"{'a pair' if pairs else 'an item'} table", file=source, field=col)
        rows = np.flatnonzero(left)
        if entry["threshold"] is None or not len(rows):
            combined[col] = None
            combined[f"{col}.confidence"] = np.nan
            why = "abstains (no threshold held the guarantee): not called" if entry["threshold"] is None else \
                "no item left: not called"
            stages.append({"judge": col, "sent": 0, "calls": 0, "cached": 0, "decided": 0, "note": why})
            continue
        run = run_stage(k, judge, spec, table.iloc[rows].reset_index(drop=True))
        _merge(combined, run.table, col, rows)
        conf = judge_confidence(combined, col, source=source).confidence
        with np.errstate(invalid="ignore"):
            takes = left & np.isfinite(conf) & (conf >= float(entry["threshold"]))
        left &= ~takes
        calls = run.summary.calls
        stages.append({"judge": col, "sent": len(rows), "calls": int(calls.new), "cached": int(calls.cached),
                       "decided": int(takes.sum()), "note": None})
    decided, rest, summary = escalate(dict(cal), combined, audit=audit, seed=seed, source=source)
    summary["stages"] = stages
    return decided, rest, summary


__all__ = ["check_signature", "judge_summaries", "run_cascade", "signature_parts", "stage_specs", "with_specs"]
