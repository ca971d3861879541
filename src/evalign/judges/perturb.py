"""Bias probes as data: perturbation templates (``evalign/judges/probes/<name>.yaml``) and the seeded
perturbations they describe, applied to a pair table.

A probe file declares ``name``, ``version``, ``bias``, ``source`` (the paper it follows), ``edit`` and
what the edit needs:

* ``swap`` (position): the pair in the other presentation order (target: B, the response moved first).
* ``pad`` (verbosity): ``texts`` (neutral sentences) appended to the target response, drawn without
  repetition by the seed, until it is at least ``ratio`` longer in characters than it was.

Every perturbation adds at most :data:`MAX_ADDED_CHARS` characters (a pad's ratio, a long text): what
asks for more is cut there and flagged (:data:`CUT_COLUMN`; the probe card's note says how many).
* ``append`` / ``prepend`` (authority, distraction): one of ``texts`` added after / before the target
  response (blank line between).
* ``note`` (bandwagon, refinement): one of ``texts`` added to the judge's *prompt* (``where: system``:
  the end of the system prompt, or before the user turn when there is none; ``user``: the end of the
  user turn), where ``{target}`` names the target response by the label the template shows it under in
  that order (``labels``: per template mode, e.g. ``llmbar: [Output (a), Output (b)]``; ``default``).
* ``self`` (self-enhancement): no perturbation; the pairs whose system is the judge are compared.

``texts`` may use ``{field}`` placeholders filled from ``fields`` (a list of choices each, drawn by the
seed). The target response is drawn per pair (``target: random``, the default) or fixed (``a`` / ``b``).
Every draw comes from ``numpy.random.default_rng`` seeded by (seed, probe name, pair id), so a pair's
perturbation does not depend on the other rows or their order.

Probes are found by name through :data:`PROBES` (the pattern of :mod:`evalign.registry`): the built-in
files, files given by path, and plugins (``evalign.probes`` entry points: a :class:`Probe` or a file path).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import EvalignError, InputError
from evalign.io.yaml_files import load_yaml
from evalign.judges.prompts import Message, data_files
from evalign.registry import Registry
from evalign.signature import stable_hash

#: the edits a probe may declare
EDITS = ("swap", "pad", "append", "prepend", "note", "self")
#: edits that change a response's text
RESPONSE_EDITS = ("pad", "append", "prepend")
#: which response a probe perturbs
TARGETS = ("random", "a", "b")
#: where a ``note`` goes in the judge's prompt
WHERE = ("system", "user")
#: columns a perturbed pair table carries
TARGET_COLUMN = "probe.target"
NOTE_COLUMN = "probe.note"
PROBE_COLUMN = "probe"
#: True where the perturbation was cut at :data:`MAX_ADDED_CHARS`
CUT_COLUMN = "probe.cut"
#: the most characters a perturbation adds to a response or a prompt (a pad's ratio, a long text): what
#: asks for more is cut there, and the card says so
MAX_ADDED_CHARS = 100_000
#: the labels of a template mode without its own in the probe file
DEFAULT_LABELS = ("the first response", "the second response")

#: bias probes by name: the built-in files, and plugins (``evalign.probes`` entry points)
PROBES: Registry[Any] = Registry("probe", entry_point_group="evalign.probes", discover=data_files("probes"))


@dataclass(frozen=True)
class Probe:
    """One bias probe (see the module doc for the fields)."""

    name: str
    version: int
    bias: str
    edit: str
    source: str
    description: str = ""
    texts: tuple[str, ...] = ()
    fields: tuple[tuple[str, tuple[str, ...]], ...] = ()
    ratio: float = 0.0
    target: str = "random"
    where: str = "system"
    labels: tuple[tuple[str, tuple[str, str]], ...] = ()

    def hash(self) -> str:
        """Content hash (16 hex chars) of everything that shapes the perturbation."""
        return stable_hash({k: v for k, v in self.__dict__.items() if k not in ("source", "description")})

    def tag(self) -> str:
        """``name@version#hash`` (as in signatures)."""
        return f"{self.name}@{self.version}#{self.hash()[:8]}"

    def label(self, mode: str, first: bool) -> str:
        """How a template of ``mode`` names the response shown first (``first``) or second."""
        table = dict(self.labels)
        pair = table.get(mode) or table.get("default") or DEFAULT_LABELS
        return pair[0] if first else pair[1]


def list_probes() -> list[str]:
    """Names of the probes (built-in and plugins)."""
    return PROBES.names()


def load_probe(spec: str | Path | Probe) -> Probe:
    """A probe by name (``"verbosity"``), a probe file (``.yaml`` / ``.json``) or a :class:`Probe`."""
    if isinstance(spec, Probe):
        return spec
    path = Path(spec)
    if not (path.suffix in (".yaml", ".yml", ".json") and path.exists()):
        entry = PROBES.get(str(spec))  # unknown names: one line with "did you mean"
        if isinstance(entry, Probe):
            return entry
        path = Path(entry)
    return _parse(_read(path), path)


def _read(path: Path) -> Mapping[str, Any]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path), what="probe file")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start}); save the probe file as UTF-8", file=str(path)) from None
    except OSError as e:
        raise InputError(f"cannot read a probe file ({type(e).__name__}: {e})", file=str(path)) from None
    if not isinstance(data, Mapping):
        raise InputError("a probe file is a mapping (name, version, bias, edit, source, ...)", file=str(path))
    return data


def _strings(data: Mapping[str, Any], key: str, path: Path) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise InputError("must be a list of strings", file=str(path), field=key)
    return tuple(str(v) for v in value)


def _choice(data: Mapping[str, Any], key: str, default: str, allowed: Sequence[str], path: Path) -> str:
    value = str(data.get(key, default))
    if value not in allowed:
        raise InputError(f"must be one of {', '.join(allowed)}, got {value!r}", file=str(path), field=key)
    return value


def _fields(data: Mapping[str, Any], texts: Sequence[str], edit: str, path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The ``fields`` of a probe file; every ``{placeholder}`` of the texts must be one of them."""
    fields = data.get("fields") or {}
    if not isinstance(fields, Mapping) or not all(isinstance(v, list) and v for v in fields.values()):
        raise InputError("must map each placeholder to a non-empty list of choices", file=str(path), field="fields")
    out = tuple((str(k), tuple(str(x) for x in v)) for k, v in fields.items())
    known = {k for k, _ in out} | ({"target"} if edit == "note" else set())
    for t in texts:
        try:
            used = {f for _, f, _, _ in string.Formatter().parse(t) if f is not None}
        except ValueError as e:  # an unclosed or stray brace
            raise InputError(f"{e} in {t!r} (write a literal brace as {{{{ or }}}})", file=str(path),
                             field="texts") from None
        if any(not f.isidentifier() for f in used):
            bad = next(f for f in used if not f.isidentifier())
            raise InputError(f"text uses {{{bad}}}: a placeholder names one of fields (write a literal brace as "
                             "{{ or }})", file=str(path), field="texts")
        if used - known:
            raise InputError(f"text uses {{{sorted(used - known)[0]}}}, which is not in fields", file=str(path),
                             field="texts")
    return out


def _labels(data: Mapping[str, Any], path: Path) -> tuple[tuple[str, tuple[str, str]], ...]:
    labels = data.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, list) and len(v) == 2 for v in labels.values()):
        raise InputError("must map a template mode to two labels [first, second]", file=str(path), field="labels")
    return tuple((str(k), (str(v[0]), str(v[1]))) for k, v in labels.items())


def _parse(data: Mapping[str, Any], path: Path) -> Probe:
    """A :class:`Probe` from a probe file's mapping; errors name the file and the field."""
    for key in ("name", "version", "bias", "edit", "source"):
        if key not in data:
            raise InputError("missing field", file=str(path), field=key)
    edit = _choice(data, "edit", "", EDITS, path)
    texts = _strings(data, "texts", path)
    if edit in (*RESPONSE_EDITS, "note") and not texts:
        raise InputError(f"a '{edit}' probe needs texts", file=str(path), field="texts")
    if isinstance(data["version"], bool) or not isinstance(data["version"], int) or data["version"] < 1:
        raise InputError(f"must be an integer >= 1, got {data['version']!r}", file=str(path), field="version")
    ratio = data.get("ratio", 0.0)
    if edit == "pad" and (not isinstance(ratio, int | float) or not ratio > 0):  # NaN too
        raise InputError(f"a 'pad' probe needs ratio > 0 (0.5 = +50% length), got {ratio!r}", file=str(path),
                         field="ratio")
    return Probe(
        name=str(data["name"]), version=int(data["version"]), bias=str(data["bias"]), edit=edit,
        source=str(data["source"]), description=str(data.get("description") or ""), texts=texts,
        fields=_fields(data, texts, edit, path), ratio=float(ratio),
        target=_choice(data, "target", "random", TARGETS, path), where=_choice(data, "where", "system", WHERE, path),
        labels=_labels(data, path),
    )  # fmt: skip


# --- perturbing a pair table --------------------------------------------------------------------------


def pair_rng(seed: int, probe: str, pair_id: Any) -> np.random.Generator:
    """The generator of one pair's draws: seeded by (seed, probe name, pair id) only."""
    words = [int(stable_hash([probe, str(pair_id)], 16)[i:i + 8], 16) for i in (0, 8)]
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, *words])


def _fill(text: str, fields: Mapping[str, tuple[str, ...]], rng: np.random.Generator, keep: Sequence[str] = ()) -> str:
    """``text`` with each ``{field}`` drawn from its choices; the names in ``keep`` stay placeholders."""
    values = {k: v[int(rng.integers(len(v)))] for k, v in fields.items()}
    values.update({k: "{" + k + "}" for k in keep})
    return text.format(**values)


def padding(text: str, probe: Probe, rng: np.random.Generator) -> tuple[str, bool]:
    """``(text with the probe's sentences appended, cut)``: sentences joined by a space (drawn without
    repetition, then again) until it is at least ``(1 + ratio) * len(text)`` characters long, or
    :data:`MAX_ADDED_CHARS` longer (then ``cut`` is True and the last sentence is cut there). Linear in
    the output: the pieces are joined once."""
    want = probe.ratio * len(text)
    cut = want > MAX_ADDED_CHARS
    goal = len(text) + min(want, MAX_ADDED_CHARS)
    pieces, size = [text] if text else [], len(text)
    while size < goal or size == len(text):
        for i in rng.permutation(len(probe.texts)):
            piece = probe.texts[int(i)]
            size += len(piece) + (1 if pieces else 0)
            pieces.append(piece)
            if size >= goal:
                break
    out = " ".join(pieces)
    if len(out) - len(text) > MAX_ADDED_CHARS:
        out, cut = out[: len(text) + MAX_ADDED_CHARS], True
    return out, cut


def _bounded(text: str) -> tuple[str, bool]:
    """``text`` cut at :data:`MAX_ADDED_CHARS` characters, and whether it was."""
    return (text[:MAX_ADDED_CHARS], True) if len(text) > MAX_ADDED_CHARS else (text, False)


@dataclass(frozen=True)
class Perturbation:
    """What a probe did to one pair: the ``target`` side (``"A"`` / ``"B"``), the new texts of the two
    responses and the prompt ``note`` (with ``{target}`` left for the judge's label; None without)."""

    target: str
    response_a: str
    response_b: str
    note: str | None = None
    swapped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def perturb_pair(row: Mapping[str, Any], probe: Probe, seed: int) -> Perturbation:
    """The probe's perturbation of one pair (``row``: ``id``, ``response_a``, ``response_b``)."""
    a, b = str(row.get("response_a") or ""), str(row.get("response_b") or "")
    if probe.edit == "swap":
        return Perturbation("B", b, a, swapped=True)
    rng = pair_rng(seed, probe.name, row.get("id"))
    target = {"a": "A", "b": "B"}.get(probe.target) or ("A" if rng.random() < 0.5 else "B")
    if probe.edit == "self":
        return Perturbation(target, a, b)
    fields = dict(probe.fields)
    text = _fill(probe.texts[int(rng.integers(len(probe.texts)))], fields, rng,
                 keep=("target",) if probe.edit == "note" else ())
    text, cut = _bounded(text)
    if probe.edit == "note":
        return Perturbation(target, a, b, note=text, extra={"cut": cut})
    old = a if target == "A" else b
    if probe.edit == "pad":
        new, cut = padding(old, probe, rng)
    elif probe.edit == "append":
        new = f"{old}\n\n{text}" if old else text
    else:
        new = f"{text}\n\n{old}" if old else text
    return Perturbation(target, new if target == "A" else a, new if target == "B" else b, extra={"cut": cut})


def perturb_table(table: pd.DataFrame, probe: Probe, seed: int = 0) -> pd.DataFrame:
    """The pair table with the probe applied to every row: new ``response_a`` / ``response_b`` (and
    systems, for ``swap``), plus :data:`PROBE_COLUMN`, :data:`TARGET_COLUMN`, :data:`NOTE_COLUMN` and
    :data:`CUT_COLUMN`."""
    out = table.copy()
    done = [perturb_pair(r, probe, seed) for r in table.to_dict("records")]
    out["response_a"] = [p.response_a for p in done]
    out["response_b"] = [p.response_b for p in done]
    if probe.edit == "swap" and {"system_a", "system_b"} <= set(out.columns):
        out["system_a"], out["system_b"] = table["system_b"].to_numpy(), table["system_a"].to_numpy()
    out[PROBE_COLUMN] = probe.name
    out[TARGET_COLUMN] = [p.target for p in done]
    out[NOTE_COLUMN] = [p.note for p in done]
    out[CUT_COLUMN] = [bool(p.extra.get("cut")) for p in done]
    return out


# --- a note in the judge's prompt ----------------------------------------------------------------------

#: the presentation orders of the pair judges -> which side is shown first
FIRST_SHOWN = {"ab": "A", "swap_ab": "A", "ba": "B", "swap_ba": "B"}


def add_note(messages: list[Message], note: str, where: str = "system") -> list[Message]:
    """``messages`` with ``note`` at the end of the system prompt (``where="system"``; before the first
    user turn when there is no system prompt) or at the end of the last user turn (``"user"``)."""
    out = [dict(m) for m in messages]
    if where == "system" and out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{note}"
        return out
    users = [i for i, m in enumerate(out) if m["role"] == "user"]
    if not users:
        raise EvalignError("a judge prompt without a user turn cannot take a probe's note")
    if where == "system":
        out[users[0]]["content"] = f"{note}\n\n{out[users[0]]['content']}"
    else:
        out[users[-1]]["content"] = f"{out[users[-1]]['content']}\n\n{note}"
    return out


def with_notes(judge: Any, probes: Mapping[str, Probe]) -> Any:
    """A copy of the pair ``judge`` whose prompts carry each row's probe note (rows with a
    :data:`NOTE_COLUMN` and a :data:`PROBE_COLUMN` naming one of ``probes``); other rows and the
    judge's stage calls (e.g. LLMBar's questions) are unchanged."""
    import copy

    noted = copy.copy(judge)
    mode = judge.template.mode

    def note_of(row: Mapping[str, Any], order: str) -> tuple[str, str] | None:
        note, probe = row.get(NOTE_COLUMN), probes.get(str(row.get(PROBE_COLUMN)))
        if not isinstance(note, str) or probe is None or order not in FIRST_SHOWN:
            return None
        first = FIRST_SHOWN[order] == row.get(TARGET_COLUMN)
        return note.replace("{target}", probe.label(mode, first)), probe.where

    def prompts(row: Mapping[str, Any], rubric: Any, reference: bool) -> list[tuple[str, list[Message]]]:
        out = []
        for order, messages in judge.prompts(row, rubric, reference):
            n = note_of(row, order)
            out.append((order, add_note(messages, *n) if n else messages))
        return out

    def call_messages(row: Mapping[str, Any], rubric: Any, reference: bool, sample: int, order: str,
                      done: Any) -> list[Message]:
        messages = judge.call_messages(row, rubric, reference, sample, order, done)
        n = note_of(row, order)
        return add_note(messages, *n) if n else messages

    noted.prompts = prompts
    noted.call_messages = call_messages
    return noted
