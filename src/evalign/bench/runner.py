"""``run_bench``: the whole bench in one call: the suite's sets loaded and sampled, your judges run on
them (cached, resumable), panels made, every set and category evaluated, the profile signed."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

import evalign
from evalign.backends.batch import add_batch_counts
from evalign.bench.judges import BenchJudge
from evalign.bench.judging import BenchProgress, SetRun, add_panels, panel_call_notes, run_judges
from evalign.bench.load import Loaded, LoadedSet, load_suite_sets
from evalign.bench.profile import NO_CONFIDENCE, PAIRWISE, ROW_COLUMNS, evaluate_categories, evaluate_sets
from evalign.bench.result import BenchProfile
from evalign.bench.settings import BenchSettings
from evalign.bench.suite import Suite, default_suite_path, load_suite, set_kind
from evalign.cache import Cache
from evalign.errors import UsageError
from evalign.evaluate.result import EvalResult
from evalign.signature import stable_hash

#: ``stage(message)``: called as the bench moves on (loading, judging, evaluating)
StageFn = Callable[[str], None]


def bench_suite(settings: BenchSettings) -> Suite:
    """The suite a bench runs: its file, the sets chosen, the templates overridden."""
    suite = load_suite(settings.suite).select(settings.sets)
    known = {s.key for s in suite.sets} | {c.key for c in suite.categories} | {"pairwise", "graded"}
    for k in settings.templates:
        if k not in known:
            raise UsageError(f"--template {k}=...: '{k}' is not a set, a category or a kind (pairwise / graded) of "
                             "the bench")
    return suite.with_templates(settings.templates)


def _run_row(r: SetRun) -> dict[str, Any]:
    s = r.run.summary
    u = s.usage or {}
    detail = u.get("cost_detail") or {}
    unparsed = sum(v for k, v in s.calls.unscored_by_reason.items() if k != "backend_error")
    calls = s.calls.total
    return {
        "judge": r.judge, "set": r.set, "items": s.items, "scored": s.scored, "calls": calls, "new": s.calls.new,
        "cached": s.calls.cached, "failed": s.calls.failed, "unparsed": unparsed,
        "parse_rate": (calls - unparsed - s.calls.failed) / calls if calls else float("nan"),
        "seconds": s.seconds, "s_per_call": s.seconds / s.calls.new if s.calls.new else float("nan"),
        "constrained": bool((s.constraint or {}).get("sent")), "outside_shape": (s.constraint or {}).get("outside_shape"),
        "template": r.judge_obj.template.name, "signature": r.run.signature,
        "prompt_tokens": u.get("prompt_tokens", 0), "completion_tokens": u.get("completion_tokens", 0),
        "cache_read_tokens": u.get("cache_read_tokens", 0), "cache_write_tokens": u.get("cache_write_tokens", 0),
        "cost": (detail.get("run") or {}).get("cost"), "list_cost": (detail.get("list") or {}).get("cost"),
    }  # fmt: skip


def _set_row(s: LoadedSet, result: EvalResult | None) -> dict[str, Any]:
    t = result.trust[0] if result is not None and result.trust else None
    return {
        "key": s.key, "dataset": s.spec.dataset, "title": s.title, "category": s.category, "kind": s.kind,
        "labels": s.human.column or ", ".join(s.human.pref_columns), "annotators": len(s.human.pref_columns) or 1,
        "annotator_kind": s.annotator_kind, "template": s.template, "template_hash": s.template_hash,
        "mode": s.spec.recipe.mode, "n": len(s.table), "n_total": s.n_total,
        "statistic": PAIRWISE if s.kind == "pairwise" else s.spec.statistic,
        "grouping": None if s.kind == "pairwise" else s.spec.grouping, "published": list(s.published),
        "refused": result.refused if result is not None else None,
        "notes": list(result.notes) if result is not None else [], "headline": t.headline if t is not None else None,
    }  # fmt: skip


def bench_signature(suite: Suite, loaded: Sequence[LoadedSet], specs: Sequence[BenchJudge],
                    settings: BenchSettings) -> dict[str, Any]:
    """What makes a profile reproducible: the suite (file hash), the sets with their datasets and sample
    sizes, the sample seed, each set's template and its hash (and rubric), each judge's backend, model
    and decoding, the resampling and evalign's version; ``text``: one line of it."""
    templates = {s.key: {"template": s.template, "hash": s.template_hash, "mode": s.spec.recipe.mode,
                         "rubric": stable_hash(s.spec.recipe.options().get("rubric")) if s.spec.recipe.rubric else None}
                 for s in loaded}
    judges = {j.name: {"spec": j.described, "decoding": j.decoding(settings.decoding),
                       "options": {k: v for k, v in j.options.items() if k not in j.decoding(settings.decoding)}}
              for j in specs}
    sig: dict[str, Any] = {
        "suite": f"{suite.name}@{suite.hash}",
        "sets": {s.key: f"{s.spec.dataset}:{len(s.table)}/{s.n_total}" for s in loaded},
        "per_set": settings.per_set if settings.per_set is not None else "full",
        "seed": settings.seed,
        "templates": templates,
        "judges": judges,
        "decoding": dict(settings.decoding),
        "constrain": settings.constrain,
        "panels": {k: list(v) for k, v in settings.panels.items()},
        **({"panel_rules": {k: {"rule": r.rule, "tie": r.tie, "min": r.min_members}
                            for k, r in settings.panel_rules.items()}} if settings.panel_rules else {}),
        "published": settings.published,
        "resampling": asdict(settings.resampling),
        "evalign": evalign.__version__,
    }
    sig["text"] = "|".join([
        f"bench:{sig['suite']}", f"sets:{','.join(sig['sets'])}", f"per_set:{sig['per_set']}", f"seed:{settings.seed}",
        f"templates:{stable_hash(templates, 12)}", f"judges:{stable_hash(judges, 12)}",
        "decoding:" + ",".join(f"{k}={v}" for k, v in sorted(settings.decoding.items())),
        f"constrain:{settings.constrain}",
        f"resamples:{settings.resampling.n_resamples}", f"evalign:{evalign.__version__}",
    ])  # fmt: skip
    return sig


def _fill_prefers_longer(rows: pd.DataFrame, runs: Sequence[SetRun]) -> None:
    """``prefers_longer`` of your judges that saw each pair once (no order diagnostics: a reward model)
    from the run's own length audit, which defines it the same way (in place)."""
    for r in runs:
        sel = (rows["scope"] == "set") & (rows["key"] == r.set) & (rows["judge"] == r.judge)
        length = (r.run.summary.bias or {}).get("length", {})
        if sel.any() and "prefers_longer" in length and rows.loc[sel, "prefers_longer"].isna().all():
            rows.loc[sel, "prefers_longer"] = float(length["prefers_longer"])


def _run_notes(loaded: Loaded, runs: Sequence[SetRun], settings: BenchSettings) -> list[str]:
    """What the tables do not show: sets sampled below the size a set needs to be ranked, and each
    judge's output constraint left out (``--constrain auto`` on a backend that cannot constrain)."""
    notes = []
    small = [s.key for s in loaded.sets if len(s.table) < settings.min_group_size]
    if small:
        notes.append(f"{', '.join(small)}: fewer than {settings.min_group_size} units (--min-group), too few to rank: "
                     f"their tables are empty; sample more with --per-set {settings.min_group_size} or more, or --full")
    by_note: dict[tuple[str, str], list[str]] = {}
    for r in runs:
        note = (r.run.summary.constraint or {}).get("note")
        if note:
            by_note.setdefault((r.judge, str(note)), []).append(r.set)
    notes += [f"judge {judge}: {note} ({', '.join(keys)})" for (judge, note), keys in by_note.items()]
    return notes


def _higher(runs: Sequence[SetRun]) -> dict[str, bool]:
    return {r.judge: r.higher_is_better for r in runs}


def profile_of(suite: Suite, loaded: Loaded, specs: Sequence[BenchJudge], runs: Sequence[SetRun],
               settings: BenchSettings, *, seconds: float = float("nan")) -> BenchProfile:
    """The profile of judged sets (see :mod:`evalign.bench.profile`)."""
    names = [*(j.name for j in specs), *settings.panels]
    roles = {**{j.name: "yours" for j in specs}, **{p: "panel" for p in settings.panels}}
    higher = _higher(runs)
    set_rows, set_results = evaluate_sets(loaded.sets, names, roles, settings, higher)
    cat_rows, cat_results = evaluate_categories([c.key for c in suite.categories], loaded.sets, names, roles,
                                                settings, higher)
    rows = pd.DataFrame([*set_rows, *cat_rows], columns=list(ROW_COLUMNS))
    _fill_prefers_longer(rows, runs)
    headlines = {k: r.trust[0].headline for k, r in {**set_results, **cat_results}.items()
                 if r.trust and r.trust[0].headline}
    notes = [f"{k}: {r.refused}" for k, r in {**set_results, **cat_results}.items() if r.refused]
    notes += _run_notes(loaded, runs, settings)
    notes += panel_call_notes(loaded.sets, settings.panels, settings.panel_rules)
    if rows.loc[(rows["scope"] == "set") & ~rows["role"].isin(("baseline", "ceiling")), "coverage_at_risk"].isna().any():
        notes.append(NO_CONFIDENCE)
    return BenchProfile(
        rows=rows, runs=pd.DataFrame([_run_row(r) for r in runs]),
        sets=pd.DataFrame([_set_row(s, set_results.get(s.key)) for s in loaded.sets]),
        categories=tuple(c for c in suite.categories if any(s.category == c.key for s in loaded.sets)),
        judges=tuple(names), signature=bench_signature(suite, loaded.sets, specs, settings), notes=tuple(notes),
        skipped=dict(loaded.skipped), headlines=headlines, seconds=seconds,
        batch=add_batch_counts([r.batch for r in runs if r.batch is not None]),
        tables={s.key: s.table for s in loaded.sets},
    )  # fmt: skip


def run_bench(judges: Sequence[BenchJudge], settings: BenchSettings | None = None, *, cache: Cache | None = None,
              out: Path | None = None, progress: BenchProgress | None = None,
              stage: StageFn | None = None) -> BenchProfile:
    """Run the bench (see the package doc): ``judges`` on the suite's sets, sampled as ``settings``
    say; ``cache``: where calls are stored (default: the project cache; running the same bench again
    makes no call twice); ``out``: a folder for the judges' progress logs; ``progress(judge, set,
    counts)`` and ``stage(message)`` report as it goes."""
    settings = settings or BenchSettings()
    t0 = time.perf_counter()
    names = [j.name for j in judges]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"judge name given twice: {dup[0]}")
    for p, members in settings.panels.items():
        unknown = [m for m in members if m not in names]
        if unknown:
            raise UsageError(f"panel {p}: no judge named {unknown[0]} (judges: {', '.join(names) or 'none'})")
        if p in names:
            raise UsageError(f"panel {p}: a judge has that name")
    suite = bench_suite(settings)
    if stage:
        stage(f"loading and sampling {len(suite.sets)} sets")
    loaded = load_suite_sets(suite, settings)
    if not loaded.sets:
        raise UsageError("no set of the bench could be loaded: " + "; ".join(f"{k}: {v}" for k, v in loaded.skipped.items()))
    runs = run_judges(judges, loaded.sets, decoding=settings.decoding, constrain=settings.constrain, cache=cache,
                      partial_dir=out, progress=progress, batch=settings.batch) if judges else []
    add_panels(loaded.sets, settings.panels, settings.panel_rules)
    if stage:
        stage("evaluating")
    return profile_of(suite, loaded, judges, runs, settings, seconds=time.perf_counter() - t0)


def suite_listing(settings: BenchSettings | None = None) -> pd.DataFrame:
    """The suite as a table (what ``evalign bench --list`` prints): per set its category, dataset,
    kind, template (mode and rubric), published columns, strata and whether it is in the default suite."""
    settings = settings or BenchSettings()
    suite = load_suite(settings.suite).with_templates(settings.templates)
    chosen = {s.key for s in suite.select(settings.sets).sets}
    rows = []
    for s in suite.sets:
        rubric = s.recipe.rubric
        rows.append({
            "key": s.key, "category": s.category, "category_title": suite.category(s.category).title,
            "dataset": s.dataset, "labels": s.labels, "kind": set_kind(s), "mode": s.recipe.mode,
            "template": s.recipe.template, "rubric": rubric.get("name", "inline") if isinstance(rubric, dict) else
            rubric or (f"{s.recipe.rubric_column} -> {s.recipe.rubric_map}" if s.recipe.rubric_column else None),
            "published": [p for _, p in s.published], "stratify": list(s.stratify),
            "statistic": PAIRWISE if set_kind(s) == "pairwise" else s.statistic, "default": s.default,
            "chosen": s.key in chosen,
        })  # fmt: skip
    out = pd.DataFrame(rows)
    shipped = Path(suite.source).resolve() == default_suite_path().resolve()
    out.attrs["suite"] = f"{suite.name}@{suite.hash} ({'shipped with evalign' if shipped else suite.source})"
    return out


__all__ = ["bench_signature", "bench_suite", "profile_of", "run_bench", "suite_listing"]
