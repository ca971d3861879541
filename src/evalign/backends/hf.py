"""The local Hugging Face backend: a ``transformers`` causal LM, batched on CPU or GPU.
torch / transformers are imported when an :class:`HFLocalBackend` is created."""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from evalign.backends.base import Backend, BackendOptions, BackendRequestError, BatchedBackend, OnDone
from evalign.backends.hf_constraint import ConstraintProcessor, ll_tokenizer
from evalign.backends.model_source import resolve_base_model
from evalign.backends.models import model_identity
from evalign.backends.registry import register_backend
from evalign.backends.types import (
    Choice,
    Constraint,
    Generation,
    GenerationRequest,
    Message,
    Usage,
    fold_system,
)
from evalign.errors import BackendError, ModelLoadError
from evalign.signature import stable_hash

# --------------------------------------------------------------------------------------------
# Local Hugging Face backend
# --------------------------------------------------------------------------------------------
#: Prompt format used when a tokenizer has no chat template. Each message becomes
#: ``"### {Role}:\n{content}\n\n"`` (Role capitalised) and the prompt ends with ``"### Assistant:\n"``.
FALLBACK_ROLE_FORMAT = "### {role}:\n{content}\n\n"
FALLBACK_GENERATION_PROMPT = "### Assistant:\n"


def fallback_format(messages: Sequence[Message]) -> str:
    """The documented prompt format for tokenizers without a chat template (see module constants)."""
    parts = [FALLBACK_ROLE_FORMAT.format(role=m["role"].capitalize(), content=m["content"]) for m in messages]
    return "".join(parts) + FALLBACK_GENERATION_PROMPT


class HFLocalBackend(BatchedBackend):
    """A local Hugging Face causal LM (``transformers``), batched with left padding.

    * ``model_path``: a local directory, a GGUF file or a package alias such as
      ``smollm2-135m-instruct`` (dequantized once into the model cache:
      :func:`~evalign.backends.model_source.resolve_base_model`; ``on_message`` gets its one-line
      report), or a model id already in the local HF cache.
    * ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``; default CUDA when available, else CPU.
    * ``batch_size``: prompts per forward batch. ``dtype``: ``"float32"``, ``"bfloat16"``, ``"float16"``
      or None (float32 on CPU, the checkpoint's dtype elsewhere).

    Chat messages go through the tokenizer's chat template. A template that rejects the system role
    (raises) or drops it silently gets the system prompt folded into the first user turn
    (:func:`fold_system`); a tokenizer without a chat template uses :func:`fallback_format`.
    Requests with equal settings are batched together; ``seed`` seeds each batch (so sampled outputs
    are reproducible for the same requests, batch size and device). An output ``constraint`` (a
    regex, JSON schema or GBNF grammar) is kept by a logits processor driven by llguidance
    (:mod:`evalign.backends.hf_constraint`); ``logit_bias`` is not supported and raises
    :class:`BackendError`.
    """

    kind = "hf"
    constraint_forms = ("gbnf", "regex", "json_schema")

    @classmethod
    def from_options(cls, options: BackendOptions) -> Backend:
        """The local model ``options.model`` (a folder, GGUF file or alias; with ``device`` and
        ``batch_size``); what the GGUF conversion did is printed to stderr."""
        return cls(**{"model_path": options.model, "on_message": _to_stderr, **options.given("device", "batch_size"),
                      **options.extra})

    def __init__(
        self, model_path: str, *, device: str | None = None, batch_size: int = 8, dtype: str | None = None,
        on_message: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelLoadError(
                "the 'hf' judge backend needs torch and transformers: pip install 'evalign[models]'"
            ) from exc
        self.source = resolve_base_model(model_path, must_exist=False, on_message=on_message)
        self.model_path = str(self.source.path) if self.source.kind != "name" else str(model_path)
        self.batch_size = batch_size
        self.concurrency = 1
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = None
        if dtype is not None:
            torch_dtype = getattr(torch, dtype, None)
            if not isinstance(torch_dtype, torch.dtype):
                raise ValueError(f"unknown dtype {dtype!r} (use float32, bfloat16 or float16)")
        elif self.device == "cpu":
            torch_dtype = torch.float32
        try:
            tokenizer: Any = AutoTokenizer.from_pretrained(self.model_path)
            kwargs: dict[str, Any] = {}
            if torch_dtype is not None:
                kwargs["dtype"] = torch_dtype
            model: Any = AutoModelForCausalLM.from_pretrained(self.model_path, **kwargs)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(
                f"cannot load the judge model {self.model_path!r}: {exc}. Give a local directory with "
                "config.json, weights and tokenizer files (no download is attempted when HF_HUB_OFFLINE=1)."
            ) from exc
        self.tokenizer: Any = tokenizer
        self.model: Any = model.to(self.device)
        self.model.eval()
        self.dtype = str(self.model.dtype).replace("torch.", "")
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            if tok.eos_token is None:
                raise ModelLoadError(f"the tokenizer of {self.model_path!r} has neither a pad nor an eos token")
            tok.pad_token = tok.eos_token
        self._system_mode: str | None = None  # "native" | "fold" | None (not yet probed)
        self._content_id: str | None = None
        #: the model's name for --skip-self (the folder name; the alias or GGUF file name as given)
        shown = self.model_path if self.source.kind in ("folder", "name") else self.source.spec
        self.display_model = shown.rstrip("/").rsplit("/", 1)[-1]
        #: the named inputs of the model's forward (a tokenizer may return more, e.g. token_type_ids; the
        #: **kwargs of transformers' models are attention settings, not inputs: generate() rejects others)
        self._inputs = frozenset(inspect.signature(self.model.forward).parameters)
        self._lock = threading.Lock()
        self._ll_tokenizer: Any = None
        #: set when the run is cancelled: the generation loop stops at its next token
        self._stop = threading.Event()

    def __repr__(self) -> str:
        return f"HFLocalBackend(model_path={self.model_path!r}, device={self.device!r}, dtype={self.dtype!r})"

    def identity(self) -> dict[str, Any]:
        """``{"kind": "hf", "model", "dtype", "chat_template"}``: ``model`` is the content hash of the
        model's files (weights sampled, configs and tokenizer whole; :func:`evalign.backends.models.model_identity`,
        as the model metrics use), so changed weights at the same path never reuse cached grades and the
        same model at another path does; the template is hashed; the device is left out."""
        template = getattr(self.tokenizer, "chat_template", None)
        if self._content_id is None:
            self._content_id = model_identity(self.model_path)
        return {
            "kind": self.kind,
            "model": f"hf:{self._content_id}",
            "dtype": self.dtype,
            "chat_template": stable_hash(template) if template else "fallback",
        }

    def model_inputs(self, enc: Any) -> dict[str, Any]:
        """The tokenizer's outputs that the model's ``forward`` accepts (drops e.g. ``token_type_ids``
        of tokenizers that return them for models that take none)."""
        return {k: v for k, v in enc.items() if k in self._inputs}

    # -- prompts ---------------------------------------------------------------------------
    def _apply_template(self, messages: Sequence[Message]) -> str:
        out = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        return str(out)

    def _probe_system(self) -> str:
        marker = "evalign-system-probe-7f3a"
        try:
            text = self._apply_template([{"role": "system", "content": marker}, {"role": "user", "content": "x"}])
        except Exception:  # jinja TemplateError or a raise_exception() in the template
            return "fold"
        return "native" if marker in text else "fold"

    def render(self, req: GenerationRequest) -> tuple[str, bool]:
        """The prompt text for ``req`` and whether the tokenizer should add special tokens."""
        if req.prompt is not None:
            return req.prompt, True
        assert req.messages is not None
        if not getattr(self.tokenizer, "chat_template", None):
            return fallback_format(req.messages), True
        messages = req.messages
        if any(m["role"] == "system" for m in messages):
            if self._system_mode is None:
                self._system_mode = self._probe_system()
            if self._system_mode == "fold":
                messages = fold_system(messages)
        try:
            return self._apply_template(messages), False
        except Exception as exc:
            raise BackendRequestError(f"the chat template of {self.model_path!r} rejected the messages: {exc}") from exc

    # -- generation ------------------------------------------------------------------------
    async def generate_many(
        self,
        reqs: Sequence[GenerationRequest],
        on_done: OnDone | None = None,
        *,
        raise_errors: bool = False,
    ) -> list[Generation | BackendError]:
        """Group requests with equal settings into batches of ``batch_size`` and run them in a thread;
        ``on_done`` gets each result as its batch finishes (the runner caches it there). Cancelled
        (Ctrl-C, SIGTERM, a fatal error elsewhere), the batch being generated stops at its next token
        (a stop flag the generation loop checks) and is thrown away: only finished batches count."""
        self._stop.clear()
        results: list[Generation | BackendError | None] = [None] * len(reqs)
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(reqs):
            groups.setdefault(json.dumps(r.settings(), sort_keys=True, default=str), []).append(i)
        for idxs in groups.values():
            for start in range(0, len(idxs), self.batch_size):
                batch = idxs[start : start + self.batch_size]
                try:
                    gens: list[Generation | BackendError] = list(
                        await asyncio.to_thread(self._generate_batch, [reqs[i] for i in batch])
                    )
                except asyncio.CancelledError:
                    self._stop.set()  # the worker thread ends at its next token; nothing of it is kept
                    raise
                except BackendError as exc:
                    if raise_errors:
                        raise
                    gens = [exc] * len(batch)
                    for _ in batch:
                        self._count(failed=True)
                for i, g in zip(batch, gens, strict=True):
                    results[i] = g
                    if on_done is not None:
                        on_done(i, g)
        return [r for r in results if r is not None]

    def _generate_batch(self, reqs: list[GenerationRequest]) -> list[Generation]:
        import torch

        t0 = time.perf_counter()

        proto = reqs[0]
        if proto.logit_bias:
            raise BackendRequestError("the 'hf' backend does not support 'logit_bias'")
        tok = self.tokenizer
        rendered = [self.render(r) for r in reqs]
        add_special = rendered[0][1]
        texts = [t for t, _ in rendered]
        with self._lock, torch.inference_mode():
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=add_special).to(self.device)
            n_prompt = enc["input_ids"].shape[1]
            sample = proto.temperature > 0
            per_row = proto.n if sample else 1
            gen_kwargs: dict[str, Any] = {
                "max_new_tokens": proto.max_tokens,
                "do_sample": sample,
                "pad_token_id": tok.pad_token_id,
                "return_dict_in_generate": True,
                "output_logits": proto.logprobs,
                "num_return_sequences": proto.n if sample else 1,
            }
            if sample:
                gen_kwargs["temperature"] = proto.temperature
                gen_kwargs["top_p"] = proto.top_p
                gen_kwargs["top_k"] = 0
            else:  # silence warnings about sampling settings of the model's generation config
                gen_kwargs.update(temperature=None, top_p=None, top_k=None)
            if proto.repetition_penalty is not None:
                gen_kwargs["repetition_penalty"] = proto.repetition_penalty
            if proto.stop:
                gen_kwargs["stop_strings"] = list(proto.stop)
                gen_kwargs["tokenizer"] = tok
            if proto.seed is not None:
                torch.manual_seed(proto.seed)
            gen_kwargs["stopping_criteria"] = _stop_criteria(self._stop)
            if proto.constraint is not None:
                gen_kwargs["logits_processor"] = self._constraint_processor(proto, len(texts) * per_row, n_prompt)
            try:
                out = self.model.generate(**self.model_inputs(enc), **gen_kwargs)
            except (RuntimeError, ValueError) as exc:
                raise BackendRequestError(f"generation with {self.model_path!r} failed: {exc}") from exc
            if self._stop.is_set():
                raise BackendRequestError("generation interrupted (the run was cancelled)", fatal=True)
        seqs = out.sequences[:, n_prompt:].cpu()
        logits = out.logits if proto.logprobs else None
        per_req = proto.n if sample else 1
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        eos_ids = _eos_ids(self.model, tok)
        gens: list[Generation] = []
        for b, r in enumerate(reqs):
            choices = []
            completion = 0
            ids: list[list[int]] = []
            for k in range(per_req):
                row = b * per_req + k
                choice, gen_ids, n_tok = self._decode(seqs[row], row, logits, r, eos_ids)
                choices.append(choice)
                ids.append(gen_ids)
                completion += n_tok
            if not sample and r.n > 1:
                choices, ids = choices * r.n, ids * r.n
                completion *= r.n
            usage = Usage(int(prompt_lens[b]), completion)
            self._count(usage)
            raw = {"backend": "hf", "model": self.model_path, "prompt": texts[b], "completion_ids": ids}
            gens.append(Generation.from_choices(choices, usage, retries=0, raw=raw, model=str(self.model_path),
                                                system_fingerprint=self.fingerprint()))
        per_request = round((time.perf_counter() - t0) / len(reqs), 4)  # the batch's time, shared out
        return [replace(g, seconds=per_request) for g in gens]

    def fingerprint(self) -> str | None:
        """The model version as its content hash (``hf:<hash>``, as in :meth:`identity`) once known."""
        return f"hf:{self._content_id}" if self._content_id else None

    async def check_constraint(self, constraint: Constraint) -> str | None:
        """None when llguidance is installed (it takes every form) and reads the model's tokenizer,
        else why not (before any call: e.g. a WordPiece tokenizer, whose decoder it cannot read)."""
        if importlib.util.find_spec("llguidance") is None:
            return "output constraints on the 'hf' backend need llguidance (pip install llguidance)"
        try:
            self._constraint_tokenizer()
        except (ValueError, TypeError, RuntimeError) as exc:
            return f"llguidance cannot read the tokenizer of {self.display_model!r}: {str(exc).splitlines()[0]}"
        return await super().check_constraint(constraint)

    def _constraint_tokenizer(self) -> Any:
        """llguidance's view of the model's tokenizer (made once)."""
        if self._ll_tokenizer is None:
            vocab = int(self.model.get_output_embeddings().weight.shape[0])
            self._ll_tokenizer = ll_tokenizer(self.tokenizer, vocab, _eos_ids(self.model, self.tokenizer))
        return self._ll_tokenizer

    def _constraint_processor(self, req: GenerationRequest, rows: int, prompt_len: int) -> Any:
        """The logits processor list keeping ``rows`` sequences inside ``req.constraint``."""
        from transformers import LogitsProcessorList

        eos = _eos_ids(self.model, self.tokenizer)
        try:
            self._constraint_tokenizer()
        except (ValueError, TypeError, RuntimeError) as exc:  # (a caller that skipped check_constraint)
            raise BackendRequestError(f"llguidance cannot read the tokenizer: {exc}", fatal=True) from exc
        assert req.constraint is not None
        try:
            return LogitsProcessorList([ConstraintProcessor(self._ll_tokenizer, req.constraint, rows, prompt_len, eos)])
        except ValueError as exc:
            raise BackendRequestError(str(exc), fatal=True) from exc

    def _decode(
        self, ids: Any, row: int, logits: Any, req: GenerationRequest, eos_ids: set[int]
    ) -> tuple[Choice, list[int], int]:
        """One generated row -> (Choice, generated token ids, completion tokens). The row ends at the first eos token
        (counted) or pad token (a row finished early by a stop string is padded, not counted)."""
        import torch

        tok = self.tokenizer
        id_list = [int(x) for x in ids.tolist()]
        end, n_tokens, ended = len(id_list), len(id_list), False
        for j, t in enumerate(id_list):
            if t in eos_ids or t == tok.pad_token_id:
                end, n_tokens, ended = j, j + (1 if t in eos_ids else 0), True
                break
        gen_ids = id_list[:end]
        text = tok.decode(gen_ids, skip_special_tokens=True)
        # no end token and the full budget used: cut off, unless a stop string ended it
        finish = "length" if not ended and len(id_list) >= req.max_tokens else "stop"
        if req.stop:
            cut = min((p for p in (text.find(s) for s in req.stop) if p >= 0), default=-1)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        tops = tokens = lps = None
        if logits is not None:  # raw model log-probabilities (before temperature / top-p)
            tokens, lps, tops = [], [], []
            k = max(1, req.top_logprobs)
            for j in range(end):
                logp = torch.log_softmax(logits[j][row].float(), dim=-1)
                tokens.append(tok.decode([gen_ids[j]]))
                lps.append(float(logp[gen_ids[j]]))
                vals, idx = torch.topk(logp, min(k, logp.shape[-1]))
                top: dict[str, float] = {}
                for v, i in zip(vals.tolist(), idx.tolist(), strict=True):
                    s = tok.decode([i])
                    top[s] = max(top.get(s, float("-inf")), float(v))
                tops.append(top if req.top_logprobs else {})
        return Choice(text, finish, tops, tokens, lps), gen_ids, n_tokens


def _stop_criteria(flag: threading.Event) -> Any:
    """A transformers ``StoppingCriteriaList`` that ends every sequence once ``flag`` is set."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class _Flag(StoppingCriteria):  # type: ignore[misc]
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), flag.is_set(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([_Flag()])


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _eos_ids(model: Any, tok: Any) -> set[int]:
    ids: set[int] = set()
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for v in (cfg_eos, tok.eos_token_id):
        if isinstance(v, int):
            ids.add(v)
        elif isinstance(v, (list, tuple)):
            ids.update(int(x) for x in v)
    return ids


register_backend("hf")(HFLocalBackend)
