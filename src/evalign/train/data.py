"""Training data for ``evalign train-judge``: rows with ``instruction`` (the full judge prompt, used as
given) and ``output`` (the target, e.g. ``"<feedback> [RESULT] 4"``), optional ``system``; turned into
chat conversations (prompt = [system], user; completion = assistant) for TRL's ``SFTTrainer``.

The prompt goes through the model's chat template. A tokenizer without one gets
:data:`FALLBACK_CHAT_TEMPLATE` (the plain ``### Role:`` format of evalign's HF judge backend, with the
end-of-sequence token after the answer); it is saved with the trained model, so ``evalign judge
--backend hf`` asks the trained judge exactly as it was trained. A template that rejects or drops the
system role gets the system prompt folded into the user turn (as the HF judge backend does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.errors import InputError
from evalign.io import detect_format, iter_records

#: chat template given to tokenizers that have none: ``### System:`` / ``### User:`` turns, then
#: ``### Assistant:`` and the answer, ended by the end-of-sequence token
FALLBACK_CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}"
    "{{ '### Assistant:\\n' + m['content'] + eos_token }}"
    "{% else %}{{ '### ' + (m['role'] | capitalize) + ':\\n' + m['content'] + '\\n\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '### Assistant:\\n' }}{% endif %}"
)


@dataclass(frozen=True)
class Example:
    """One training row: its 1-based line (row for Parquet), prompt, target and system prompt."""

    line: int
    instruction: str
    output: str
    system: str | None


def _text(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v if isinstance(v, str) else None


def read_examples(path: str | Path, *, system_prompt: str | None = None) -> list[Example]:
    """The rows of a training file (JSONL, CSV or Parquet). ``instruction`` and ``output`` must be
    non-empty strings; ``system`` (optional) overrides ``system_prompt`` per row when non-empty.
    Errors name the file, the 1-based line (row for Parquet) and the field."""
    path = Path(path)
    fmt = detect_format(path)
    word = "row" if fmt == "parquet" else "line"
    out: list[Example] = []
    for line, rec in iter_records(path, fmt):
        vals: dict[str, str] = {}
        for f in ("instruction", "output"):
            if f not in rec:
                raise InputError("missing field (training data needs 'instruction' and 'output')", file=str(path),
                                 line=line, field=f, line_word=word)
            v = _text(rec[f])
            if v is None or not v.strip():
                raise InputError("must be a non-empty string", file=str(path), line=line, field=f, line_word=word)
            vals[f] = v
        sys_v = _text(rec.get("system"))
        if "system" in rec and rec["system"] is not None and sys_v is None and not (
                isinstance(rec["system"], float) and math.isnan(rec["system"])):
            raise InputError("must be a string", file=str(path), line=line, field="system", line_word=word)
        out.append(Example(line, vals["instruction"], vals["output"], sys_v if sys_v else system_prompt))
    if not out:
        raise InputError("no training rows", file=str(path))
    return out


def ensure_chat_template(tokenizer: Any) -> bool:
    """Give ``tokenizer`` :data:`FALLBACK_CHAT_TEMPLATE` when it has no chat template; True if it did."""
    if getattr(tokenizer, "chat_template", None):
        return False
    tokenizer.chat_template = FALLBACK_CHAT_TEMPLATE
    return True


def system_supported(tokenizer: Any) -> bool:
    """Whether the chat template keeps a system message (it neither raises nor drops it)."""
    marker = "evalign-system-probe-7f3a"
    try:
        text = tokenizer.apply_chat_template([{"role": "system", "content": marker}, {"role": "user", "content": "x"}],
                                             tokenize=False, add_generation_prompt=True)
    except Exception:  # jinja TemplateError or raise_exception() in the template
        return False
    return marker in str(text)


def prompt_messages(ex: Example, system_ok: bool) -> list[dict[str, str]]:
    """The prompt turns of one example: system (when given; folded into the user turn, separated by a
    blank line, when the template has no system role) and user."""
    if not ex.system:
        return [{"role": "user", "content": ex.instruction}]
    if system_ok:
        return [{"role": "system", "content": ex.system}, {"role": "user", "content": ex.instruction}]
    return [{"role": "user", "content": f"{ex.system}\n\n{ex.instruction}"}]


def conversations(examples: list[Example], tokenizer: Any) -> list[dict[str, Any]]:
    """TRL conversational prompt-completion records (``prompt``, ``completion``) of the examples."""
    ok = system_supported(tokenizer)
    return [{"prompt": prompt_messages(ex, ok), "completion": [{"role": "assistant", "content": ex.output}]}
            for ex in examples]
