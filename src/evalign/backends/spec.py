"""A backend by name: :class:`BackendSpec` (kind, model, URLs, options) and :func:`open_backend`.

A spec is written ``KIND:MODEL[@URL][,KEY=VALUE...]`` (the form ``evalign bench --judge`` takes), e.g.

* ``llama:smollm2-135m-instruct`` or ``llama:/models/judge.gguf``: llama.cpp's server started here on
  the GGUF (a package alias or a file), stopped when the backend is closed;
* ``openai:qwen2.5-7b-instruct@http://localhost:8000/v1``: any OpenAI-compatible server (several
  servers of one model: ``@URL1@URL2`` with ``multi``);
* ``anthropic:claude-sonnet-4-5`` / ``gemini:gemini-2.5-flash``: the providers' native APIs (default URL
  the provider's; ``@URL`` for another API root), the key from ``$ANTHROPIC_API_KEY`` / ``$GEMINI_API_KEY``;
* ``hf:smollm2-135m-instruct``: a model in this process (a folder, a GGUF or an alias);
* ``reward:PATH``: a reward model (a sequence classifier with one output);
* any other registered backend by its name (a plugin of the ``evalign.backends`` entry points).

``KEY=VALUE`` options are the backend's settings (:data:`BACKEND_OPTIONS`); a value is read as a
number, ``true`` / ``false`` or ``none`` where it is one. A spec holds no secret: an API key is
named by its environment variable (``api_key_env=NAME``), and the URLs of its ``repr``, its dict
(:meth:`BackendSpec.to_dict`) and its string carry no ``user:password@`` (the backend still sends
those credentials, in the Authorization header).
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
from typing import Any

from evalign.backends._http import split_url_credentials
from evalign.backends.base import Backend, BackendOptions
from evalign.backends.llama_server import LlamaServer
from evalign.backends.model_source import is_gguf, packaged_gguf_path
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.backends.registry import BACKENDS, create_backend, default_api_key_env
from evalign.errors import BackendError, ModelLoadError, UsageError, unknown_name
from evalign.redaction import redact_text
from evalign.signature import file_sha256

#: the kind that starts llama.cpp's server on a GGUF (not a registered backend: it opens an ``openai`` one)
LLAMA = "llama"
#: seconds a request to the llama server started here may take before it is abandoned and sent again: a
#: long prompt on a busy CPU takes minutes to read, and a resent request only doubles the server's work
LLAMA_TIMEOUT = 1800.0
#: the options a spec may set (``n_ctx`` and ``threads``: the ``llama`` kind's server only)
BACKEND_OPTIONS = ("concurrency", "timeout", "connect_timeout", "max_retries", "idle_timeout", "api_key_env", "device",
                   "batch_size", "system_prompt", "constraint_format", "prompt_cache", "service_tier", "n_ctx", "threads")
#: options of the ``llama`` kind only
LLAMA_OPTIONS = ("n_ctx", "threads")
#: option names that would hold a secret: refused, the key is named by its environment variable
SECRET_OPTIONS = ("api_key", "key", "token", "password", "secret", "authorization")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: where a spec's URL starts: any scheme (a wrong one is refused by the caller, not folded into the model)
_URL = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")

logger = logging.getLogger(__name__)


def public_urls(urls: tuple[str, ...]) -> tuple[str, ...]:
    """``urls`` without ``user:password@`` credentials."""
    return tuple(split_url_credentials(u)[0] for u in urls)


def option_value(text: str) -> Any:
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


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)



def api_key_env_problem(name: Any) -> str | None:
    """What is wrong with ``name`` as the environment variable holding an API key (None: nothing, or
    not set). The message never repeats the value: it may be the key itself."""
    if not name or (isinstance(name, str) and _ENV_NAME.match(name)):
        return None
    return "must be the NAME of an environment variable (letters, digits, _), never the key itself"

def key_env_of(kind: str, name: str | None) -> str | None:
    """The variable the key of a ``kind`` backend is read from: ``name`` when given (``""``: no key,
    None), else the kind's default (:func:`~evalign.backends.registry.default_api_key_env`)."""
    if name is None:
        return default_api_key_env(kind)
    return name or None


@dataclass(frozen=True, repr=False)
class BackendSpec:
    """A backend by name: its ``kind`` (a registered backend, or :data:`LLAMA`), ``model``, ``url``
    (the API roots of a server backend: none, one or several) and ``options`` (:data:`BACKEND_OPTIONS`).

    Secrets stay out: ``api_key_env`` must be the NAME of an environment variable, an option named
    like a secret is refused, and ``repr``, :meth:`to_dict` and ``str`` show the URLs without their
    ``user:password@`` (kept for the backend, which sends them in the Authorization header)."""

    kind: str
    model: str
    url: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", (self.url,) if isinstance(self.url, str) else tuple(self.url))
        object.__setattr__(self, "options", dict(self.options))
        if not self.kind or not self.model:
            raise UsageError(f"a backend spec needs a kind and a model (KIND:MODEL), got {str(self)!r}")
        if self.kind != LLAMA and self.kind not in BACKENDS:
            raise unknown_name("judge backend", self.kind, [LLAMA, *BACKENDS.names()])
        secret = [k for k in self.options if k.lower() in SECRET_OPTIONS]
        if secret:
            raise UsageError(f"backend option {secret[0]!r}: a spec holds no secret; name the environment variable "
                             "that holds the key (api_key_env=NAME)")
        bad = [k for k in self.options if k not in BACKEND_OPTIONS]
        if bad:
            raise unknown_name("backend option", bad[0], BACKEND_OPTIONS)
        problem = api_key_env_problem(self.options.get("api_key_env"))
        if problem:
            raise UsageError(f"api_key_env {problem}")

    @property
    def public_url(self) -> tuple[str, ...]:
        """The URLs without credentials: the form to print, log or store."""
        return public_urls(self.url)

    @property
    def described(self) -> str:
        """``KIND:MODEL[@URL]`` without options or secrets (the first URL only)."""
        url = f"@{self.public_url[0]}" if self.url else ""
        return f"{self.kind}:{self.model}{url}"

    def __str__(self) -> str:
        """``KIND:MODEL[@URL...][,KEY=VALUE...]`` (read back by :meth:`parse`), without secrets."""
        urls = "".join(f"@{u}" for u in self.public_url)
        opts = "".join(f",{k}={_shown(v)}" for k, v in self.options.items())
        return f"{self.kind}:{self.model}{urls}{opts}"

    def __repr__(self) -> str:
        return (f"BackendSpec(kind={self.kind!r}, model={self.model!r}, url={self.public_url!r}, "
                f"options={dict(self.options)!r})")

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "model", "url": [...], "options": {...}}`` (URLs without credentials)."""
        return {"kind": self.kind, "model": self.model, "url": list(self.public_url), "options": dict(self.options)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BackendSpec:
        """The spec of a mapping (:meth:`to_dict`'s form; ``url`` a text or a list)."""
        url = data.get("url") or ()
        return cls(kind=str(data["kind"]), model=str(data["model"]), url=(url,) if isinstance(url, str) else tuple(url),
                   options=dict(data.get("options") or {}))

    @classmethod
    def parse(cls, text: str) -> BackendSpec:
        """``KIND:MODEL[@URL...][,KEY=VALUE...]`` as a spec; every option must be a backend option
        (:func:`split_spec` leaves the others to the caller)."""
        spec, other = split_spec(text)
        if other:
            raise unknown_name("backend option", next(iter(other)), BACKEND_OPTIONS)
        return spec

    def backend_options(self) -> BackendOptions:
        """The :class:`BackendOptions` the registered backend ``kind`` is built from (not for ``llama``)."""
        bo = dict(self.options)
        env = key_env_of(self.kind, bo.pop("api_key_env", None))
        extra = [k for k in LLAMA_OPTIONS if k in bo]
        if extra:
            raise UsageError(f"{', '.join(extra)} apply to the llama backend only")
        return BackendOptions(model=self.model, base_url=list(self.url) or None, api_key_env=env, **bo)


def split_spec(text: str, *, what: str = "backend spec") -> tuple[BackendSpec, dict[str, Any]]:
    """``KIND:MODEL[@URL...][,KEY=VALUE...]`` as (the :class:`BackendSpec` of its backend options, the
    other ``KEY=VALUE`` options, e.g. a judge's decoding). ``what`` names the spec in errors."""
    head, *opts = text.split(",")
    kind, colon, rest = head.partition(":")
    if not colon or not rest.strip():
        raise UsageError(f"{what}: the spec starts with a backend, e.g. llama:smollm2-135m-instruct or "
                         f"openai:MODEL@http://localhost:8000/v1; got {redact_text(text)!r}")
    model, *urls = _URL.split(rest)
    options: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for o in opts:
        k, eq, v = o.partition("=")
        if not eq:
            raise UsageError(f"{what}: option {redact_text(o)!r} is not KEY=VALUE")
        key = k.strip()
        (options if key in BACKEND_OPTIONS or key.lower() in SECRET_OPTIONS else other)[key] = option_value(v)
    spec = BackendSpec(kind=kind.strip(), model=model.strip(), url=tuple(u.strip() for u in urls), options=options)
    return spec, other


def gguf_of(model: str) -> Path:
    """The GGUF file a ``llama`` spec serves: a file path, or a package alias's file."""
    p = Path(model).expanduser()
    if p.is_file() and is_gguf(p):
        return p
    if p.is_file():
        raise ModelLoadError(f"{model}: not a GGUF file (it does not start with GGUF's magic bytes); the llama "
                             "backend serves a .gguf file or a package alias")
    if p.suffix.lower() == ".gguf" or os.sep in model:
        raise ModelLoadError(f"{model}: no such GGUF file")
    return packaged_gguf_path(model)


@contextlib.contextmanager
def open_backend(spec: BackendSpec, *, name: str = "backend", log_name: str | None = None) -> Iterator[Backend]:
    """The backend of ``spec``, open for the ``with`` block: for ``llama``, llama.cpp's server started on
    the GGUF (its log in the temporary folder, ``evalign-LOG_NAME-PID.log``) and stopped after the block,
    reached by an ``openai`` backend whose cache identity is the GGUF's SHA-256, not its random port;
    any other kind built by the backend registry. ``name`` names the backend in errors."""
    bo = dict(spec.options)
    if spec.kind == LLAMA:
        gguf = gguf_of(spec.model)
        threads = int(bo.pop("threads", None) or os.cpu_count() or 1)
        log = Path(tempfile.gettempdir()) / f"evalign-{log_name or name}-{os.getpid()}.log"
        server = LlamaServer(gguf, n_ctx=int(bo.pop("n_ctx", None) or 8192), n_threads=threads, alias=gguf.stem,
                             log_path=log)
        try:
            info = server.start()
        except RuntimeError as e:  # the log is kept for the user to read
            raise BackendError(f"{name}: {e} (the server's log is kept: {log})") from None
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
                logger.warning("%s: llama.cpp's server exited with code %s; its log is kept: %s", name,
                               server.proc.returncode if server.proc is not None else "?", log)
            else:
                log.unlink(missing_ok=True)
        return
    extra = [k for k in LLAMA_OPTIONS if k in bo]
    if extra:
        raise UsageError(f"{name}: {', '.join(extra)} apply to the llama backend only")
    yield create_backend(spec.kind, spec.backend_options())


__all__ = ["BACKEND_OPTIONS", "LLAMA", "LLAMA_OPTIONS", "LLAMA_TIMEOUT", "SECRET_OPTIONS", "BackendSpec", "api_key_env_problem", "gguf_of", "key_env_of",
           "open_backend", "option_value", "public_urls", "split_spec"]
