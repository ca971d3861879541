"""Running a :class:`~evalign.run.config.RunConfig`: data -> metrics -> judges -> meta-evaluation ->
report, each evaluation in its own folder of the output folder.

Every step's result is written as soon as it is done (``<out>/<evaluation>/scored.jsonl`` after
each metric and judge, ``evaluation.json`` after the meta-evaluation) and recorded in
``<out>/.steps/`` under a key that hashes everything the step depends on (data, options, evalign
version); a re-run with the same config skips every step whose key is recorded. Metric scores and
judge calls are also cached by the project cache (:mod:`evalign.cache`), so an interrupted step
resumes too. ``<out>/resolved.yaml`` is the config with every default filled in and every
signature recorded: ``evalign run <out>/resolved.yaml`` reproduces the run (and says if a
signature changed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import inspect
import os
import pickle
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from evalign.backends import BackendOptions, backend_class, create_backend, returns_scores
from evalign.cache import Cache
from evalign.datasets.catalogue import require_texts
from evalign.errors import EvalignError, UsageError
from evalign.evaluate import Column, EvalSpec, Resampling, TrustRequest, evaluate
from evalign.evaluate.alt_test import dataset_settings
from evalign.evaluate.inputs import InputsError, InputSettings, load_inputs
from evalign.evaluate.prepare import resolve_columns
from evalign.io import (
    atomic_path,
    json_safe,
    write_json_atomic,
    write_table,
    write_text_atomic,
)
from evalign.judges.base import judge_for_backend
from evalign.judges.grading import judge_class
from evalign.judges.runner import run_judge
from evalign.judges.spec import JudgeSpec, make_judge
from evalign.metrics.base import get_metric, metric_class
from evalign.rank.leaderboard_run import judge_trust, leaderboard_spec, outcome_dict, run_leaderboard
from evalign.rank.panel import add_panel_columns
from evalign.redaction import redact_options, redact_url
from evalign.report import write_report
from evalign.report.assemble import from_results
from evalign.run.config import (
    JudgeConfig,
    LeaderboardConfig,
    MetricConfig,
    RunConfig,
    human_of,
    init_defaults,
)
from evalign.run.selective import as_dict as selective_dict
from evalign.run.selective import request as selective_request
from evalign.run.selective import save as save_selective
from evalign.scoring import score
from evalign.signature import package_version, stable_hash

Step = Callable[[str], None]


@dataclass
class EvaluationOutcome:
    """What one evaluation produced: the tables (``items``: the item table or the scored sides of
    the pairs; ``pairs`` or None), the evaluation result, metric runs' facts, judge signatures, the
    resolved meta spec and which steps were skipped."""

    name: str
    items: pd.DataFrame | None
    pairs: pd.DataFrame | None
    result: Any  # evalign.evaluate.EvalResult
    metric_columns: list[str]
    metric_runs: dict[str, dict[str, Any]]
    judge_runs: dict[str, dict[str, Any]]
    columns: list[Any]  # evalign.evaluate.Column
    meta: dict[str, Any]
    data: dict[str, Any]
    skipped: list[str] = field(default_factory=list)


@dataclass
class RunOutcome:
    """What a run produced: each evaluation, the report (ReportData or None), the files written,
    warnings (changed signatures) and the resolved config (a plain dict)."""

    evaluations: list[EvaluationOutcome]
    report: Any
    files: dict[str, Path]
    warnings: list[str]
    resolved: dict[str, Any]
    out: Path
    #: the leaderboards from pairwise verdicts (evalign.rank.leaderboard_run.LeaderboardOutcome), by name
    leaderboards: dict[str, Any] = field(default_factory=dict)


class _Steps:
    """The record of finished steps: ``<out>/.steps/<key>.pkl`` per step (its pickled outputs) and
    ``<key>.sig``, an HMAC-SHA256 of the pickle under a secret kept in this machine's evalign cache.
    A step file is read only when its signature verifies, so an output folder from elsewhere (or
    one whose cache was cleared) is recomputed, never unpickled."""

    def __init__(self, out: Path, force: bool, cache: Any) -> None:
        self.dir = out / ".steps"
        self.force = force
        secret = cache.get("run", "steps-secret")
        if secret is None:
            secret = secrets.token_bytes(32)
            cache.put("run", "steps-secret", secret)
        self._secret = bytes(secret)

    def _mac(self, data: bytes) -> str:
        return hmac.new(self._secret, data, hashlib.sha256).hexdigest()

    def get(self, key: str) -> Any:
        p, sig = self.dir / f"{key}.pkl", self.dir / f"{key}.sig"
        if self.force or not p.is_file() or not sig.is_file():
            return None
        data = p.read_bytes()
        if not hmac.compare_digest(sig.read_text(encoding="ascii").strip(), self._mac(data)):
            return None
        try:
            return pickle.loads(data)
        except Exception:  # a step file from another version: redo the step
            return None

    def put(self, key: str, value: Any) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        (self.dir / f"{key}.sig").unlink(missing_ok=True)
        with atomic_path(self.dir / f"{key}.pkl") as tmp:
            Path(tmp).write_bytes(data)
        write_text_atomic(self.dir / f"{key}.sig", self._mac(data))


def _key(*parts: Any) -> str:
    return stable_hash([package_version("evalign"), *parts], length=24)


# ------------------------------------------------------------------------------------------------
# data


def load_data(ev: Any) -> dict[str, Any]:
    """The tables and labels of one evaluation: ``items`` (the item table, or the pairs' sides),
    ``pairs`` (or None), ``human`` (an :class:`~evalign.evaluate.Human`), ``source`` (for
    messages), ``label`` (the data's name in titles: the file's name or ``dataset NAME``),
    ``dataset`` (the dataset's display name or None) and ``ds`` (the loaded dataset or None)."""
    d = ev.data
    given = ev.meta.get("human")
    try:
        labels = human_of(given) if given is not None else None
    except UsageError:
        raise
    except EvalignError as e:
        raise UsageError(f"evaluation '{ev.name}', meta.human: {e}") from None
    settings = InputSettings(file=d.file, dataset=d.dataset, data_dir=d.data_dir, fields=dict(d.fields),
                             labels=labels, rule="labels", scores=tuple(c.name for c in ev.columns),
                             label_set=d.labels)
    try:
        inputs = load_inputs(settings)
    except InputsError as e:
        raise UsageError(f"evaluation '{ev.name}': " + {
            "no_pref_columns": f"{d.file} has no pref_* columns: give meta.human.pref_columns",
            "no_labels": "data from a file needs meta.human (a rating column, system values or preference columns)",
            "file_not_pairs": f"preference labels need a pair table (response_a, response_b), and {d.file} is not one",
            "no_pair_table": f"dataset '{d.dataset}' has no pair table",
            "no_item_table": f"dataset '{d.dataset}' has no item table",
        }[e.reason]) from None
    except EvalignError as e:
        if getattr(e, "input_stage", None) != "labels" or isinstance(e, UsageError):
            raise
        raise UsageError(f"evaluation '{ev.name}', meta.human: {e}") from None
    source = str(d.file) if d.file is not None else f"dataset {d.dataset}"
    return {"items": inputs.items, "pairs": inputs.pairs, "human": inputs.human, "source": source,
            "label": d.file.name if d.file is not None else source, "dataset": inputs.dataset, "ds": inputs.ds}


def _human_dict(h: Any) -> dict[str, Any]:
    return {"column": h.column, "system": None if h.system is None else dict(h.system),
            "pref_columns": list(h.pref_columns), "higher_is_better": h.higher_is_better,
            "annotators": list(h.annotators), "source": h.source, "label": h.label}


# ------------------------------------------------------------------------------------------------
# metrics and judges


def _metric_options(mc: MetricConfig) -> dict[str, Any]:
    """A metric's options with the defaults of its declared command-line options filled in."""
    cls = metric_class(mc.name)
    defaults = init_defaults(cls)
    out: dict[str, Any] = {}
    for k, spec in cls.option_types.items():
        if k in mc.options:
            out[k] = mc.options[k]
        elif spec.cli and k in defaults and defaults[k] is not ... and _plain_value(defaults[k]):
            out[k] = defaults[k]
    out.update({k: v for k, v in mc.options.items() if k not in out})
    return out


def _plain_value(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float | str)


def _attach(table: pd.DataFrame, cols: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    for c in cols.columns:
        out[c] = cols[c].to_numpy()
    return out


def _step_columns(after: pd.DataFrame, column: str) -> pd.DataFrame:
    """The columns a metric or judge step made: ``column`` and ``column.<extra>``."""
    return after[[c for c in after.columns if c == column or str(c).startswith(column + ".")]].reset_index(drop=True)


def _judge_mode(jc: JudgeConfig) -> str:
    """The judge a config's ``mode`` names on its backend (``absolute`` / ``pairwise`` with the reward
    backend are the reward judges)."""
    return judge_for_backend(jc.mode, returns_scores(backend_class(jc.backend)))


def _judge_options(jc: JudgeConfig) -> dict[str, Any]:
    """The judge's constructor options: its own keys, ``options``, and the defaults of the rest."""
    cls = judge_class(_judge_mode(jc))
    opts: dict[str, Any] = {k: v for k, v in init_defaults(cls).items() if v is not ... and _plain_value(v)}
    opts.update({k: v for k, v in dict(getattr(cls, "sampling_defaults", {})).items() if _plain_value(v)})
    opts.update({"template": jc.template or cls.default_template, "column": jc.name})
    if cls.uses_rubric:
        rubric = jc.rubric or (None if jc.rubric_column else cls.default_rubric or "helpfulness")
        opts.update({"rubric": rubric, "rubric_column": jc.rubric_column})
    else:
        opts.pop("rubric", None)
        opts.pop("rubric_column", None)
        if jc.rubric or jc.rubric_column:
            raise UsageError(f"judge '{jc.mode}' does not use a rubric")
    opts.update(jc.options)
    return opts


def _backend_options(jc: JudgeConfig) -> dict[str, Any]:
    cls = backend_class(jc.backend)
    opts = {k: v for k, v in init_defaults(cls).items() if v is not ... and _plain_value(v)
            and k not in ("base_url", "model", "model_path", "api_key_env")}
    opts.update(jc.backend_options)
    return opts


def _make_backend(jc: JudgeConfig) -> Any:
    return create_backend(jc.backend, BackendOptions(model=jc.model, base_url=jc.base_url, api_key_env=jc.api_key_env,
                                                     extra=dict(jc.backend_options)))


def _judge_dict(jc: JudgeConfig) -> dict[str, Any]:
    return {"mode": jc.mode, "name": jc.name, "backend": jc.backend, "model": jc.model,
            "base_url": redact_url(jc.base_url) if jc.base_url else None,
            "api_key_env": jc.api_key_env, "template": jc.template, "rubric": jc.rubric,
            "rubric_column": jc.rubric_column, "options": redact_options(jc.options),
            "backend_options": redact_options(jc.backend_options)}


# ------------------------------------------------------------------------------------------------
# one evaluation


def run_evaluation(ev: Any, out: Path, steps: _Steps, *, step: Step, cache: Any = None,
                   on_progress: Callable[[Any, int, int], None] | None = None) -> EvaluationOutcome:
    """Load, score, judge and meta-evaluate one evaluation (see the module doc)."""
    folder = out / ev.name
    folder.mkdir(parents=True, exist_ok=True)
    if (ev.metrics or ev.judges) and ev.data.file is None and ev.data.dataset:
        try:  # metrics and judges read texts: a dataset without them is refused in one line
            require_texts(ev.data.dataset)
        except EvalignError as e:
            raise UsageError(f"evaluation '{ev.name}': {e}") from None
    step(f"{ev.name}: loading data")
    d = load_data(ev)
    items: pd.DataFrame = d["items"]
    pairs: pd.DataFrame | None = d["pairs"]
    data_dict = {"dataset": ev.data.dataset, "data_dir": ev.data.data_dir, "file": ev.data.file,
                 "fields": dict(ev.data.fields)}
    data_key = _key("data", {k: str(v) for k, v in data_dict.items()}, frame_key(items),
                    frame_key(pairs) if pairs is not None else None)
    run = _Run(ev, folder, steps, step, data_key, items, pairs)
    run.metrics(on_progress)
    run.judges(cache)
    run.panels()
    if not ev.metrics and not ev.judges:
        write_table(run.items, folder / "scored.jsonl")
    run.given_columns(d["source"])
    result, meta_resolved = run.meta(d)
    return EvaluationOutcome(ev.name, run.items, run.pairs, result, [c.name for c in run.cols if c.metric is not None],
                             run.metric_runs, run.judge_runs, run.cols, meta_resolved, data_dict, run.skipped)


@dataclass
class _Run:
    """One evaluation's steps in order, each one recorded under a key of what it depends on."""

    ev: Any
    folder: Path
    steps: _Steps
    step: Step
    data_key: str
    items: pd.DataFrame
    pairs: pd.DataFrame | None
    cols: list[Any] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    metric_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    metric_keys: list[str] = field(default_factory=list)
    judge_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    judge_keys: list[str] = field(default_factory=list)
    judge_names: list[str] = field(default_factory=list)

    def metrics(self, on_progress: Callable[[Any, int, int], None] | None) -> None:
        """The metrics: one step each, written as each finishes."""
        name = self.ev.name
        for mc in self.ev.metrics:
            opts = _metric_options(mc)
            m = get_metric(mc.name, **opts)
            key = _key("metric", self.data_key, mc.name, opts)
            self.metric_keys.append(key)
            done = self.steps.get(key)
            if done is not None:
                self.items = _attach(self.items, done["columns"])
                self.metric_runs[m.column] = done["run"]
                self.skipped.append(f"metric {m.column}")
                self.step(f"{name}: {m.column} (done before)")
            else:
                self.step(f"{name}: scoring {len(self.items)} responses with {m.column}")
                self.items, runs = score(self.items, [m], on_progress=on_progress)
                r = runs[0]
                self.metric_runs[m.column] = {"signature": r.signature, "seconds": r.seconds, "n_items": r.n_items,
                                              "seconds_per_1000": r.seconds_per_1000, "info": r.info}
                self.steps.put(key, {"columns": _step_columns(self.items, m.column), "run": self.metric_runs[m.column]})
                write_table(self.items, self.folder / "scored.jsonl")
            self.cols.append(Column(m.column, "metric", m.higher_is_better, system_level="mean" if self.pairs is not None
                                    else getattr(m, "system_level", "mean"), metric=m))

    def judges(self, cache: Any) -> None:
        """The judges: one step each (calls are cached as they return; a partial log while running)."""
        for jc in self.ev.judges:
            jopts = _judge_options(jc)
            judge = make_judge(JudgeSpec.from_options(_judge_mode(jc), jopts))
            on_pairs = judge.pairwise or judge.name == "prometheus_ranking"
            if on_pairs and self.pairs is None:
                raise UsageError(f"evaluation '{self.ev.name}': judge '{jc.mode}' grades pairs, and this evaluation's "
                                 "labels are not preferences")
            table = self.pairs if on_pairs else self.items
            assert table is not None
            be = _make_backend(jc)
            key = _key("judge", self.data_key, jc.mode, jopts, be.identity())
            self.judge_keys.append(key)
            table = self._judge(key, table, judge, be, cache, on_pairs)
            if on_pairs:
                self.pairs = table
                write_table(self.pairs, self.folder / "pairs.jsonl")
            else:
                self.items = table
                write_table(self.items, self.folder / "scored.jsonl")
            self.judge_names.append(judge.column)

    def _judge(self, key: str, table: pd.DataFrame, judge: Any, be: Any, cache: Any, on_pairs: bool) -> pd.DataFrame:
        """One judge's step: its columns of ``table``, recorded or computed."""
        done = self.steps.get(key)
        if done is not None:
            self.judge_runs[judge.column] = done["run"]
            self.skipped.append(f"judge {judge.column}")
            self.step(f"{self.ev.name}: judge {judge.column} (done before)")
            return _attach(table, done["columns"])
        self.step(f"{self.ev.name}: judging {len(table)} {'pairs' if on_pairs else 'responses'} with {judge.column}")
        partial = self.folder / f"{_safe(judge.column)}.partial.jsonl"
        run = run_judge(table, judge, be, cache=cache, partial_path=partial)
        summary = run.summary.as_dict()
        self.judge_runs[judge.column] = {"signature": run.signature, "summary": summary}
        self.steps.put(key, {"columns": _step_columns(run.table, judge.column), "run": self.judge_runs[judge.column]})
        partial.unlink(missing_ok=True)
        write_json_atomic(self.folder / f"{_safe(judge.column)}.summary.json", summary)
        return run.table  # type: ignore[no-any-return]

    def panels(self) -> None:
        """Each panel as a judge column of the pair table (verdicts) or the item table (grades): its verdict
        or grade, ``.confidence``, ``.confidence_source`` and ``.status`` (:mod:`evalign.rank.panel`)."""
        for p in self.ev.panels:
            table = self.pairs if self.pairs is not None else self.items
            missing = [m for m in p.members if m not in table.columns]
            if missing:
                raise UsageError(f"evaluation '{self.ev.name}': panel {p.name}: no column {missing[0]} (its members are "
                                 "columns of the data or judges of this evaluation)")
            table, _ = add_panel_columns(table, p, values="verdicts" if self.pairs is not None else "grades")
            if self.pairs is not None:
                self.pairs = table
            else:
                self.items = table
            self.judge_names.append(p.name)

    def given_columns(self, source: str) -> None:
        """The precomputed columns and the judges' columns."""
        names = [c.name for c in self.ev.columns] + self.judge_names
        if not names:
            return
        table_out, more, _ = resolve_columns(self.items, names, source=source, pairs=self.pairs)
        assert table_out is not None
        self.items = table_out
        given = {c.name: c for c in self.ev.columns}
        for c in more:
            g = given.get(c.name)
            if g is not None:
                c = dataclasses.replace(c, kind=g.kind or c.kind, higher_is_better=c.higher_is_better
                                        if g.higher_is_better is None else g.higher_is_better)
            self.cols.append(c)

    def meta(self, d: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The meta-evaluation: the EvalSpec built from the config's meta section. Returns (the
        result, the resolved meta section)."""
        costs = {c: r["seconds_per_1000"] for c, r in self.metric_runs.items()}
        spec = build_spec(self.ev, d, self.cols, items=self.items, pairs=self.pairs, costs=costs)
        meta_resolved = _meta_dict(spec, self.ev.meta.get("selective"))
        col_dicts = [{"name": c.name, "kind": c.kind, "higher_is_better": c.higher_is_better, "verdict": c.verdict,
                      "system_level": c.system_level} for c in self.cols]
        # the number of worker processes changes no result: it is no part of the step's key
        keyed = {**meta_resolved, "resampling": {k: v for k, v in meta_resolved["resampling"].items() if k != "workers"}}
        key = _key("meta", self.data_key, self.metric_keys, self.judge_keys, col_dicts, keyed)
        result = self.steps.get(key)
        if result is not None:
            self.skipped.append("meta-evaluation")
            self.step(f"{self.ev.name}: meta-evaluation (done before)")
        else:
            rs = spec.resampling
            self.step(f"{self.ev.name}: meta-evaluating ({rs.n_resamples} resamples, {rs.n_permutations} "
                      f"permutations, seed {rs.seed})")
            result = evaluate(spec)
            self.steps.put(key, result)
        written = save_selective(result, self.ev.meta.get("selective"), self.ev.data.file)
        if written is not None:
            self.step(f"{self.ev.name}: calibration written to {written}")
        return result, meta_resolved


def build_spec(ev: Any, d: Mapping[str, Any], cols: list[Any], *, items: pd.DataFrame | None,
               pairs: pd.DataFrame | None, costs: Mapping[str, float] | None = None) -> Any:
    """The :class:`~evalign.evaluate.EvalSpec` of an evaluation's ``meta`` section, with the
    defaults made explicit (the trust tables, the minimum group size, the level)."""
    meta = dict(ev.meta)
    spec_kw = {k: v for k, v in meta.items() if k not in ("human", "resampling", "trust", "alt_test", "selective")}
    spec_kw.setdefault("source", d["label"])
    spec_kw.setdefault("dataset", d["dataset"])
    try:
        if meta.get("alt_test") is not None:
            alt = dict(meta["alt_test"])
            ds = d.get("ds")
            spec_kw["alt_test"] = dataset_settings(ds.name if ds is not None else None, alt.pop("epsilon", None), **alt)
        spec = EvalSpec(human=d["human"], columns=tuple(cols), items=items, pairs=pairs,
                        resampling=Resampling(**meta.get("resampling", {})),
                        trust=tuple(TrustRequest(**t) for t in meta.get("trust", [])), costs=dict(costs or {}),
                        selective=selective_request(meta.get("selective")), **spec_kw)
        reqs = spec.trust_requests()
        return dataclasses.replace(spec, trust=reqs, min_group_size=spec.group_floor(),
                                   level=spec.level or (None if spec.mode == "pairs" else reqs[0].level))
    except EvalignError as e:
        raise UsageError(f"evaluation '{ev.name}', meta: {e}") from None


def dry_meta(cfg: RunConfig) -> dict[str, dict[str, Any]]:
    """Per evaluation, its ``meta`` section with every default filled in, without scoring or
    judging (the data is loaded to find the labels)."""
    out: dict[str, dict[str, Any]] = {}
    for ev in cfg.evaluations:
        d = load_data(ev)
        cols = [Column(f"{m.name}#{i}") for i, m in enumerate(ev.metrics)]
        cols += [Column(c.name) for c in ev.columns] + [Column(f"judge#{i}", "judge") for i in range(len(ev.judges))]
        out[ev.name] = _meta_dict(build_spec(ev, d, cols, items=d["items"], pairs=d["pairs"]), ev.meta.get("selective"))
    return out


def frame_key(df: pd.DataFrame | None) -> str | None:
    """A key of a table's content, its columns AND its row order: the per-row hashes in order,
    hashed together (a step's columns are attached by position, so a reordered table must never
    find the steps of the old order)."""
    if df is None:
        return None
    rows = pd.util.hash_pandas_object(df.astype(str), index=False).to_numpy(dtype="uint64")
    h = hashlib.sha256(rows.tobytes())
    h.update(repr([(str(c), str(t)) for c, t in df.dtypes.items()]).encode("utf-8"))
    return f"{h.hexdigest()}:{len(df)}"


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def _meta_dict(spec: Any, conf: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The EvalSpec as the config's ``meta`` section (every field, defaults filled in; ``conf``: the
    config's ``meta.selective``, for where its calibration is saved)."""
    return {
        "human": _human_dict(spec.human),
        "level": spec.level,
        "grouping": spec.grouping,
        "by": spec.by,
        "trust": [dataclasses.asdict(t) for t in spec.trust],
        "min_group_size": spec.min_group_size,
        "resampling": dataclasses.asdict(spec.resampling),
        "source": spec.source,
        "dataset": spec.dataset,
        "baselines": spec.baselines,
        "curves": spec.curves,
        "clusters": spec.clusters,
        "alt_test": None if spec.alt_test is None else {k: v for k, v in dataclasses.asdict(spec.alt_test).items()
                                                        if k != "epsilon_source"},
        "agreement": spec.agreement,
        **({} if spec.selective is None else {"selective": selective_dict(spec.selective, conf)}),
    }


# ------------------------------------------------------------------------------------------------
# the whole run


def run_config(cfg: RunConfig, *, out: str | Path | None = None, force: bool = False, step: Step | None = None,
               on_progress: Callable[[Any, int, int], None] | None = None) -> RunOutcome:
    """Run every evaluation of ``cfg``, write its outputs, the report, ``resolved.yaml`` and
    ``run.json`` into the output folder (``out`` overrides the config's); ``force`` redoes every
    step. Returns what was done."""
    say = step or (lambda _s: None)
    folder = cfg.out_dir(out)
    folder.mkdir(parents=True, exist_ok=True)
    cache = Cache()
    steps = _Steps(folder, force, cache)
    t0 = time.perf_counter()
    outcomes: list[EvaluationOutcome] = []
    files: dict[str, Path] = {}
    try:
        for ev in cfg.evaluations:
            oc = run_evaluation(ev, folder, steps, step=say, cache=cache, on_progress=on_progress)
            outcomes.append(oc)
            files.update(_write_evaluation(oc, folder, cfg.report.formats))
            resolved = resolve(cfg, outcomes, folder, partial=True)
            _write_resolved(folder / "resolved.yaml", resolved)
    finally:
        cache.close()
    boards: dict[str, Any] = {}
    for lc in cfg.leaderboards:
        say(f"leaderboard {lc.name}: ranking the verdicts of {lc.verdicts.name}")
        boards[lc.name] = run_board(lc, outcomes)
        files.update(_write_board(lc.name, boards[lc.name], folder, cfg.report.formats))
    resolved = resolve(cfg, outcomes, folder)
    warnings = compare_signatures(cfg.signatures, resolved["signatures"])
    report = None
    if "html" in cfg.report.formats:
        say("writing the report")
        report, written = _write_report(cfg, outcomes, folder, boards)
        files.update(written)
    _write_resolved(folder / "resolved.yaml", resolved)
    files["resolved"] = folder / "resolved.yaml"
    summary = {
        "config": str(cfg.path) if cfg.path else None,
        "seconds": round(time.perf_counter() - t0, 3),
        "evaluations": {o.name: {"skipped": o.skipped, "refused": o.result.refused, "warnings": list(o.result.warnings),
                                 "signature": o.result.signature.get("text")} for o in outcomes},
        "signature_changes": warnings,
        "files": sorted({os.path.relpath(p, folder) for p in files.values()}),
    }
    write_json_atomic(folder / "run.json", summary)
    files["run.json"] = folder / "run.json"
    return RunOutcome(outcomes, report, files, warnings, resolved, folder, boards)


def run_board(lc: LeaderboardConfig, outcomes: list[EvaluationOutcome]) -> Any:
    """One ``leaderboards`` entry: its verdicts ranked, with the judge's agreement with humans from the
    evaluation the config names (else from the first evaluation of the run that ranked the column)."""
    column = lc.trust_column or lc.spec.column
    named = [o for o in outcomes if o.name == lc.trust_evaluation] if lc.trust_evaluation else outcomes
    trust = next((t for o in named if (t := judge_trust(o.result, column)) is not None), None)
    if trust is None and lc.trust_evaluation:
        raise EvalignError(f"leaderboard '{lc.name}': the evaluation '{lc.trust_evaluation}' did not rank the "
                           f"judge column '{column}' (give trust.column: the judge's column there)")
    return run_leaderboard(lc.verdicts, lc.spec, trust=trust)


def _write_board(name: str, board: Any, out: Path, formats: tuple[str, ...]) -> dict[str, Path]:
    folder = out / "leaderboards"
    files: dict[str, Path] = {}
    if "json" in formats:
        write_json_atomic(folder / f"{name}.json", outcome_dict(board))
        files[f"leaderboard:{name}:json"] = folder / f"{name}.json"
    if "csv" in formats:
        write_table(board.board.table, folder / f"{name}.csv")
        files[f"leaderboard:{name}:csv"] = folder / f"{name}.csv"
    return files


def _write_evaluation(oc: EvaluationOutcome, out: Path, formats: tuple[str, ...]) -> dict[str, Path]:
    folder = out / oc.name
    files: dict[str, Path] = {}
    if oc.items is not None:
        write_table(oc.items, folder / "scored.jsonl")
        files[f"{oc.name}:scored"] = folder / "scored.jsonl"
    if oc.pairs is not None and oc.judge_runs and (folder / "pairs.jsonl").exists():
        write_table(oc.pairs, folder / "pairs.jsonl")
        files[f"{oc.name}:pairs"] = folder / "pairs.jsonl"
    r = oc.result
    if "json" in formats:
        write_json_atomic(folder / "evaluation.json", {**r.to_json(), "metric_runs": oc.metric_runs,
                                                        "judge_signatures": {k: v["signature"] for k, v in
                                                                             oc.judge_runs.items()}})
        files[f"{oc.name}:json"] = folder / "evaluation.json"
    if "csv" in formats:
        tables: dict[str, pd.DataFrame] = {"overview.csv": r.overview, "missing.csv": r.missing}
        if r.systems is not None:
            tables["systems.csv"] = r.systems
        if r.breakdown is not None:
            tables["breakdown.csv"] = r.breakdown
        for t in r.trust:
            tables[f"trust_{t.statistic}_{t.level}" + (f"_{t.grouping}" if t.level == "item" and r.mode != "pairs"
                                                        else "") + ".csv"] = t.rows
        for name, df in tables.items():
            write_table(df, folder / name)
            files[f"{oc.name}:{name}"] = folder / name
    return files


def _write_report(cfg: RunConfig, outcomes: list[EvaluationOutcome], out: Path,
                  boards: Mapping[str, Any]) -> tuple[Any, dict[str, Path]]:
    sigs = [f"{c}: {r['signature']}" for o in outcomes for c, r in o.metric_runs.items()]
    sigs += [f"{c}: {r['signature']}" for o in outcomes for c, r in o.judge_runs.items()]
    one = outcomes[0] if len(outcomes) == 1 else None
    item_kw: dict[str, Any] = {}
    if one is not None and one.result.mode == "items":
        item_kw = {"item_table": one.items, "human_col": one.meta["human"]["column"],
                   "judge_cols": [c.name for c in one.columns if c.kind == "judge"]}
    title = cfg.report.title or f"evalign run: {cfg.name}"
    subtitle = cfg.report.subtitle or "; ".join(
        f"{o.name}: {o.result.n_items} {'pairs' if o.result.mode == 'pairs' else 'items'}, labels: {o.result.human}"
        for o in outcomes)
    data = from_results([o.result for o in outcomes], title=title, subtitle=subtitle,
                        notes=[*cfg.report.notes, *sigs], by_task_label=cfg.report.by_task_label, **item_kw)
    data = dataclasses.replace(data, pairwise_boards=list(boards.values()))
    written = write_report(out, data)
    return data, {k: Path(v) for k, v in written.items()}


# ------------------------------------------------------------------------------------------------
# the resolved config


def _rel(p: Path | None, folder: Path) -> str | None:
    if p is None:
        return None
    try:
        return os.path.relpath(Path(p).resolve(), folder.resolve())
    except ValueError:  # another drive (Windows)
        return str(Path(p).resolve())


def resolve(cfg: RunConfig, outcomes: list[EvaluationOutcome], folder: Path, *, partial: bool = False,
            metas: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The config with every default filled in (as written to ``<out>/resolved.yaml``: paths
    relative to ``folder``) and ``signatures``: per evaluation its metrics', judges' and the
    meta-evaluation's signatures. ``outcomes``: the evaluations run so far (the rest are written
    as configured when ``partial``, with ``metas[name]`` as their meta section when given)."""
    by_name = {o.name: o for o in outcomes}
    evals: list[dict[str, Any]] = []
    sigs: dict[str, Any] = {}
    for ev in cfg.evaluations:
        o = by_name.get(ev.name)
        if o is None and not partial:
            continue
        data = {"dataset": ev.data.dataset, "data_dir": _rel(ev.data.data_dir, folder),
                "file": _rel(ev.data.file, folder), "fields": dict(ev.data.fields)}
        entry: dict[str, Any] = {
            "name": ev.name,
            "data": data,
            "metrics": [{"name": m.name, "options": _metric_options(m)} for m in ev.metrics],
            "columns": [{"name": c.name, "kind": c.kind, "higher_is_better": c.higher_is_better}
                        for c in ev.columns],
            "judges": [_judge_dict(dataclasses.replace(j, options=_judge_options(j), backend_options=_backend_options(j)))
                       for j in ev.judges],
            "meta": dict((metas or {}).get(ev.name, ev.meta)),
        }
        if o is not None:
            kinds = {c.name: c for c in o.columns}
            entry["columns"] = [{"name": c.name, "kind": kinds[c.name].kind if c.name in kinds else c.kind,
                                 "higher_is_better": kinds[c.name].higher_is_better if c.name in kinds
                                 else c.higher_is_better} for c in ev.columns]
            entry["meta"] = o.meta
            sigs[ev.name] = {"metrics": {c: r["signature"] for c, r in o.metric_runs.items()},
                             "judges": {c: r["signature"] for c, r in o.judge_runs.items()},
                             "evaluation": o.result.signature.get("text")}
        for j in entry["judges"]:
            for k in ("template", "rubric", "rubric_column"):
                j[k] = j["options"].pop(k, j[k])
            j["options"].pop("column", None)
        evals.append(entry)
    return {
        "version": cfg.version,
        "name": cfg.name,
        "evaluations": evals,
        **({"leaderboards": [_board_dict(b, folder) for b in cfg.leaderboards]} if cfg.leaderboards else {}),
        "report": {"out": ".", "formats": list(cfg.report.formats), "title": cfg.report.title,
                   "subtitle": cfg.report.subtitle, "notes": list(cfg.report.notes),
                   "by_task_label": cfg.report.by_task_label},
        "signatures": sigs,
    }


def _board_dict(b: LeaderboardConfig, folder: Path) -> dict[str, Any]:
    """A ``leaderboards`` entry with every option's default filled in."""
    defaults = {k: p.default for k, p in inspect.signature(leaderboard_spec).parameters.items()}
    options = {k: list(v) if isinstance(v, tuple) else v for k, v in {**defaults, **b.options}.items()}
    return {"name": b.name, "verdicts": _rel(b.verdicts, folder), **options,
            "trust": {"evaluation": b.trust_evaluation, "column": b.trust_column}}


def _write_resolved(path: Path, resolved: Mapping[str, Any]) -> None:
    head = ("# The resolved run config written by `evalign run`: every default filled in, every signature\n"
            "# recorded. `evalign run` on this file reproduces the run (and warns if a signature changed).\n")
    write_text_atomic(path, head + resolved_yaml(resolved))


def resolved_yaml(resolved: Mapping[str, Any]) -> str:
    """A resolved config (see :func:`resolve`) as YAML text."""
    return yaml.safe_dump(json_safe(dict(resolved)), sort_keys=False, allow_unicode=True, width=100)


def dry_run(cfg: RunConfig, *, out: str | Path | None = None) -> str:
    """The config with every default filled in, as YAML, without scoring, judging or writing (the
    data is loaded to find the labels; no signatures)."""
    resolved = resolve(cfg, [], cfg.out_dir(out), partial=True, metas=dry_meta(cfg))
    resolved.pop("signatures")
    return resolved_yaml(resolved)


def compare_signatures(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """One line per signature recorded in ``before`` (a resolved config's) that differs now."""
    out: list[str] = []
    for ev, kinds in (before or {}).items():
        if not isinstance(kinds, Mapping):
            continue
        cur = now.get(ev, {})
        for kind, val in kinds.items():
            if isinstance(val, Mapping):
                for name, sig in val.items():
                    new = cur.get(kind, {}).get(name)
                    if new != sig:
                        out.append(f"{ev}: the signature of {name} changed: was {sig}, now {new}")
            elif cur.get(kind) != val:
                out.append(f"{ev}: the {kind} signature changed: was {val}, now {cur.get(kind)}")
    return out
