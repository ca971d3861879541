"""A bench's run config: the judges (several, each a mapping), panels and settings in one YAML file
(``evalign bench --config FILE``; ``bench:`` in an ``evalign run`` config reads the same keys)::

    version: 1
    judges:
      - {name: smollm2, backend: llama, model: smollm2-135m-instruct, options: {max_tokens: 64}}
      - {name: qwen, backend: openai, model: qwen2.5-7b-instruct, base_url: http://localhost:8000/v1}
    panels: {both: [smollm2, qwen]}     # majority verdicts / mean grades of the members
    # or with a rule (evalign.rank.panel; the panel gets a confidence from the votes):
    # panels: {both: {members: [smollm2, qwen, llama], rule: majority, tie: abstain, min: 2}}
    per_set: 20                          # or full: true
    seed: 0
    sets: [llmbar-natural, chat]         # set or category keys (default: the suite's default sets)
    templates: {alttest-mtbench: llmbar_vanilla}
    suite: my_suite.yaml                 # default: the suite that ships with evalign
    data_dir: /data/evalign
    published: suite                     # suite | all | none
    decoding: {temperature: 0, max_tokens: 128}
    constrain: auto                      # answers in their template's shape where the backend can (on / off)
    resamples: 1000
    min_group: 5                         # the fewest units a set or category needs to be ranked
    out: bench-out

Every key is checked (an unknown one names the file, the line and the key); relative paths are
relative to the config's folder; an API key is named by its environment variable
(``backend_options: {api_key_env: NAME}``), never written in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalign.bench.judges import BenchJudge, judge_spec
from evalign.bench.settings import BenchSettings
from evalign.errors import EvalignError, InputError, unknown_name
from evalign.io.yaml_files import MarkedList, MarkedMap, read_marked
from evalign.judges.prompts import sampling_problem
from evalign.meta.resampling import Resampling
from evalign.rank.panel import PanelSettings, panel_entry_problem, panel_spec_of

KEYS = ("version", "judges", "panels", "per_set", "full", "seed", "sets", "templates", "suite", "data_dir", "published",
        "decoding", "constrain", "resamples", "min_group", "out")
JUDGE_KEYS = ("name", "backend", "model", "base_url", "options", "backend_options")


@dataclass(frozen=True)
class BenchConfig:
    """A bench config as read: the judges, the settings and the output folder (None: not given)."""

    judges: tuple[BenchJudge, ...]
    settings: BenchSettings
    out: Path | None = None
    #: the settings the file gave (so a command line can tell them from defaults)
    given: frozenset[str] = field(default_factory=frozenset)


def _where(m: MarkedMap, key: str) -> int | None:
    return m.lines.get(key) if isinstance(m, MarkedMap) else None


def _judges(raw: Any, file: str, line: int | None) -> tuple[BenchJudge, ...]:
    if not isinstance(raw, MarkedList):
        raise InputError("judges must be a list of {name, backend, model, ...}", file=file, line=line, field="judges")
    out = []
    for i, j in enumerate(raw):
        if not isinstance(j, MarkedMap):
            raise InputError("a judge is a mapping {name, backend, model, ...}", file=file, line=raw.lines[i],
                             field="judges")
        for k in j:
            if k not in JUDGE_KEYS:
                raise InputError(str(unknown_name("judge key", k, JUDGE_KEYS)), file=file, line=j.lines[k], field=k)
        for k in ("name", "model"):
            if not j.get(k):
                raise InputError("missing", file=file, line=j.line, field=k)
        for k, kind, what in (("name", str, "a text"), ("backend", str, "a backend name"), ("model", str, "a text"),
                              ("options", Mapping, "a mapping of decoding settings"),
                              ("backend_options", Mapping, "a mapping of backend options")):
            if k in j and j[k] is not None and not isinstance(j[k], kind):
                raise InputError(f"must be {what}, got {j[k]!r}", file=file, line=j.lines.get(k, j.line), field=k)
        url = j.get("base_url")
        if url is not None and not (isinstance(url, str) or (isinstance(url, list) and all(isinstance(u, str) for u in url))):
            raise InputError(f"must be a URL or a list of URLs, got {url!r}", file=file, line=j.lines.get("base_url", j.line),
                             field="base_url")
        try:
            out.append(judge_spec(j))
        except EvalignError as e:
            raise InputError(str(e), file=file, line=j.line, field="judges") from None
    return tuple(out)


def _path(v: Any, base: Path, file: str, line: int | None, key: str) -> Path:
    if not isinstance(v, str) or not v:
        raise InputError(f"must be a path, got {v!r}", file=file, line=line, field=key)
    p = Path(v).expanduser()
    return p if p.is_absolute() else base / p


def _typed(doc: MarkedMap, key: str, kind: type | tuple[type, ...], what: str, file: str) -> Any:
    v: Any = doc[key]
    if (isinstance(v, bool) and kind is not bool) or not isinstance(v, kind):
        raise InputError(f"must be {what}, got {v!r}", file=file, line=doc.lines.get(key), field=key)
    if kind is int and what.endswith(">= 1") and isinstance(v, int) and v < 1:
        raise InputError(f"must be {what}, got {v!r}", file=file, line=doc.lines.get(key), field=key)
    return v


def _entries(doc: MarkedMap, key: str, v: Mapping[str, Any], file: str) -> None:
    """Each value of the mapping ``key`` as it must be: a template name (``templates``), a list of
    judge names (``panels``), a decoding setting (``decoding``, the rules of every judge's)."""
    for k, x in v.items():
        if key == "decoding":
            problem = sampling_problem(str(k), x)
        elif key == "templates":
            problem = None if isinstance(x, str) else f"must be a template name or file, got {x!r}"
        else:
            problem = panel_entry_problem(x)
        if problem:
            raise InputError(problem, file=file, line=doc.lines.get(key), field=f"{key}.{k}")


def _panels(v: Mapping[str, Any]) -> tuple[dict[str, tuple[str, ...]], dict[str, PanelSettings]]:
    """The panels' members and, for the mapping form, their rules."""
    members = {str(k): tuple(x["members"] if isinstance(x, Mapping) else x) for k, x in v.items()}
    rules = {str(k): panel_spec_of(str(k), x).settings for k, x in v.items() if isinstance(x, Mapping)}
    return members, rules


def settings_of(doc: Mapping[str, Any], base: Path, file: str) -> tuple[dict[str, Any], Path | None]:
    """The :class:`BenchSettings` keyword arguments of a config mapping, and its ``out`` folder."""
    m = doc if isinstance(doc, MarkedMap) else MarkedMap(doc)
    if not hasattr(m, "lines"):
        m.lines = {}
    kw: dict[str, Any] = {}
    if "full" in m and _typed(m, "full", bool, "true or false", file):
        kw["per_set"] = None
    elif "per_set" in m:
        kw["per_set"] = _typed(m, "per_set", int, "an integer >= 1", file)
    if "seed" in m:
        kw["seed"] = _typed(m, "seed", int, "an integer", file)
    if "sets" in m:
        sets = _typed(m, "sets", list, "a list of set or category keys", file)
        if not all(isinstance(x, str) for x in sets):
            raise InputError(f"must be a list of set or category keys, got {sets!r}", file=file, line=m.lines.get("sets"),
                             field="sets")
        kw["sets"] = tuple(str(s) for s in sets)
    for key, what in (("templates", "a mapping of set keys to templates"), ("decoding", "a mapping of decoding settings"),
                      ("panels", "a mapping of panel names to judge lists")):
        if key in m:
            v = _typed(m, key, Mapping, what, file)
            _entries(m, key, v, file)
            if key == "panels":
                kw["panels"], kw["panel_rules"] = _panels(v)
            else:
                kw[key] = {str(k): x for k, x in v.items()}
    for key in ("suite", "data_dir"):
        if key in m:
            kw[key] = _path(m[key], base, file, m.lines.get(key), key)
    if "published" in m:
        kw["published"] = _typed(m, "published", str, "suite, all or none", file)
    if "constrain" in m:
        kw["constrain"] = _typed(m, "constrain", str, "auto, on or off", file)
    if "resamples" in m:
        n = _typed(m, "resamples", int, "an integer >= 1", file)
        kw["resampling"] = Resampling(n_resamples=n, n_permutations=n)
    if "min_group" in m:
        kw["min_group_size"] = _typed(m, "min_group", int, "an integer >= 1", file)
    out = _path(m["out"], base, file, m.lines.get("out"), "out") if "out" in m else None
    return kw, out


def read_bench_config(path: str | Path) -> BenchConfig:
    """The bench config of ``path`` (see the module doc)."""
    file = str(path)
    doc = read_marked(path)
    if not isinstance(doc, MarkedMap):
        raise InputError("a bench config is a mapping (judges, per_set, sets, ...)", file=file)
    for k in doc:
        if k not in KEYS:
            raise InputError(str(unknown_name("bench config key", k, KEYS)), file=file, line=doc.lines[k], field=k)
    if doc.get("version", 1) != 1:
        raise InputError(f"version must be 1, got {doc.get('version')!r}", file=file, line=_where(doc, "version"),
                         field="version")
    judges = _judges(doc["judges"], file, _where(doc, "judges")) if "judges" in doc else ()
    kw, out = settings_of(doc, Path(file).absolute().parent, file)
    if "decoding" in kw:
        kw["decoding"] = {"temperature": 0.0, "seed": kw.get("seed", 0), **kw["decoding"]}
    try:
        settings = BenchSettings(**kw)
    except EvalignError as e:
        raise InputError(str(e), file=file) from None
    return BenchConfig(judges=judges, settings=settings, out=out, given=frozenset(kw))


__all__ = ["KEYS", "BenchConfig", "read_bench_config", "settings_of"]
