"""The reward-model backend: a ``transformers`` sequence-classification model with one output (a reward
model) scores conversations instead of generating text.

Each request is one conversation ending with the graded assistant turn (the reward judges,
:mod:`evalign.judges.modes.reward`, build them: the instruction as the user turn, the response as the
assistant turn, or an item's whole ``messages``). The backend renders and truncates them with
:class:`~evalign.backends.reward_inputs.RewardEncoder` (the rule training used), sorts them
by length into batches of at most ``batch_size`` conversations and ``token_budget`` padded tokens
(:func:`evalign.backends.models.length_batches`), runs the model, and answers each request with a
:class:`~evalign.backends.types.Generation` whose ``raw["score"]`` is the reward (the logit;
``text`` holds it too, as ``repr(float)``). The judge runner caches each answer, so a score is
computed once per (model, conversation).

torch / transformers are imported when a :class:`RewardModelBackend` is created.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from evalign.backends.base import Backend, BackendOptions, BackendRequestError, BatchedBackend, OnDone
from evalign.backends.model_source import resolve_base_model
from evalign.backends.models import length_batches, model_identity, resolve_model, tokenizer_limit
from evalign.backends.registry import register_backend
from evalign.backends.reward_inputs import TRUNCATION_RULE, RewardEncoder
from evalign.backends.types import Choice, Generation, GenerationRequest, Usage
from evalign.errors import BackendError, ModelLoadError
from evalign.signature import stable_hash

#: file written beside a trained reward model: how it was trained to read its inputs
REWARD_RECORD = "evalign_reward.json"
#: the longest input when neither the model folder nor the caller says (tokens)
DEFAULT_MAX_LENGTH = 1024


def reward_record(path: str | Path) -> dict[str, Any]:
    """The :data:`REWARD_RECORD` of a model folder (``max_length``, ``truncation``, ``base``), or {}."""
    f = Path(path) / REWARD_RECORD
    if not f.is_file():
        return {}
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _is_path(spec: str) -> bool:
    """Whether ``spec`` can only be a path, not a hub name (``NAME`` or ``OWNER/NAME``)."""
    s = spec.strip()
    return s.startswith(("/", "./", "../", "~", ".\\")) or s.endswith("/") or s.count("/") > 1 or "\\" in s


def resolve_reward_model(spec: str) -> tuple[str, str]:
    """``(path or name, shown name)`` of a reward model or base given as a folder, a GGUF file, a package
    alias (``smollm2-135m-instruct``, ``minilm``) or a hub name."""
    if spec.strip().lower() == "minilm":
        return resolve_model(spec), "all-MiniLM-L6-v2"
    if _is_path(spec) and not Path(spec).expanduser().exists():
        raise ModelLoadError(f"{spec}: no such model folder (a reward model is a local folder with config.json, "
                             "weights and tokenizer files)")
    src = resolve_base_model(spec, must_exist=False, on_message=_to_stderr)
    path = str(src.path) if src.kind != "name" else spec
    shown = path if src.kind in ("folder", "name") else src.spec
    return path, shown.rstrip("/").rsplit("/", 1)[-1]


def is_reward_model(spec: str | Path) -> bool:
    """Whether ``spec`` is a local model folder whose ``config.json`` is a sequence classifier with one
    label (read without loading the model)."""
    f = Path(spec).expanduser() / "config.json"
    try:
        cfg = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
    except (OSError, ValueError):
        return False
    archs = cfg.get("architectures") or []
    labels = len(cfg.get("id2label") or {}) or int(cfg.get("num_labels") or 0)
    return any(str(a).endswith("ForSequenceClassification") for a in archs) and labels == 1


def check_reward_config(config: Any, where: str) -> None:
    """A reward model is a ``...ForSequenceClassification`` with one label; anything else is a
    :class:`ModelLoadError` saying how to make one."""
    archs = list(getattr(config, "architectures", None) or [])
    if not any(a.endswith("ForSequenceClassification") for a in archs) or int(getattr(config, "num_labels", 0)) != 1:
        raise ModelLoadError(
            f"{where!r} is not a reward model (a sequence classifier with one output; it is "
            f"{', '.join(archs) or 'of unknown architecture'} with {getattr(config, 'num_labels', '?')} labels): "
            "train one with `evalign train-judge --kind reward`, or give it an untrained score head with "
            "evalign.train.reward.init_reward_model")


class RewardModelBackend(BatchedBackend):
    """A local reward model (``AutoModelForSequenceClassification``, one output) that scores conversations.

    * ``model_path``: a model folder (e.g. one written by ``evalign train-judge --kind reward``), a
      GGUF file or alias, ``minilm``, or a hub name in the local Hugging Face cache; it must be a
      sequence classifier with one label (:func:`check_reward_config`).
    * ``device`` (default CUDA when available), ``dtype`` (float32 on CPU by default).
    * ``batch_size``: conversations per forward batch; ``token_budget``: padded tokens per batch at
      most (default ``batch_size * max_length``).
    * ``max_length``: tokens read per conversation (default: the length the model was trained with,
      from its :data:`REWARD_RECORD`, else 1,024; never more than the model reads); longer ones are
      truncated by :data:`~evalign.backends.reward_inputs.TRUNCATION_RULE`.
    """

    kind = "reward"
    output: ClassVar[str] = "score"

    @classmethod
    def from_options(cls, options: BackendOptions) -> Backend:
        """The reward model ``options.model`` (with ``device``, ``batch_size`` and ``options.extra``)."""
        return cls(**{"model_path": options.model, **options.given("device", "batch_size"), **options.extra})

    def __init__(
        self, model_path: str, *, device: str | None = None, batch_size: int = 16, dtype: str | None = None,
        max_length: int | None = None, token_budget: int | None = None,
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        try:
            import torch
            from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelLoadError("the 'reward' judge backend needs torch and transformers: "
                                 "pip install 'evalign[models]'") from exc
        self.model_path, self.display_model = resolve_reward_model(model_path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = batch_size
        self.concurrency = 1
        kwargs: dict[str, Any] = {}
        if dtype is not None:
            kwargs["dtype"] = getattr(torch, dtype)
        elif self.device == "cpu":
            kwargs["dtype"] = torch.float32
        try:
            config = AutoConfig.from_pretrained(self.model_path)
            check_reward_config(config, model_path)
            tokenizer: Any = AutoTokenizer.from_pretrained(self.model_path)
            model: Any = AutoModelForSequenceClassification.from_pretrained(self.model_path, **kwargs)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load the reward model {self.model_path!r}: {exc}. Give a local folder with "
                                 "config.json, weights and tokenizer files (no download when HF_HUB_OFFLINE=1).") from exc
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is None:
                raise ModelLoadError(f"the tokenizer of {self.model_path!r} has neither a pad nor an eos token")
            tokenizer.pad_token = tokenizer.eos_token
        model.config.pad_token_id = tokenizer.pad_token_id  # a decoder reads its score at the last non-pad token
        self.tokenizer: Any = tokenizer
        self.model: Any = model.to(self.device).eval()
        self.dtype = str(self.model.dtype).replace("torch.", "")
        record = reward_record(self.model_path)
        limit = tokenizer_limit(tokenizer, config)
        self.max_length = min(int(max_length or record.get("max_length") or DEFAULT_MAX_LENGTH), limit)
        self.encoder = RewardEncoder(tokenizer, self.max_length)
        self.token_budget = int(token_budget or self.batch_size * self.max_length)
        self._content_id: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __repr__(self) -> str:
        return f"RewardModelBackend(model_path={self.model_path!r}, device={self.device!r}, dtype={self.dtype!r})"

    def identity(self) -> dict[str, Any]:
        """``{"kind": "reward", "model", "dtype", "rendering", "max_length", "truncation"}``: ``model``
        is the content hash of the model's files; ``rendering`` the chat template's hash (or
        ``text_pair``); the device and batch size are left out (they do not change a score beyond
        float noise)."""
        if self._content_id is None:
            self._content_id = model_identity(self.model_path)
        template = getattr(self.tokenizer, "chat_template", None)
        return {"kind": self.kind, "model": f"hf:{self._content_id}", "dtype": self.dtype,
                "rendering": stable_hash(template) if template else "text_pair",
                "max_length": self.max_length, "truncation": TRUNCATION_RULE}

    # -- scoring ---------------------------------------------------------------------------
    def encode(self, reqs: Sequence[GenerationRequest]) -> list[list[int]]:
        """The token ids of each request's conversation (it must end with an assistant turn)."""
        convs = []
        for r in reqs:
            if r.messages is None or r.messages[-1]["role"] != "assistant":
                raise BackendRequestError("the 'reward' backend scores conversations that end with the graded "
                                          "assistant turn: use it with the reward judges (--mode absolute or "
                                          "pairwise with --backend reward)", fatal=True)
            convs.append(r.messages)
        return self.encoder.encode_many(convs)

    def score_ids(self, batch: Sequence[Sequence[int]]) -> list[float]:
        """The rewards of one batch of token-id lists (right-padded, as training pads)."""
        import torch

        n = max(len(x) for x in batch)
        pad = int(self.tokenizer.pad_token_id)
        ids = torch.full((len(batch), n), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        for i, x in enumerate(batch):
            ids[i, : len(x)] = torch.tensor(list(x), dtype=torch.long)
            mask[i, : len(x)] = 1
        with self._lock, torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
        return [float(v) for v in logits[:, 0].float().cpu().tolist()]

    def score(self, reqs: Sequence[GenerationRequest]) -> list[float]:
        """The reward of each request, blocking (length-sorted batches)."""
        ids = self.encode(reqs)
        out = [0.0] * len(ids)
        for batch in length_batches([len(x) for x in ids], self.batch_size, self.token_budget):
            for i, s in zip(batch, self.score_ids([ids[i] for i in batch]), strict=True):
                out[i] = s
        return out

    async def generate_many(
        self,
        reqs: Sequence[GenerationRequest],
        on_done: OnDone | None = None,
        *,
        raise_errors: bool = False,
    ) -> list[Generation | BackendError]:
        """Encode every request, then score them in length-sorted batches in a thread; ``on_done`` gets
        each result as its batch finishes (the runner caches it there). Cancelled, the batch running
        finishes and nothing after it starts."""
        self._stop.clear()
        results: list[Generation | BackendError | None] = [None] * len(reqs)
        ids = await asyncio.to_thread(self.encode, reqs)
        for batch in length_batches([len(x) for x in ids], self.batch_size, self.token_budget):
            try:
                scores: list[float] | BackendError = await asyncio.to_thread(self.score_ids, [ids[i] for i in batch])
            except asyncio.CancelledError:
                self._stop.set()
                raise
            except (RuntimeError, ValueError) as exc:
                err = BackendRequestError(f"scoring with {self.model_path!r} failed: {exc}")
                if raise_errors:
                    raise err from exc
                scores = err
            for k, i in enumerate(batch):
                g: Generation | BackendError
                if isinstance(scores, BackendError):
                    g = scores
                    self._count(failed=True)
                else:
                    g = self._generation(scores[k], len(ids[i]))
                results[i] = g
                if on_done is not None:
                    on_done(i, g)
        return [r for r in results if r is not None]

    def _generation(self, score: float, n_tokens: int) -> Generation:
        usage = Usage(n_tokens, 0)
        self._count(usage)
        return Generation.from_choices([Choice(repr(score), "stop")], usage,
                                       raw={"backend": "reward", "score": score, "tokens": n_tokens})


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


register_backend("reward")(RewardModelBackend)
