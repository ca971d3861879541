"""The run config: one YAML file describing data, metrics, judges, the meta-evaluation and the report.

Layout (every key is checked; an unknown key is a :class:`~evalign.errors.UsageError` naming the
file, the line and the key, with a "did you mean")::

    version: 1
    name: demo                      # names the default output folder (evalign-<name>)
    metrics:                        # default metrics of every evaluation
      - bleu
      - {name: semscore, options: {model: minilm}}
    evaluations:
      - name: pandalm
        data: {dataset: pandalm}    # or {file: items.jsonl, fields: {response: output}}
        metrics: [...]              # instead of the top-level list
        columns: [judge:gpt-3.5-turbo]        # precomputed metric or judge columns
        judges:                     # judges to run
          - {mode: absolute, backend: openai, model: m, base_url: http://localhost:8000/v1,
             api_key_env: OPENAI_API_KEY}
        meta:                       # the fields of evalign.evaluate.EvalSpec
          human: {pref_columns: [pref_1, pref_2, pref_3]}
          by: task
          resampling: {n_resamples: 1000, n_permutations: 1000, seed: 0, method: auto, workers: 2}
    leaderboards:                   # rankings from pairwise verdicts (the options of `evalign leaderboard`)
      - name: si_pairwise
        verdicts: verdicts.jsonl    # output of `evalign judge` in relative mode, or any verdict table
        judge: prometheus_relative  # or verdict: COLUMN, or panel: [COL, COL, ...]
        baseline: text-davinci-003
        bootstrap: 1000
        trust: {evaluation: pandalm, column: prometheus_relative}   # the judge's agreement with humans
    report: {out: null, formats: [html, json, csv], title: ...}

``meta`` is the evaluation layer's spec: its keys are the fields of
:class:`~evalign.evaluate.EvalSpec` (less the tables and columns, which the run makes), with
``human``, ``resampling`` and each ``trust`` entry given by the fields of
:class:`~evalign.evaluate.Human`, :class:`~evalign.evaluate.Resampling` and
:class:`~evalign.evaluate.TrustRequest`. Relative paths are relative to the config file's folder.
A judge's API key is named by its environment variable (``api_key_env``), never written in the file.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalign.backends import BACKENDS, backend_class, list_backends
from evalign.backends.registry import default_api_key_env
from evalign.datasets.base import bundled_path
from evalign.datasets.catalogue import label_set, parse_spec
from evalign.errors import EvalignError, InputError, UsageError, unknown_name
from evalign.evaluate import EvalSpec, Human, Resampling, TrustRequest
from evalign.evaluate.spec import AGREEMENTS, GROUPINGS, LEVELS
from evalign.io.yaml_files import MarkedMap, read_marked
from evalign.judges.grading import JUDGES, SAMPLING_KEYS
from evalign.judges.option_rules import check_constrain
from evalign.meta.alt_test import AltTestSettings
from evalign.metrics.base import METRICS, metric_class
from evalign.metrics.options import check_options
from evalign.rank.leaderboard_run import leaderboard_spec
from evalign.rank.panel import panel_entry_problem, panel_spec_of
from evalign.run.config_checks import Where as _Where
from evalign.run.config_checks import check_keys
from evalign.run.config_checks import kind_of as _kind
from evalign.run.config_checks import list_of as _list
from evalign.run.config_checks import mapping_of as _mapping
from evalign.run.config_checks import path_of as _path
from evalign.run.config_checks import plain as _plain
from evalign.run.config_checks import typed as _typed
from evalign.run.selective import parse_selective

#: the config format's version
VERSION = 1
#: what ``report.formats`` may name
FORMATS = ("html", "json", "csv")
#: keys of each section
TOP_KEYS = ("version", "name", "metrics", "evaluations", "leaderboards", "report", "signatures")
EVALUATION_KEYS = ("name", "data", "metrics", "columns", "judges", "panels", "meta")
DATA_KEYS = ("dataset", "data_dir", "file", "fields", "labels")
METRIC_KEYS = ("name", "options")
COLUMN_KEYS = ("name", "kind", "higher_is_better")
JUDGE_KEYS = ("mode", "name", "backend", "model", "base_url", "api_key_env", "template", "rubric",
              "rubric_column", "options", "backend_options")
REPORT_KEYS = ("out", "formats", "title", "subtitle", "notes", "by_task_label")
#: keys of a ``leaderboards`` entry: the options of :func:`evalign.rank.leaderboard_run.leaderboard_spec`,
#: its ``name``, the ``verdicts`` file and ``trust`` (the judge's trust from an evaluation of the run)
LEADERBOARD_OPTIONS = ("verdict", "judge", "panel", "panel_rule", "panel_tie", "panel_min", "baseline", "anchor", "bootstrap", "resample",
                       "seed", "alpha", "orders", "lc", "difficulty", "judge_models", "skip_self")
LEADERBOARD_KEYS = ("name", "verdicts", "trust", *LEADERBOARD_OPTIONS)
TRUST_KEYS = ("evaluation", "column")
#: EvalSpec fields the run makes itself (not set in ``meta``)
META_COMPUTED = ("human", "columns", "items", "pairs", "costs", "resampling", "trust", "alt_test", "selective")
FIELD_NAMES = ("id", "system", "instruction", "input", "reference", "response", "task", "language")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


# ------------------------------------------------------------------------------------------------
# the parsed config


@dataclass(frozen=True)
class MetricConfig:
    """A metric to compute: its registered ``name`` and constructor ``options`` (checked against
    the metric's ``option_types``)."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ColumnConfig:
    """A precomputed metric or judge column of the data. ``kind`` (``metric`` / ``judge``) and
    ``higher_is_better`` are found from the column when None."""

    name: str
    kind: str | None = None
    higher_is_better: bool | None = None


@dataclass(frozen=True)
class JudgeConfig:
    """An LLM judge to run: ``mode`` (a judge name or mode alias), the ``backend`` and ``model``,
    ``base_url`` (openai), ``api_key_env`` (the NAME of the environment variable holding the key),
    ``template``, ``rubric``, ``rubric_column``, ``name`` (its column), further judge ``options``
    (sampling, samples, reask, tie, ...) and ``backend_options`` (concurrency, timeout, ...)."""

    mode: str
    backend: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    template: str | None = None
    rubric: str | None = None
    rubric_column: str | None = None
    name: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    backend_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataConfig:
    """Where an evaluation's data comes from: a registered ``dataset`` (``NAME`` or
    ``NAME:VARIANT``; ``data_dir`` for files that do not ship) and/or a ``file`` (items or a pair
    table) read with the ``fields`` mapping (canonical name -> the file's field). With both, the
    file is the table and the dataset gives the labels. ``labels``: one of the dataset's label sets
    (as ``--labels NAME``; see ``evalign datasets``)."""

    dataset: str | None = None
    data_dir: Path | None = None
    file: Path | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    labels: str | None = None


@dataclass(frozen=True)
class EvaluationConfig:
    """One evaluation: its ``name`` (its output folder), data, metrics to compute, precomputed
    ``columns``, ``judges`` to run and the ``meta`` spec (:class:`~evalign.evaluate.EvalSpec`
    fields; ``human``/``resampling``/``trust`` as dicts of their dataclasses' fields)."""

    name: str
    data: DataConfig
    metrics: tuple[MetricConfig, ...] = ()
    columns: tuple[ColumnConfig, ...] = ()
    judges: tuple[JudgeConfig, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: panels over the columns and judges (:class:`~evalign.rank.panel.PanelSpec`; ``panels:`` NAME -> a list of
    #: members or ``{members, rule, tie, min}``), each a judge of the evaluation with its vote confidence
    panels: tuple[Any, ...] = ()
    #: the config line of this evaluation (for messages)
    line: int = 0


@dataclass(frozen=True)
class LeaderboardConfig:
    """A leaderboard from pairwise verdicts: its ``name`` (its output files), the ``verdicts`` file, the
    ``spec`` (:class:`~evalign.rank.leaderboard_run.LeaderboardSpec`, built from the options of
    ``evalign leaderboard``) and where the judge's agreement with humans comes from: the evaluation
    ``trust_evaluation`` of this run (None: any evaluation that ranked the column) and its column
    ``trust_column`` (None: the ranked column's name)."""

    name: str
    verdicts: Path
    spec: Any  # evalign.rank.leaderboard_run.LeaderboardSpec
    options: Mapping[str, Any] = field(default_factory=dict)
    trust_evaluation: str | None = None
    trust_column: str | None = None
    line: int = 0


@dataclass(frozen=True)
class ReportConfig:
    """The outputs: ``out`` (folder; None = ``evalign-<name>`` in the current folder),
    ``formats`` (``html`` report with figures and tables, ``json`` evaluation results, ``csv``
    tables), the HTML ``title``, ``subtitle``, extra ``notes`` and the breakdown's ``by_task_label``."""

    out: Path | None = None
    formats: tuple[str, ...] = FORMATS
    title: str | None = None
    subtitle: str | None = None
    notes: tuple[str, ...] = ()
    by_task_label: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """A whole run (see the module doc). ``path``: the file it was read from; ``signatures``:
    those recorded by an earlier run (a resolved config), compared with this run's."""

    name: str
    evaluations: tuple[EvaluationConfig, ...]
    report: ReportConfig = field(default_factory=ReportConfig)
    leaderboards: tuple[LeaderboardConfig, ...] = ()
    metrics: tuple[MetricConfig, ...] = ()
    signatures: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None
    version: int = VERSION

    def out_dir(self, override: str | Path | None = None) -> Path:
        """The output folder: ``override`` (the command line's ``--out``), else ``report.out``,
        else ``evalign-<name>`` in the current folder."""
        if override is not None:
            return Path(override)
        return self.report.out if self.report.out is not None else Path(f"evalign-{self.name}")


# ------------------------------------------------------------------------------------------------
# reading


def _metric(v: Any, where: _Where, parent: Any, key: Any) -> MetricConfig:
    options: Mapping[str, Any] = {}
    m: Mapping[str, Any] | None = None
    if isinstance(v, str):
        name = v
    else:
        m = _mapping(v, where, parent, key)
        check_keys(m, METRIC_KEYS, where)
        name = _typed(m, "name", (str,), where, none_ok=False)
        if name is None:
            raise where.error(parent, key, "a metric needs a 'name'")
        options = _mapping(m.get("options") or {}, where.child("options"), m, "options")
    if name not in METRICS:
        raise UsageError(f"{where.prefix(parent if m is None else m, key if m is None else 'name')}: "
                         + str(unknown_name("metric", name, METRICS.names(load=False))))
    try:
        cls = metric_class(name)
    except ImportError as e:
        raise UsageError(f"{where.prefix(parent, key)}: metric '{name}' cannot be loaded ({e})") from None
    opts_where = where.child("options")
    for k in options:
        spec = cls.option_types.get(k)
        if spec is not None and not spec.cli:
            raise UsageError(f"{opts_where.prefix(options, k)}: option {name}.{k} can only be set from Python")
    try:
        checked = check_options(name, cls.option_types, _plain(options))
    except UsageError as e:
        bad = next((k for k in options if str(e).find(f"'{k}'") >= 0 or str(e).find(f".{k}") >= 0), None)
        raise UsageError(f"{opts_where.prefix(options if options else parent, bad)}: {e}") from None
    return MetricConfig(name, checked)


def _column(v: Any, where: _Where, parent: Any, key: Any) -> ColumnConfig:
    if isinstance(v, str):
        return ColumnConfig(v)
    m = _mapping(v, where, parent, key)
    check_keys(m, COLUMN_KEYS, where)
    name = _typed(m, "name", (str,), where, none_ok=False)
    if name is None:
        raise where.error(parent, key, "a column needs a 'name'")
    kind = _typed(m, "kind", (str,), where)
    if kind not in (None, "metric", "judge"):
        raise where.error(m, "kind", f"must be metric or judge, got {kind!r}")
    return ColumnConfig(name, kind, _typed(m, "higher_is_better", (bool,), where))


def _judge(v: Any, where: _Where, parent: Any, key: Any) -> JudgeConfig:
    m = _mapping(v, where, parent, key)
    if "api_key" in m:
        raise where.error(m, "api_key", "a key is never written in a config: put it in an environment variable "
                                        "and give that variable's name as api_key_env")
    check_keys(m, JUDGE_KEYS, where)
    mode = _typed(m, "mode", (str,), where, none_ok=False)
    if mode is None:
        raise where.error(parent, key, "a judge needs a 'mode' (absolute, pairwise, geval, criteria, ranking or a "
                                       "judge name)")
    if mode not in JUDGES:
        known = [*JUDGES.names(load=False), *JUDGES.aliases]
        raise UsageError(f"{where.prefix(m, 'mode')}: " + str(unknown_name("judge or mode", mode, known)))
    backend = _typed(m, "backend", (str,), where, "openai", none_ok=False)
    if backend not in BACKENDS:
        raise UsageError(f"{where.prefix(m, 'backend')}: " + str(unknown_name("judge backend", backend,
                                                                                list_backends())))
    env = _typed(m, "api_key_env", (str,), where, default_api_key_env(backend))
    if env is not None and not _ENV_NAME.match(env):
        raise where.error(m, "api_key_env", "must be the NAME of an environment variable (letters, digits, _), "
                                            "never the key itself")
    strs = {k: _typed(m, k, (str,), where) for k in ("model", "base_url", "template", "rubric", "rubric_column",
                                                     "name")}
    if "base_url" in backend_class(backend).required_options and not strs["base_url"]:
        raise where.error(m, "base_url" if "base_url" in m else None, f"the {backend} backend needs a base_url "
                                                                      "(e.g. http://localhost:8000/v1)")
    if not strs["model"]:
        raise where.error(m, "model" if "model" in m else None, "a judge needs a 'model'")
    options = _plain(_mapping(m.get("options") or {}, where.child("options"), m, "options"))
    backend_options = _plain(_mapping(m.get("backend_options") or {}, where.child("backend_options"), m,
                                      "backend_options"))
    _check_call_keys(JUDGES.get(mode), options, JUDGE_OWN_KEYS, where.child("options"), m.get("options"),
                     extra=_sampling_keys())
    _check_call_keys(_backend_cls(backend), backend_options, ("base_url", "model", "model_path", "api_key_env"),
                     where.child("backend_options"), m.get("backend_options"))
    if "constrain" in options:  # the rule every command applies to --constrain
        try:
            check_constrain(options["constrain"])
        except UsageError as e:
            raise where.child("options").error(m.get("options"), "constrain", str(e)) from None
    return JudgeConfig(mode=mode, backend=backend, api_key_env=env, options=options, backend_options=backend_options,
                       **strs)


#: judge constructor arguments set by their own config keys, not through ``options``
JUDGE_OWN_KEYS = ("template", "rubric", "rubric_column", "column")


def _sampling_keys() -> tuple[str, ...]:
    return tuple(SAMPLING_KEYS)


def _backend_cls(name: str) -> Any:
    return backend_class(name)


def init_defaults(cls: Any) -> dict[str, Any]:
    """Keyword arguments of ``cls`` (over its classes' ``__init__``) with their defaults; ``...`` for
    a required one. Stops at a base class once a subclass takes ``**kwargs``."""
    out: dict[str, Any] = {}
    for klass in getattr(cls, "__mro__", (cls,)):
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        for name, p in params.items():
            if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            out.setdefault(name, ... if p.default is p.empty else p.default)
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            break
    return out


def _check_call_keys(cls: Any, given: Mapping[str, Any], reserved: Sequence[str], where: _Where, container: Any,
                     extra: Sequence[str] = ()) -> None:
    known = [k for k in [*init_defaults(cls), *extra] if k not in reserved]
    for k in given:
        if k in reserved:
            raise UsageError(f"{where.prefix(container, k)}: '{k}' is set by its own key, not in {where.section}")
        if k not in known:
            raise unknown_name("key", k, known, where=f"{where.prefix(container, k)}, in '{where.section}'")


def _data(v: Any, where: _Where, parent: Any, key: Any, base: Path) -> DataConfig:
    m = _mapping(v, where, parent, key)
    check_keys(m, DATA_KEYS, where)
    dataset = _typed(m, "dataset", (str,), where)
    file = _typed(m, "file", (str,), where)
    if dataset is None and file is None:
        raise where.error(parent, key, "give a dataset (NAME or NAME:VARIANT) or a file")
    if dataset is not None:
        try:
            parse_spec(dataset)
        except EvalignError as e:
            raise UsageError(f"{where.prefix(m, 'dataset')}: {e}") from None
    labels = _typed(m, "labels", (str,), where)
    if labels is not None:
        if dataset is None:
            raise where.error(m, "labels", "names a label set of a dataset: give data.dataset")
        try:
            label_set(dataset, labels)
        except EvalignError as e:
            raise UsageError(f"{where.prefix(m, 'labels')}: {e}") from None
    fields = _mapping(m.get("fields") or {}, where.child("fields"), m, "fields")
    check_keys(fields, FIELD_NAMES, where.child("fields"))
    for k, f in fields.items():
        if not isinstance(f, str):
            raise where.child("fields").error(fields, k, f"must be the name of a field, got {_kind(f)}")
    if file is not None and not (p := _path(file, base)).is_file():  # type: ignore[union-attr]
        raise where.error(m, "file", f"no such file: {p}")
    return DataConfig(dataset=dataset, data_dir=_path(_typed(m, "data_dir", (str,), where), base),
                      file=_path(file, base), fields=dict(fields), labels=labels)


def _meta(v: Any, where: _Where, parent: Any, key: Any, base: Path | None = None) -> dict[str, Any]:
    """The ``meta`` section checked against the fields of EvalSpec (and Human, Resampling,
    TrustRequest); values are type-checked here and validated by the dataclasses when the spec
    is built."""
    m = _mapping(v if v is not None else MarkedMap(), where, parent, key)
    spec_keys = [f.name for f in dataclasses.fields(EvalSpec) if f.name not in ("columns", "items", "pairs",
                                                                                   "costs", "prices")]
    check_keys(m, spec_keys, where)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(EvalSpec):
        if f.name in m and f.name not in META_COMPUTED:
            out[f.name] = _scalar_field(m, f.name, _default_of(f), where)
    if m.get("human") is not None:
        out["human"] = _meta_human(m, where)
    if "resampling" in m:
        r = _mapping(m["resampling"] or MarkedMap(), where.child("resampling"), m, "resampling")
        rw = where.child("resampling")
        check_keys(r, [f.name for f in dataclasses.fields(Resampling)], rw)
        out["resampling"] = {f.name: _scalar_field(r, f.name, _default_of(f), rw)
                             for f in dataclasses.fields(Resampling) if f.name in r}
    if m.get("trust"):
        out["trust"] = _meta_trust(m, where)
    if m.get("alt_test") not in (None, False):
        out["alt_test"] = _meta_alt_test(m, where)
    if m.get("selective") not in (None, False):  # the keys of `evalign meta --selective`
        out["selective"] = parse_selective(m["selective"], where.child("selective"), m, base)
    _validate_meta(out, m, where)
    return out


def _meta_alt_test(m: Mapping[str, Any], where: _Where) -> dict[str, Any]:
    """``meta.alt_test``: ``true`` (epsilon by the dataset's annotators), a number (the epsilon) or a
    mapping of :class:`~evalign.meta.alt_test.AltTestSettings` fields (``epsilon`` optional)."""
    v = m["alt_test"]
    if v is True:
        return {}
    if isinstance(v, int | float) and not isinstance(v, bool):
        return {"epsilon": float(v)}
    a = _mapping(v, where.child("alt_test"), m, "alt_test")
    aw = where.child("alt_test")
    fields = [f for f in dataclasses.fields(AltTestSettings) if f.name != "epsilon_source"]
    check_keys(a, [f.name for f in fields], aw)
    out = {f.name: _scalar_field(a, f.name, _default_of(f), aw) for f in fields if f.name in a}
    try:
        AltTestSettings(**out)
    except InputError as e:
        raise aw.error(a, e.field if e.field in a else next(iter(a), "epsilon"), e.reason) from None
    return out


def _meta_human(m: Mapping[str, Any], where: _Where) -> dict[str, Any]:
    """The ``meta.human`` section checked against the fields of Human."""
    h = _mapping(m["human"], where.child("human"), m, "human")
    hw = where.child("human")
    names = [f.name for f in dataclasses.fields(Human) if f.name != "warnings"]  # warnings: made, not given
    check_keys(h, names, hw)
    hum: dict[str, Any] = {}
    for f in dataclasses.fields(Human):
        if f.name not in h or f.name not in names:
            continue
        if f.name == "system":
            sysv = h["system"]
            hum["system"] = None if sysv is None else dict(_plain(_mapping(sysv, hw.child("system"), h, "system")))
        elif f.name in ("pref_columns", "annotators"):
            vals = _list(h[f.name], hw, h, f.name)
            if not all(isinstance(x, str) for x in vals):
                raise hw.error(h, f.name, "must be a list of column names")
            hum[f.name] = list(vals)
        else:
            hum[f.name] = _scalar_field(h, f.name, _default_of(f), hw)
    return hum


def _meta_trust(m: Mapping[str, Any], where: _Where) -> list[dict[str, Any]]:
    """The ``meta.trust`` list checked against the fields of TrustRequest (a text is a statistic)."""
    reqs: list[dict[str, Any]] = []
    tw = where.child("trust")
    for i, t in enumerate(_list(m["trust"], where, m, "trust")):
        if isinstance(t, str):
            reqs.append({"statistic": t})
            continue
        tm = _mapping(t, tw.child(i), m["trust"], i)
        check_keys(tm, [f.name for f in dataclasses.fields(TrustRequest)], tw.child(i))
        reqs.append({f.name: _scalar_field(tm, f.name, _default_of(f), tw.child(i))
                     for f in dataclasses.fields(TrustRequest) if f.name in tm})
    return reqs


def _validate_meta(out: Mapping[str, Any], m: Mapping[str, Any], where: _Where) -> None:
    """Build the spec's small dataclasses now, so that a bad value names the config's line."""
    for key, choices in (("level", LEVELS), ("grouping", GROUPINGS)):
        if out.get(key) is not None and out[key] not in choices:
            raise where.error(m, key, f"must be one of {', '.join(choices)}, got {out[key]!r}")
    if out.get("agreement") is not None and out["agreement"] not in AGREEMENTS:
        raise where.error(m, "agreement", f"must be one of {', '.join(AGREEMENTS)}, got {out['agreement']!r}")
    if out.get("min_group_size") is not None and (not isinstance(out["min_group_size"], int)
                                                  or out["min_group_size"] < 1):
        raise where.error(m, "min_group_size", f"must be an integer >= 1, got {out['min_group_size']!r}")
    checks: list[tuple[str, Any, Any]] = []
    if "resampling" in out:
        checks.append(("resampling", m["resampling"], lambda: Resampling(**out["resampling"])))
    if "human" in out:
        h = out["human"]
        checks.append(("human", m["human"], lambda: human_of(h)))
    for i, t in enumerate(out.get("trust", [])):
        for key, choices in (("level", LEVELS), ("grouping", GROUPINGS)):
            if key in t and t[key] not in choices:
                tm = m["trust"][i]
                raise where.child("trust").child(i).error(tm, key, f"must be one of {', '.join(choices)}, got "
                                                                   f"{t[key]!r}")
        checks.append(("trust", m["trust"], lambda t=t: TrustRequest(**t)))
    for key, container, build in checks:
        try:
            build()
        except InputError as e:
            inner = container if isinstance(container, Mapping) and e.field in container else m
            k = e.field if inner is container else key
            raise (where.child(key).error(inner, k, e.reason) if inner is container
                   else where.error(m, key, e.reason)) from None


def human_of(section: Mapping[str, Any]) -> Any:
    """The :class:`~evalign.evaluate.Human` of a config's ``meta.human`` section (lists as tuples)."""
    kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in section.items()}
    return Human(**kw)


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _scalar_field(m: Mapping[str, Any], key: str, default: Any, where: _Where) -> Any:
    """A scalar field typed like its default (bool, int, float -> number, str); None defaults take
    text or number values."""
    if isinstance(default, bool):
        return _typed(m, key, (bool,), where, none_ok=False)
    if isinstance(default, int):
        return _typed(m, key, (int,), where, none_ok=False)
    if isinstance(default, float):
        v = _typed(m, key, (int, float), where, none_ok=False)
        return float(v)
    if isinstance(default, str):
        return _typed(m, key, (str,), where, none_ok=False)
    return _typed(m, key, (str, int), where)


def parse_config(data: Any, *, file: str = "<config>", base: Path | None = None) -> RunConfig:
    """A :class:`RunConfig` from loaded YAML (:func:`~evalign.io.yaml_files.load_marked`); ``base`` is
    the folder relative paths start from. Raises UsageError naming the file, line and key."""
    base = base or Path.cwd()
    top = _Where(file, "")
    if not isinstance(data, Mapping):
        raise UsageError(f"{file}: a run config is a mapping (version, name, metrics, evaluations, report), "
                         f"got {_kind(data)}")
    check_keys(data, TOP_KEYS, top)
    version = _typed(data, "version", (int,), top, VERSION, none_ok=False)
    if version != VERSION:
        raise top.error(data, "version", f"this evalign reads config version {VERSION}, got {version}")
    name = _top_name(data, top, file)
    shared = tuple(_metric(v, top.child("metrics").child(i), data["metrics"], i)
                   for i, v in enumerate(_list(data.get("metrics") or [], top, data, "metrics")))
    if not data.get("evaluations"):
        raise top.error(data, "evaluations" if "evaluations" in data else None, "give at least one evaluation")
    evals: list[EvaluationConfig] = []
    for i, e in enumerate(_list(data["evaluations"], top, data, "evaluations")):
        evals.append(_evaluation(e, i, top.child("evaluations"), data["evaluations"], evals, shared, base))
    boards: list[LeaderboardConfig] = []
    for i, b in enumerate(_list(data.get("leaderboards") or [], top, data, "leaderboards")):
        boards.append(_leaderboard(b, i, top.child("leaderboards"), data["leaderboards"], boards, evals, base))
    report = _report(data.get("report"), top.child("report"), data, base)
    sigs = data.get("signatures") or {}
    _mapping(sigs, top, data, "signatures")
    return RunConfig(name=name, evaluations=tuple(evals), report=report, leaderboards=tuple(boards), metrics=shared,
                     signatures=_plain(sigs), path=None, version=version)


def _leaderboard(b: Any, i: int, bw: _Where, parent: Any, before: Sequence[LeaderboardConfig],
                 evals: Sequence[EvaluationConfig], base: Path) -> LeaderboardConfig:
    """The ``i``-th entry of ``leaderboards``: its keys are checked and its spec built now, so that a
    bad value names the config's line."""
    w = bw.child(i)
    m = _mapping(b, w, parent, i)
    check_keys(m, LEADERBOARD_KEYS, w)
    name = _typed(m, "name", (str,), w, None, none_ok=False) or f"leaderboard_{i + 1}"
    if not _NAME.match(name):
        raise w.error(m, "name", f"must be letters, digits, '_', '-' or '.' (it names files), got {name!r}")
    if any(x.name == name for x in before):
        raise w.error(m, "name", f"two leaderboards are named '{name}'")
    file = _typed(m, "verdicts", (str,), w)
    if file is None:
        raise bw.error(parent, i, "a leaderboard needs 'verdicts' (a file of pairwise verdicts)")
    verdicts = _path(file, base)
    if not verdicts.is_file():  # type: ignore[union-attr]
        raise w.error(m, "verdicts", f"no such file: {verdicts}")
    options: dict[str, Any] = {}
    for key in LEADERBOARD_OPTIONS:
        if key not in m or m[key] is None:
            continue
        if key in ("panel", "judge_models"):
            vals = _list(m[key], w, m, key)
            if not all(isinstance(x, str) for x in vals):
                raise w.error(m, key, "must be a list of names")
            options[key] = list(vals)
        else:
            options[key] = _typed(m, key, _LEADERBOARD_TYPES[key], w)
    try:
        spec = leaderboard_spec(**options)
    except UsageError as e:
        bad = next((k for k in options if f"--{k.replace('_', '-')}" in str(e)), None)
        raise w.error(m, bad, str(e)) from None
    trust = _mapping(m.get("trust") or MarkedMap(), w.child("trust"), m, "trust")
    check_keys(trust, TRUST_KEYS, w.child("trust"))
    tev = _typed(trust, "evaluation", (str,), w.child("trust"))
    if tev is not None and all(e.name != tev for e in evals):
        raise w.child("trust").error(trust, "evaluation", f"no evaluation named '{tev}' in this config "
                                                          f"(evaluations: {', '.join(e.name for e in evals)})")
    return LeaderboardConfig(name, verdicts, spec, options, tev,  # type: ignore[arg-type]
                             _typed(trust, "column", (str,), w.child("trust")), line=getattr(m, "line", 0))


#: the value types of the leaderboard options (lists are read apart)
_LEADERBOARD_TYPES: dict[str, tuple[type, ...]] = {
    "verdict": (str,), "judge": (str,), "panel_rule": (str,), "panel_tie": (str,), "panel_min": (int,),
    "baseline": (str,), "anchor": (str,),
    "bootstrap": (int,), "resample": (str,), "seed": (int,), "alpha": (int, float), "orders": (str,), "lc": (bool,),
    "difficulty": (str,), "skip_self": (bool,),
}


def _top_name(data: Mapping[str, Any], top: _Where, file: str) -> str:
    name = _typed(data, "name", (str,), top, None, none_ok=False)
    if name is None:
        name = Path(file).stem if file != "<config>" else "run"
    if not _NAME.match(name):
        raise top.error(data, "name", f"must be letters, digits, '_', '-' or '.', got {name!r}")
    return name  # type: ignore[no-any-return]


def _evaluation(e: Any, i: int, ew: _Where, parent: Any, before: Sequence[EvaluationConfig],
                shared: tuple[MetricConfig, ...], base: Path) -> EvaluationConfig:
    """The ``i``-th entry of ``evaluations`` (``before``: the entries read so far)."""
    w = ew.child(i)
    em = _mapping(e, w, parent, i)
    check_keys(em, EVALUATION_KEYS, w)
    ename = _typed(em, "name", (str,), w, None, none_ok=False) or f"evaluation_{i + 1}"
    if not _NAME.match(ename):
        raise w.error(em, "name", f"must be letters, digits, '_', '-' or '.' (it names a folder), got {ename!r}")
    if any(x.name == ename for x in before):
        raise w.error(em, "name", f"two evaluations are named '{ename}'")
    if "data" not in em:
        raise w.error(parent, i, "an evaluation needs 'data'")
    metrics = shared if "metrics" not in em else tuple(
        _metric(v, w.child("metrics").child(j), em["metrics"], j)
        for j, v in enumerate(_list(em["metrics"] or [], w, em, "metrics")))
    columns = tuple(_column(v, w.child("columns").child(j), em["columns"], j)
                    for j, v in enumerate(_list(em.get("columns") or [], w, em, "columns")))
    judges = tuple(_judge(v, w.child("judges").child(j), em["judges"], j)
                   for j, v in enumerate(_list(em.get("judges") or [], w, em, "judges")))
    if not metrics and not columns and not judges:
        raise w.error(em, None, "nothing to evaluate: give metrics, columns or judges")
    return EvaluationConfig(ename, _data(em["data"], w.child("data"), em, "data", base), metrics, columns,
                            judges, _meta(em.get("meta"), w.child("meta"), em, "meta", base),
                            panels=_panels(em, w), line=getattr(em, "line", 0))


def _panels(em: Any, w: _Where) -> tuple[Any, ...]:
    """An evaluation's ``panels``: NAME -> a list of member columns or ``{members, rule, tie, min}``."""
    if em.get("panels") is None:
        return ()
    pm = _mapping(em["panels"], w.child("panels"), em, "panels")
    out = []
    for name, entry in pm.items():
        problem = panel_entry_problem(entry)
        if problem:
            raise w.child("panels").error(pm, name, problem)
        try:
            out.append(panel_spec_of(str(name), entry))
        except UsageError as e:
            raise w.child("panels").error(pm, name, str(e)) from None
    return tuple(out)


def _report(v: Any, where: _Where, parent: Any, base: Path) -> ReportConfig:
    m = _mapping(v if v is not None else MarkedMap(), where, parent, "report")
    check_keys(m, REPORT_KEYS, where)
    formats = tuple(_list(m.get("formats", list(FORMATS)), where, m, "formats"))
    for i, f in enumerate(formats):
        if f not in FORMATS:
            raise UsageError(f"{where.prefix(m['formats'], i)}: " + str(unknown_name("report format", str(f),
                                                                                      FORMATS)))
    notes = _list(m.get("notes") or [], where, m, "notes")
    if not all(isinstance(n, str) for n in notes):
        raise where.error(m, "notes", "must be a list of texts")
    strs = {k: _typed(m, k, (str,), where) for k in ("title", "subtitle", "by_task_label")}
    return ReportConfig(out=_path(_typed(m, "out", (str,), where), base), formats=formats, notes=tuple(notes), **strs)


def load_config(path: str | Path) -> RunConfig:
    """Read and check a run config file (YAML). ``path`` may also name a config shipped with
    evalign (``demo``; see :func:`shipped_configs`)."""
    p = config_path(path)
    cfg = parse_config(read_marked(p), file=str(path), base=p.resolve().parent)
    return dataclasses.replace(cfg, path=p)


def shipped_configs() -> dict[str, Path]:
    """The configs shipped with evalign: name -> file (``evalign/data/configs/*.yaml``)."""
    folder = bundled_path("configs")
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def config_path(path: str | Path) -> Path:
    """``path`` if it is a file, else the shipped config of that name; UsageError otherwise."""
    p = Path(path)
    if p.is_file():
        return p
    shipped = shipped_configs()
    if str(path) in shipped:
        return shipped[str(path)]
    if p.exists():
        raise UsageError(f"{path}: not a file")
    raise UsageError(f"{path}: no such config file, and no shipped config of that name"
                     + (f" (shipped: {', '.join(shipped)})" if shipped else ""))
