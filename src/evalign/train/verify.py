"""Verify before trusting: grade a labelled set with a trained judge and with its base model, and
compare both with the labels.

* Sets with 1-5 grades (the Prometheus-format MT-Bench / Vicuna sets): absolute grading with each row's
  rubric and reference; agreement = Pearson (the Prometheus paper's statistic), Spearman, Kendall and
  exact agreement with the labels. Their labels are GPT-4 grades, not human ratings, and the table says so.
* Pairwise human sets (PandaLM, LLMBar, HHH): relative grading (``[RESULT] A|B``); agreement =
  preference accuracy against the human labels (without ties: human ties left out, and with ties).

:func:`verify_judges` is the one place that turns graded columns into the trust table (on the public
functions of :mod:`evalign.meta`); :func:`grade_dataset` does the grading. A judge with no parseable
grade gets a row with ``n = 0`` and a note, never an error.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends import HFLocalBackend, RewardModelBackend
from evalign.backends.reward import is_reward_model
from evalign.datasets import load_dataset
from evalign.errors import EvalignError, InputError
from evalign.judges import run_judge
from evalign.judges.spec import JudgeSpec, make_judge
from evalign.train.before_after import BeforeAfter, table_before_after

#: columns of :attr:`VerifyReport.table`
COLUMNS = ("judge", "kind", "n", "statistic", "value", "ci_low", "ci_high", "beats_baselines", "extra", "note")


@dataclass(frozen=True)
class VerifyReport:
    """The trust table of the judges against the labels: one row per judge and per trivial
    baseline (columns :data:`COLUMNS`; ``kind`` is ``judge`` or ``baseline``; ``extra`` holds the
    secondary statistics as ``name=value`` text), what the labels are, notes, and the
    :class:`~evalign.evaluate.EvalResult` it was read from (``None`` when no judge graded anything)."""

    table: pd.DataFrame
    kind: str
    labels: str
    dataset: str
    items: int
    notes: tuple[str, ...] = ()
    result: Any = None
    orders: BeforeAfter | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        out = {"kind": self.kind, "labels": self.labels, "dataset": self.dataset, "items": self.items,
               "notes": list(self.notes), "table": self.table.to_dict("records")}
        if self.orders is not None:
            out["orders"] = self.orders.as_dict()
        if self.result is not None:
            out["signature"] = dict(self.result.signature)
        return out


def _fmt(v: float) -> str:
    return "nan" if not math.isfinite(v) else f"{v:.3f}"


def verify_judges(
    table: pd.DataFrame,
    judge_columns: Mapping[str, str],
    *,
    kind: str,
    labels: Sequence[str],
    label_note: str,
    label_source: str = "human",
    dataset: str = "<table>",
    reasons: Mapping[str, str] | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> VerifyReport:
    """Trust table of graded columns against labels, computed by the evaluation layer
    (:func:`evalign.evaluate.evaluate`) with its trivial baselines beside the judges.

    ``judge_columns``: ``{judge name: column}``; absolute (``kind="absolute"``): 1-5 grades, NaN =
    unscored, ``labels`` = one numeric label column (or several: their mean), statistic: item-level
    Pearson over the graded items (Spearman, Kendall and exact agreement in ``extra``); pairwise
    (``kind="pairwise"``): verdicts coded +1 = A better, -1 = B better, 0 = tie, NaN = no verdict,
    ``labels`` = annotator columns with the same coding, statistic: preference accuracy over the
    labelled pairs with a missing verdict counted wrong (accuracy over parsed verdicts, without
    human ties, and the number unparseable in ``extra``). ``reasons``: per judge, why its grades
    were missing (shown when n = 0). ``label_note``: what the labels are, shown in titles;
    ``label_source``: ``human`` or ``model`` (e.g. GPT-4 grades).
    """
    # evalign.evaluate imports scipy: kept out of `evalign --help` (train-judge imports this module)
    from evalign.evaluate import evaluate
    from evalign.evaluate.spec import Column, EvalSpec, Human, Resampling, TrustRequest

    if kind not in ("absolute", "pairwise"):
        raise EvalignError(f"kind must be 'absolute' or 'pairwise', got {kind!r}")
    if label_source not in ("human", "model"):
        raise EvalignError(f"label_source must be 'human' or 'model', got {label_source!r}")
    source = label_source
    resampling = Resampling(n_resamples=n_resamples, n_permutations=n_resamples, confidence=confidence, seed=seed)
    data = _graded_data(table, judge_columns, kind, labels)
    empty = [name for name in judge_columns if not np.isfinite(data[name].to_numpy()).any()]
    graded = [name for name in judge_columns if name not in empty]
    stat = "pearson" if kind == "absolute" else "preference_accuracy"
    rows: list[dict[str, Any]] = []
    result = None
    notes: list[str] = []
    if graded:
        if kind == "absolute":
            spec = EvalSpec(human=Human(column="__label", source=source, label=label_note),
                            columns=tuple(Column(n, kind="judge") for n in graded), items=data,
                            trust=(TrustRequest("pearson", "item", "none"),), resampling=resampling, source=dataset,
                            min_group_size=1)
        else:
            spec = EvalSpec(human=Human(pref_columns=tuple(f"__{c}" for c in labels), source=source, label=label_note),
                            columns=tuple(Column(n, kind="judge", verdict=True) for n in graded), pairs=data,
                            resampling=resampling, source=dataset, min_group_size=1)
        result = evaluate(spec)
        if result.refused:
            raise EvalignError(f"{dataset}: {result.refused}")
        trust = result.trust[0].for_group()
        notes.extend(result.trust[0].notes)
        rows += [_trust_row(r, kind, stat, data, len(table)) for r in trust.to_dict("records")]
    for name in empty:
        why = (reasons or {}).get(name, "")
        rows.append({"judge": name, "kind": "judge", "n": 0, "statistic": stat, "value": float("nan"),
                     "ci_low": float("nan"), "ci_high": float("nan"), "beats_baselines": None, "extra": "",
                     "note": f"n = 0: no parseable grade{f' ({why})' if why else ''}; nothing to compare"})
    notes.insert(0, f"{int(confidence * 100)}% bootstrap interval over items ({n_resamples} resamples, seed {seed})")
    if len(table) < 30:
        notes.append(f"only {len(table)} labelled items: read the intervals, not the point values")
    if kind == "pairwise":
        notes.append("preference accuracy: a pair without a verdict counts as wrong; 'no_ties' leaves human ties out")
    return VerifyReport(pd.DataFrame(rows, columns=list(COLUMNS)), kind, label_note, dataset, len(table),
                        tuple(notes), result)


def _graded_data(table: pd.DataFrame, judge_columns: Mapping[str, str], kind: str,
                 labels: Sequence[str]) -> pd.DataFrame:
    """The judges' columns with the labels, as the item table (``id``, ``system``, ``__label``) or the
    pair table (``pair_id``, ``__<label>``) that :func:`evalign.evaluate.evaluate` reads."""
    data = pd.DataFrame(index=range(len(table)))
    for name, col in judge_columns.items():
        data[name] = table[col].to_numpy(dtype=float)
    if kind == "absolute":
        label = table[list(labels)].to_numpy(dtype=float).mean(axis=1)
        data.insert(0, "id", [f"item{i}" for i in range(len(table))])
        data.insert(1, "system", "judged")
        data["__label"] = label
    else:
        data.insert(0, "pair_id", [f"pair{i}" for i in range(len(table))])
        for c in labels:
            data[f"__{c}"] = table[c].to_numpy(dtype=float)
    return data


def _extra(r: Mapping[str, Any], kind: str, data: pd.DataFrame) -> dict[str, Any]:
    """The secondary statistics of one trust row (absolute: Spearman, Kendall, exact agreement;
    pairwise: accuracy without ties, over parsed verdicts, and the unparseable count)."""
    if kind == "absolute":
        extra = {"spearman": r.get("spearman", np.nan), "kendall": r.get("kendall", np.nan)}
        if r["kind"] == "judge":
            m, h = data[str(r["metric"])].to_numpy(), data["__label"].to_numpy()
            ok = np.isfinite(m) & np.isfinite(h)
            extra["exact"] = float(np.mean(np.round(m[ok]) == np.round(h[ok])))
    else:
        extra = {"no_ties": r.get("preference_accuracy_no_ties", np.nan)}
        if r["kind"] == "judge":
            extra["parsed"] = r.get("accuracy_parsed", np.nan)
            extra["unparseable"] = r.get("n_unparseable", np.nan)
    return extra


def _trust_row(r: Mapping[str, Any], kind: str, stat: str, data: pd.DataFrame, n_table: int) -> dict[str, Any]:
    """One row of :attr:`VerifyReport.table` from a trust row of the evaluation."""
    extra = _extra(r, kind, data)
    n = int(r["n"])
    note = ""
    if r["kind"] == "judge" and kind == "absolute" and n < n_table:
        note = f"{n_table - n} of {n_table} items unscored or unlabelled"
    elif r["kind"] == "judge" and kind == "pairwise" and extra.get("unparseable", 0):
        note = f"{int(extra['unparseable'])} of {n} labelled pairs without a verdict (counted wrong)"
    return {"judge": str(r["metric"]), "kind": r["kind"], "n": n, "statistic": stat, "value": float(r["value"]),
            "ci_low": float(r["ci_low"]), "ci_high": float(r["ci_high"]),
            "beats_baselines": r.get("beats_baselines"),
            "extra": " ".join(f"{k}={int(v) if k == 'unparseable' else _fmt(float(v))}"
                              for k, v in extra.items() if v is not None and math.isfinite(float(v))),
            "note": note}


# --- grading a dataset --------------------------------------------------------------------------------

_SCORE_LINE = re.compile(r"^Score ([1-5]):\s*(.*)$")


def rubric_from_rendered(text: str) -> dict[str, str]:
    """A rubric mapping from its rendered form (``[criteria]`` then ``Score n: ...`` lines, as in the
    Prometheus-format sets' prompts)."""
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    if not lines or not (lines[0].startswith("[") and lines[0].endswith("]")):
        raise EvalignError(f"not a rendered rubric (first line must be '[criteria]'): {str(text)[:60]!r}")
    out = {"criteria": lines[0][1:-1].strip()}
    for ln in lines[1:]:
        m = _SCORE_LINE.match(ln)
        if m is None:
            key = f"score{len(out) - 1}_description"
            if key in out:
                out[key] += " " + ln
            continue
        out[f"score{m.group(1)}_description"] = m.group(2)
    return out


@dataclass(frozen=True)
class VerifyOptions:
    """How the labelled set is graded: ``limit`` (first N rows), judge sampling (``temperature`` 0 =
    greedy, None = the mode's: 0, or 1.0 for ``ranking`` as in the Prometheus paper; ``max_tokens``;
    ``seed``), ``both_orders`` (pairwise: judge A/B and B/A), HF backend ``device`` and ``batch_size``,
    bootstrap ``n_resamples``; ``template``: the judge's prompt template (None: the mode's default,
    Prometheus'; e.g. an LLMBar template where evalign has one). ``ranking``: pairwise sets are judged
    by Prometheus' ranking by absolute grading (A and B graded 1-5 apart, re-graded while tied, up to
    ``max_rounds`` rounds) instead of relative grading; ``held_out``: a ``judge-data`` manifest
    (``manifest.json``): only the rows of its held-out questions are graded (1-5 graded sets)."""

    limit: int | None = None
    temperature: float | None = None
    max_tokens: int = 1024
    seed: int = 0
    both_orders: bool = True
    device: str | None = None
    batch_size: int = 8
    n_resamples: int = 1000
    template: str | None = None
    ranking: bool = False
    max_rounds: int = 2
    held_out: str | Path | None = None

    def sampling_temperature(self) -> float:
        """The judge's temperature: the one given, else 1.0 for ranking, 0 (greedy) otherwise."""
        if self.temperature is not None:
            return float(self.temperature)
        return 1.0 if self.ranking else 0.0


def held_out_rows(table: pd.DataFrame, dataset: str, manifest: str | Path) -> pd.DataFrame:
    """The rows of ``table`` (a 1-5 graded Prometheus set, ``dataset`` = ``prometheus_vicuna`` or
    ``prometheus_mt_bench``) whose question (``<source>:<id>``) is held out in the ``judge-data``
    manifest ``manifest``; an unreadable manifest, one without held-out questions or a set that has
    none of them is an error naming the file."""
    path = Path(manifest)
    try:
        questions = json.loads(path.read_text(encoding="utf-8"))["questions"]["held_out"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EvalignError(f"{path}: not a judge-data manifest with held-out questions ({e})") from e
    if not isinstance(questions, list) or not questions or not all(isinstance(q, str | int) for q in questions):
        got = "nothing" if questions is None else f"{type(questions).__name__} {json.dumps(questions)[:60]}"
        raise InputError(f"must be a non-empty list of held-out questions (<source>:<id>, as `evalign judge-data` "
                         f"writes it), got {got}", file=str(path), field="questions.held_out")
    source = dataset.removeprefix("prometheus_")
    keys = {str(q) for q in questions}
    keep = table[[f"{source}:{i}" in keys for i in table["id"]]]
    if keep.empty:
        raise EvalignError(f"{path}: none of its {len(keys)} held-out questions is in {dataset} "
                           f"(questions are named <source>:<id>, e.g. {source}:1)")
    return keep.reset_index(drop=True)


def dataset_table(name: str) -> tuple[pd.DataFrame, str, list[str], str, str]:
    """A labelled set by name: (table, kind, label columns, what the labels are, ``human`` or ``model``)."""
    ds = load_dataset(name)
    if ds.pairs is not None and ds.pref_columns:
        return ds.pairs.copy(), "pairwise", list(ds.pref_columns), "human preference labels", "human"
    if ds.items is not None and ds.human_columns and "rubric" in ds.items.columns:
        labels = list(ds.human_columns)
        gpt4 = any("gpt4" in c for c in labels)
        note = "GPT-4 grades (1-5), NOT human ratings" if gpt4 else "human ratings (1-5)"
        return ds.items.copy(), "absolute", labels, note, "model" if gpt4 else "human"
    raise EvalignError(f"dataset '{name}' has neither human pairwise labels nor 1-5 grades with a rubric per item")


def grade_dataset(
    table: pd.DataFrame, kind: str, models: Mapping[str, str | Path], options: VerifyOptions, *, cache: Any = None
) -> tuple[pd.DataFrame, dict[str, str], dict[str, str]]:
    """Grade ``table`` with each local model (``{judge name: model folder}``) through the HF judge backend
    (a reward model, :func:`~evalign.backends.reward.is_reward_model`: the reward backend and judge);
    returns the table with one column per judge, ``{judge: column}`` and ``{judge: unscored reasons}``."""
    table = table.head(options.limit).reset_index(drop=True) if options.limit else table.reset_index(drop=True)
    if kind == "absolute":
        table["rubric_json"] = [json.dumps(rubric_from_rendered(r)) for r in table["rubric"]]
    cols: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for name, path in models.items():
        col = f"judge:{name}"
        reward = is_reward_model(path)
        judge = (make_judge(JudgeSpec(mode="reward_pairwise" if kind == "pairwise" else "reward", column=col))
                 if reward else verify_judge(kind, col, table, options))
        backend: Any = (RewardModelBackend(str(path), device=options.device, batch_size=options.batch_size) if reward
                        else HFLocalBackend(str(path), device=options.device, batch_size=options.batch_size))
        run = run_judge(table, judge, backend, cache=cache)
        # item judges: the 1-5 grade (a reward model: its reward); pair judges: the verdict code (+1 A, -1 B,
        # 0 tie; NaN none)
        table[col] = run.table[col if kind == "absolute" else f"{col}.code"].to_numpy(dtype=float)
        if kind == "pairwise" and options.both_orders and not options.ranking:
            for order in ("ab", "ba"):  # per-order verdicts (original orientation) for the order diagnostics;
                # a reward model scores each response alone: the same verdict in both orders
                table[f"{col}.{order}"] = run.table[col if reward else f"{col}.{order}"].to_numpy()
        cols[name] = col
        reasons[name] = unscored_reason(run.summary.get("unscored_by_reason") or {}, options.max_tokens)
    return table, cols, reasons


def verify_judge(kind: str, column: str, table: pd.DataFrame, options: VerifyOptions) -> Any:
    """The judge that grades a labelled set of ``kind``: absolute grading with each row's rubric (1-5
    sets); relative grading, or with ``options.ranking`` Prometheus' ranking by absolute grading, for
    pairs (HHH's pairs under the HHH rubric of their subset, other pair sets under helpfulness)."""
    sampling = {"temperature": options.sampling_temperature(), "max_tokens": options.max_tokens,
                "seed": options.seed, "repetition_penalty": 0}
    if kind == "absolute":
        return make_judge(JudgeSpec(mode="absolute", rubric_column="rubric_json", column=column,
                                    template=options.template, decoding=sampling))
    if options.ranking:
        hhh = "task" in table.columns and set(table["task"]) <= {"harmless", "helpful", "honest", "other"}
        return make_judge(JudgeSpec(mode="ranking", column=column, template=options.template,
                                    rubric_column="task" if hhh else None, rubric_map="hhh" if hhh else None,
                                    decoding=sampling, options={"max_rounds": options.max_rounds}))
    return make_judge(JudgeSpec(mode="pairwise", both_orders=options.both_orders, column=column,
                                template=options.template, decoding=sampling))


def unscored_reason(by_reason: Mapping[str, int], max_tokens: int) -> str:
    """Why a judge's grades were missing, as shown in its note (``truncated: 12, no_grade: 3``); when
    outputs were cut off at ``max_tokens`` it says that a larger ``--max-tokens`` is needed."""
    text = ", ".join(f"{k}: {v}" for k, v in by_reason.items())
    if by_reason.get("truncated"):
        text += (f"; {by_reason['truncated']} outputs hit --max-tokens {max_tokens} before a grade: "
                 "a larger --max-tokens is needed")
    return text


def verify_models(
    dataset: str, models: Mapping[str, str | Path], options: VerifyOptions | None = None, *,
    table: pd.DataFrame | None = None, cache: Any = None,
) -> VerifyReport:
    """Grade the labelled set ``dataset`` (or ``table``, a pair or item table of that dataset's kind) with
    each model and return the trust table (:func:`verify_judges`)."""
    options = options or VerifyOptions()
    base, kind, labels, note, source = dataset_table(dataset)
    if options.held_out is not None:
        if kind != "absolute":
            raise EvalignError(f"--held-out selects held-out questions of a 1-5 graded set; {dataset} is {kind}")
        base = held_out_rows(base, dataset, options.held_out)
    graded, cols, reasons = grade_dataset(base if table is None else table, kind, models, options, cache=cache)
    report = verify_judges(graded, cols, kind=kind, labels=labels, label_note=note, label_source=source,
                           dataset=dataset, reasons=reasons,
                           n_resamples=options.n_resamples, seed=options.seed)
    if kind != "pairwise" or not options.both_orders or options.ranking or len(labels) != 1:
        return report
    # both orders on a set with one gold label (LLMBar): accuracy per order, positional agreement and
    # prefers-first for each model side by side (the first two tested: base -> trained), beside the
    # dataset's published judge columns (J with J.ab / J.ba) where it ships them, and the baselines
    orders = table_before_after(graded, cols, labels[0], reasons=reasons, seed=options.seed)
    return replace(report, orders=orders)
