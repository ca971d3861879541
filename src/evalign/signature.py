"""Reproducibility signatures: a stable string naming everything that determines a score.

Modelled on sacrebleu's signatures, e.g.
``rouge_l|tok:rouge|stem:no|evalign:0.2.0|rouge-score:0.1.2``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist``, or ``"none"`` when it is not installed."""
    from importlib import metadata  # 25 ms: loaded when a signature is made, not at every command's start

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "none"


def stable_hash(obj: Any, length: int = 16) -> str:
    """A short hex SHA-256 of a JSON-serialisable object (keys sorted), stable across runs."""
    data = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()[:length]


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def text_hash(text: str) -> str:
    """Full hex SHA-256 of a text (UTF-8; a lone surrogate is hashed as its code point, never an error)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Signature:
    """What determines a metric's or a judge's numbers.

    ``name`` is the metric or judge name; ``options`` are its settings (model, tokenizer, ...);
    ``versions`` maps distribution names to installed versions.
    """

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    versions: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = [self.name]
        parts += [f"{k}:{_fmt(v)}" for k, v in self.options.items()]
        parts += [f"{k}:{v}" for k, v in self.versions.items()]
        return "|".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form, as stored in ``summary.json`` and result files."""
        return {"name": self.name, "options": dict(self.options), "versions": dict(self.versions)}

    @property
    def key(self) -> str:
        """A short hash of the signature, used in cache keys."""
        return stable_hash(self.as_dict())


def make_signature(name: str, options: Mapping[str, Any], dists: tuple[str, ...] = ()) -> Signature:
    """Build a :class:`Signature` with evalign's version and those of ``dists``."""
    versions = {"evalign": package_version("evalign")}
    versions.update({d: package_version(d) for d in dists})
    return Signature(name=name, options=dict(options), versions=versions)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)
