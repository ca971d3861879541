"""Judge panels: several judges' verdicts combined into one by an explicit rule, with a confidence from
the votes and the members' agreement. The one place that combines verdicts (``leaderboard --panel``,
``meta --panel``, bench ``panels``, the live ``judge --panel-member``).

**Votes** are an ``(n, k)`` float matrix, one column per member in calling order, NaN where a member
gave no verdict (failed, unparseable, not called): pairwise verdicts are coded A = +1, B = -1, tie = 0;
grades are the grades. A member that gives no verdict never fails the panel: it only has no vote.

**Rules** (:data:`RULES`):

* ``majority``: the verdict with the most votes; without one (a plurality shared) the ``tie`` rule
  decides: ``tie`` (the verdict "tie", code 0), ``abstain`` (no verdict; ``unparseable`` is its old
  name, kept as an alias) or ``first`` (the first member's verdict that was given, in member order).
  Confidence: the share of the votes behind the verdict (``votes``).
* ``weighted``: the same, each member's vote weighted by the log-odds of its accuracy on labelled
  calibration items, ``log((C - 1) a / (1 - a))`` over C classes with ``a = (correct + 1) / (n + 2)``
  (add-one smoothing), clipped at 0 (a member no better than chance has no say) -- never fitted on the
  items it decides (:func:`calibration_weights`). An item whose voters all weigh 0 gets no verdict. Confidence: the share of the weight behind the verdict
  (``weighted_votes``).
* ``mean`` / ``median``: of the grades given. Confidence: the share of members whose grade is the
  combined grade rounded (``grade_votes``).
* ``dawid-skene``: each member's confusion matrix and the class priors estimated by EM without labels
  (Dawid and Skene 1979, initialised by the majority vote's shares as in crowd-kit); the verdict is the
  arg max of the item's posterior, its confidence the posterior (``posterior``).

``min_members`` (``--panel-min K``): an item on which fewer than K members gave a verdict gets none,
and is counted (:attr:`Combined.n_below_min`). ``soft`` (``--panel-soft``): where every member that
voted gives ``J.p_a``, the confidence is the mean probability the members give the panel's verdict
(``p_a`` for A, ``1 - p_a`` for B; a tie has no probability: NaN) (``mean_p``).

A coarse confidence (three votes: 1/3, 2/3, 1) is a guarantee only at those steps: a selective
threshold (``meta --selective``) can only keep all unanimous verdicts or all two-to-one ones.

**Early stopping** (:func:`still_open`): members are called in order, and a member is not called on an
item once the remaining members' votes cannot change its verdict under the rule.

Everything is vectorised over items (numpy): 10^6 items x 5 members combine in well under a second
(``benchmarks/panel_speed.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from evalign.errors import InputError, UsageError
from evalign.judges.option_rules import PANEL_RULE_NAMES, PANEL_TIE_NAMES, SAMPLES_VOTES, panel_option_problem
from evalign.meta.agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha
from evalign.rank.battles import A_WINS, B_WINS, TIE, read_verdicts

#: the panel rules (``--panel-rule``)
RULES = PANEL_RULE_NAMES
#: what a majority without a plurality gives (``--panel-tie``); ``unparseable`` is the API alias of ``abstain``
TIES = PANEL_TIE_NAMES
#: rules whose verdicts are categories (the others average grades)
VOTING_RULES = ("majority", "weighted", "dawid-skene")
#: ``J.confidence_source`` of a panel's confidence, by rule (``mean_p`` with ``soft``)
CONFIDENCE_SOURCES = {"majority": "votes", "weighted": "weighted_votes", "mean": "grade_votes",
                      "median": "grade_votes", "dawid-skene": "posterior"}
#: ``J.confidence_source`` of one judge's samples' vote share (``judge --samples N``)
SAMPLES_SOURCE = SAMPLES_VOTES

_PANEL_CODE = {A_WINS: 1.0, B_WINS: -1.0, TIE: 0.0}
_NAMES = {1.0: "A", -1.0: "B", 0.0: "tie"}


@dataclass(frozen=True)
class PanelSettings:
    """How a panel decides: ``rule`` (:data:`RULES`), ``tie`` (:data:`TIES`; ``unparseable`` is read as
    ``abstain``), ``min_members`` (an item with fewer votes gets no verdict), ``soft`` (the mean
    probability of the verdict as confidence, where every voting member gives ``J.p_a``), ``weights``
    (member -> weight, the ``weighted`` rule's; see :func:`calibration_weights`), ``strict`` (majority:
    more than half the votes needed, else the tie rule), ``max_iter`` / ``tol`` (dawid-skene's EM)."""

    rule: str = "majority"
    tie: str = "tie"
    min_members: int = 1
    soft: bool = False
    weights: Mapping[str, float] | None = None
    strict: bool = False
    max_iter: int = 100
    tol: float = 1e-5

    def __post_init__(self) -> None:
        if self.tie == "unparseable":
            object.__setattr__(self, "tie", "abstain")
        for key, value in (("rule", self.rule), ("tie", self.tie), ("min", self.min_members)):
            problem = panel_option_problem(key, value)
            if problem:
                raise UsageError(f"--panel-{key} {problem}")
        if self.weights is not None:
            bad = [m for m, w in self.weights.items() if not (math.isfinite(w) and w >= 0)]
            if bad:
                raise UsageError(f"--panel-calibration: member {bad[0]}'s weight must be finite and >= 0")

    @property
    def confidence_source(self) -> str:
        """The ``J.confidence_source`` of this panel's confidence."""
        return "mean_p" if self.soft else CONFIDENCE_SOURCES[self.rule]


@dataclass(frozen=True)
class PanelSpec:
    """A named panel over judged columns: ``name``, ``members`` (in order), ``settings``."""

    name: str
    members: tuple[str, ...]
    settings: PanelSettings = field(default_factory=PanelSettings)

    def __post_init__(self) -> None:
        if len(self.members) < 2:
            raise UsageError(f"panel {self.name}: name at least two members, got {', '.join(self.members) or 'none'}")
        twice = sorted({m for m in self.members if self.members.count(m) > 1})
        if twice:
            raise UsageError(f"panel {self.name}: member {twice[0]} named twice (a panel counts each member once)")


@dataclass(frozen=True)
class Combined:
    """The combined votes: ``verdict`` (n,) float (NaN: no verdict), ``confidence`` (n,) in [0, 1] (NaN
    with no verdict), ``source`` (its ``J.confidence_source``), ``n_below_min`` (items with votes but
    fewer than ``min_members``), ``n_no_plurality`` (items the tie rule decided), ``votes`` (n,) the
    number of members that voted, ``iterations`` (dawid-skene's EM; 0 otherwise)."""

    verdict: np.ndarray = field(repr=False)
    confidence: np.ndarray = field(repr=False)
    source: str
    n_below_min: int
    n_no_plurality: int
    votes: np.ndarray = field(repr=False)
    iterations: int = 0


def parse_panel(value: str, settings: PanelSettings | None = None, *, option: str = "--panel") -> PanelSpec:
    """``NAME=COL1,COL2,...`` as a :class:`PanelSpec` (a usage error naming ``option`` when malformed)."""
    name, sep, cols = value.partition("=")
    members = tuple(c.strip() for c in cols.split(",") if c.strip())
    if not sep or not name.strip() or not members:
        raise UsageError(f"{option} takes NAME=COL1,COL2,..., got {value!r}")
    return PanelSpec(name.strip(), members, settings or PanelSettings())


def panel_entry_problem(entry: Any) -> str | None:
    """What is wrong with a config's panel entry (None: nothing): a list of member names, or a mapping
    ``{members: [...], rule, tie, min}`` whose values follow the panel options' rules."""
    members = entry.get("members") if isinstance(entry, Mapping) else entry
    if not (isinstance(members, list) and all(isinstance(m, str) for m in members)):
        return f"must be a list of judge names (or {{members: [...], rule, tie, min}}), got {entry!r}"
    if not isinstance(entry, Mapping):
        return None
    unknown = sorted(set(entry) - {"members", "rule", "tie", "min"})
    if unknown:
        return f"unknown key {unknown[0]!r} (a panel takes members, rule, tie, min)"
    for key in ("rule", "tie", "min"):
        problem = panel_option_problem(key, entry[key]) if key in entry else None
        if problem:
            return f"{key} {problem}"
    return None


def panel_spec_of(name: str, entry: Any) -> PanelSpec:
    """A config's panel entry (checked by :func:`panel_entry_problem`) as a :class:`PanelSpec`; the
    list form has the default rule."""
    if not isinstance(entry, Mapping):
        return PanelSpec(name, tuple(entry))
    return PanelSpec(name, tuple(entry["members"]), PanelSettings(rule=entry.get("rule", "majority"),
                                                                  tie=entry.get("tie", "tie"),
                                                                  min_members=entry.get("min", 1)))


def _weights_vector(members: Sequence[str], settings: PanelSettings) -> np.ndarray:
    if settings.rule != "weighted":
        return np.ones(len(members))
    if settings.weights is None:
        raise UsageError("--panel-rule weighted needs the members' weights: --panel-calibration FILE (labelled items)")
    missing = [m for m in members if m not in settings.weights]
    if missing:
        raise UsageError(f"--panel-calibration: no weight for member {missing[0]}")
    return np.array([float(settings.weights[m]) for m in members])


def _categories(votes: np.ndarray) -> np.ndarray:
    present = votes[~np.isnan(votes)]
    return np.sort(pd.unique(present)) if present.size else np.zeros(0)


def _indices(votes: np.ndarray, cats: np.ndarray) -> np.ndarray:
    """Each vote's category index (``len(cats)``: no vote)."""
    idx = np.full(votes.shape, cats.size, dtype=np.int64)
    if cats.size <= 16:  # a few categories: one comparison each beats a binary search
        for t, cat in enumerate(cats):
            idx[votes == cat] = t
        return idx
    ok = ~np.isnan(votes)
    idx[ok] = np.searchsorted(cats, votes[ok])
    return idx


def _tally(votes: np.ndarray, w: np.ndarray, cats: np.ndarray) -> np.ndarray:
    """(n, C) weight behind each category."""
    tally = np.zeros((votes.shape[0], cats.size))
    for j in range(votes.shape[1]):
        col = votes[:, j]
        idx = np.searchsorted(cats, col)
        ok = ~np.isnan(col)
        tally[np.flatnonzero(ok), idx[ok]] += w[j]
    return tally


def _first_given(votes: np.ndarray) -> np.ndarray:
    present = ~np.isnan(votes)
    first = np.argmax(present, axis=1)
    return votes[np.arange(votes.shape[0]), first]


def _pattern_codes(votes: np.ndarray, cats: np.ndarray) -> np.ndarray | None:
    """Each item's votes as one integer (base C + 1, C: no vote), or None when the patterns are too many
    to tabulate (more than 2^20)."""
    k, c = votes.shape[1], cats.size
    if k * math.log2(c + 1) > 20:
        return None
    idx = _indices(votes, cats)
    code = np.zeros(votes.shape[0], dtype=np.int64)
    for j in range(k):
        code += idx[:, j] * (c + 1) ** j
    return code


def _vote(votes: np.ndarray, w: np.ndarray, s: PanelSettings, tie_value: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Majority / weighted verdicts, the share of weight behind them, and the items without a plurality:
    decided once per distinct vote pattern (few: at most (C + 1)^k) and looked up for every item."""
    cats = _categories(votes)
    code = _pattern_codes(votes, cats) if votes.shape[0] > 4096 else None
    if code is None:
        verdict, conf, open_ = _vote_items(votes, w, s, tie_value)
        return verdict, conf, int(open_.sum())
    c, k = cats.size, votes.shape[1]
    seen = np.flatnonzero(np.bincount(code, minlength=(c + 1) ** k))
    digits = (seen[:, None] // ((c + 1) ** np.arange(k, dtype=np.int64))) % (c + 1)
    patterns = np.where(digits < c, np.append(cats, np.nan)[digits], np.nan)
    verdict, conf, open_ = _vote_items(patterns, w, s, tie_value)
    lookup = np.zeros((c + 1) ** k, dtype=np.int64)
    lookup[seen] = np.arange(seen.size)
    where = lookup[code]
    return verdict[where], conf[where], int(open_[where].sum())


def _vote_items(votes: np.ndarray, w: np.ndarray, s: PanelSettings,
                tie_value: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_vote` item by item (vectorised over items); the third array: which items had no winner."""
    n = votes.shape[0]
    cats = _categories(votes)
    verdict = np.full(n, np.nan)
    conf = np.full(n, np.nan)
    if cats.size == 0:
        return verdict, conf, np.zeros(n, dtype=bool)
    tally = _tally(votes, w, cats)
    total = tally.sum(axis=1)
    top = tally.max(axis=1)
    winners = np.sum(np.isclose(tally, top[:, None], rtol=1e-12, atol=1e-12), axis=1)
    voted = ~np.isnan(votes).all(axis=1)
    wins = voted & (winners == 1) & (top > 0)
    if s.strict:
        wins &= 2 * top > total
    verdict[wins] = cats[np.argmax(tally[wins], axis=1)]
    open_ = voted & ~wins
    if s.tie == "tie":
        verdict[open_] = tie_value
    elif s.tie == "first":
        verdict[open_] = _first_given(votes[open_])
    decided = np.flatnonzero(~np.isnan(verdict))
    behind = np.zeros(decided.size)
    known = np.isin(verdict[decided], cats)
    behind[known] = tally[decided[known], np.searchsorted(cats, verdict[decided[known]])]
    with np.errstate(invalid="ignore", divide="ignore"):
        conf[decided] = np.where(total[decided] > 0, behind / total[decided], 0.0)
    return verdict, conf, open_


def _average(votes: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray]:
    present = ~np.isnan(votes)
    count = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        if how == "mean":
            verdict = np.where(count > 0, np.nansum(votes, axis=1) / np.maximum(count, 1), np.nan)
        else:
            srt = np.sort(votes, axis=1)  # NaN last
            lo = np.maximum((count - 1) // 2, 0)
            hi = np.maximum(count // 2, 0)
            rows = np.arange(votes.shape[0])
            verdict = np.where(count > 0, (srt[rows, lo] + srt[rows, hi]) / 2, np.nan)
        agree = (np.rint(verdict)[:, None] == votes).sum(axis=1)
        conf = np.where(count > 0, agree / np.maximum(count, 1), np.nan)
    return verdict, conf


def _soft_confidence(verdict: np.ndarray, votes: np.ndarray, p_a: np.ndarray) -> np.ndarray:
    """The mean probability the voting members give the verdict (A: p_a, B: 1 - p_a; a tie: NaN)."""
    p = np.where(~np.isnan(votes), p_a, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = (~np.isnan(p)).sum(axis=1)
        mean_pa = np.where(n > 0, np.nansum(p, axis=1) / np.maximum(n, 1), np.nan)
    return np.where(verdict == 1, mean_pa, np.where(verdict == -1, 1.0 - mean_pa, np.nan))


def dawid_skene(votes: Any, *, max_iter: int = 100, tol: float = 1e-5) -> tuple[np.ndarray, np.ndarray, int]:
    """Dawid and Skene (1979) by EM: the posterior of each item's true class given the members' votes.

    Args:
        votes: ``(n, k)`` labels (NaN: no vote).
        max_iter: EM iterations at most; ``tol``: stop when the evidence lower bound per vote gains
            less (crowd-kit's rule).

    Returns:
        ``(classes, posterior, iterations)``: the sorted classes ``(C,)``, the posterior ``(n, C)``
        (each row sums to 1; rows without a vote are the prior) and the EM iterations run.
    """
    v = np.asarray(votes, dtype=float)
    cats = _categories(v)
    n = v.shape[0]
    if cats.size == 0:
        return cats, np.zeros((n, 0)), 0
    c = cats.size
    full = _indices(v, cats)  # c: no vote (an extra row of zeros in the log tables)
    lab, weight, back = _patterns(full, c)
    voted = (lab < c).any(axis=1)  # items without a vote take no part (as in crowd-kit's long format)
    post_u, it = _ds_em(lab[voted], weight[voted], c, max_iter, tol)
    post = np.zeros((lab.shape[0], c))
    post[voted] = post_u
    post[~voted] = post_u.T @ weight[voted] / max(weight[voted].sum(), 1.0) if voted.any() else 0.0
    return cats, post[back], it


def _patterns(lab: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct vote patterns (rows of ``lab``), how many items have each, and each item's pattern:
    items with the same votes have the same posterior, so EM runs on the patterns, weighted."""
    n, k = lab.shape
    if k * math.log2(c + 1) > 62:
        return lab, np.ones(n), np.arange(n)
    code = lab @ ((c + 1) ** np.arange(k, dtype=np.int64))
    _, first, back, counts = np.unique(code, return_index=True, return_inverse=True, return_counts=True)
    return lab[first], counts.astype(float), back.ravel()


def _ds_em(lab: np.ndarray, weight: np.ndarray, c: int, max_iter: int, tol: float) -> tuple[np.ndarray, int]:
    """Dawid-Skene's EM over vote patterns ``lab`` of multiplicity ``weight``: the posteriors, iterations."""
    post = np.zeros((lab.shape[0], c))
    for j in range(lab.shape[1]):
        ok = lab[:, j] < c
        post[np.flatnonzero(ok), lab[ok, j]] += 1.0
    post /= post.sum(axis=1, keepdims=True)  # the majority vote's shares (crowd-kit's start)
    eps = np.finfo(float).eps
    n_votes = float(((lab < c) * weight[:, None]).sum())
    total = float(weight.sum())
    priors = weight @ post / total
    errors = _ds_m_step(lab, post * weight[:, None], c, eps)
    loss, it = -np.inf, 0
    for it in range(1, max_iter + 1):
        data = _ds_data_term(lab, errors, c)  # the E-step's and the last M-step's lower bound's common part
        if it > 1:  # crowd-kit's order: E, M, then the bound of (posterior, priors, errors) -- computed here
            new_loss = _ds_elbo(data, post, priors, weight) / max(n_votes, 1.0)
            if new_loss - loss < tol:
                it -= 1
                break
            loss = new_loss
        with np.errstate(divide="ignore"):
            log_lik = data + np.log(priors)
        top = log_lik.max(axis=1, keepdims=True)
        w = np.exp(log_lik - np.where(np.isfinite(top), top, 0.0))
        post = w / w.sum(axis=1, keepdims=True)
        priors = weight @ post / total
        errors = _ds_m_step(lab, post * weight[:, None], c, eps)
    return post, it


def _ds_m_step(lab: np.ndarray, post: np.ndarray, c: int, eps: float) -> np.ndarray:
    """Each member's confusion ``errors[j, observed, true]`` from the weighted posteriors ``post``,
    columns summing to 1 (clipped at eps first, as crowd-kit)."""
    k = lab.shape[1]
    err = np.empty((k, c, c))
    for j in range(k):
        col = lab[:, j]
        for t in range(c):
            err[j, :, t] = np.bincount(col, weights=post[:, t], minlength=c + 1)[:c]
        err[j] = np.maximum(err[j], eps)
        err[j] /= err[j].sum(axis=0, keepdims=True)
    return err


def _ds_data_term(lab: np.ndarray, errors: np.ndarray, c: int) -> np.ndarray:
    """(n, C): the sum over members of log P(vote | true class) (no vote: 0)."""
    out = np.zeros((lab.shape[0], c))
    with np.errstate(divide="ignore"):
        for j in range(lab.shape[1]):
            table = np.vstack([np.log(errors[j]), np.zeros((1, c))])  # (c + 1, c): row c = no vote
            out += table[lab[:, j]]
    return out


def _ds_elbo(data: np.ndarray, post: np.ndarray, priors: np.ndarray, weight: np.ndarray) -> float:
    """The evidence lower bound: E_post[log P(votes, class)] + the posterior's entropy."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = post > 0
        joint = np.where(pos, post * (data + np.log(priors)), 0.0)
        ent = np.where(pos, post * np.log(np.where(pos, post, 1.0)), 0.0)
    return float(weight @ (joint.sum(axis=1) - ent.sum(axis=1)))


def combine_votes(votes: Any, settings: PanelSettings, *, members: Sequence[str] | None = None,
                  p_a: Any = None, tie_value: float = 0.0) -> Combined:
    """Combine the ``(n, k)`` ``votes`` (NaN: no vote) by ``settings`` (see the module doc).

    ``members``: the member names (for the ``weighted`` rule's weights); ``p_a``: ``(n, k)`` each
    member's P(A better) (NaN: none), needed with ``soft``; ``tie_value``: the verdict of the ``tie``
    tie rule (0, the pairwise tie).
    """
    v = np.asarray(votes, dtype=float)
    if v.ndim != 2 or v.shape[1] < 1:
        raise InputError(f"votes must be an (items, members) matrix, got shape {v.shape}", field="votes")
    s = settings
    names = list(members) if members is not None else [str(j) for j in range(v.shape[1])]
    count = (~np.isnan(v)).sum(axis=1)
    n_open, it = 0, 0
    if s.rule in ("majority", "weighted"):
        verdict, conf, n_open = _vote(v, _weights_vector(names, s), s, tie_value)
    elif s.rule in ("mean", "median"):
        verdict, conf = _average(v, s.rule)
    else:
        cats, post, it = dawid_skene(v, max_iter=s.max_iter, tol=s.tol)
        verdict, conf = np.full(v.shape[0], np.nan), np.full(v.shape[0], np.nan)
        if cats.size:
            best = np.argmax(post, axis=1)
            verdict, conf = cats[best].astype(float), post[np.arange(v.shape[0]), best]
            verdict[count == 0], conf[count == 0] = np.nan, np.nan
    if s.soft:
        if p_a is None:
            raise UsageError("--panel-soft needs every member's J.p_a")
        conf = np.where(np.isnan(verdict), np.nan, _soft_confidence(verdict, v, np.asarray(p_a, dtype=float)))
    below = (count > 0) & (count < s.min_members)
    verdict = np.where(below, np.nan, verdict)
    conf = np.where(np.isnan(verdict), np.nan, conf)
    return Combined(verdict, conf, s.confidence_source, int(below.sum()), n_open, count, it)


def still_open(votes: Any, remaining: Sequence[float] | np.ndarray, settings: PanelSettings, *,
               members: Sequence[str] | None = None) -> np.ndarray:
    """Which items may still change verdict if the members not yet called vote (early stopping).

    ``votes``: ``(n, j)`` the votes of the first ``j`` members called (NaN: none); ``remaining``: the
    weights of the members still to call (``1`` each for majority). An item is closed when its leading
    verdict has more weight than any other verdict could reach with every remaining vote, more than
    half the weight where ``strict``, and at least ``min_members`` votes already. ``mean``, ``median``
    and ``dawid-skene`` need every vote: every item with members left is open.
    """
    v = np.asarray(votes, dtype=float)
    rest = np.asarray(remaining, dtype=float)
    n = v.shape[0]
    if rest.size == 0:
        return np.zeros(n, dtype=bool)
    if settings.rule not in ("majority", "weighted") or v.shape[1] == 0:
        return np.ones(n, dtype=bool)
    names = list(members) if members is not None else [str(j) for j in range(v.shape[1])]
    w = _weights_vector(names, settings)
    cats = _categories(v)
    if cats.size == 0:
        return np.ones(n, dtype=bool)
    tally = _tally(v, w, cats)
    srt = np.sort(tally, axis=1)
    top = srt[:, -1]
    second = srt[:, -2] if cats.size > 1 else np.zeros(n)
    left = float(rest.sum())
    closed = (top > second + left) & ((~np.isnan(v)).sum(axis=1) >= settings.min_members)
    if settings.strict:
        closed &= 2 * top > tally.sum(axis=1) + left
    return ~closed


def calibration_weights(votes: Any, labels: Any, members: Sequence[str], *, classes: int | None = None) -> dict[str, float]:
    """Each member's weight for the ``weighted`` rule from labelled calibration items: the log-odds
    ``log((C - 1) a / (1 - a))`` of its accuracy ``a = (correct + 1) / (labelled + 2)`` (add-one
    smoothing) over ``C`` classes (``classes``; default the distinct labels seen, at least 2: the
    optimal weights of independent voters, Nitzan and Paroush 1982), clipped at 0: a member no better
    than chance has no say. Items without a label (NaN) are left out; a member's missing vote counts
    as wrong (it did not help)."""
    v = np.asarray(votes, dtype=float)
    y = np.asarray(labels, dtype=float)
    if v.shape[0] != y.shape[0]:
        raise InputError(f"{v.shape[0]} calibration items but {y.shape[0]} labels", field="labels")
    has = ~np.isnan(y)
    c = classes if classes is not None else max(2, int(np.unique(y[has]).size))
    out = {}
    for j, m in enumerate(members):
        correct = float(np.sum(v[has, j] == y[has]))
        a = (correct + 1.0) / (float(has.sum()) + 2.0)
        out[m] = max(0.0, math.log((c - 1) * a / (1.0 - a)))
    return out


def verdict_votes(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """The ``(n, k)`` votes of verdict columns (A = +1, B = -1, tie = 0, none or unparseable: NaN): a
    member's ``J.verdict`` column where the table has one, else ``J``; a verdict spelled (``A``, ``B``,
    ``tie``, ...) or a code (its sign: +1 / -1 / 0)."""
    out = np.full((len(frame), len(columns)), np.nan)
    lookup = np.array([1.0, -1.0, 0.0, np.nan, np.nan])
    for j, c in enumerate(columns):
        src = f"{c}.verdict" if f"{c}.verdict" in frame.columns else c
        col = frame[src]
        num = pd.to_numeric(col, errors="coerce").to_numpy(float) if col.dtype != bool else np.full(len(col), np.nan)
        text = col.notna().to_numpy() & np.isnan(num)
        codes = read_verdicts(np.where(text, col.to_numpy(object), None), src).astype(np.int64)
        out[:, j] = np.where(text, lookup[codes], np.sign(num))
    return out


def verdict_names(codes: np.ndarray) -> np.ndarray:
    """Verdict codes (+1 / -1 / 0 / NaN) as ``A`` / ``B`` / ``tie`` / ``unparseable``."""
    c = np.asarray(codes, dtype=float)
    return np.where(c == 1, "A", np.where(c == -1, "B", np.where(c == 0, "tie", "unparseable"))).astype(object)


@dataclass(frozen=True)
class PanelResult:
    """Several judges combined into one, with their agreement.

    Attributes:
        combined: the panel's verdicts (``"A"``, ``"B"``, ``"tie"``, ``"unparseable"``) for verdict
            rules, or the combined grades (NaN: none) for ``mean`` / ``median`` and ``values="grades"``.
        members: the member columns.
        how: the rule.
        fleiss_kappa: over the rows every member resolved (verdicts; NaN for scores).
        krippendorff_alpha: all rows, missing allowed (nominal for verdicts, interval for scores).
        cohen_kappa: ``{(m1, m2): kappa}`` for every pair of members (unweighted for verdicts,
            quadratic weights for scores), over the rows both resolved.
        mean_cohen_kappa: mean of the pairwise kappas that are defined.
        n_complete: rows every member resolved.
        confidence: the panel's confidence per row (NaN: no verdict); ``confidence_source`` names it.
        n_below_min: rows with votes from fewer than ``min_members`` members (no verdict).
        n_no_plurality: rows the tie rule decided.
    """

    combined: np.ndarray = field(repr=False)
    members: tuple[str, ...]
    how: str
    fleiss_kappa: float
    krippendorff_alpha: float
    cohen_kappa: Mapping[tuple[str, str], float]
    mean_cohen_kappa: float
    n_complete: int
    confidence: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    confidence_source: str = "votes"
    n_below_min: int = 0
    n_no_plurality: int = 0
    tie: str = "tie"
    min_members: int = 1


def _p_a_matrix(frame: pd.DataFrame, cols: Sequence[str]) -> np.ndarray:
    missing = [c for c in cols if f"{c}.p_a" not in frame.columns]
    if missing:
        raise UsageError(f"--panel-soft needs every member's J.p_a: no {missing[0]}.p_a column")
    return np.column_stack([pd.to_numeric(frame[f"{c}.p_a"], errors="coerce").to_numpy(float) for c in cols])


def judge_panel(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    how: str = "majority",
    tie_rule: Literal["tie", "abstain", "unparseable", "first"] = "tie",
    strict: bool = False,
    settings: PanelSettings | None = None,
    values: Literal["verdicts", "grades"] | None = None,
) -> PanelResult:
    """Combine several judges' columns into one panel judge and measure their agreement.

    ``settings`` (else ``how``, ``tie_rule`` and ``strict``) is the rule (see the module doc).
    ``values``: ``verdicts`` (pairwise verdict columns, module conventions of :mod:`evalign.rank`) or
    ``grades`` (numbers); default: verdicts for the voting rules, grades for ``mean`` / ``median``. A
    row no member resolved has no verdict (``unparseable``). Agreement uses
    :func:`evalign.meta.agreement.fleiss_kappa`, :func:`~evalign.meta.agreement.cohen_kappa` and
    :func:`~evalign.meta.agreement.krippendorff_alpha` (verdict codes A = +1, tie = 0, B = -1).
    """
    s = settings or PanelSettings(rule=how, tie=tie_rule, strict=strict)
    cols = list(columns)
    if len(cols) < 2:
        raise InputError("a panel needs at least two judge columns", field="columns")
    for c in cols:
        if c not in frame.columns:
            raise InputError("no such judge column", field=c)
    kind = values or ("verdicts" if s.rule in VOTING_RULES else "grades")
    if kind == "verdicts":
        mat = verdict_votes(frame, cols)
    else:
        mat = np.column_stack([pd.to_numeric(frame[c], errors="coerce").to_numpy(np.float64) for c in cols])
    res = combine_votes(mat, s, members=cols, p_a=_p_a_matrix(frame, cols) if s.soft else None)
    combined: np.ndarray = verdict_names(res.verdict) if kind == "verdicts" else res.verdict
    nominal = kind == "verdicts" or s.rule in VOTING_RULES
    complete = ~np.isnan(mat).any(axis=1)
    fk = fleiss_kappa(mat[complete]) if nominal and complete.any() else float("nan")
    ka = krippendorff_alpha(mat.T, level="nominal" if nominal else "interval")
    pairs: dict[tuple[str, str], float] = {}
    for i in range(len(cols)):
        for j in range(i + 1, len(cols)):
            pairs[(cols[i], cols[j])] = cohen_kappa(mat[:, i], mat[:, j], weights=None if nominal else "quadratic")
    defined = [v for v in pairs.values() if math.isfinite(v)]
    return PanelResult(
        combined=combined, members=tuple(cols), how=s.rule, fleiss_kappa=float(fk), krippendorff_alpha=float(ka),
        cohen_kappa=pairs, mean_cohen_kappa=float(np.mean(defined)) if defined else float("nan"),
        n_complete=int(complete.sum()), confidence=res.confidence, confidence_source=res.source,
        n_below_min=res.n_below_min, n_no_plurality=res.n_no_plurality, tie=s.tie, min_members=s.min_members,
    )


def add_panel_columns(frame: pd.DataFrame, panel: PanelSpec, *, values: Literal["verdicts", "grades"] | None = None,
                      ) -> tuple[pd.DataFrame, PanelResult]:
    """``frame`` with the panel as a judge column: ``NAME`` (its verdicts or grades),
    ``NAME.confidence`` and ``NAME.confidence_source`` (what ``meta --selective``, ``escalate`` and
    cascades read), ``NAME.status`` (``scored``: a judge column; no verdict counts as wrong, as any
    judge's), and the :class:`PanelResult`. A member column that is missing is an error naming it."""
    if panel.name in frame.columns:
        raise UsageError(f"panel {panel.name}: the table has a column of that name already")
    res = judge_panel(frame, panel.members, settings=panel.settings, values=values)
    src = pd.Series([None if math.isnan(c) else res.confidence_source for c in res.confidence], index=frame.index,
                    dtype=object)
    return frame.assign(**{panel.name: pd.Series(res.combined, index=frame.index), f"{panel.name}.status": "scored",
                           f"{panel.name}.confidence": pd.Series(res.confidence, index=frame.index),
                           f"{panel.name}.confidence_source": src}), res


def samples_confidence(votes: Any) -> tuple[np.ndarray, np.ndarray]:
    """One judge's samples as votes (``judge --samples N``): the plurality verdict of each item's
    samples (``(n, N)``, NaN: none; no plurality: the first sample's) and the share of samples that
    agree with it (``J.confidence_source`` :data:`SAMPLES_SOURCE`)."""
    res = combine_votes(votes, PanelSettings(tie="first"))
    return res.verdict, res.confidence


def describe(panel: PanelSpec | PanelResult) -> str:
    """The rule in words, for notes: ``majority (tie: tie, min 1)``."""
    if isinstance(panel, PanelSpec):
        s = panel.settings
        rule, tie, k = s.rule, s.tie, s.min_members
    else:
        rule, tie, k = panel.how, panel.tie, panel.min_members
    extra = f", tie: {tie}" if rule in ("majority", "weighted") else ""
    return f"{rule}{extra}, min {k}"


def with_settings(panel: PanelSpec, **changes: Any) -> PanelSpec:
    """``panel`` with some settings changed."""
    return replace(panel, settings=replace(panel.settings, **changes))


__all__ = [
    "CONFIDENCE_SOURCES", "RULES", "SAMPLES_SOURCE", "TIES", "VOTING_RULES", "Combined", "PanelResult", "PanelSettings",
    "PanelSpec", "add_panel_columns", "calibration_weights", "combine_votes", "dawid_skene", "describe",
    "judge_panel", "panel_entry_problem", "panel_spec_of", "parse_panel", "samples_confidence", "still_open", "verdict_names", "verdict_votes",
    "with_settings",
]
