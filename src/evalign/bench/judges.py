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

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from evalign.bench.suite import Recipe
from evalign.errors import BackendError, UsageError, unknown_name
from evalign.judges.backends import BACKENDS, Backend, BackendOptions, OpenAICompatibleBackend, create_backend
from evalign.judges.backends.llama_server import LlamaServer
from evalign.judges.backends.model_source import is_gguf, packaged_gguf_path
from evalign.judges.base import SAMPLING_KEYS, Judge, get_judge, judge_for_backend, judge_for_template
from evalign.signature import file_sha256

#: the backend that starts llama.cpp's server on a GGUF for the bench
LLAMA = "llama"
#: seconds a request to the llama server started here may take before it is abandoned and sent again: a
#: long prompt on a busy CPU takes minutes to read, and a resent request only doubles the server's work
LLAMA_TIMEOUT = 1800.0
#: judge options a spec may set besides the sampling keys
JUDGE_OPTIONS = ("reask", "constrain", "tie_margin")
#: backend options a spec may set
BACKEND_OPTIONS = ("concurrency", "timeout", "connect_timeout", "max_retries", "idle_timeout", "api_key_env", "device",
                   "batch_size", "system_prompt", "constraint_format", "n_ctx", "threads")
#: the decoding every bench judge uses unless its spec or the bench settings say otherwise
BENCH_DECODING: dict[str, Any] = {"temperature": 0.0, "seed": 0}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgeSpec:
    """A judge of the bench: its ``name`` (its column in every set's table), ``backend`` and
    ``model``, ``base_url`` (servers), and its ``options`` (decoding, ``reask``, ``constrain``) and
    ``backend_options`` (see the module doc)."""

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
        bad = [k for k in self.options if k not in (*SAMPLING_KEYS, *JUDGE_OPTIONS)]
        bad += [k for k in self.backend_options if k not in BACKEND_OPTIONS]
        if bad:
            raise unknown_name("judge option", bad[0], [*SAMPLING_KEYS, *JUDGE_OPTIONS, *BACKEND_OPTIONS],
                               where=f"judge {self.name}")

    @property
    def described(self) -> str:
        """The spec as the user would write it, without secrets (``llama:smollm2-135m-instruct``)."""
        url = f"@{self.base_url[0]}" if self.base_url else ""
        return f"{self.backend}:{self.model}{url}"

    def decoding(self, defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The decoding settings this judge is given: the bench's ``defaults`` (else
        :data:`BENCH_DECODING`) under its own."""
        base = dict(BENCH_DECODING if defaults is None else defaults)
        return {**base, **{k: v for k, v in self.options.items() if k in SAMPLING_KEYS}}


def _value(text: str) -> Any:
    """A spec option's value: an int, a float, true/false, none, or the text."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for number in (int, float):
        with contextlib.suppress(ValueError):
            return number(text)
    return text.strip()


def parse_judge(text: str) -> JudgeSpec:
    """``NAME=BACKEND:MODEL[@BASE_URL][,KEY=VALUE...]`` as a :class:`JudgeSpec` (see the module doc);
    a malformed spec is a usage error saying what is expected."""
    name, eq, spec = text.partition("=")
    if not eq or not name.strip() or not spec.strip():
        raise UsageError(f"--judge must be NAME=BACKEND:MODEL[@BASE_URL][,KEY=VALUE...], got {text!r}")
    head, *opts = spec.split(",")
    backend, colon, rest = head.partition(":")
    if not colon or not rest:
        raise UsageError(f"--judge {name}: the spec starts with a backend, e.g. llama:smollm2-135m-instruct or "
                         f"openai:MODEL@http://localhost:8000/v1; got {spec!r}")
    model, base_url = rest, cast(tuple[str, ...], ())
    m = re.search(r"@(https?://\S+)\Z", rest)
    if m:
        model, base_url = rest[: m.start()], (m.group(1),)
    options: dict[str, Any] = {}
    backend_options: dict[str, Any] = {}
    for o in opts:
        k, eq2, v = o.partition("=")
        if not eq2:
            raise UsageError(f"--judge {name}: option {o!r} is not KEY=VALUE")
        (backend_options if k.strip() in BACKEND_OPTIONS else options)[k.strip()] = _value(v)
    return JudgeSpec(name=name.strip(), backend=backend.strip(), model=model.strip(), base_url=base_url,
                     options=options, backend_options=backend_options)


def judge_spec(data: Mapping[str, Any]) -> JudgeSpec:
    """A :class:`JudgeSpec` from a mapping (a run config's entry): ``name``, ``backend``, ``model``,
    ``base_url`` (a text or a list) and ``options`` / ``backend_options`` mappings."""
    url = data.get("base_url") or ()
    return JudgeSpec(name=str(data["name"]), backend=str(data.get("backend", "openai")), model=str(data["model"]),
                     base_url=(url,) if isinstance(url, str) else tuple(url), options=dict(data.get("options") or {}),
                     backend_options=dict(data.get("backend_options") or {}))


def gguf_of(model: str) -> Path:
    """The GGUF file a ``llama`` spec serves: a file path, or a package alias's file."""
    p = Path(model).expanduser()
    if p.is_file() and is_gguf(p):
        return p
    return packaged_gguf_path(model)


@contextlib.contextmanager
def open_backend(spec: JudgeSpec) -> Iterator[Backend]:
    """The backend of ``spec``, open for the bench and closed after it: for ``llama``, llama.cpp's
    server started on the GGUF (its cache identity is the GGUF's SHA-256, not its random port)."""
    bo = dict(spec.backend_options)
    if spec.backend == LLAMA:
        gguf = gguf_of(spec.model)
        threads = int(bo.pop("threads", None) or os.cpu_count() or 1)
        log = Path(tempfile.gettempdir()) / f"evalign-bench-{spec.name}-{os.getpid()}.log"
        server = LlamaServer(gguf, n_ctx=int(bo.pop("n_ctx", None) or 8192), n_threads=threads, alias=gguf.stem,
                             log_path=log)
        try:
            info = server.start()
        except RuntimeError as e:  # the log is kept for the user to read
            raise BackendError(f"judge {spec.name}: {e} (the server's log is kept: {log})") from None
        failed = True
        try:
            yield OpenAICompatibleBackend(info.base_url, info.model, api_key_env=None, concurrency=1,
                                          server_name=f"llama.cpp:{file_sha256(gguf)}", constraint_format="llama.cpp",
                                          timeout=float(bo.pop("timeout", LLAMA_TIMEOUT)),
                                          **{k: v for k, v in bo.items() if k in ("max_retries",)})
            failed = False
        finally:
            died = server.proc is not None and server.proc.poll() is not None  # the server failed under the run
            server.stop()
            if failed and died:
                logger.warning("judge %s: llama.cpp's server exited with code %s; its log is kept: %s", spec.name,
                               server.proc.returncode if server.proc is not None else "?", log)
            else:
                log.unlink(missing_ok=True)
        return
    env = bo.pop("api_key_env", "OPENAI_API_KEY")
    extra = {k: bo.pop(k) for k in ("n_ctx", "threads") if k in bo}
    if extra:
        raise UsageError(f"judge {spec.name}: {', '.join(extra)} apply to the llama backend only")
    options = BackendOptions(model=spec.model, base_url=list(spec.base_url) or None, api_key_env=env, **bo)
    yield create_backend(spec.backend, options)


def make_judge(spec: JudgeSpec, recipe: Recipe, *, kind: str = "pairwise", decoding: Mapping[str, Any] | None = None,
               scores: bool = False, constrain: str = "auto") -> Judge:
    """The judge ``spec`` runs on a set: the set's ``recipe`` (mode, template, rubric: left out when
    the template's judge takes none), the spec's decoding (over the bench's ``decoding``), column
    ``spec.name``; pairwise judges in both orders. On a backend that returns scores (``scores``: a
    reward model) the set's ``kind`` picks the reward judge (``pairwise``: A vs B from the two scores,
    ``graded``: each response's score) and the recipe and decoding do not apply. ``constrain``: the
    bench's output constraint (``auto`` / ``on`` / ``off``), unless the spec sets its own."""
    if scores:
        opts = {"column": spec.name, **{k: v for k, v in spec.options.items() if k == "tie_margin"}}
        if kind != "pairwise" and "tie_margin" in opts:
            opts.pop("tie_margin")
        return get_judge(judge_for_backend("pairwise" if kind == "pairwise" else "absolute", True), **opts)
    opts = {**recipe.options(), **spec.decoding(decoding), "column": spec.name, "constrain": constrain}
    if not judge_for_template(recipe.mode, recipe.template).uses_rubric:  # a template overridden by one without
        for k in ("rubric", "rubric_column", "rubric_map"):
            opts.pop(k, None)
    opts.update({k: v for k, v in spec.options.items() if k in JUDGE_OPTIONS and k != "tie_margin"})
    return get_judge(recipe.mode, **opts)


__all__ = ["BACKEND_OPTIONS", "BENCH_DECODING", "JUDGE_OPTIONS", "LLAMA", "LLAMA_TIMEOUT", "JudgeSpec", "gguf_of", "judge_spec",
           "make_judge", "open_backend", "parse_judge"]
