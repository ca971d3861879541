"""Request and result types of the judge backends: :class:`GenerationRequest`, :class:`Usage`,
:class:`Choice`, :class:`Generation`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

Message = dict[str, str]


# --------------------------------------------------------------------------------------------
# Requests and results
# --------------------------------------------------------------------------------------------
#: ``--prompt-cache``: on where the provider has it (``auto``), ``off``, or Anthropic's TTL (``5m``, ``1h``)
PROMPT_CACHE_MODES = ("auto", "off", "5m", "1h")
#: the forms a constraint may come in
CONSTRAINT_FORMS = ("regex", "json_schema", "gbnf")


@dataclass(frozen=True)
class Constraint:
    """What an output must look like, in one or more forms; a backend sends the form it can.

    * ``regex``: the whole output, in the dialect of :mod:`evalign.backends.regex_gbnf`
      (a template's answer shape: :mod:`evalign.judges.shapes`);
    * ``json_schema``: a JSON schema of the output (a JSON answer; a user's schema);
    * ``gbnf``: a GBNF grammar (a user's ``--grammar`` file);
    * ``name``: what it is called in messages and in OpenAI's ``json_schema.name``.
    """

    regex: str | None = None
    json_schema: dict[str, Any] | None = None
    gbnf: str | None = None
    name: str = "answer"

    def __post_init__(self) -> None:
        if self.regex is None and self.json_schema is None and self.gbnf is None:
            raise ValueError("a Constraint needs a regex, a json_schema or a gbnf grammar")

    @property
    def forms(self) -> tuple[str, ...]:
        """The forms given, among :data:`CONSTRAINT_FORMS`."""
        return tuple(f for f in CONSTRAINT_FORMS if getattr(self, f) is not None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (request settings, cache keys)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Constraint:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: data[k] for k in ("regex", "json_schema", "gbnf", "name") if k in data})


@dataclass(frozen=True)
class GenerationRequest:
    """One generation request. Give exactly one of ``messages`` (chat) or ``prompt`` (raw text).

    * ``messages``: ``[{"role": "system"|"user"|"assistant", "content": str}, ...]``.
    * ``max_tokens``: most tokens to generate (>= 1). Output cut off there has
      ``finish_reason == "length"`` (a judge must treat it as unparseable).
    * ``temperature`` (>= 0; 0 = greedy), ``top_p`` in (0, 1].
    * ``n``: number of samples (>= 1); all land in :attr:`Generation.choices`.
    * ``seed``: sampling seed, when the backend supports one.
    * ``logprobs`` / ``top_logprobs``: return, for each generated token, the ``top_logprobs``
      (0..20) most likely tokens with their natural-log probabilities.
    * ``stop``: strings that end generation (not included in the text).
    * ``repetition_penalty``: llama.cpp ``repeat_penalty`` / HF ``repetition_penalty`` (1.0 = off).
    * ``constraint``: what the output must look like (:class:`Constraint`; a mapping is read as one):
      each backend sends it in its own form (llama.cpp: a GBNF ``grammar``; vLLM:
      ``structured_outputs``; OpenAI: ``response_format`` with a JSON schema; hf: a logits processor)
      or says it cannot (:meth:`evalign.backends.base.Backend.check_constraint`).
    * ``logit_bias``: token TEXTS -> a bias added to their logits (LLMBar's ``tokens_to_avoid`` -100,
      ``tokens_to_favor`` +7). The openai backend sends ``logit_bias`` with ``logit_bias_type:
      "tokens"`` (llama-cpp-python's server tokenizes each text and biases all its tokens); servers
      that take token ids only (OpenAI's API, vLLM) reject it. The hf backend does not support it.
    """

    messages: list[Message] | None = None
    prompt: str | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    stop: list[str] | None = None
    repetition_penalty: float | None = None
    constraint: Constraint | None = None
    logit_bias: dict[str, float] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.constraint, Mapping):
            object.__setattr__(self, "constraint", Constraint.from_dict(self.constraint))
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("GenerationRequest needs exactly one of 'messages' or 'prompt'")
        if self.messages is not None:
            if not self.messages:
                raise ValueError("GenerationRequest.messages is empty")
            for i, m in enumerate(self.messages):
                if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(
                    m.get("content"), str
                ):
                    raise ValueError(f"GenerationRequest.messages[{i}] needs string 'role' and 'content'")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if not 0 <= self.top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be in 0..20, got {self.top_logprobs}")
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs > 0 needs logprobs=True")

    def settings(self) -> dict[str, Any]:
        """The sampling settings (everything but the prompt), for signatures and cache keys."""
        d = asdict(self)
        d.pop("messages")
        d.pop("prompt")
        return d

    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-friendly dict (prompt included), e.g. for a cache key."""
        return asdict(self)


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more requests.

    ``prompt_tokens`` counts every prompt token whatever its rate; ``cache_read_tokens`` (read from the
    provider's prompt cache: OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's
    ``cache_read_input_tokens``, Gemini's ``cachedContentTokenCount``) and ``cache_write_tokens``
    (written to it: Anthropic's ``cache_creation_input_tokens``) are parts of it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def uncached_tokens(self) -> int:
        """Prompt tokens billed at the plain input rate (neither read from nor written to a cache)."""
        return max(0, self.prompt_tokens - self.cache_read_tokens - self.cache_write_tokens)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens,
                     self.cache_read_tokens + other.cache_read_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)

    def to_json(self) -> dict[str, Any]:
        """``{"prompt_tokens", "completion_tokens"}`` plus the cache parts when not zero."""
        out: dict[str, Any] = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}
        if self.cache_read_tokens:
            out["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        return out


@dataclass(frozen=True)
class Choice:
    """One sampled output.

    ``finish_reason`` is ``"stop"`` (natural end or a stop string), ``"length"`` (hit ``max_tokens``)
    or what the server said (``"content_filter"``, ...; ``"unknown"`` when it said nothing).
    ``tokens`` / ``token_logprobs`` are the generated tokens and their log-probabilities (natural log),
    ``top_logprobs`` one ``{token: logprob}`` dict per generated position; all three are None unless
    the request asked for ``logprobs``.
    """

    text: str
    finish_reason: str
    top_logprobs: list[dict[str, float]] | None = None
    tokens: list[str] | None = None
    token_logprobs: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)


@dataclass(frozen=True)
class Generation:
    """The result of one :class:`GenerationRequest`.

    ``text`` / ``finish_reason`` / ``top_logprobs`` / ``tokens`` / ``token_logprobs`` are those of the
    first choice; ``choices`` holds all ``n``. ``usage`` counts tokens of all choices. ``retries`` is
    how many times the request was retried. ``raw`` is the server's response JSON (``{"responses":
    [...]}`` when ``n > 1`` took several requests; for local models the rendered ``prompt`` and the
    ``completion_ids`` of each choice); it never holds request headers or keys. ``model`` and
    ``system_fingerprint``: the model version that answered, as the server named it (None when it did
    not say); ``seconds``: how long the request took (None when not measured); ``batched``: it was
    answered through a provider's batch API (priced with the batch multiplier).
    """

    text: str
    finish_reason: str
    top_logprobs: list[dict[str, float]] | None
    usage: Usage
    retries: int = 0
    raw: dict[str, Any] = field(default_factory=dict)
    tokens: list[str] | None = None
    token_logprobs: list[float] | None = None
    choices: tuple[Choice, ...] = ()
    model: str | None = None
    system_fingerprint: str | None = None
    seconds: float | None = None
    batched: bool = False

    @property
    def truncated(self) -> bool:
        """True when the (first) output was cut off by ``max_tokens``."""
        return self.finish_reason == "length"

    @classmethod
    def from_choices(
        cls, choices: Sequence[Choice], usage: Usage, retries: int = 0, raw: dict[str, Any] | None = None, *,
        model: str | None = None, system_fingerprint: str | None = None, seconds: float | None = None,
    ) -> Generation:
        """Build from one or more choices (the first one fills the top-level fields)."""
        if not choices:
            raise ValueError("a Generation needs at least one choice")
        first = choices[0]
        return cls(
            text=first.text,
            finish_reason=first.finish_reason,
            top_logprobs=first.top_logprobs,
            usage=usage,
            retries=retries,
            raw=raw or {},
            tokens=first.tokens,
            token_logprobs=first.token_logprobs,
            choices=tuple(choices),
            model=model,
            system_fingerprint=system_fingerprint,
            seconds=seconds,
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-friendly dict (for the cache); :meth:`from_json` reads it back."""
        return {
            "choices": [c.to_json() for c in self.choices],
            "usage": self.usage.to_json(),
            "retries": self.retries,
            "raw": self.raw,
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
            "seconds": self.seconds,
            **({"batched": True} if self.batched else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Generation:
        """Inverse of :meth:`to_json`."""
        raw = data.get("raw") or {}
        gen = cls.from_choices(
            [Choice(**c) for c in data["choices"]],
            Usage(**data.get("usage", {})),
            retries=int(data.get("retries", 0)),
            raw=raw,
            model=data.get("model", answered_by(raw)[0]),
            system_fingerprint=data.get("system_fingerprint", answered_by(raw)[1]),
            seconds=data.get("seconds"),
        )
        return replace(gen, batched=True) if data.get("batched") else gen


def answered_by(raw: Any) -> tuple[str | None, str | None]:
    """The ``model`` (Gemini: ``modelVersion``) and ``system_fingerprint`` a server's response JSON names
    (the first response's when ``raw`` holds several), each None when absent or not text."""
    if isinstance(raw, dict) and isinstance(raw.get("responses"), list) and raw["responses"]:
        raw = raw["responses"][0]
    if not isinstance(raw, dict):
        return None, None
    model, fp = raw.get("model") or raw.get("modelVersion"), raw.get("system_fingerprint")
    return (model if isinstance(model, str) else None), (fp if isinstance(fp, str) else None)


def fold_system(messages: Sequence[Message]) -> list[Message]:
    """Merge system messages into the first user turn (for chat templates without a system role).

    The system text comes first, separated from the user text by a blank line; with no user turn
    the system text becomes one.
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if not system:
        return rest
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{system}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": system}, *rest]
