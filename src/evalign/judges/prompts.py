"""Judge prompt templates and score rubrics, kept as data files.

Templates live in ``evalign/judges/templates/<name>.yaml``: ``name``, ``version``, ``mode``, ``source``,
``system`` (system prompt, may be empty), ``format_hint`` (the answer format, used when re-asking) and
two prompt texts, ``with_reference`` and ``without_reference`` (``with_reference: null`` for a template
that has no reference variant, e.g. the SemScore paper's G-Eval; ``without_reference: null`` for one that
needs a reference, e.g. MT-Bench's math prompts). Placeholders are ``{instruction}``,
``{response}``, ``{reference_answer}``, ``{rubric}`` (absolute), ``{response_A}`` / ``{response_B}``
(relative), ``{questions}`` / ``{reference_output}`` (the outputs of a template's earlier stages),
``{explanation_A}`` / ``{explanation_B}`` (a synthesis round's debate), ``{criteria}`` /
``{criteria_json}`` (the criteria judge's list of criteria and its answer's form), and the turn-indexed
:data:`TURN_PLACEHOLDERS` of multi-turn templates (``{question_2}``, ``{answer_a_1}``, ...: see
:func:`evalign.judges.base.turn_fields`); any other brace text (e.g. a JSON
example) is left as it is. Substitution is one pass, so a response that contains ``{rubric}`` is never
expanded.

A template may also declare (LLMBar's strategies do): ``parser`` (the answer format its judge reads,
e.g. ``llmbar_direct``), ``sampling`` (the judge's defaults for it, e.g. ``max_tokens``),
``tokens_to_avoid`` / ``tokens_to_favor`` (a logit bias, sent only when the judge is asked to),
``stages`` (prompts generated first, once per item, whose outputs fill the placeholder named by the
stage: ``{questions}``, ``{reference_output}``) and ``synthesis`` (a further round with the two
first-round outputs, e.g. LLMBar's Swap). See :class:`Stage`.

A template (and a stage) may declare ``answer``: the shape of its answer (a verdict regex, after
bounded free text or not, or a JSON schema; :mod:`evalign.judges.shapes`), sent to the backend as an
output constraint (``--constrain``). It is not part of the template's hash: the constraint a call is
sent with is in that call's cache key.

A few-shot template (LLMBar's Vanilla_1shot / Vanilla_2shot) declares ``shots``: example turns, a
list of ``{role, content}`` messages that go between the system prompt and the filled user prompt,
alternating ``user`` and ``assistant`` from a ``user`` turn and ending with an ``assistant`` turn
(the template's prompt is the next user turn). Like ``system``, they are sent verbatim: placeholders
are filled only in the prompt.

Rubrics live in ``evalign/judges/rubrics/<name>.yaml``: ``criteria`` and exactly five descriptions
``score1_description`` .. ``score5_description`` (``score1`` .. ``score5`` are accepted too), plus
optional ``name``, ``version``, ``source``, ``description``. Users pass their own rubric as a YAML or
JSON file of the same form, or per row as a column of the table (a dict or a JSON string).

Templates and rubrics are found by name through two registries (:data:`TEMPLATES`, :data:`RUBRICS`,
the pattern of :mod:`evalign.registry`): the built-in data files are registered on first use, and
packages add their own through the ``evalign.templates`` / ``evalign.rubrics`` entry points (the
entry point's object: a :class:`Template` / :class:`Rubric`, or the path of its file).

Every template and rubric has a content hash (:meth:`Template.hash`, :meth:`Rubric.hash`) that goes
into judge signatures and cache keys, so an edited prompt never reuses old grades.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from evalign.errors import EvalignError, InputError, did_you_mean
from evalign.io.yaml_files import load_yaml
from evalign.judges.shapes import AnswerShape, shape_from_mapping
from evalign.registry import Registry
from evalign.signature import stable_hash

Message = dict[str, str]

#: placeholders a template may use
PLACEHOLDERS = ("instruction", "response", "reference_answer", "rubric", "response_A", "response_B", "questions",
                "reference_output", "explanation_A", "explanation_B", "criteria", "criteria_json")
#: turn-indexed placeholders of multi-turn templates (FastChat's names; ``N`` = 1..9, the turn):
#: ``{question_N}`` (the N-th user turn), ``{answer_N}`` (the N-th assistant turn), ``{answer_a_N}`` /
#: ``{answer_b_N}`` (each shown side's), ``{ref_answer_N}`` (the N-th turn's reference answer)
TURN_PLACEHOLDERS = ("question", "answer", "answer_a", "answer_b", "ref_answer")
_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + "|(?:" + "|".join(TURN_PLACEHOLDERS) + r")_[1-9])\}")

#: ``{word}`` in a prompt: a placeholder when ``word`` is one of :data:`PLACEHOLDERS`, else a mistake
_BRACED_WORD_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: the sampling settings a judge (and a template's ``sampling``) may set: what each must be, and its test
SAMPLING_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "temperature": ("a number in [0, 2]", lambda v: _is_number(v) and 0 <= v <= 2),
    "top_p": ("a number in (0, 1]", lambda v: _is_number(v) and 0 < v <= 1),
    "max_tokens": ("an integer >= 1", lambda v: _is_int(v) and v >= 1),
    "repetition_penalty": ("a number >= 0 (0: not sent)", lambda v: _is_number(v) and v >= 0),
    "seed": ("an integer", lambda v: _is_int(v)),
    "logprobs": ("true or false", lambda v: isinstance(v, bool)),
    "top_logprobs": ("an integer >= 0", lambda v: _is_int(v) and v >= 0),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def sampling_problem(key: str, value: Any) -> str | None:
    """What is wrong with the sampling setting ``key`` = ``value`` (None: nothing; None values are
    "not set")."""
    if key not in SAMPLING_RULES:
        return f"unknown sampling setting{did_you_mean(key, SAMPLING_RULES)} (known: {', '.join(SAMPLING_RULES)})"
    expected, ok = SAMPLING_RULES[key]
    return None if value is None or ok(value) else f"must be {expected}, got {value!r}"


#: number of score descriptions of a rubric (the 1-5 Prometheus scale)
RUBRIC_SCALE = 5
_RUBRIC_META = ("name", "version", "source", "description")


def _data_dir(kind: str) -> Path:
    return Path(str(resources.files("evalign.judges") / kind))


def data_files(kind: str) -> Any:
    """A registry's ``discover`` hook: register every ``evalign/judges/<kind>/<name>.yaml`` by name."""

    def discover(registry: Registry[Any]) -> None:
        for path in sorted(_data_dir(kind).glob("*.yaml")):
            registry.add(path.stem, path)

    return discover


#: judge prompt templates by name: the built-in files, and plugins (``evalign.templates`` entry points)
TEMPLATES: Registry[Any] = Registry("judge template", entry_point_group="evalign.templates",
                                    discover=data_files("templates"))
#: score rubrics by name: the built-in files, and plugins (``evalign.rubrics`` entry points)
RUBRICS: Registry[Any] = Registry("rubric", entry_point_group="evalign.rubrics", discover=data_files("rubrics"))


# --- templates --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stage:
    """One more prompt of a template (``stages`` / ``synthesis`` in its file): ``name`` (for a stage:
    the placeholder its output fills), ``system`` and ``prompt`` (the user turn), and its own
    ``parser``, ``max_tokens``, ``tokens_to_avoid`` / ``tokens_to_favor`` (empty / None: none) and
    ``answer`` (its answer's shape; None: free)."""

    name: str
    system: str
    prompt: str
    parser: str = ""
    max_tokens: int | None = None
    tokens_to_avoid: tuple[str, ...] = ()
    tokens_to_favor: tuple[str, ...] = ()
    answer: AnswerShape | None = None

    def render(self, fields: Mapping[str, str], template: str = "template") -> list[Message]:
        """Chat messages (system prompt when non-empty, then the filled prompt)."""
        messages: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        return [*messages, {"role": "user", "content": fill(self.prompt, fields, template=template)}]

    def as_dict(self) -> dict[str, Any]:
        """The stage in its file form (for hashes)."""
        return {"name": self.name, "system": self.system, "prompt": self.prompt, "parser": self.parser,
                "max_tokens": self.max_tokens, "tokens_to_avoid": list(self.tokens_to_avoid),
                "tokens_to_favor": list(self.tokens_to_favor)}


@dataclass(frozen=True)
class Template:
    """A judge prompt template (see the module doc). ``sampling``: the judge's sampling defaults for
    this template, as ``(key, value)`` pairs; ``shots``: the example turns sent before the prompt, as
    ``(role, content)`` pairs; ``answer``: the shape of its answer (None: not declared)."""

    name: str
    version: int
    mode: str
    source: str
    system: str
    format_hint: str
    with_reference: str | None
    without_reference: str | None
    parser: str = ""
    sampling: tuple[tuple[str, Any], ...] = ()
    tokens_to_avoid: tuple[str, ...] = ()
    tokens_to_favor: tuple[str, ...] = ()
    stages: tuple[Stage, ...] = ()
    synthesis: Stage | None = None
    shots: tuple[tuple[str, str], ...] = ()
    answer: AnswerShape | None = None
    #: the file it was read from ("" for a template made in Python)
    path: str = field(default="", compare=False)

    @property
    def has_reference(self) -> bool:
        """True when the template has a variant with the reference answer."""
        return self.with_reference is not None

    @property
    def needs_reference(self) -> bool:
        """True when the template has only a variant with the reference answer."""
        return self.without_reference is None

    def text(self, reference: bool) -> str:
        """The user prompt text with or without the reference answer."""
        if reference:
            if self.with_reference is None:
                raise EvalignError(f"template '{self.name}' has no reference variant (use it without reference)")
            return self.with_reference
        if self.without_reference is None:
            raise EvalignError(f"template '{self.name}' needs a reference answer (every row needs a 'reference')")
        return self.without_reference

    def hash(self, reference: bool) -> str:
        """Content hash (16 hex chars) of the system prompt, the prompt variant and the format hint (and,
        when the template declares them, its parser, sampling defaults, logit bias tokens, stages and
        shots)."""
        content: dict[str, Any] = {"system": self.system, "prompt": self.text(reference), "format": self.format_hint}
        extra = self._extra()
        if extra:
            content["extra"] = extra
        return stable_hash(content)

    def _extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.parser:
            extra["parser"] = self.parser
        if self.sampling:
            extra["sampling"] = dict(self.sampling)
        if self.tokens_to_avoid or self.tokens_to_favor:
            extra["bias"] = [list(self.tokens_to_avoid), list(self.tokens_to_favor)]
        if self.stages:
            extra["stages"] = [st.as_dict() for st in self.stages]
        if self.synthesis is not None:
            extra["synthesis"] = self.synthesis.as_dict()
        if self.shots:
            extra["shots"] = [{"role": role, "content": content} for role, content in self.shots]
        return extra

    def tag(self, reference: bool) -> str:
        """``name@version#hash`` of the variant, as shown in signatures."""
        return f"{self.name}@{self.version}{'' if reference else '-noref'}#{self.hash(reference)[:8]}"

    def render(self, reference: bool, fields: Mapping[str, str]) -> list[Message]:
        """Chat messages (system prompt when non-empty, the shots as they are, then the filled user
        prompt)."""
        content = fill(self.text(reference), fields, template=self.name)
        messages: list[Message] = []
        if self.system:
            messages.append({"role": "system", "content": self.system})
        messages.extend({"role": role, "content": text} for role, text in self.shots)
        messages.append({"role": "user", "content": content})
        return messages

    def render_single_turn(self, reference: bool, fields: Mapping[str, str]) -> tuple[str | None, str]:
        """The system prompt (None when empty) and the filled user prompt, for training rows that hold one
        prompt; a template with example turns (``shots``) cannot be written so and is an error."""
        if self.shots:
            raise EvalignError(f"template '{self.name}' has example turns (shots); a training row holds a system "
                               "prompt and one user prompt: use a template without shots")
        messages = self.render(reference, fields)
        return (messages[0]["content"] if messages[0]["role"] == "system" else None), messages[-1]["content"]


def fill(text: str, fields: Mapping[str, str], template: str = "template") -> str:
    """Replace each ``{placeholder}`` of ``text`` by ``fields[placeholder]`` in one pass."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in fields or fields[key] is None:
            raise EvalignError(f"template '{template}' needs '{key}', which was not given")
        return str(fields[key])

    return _PLACEHOLDER_RE.sub(sub, text)


def load_template(spec: str | Path) -> Template:
    """A built-in template by name (``"prometheus_absolute"``) or a template file (``.yaml``/``.json``)."""
    path = Path(spec)
    if not (path.suffix in (".yaml", ".yml", ".json") and path.exists()):
        if str(spec) not in TEMPLATES:
            raise EvalignError(f"unknown judge template '{spec}'{did_you_mean(str(spec), list_templates())} "
                               f"(built-in: {', '.join(list_templates())})")
        entry = TEMPLATES.get(str(spec))
        if isinstance(entry, Template):
            return entry
        path = Path(entry)
    data = _read_mapping(path)
    if not isinstance(data, Mapping):
        raise InputError(f"a template file holds a mapping of fields, got {type(data).__name__}", file=str(path))
    _check_template_fields(data, path)
    sampling = data.get("sampling") or {}
    stages = data.get("stages") or []
    if not isinstance(stages, list):
        raise InputError(f"must be a list, got {type(stages).__name__}", file=str(path), field="stages")
    synthesis = data.get("synthesis")
    return Template(
        name=str(data["name"]),
        version=int(data["version"]),
        mode=str(data["mode"]),
        source=str(data.get("source", "")),
        system=str(data.get("system") or ""),
        format_hint=str(data.get("format_hint", "")),
        with_reference=data["with_reference"],
        without_reference=data["without_reference"],
        parser=str(data.get("parser") or ""),
        sampling=tuple((str(k), v) for k, v in sampling.items()),
        tokens_to_avoid=_strings(data, "tokens_to_avoid", path),
        tokens_to_favor=_strings(data, "tokens_to_favor", path),
        stages=tuple(_stage(st, path, f"stages[{i}]") for i, st in enumerate(stages)),
        synthesis=None if synthesis is None else _stage(synthesis, path, "synthesis", name="synthesis"),
        shots=_shots(data.get("shots"), path),
        answer=_answer(data, path),
        path=str(path),
    )


def _answer(data: Mapping[str, Any], path: Path, where: str = "") -> AnswerShape | None:
    """The ``answer`` shape of a template or stage mapping (None when it has none)."""
    if data.get("answer") is None:
        return None
    return shape_from_mapping(data["answer"], file=str(path), field=f"{where}answer")


def _check_template_fields(data: Mapping[str, Any], path: Path) -> None:
    """Every field of a template file as it must be (a wrong one is an :class:`InputError` naming
    the file, the field and what is expected), before the template is used."""

    def bad(message: str, field: str) -> InputError:
        return InputError(message, file=str(path), field=field)

    for key in ("name", "version", "mode", "with_reference", "without_reference"):
        if key not in data:
            raise bad("missing field", key)
    for key in ("name", "mode", "with_reference", "without_reference", "system", "format_hint", "source", "parser"):
        v = data.get(key)
        if v is not None and not isinstance(v, str):
            raise bad(f"must be a string, got {type(v).__name__}", key)
    if not isinstance(data["mode"], str) or not data["mode"].strip():
        raise bad(f"must name the judge mode the template is for (absolute, pairwise, ...), got {data['mode']!r}",
                  "mode")
    if data["with_reference"] is None and data["without_reference"] is None:
        raise bad("a template needs a prompt: with_reference and without_reference are both null",
                  "without_reference")
    if not _is_int(data["version"]) or data["version"] < 1:
        raise bad(f"must be an integer >= 1 (the template's version), got {data['version']!r}", "version")
    sampling = data.get("sampling") or {}
    if not isinstance(sampling, Mapping):
        raise bad(f"must be a mapping, got {type(sampling).__name__}", "sampling")
    for key, value in sampling.items():
        problem = sampling_problem(str(key), value)
        if problem:
            raise bad(problem, f"sampling.{key}")
    for key in ("with_reference", "without_reference", "system"):
        unknown = unknown_placeholder(data.get(key) or "")
        if unknown:
            raise bad(f"{{{unknown}}} is not a placeholder{did_you_mean(unknown, PLACEHOLDERS)} (placeholders: "
                      f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)})", key)


def unknown_placeholder(text: str) -> str | None:
    """The first ``{word}`` of ``text`` that is not one of :data:`PLACEHOLDERS` (it would be sent as
    it is), or None."""
    return next((m.group(1) for m in _BRACED_WORD_RE.finditer(text) if not _PLACEHOLDER_RE.fullmatch(m.group(0))),
                None)


def _strings(data: Mapping[str, Any], key: str, path: Path, where: str = "") -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError("must be a list of strings", file=str(path), field=f"{where}{key}")
    return tuple(value)


def _shots(data: Any, path: Path) -> tuple[tuple[str, str], ...]:
    """The ``shots`` of a template file as ``(role, content)`` pairs: ``user`` and ``assistant`` turns
    in turn, from a ``user`` turn to an ``assistant`` one (the prompt is the next user turn)."""
    if data is None:
        return ()
    if not isinstance(data, list) or not data:
        raise InputError("must be a non-empty list of {role, content} messages", file=str(path), field="shots")
    out: list[tuple[str, str]] = []
    for i, shot in enumerate(data):
        where = f"shots[{i}]"
        if not isinstance(shot, Mapping) or set(shot) != {"role", "content"}:
            raise InputError("must be a mapping with exactly 'role' and 'content'", file=str(path), field=where)
        role = "user" if i % 2 == 0 else "assistant"
        if shot["role"] != role:
            raise InputError(f"must be '{role}' (the shots alternate user and assistant turns, from a user "
                             f"turn), got {shot['role']!r}", file=str(path), field=f"{where}.role")
        if not isinstance(shot["content"], str):
            raise InputError(f"must be a string, got {type(shot['content']).__name__}", file=str(path),
                             field=f"{where}.content")
        out.append((role, shot["content"]))
    if len(out) % 2:
        raise InputError("must end with an assistant turn (the template's prompt is the next user turn)",
                         file=str(path), field="shots")
    return tuple(out)


def _stage(data: Any, path: Path, where: str, name: str | None = None) -> Stage:
    """A stage of a template file (``where``: its place, for errors)."""
    if not isinstance(data, Mapping):
        raise InputError(f"must be a mapping, got {type(data).__name__}", file=str(path), field=where)
    for key in ("prompt",) if name else ("name", "prompt"):
        if not isinstance(data.get(key), str):
            raise InputError("missing or not a string", file=str(path), field=f"{where}.{key}")
    max_tokens = data.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise InputError("must be an integer >= 1", file=str(path), field=f"{where}.max_tokens")
    for key in ("prompt", "system"):
        unknown = unknown_placeholder(str(data.get(key) or ""))
        if unknown:
            raise InputError(f"{{{unknown}}} is not a placeholder{did_you_mean(unknown, PLACEHOLDERS)}",
                             file=str(path), field=f"{where}.{key}")
    return Stage(
        name=name or str(data["name"]),
        system=str(data.get("system") or ""),
        prompt=str(data["prompt"]),
        parser=str(data.get("parser") or ""),
        max_tokens=max_tokens,
        tokens_to_avoid=_strings(data, "tokens_to_avoid", path, f"{where}."),
        tokens_to_favor=_strings(data, "tokens_to_favor", path, f"{where}."),
        answer=_answer(data, path, f"{where}."),
    )


def list_templates() -> list[str]:
    """Names of the templates (built-in and plugins)."""
    return TEMPLATES.names()


# --- rubrics ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rubric:
    """A score rubric: the criteria and one description per score 1..5."""

    name: str
    criteria: str
    descriptions: tuple[str, ...]
    version: int = 1
    source: str = ""

    def render(self, mode: str = "absolute") -> str:
        """The rubric as it goes into a prompt: ``[criteria]`` then ``Score n: description`` lines
        (absolute); only the ``[criteria]`` line for relative grading (as prometheus-eval does)."""
        head = f"[{self.criteria}]"
        if mode == "relative":
            return head
        return "\n".join([head, *(f"Score {i + 1}: {d}" for i, d in enumerate(self.descriptions))])

    def hash(self) -> str:
        """Content hash (16 hex chars) of the criteria and the descriptions."""
        return stable_hash({"criteria": self.criteria, "descriptions": list(self.descriptions)})

    def tag(self) -> str:
        """``name#hash`` as shown in signatures."""
        return f"{self.name}#{self.hash()[:8]}"

    def as_dict(self) -> dict[str, Any]:
        """The rubric in its file form."""
        out: dict[str, Any] = {"name": self.name, "criteria": self.criteria}
        out.update({f"score{i + 1}_description": d for i, d in enumerate(self.descriptions)})
        return out


def rubric_from_mapping(
    data: Any, *, name: str = "custom", file: str | None = None, line: int | None = None, field: str | None = None
) -> Rubric:
    """Validate a rubric given as a mapping; errors name ``file``, ``line`` and the offending field
    (prefixed by ``field``, e.g. the table column, when given)."""

    def where(key: str | None) -> str | None:
        if field and key:
            return f"{field}.{key}"
        return field or key

    if not isinstance(data, Mapping):
        raise InputError(
            f"a rubric must be a mapping with 'criteria' and score1..score{RUBRIC_SCALE}_description, "
            f"got {type(data).__name__}",
            file=file,
            line=line,
            field=where(None),
        )
    crit = data.get("criteria")
    if not isinstance(crit, str) or not crit.strip():
        raise InputError("missing or empty criteria text", file=file, line=line, field=where("criteria"))
    descs: list[str] = []
    used = {"criteria", *_RUBRIC_META}
    for i in range(1, RUBRIC_SCALE + 1):
        long_key, short_key = f"score{i}_description", f"score{i}"
        if long_key in data and short_key in data:
            raise InputError(f"give either '{long_key}' or '{short_key}', not both", file=file, line=line,
                             field=where(long_key))
        key = long_key if long_key in data else short_key
        value = data.get(key)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"missing or empty description of score {i}", file=file, line=line,
                             field=where(long_key))
        descs.append(value.strip())
        used.add(key)
    extra = [k for k in data if k not in used]
    if extra:
        raise InputError(
            f"unexpected field (a rubric has 'criteria' and exactly score1..score{RUBRIC_SCALE}_description)",
            file=file,
            line=line,
            field=where(str(extra[0])),
        )
    version = data.get("version", 1)
    return Rubric(
        name=str(data.get("name") or name),
        criteria=crit.strip(),
        descriptions=tuple(descs),
        version=int(version) if isinstance(version, int) else 1,
        source=str(data.get("source", "")),
    )


def load_rubric(spec: str | Path | Mapping[str, Any] | Rubric) -> Rubric:
    """A rubric from a built-in name (``"helpfulness"``), a YAML/JSON file, or a mapping."""
    if isinstance(spec, Rubric):
        return spec
    if isinstance(spec, Mapping):
        return rubric_from_mapping(spec)
    path = Path(spec)
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        if not path.exists():
            raise InputError("no such rubric file", file=str(path))
        return rubric_from_mapping(_read_mapping(path), name=path.stem, file=str(path))
    if str(spec) not in RUBRICS:
        raise EvalignError(
            f"unknown rubric '{spec}'{did_you_mean(str(spec), list_rubrics())} (built-in: {', '.join(list_rubrics())}; "
            "or give a .yaml/.json file)"
        )
    entry = RUBRICS.get(str(spec))
    if isinstance(entry, Rubric):
        return entry
    builtin = Path(entry)
    return rubric_from_mapping(_read_mapping(builtin), name=str(spec), file=str(builtin))


#: built-in maps from a table column's values to rubric names (``--rubric-map hhh``): the HHH
#: subsets to the rubrics of the Prometheus HHH-alignment benchmark prompts
RUBRIC_MAPS: dict[str, dict[str, str]] = {
    "hhh": {"helpful": "hhh_helpfulness", "harmless": "hhh_harmlessness", "honest": "hhh_honesty",
            "other": "hhh_overall"},
}


def resolve_rubric_map(spec: str | Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    """A value -> rubric-name map: a built-in map name (``"hhh"``), a mapping, or ``VALUE=RUBRIC``
    strings (a built-in map name among them adds that map)."""
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()}
    items = [spec] if isinstance(spec, str) else list(spec)
    out: dict[str, str] = {}
    for item in items:
        if item in RUBRIC_MAPS:
            out.update(RUBRIC_MAPS[item])
        elif "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
        else:
            raise EvalignError(f"--rubric-map takes VALUE=RUBRIC or a built-in map ({', '.join(RUBRIC_MAPS)}), "
                               f"got {item!r}")
    return out


def rubric_from_cell(
    value: Any, *, file: str, line: int, field: str, names: Mapping[str, str] | None = None
) -> Rubric:
    """A rubric from a table cell: a mapping, a JSON string, or a rubric name (a key of ``names``
    mapped to a rubric name, or a built-in rubric name)."""
    if isinstance(value, str) and not value.lstrip().startswith("{"):
        name = (names or {}).get(value, value)
        if name in list_rubrics() or Path(name).suffix.lower() in (".yaml", ".yml", ".json"):
            return load_rubric(name)
        raise InputError(f"'{value}' is neither a rubric (a JSON object) nor a rubric name (built-in: "
                         f"{', '.join(list_rubrics())}; or map it with --rubric-map)", file=file, line=line, field=field)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise InputError(f"rubric is not valid JSON ({e.msg})", file=file, line=line, field=field) from e
    return rubric_from_mapping(value, name=f"{field}", file=file, line=line, field=field)


def list_rubrics() -> list[str]:
    """Names of the rubrics (built-in and plugins)."""
    return RUBRICS.names()


def _read_mapping(path: Path) -> Any:
    """A YAML or JSON file's content; syntax errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8", file=str(path)) from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=e.lineno) from e
    return load_yaml(text, str(path), what="template or rubric file")
