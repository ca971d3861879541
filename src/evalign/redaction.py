"""Secrets out of everything evalign shows or stores: the one place that knows what a secret looks like.

A secret can reach a spec, a URL or a config in two ways, and both are taken out here:

* the user info of a URL (``http://user:PASSWORD@host/v1``): :func:`redact_url` drops it (the backend
  sends it in the ``Authorization`` header, see :func:`evalign.judges._http.split_url_credentials`);
  :func:`redact_text` drops it from every URL inside a free text (a ``--judge`` spec echoed in an error);
* the value of a secret-bearing option (``api_key``, ``token``, ``password``, ``secret``,
  ``authorization`` ...; never ``api_key_env``, which names a variable, nor ``max_tokens``):
  :func:`redact_text` masks ``KEY=VALUE`` in a text, :func:`redact_options` a mapping's values.

What is hashed into a signature or a cache key goes through the same functions, so neither ever
holds a secret and both stay the same when only the password changes. Pure functions, standard
library only (imported by the command line's light modules).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: what a masked value is replaced by
MASK = "***"
#: option names whose value is a secret (compared lower-case, ``-`` read as ``_``)
SECRET_NAMES = frozenset({"api_key", "apikey", "key", "token", "access_token", "auth_token", "bearer", "password",
                          "passwd", "pwd", "secret", "client_secret", "authorization", "auth", "credentials",
                          "x_api_key"})
#: name endings of a secret-bearing option (``openai_api_key``, ``hf_token``, ``db_password``)
SECRET_SUFFIXES = ("_key", "_token", "_secret", "_password", "_passwd", "_credentials")
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s'\"]*)@")
_KEY_VALUE = re.compile(r"(?P<key>[A-Za-z][A-Za-z0-9_-]*)(?P<eq>\s*[=:]\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^,\s'\"}]+)")


def is_secret_name(name: str) -> bool:
    """True for an option name whose value is a secret: an API key, a token, a password, a secret,
    an authorization header (``api_key_env`` and ``*_tokens`` are not: they name a variable, a count)."""
    low = name.strip().lower().replace("-", "_")
    return low in SECRET_NAMES or low.endswith(SECRET_SUFFIXES)


def redact_url(url: str) -> str:
    """``url`` without its user info (``http://user:PASSWORD@host/v1`` -> ``http://host/v1``); any other
    text is returned as it is."""
    return _URL_USERINFO.sub(lambda m: m.group("scheme"), url)


def redact_text(text: str) -> str:
    """``text`` (a spec, a command line, an error message) with the user info of every URL dropped and
    the value of every secret-bearing ``KEY=VALUE`` / ``KEY: VALUE`` masked (``api_key=***``)."""
    text = redact_url(text)
    return _KEY_VALUE.sub(lambda m: f"{m.group('key')}{m.group('eq')}{MASK}" if is_secret_name(m.group("key"))
                          else m.group(0), text)


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` (nested mappings and lists too) with secret-bearing values masked and the
    user info of URLs in text values dropped."""
    return {k: MASK if isinstance(k, str) and is_secret_name(k) and v not in (None, "") else redact_value(v)
            for k, v in options.items()}


def redact_value(value: Any) -> Any:
    """``value`` redacted: a text by :func:`redact_url`, a mapping by :func:`redact_options`, a list or
    tuple item by item; anything else as it is."""
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, Mapping):
        return redact_options(value)
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(v) for v in value)
    return value


__all__ = ["MASK", "SECRET_NAMES", "is_secret_name", "redact_options", "redact_text", "redact_url", "redact_value"]
