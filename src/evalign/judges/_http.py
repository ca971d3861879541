"""Retry policy for HTTP judge backends: which failures to retry and how long to wait.

Pure helpers (no I/O) so the rules can be tested on their own:

* :func:`parse_retry_after` reads a ``Retry-After`` header (delta-seconds or an HTTP-date).
* :class:`RetryPolicy` gives the wait before retry number ``k`` (exponential backoff with jitter,
  or the server's ``Retry-After`` when it sent one, capped).
* :func:`is_retryable_status` says which HTTP statuses are worth retrying.
* :func:`redact` removes a secret from any text before it is logged or raised.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass, field

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


def snippet(text: str, secret: str | None, limit: int = 300) -> str:
    """The first ``limit`` characters of ``text`` with ``secret`` redacted FIRST (so a secret cut by
    the limit cannot leak a prefix), whitespace-stripped."""
    return redact(text, secret).strip()[:limit]


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``***`` (no-op for empty secrets)."""
    if not secret:
        return text
    return text.replace(secret, "***")
