"""Judge panels: several judges' verdicts pooled into one, with their agreement.

Conventions and references: :mod:`evalign.rank`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from evalign.errors import InputError
from evalign.meta.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha, majority_vote
from evalign.rank.battles import A_WINS, B_WINS, TIE, read_verdicts


@dataclass(frozen=True)
class PanelResult:
    """Several judges combined into one, with their agreement.

    Attributes:
        combined: the panel's verdicts (``"A"``, ``"B"``, ``"tie"``, ``"unparseable"``) for
            ``how="majority"``, or mean scores (NaN when no member scored) for ``how="mean"``.
        members: the member columns.
        fleiss_kappa: over the rows every member resolved (verdicts; NaN for scores).
        krippendorff_alpha: all rows, missing allowed (nominal for verdicts, interval for scores).
        cohen_kappa: ``{(m1, m2): kappa}`` for every pair of members (unweighted for verdicts,
            quadratic weights for scores), over the rows both resolved.
        mean_cohen_kappa: mean of the pairwise kappas that are defined.
        n_complete: rows every member resolved.
    """

    combined: np.ndarray = field(repr=False)
    members: tuple[str, ...]
    how: str
    fleiss_kappa: float
    krippendorff_alpha: float
    cohen_kappa: Mapping[tuple[str, str], float]
    mean_cohen_kappa: float
    n_complete: int


_PANEL_CODE = {A_WINS: 1.0, B_WINS: -1.0, TIE: 0.0}


def judge_panel(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    how: Literal["majority", "mean"] = "majority",
    tie_rule: Literal["tie", "unparseable", "first"] = "tie",
    strict: bool = False,
) -> PanelResult:
    """Combine several judges' columns into one panel judge and measure their agreement.

    ``how="majority"``: verdict columns (module conventions); each row's panel verdict is the
    plurality verdict among the members that resolved it (``strict=True``: more than half of them);
    without a winner ``tie_rule`` decides: ``"tie"``, ``"unparseable"``, or ``"first"`` (the first
    member's resolved verdict, in ``columns`` order). A row no member resolved is ``unparseable``.
    ``how="mean"``: numeric score columns, the mean of the present scores. Agreement uses
    :func:`evalign.meta.agreement.fleiss_kappa`, :func:`~evalign.meta.agreement.cohen_kappa` and
    :func:`~evalign.meta.agreement.krippendorff_alpha` (verdict codes A = +1, tie = 0, B = -1).
    """
    cols = list(columns)
    if len(cols) < 2:
        raise InputError("a panel needs at least two judge columns", field="columns")
    for c in cols:
        if c not in frame.columns:
            raise InputError("no such judge column", field=c)
    if how == "majority":
        mat = np.full((len(frame), len(cols)), np.nan)
        for j, c in enumerate(cols):
            code = read_verdicts(frame[c].to_numpy(), c)
            mat[:, j] = np.array([_PANEL_CODE.get(int(x), np.nan) for x in code])
        voted = majority_vote(mat, fallback=np.inf, strict=strict)
        out = np.empty(len(frame), dtype=object)
        names = {1.0: "A", -1.0: "B", 0.0: "tie"}
        for i, v in enumerate(voted):
            if np.isnan(v):
                out[i] = "unparseable"
            elif np.isinf(v):
                if tie_rule == "first":
                    present = mat[i][~np.isnan(mat[i])]
                    out[i] = names[float(present[0])]
                else:
                    out[i] = tie_rule
            else:
                out[i] = names[float(v)]
        level: Literal["nominal", "interval"] = "nominal"
        weights = None
        combined: np.ndarray = out
    elif how == "mean":
        mat = np.column_stack([pd.to_numeric(frame[c], errors="coerce").to_numpy(np.float64) for c in cols])
        present = ~np.isnan(mat)
        with np.errstate(invalid="ignore"):
            combined = np.where(present.any(axis=1), np.nansum(mat, axis=1) / present.sum(axis=1), np.nan)
        level, weights = "interval", "quadratic"
    else:
        raise InputError(f"unknown panel rule {how!r}; choose majority or mean", field="how")
    complete = ~np.isnan(mat).any(axis=1)
    fk = fleiss_kappa(mat[complete]) if how == "majority" and complete.any() else float("nan")
    ka = krippendorff_alpha(mat.T, level=level)
    pairs: dict[tuple[str, str], float] = {}
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            pairs[(cols[i], cols[j])] = cohen_kappa(mat[:, i], mat[:, j], weights=weights)  # type: ignore[arg-type]
    defined = [v for v in pairs.values() if math.isfinite(v)]
    return PanelResult(
        combined=combined,
        members=tuple(cols),
        how=how,
        fleiss_kappa=float(fk),
        krippendorff_alpha=float(ka),
        cohen_kappa=pairs,
        mean_cohen_kappa=float(np.mean(defined)) if defined else float("nan"),
        n_complete=int(complete.sum()),
    )
