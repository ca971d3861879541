"""The run config's ``meta.selective`` section: what ``evalign meta --selective`` does, in a run::

    meta:
      selective:                  # or `selective: true` (risk 0.15, delta 0.1, each judge alone)
        risk: 0.15                # --risk
        delta: 0.1                # --delta
        cascade: [judge:small, judge:large]   # --cascade, cheap first
        holdout: 0.5              # --holdout
        seed: 0                   # the holdout's draw
        save_calibration: cal.json            # --save-calibration (relative to the config's folder)

Checked when the config is read (a bad value names the file, line and field); the evaluation's
result holds the selective table (``evaluation.json``), and ``save_calibration`` gets the file
``evalign escalate`` and ``evalign judge --cascade`` read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalign.errors import EvalignError
from evalign.run.config_checks import check_keys, list_of, mapping_of, path_of, typed

#: the keys of ``meta.selective``
SELECTIVE_KEYS = ("risk", "delta", "cascade", "holdout", "seed", "save_calibration")
DEFAULTS = {"risk": 0.15, "delta": 0.1, "cascade": [], "holdout": None, "seed": 0, "save_calibration": None}


def parse_selective(v: Any, where: Any, parent: Any, base: Path | None) -> dict[str, Any]:
    """``meta.selective`` checked (``true`` for the defaults, else a mapping of :data:`SELECTIVE_KEYS`):
    the dict the run builds its :class:`~evalign.evaluate.selective.SelectiveRequest` from."""
    if v is True:
        return dict(DEFAULTS)
    m = mapping_of(v, where, parent, "selective")
    check_keys(m, SELECTIVE_KEYS, where)
    out = dict(DEFAULTS)
    for k in ("risk", "delta", "holdout"):
        out[k] = typed(m, k, (int, float), where, DEFAULTS[k])
    out["seed"] = typed(m, "seed", (int,), where, 0, none_ok=False)
    cascade = list_of(m.get("cascade") or [], where, m, "cascade")
    if not all(isinstance(c, str) for c in cascade):
        raise where.error(m, "cascade", "must be a list of judge columns, cheap first")
    out["cascade"] = list(cascade)
    save = typed(m, "save_calibration", (str,), where)
    out["save_calibration"] = None if save is None else str(path_of(save, base or Path.cwd()))
    try:
        request(out)
    except EvalignError as e:
        key = next((k for k in ("risk", "delta", "holdout", "cascade") if f"'{_field(k)}'" in str(e)), None)
        raise where.error(m, key if key in m else None, getattr(e, "reason", str(e))) from None
    return out


def _field(key: str) -> str:
    return {"risk": "alpha"}.get(key, key)


def request(conf: Mapping[str, Any] | None, confidence: float = 0.95) -> Any:
    """The :class:`~evalign.evaluate.selective.SelectiveRequest` of a checked section (None: none)."""
    if conf is None:
        return None
    from evalign.evaluate.selective import SelectiveRequest
    from evalign.meta.selective import SelectiveSettings

    return SelectiveRequest(SelectiveSettings(alpha=float(conf["risk"]), delta=float(conf["delta"])),
                            cascade=tuple(conf.get("cascade") or ()), holdout=conf.get("holdout"),
                            seed=int(conf.get("seed") or 0), confidence=confidence)


def as_dict(spec_request: Any, conf: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The request as the config's section (every key, defaults filled in; None: not asked)."""
    if spec_request is None:
        return None
    s = spec_request.settings
    return {"risk": s.alpha, "delta": s.delta, "cascade": list(spec_request.cascade),
            "holdout": spec_request.holdout, "seed": spec_request.seed,
            "save_calibration": (conf or {}).get("save_calibration")}


def save(result: Any, conf: Mapping[str, Any] | None, source: str | Path | None) -> Path | None:
    """Write the calibration of ``result`` (``meta.selective.save_calibration``), with each judge's spec
    where ``evalign judge`` wrote it beside the data file ``source``; the path written, or None."""
    path = (conf or {}).get("save_calibration")
    sel = getattr(result, "selective", None)
    if not path or sel is None:
        return None
    from evalign.evaluate.cascade import with_specs
    from evalign.io import write_json_atomic

    record = with_specs(sel.record, source)
    write_json_atomic(Path(path), {**record, "calibrated_on": str(source) if source else None})
    return Path(path)


__all__ = ["SELECTIVE_KEYS", "as_dict", "parse_selective", "request", "save"]
