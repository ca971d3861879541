"""A judge by its settings: :class:`JudgeSpec` and :func:`make_judge`, the one way a judge is built.

Every command builds its judges here (``evalign judge``, ``probe``, ``bench``, ``run``,
``verify-judge``): it states the judge as a frozen :class:`JudgeSpec` (mode, template, rubric or
criteria, decoding, output constraint, orders, samples, confidence source, and the backend it runs
on as a :class:`~evalign.backends.spec.BackendSpec`) and :func:`make_judge` builds it. A spec goes to
a plain dict and back (:meth:`JudgeSpec.to_dict`, :meth:`JudgeSpec.from_dict`), as a run config or
a log records it; it holds no secret (the backend spec names an API key by its environment
variable and shows URLs without their ``user:password@``).

The template is read once: :attr:`JudgeSpec.judge_class` (which judge runs the template: a pair
template of LLMBar with ``--mode pairwise`` runs the LLMBar judge) and :func:`make_judge` share the
one :class:`~evalign.judges.prompts.Template` the spec loaded. The output constraint mode
(``constrain``: ``auto`` / ``on`` / ``off``) is checked by :func:`check_constrain`, the rule every
command and the judges themselves apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from evalign.errors import EvalignError, UsageError, unknown_name
from evalign.judges.base import SAMPLING_KEYS, Judge, judge_class, judge_for_template
from evalign.judges.option_rules import CONSTRAIN_MODES, check_constrain
from evalign.judges.prompts import Template, load_template

if TYPE_CHECKING:
    from evalign.backends.spec import BackendSpec

#: the fields of a spec that are judge constructor options of the same name (left out when None)
_NAMED = ("rubric", "rubric_column", "rubric_map", "reference", "column", "grammar", "json_schema", "both_orders")


def _frozen(value: Any) -> Any:
    """A list as a tuple, a mapping as a dict (the forms a spec keeps, so a dict round trip is equal)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


@dataclass(frozen=True)
class JudgeSpec:
    """A judge by its settings (see the module doc).

    ``mode``: a judge's registry name or a mode (``absolute``, ``pairwise``, ``ranking``, ``reward``,
    a plugin's name); ``template``: a template name or file, or a :class:`Template` (a dict holds its
    file, else its name; None: the judge's own); ``rubric``,
    ``rubric_column``, ``rubric_map`` (judges that grade under a rubric) or ``criteria`` (the
    criteria judge: rubric names or files); ``decoding``: the sampling settings
    (:data:`~evalign.judges.base.SAMPLING_KEYS`; None values are "not set"); ``constrain``: the
    output constraint mode, with a user's ``grammar`` (GBNF text) or ``json_schema`` in place of the
    template's answer shape; ``both_orders``: pair judges, each pair judged in both orders (None: the
    judge's default); ``samples``: grades per item; ``reask``: re-asks on an unreadable answer;
    ``reference``: use the reference answer (None: where every row has one); ``confidence``: the
    source of a verdict's confidence a judge is asked to report (None: the judge's own: G-Eval's
    logprobs, a reward model's sigmoid; built-in judges take no other, a plugin judge receives it as
    ``confidence_source``); ``column``: the output column (None: the judge's name); ``options``: the
    mode's own options (``tie``, ``tie_margin``, ``logit_bias``, ``max_rounds``, ``max_unparseable``,
    ``fallback``, ``min_mass``, ``score_criterion``, a plugin's); ``backend``: what the judge runs on
    (None: the caller opens its backend itself).
    """

    mode: str
    template: str | Template | None = None
    rubric: str | Mapping[str, Any] | None = None
    rubric_column: str | None = None
    rubric_map: str | Sequence[str] | Mapping[str, str] | None = None
    criteria: tuple[Any, ...] = ()
    decoding: Mapping[str, Any] = field(default_factory=dict)
    constrain: str = "auto"
    grammar: str | None = None
    json_schema: Mapping[str, Any] | None = None
    both_orders: bool | None = None
    samples: int = 1
    reask: int = 0
    reference: bool | None = None
    confidence: str | None = None
    column: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    backend: BackendSpec | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.mode, str) or not self.mode:
            raise UsageError(f"a judge spec needs a mode (a judge or mode name), got {self.mode!r}")
        set_ = object.__setattr__
        set_(self, "constrain", "auto" if self.constrain is None else self.constrain)
        set_(self, "criteria", tuple(self.criteria or ()))
        set_(self, "decoding", {k: v for k, v in dict(self.decoding).items() if v is not None})
        set_(self, "options", dict(self.options))
        for name in ("rubric", "rubric_map", "json_schema"):
            set_(self, name, _frozen(getattr(self, name)))
        bad = [k for k in self.decoding if k not in SAMPLING_KEYS]
        if bad:
            raise unknown_name("decoding setting", bad[0], SAMPLING_KEYS, where=f"judge {self.mode}")
        clash = [k for k in self.options if k in {f.name for f in fields(self)} or k in SAMPLING_KEYS
                 or k == "template"]
        if clash:
            raise UsageError(f"judge {self.mode}: option {clash[0]!r} is a setting of its own (not in options)")
        check_constrain(self.constrain, user_constraint=self.grammar is not None or self.json_schema is not None)

    # -- the judge it builds --------------------------------------------------------------------
    @cached_property
    def loaded_template(self) -> Template | None:
        """The spec's template, read once (None: the judge's own default)."""
        if self.template is None or isinstance(self.template, Template):
            return self.template
        return load_template(self.template)

    @property
    def judge_class(self) -> type[Judge]:
        """The judge class that runs this spec: ``mode``'s, or the judge whose template it names (a
        template of another pair judge with ``pairwise``: see
        :func:`~evalign.judges.base.judge_for_template`)."""
        cls = judge_class(self.mode)
        if self.template is None or self.template == getattr(cls, "default_template", None):
            return cls
        return judge_for_template(self.mode, self.loaded_template)

    def evolve(self, **changes: Any) -> JudgeSpec:
        """A copy with ``changes`` (:func:`dataclasses.replace`) that keeps the template already read
        when ``template`` stays the same."""
        out = replace(self, **changes)
        if "loaded_template" in self.__dict__ and out.template == self.template:
            out.__dict__["loaded_template"] = self.__dict__["loaded_template"]
        return out

    def judge_options(self) -> dict[str, Any]:
        """The judge's constructor options (``template`` aside): the settings given, a None one left
        out (the judge's default), the decoding and the mode's ``options`` as they are."""
        out: dict[str, Any] = {}
        if self.samples != 1:
            out["samples"] = self.samples
        if self.reask:
            out["reask"] = self.reask
        if self.constrain != "auto":
            out["constrain"] = self.constrain
        out.update({k: getattr(self, k) for k in _NAMED if getattr(self, k) is not None})
        if self.json_schema is not None:
            out["json_schema"] = dict(self.json_schema)
        if self.criteria:
            out["criteria"] = list(self.criteria)
        if self.confidence is not None:
            out["confidence_source"] = self.confidence
        out.update(self.decoding)
        out.update(self.options)
        return out

    # -- to and from a dict ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Every setting as plain JSON values (lists, dicts); the backend as
        :meth:`BackendSpec.to_dict` (no secret)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "backend":
                v = None if v is None else v.to_dict()
            elif isinstance(v, Template):
                v = v.path or v.name
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = dict(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeSpec:
        """The spec of a mapping (:meth:`to_dict`'s form; a key left out takes its default)."""
        known = {f.name for f in fields(cls)}
        bad = [k for k in data if k not in known]
        if bad:
            raise unknown_name("judge spec field", bad[0], sorted(known))
        kw = dict(data)
        if isinstance(kw.get("backend"), Mapping):  # the backends stay unimported until a spec names one
            from evalign.backends.spec import BackendSpec

            kw["backend"] = BackendSpec.from_dict(kw["backend"])
        return cls(**kw)

    @classmethod
    def from_options(cls, mode: str, options: Mapping[str, Any], *, backend: BackendSpec | None = None) -> JudgeSpec:
        """The spec of a judge's constructor options (``get_judge(mode, **options)``'s): the named
        settings to their fields, sampling keys to ``decoding``, the rest to ``options``."""
        kw: dict[str, Any] = {"mode": mode, "backend": backend}
        own: dict[str, Any] = {}
        decoding: dict[str, Any] = {}
        named = {f.name for f in fields(cls)} - {"mode", "backend", "options", "decoding", "confidence"}
        for k, v in options.items():
            if k in SAMPLING_KEYS:
                decoding[k] = v
            elif k == "confidence_source":
                kw["confidence"] = v
            elif k in named:
                kw[k] = v if not (k == "criteria" and v is None) else ()
            else:
                own[k] = v
        return cls(**kw, decoding=decoding, options=own)


def make_judge(spec: JudgeSpec) -> Judge:
    """The judge of ``spec``: :attr:`JudgeSpec.judge_class` built from :meth:`JudgeSpec.judge_options`
    and the template the spec read (the class's own default template is left to the class, which
    reads it). A wrong option is an :class:`~evalign.errors.EvalignError` naming the judge."""
    cls = spec.judge_class
    opts = spec.judge_options()
    if spec.template is not None:
        default = spec.template == getattr(cls, "default_template", None) and "loaded_template" not in spec.__dict__
        opts["template"] = spec.template if default else spec.loaded_template
    try:
        return cls(**opts)
    except TypeError as e:
        raise EvalignError(f"judge '{spec.mode}': bad option ({e})") from e


def get_judge(name: str, **options: Any) -> Judge:
    """A judge instance by name or mode, e.g. ``get_judge("absolute", rubric="helpfulness")``;
    ``get_judge("pairwise", template="llmbar_cot")`` is the judge of that template
    (:func:`~evalign.judges.base.judge_for_template`): :func:`make_judge` of
    :meth:`JudgeSpec.from_options`."""
    return make_judge(JudgeSpec.from_options(name, options))


__all__ = ["CONSTRAIN_MODES", "JudgeSpec", "check_constrain", "get_judge", "make_judge"]
