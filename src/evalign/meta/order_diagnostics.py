"""Diagnostics of a pairwise judge that saw every pair in both orders (A first, then B first).

Pure functions over per-pair arrays; :func:`order_diagnostics` returns one frozen
:class:`OrderDiagnostics`. Conventions (those of LLMBar, Zeng et al. 2024, ICLR, whose
``LLMEvaluator/evaluate.py`` reports the first five figures as ``correct_False``,
``correct_True``, ``correct_average``, ``correct_both`` and ``equal``):

* Verdicts are given in the ORIGINAL orientation for both orders (as ``evalign judge`` writes
  ``J.ab`` / ``J.ba``): ``"A"`` = response A better, ``"B"`` = response B better, ``"tie"``; None,
  NaN, ``""`` or ``"unparseable"`` = no verdict. Codes +1 / -1 / 0 are read as A / B / tie.
* Gold labels are the pair tables' codes: +1 = A better, -1 = B better, 0 = tie, NaN = no label.
  A verdict is correct when it equals the label (a judge tie is right only on a gold tie); a
  missing verdict is wrong. Accuracies are over the labelled pairs.
* ``accuracy_original``: correct in the A-first order; ``accuracy_swapped``: in the B-first order;
  ``accuracy_mean``: their mean (LLMBar's reported "average" accuracy); ``accuracy_both``: correct
  in both orders.
* ``position_agreement``: share of pairs whose two verdicts are equal. By default two missing
  verdicts count as equal, as upstream LLMBar counts them (``None == None``);
  ``nulls_agree=False`` counts a pair with a missing verdict as disagreeing. A missing verdict and
  a verdict never agree. Over all pairs, labelled or not.
* ``prefers_first``: among the single-order verdicts that pick a side (A or B; ties and missing
  verdicts left out), the share that picked the response shown first (A in the A-first order, B
  in the B-first order). 0.5 = no position preference; 1 = always the first shown.
* ``prefers_longer``: among the single-order verdicts that pick a side on pairs whose responses
  differ in length, the share that picked the longer response. 0.5 = no length preference.
  Both orders are pooled (each verdict counts once), so a judge that always picks the first shown
  scores 0.5 here and 1 in ``prefers_first``.

A figure with an empty denominator is NaN. ``n`` is the number of pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evalign.io.text import text_lengths as text_lengths  # the lengths order_diagnostics takes

#: verdict texts meaning "no verdict"
_NO_VERDICT = {"", "unparseable", "none", "nan"}
_WORDS = {"a": 1.0, "b": -1.0, "tie": 0.0}


@dataclass(frozen=True)
class OrderDiagnostics:
    """Accuracy per order, agreement between the orders and the position / length preferences of a
    pairwise judge run in both orders (fractions in [0, 1]; NaN when undefined; see the module doc)."""

    accuracy_original: float
    accuracy_swapped: float
    accuracy_mean: float
    accuracy_both: float
    position_agreement: float
    prefers_first: float
    prefers_longer: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (NaN stays NaN)."""
        return asdict(self)


#: the figures of :class:`OrderDiagnostics` (all but ``n``), in order: the columns a trust table
#: gives a judge run in both orders
FIELDS = ("accuracy_original", "accuracy_swapped", "accuracy_mean", "accuracy_both", "position_agreement",
          "prefers_first", "prefers_longer")


def _code_of(v: Any) -> float:
    """The code of one verdict (see :func:`as_codes`)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return math.nan
    if isinstance(v, str):
        key = v.strip().lower()
        if key in _NO_VERDICT:
            return math.nan
        if key not in _WORDS:
            raise ValueError(f"verdict must be A, B, tie or no verdict, got {v!r:.40}")
        return _WORDS[key]
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise ValueError(f"verdict must be A, B, tie or a code +1/-1/0, got {v!r:.40}")
    return float(np.sign(float(v)))


def as_codes(verdicts: Sequence[Any]) -> np.ndarray:
    """Verdicts as codes: ``"A"`` / +1 -> 1.0, ``"B"`` / -1 -> -1.0, ``"tie"`` / 0 -> 0.0, no verdict
    (None, NaN, ``""``, ``"unparseable"``) -> NaN. Raises ValueError on anything else (the first bad
    verdict in order). Each distinct (type, value) is coded once."""
    memo: dict[tuple[type, Any], float] = {}
    out = np.empty(len(verdicts))
    for i, v in enumerate(verdicts):
        try:
            key = (type(v), v)  # the type keeps True apart from 1 and 1.0
            code = memo.get(key)
        except TypeError:  # unhashable: coded (and refused) on its own
            key, code = None, None
        if code is None:
            code = _code_of(v)
            if key is not None:
                memo[key] = code
        out[i] = code
    return out


def _share(hits: np.ndarray, mask: np.ndarray) -> float:
    n = int(mask.sum())
    return float(hits[mask].sum() / n) if n else float("nan")


def accuracy(verdicts: Sequence[Any] | np.ndarray, gold: Sequence[float] | np.ndarray) -> float:
    """Share of labelled pairs whose verdict equals the gold label (no verdict = wrong)."""
    v = _codes(verdicts)
    g = np.asarray(gold, dtype=float)
    _same_length(v, g)
    labelled = np.isfinite(g)
    return _share(v == g, labelled)


def position_agreement(ab: Sequence[Any] | np.ndarray, ba: Sequence[Any] | np.ndarray, *,
                       nulls_agree: bool = True) -> float:
    """Share of pairs whose two verdicts are equal; two missing verdicts agree when ``nulls_agree``
    (LLMBar's count) and disagree otherwise."""
    a, b = _codes(ab), _codes(ba)
    _same_length(a, b)
    both_missing = np.isnan(a) & np.isnan(b)
    agree = (a == b) | (both_missing & nulls_agree)
    return _share(agree, np.ones(a.size, dtype=bool))


def prefers_first(ab: Sequence[Any] | np.ndarray, ba: Sequence[Any] | np.ndarray) -> float:
    """Share of the decided single-order verdicts (A or B) that picked the response shown first."""
    a, b = _codes(ab), _codes(ba)
    _same_length(a, b)
    picks = np.concatenate([a == 1.0, b == -1.0])
    decided = np.concatenate([np.abs(a) == 1.0, np.abs(b) == 1.0])
    return _share(picks, decided)


def prefers_longer(verdicts: Sequence[Sequence[Any] | np.ndarray], length_a: Sequence[float] | np.ndarray,
                   length_b: Sequence[float] | np.ndarray) -> float:
    """Share of the decided verdicts (A or B) on pairs of different lengths that picked the longer
    response. ``verdicts``: one or more verdict arrays over the same pairs (e.g. ``[ab, ba]``),
    pooled; ``length_a`` / ``length_b``: the responses' lengths (NaN = unknown, left out)."""
    la = np.asarray(length_a, dtype=float)
    lb = np.asarray(length_b, dtype=float)
    _same_length(la, lb)
    longer = np.sign(la - lb)
    picks: list[np.ndarray] = []
    decided: list[np.ndarray] = []
    for vs in verdicts:
        v = _codes(vs)
        _same_length(v, la)
        ok = (np.abs(v) == 1.0) & np.isfinite(longer) & (longer != 0)
        picks.append(v == longer)
        decided.append(ok)
    if not picks:
        return float("nan")
    return _share(np.concatenate(picks), np.concatenate(decided))


def order_diagnostics(
    ab: Sequence[Any] | np.ndarray,
    ba: Sequence[Any] | np.ndarray,
    gold: Sequence[float] | np.ndarray,
    *,
    length_a: Sequence[float] | np.ndarray | None = None,
    length_b: Sequence[float] | np.ndarray | None = None,
    nulls_agree: bool = True,
) -> OrderDiagnostics:
    """All diagnostics of a judge run in both orders (see the module doc).

    ``ab`` / ``ba``: the verdicts in the A-first and B-first orders, both in the original
    orientation; ``gold``: +1 / -1 / 0 / NaN per pair; ``length_a`` / ``length_b``: response lengths
    (e.g. :func:`~evalign.io.text.text_lengths`), without them ``prefers_longer`` is NaN.
    """
    a, b = _codes(ab), _codes(ba)
    g = np.asarray(gold, dtype=float)
    _same_length(a, b)
    _same_length(a, g)
    labelled = np.isfinite(g)
    ok_a, ok_b = a == g, b == g
    acc_a = _share(ok_a, labelled)
    acc_b = _share(ok_b, labelled)
    if length_a is not None and length_b is not None:
        longer = prefers_longer([a, b], length_a, length_b)
    else:
        longer = float("nan")
    return OrderDiagnostics(
        accuracy_original=acc_a,
        accuracy_swapped=acc_b,
        accuracy_mean=(acc_a + acc_b) / 2,
        accuracy_both=_share(ok_a & ok_b, labelled),
        position_agreement=position_agreement(a, b, nulls_agree=nulls_agree),
        prefers_first=prefers_first(a, b),
        prefers_longer=longer,
        n=int(a.size),
    )


def both_order_judges(columns: Sequence[str] | Any) -> list[str]:
    """The judge columns ``J`` of a table that also has ``J.ab`` and ``J.ba`` (a pairwise judge run
    in both orders, by ``evalign judge`` or shipped with a dataset), in column order."""
    cols = [str(c) for c in columns]
    present = set(cols)
    return [c for c in cols if f"{c}.ab" in present and f"{c}.ba" in present]


def table_order_diagnostics(
    table: Any,
    name: str,
    gold: str | Sequence[float] | np.ndarray,
    *,
    unit: str = "chars",
    nulls_agree: bool = True,
) -> OrderDiagnostics:
    """:func:`order_diagnostics` of the judge column ``name`` of a pair table (a DataFrame with
    ``name.ab``, ``name.ba``, ``response_a``, ``response_b``, as ``evalign judge`` writes it and
    the LLMBar adapter ships it). ``gold``: a column of the table or an array of codes. Rows whose
    ``name.status`` is ``skipped`` are left out (the judge did not see them)."""
    for c in (f"{name}.ab", f"{name}.ba"):
        if c not in table.columns:
            raise KeyError(f"no column {c!r}: the judge '{name}' was not run in both orders")
    g = np.asarray(table[gold] if isinstance(gold, str) else gold, dtype=float)
    keep = np.ones(len(table), dtype=bool)
    status = f"{name}.status"
    if status in table.columns:
        keep = (table[status].astype(str).str.lower() != "skipped").to_numpy()
    la = lb = None
    if "response_a" in table.columns and "response_b" in table.columns:
        la = text_lengths(table["response_a"].tolist(), unit)[keep]
        lb = text_lengths(table["response_b"].tolist(), unit)[keep]
    ab = as_codes(table[f"{name}.ab"].tolist())[keep]
    ba = as_codes(table[f"{name}.ba"].tolist())[keep]
    return order_diagnostics(ab, ba, g[keep], length_a=la, length_b=lb, nulls_agree=nulls_agree)


def _codes(v: Sequence[Any] | np.ndarray) -> np.ndarray:
    if isinstance(v, np.ndarray) and v.dtype.kind == "f":
        return np.sign(v)
    return as_codes(list(v))


def _same_length(x: np.ndarray, y: np.ndarray) -> None:
    if x.shape != y.shape:
        raise ValueError(f"arrays of different lengths: {x.size} and {y.size}")
