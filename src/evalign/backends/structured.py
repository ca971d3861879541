"""How an OpenAI-compatible server takes an output constraint: its *format* and the request fields.

Three formats (``--constraint-format``; ``auto`` reads the server's ``GET /models``):

* ``llama.cpp`` (llama.cpp's ``llama-server`` and llama-cpp-python's server): a GBNF ``grammar``
  (a regex shape is translated by :func:`evalign.backends.regex_gbnf.gbnf_from_regex`; the
  compact grammar fixes the JSON layout, where llama.cpp's own schema grammar allows up to ~20
  spaces at every gap, which would eat the answer's length bound); a JSON schema alone goes as
  ``response_format: {"type": "json_object", "schema": ...}``.
* ``vllm`` (vLLM >= 0.10.2; ``guided_*`` fields were removed in v0.12): ``structured_outputs`` with
  ``regex``, ``grammar`` or ``json``.
* ``openai`` (OpenAI's API and servers known only as OpenAI-compatible): ``response_format`` with
  ``type: json_schema`` (``strict``); a regex or a grammar cannot be sent.

``auto``: ``owned_by`` ``vllm`` -> vllm; ``llamacpp`` (llama-server) or ``me`` (llama-cpp-python)
-> llama.cpp; anything else (OpenAI's ``system`` / ``openai``, Ollama, an unknown server, no answer)
-> openai.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalign.backends.regex_gbnf import gbnf_from_regex
from evalign.backends.types import Constraint

FORMATS = ("llama.cpp", "vllm", "openai")
#: the constraint forms each format sends, in the order they are preferred
FORMAT_FORMS: dict[str, tuple[str, ...]] = {
    "llama.cpp": ("gbnf", "regex", "json_schema"),
    "vllm": ("gbnf", "regex", "json_schema"),
    "openai": ("json_schema",),
}
_OWNERS = {"vllm": "vllm", "llamacpp": "llama.cpp", "me": "llama.cpp", "llama.cpp": "llama.cpp"}


def format_of(models: Any, model: str) -> tuple[str, str]:
    """The format of a server from its ``GET /models`` JSON (``model``'s entry, else the first) and
    what told it (``owned_by 'vllm'``)."""
    data = models.get("data") if isinstance(models, Mapping) else None
    entries = [e for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    entry = next((e for e in entries if e.get("id") == model), entries[0] if entries else None)
    owner = str(entry.get("owned_by", "")) if entry is not None else ""
    return _OWNERS.get(owner.lower(), "openai"), f"owned_by {owner!r}" if owner else "no owned_by"


def chosen_form(constraint: Constraint, fmt: str) -> str | None:
    """The form of ``constraint`` that format ``fmt`` sends, or None when it can send none."""
    return next((f for f in FORMAT_FORMS[fmt] if f in constraint.forms), None)


def constraint_fields(constraint: Constraint, fmt: str) -> dict[str, Any]:
    """The request body fields that carry ``constraint`` to a server of format ``fmt`` (ValueError
    when it can send none of its forms)."""
    form = chosen_form(constraint, fmt)
    if form is None:
        raise ValueError(f"a {fmt} server takes no {' / '.join(constraint.forms)} constraint")
    if fmt == "vllm":
        key = {"gbnf": "grammar", "regex": "regex", "json_schema": "json"}[form]
        return {"structured_outputs": {key: getattr(constraint, form)}}
    if fmt == "openai":
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": constraint.name, "schema": constraint.json_schema, "strict": True}}}
    if form == "gbnf":
        return {"grammar": constraint.gbnf}
    if form == "regex":
        return {"grammar": gbnf_from_regex(str(constraint.regex))}
    return {"response_format": {"type": "json_object", "schema": constraint.json_schema}}
