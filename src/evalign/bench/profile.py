"""The bench's profile: every set and every category evaluated by :func:`evalign.evaluate.evaluate`
(the trust-table machinery: intervals, ranks, significance clusters, the baselines, the order
diagnostics), its rows gathered into one table. Nothing here computes a statistic.

* A **pairwise set** is ranked by accuracy on the pairs without a human tie (``preference_accuracy_no_ties``:
  each judge's verdict resolved over both orders; a judge tie or an unreadable verdict is wrong), with
  the accuracy over all pairs (ties counted) beside it, and ``position_agreement`` /
  ``prefers_longer`` of every judge run in both orders.
* A **graded set** is ranked by its correlation (the suite's ``statistic`` with its ``grouping``).
* A **category** pools its sets' sampled units: pairwise categories all their pairs (the humans'
  majority label of each); the graded category each set's correlation over its own responses,
  averaged over the sets (grouping by set). Only the judges that have a value on every set of the
  category take part (yours, your panels, the published judges that every set ships).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from evalign.bench.load import LoadedSet
from evalign.bench.settings import BenchSettings
from evalign.evaluate import evaluate
from evalign.evaluate.result import EvalResult
from evalign.evaluate.spec import Column, EvalSpec, Human, TrustRequest
from evalign.meta.agreement import majority_vote
from evalign.meta.order_diagnostics import FIELDS

#: the statistic of a pairwise set or category (and the one beside it)
PAIRWISE = "preference_accuracy_no_ties"
WITH_TIES = "preference_accuracy"
#: the columns of a profile row
ROW_COLUMNS = ("scope", "key", "category", "kind", "judge", "role", "n", "statistic", "value", "ci_low", "ci_high",
               "with_ties", "accuracy_parsed", "pearson", "spearman", "kendall", "rank", "of", "cluster", "p_vs_best",
               "beats_baselines", "n_unparseable", *FIELDS, "dataset_statistic", "dataset_statistic_value",
               "coverage_at_risk")
#: the risk of the ``coverage_at_risk`` column (the share of a set's units a judge with a confidence may
#: decide at that risk, delta 0.1: :func:`evalign.meta.selective.calibrate`; NaN without a confidence)
RISK = 0.15
#: the note beside a profile where some judge has no ``coverage_at_risk``
NO_CONFIDENCE = (f"cov@{RISK:g}: the share of a set's units a judge may decide with at most {RISK:g} disagreement "
                 "with people (probability >= 0.9, evalign meta --selective); '-' where the judge states no "
                 "confidence (J.confidence, J.p_a from logprobs or a reward model, J.p of a grade); 0 where no threshold "
                 "holds the guarantee")
#: roles of a row: your judges, your panels, the set's published judges and metrics, the baselines
ROLES = ("yours", "panel", "published", "baseline", "ceiling")


def _judge_column(name: str, s: LoadedSet, higher: Mapping[str, bool]) -> Column:
    if s.kind == "pairwise":
        return Column(name, "judge", True, verdict=True)
    return Column(name, "judge", higher.get(name, name not in s.lower_is_better))


def set_spec(s: LoadedSet, names: Sequence[str], settings: BenchSettings, higher: Mapping[str, bool]) -> EvalSpec:
    """The evaluation of one set: the judge columns ``names`` (yours, panels, published) against its labels."""
    cols = tuple(_judge_column(n, s, higher) for n in names)
    common: dict[str, Any] = {"columns": cols, "resampling": settings.resampling, "source": f"bench set {s.key}",
                              "dataset": s.title, "min_group_size": settings.min_group_size}
    if s.kind == "pairwise":
        return EvalSpec(human=s.human, pairs=s.table, trust=(TrustRequest(PAIRWISE),), statistics=s.statistics,
                        **common)
    req = TrustRequest(s.spec.statistic, "item", s.spec.grouping)
    return EvalSpec(human=s.human, items=s.table, trust=(req,), grouping=s.spec.grouping, **common)


def _majority(s: LoadedSet) -> np.ndarray:
    """Each pair's majority label code (+1 / -1 / 0; NaN without a label)."""
    return majority_vote(s.table[list(s.human.pref_columns)].to_numpy(dtype=float), fallback=0.0)


def _companions(t: pd.DataFrame, names: Sequence[str]) -> list[str]:
    return [c for c in t.columns if any(c == n or c.startswith(f"{n}.") for n in names)]


def category_spec(key: str, sets: Sequence[LoadedSet], names: Sequence[str], settings: BenchSettings,
                  higher: Mapping[str, bool]) -> EvalSpec | None:
    """The evaluation of one category (its sets' units pooled, see the module doc); None when none of
    ``names`` has a value on every set or the sets are of both kinds."""
    kinds = {s.kind for s in sets}
    names = [n for n in names if all(n in s.table.columns for s in sets)]
    if not names or len(kinds) != 1:
        return None
    common: dict[str, Any] = {"resampling": settings.resampling, "source": f"bench category {key}",
                              "dataset": key, "min_group_size": settings.min_group_size}
    if kinds == {"pairwise"}:
        parts = []
        for s in sets:
            t = s.table
            keep = ["id", "system_a", "system_b", "response_a", "response_b", *_companions(t, names)]
            part = t[[c for c in keep if c in t.columns]].copy()
            part["id"] = [f"{s.key}/{i}" for i in part["id"].astype(str)]
            part["label"] = _majority(s)
            part["set"] = s.key
            parts.append(part)
        pairs = pd.concat(parts, ignore_index=True)
        cols = tuple(Column(n, "judge", True, verdict=True) for n in names)
        return EvalSpec(human=Human(pref_columns=("label",)), columns=cols, pairs=pairs, trust=(TrustRequest(PAIRWISE),),
                        **common)
    stats = {s.spec.statistic for s in sets}
    statistic = stats.pop() if len(stats) == 1 else "kendall"
    parts = []
    for s in sets:
        t = s.table
        part = t[["response", *_companions(t, names)]].copy()
        part["id"] = [f"{s.key}/{i}/{y}" for i, y in zip(t["id"].astype(str), t["system"].astype(str), strict=True)]
        part["system"] = s.key
        part["human"] = t[str(s.human.column)].to_numpy(dtype=float)
        parts.append(part)
    items = pd.concat(parts, ignore_index=True)
    cols = tuple(Column(n, "judge", higher.get(n, True)) for n in names)
    return EvalSpec(human=Human(column="human"), columns=cols, items=items, grouping="system",
                    trust=(TrustRequest(statistic, "item", "system"),), **common)


def _f(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f


def result_rows(result: EvalResult, *, scope: str, key: str, category: str, kind: str,
                roles: Mapping[str, str], own: str | None = None) -> list[dict[str, Any]]:
    """The profile rows of one evaluated set or category: every row of its first trust table's
    ``(all)`` group (its judges, the baselines, the human ceiling), in the table's order."""
    if not result.trust:
        return []
    t = result.trust[0]
    main = t.for_group()
    contenders = int((main["kind"] != "baseline").sum())
    rows = []
    for r in main.to_dict("records"):
        name = str(r["metric"])
        role = ("ceiling" if name == "human_ceiling" else "baseline") if r["kind"] == "baseline" else \
            roles.get(name, "published")
        row: dict[str, Any] = {
            "scope": scope, "key": key, "category": category, "kind": kind, "judge": name, "role": role,
            "n": int(r["n"]), "statistic": t.statistic, "value": _f(r.get("value")), "ci_low": _f(r.get("ci_low")),
            "ci_high": _f(r.get("ci_high")), "with_ties": _f(r.get(WITH_TIES)),
            "accuracy_parsed": _f(r.get("accuracy_parsed")), "pearson": _f(r.get("pearson")),
            "spearman": _f(r.get("spearman")), "kendall": _f(r.get("kendall")), "rank": _f(r.get("rank")),
            "of": contenders if role not in ("baseline", "ceiling") else None, "cluster": _f(r.get("cluster")),
            "p_vs_best": _f(r.get("p_vs_best")), "beats_baselines": r.get("beats_baselines"),
            "n_unparseable": _f(r.get("n_unparseable")),
            "dataset_statistic": own, "dataset_statistic_value": _f(r.get(own)) if own else float("nan"),
        }  # fmt: skip
        for f in FIELDS:
            row[f] = _f(r.get(f))
        if isinstance(row["beats_baselines"], float) and math.isnan(row["beats_baselines"]):
            row["beats_baselines"] = None
        rows.append(row)
    return rows


def evaluate_sets(sets: Sequence[LoadedSet], names: Sequence[str], roles: Mapping[str, str],
                  settings: BenchSettings, higher: Mapping[str, bool]) -> tuple[list[dict[str, Any]], dict[str, EvalResult]]:
    """Every set evaluated with ``names`` (those it has) and its published columns."""
    rows: list[dict[str, Any]] = []
    results: dict[str, EvalResult] = {}
    for s in sets:
        mine = [n for n in names if n in s.table.columns]
        r = evaluate(set_spec(s, [*mine, *s.published], settings, higher))
        results[s.key] = r
        own = s.statistics[0].name if s.statistics and s.kind == "pairwise" else None
        set_rows = result_rows(r, scope="set", key=s.key, category=s.category, kind=s.kind, roles=roles, own=own)
        cov = coverage_at_risk(s, [*mine, *s.published])
        for row in set_rows:
            row["coverage_at_risk"] = cov.get(row["judge"], float("nan"))
        rows += set_rows
    return rows, results


def coverage_at_risk(s: LoadedSet, names: Sequence[str], risk: float = RISK) -> dict[str, float]:
    """Per judge of ``names`` with a confidence: the share of the set's labelled units it may decide at
    ``risk`` (delta 0.1; 0 when it abstains); judges without a confidence are left out."""
    from evalign.evaluate.columns import verdict_codes
    from evalign.evaluate.selective import item_confidence, item_correct, pair_confidence, pair_correct
    from evalign.meta.selective import SelectiveSettings, calibrate

    settings = SelectiveSettings(alpha=risk, delta=0.1)
    out: dict[str, float] = {}
    for n in names:
        if n not in s.table.columns:
            continue
        if s.kind == "pairwise":
            c = pair_confidence(s.table, n, verdict_codes(s.table, n)[0])
            labels = _majority(s)
            y = None if isinstance(c, str) else pair_correct(c, labels)
        else:
            c = item_confidence(s.table, n)
            ratings = s.table[str(s.human.column)].to_numpy(dtype=float)
            y = None if isinstance(c, str) else item_correct(c, ratings)
        if isinstance(c, str) or y is None:
            continue
        use = np.isfinite(c.confidence) & np.isfinite(y)
        out[n] = calibrate(c.confidence[use], y[use].astype(bool), settings).coverage
    return out


def evaluate_categories(categories: Sequence[str], sets: Sequence[LoadedSet], names: Sequence[str],
                        roles: Mapping[str, str], settings: BenchSettings,
                        higher: Mapping[str, bool]) -> tuple[list[dict[str, Any]], dict[str, EvalResult]]:
    """Every category with sets evaluated on its pooled units (see the module doc)."""
    rows: list[dict[str, Any]] = []
    results: dict[str, EvalResult] = {}
    for c in categories:
        members = [s for s in sets if s.category == c]
        if not members:
            continue
        published = [n for n in dict.fromkeys(p for s in members for p in s.published)]
        spec = category_spec(c, members, [*names, *published], settings, higher)
        if spec is None:
            continue
        r = evaluate(spec)
        results[c] = r
        rows += result_rows(r, scope="category", key=c, category=c, kind=members[0].kind, roles=roles)
    return rows, results


__all__ = ["NO_CONFIDENCE", "PAIRWISE", "RISK", "ROLES", "ROW_COLUMNS", "WITH_TIES", "category_spec",
           "coverage_at_risk", "evaluate_categories",
           "evaluate_sets", "result_rows", "set_spec"]
