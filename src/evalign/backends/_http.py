"""Retry policy for HTTP judge backends: which failures to retry and how long to wait.

Pure helpers (no I/O) so the rules can be tested on their own:

* :func:`parse_retry_after` reads a ``Retry-After`` header (delta-seconds or an HTTP-date).
* :class:`RetryPolicy` gives the wait before retry number ``k`` (exponential backoff with jitter,
  or the server's ``Retry-After`` when it sent one, capped).
* :func:`is_retryable_status` says which HTTP statuses are worth retrying.
* :func:`redact` removes a secret from any text before it is logged or raised, in every form an
  error can show it (raw, ``repr``/bytes-escaped, JSON-escaped, percent-encoded, stripped).
* :func:`check_api_key` refuses a malformed key (control or non-ASCII characters) before any request,
  in one line that never shows the key.
* :func:`split_url_credentials` takes ``user:password@`` out of a base URL (it goes into the
  ``Authorization`` header, never into a printed or stored URL).
* :func:`scrub` redacts every string of a parsed JSON answer (a server that echoes the key).
"""

from __future__ import annotations

import base64
import email.utils
import json
import random
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evalign.errors import EvalignError

#: Statuses retried besides every 5xx: request timeout, conflict, too early, too many requests.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
#: Statuses that mean the configuration is wrong (key, model, URL): retrying or going on is useless.
FATAL_STATUSES = frozenset({401, 403, 404})


def is_retryable_status(status: int) -> bool:
    """True for 408, 409, 425, 429 and every 5xx status."""
    return status >= 500 or status in RETRYABLE_4XX


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value, or None when absent or unreadable.

    Accepts delta-seconds (``"2"``, ``"1.5"``) and an HTTP-date (``"Wed, 21 Oct 2015 07:28:00 GMT"``);
    a date in the past gives 0. ``now`` is the current Unix time (for tests); default ``time.time()``.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if seconds == seconds else None  # NaN -> None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


@dataclass
class RetryPolicy:
    """How often and how long to retry.

    ``max_retries`` retries after the first attempt (so at most ``max_retries + 1`` attempts).
    Without ``Retry-After`` the wait before retry ``k`` (0-based) is drawn uniformly from
    ``[d/2, d]`` with ``d = min(backoff_max, backoff_base * 2**k)`` seconds ("equal jitter").
    With ``Retry-After`` the wait is that many seconds, capped at ``retry_after_max``, plus a
    jitter of at most 10 % of ``backoff_base`` (never less than the server asked for, unless capped).
    """

    max_retries: int = 6
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    retry_after_max: float = 120.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_base < 0 or self.backoff_max < 0 or self.retry_after_max < 0:
            raise ValueError("backoff_base, backoff_max and retry_after_max must be >= 0 seconds")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max) + self.rng.uniform(0.0, 0.1 * self.backoff_base)
        d = min(self.backoff_max, self.backoff_base * (2.0 ** min(retry, 62)))
        return self.rng.uniform(d / 2.0, d)


Secrets = str | Iterable[str] | None


def snippet(text: str, secret: Secrets, limit: int = 300) -> str:
    """The first ``limit`` characters of ``text`` with ``secret`` redacted FIRST (so a secret cut by
    the limit cannot leak a prefix), whitespace-stripped."""
    return redact(text, secret).strip()[:limit]


def secret_forms(secret: str) -> list[str]:
    """Every spelling of ``secret`` an error message, a URL or a JSON text can show, longest first:
    raw, stripped of surrounding whitespace, ``repr``-escaped, bytes-escaped (httpx's
    ``b'Bearer sk-...\\r'``), JSON-escaped (ASCII or not) and percent-encoded (any case)."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1],
             json.dumps(secret, ensure_ascii=False)[1:-1], urllib.parse.quote(secret, safe=""),
             urllib.parse.quote(secret), urllib.parse.quote_plus(secret),
             repr(secret.encode("utf-8", "surrogateescape"))[2:-1],
             repr(secret.encode("latin-1", "backslashreplace"))[2:-1],
             secret.encode("unicode_escape").decode("ascii")}
    pct = urllib.parse.quote(secret, safe="")
    forms.add(pct.lower())
    forms.add(pct.upper())
    return sorted({secret, *(f for f in forms if len(f) >= 4)}, key=len, reverse=True)


def _secret_list(secret: Secrets) -> list[str]:
    if not secret:
        return []
    items = [secret] if isinstance(secret, str) else [s for s in secret if s]
    forms: set[str] = set()
    for item in items:
        forms.update(secret_forms(item))
    return sorted(forms, key=len, reverse=True)


def redact(text: str, secret: Secrets) -> str:
    """``text`` with every occurrence of ``secret`` (or of each of several secrets), in every form of
    :func:`secret_forms`, replaced by ``***`` (no-op for empty secrets)."""
    forms = _secret_list(secret)
    if not forms:
        return text
    for _ in range(3):  # a replacement can expose another spelling (e.g. an escaped form inside a raw one)
        before = text
        for f in forms:
            text = text.replace(f, "***")
            if f.isascii():
                text = _replace_ci(text, f) if "%" in f else text
        if text == before:
            break
    return text


def _replace_ci(text: str, form: str) -> str:
    """Replace ``form`` case-insensitively (percent escapes may be upper or lower case)."""
    low, flow = text.lower(), form.lower()
    out, i = [], 0
    while True:
        j = low.find(flow, i)
        if j < 0:
            return "".join(out) + text[i:]
        out.append(text[i:j] + "***")
        i = j + len(form)


def scrub(value: Any, secret: Secrets) -> Any:
    """A parsed JSON value with every string (keys of objects too) passed through :func:`redact`."""
    if not _secret_list(secret):
        return value
    if isinstance(value, str):
        return redact(value, secret)
    if isinstance(value, list):
        return [scrub(v, secret) for v in value]
    if isinstance(value, dict):
        return {scrub(k, secret): scrub(v, secret) for k, v in value.items()}
    return value


def check_api_key(key: str, where: str) -> None:
    """Raise a one-line :class:`EvalignError` when ``key`` (read from ``where``, e.g. ``"$OPENAI_API_KEY"``)
    cannot be sent in an HTTP header: a control character (a trailing ``\\r`` from a CRLF ``.env`` file,
    a newline, a tab ...) or a non-ASCII character. The message gives the position, never the key."""
    for pos, ch in enumerate(key, start=1):
        if ord(ch) < 32 or ord(ch) == 127:
            what = {"\r": "a carriage return (\\r, as a CRLF .env file leaves it)", "\n": "a newline",
                    "\t": "a tab"}.get(ch, f"a control character (U+{ord(ch):04X})")
        elif not ch.isascii():
            what = f"a non-ASCII character (U+{ord(ch):04X})"
        else:
            continue
        raise EvalignError(
            f"the API key in {where} is malformed: character {pos} of {len(key)} is {what}; "
            "an HTTP header takes printable ASCII only (re-save the file with LF line ends or fix the key)"
        )


def split_url_credentials(url: str) -> tuple[str, str | None, list[str]]:
    """``(url without user:password@, Authorization header value or None, the secrets)``.

    ``http://user:KEY@host/v1`` gives ``("http://host/v1", "Basic base64(user:KEY)", [KEY, user:KEY ...])``
    (what curl and httpx would send for URL credentials); a user name alone gives ``Bearer user``
    (``http://KEY@host/v1``, the way some proxies take a token)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, []
    userinfo, _, hostport = parts.netloc.rpartition("@")
    clean = urllib.parse.urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    user_q, sep, pw_q = userinfo.partition(":")
    user, pw = urllib.parse.unquote(user_q), urllib.parse.unquote(pw_q)
    if sep and pw:  # the user name is not a secret, the password and the whole userinfo are
        secrets = [s for s in (userinfo, pw_q, pw) if s]
        token = base64.b64encode(f"{user}:{pw}".encode()).decode("ascii")
        secrets.append(token)
        return clean, f"Basic {token}", secrets
    secrets = [s for s in (userinfo, user_q, user) if s]
    return clean, (f"Bearer {user}" if user else None), secrets


def sse_data(line: str) -> str | None:
    """The payload of one server-sent-events line: the text after ``data:`` (None for comments such
    as keep-alive pings, other fields and blank lines)."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


_LP_FIELDS = ("tokens", "token_logprobs", "top_logprobs", "text_offset")


def merge_stream(chunks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The answer of a non-streaming request rebuilt from the chunks of a streamed one.

    Chat chunks (``choices[i].delta.content``) give ``choices[i].message.content``; completions
    chunks (``choices[i].text``) give ``choices[i].text``. Per choice: the last ``finish_reason``
    sent, the logprobs of every chunk in order (chat ``logprobs.content`` lists, or the completions
    ``tokens`` / ``token_logprobs`` / ``top_logprobs`` / ``text_offset`` lists), and the ``usage`` of
    the chunk that carries one (``stream_options.include_usage``); a stream without one (llama-cpp-python)
    gets ``{"prompt_tokens": 0, "completion_tokens": <chunks that carried text>, "counted_from_chunks": true}``
    (one token per chunk on llama.cpp; the prompt is not counted). ``id`` / ``model`` / ``created``
    come from the first chunk that has them. No chunk with a choice gives ``"choices": []``.
    """
    texts = 0
    states: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {}
    for ch in chunks:
        if not isinstance(ch, dict):
            continue
        if isinstance(ch.get("usage"), dict):
            out["usage"] = ch["usage"]
        for k in ("id", "model", "created", "system_fingerprint"):
            if k in ch and k not in out:
                out[k] = ch[k]
        for c in ch.get("choices") or []:
            if not isinstance(c, dict):
                continue
            i = c.get("index", 0) if isinstance(c.get("index", 0), int) else 0
            st = states.setdefault(i, {"parts": [], "finish": None, "chat": False, "content": [],
                                       "lp": {f: [] for f in _LP_FIELDS}, "has_lp": False})
            delta = c.get("delta")
            if isinstance(delta, dict):
                st["chat"] = True
                if delta.get("content"):
                    st["parts"].append(str(delta["content"]))
                    texts += 1
            elif c.get("text") is not None:
                st["parts"].append(str(c["text"]))
                texts += 1 if c["text"] else 0
            if c.get("finish_reason"):
                st["finish"] = c["finish_reason"]
            _merge_logprobs(st, c.get("logprobs"))
    choices = []
    for i in sorted(states):
        st = states[i]
        text = "".join(st["parts"])
        choice: dict[str, Any] = {"index": i, "finish_reason": st["finish"]}
        if st["chat"]:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        if st["has_lp"]:
            choice["logprobs"] = {"content": st["content"]} if st["chat"] else st["lp"]
        choices.append(choice)
    if "usage" not in out and texts:
        out["usage"] = {"prompt_tokens": 0, "completion_tokens": texts, "counted_from_chunks": True}
    out["object"] = "chat.completion" if any(s["chat"] for s in states.values()) else "text_completion"
    out["choices"] = choices
    return out


def _merge_logprobs(st: dict[str, Any], lp: Any) -> None:
    if not isinstance(lp, dict):
        return
    if isinstance(lp.get("content"), list):
        st["content"].extend(lp["content"])
        st["has_lp"] = True
        return
    for f in _LP_FIELDS:
        if isinstance(lp.get(f), list):
            st["lp"][f].extend(lp[f])
            st["has_lp"] = True
