"""The judges a bench runs: ``NAME=SPEC`` on the command line, a mapping in a run config.

A spec names a backend and a model: ``BACKEND:MODEL[@BASE_URL][,KEY=VALUE...]``, e.g.

* ``llama:smollm2-135m-instruct`` or ``llama:/models/judge.gguf``: llama.cpp's server started here on
  the GGUF (a package alias or a file), stopped when the bench ends (as ``evalign demo --judge``);
* ``openai:qwen2.5-7b-instruct@http://localhost:8000/v1``: any OpenAI-compatible server;
* ``hf:smollm2-135m-instruct``: a model in this process (a folder, a GGUF or an alias);
* ``reward:PATH``: a reward model (a sequence classifier, e.g. one ``train-judge --kind reward`` made):
  it scores each response, pairwise sets get its verdict from the two scores (no template);
* any other registered backend by its name (a plugin).

``KEY=VALUE`` options are the judge's decoding settings (``temperature``, ``top_p``, ``max_tokens``,
``seed``, ``repetition_penalty``), ``reask``, ``constrain`` where the judges take it, ``tie_margin``
(reward models: a tie when the scores differ by at most this), and the
backend's (``concurrency``, ``timeout``, ``api_key_env``, ``device``, ``batch_size``,
``system_prompt``); a key's value is read as a number where it is one. An API key is never part of a
spec: ``api_key_env`` names the environment variable that holds it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from evalign.backends import BACKENDS, Backend, public_url
from evalign.backends.spec import (
    BACKEND_OPTIONS,
    LLAMA,
    LLAMA_TIMEOUT,
    BackendSpec,
    gguf_of,
    split_spec,
)
from evalign.backends.spec import open_backend as open_spec
from evalign.bench.suite import Recipe
from evalign.errors import UsageError, unknown_name
from evalign.judges.base import SAMPLING_KEYS, judge_for_backend
from evalign.judges.option_rules import backend_option_problem, check_constrain
from evalign.judges.prompts import sampling_problem
from evalign.judges.spec import JudgeSpec
from evalign.redaction import redact_text

#: judge options a spec may set besides the sampling keys
JUDGE_OPTIONS = ("reask", "constrain", "tie_margin")
#: the decoding every bench judge uses unless its spec or the bench settings say otherwise
BENCH_DECODING: dict[str, Any] = {"temperature": 0.0, "seed": 0}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


@dataclass(frozen=True)
class BenchJudge:
    """A judge of the bench by its name: its ``name`` (its column in every set's table), ``backend``
    and ``model``, ``base_url`` (servers), and its ``options`` (decoding, ``reask``, ``constrain``) and
    ``backend_options`` (see the module doc). It runs a set as :meth:`for_set`'s
    :class:`~evalign.judges.spec.JudgeSpec` (built by :func:`~evalign.judges.spec.make_judge`) on
    :attr:`backend_spec` (opened by :func:`open_backend`)."""

    name: str
    backend: str
    model: str
    base_url: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    backend_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise UsageError(f"judge name {self.name!r}: letters, digits, _ . - only (it names a column)")
        if self.backend != LLAMA and self.backend not in BACKENDS:
            raise unknown_name("judge backend", self.backend, [LLAMA, *BACKENDS.names()])
        self._check_mappings()
        bad = [k for k in self.options if k not in (*SAMPLING_KEYS, *JUDGE_OPTIONS)]
        bad += [k for k in self.backend_options if k not in BACKEND_OPTIONS]
        if bad:
            raise unknown_name("judge option", bad[0], [*SAMPLING_KEYS, *JUDGE_OPTIONS, *BACKEND_OPTIONS],
                               where=f"judge {self.name}")
        _ = self.backend_spec  # its own checks (an api_key_env that is not a variable's name)

        for key, value in self.options.items():  # the rules `evalign judge` applies to the same settings
            problem = sampling_problem(key, value) if key in SAMPLING_KEYS else None
            if problem:
                raise UsageError(f"judge {self.name}: {key} {problem}")
        if "constrain" in self.options:
            check_constrain(self.options["constrain"])
        for key, value in self.backend_options.items():
            problem = backend_option_problem(key, value)
            if problem:
                raise UsageError(f"judge {self.name}: {key} {problem}")
        for url in self.base_url:
            parsed = urlparse(url)
            if not (parsed.scheme in ("http", "https") and parsed.netloc):
                raise UsageError(f"judge {self.name}: the server's URL must be http:// or https:// (e.g. "
                                 f"{self.backend}:{self.model}@http://localhost:8000/v1), got {public_url(url)!r}")
        if (not self.base_url and self.backend in BACKENDS
                and "base_url" in getattr(BACKENDS.get(self.backend), "required_options", ())):
            raise UsageError(f"judge {self.name}: the {self.backend} backend needs its server's URL: "
                             f"{self.name}={self.backend}:{self.model}@http://HOST:PORT/v1")

    def _check_mappings(self) -> None:
        """A config file's two mappings mixed up: a backend option under ``options`` or a decoding or
        judge option under ``backend_options``."""
        misplaced = [k for k in self.options if k in BACKEND_OPTIONS]
        if misplaced:
            raise UsageError(f"judge {self.name}: {misplaced[0]} is a backend option: set it under backend_options, "
                             "not options")
        misplaced = [k for k in self.backend_options if k in (*SAMPLING_KEYS, *JUDGE_OPTIONS)]
        if misplaced:
            raise UsageError(f"judge {self.name}: {misplaced[0]} is a decoding or judge option: set it under options, "
                             "not backend_options")

    @property
    def backend_spec(self) -> BackendSpec:
        """The judge's backend: kind, model, URLs and backend options."""
        return BackendSpec(kind=self.backend, model=self.model, url=self.base_url, options=self.backend_options)

    @property
    def described(self) -> str:
        """The spec as the user would write it, without secrets (``llama:smollm2-135m-instruct``)."""
        return self.backend_spec.described

    def decoding(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The decoding settings this judge is given: the bench's ``defaults`` (else
        :data:`BENCH_DECODING`) under its own."""
        base = dict(BENCH_DECODING if defaults is None else defaults)
        return {**base, **{k: v for k, v in self.options.items() if k in SAMPLING_KEYS}}

    def for_set(self, recipe: Recipe, *, kind: str = "pairwise", decoding: Mapping[str, Any] | None = None,
                scores: bool = False, constrain: str = "auto") -> JudgeSpec:
        """The :class:`~evalign.judges.spec.JudgeSpec` this judge runs a set with (built by
        :func:`~evalign.judges.spec.make_judge`): the set's ``recipe`` (mode, template, rubric: left
        out when the template's judge takes none), the judge's decoding (over the bench's
        ``decoding``), column :attr:`name`; pairwise judges in both orders. On a backend that returns
        scores (``scores``: a reward model) the set's ``kind`` picks the reward judge (``pairwise``: A vs
        B from the two scores, ``graded``: each response's score) and the recipe and decoding do not
        apply. ``constrain``: the bench's output constraint mode, unless the judge's options set one."""
        if scores:
            mode = judge_for_backend("pairwise" if kind == "pairwise" else "absolute", True)
            margin = {"tie_margin": self.options["tie_margin"]} if kind == "pairwise" and "tie_margin" in self.options else {}
            return JudgeSpec(mode=mode, column=self.name, options=margin, backend=self.backend_spec)
        spec = JudgeSpec(mode=recipe.mode, template=recipe.template, rubric=recipe.rubric,
                         rubric_column=recipe.rubric_column, rubric_map=recipe.rubric_map, decoding=self.decoding(decoding),
                         column=self.name, constrain=self.options.get("constrain", constrain),
                         reask=self.options.get("reask", 0), backend=self.backend_spec)
        if not spec.judge_class.uses_rubric:  # a template overridden by one whose judge takes no rubric
            spec = spec.evolve(rubric=None, rubric_column=None, rubric_map=None)
        return spec


def parse_judge(text: str) -> BenchJudge:
    """``NAME=BACKEND:MODEL[@BASE_URL][,KEY=VALUE...]`` as a :class:`BenchJudge` (see the module doc);
    a malformed spec is a usage error saying what is expected."""
    name, eq, spec = text.partition("=")
    if not eq or not name.strip() or not spec.strip():
        raise UsageError(f"--judge must be NAME=BACKEND:MODEL[@BASE_URL][,KEY=VALUE...], got {redact_text(text)!r}")
    backend, options = split_spec(spec, what=f"--judge {name}")
    return BenchJudge(name=name.strip(), backend=backend.kind, model=backend.model, base_url=backend.url,
                     options=options, backend_options=backend.options)


def judge_spec(data: Mapping[str, Any]) -> BenchJudge:
    """A :class:`BenchJudge` from a mapping (a run config's entry): ``name``, ``backend``, ``model``,
    ``base_url`` (a text or a list) and ``options`` / ``backend_options`` mappings."""
    url = data.get("base_url") or ()
    return BenchJudge(name=str(data["name"]), backend=str(data.get("backend", "openai")), model=str(data["model"]),
                     base_url=(url,) if isinstance(url, str) else tuple(url), options=dict(data.get("options") or {}),
                     backend_options=dict(data.get("backend_options") or {}))


def open_backend(spec: BenchJudge) -> AbstractContextManager[Backend]:
    """The backend of ``spec``: :func:`evalign.backends.spec.open_backend` on its
    :attr:`~BenchJudge.backend_spec`, named after the judge (for ``llama``, llama.cpp's server's log
    ``evalign-bench-NAME-PID.log``)."""
    return open_spec(spec.backend_spec, name=f"judge {spec.name}", log_name=f"bench-{spec.name}")


__all__ = ["BACKEND_OPTIONS", "BENCH_DECODING", "JUDGE_OPTIONS", "LLAMA", "LLAMA_TIMEOUT", "BenchJudge", "gguf_of",
           "judge_spec", "open_backend", "parse_judge"]
