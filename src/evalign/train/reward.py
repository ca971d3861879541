"""Training a reward model as a judge (``evalign train-judge --kind reward``) with TRL's ``RewardTrainer``.

Data: preference rows (``evalign judge-data preference`` writes them): ``prompt`` (the instruction,
or a JSON list of ``{role, content}`` turns before the graded one), ``chosen`` and ``rejected`` (the
better and the worse response), optional ``margin`` (a number: TRL's margin in the Bradley-Terry
loss, ``-log sigmoid(r_chosen - r_rejected - margin)``); other columns (``source``, ``question``) are
provenance. Each side is encoded by :class:`~evalign.backends.reward_inputs.RewardEncoder`
(the reward backend's own rendering and truncation rule, so the judge is scored as it was trained)
and handed to the trainer tokenized (``chosen_ids`` / ``rejected_ids``): TRL would otherwise drop,
not truncate, an example longer than ``max_length``.

Model: a sequence classifier with one output. A causal LM base (SmolLM2) gets a new linear score head
on its last non-pad token; an encoder (all-MiniLM-L6-v2) a new head on its pooled ``[CLS]`` vector,
reading (instruction, response) as a text pair: a cross-encoder. The head's initial weights come
from ``settings.seed`` (:func:`init_reward_model` writes that untrained model, the "before" of a
before/after table). LoRA (PEFT, ``task_type="SEQ_CLS"``: the head is trained in full beside the
adapters) or full fine-tuning, the :class:`~evalign.train.settings.TrainSettings` of ``train-judge``
(``mask_prompt``, ``system_prompt`` and ``fused_lm_head`` do not apply); ``max_length`` is capped at
what the base reads (MiniLM: 512).

Layout of ``OUT`` as for ``train-judge`` (the merged model and tokenizer, ``evalign_train.json``,
``checkpoints/``), plus :data:`~evalign.backends.reward.REWARD_RECORD` (``max_length``, the
truncation rule, the rendering): ``evalign judge --backend reward --model OUT`` loads it.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.backends.reward import REWARD_RECORD, resolve_reward_model
from evalign.backends.reward_inputs import TRUNCATION_RULE, RewardEncoder
from evalign.errors import EvalignError, InputError, ModelLoadError
from evalign.io import detect_format, iter_records
from evalign.signature import file_sha256, package_version
from evalign.train.settings import TrainSettings
from evalign.train.sft import (
    SIGNATURE_FILE,
    TrainResult,
    lora_config,
    model_identity,
    resume_checkpoint,
    train_logged,
    training_arguments,
)

#: the fields of a preference row
PREFERENCE_FIELDS = ("prompt", "chosen", "rejected")


@dataclass(frozen=True)
class Preference:
    """One preference row: its 1-based line, the conversation before the graded turn (``prompt``: a
    list of ``{role, content}``), the better and the worse response, and the margin (None: none)."""

    line: int
    prompt: tuple[tuple[str, str], ...]
    chosen: str
    rejected: str
    margin: float | None = None

    def conversations(self) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        """The chosen and the rejected conversation (the prompt turns, then the response)."""
        turns = [{"role": r, "content": c} for r, c in self.prompt]
        return ([*turns, {"role": "assistant", "content": self.chosen}],
                [*turns, {"role": "assistant", "content": self.rejected}])


def _prompt_turns(value: Any, where: str, line: int, word: str) -> tuple[tuple[str, str], ...]:
    if isinstance(value, str) and value.strip().startswith("[{"):
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if isinstance(value, str):
        if not value.strip():
            raise InputError("must be a non-empty string", file=where, line=line, field="prompt", line_word=word)
        return (("user", value),)
    if isinstance(value, list | tuple) and value and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value):
        return tuple((str(m["role"]), str(m["content"])) for m in value)
    raise InputError("must be a string or a list of {role, content} turns", file=where, line=line, field="prompt",
                     line_word=word)


def read_preferences(path: str | Path) -> list[Preference]:
    """The preference rows of a JSONL / CSV / Parquet file (see the module doc). ``chosen`` and
    ``rejected`` must be strings (empty allowed), ``margin`` a finite number when present; errors name
    the file, the 1-based line (row for Parquet) and the field."""
    path = Path(path)
    fmt = detect_format(path)
    word = "row" if fmt == "parquet" else "line"
    out: list[Preference] = []
    for line, rec in iter_records(path, fmt):
        for f in PREFERENCE_FIELDS:
            if f not in rec:
                raise InputError("missing field (preference rows need prompt, chosen, rejected)", file=str(path),
                                 line=line, field=f, line_word=word)
        for f in ("chosen", "rejected"):
            if not isinstance(rec[f], str):
                raise InputError("must be a string", file=str(path), line=line, field=f, line_word=word)
        margin = rec.get("margin")
        if margin is not None and not (isinstance(margin, float) and math.isnan(margin)):
            if isinstance(margin, bool) or not isinstance(margin, int | float) or not math.isfinite(margin):
                raise InputError("must be a finite number", file=str(path), line=line, field="margin", line_word=word)
            margin = float(margin)
        else:
            margin = None
        out.append(Preference(line, _prompt_turns(rec["prompt"], str(path), line, word), rec["chosen"],
                              rec["rejected"], margin))
    if not out:
        raise InputError("no preference rows", file=str(path))
    if len({p.margin is None for p in out}) > 1:
        first = next(p for p in out if p.margin is None)
        raise InputError("margin given on some rows only (give it on every row or none)", file=str(path),
                         line=first.line, field="margin", line_word=word)
    return out


def load_reward_model(base: str | Path, *, seed: int = 0, dtype: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: ``base`` (a folder, GGUF file or alias, ``minilm``) as a sequence classifier
    with one output; a new score head (a base that has none) is initialised from ``seed``. The
    tokenizer has a pad token (the eos token when it had none) and the model knows its id."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed
    from trl.trainer.reward_trainer import suppress_seqcls_warning

    path, _ = resolve_reward_model(str(base))
    set_seed(seed)
    try:
        tok: Any = AutoTokenizer.from_pretrained(path)
        with suppress_seqcls_warning():
            model: Any = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1,
                                                                            dtype=dtype or torch.float32)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the base model {str(base)!r} as a reward model: {exc}") from exc
    if tok.pad_token is None:
        if tok.eos_token is None:
            raise ModelLoadError(f"the tokenizer of {str(base)!r} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    model.config.pad_token_id = tok.pad_token_id
    return model, tok


def capped_length(tok: Any, model: Any, max_length: int) -> int:
    """``max_length`` capped at what the model reads (its position limit and the tokenizer's limit)."""
    from evalign.backends.models import tokenizer_limit

    return min(int(max_length), tokenizer_limit(tok, model.config))


def write_reward_model(model: Any, tok: Any, out: str | Path, record: dict[str, Any]) -> Path:
    """Save a reward model, its tokenizer and its :data:`REWARD_RECORD` (``record`` plus the truncation
    rule and the rendering) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    full = {**record, "truncation": TRUNCATION_RULE,
            "rendering": "chat_template" if getattr(tok, "chat_template", None) else "text_pair"}
    (out / REWARD_RECORD).write_text(json.dumps(full, indent=2) + "\n", encoding="utf-8")
    return out


def init_reward_model(base: str | Path, out: str | Path, *, seed: int = 0, max_length: int = 512) -> Path:
    """Write ``base`` with an untrained score head (initialised from ``seed``) as a reward model folder:
    what a trained head is compared with, and what training from it starts from."""
    model, tok = load_reward_model(base, seed=seed)
    return write_reward_model(model, tok, out, {"max_length": capped_length(tok, model, max_length),
                                                "base": str(base), "seed": seed, "trained": False})


def preference_dataset(prefs: list[Preference], tok: Any, max_length: int) -> tuple[Any, int]:
    """The tokenized ``datasets.Dataset`` (``chosen_ids``, ``rejected_ids``, ``margin`` when given) and
    the number of conversations truncated."""
    from datasets import Dataset

    enc = RewardEncoder(tok, max_length)
    chosen = enc.encode_many([p.conversations()[0] for p in prefs])
    rejected = enc.encode_many([p.conversations()[1] for p in prefs])
    rows: list[dict[str, Any]] = [{"chosen_ids": c, "rejected_ids": r} for c, r in zip(chosen, rejected, strict=True)]
    if prefs[0].margin is not None:
        for row, p in zip(rows, prefs, strict=True):
            row["margin"] = p.margin
    return Dataset.from_list(rows), enc.truncated


def build_reward_trainer(data: str | Path, base_model: str | Path, out: str | Path, settings: TrainSettings) -> Any:
    """The configured ``trl.RewardTrainer`` (data read and tokenized; nothing trained yet). Its
    ``evalign_examples`` holds the preference rows, ``evalign_truncated`` how many conversations were
    cut, ``evalign_max_length`` the length used."""
    try:
        from trl import RewardConfig, RewardTrainer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise EvalignError("train-judge --kind reward needs torch, transformers, trl, peft and datasets: "
                           "pip install 'evalign[models,train]'") from exc
    prefs = read_preferences(data)
    model, tok = load_reward_model(base_model, seed=settings.seed)
    max_length = capped_length(tok, model, settings.max_length)
    dataset, truncated = preference_dataset(prefs, tok, max_length)
    args = RewardConfig(**training_arguments(settings, out, max_length))
    trainer = RewardTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok,
                            peft_config=lora_config(settings, "SEQ_CLS") if settings.lora else None)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # logs go to on_log, never to stdout (keeps --json clean)
    trainer.evalign_examples = prefs  # type: ignore[attr-defined]
    trainer.evalign_truncated = truncated  # type: ignore[attr-defined]
    trainer.evalign_max_length = max_length  # type: ignore[attr-defined]
    return trainer


def train_reward_model(
    data: str | Path,
    base_model: str | Path,
    out: str | Path,
    settings: TrainSettings | None = None,
    *,
    resume: bool = False,
    on_log: Callable[[dict[str, Any]], None] | None = None,
    on_message: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train a reward model on the preference rows of ``data`` from ``base_model`` and write it to
    ``out`` (see the module doc). ``resume``: continue from the latest checkpoint; ``on_log(logs)``:
    each Trainer log (``loss``, ``accuracy``, ``margin``, ``step``, ``tokens_per_second``,
    ``eta_seconds``); ``on_message``: one-line notes (truncated rows, a checkpoint already done)."""
    settings = settings or TrainSettings()
    out = Path(out)
    resume_from = resume_checkpoint(out) if resume else None
    trainer = build_reward_trainer(data, base_model, out, settings)
    n_rows = len(trainer.evalign_examples)
    if trainer.evalign_truncated and on_message is not None:
        on_message(f"{trainer.evalign_truncated} of {2 * n_rows} conversations are longer than "
                   f"{trainer.evalign_max_length} tokens: truncated ({TRUNCATION_RULE})")
    run = train_logged(trainer, resume_from, settings.max_steps, on_log)
    if run.done and on_message is not None:
        on_message(f"{Path(str(resume_from)).name} is already at --max-steps {settings.max_steps}: nothing to train")
    state, losses = trainer.state, list(run.losses)
    trainer.save_model()
    model = trainer.model.merge_and_unload() if settings.lora else trainer.model
    record = {"max_length": trainer.evalign_max_length, "base": str(base_model), "seed": settings.seed,
              "trained": True}
    write_reward_model(model, trainer.processing_class, out, record)
    signature = {
        "kind": "reward",
        "data": {"path": str(Path(data).resolve()), "sha256": file_sha256(data), "rows": n_rows,
                 "truncated": trainer.evalign_truncated},
        "base_model": {"spec": str(base_model), **_base_identity(base_model)},
        "settings": settings.as_dict(), "max_length": trainer.evalign_max_length, "truncation": TRUNCATION_RULE,
        "trainer": type(trainer).__name__,
        "versions": {d: package_version(d) for d in ("evalign", "torch", "transformers", "trl", "peft", "datasets")},
        "global_step": int(state.global_step), "resumed_from": resume_from, "losses": losses,
    }  # fmt: skip
    (out / SIGNATURE_FILE).write_text(json.dumps(signature, indent=2) + "\n", encoding="utf-8")
    return TrainResult(out, int(state.global_step), resume_from, run.losses, n_rows, run.tokens, run.seconds,
                       signature)


def _base_identity(base: str | Path) -> dict[str, Any]:
    path, _ = resolve_reward_model(str(base))
    return model_identity(path) if Path(path).is_dir() else {"name": path}
