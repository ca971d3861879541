"""Agreement between annotators and aggregation of several annotators' labels.

Conventions: ``ratings`` arrays are ``items x annotators`` (``(n, k)``), NaN = no label, except
:func:`krippendorff_alpha`, which takes ``annotators x items`` (``(k, n)``) like Krippendorff's
"reliability data" matrix and the ``krippendorff`` package.

References:
    Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and Psychological
    Measurement 20(1). Weighted kappa: Cohen, J. (1968), Psychological Bulletin 70(4).
    Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychological Bulletin 76(5).
    Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability. Annenberg School, U. Pennsylvania.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from evalign.errors import InputError
from evalign.meta.correlation import grouped_correlations

#: A/B/C/D grades as used by Self-Instruct's human evaluation (Wang et al., 2023): A best, D worst.
DEFAULT_LETTER_MAPPING: Mapping[str, float] = {"A": 1.0, "B": 2.0, "C": 3.0, "D": 4.0}


@dataclass(frozen=True)
class NumericGrades:
    """Letter grades turned into numbers.

    Attributes:
        values: one number per grade (NaN for a missing grade).
        higher_is_better: direction of ``values`` (False for the default A=1 ... D=4 mapping).
        mapping: the letter -> number mapping used.
    """

    values: np.ndarray = field(repr=False)
    higher_is_better: bool
    mapping: Mapping[str, float]


def _as_matrix(values: object, name: str, ndim: tuple[int, ...] = (2,)) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"labels must be numeric codes ({exc})", field=name) from None
    if arr.ndim not in ndim:
        raise InputError(f"expected a {' or '.join(f'{d}-D' for d in ndim)} array, got shape {arr.shape}", field=name)
    if np.isinf(arr).any():
        raise InputError("labels contain an infinite value; use NaN for a missing label", field=name)
    return arr


def majority_vote(labels: object, fallback: float = 0.0, strict: bool = False) -> np.ndarray:
    """Majority label of each item.

    Args:
        labels: ``(n, k)`` numeric labels (NaN = annotator gave none); a 1-D array is returned as is.
        fallback: label given when no single label wins (for preference codes +1/-1/0, the default 0
            means "tie").
        strict: False: the label with the most votes wins if no other label has as many (plurality).
            True: the label must have more than half of the item's votes.

    Returns:
        float array ``(n,)``: the winning label, ``fallback`` without a winner, NaN for items with no label.
    """
    arr = _as_matrix(labels, "labels", (1, 2))
    if arr.ndim == 1:
        return arr.copy()
    if arr.shape[1] == 1:  # one annotator: its label wins (NaN where it gave none)
        return arr[:, 0].copy()
    cols = np.ascontiguousarray(arr.T)  # (k, n): one annotator's labels a row
    present = ~np.isnan(cols)
    cats = np.unique(cols[present])
    out = np.full(arr.shape[0], np.nan)
    if cats.size == 0:
        return out
    counts = np.zeros((cats.size, arr.shape[0]), dtype=np.int32)  # (C, n), a row at a time (no n x k x C array)
    for j, c in enumerate(cats):
        for row in cols:
            counts[j] += row == c
    top = counts.max(axis=0)
    winners = (counts == top).sum(axis=0)
    votes = present.sum(axis=0)
    wins = (top > 0) & (winners == 1)
    if strict:
        wins &= 2 * top > votes
    best = np.zeros(arr.shape[0], dtype=np.intp)  # the winning category where there is one (a row at a time)
    for j in range(1, cats.size):
        best += j * (counts[j] == top)
    out[wins] = cats[best[wins]]
    out[(votes > 0) & ~wins] = fallback
    return out


def aggregate_ratings(
    ratings: object, how: Literal["mean", "median", "majority"] = "mean", fallback: float | None = None
) -> np.ndarray:
    """Combine the ratings of several annotators into one score per item.

    Args:
        ratings: ``(n, k)`` numbers (NaN = missing); a 1-D array is returned as is.
        how: "mean" or "median" over the present ratings, or "majority" (:func:`majority_vote`).
        fallback: for "majority", the value of items without a majority (None: NaN).

    Returns:
        float array ``(n,)``; NaN for items without any rating.
    """
    arr = _as_matrix(ratings, "ratings", (1, 2))
    if arr.ndim == 1:
        return arr.copy()
    if how == "majority":
        return majority_vote(arr, fallback=np.nan if fallback is None else fallback)
    if how not in ("mean", "median"):
        raise InputError(f"unknown aggregation {how!r}; choose mean, median or majority", field="how")
    votes = (~np.isnan(arr)).sum(axis=1)
    out = np.full(arr.shape[0], np.nan)
    rows = votes > 0
    if rows.any():
        fn = np.nanmean if how == "mean" else np.nanmedian
        out[rows] = fn(arr[rows], axis=1)
    return out


def letter_to_number(
    grades: Sequence[object] | np.ndarray,
    mapping: Mapping[str, float] | None = None,
    higher_is_better: bool | None = None,
) -> NumericGrades:
    """Turn letter grades into numbers (case and surrounding spaces ignored; None/NaN/"" -> NaN).

    Args:
        grades: letters, e.g. Self-Instruct's A/B/C/D ratings.
        mapping: letter -> number; default A=1, B=2, C=3, D=4 (lower is better).
        higher_is_better: direction of the numbers; default: False for the default mapping, else
            True when the first letter of ``mapping`` gets the highest number.

    Raises:
        InputError: for a letter that is not in the mapping (the message gives its position).
    """
    table = dict(DEFAULT_LETTER_MAPPING if mapping is None else mapping)
    norm = {str(k).strip().upper(): float(v) for k, v in table.items()}
    if higher_is_better is None:
        vals = list(norm.values())
        higher_is_better = bool(vals) and vals[0] == max(vals) and len(set(vals)) > 1
    out = np.empty(len(grades))
    for i, g in enumerate(grades):
        if g is None or (isinstance(g, float) and math.isnan(g)) or (isinstance(g, str) and not g.strip()):
            out[i] = np.nan
            continue
        key = str(g).strip().upper()
        if key not in norm:
            raise InputError(
                f"grade {g!r} at position {i} is not one of {', '.join(table)}", field="grades"
            )
        out[i] = norm[key]
    return NumericGrades(values=out, higher_is_better=bool(higher_is_better), mapping=table)


def _labels_1d(values: object, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"expected a 1-D array of labels, got shape {arr.shape}", field=name)
    return arr


def _missing(arr: np.ndarray) -> np.ndarray:
    if arr.dtype.kind in "fc":
        return np.isnan(arr)
    if arr.dtype.kind == "O":
        return np.array([x is None or (isinstance(x, float) and math.isnan(x)) for x in arr], dtype=bool)
    return np.zeros(arr.shape, dtype=bool)


def cohen_kappa(
    a: object,
    b: object,
    weights: Literal["linear", "quadratic"] | None = None,
    labels: Sequence[object] | None = None,
) -> float:
    """Cohen's kappa between two annotators (Cohen 1960; weighted: Cohen 1968).

    Items where either label is missing (NaN / None) are left out. With ``weights``, the disagreement
    between two labels is the distance of their positions in the ordered label list (``labels``, or
    the sorted labels present), as in ``sklearn.metrics.cohen_kappa_score``.

    Returns:
        kappa in [-1, 1]; NaN when the expected disagreement is zero (e.g. one label only) or no item.
    """
    x, y = _labels_1d(a, "a"), _labels_1d(b, "b")
    if x.shape != y.shape:
        raise InputError(f"annotators label different numbers of items ({x.size} vs {y.size})", field="b")
    keep = ~(_missing(x) | _missing(y))
    x, y = x[keep], y[keep]
    if x.size == 0:
        return float("nan")
    cats = np.asarray(labels) if labels is not None else np.unique(np.concatenate([x, y]))
    xi = np.searchsorted(cats, x) if labels is None else _index_of(cats, x, "a")
    yi = np.searchsorted(cats, y) if labels is None else _index_of(cats, y, "b")
    q = len(cats)
    obs = np.zeros((q, q))
    np.add.at(obs, (xi, yi), 1.0)
    return float(kappa_from_counts(obs, disagreement_weights(q, weights)))


def disagreement_weights(q: int, weights: Literal["linear", "quadratic"] | None = None) -> np.ndarray:
    """The ``(q, q)`` disagreement weights of Cohen's (weighted) kappa between ``q`` ordered
    categories: 0/1 (``None``), ``|i - j|`` (``linear``) or ``(i - j)^2`` (``quadratic``)."""
    idx = np.arange(q)
    if weights is None:
        return (idx[:, None] != idx[None, :]).astype(np.float64)
    if weights == "linear":
        return np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
    if weights == "quadratic":
        return ((idx[:, None] - idx[None, :]) ** 2).astype(np.float64)
    raise InputError(f"unknown weights {weights!r}; choose None, 'linear' or 'quadratic'", field="weights")


def kappa_from_counts(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Cohen's (weighted) kappa of contingency tables ``counts`` ``(..., q, q)`` (rows: the first
    rater's category, columns: the second's; counts may be bootstrap weights) with disagreement
    ``weights`` ``(q, q)``: ``1 - sum(w * observed) / sum(w * expected)``, the expected table being
    the product of the margins. NaN where the expected disagreement is zero."""
    obs = np.asarray(counts, dtype=np.float64)
    total = obs.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        exp = obs.sum(axis=-1)[..., :, None] * obs.sum(axis=-2)[..., None, :] / total[..., None, None]
        denom = np.sum(weights * exp, axis=(-2, -1))
        out = 1.0 - np.sum(weights * obs, axis=(-2, -1)) / denom
    return np.where(denom > 0, out, np.nan)


def _index_of(cats: np.ndarray, values: np.ndarray, name: str) -> np.ndarray:
    pos = {c: i for i, c in enumerate(cats.tolist())}
    try:
        return np.array([pos[v] for v in values.tolist()], dtype=np.intp)
    except KeyError as exc:
        raise InputError(f"label {exc.args[0]!r} is not in labels", field=name) from None


def fleiss_kappa(ratings: object) -> float:
    """Fleiss' kappa for ``(n items, k raters)`` category labels (Fleiss 1971).

    Every item must have the same number (>= 2) of labels; items with no label at all are left out.
    Labels are category codes (any numbers; NaN = missing).

    Returns:
        kappa (<= 1); NaN when all labels are one category.
    """
    arr = _as_matrix(ratings, "ratings")
    present = ~np.isnan(arr)
    votes = present.sum(axis=1)
    arr, votes = arr[votes > 0], votes[votes > 0]
    if arr.shape[0] == 0:
        return float("nan")
    m = int(votes[0])
    if np.any(votes != m) or m < 2:
        raise InputError(
            "Fleiss' kappa needs the same number (>= 2) of labels for every item; "
            "use krippendorff_alpha for missing labels",
            field="ratings",
        )
    cats = np.unique(arr[~np.isnan(arr)])
    table = (arr[:, :, None] == cats[None, None, :]).sum(axis=1).astype(np.float64)  # (n, C)
    n = table.shape[0]
    p_j = table.sum(axis=0) / (n * m)
    p_i = (np.sum(table * table, axis=1) - m) / (m * (m - 1))
    p_bar = float(p_i.mean())
    p_e = float(np.sum(p_j * p_j))
    return (p_bar - p_e) / (1.0 - p_e) if p_e < 1.0 else float("nan")


def krippendorff_alpha(
    ratings: object, level: Literal["nominal", "ordinal", "interval", "ratio"] = "ordinal"
) -> float:
    """Krippendorff's alpha (Krippendorff 2011) for ``(k annotators, n items)`` ratings, NaN = missing.

    Items with fewer than two ratings are not pairable and do not count. Distances: nominal (0/1),
    ordinal (cumulative frequencies of the ranks between the two values), interval (squared difference),
    ratio (squared relative difference), as in the ``krippendorff`` package.

    Returns:
        alpha (1 = perfect agreement, 0 = chance); NaN when the expected disagreement is zero.
    """
    arr = _as_matrix(ratings, "ratings")
    levels = ("nominal", "ordinal", "interval", "ratio")
    if level not in levels:
        raise InputError(f"unknown level {level!r}; choose one of {', '.join(levels)}", field="level")
    values = np.unique(arr[~np.isnan(arr)])
    if values.size == 0:
        return float("nan")
    counts = (arr.T[:, :, None] == values[None, None, :]).sum(axis=1).astype(np.float64)  # (n, V)
    m_u = counts.sum(axis=1)
    counts = counts[m_u >= 2]
    m_u = m_u[m_u >= 2]
    if counts.shape[0] == 0:
        return float("nan")
    o = np.einsum("uc,uk->ck", counts / (m_u - 1)[:, None], counts) - np.diag(np.sum(counts / (m_u - 1)[:, None], axis=0))
    n_c = o.sum(axis=0)
    n = n_c.sum()
    e = (np.outer(n_c, n_c) - np.diag(n_c)) / (n - 1)
    v = values
    if level == "nominal":
        dist = (v[:, None] != v[None, :]).astype(np.float64)
    elif level == "interval":
        dist = (v[:, None] - v[None, :]) ** 2
    elif level == "ratio":
        with np.errstate(invalid="ignore", divide="ignore"):
            dist = np.nan_to_num(((v[:, None] - v[None, :]) / (v[:, None] + v[None, :])) ** 2)
    else:
        cum = np.cumsum(n_c)
        i, j = np.minimum.outer(np.arange(v.size), np.arange(v.size)), np.maximum.outer(
            np.arange(v.size), np.arange(v.size)
        )
        between = cum[j] - cum[i] + n_c[i]  # sum of n_g for g from i to j
        dist = (between - (n_c[i] + n_c[j]) / 2.0) ** 2
    de = float(np.sum(e * dist))
    return 1.0 - float(np.sum(o * dist)) / de if de > 0 else float("nan")


def mean_pairwise_kendall(ratings: object, variant: Literal["b", "c"] = "b") -> float:
    """Mean Kendall tau between every two annotators over the items both rated.

    Args:
        ratings: ``(n items, k annotators)`` numbers, NaN = missing.
        variant: Kendall tau-b (default) or tau-c, as in ``scipy.stats.kendalltau``.

    Returns:
        mean tau over annotator pairs with a defined tau (>= 2 shared items, not constant); NaN if none.
    """
    arr = _as_matrix(ratings, "ratings")
    k = arr.shape[1]
    if k < 2:
        raise InputError("need at least two annotators (columns)", field="ratings")
    i, j = np.triu_indices(k, 1)
    x, y = arr[:, i].T, arr[:, j].T  # (pairs, n)
    both = ~(np.isnan(x) | np.isnan(y))
    x = np.where(both, x, np.nan)
    y = np.where(both, y, np.nan)
    vals, _ = grouped_correlations(x, y, "kendall", variant)
    ok = ~np.isnan(vals)
    return float(vals[ok].mean()) if ok.any() else float("nan")
