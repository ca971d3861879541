"""The native Gemini backend (``gemini:MODEL[@URL]``): ``POST {base}/models/MODEL:generateContent``.

Built to the Gemini API reference (``v1beta``):

* header ``x-goog-api-key: KEY`` (from ``$GEMINI_API_KEY`` unless ``api_key_env`` names another
  variable); the key is never logged, cached or written;
* ``systemInstruction`` (the system prompt), ``contents`` (turns: ``user`` / ``model``),
  ``generationConfig``: ``temperature``, ``topP``, ``maxOutputTokens``, ``seed``, ``candidateCount``
  (several samples in one request), ``stopSequences``, ``responseMimeType: application/json`` with a
  ``responseSchema`` (the OpenAPI subset Gemini takes: other keywords moved into the description) for
  a JSON-schema constraint, and ``responseLogprobs`` + ``logprobs`` (the top-K tokens per position)
  when log-probabilities are asked;
* ``logprobsResult`` (``chosenCandidates``, ``topCandidates``) read into the same tokens,
  token_logprobs and ``top_logprobs`` (one ``{token: logprob}`` per position) the openai backend gives,
  so G-Eval's weighted score, ``J.p_a`` and ``J.confidence`` work;
* ``finishReason`` read as evalign's finish reasons (:data:`FINISH_REASONS`; a safety, recitation or
  block-list stop is ``content_filter``: unscored, its reason said); a prompt blocked before any
  candidate (``promptFeedback.blockReason``) is an empty ``content_filter`` answer;
* ``usageMetadata``: ``promptTokenCount`` (``cachedContentTokenCount`` of them read from the implicit
  cache), ``candidatesTokenCount`` + ``thoughtsTokenCount`` (billed as output);
* 429 and 5xx are retried honouring ``retry-after``; a 4xx never is.

Gemini caches a shared prefix implicitly (no field to send). :func:`gemini_body` and
:func:`gemini_answer` are pure (a batch path builds its request lines and reads its results with them).
"""

from __future__ import annotations

import math
from typing import Any

from evalign.backends.hosted import HostedBackend, chat_of, move_keywords, split_system
from evalign.backends.registry import register_backend
from evalign.backends.types import Choice, Generation, GenerationRequest, Usage, fold_system

#: the API root of the Gemini reference (``/models/MODEL:generateContent`` is appended)
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta"
#: Gemini's ``finishReason`` -> evalign's finish reason
FINISH_REASONS = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
                  "LANGUAGE": "content_filter", "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter",
                  "SPII": "content_filter", "IMAGE_SAFETY": "content_filter", "OTHER": "other",
                  "MALFORMED_FUNCTION_CALL": "other", "FINISH_REASON_UNSPECIFIED": "unknown"}
#: the fields of Gemini's ``Schema`` (an OpenAPI subset; the rest go into the description)
_SCHEMA_FIELDS = frozenset({"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
                            "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
                            "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
                            "maximum"})


def _kept(kind: Any, key: str, value: Any) -> bool:
    return key in _SCHEMA_FIELDS


def gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as Gemini's ``responseSchema`` takes it: ``type`` in Gemini's upper case, ``type: [T, "null"]`` as ``nullable``,
    ``const`` as a one-value ``enum``, ``oneOf`` as ``anyOf``, other keywords it refuses
    (``additionalProperties``, ``$schema`` ...) moved into the description or dropped."""
    return move_keywords(_openapi(schema), _kept, drop=("$schema", "additionalProperties", "$id"))


def _openapi(node: Any) -> Any:
    if isinstance(node, list):
        return [_openapi(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {("anyOf" if k == "oneOf" else k): _openapi(v) for k, v in node.items()}
    kind = out.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        kind = types[0] if len(types) == 1 else kind
        if "null" in out["type"]:
            out["nullable"] = True
    if isinstance(kind, str):
        out["type"] = kind.upper()  # Gemini's Type enum: STRING, INTEGER, OBJECT ...
    if "const" in out:
        out["enum"] = [out.pop("const")]
    return out


def gemini_body(req: GenerationRequest, *, system_prompt: str = "role", n: int | None = None,
                seed: int | None = None) -> dict[str, Any]:
    """The ``generateContent`` body of ``req`` (see the module doc); ``n`` / ``seed`` override the request's."""
    chat = chat_of(req)
    if system_prompt == "fold":
        chat = fold_system(chat)
    system, turns = split_system(chat)
    body: dict[str, Any] = {"contents": [{"role": "model" if m["role"] == "assistant" else "user",
                                          "parts": [{"text": m["content"]}]} for m in turns]}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    config: dict[str, Any] = {"temperature": req.temperature, "topP": req.top_p, "maxOutputTokens": req.max_tokens}
    n = req.n if n is None else n
    if n != 1:
        config["candidateCount"] = n
    seed = req.seed if seed is None else seed
    if seed is not None:
        config["seed"] = seed
    if req.stop:
        config["stopSequences"] = list(req.stop)
    if req.constraint is not None and req.constraint.json_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseSchema"] = gemini_schema(req.constraint.json_schema)
    if req.logprobs:
        config["responseLogprobs"] = True
        config["logprobs"] = req.top_logprobs
    body["generationConfig"] = config
    return body


def _float(value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return x if not math.isinf(x) or x < 0 else float("nan")


def gemini_logprobs(result: Any) -> tuple[list[str] | None, list[float] | None, list[dict[str, float]] | None]:
    """A candidate's ``logprobsResult`` as (tokens, token_logprobs, top_logprobs per position): the chosen
    token and its ``logProbability`` at each step, and ``{token: logProbability}`` of the step's top
    candidates (the highest kept where a token text repeats); (None, None, None) without one."""
    if not isinstance(result, dict):
        return None, None, None
    chosen = [c for c in result.get("chosenCandidates") or [] if isinstance(c, dict)]
    tokens = [str(c.get("token", "")) for c in chosen]
    lps = [_float(c.get("logProbability")) for c in chosen]
    tops: list[dict[str, float]] = []
    for step in result.get("topCandidates") or []:
        top: dict[str, float] = {}
        for alt in (step.get("candidates") if isinstance(step, dict) else None) or []:
            if isinstance(alt, dict) and "token" in alt:
                tok, lp = str(alt["token"]), _float(alt.get("logProbability"))
                top[tok] = max(top.get(tok, float("-inf")), lp)
        tops.append(top)
    if not tops and chosen:
        tops = [{t: lp} for t, lp in zip(tokens, lps, strict=True)]
    return tokens, lps, tops


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def gemini_usage(u: Any) -> Usage:
    """A ``usageMetadata`` as :class:`Usage`: ``promptTokenCount`` (of which ``cachedContentTokenCount``
    read from the cache), ``candidatesTokenCount + thoughtsTokenCount`` completion tokens."""
    if not isinstance(u, dict):
        return Usage()
    return Usage(_int(u.get("promptTokenCount")),
                 _int(u.get("candidatesTokenCount")) + _int(u.get("thoughtsTokenCount")),
                 cache_read_tokens=_int(u.get("cachedContentTokenCount")))


def gemini_problem(data: Any) -> str | None:
    """Why a 200 answer is not a ``generateContent`` answer (None: it is one; a blocked prompt is one)."""
    if not isinstance(data, dict):
        return "the JSON is not an object"
    if not isinstance(data.get("candidates"), list) and not isinstance(data.get("promptFeedback"), dict) \
            and not isinstance(data.get("usageMetadata"), dict):
        return "the JSON has no 'candidates'"
    return None


def _candidate(c: dict[str, Any]) -> Choice:
    content = c.get("content") if isinstance(c.get("content"), dict) else {}
    parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
    text = "".join(str(p.get("text") or "") for p in parts if not p.get("thought"))
    reason = c.get("finishReason")
    finish = FINISH_REASONS.get(str(reason), str(reason).lower()) if reason else "unknown"
    tokens, lps, tops = gemini_logprobs(c.get("logprobsResult"))
    return Choice(text=text, finish_reason=finish, top_logprobs=tops, tokens=tokens, token_logprobs=lps)


def gemini_answer(data: dict[str, Any]) -> tuple[list[Choice], Usage]:
    """The choices (in ``index`` order) and the usage of a ``generateContent`` answer. A prompt blocked
    before any candidate (``promptFeedback.blockReason``) or an answer without a candidate gives one
    empty choice (``content_filter``, or ``unknown``): unscored, never an error; ValueError when the JSON
    is no answer at all."""
    problem = gemini_problem(data)
    if problem:
        raise ValueError(problem)
    usage = gemini_usage(data.get("usageMetadata"))
    cands = [c for c in data.get("candidates") or [] if isinstance(c, dict)]
    if not cands:
        feedback = data.get("promptFeedback") if isinstance(data.get("promptFeedback"), dict) else {}
        return [Choice(text="", finish_reason="content_filter" if feedback.get("blockReason") else "unknown")], usage
    cands.sort(key=lambda c: c.get("index", 0) if isinstance(c.get("index", 0), int) else 0)
    return [_candidate(c) for c in cands], usage


class GeminiBackend(HostedBackend):
    """The Gemini API's ``generateContent`` (see the module doc). Its prompt cache is implicit:
    ``prompt_cache`` changes nothing sent."""

    kind = "gemini"
    default_url = GEMINI_URL
    default_api_key_env = "GEMINI_API_KEY"

    @property
    def url(self) -> str:
        """``{base_url}/models/MODEL:generateContent``."""
        model = self.model[len("models/"):] if self.model.startswith("models/") else self.model
        return f"{self.base_url}/models/{model}:generateContent"

    def key_headers(self, key: str) -> dict[str, str]:
        """``x-goog-api-key: KEY``."""
        return {"x-goog-api-key": key}

    def build_body(self, req: GenerationRequest, n: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """The ``generateContent`` body of ``req`` (:func:`gemini_body`)."""
        body = gemini_body(req, system_prompt=self.system_prompt, n=n, seed=seed)
        body.update(self.extra_body)
        return body

    def answer_problem(self, data: Any) -> str | None:
        """Why a 200 answer is not a ``generateContent`` answer (:func:`gemini_problem`)."""
        return gemini_problem(data)

    def read_answer(self, data: dict[str, Any]) -> tuple[list[Choice], Usage]:
        """:func:`gemini_answer`."""
        return gemini_answer(data)

    async def generate(self, req: GenerationRequest) -> Generation:
        """Send ``req`` (settings Gemini cannot take said once)."""
        self.unsent(req)
        return await super().generate(req)


register_backend("gemini")(GeminiBackend)

__all__ = ["FINISH_REASONS", "GEMINI_URL", "GeminiBackend", "gemini_answer", "gemini_body", "gemini_logprobs",
           "gemini_problem", "gemini_schema", "gemini_usage"]
