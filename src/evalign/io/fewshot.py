"""Few-shot example sets of *simulated annotators* (Trust or Escalate, Jung, Brahman and Choi, ICLR 2025):
one set of labelled pairs per human annotator, shown to a judge so that it predicts that annotator's
verdict (:mod:`evalign.judges.modes.simulated`).

:func:`read_fewshot` reads either format, told apart by the first record:

* **upstream's** ``fewshot.jsonl`` (``data/split/fewshot.jsonl`` of
  ``jaehunjung1/cascaded-selective-evaluation``; read from the data folder, never bundled: no licence
  file upstream): one line per annotator, ``annotator`` (a name) and ``evaluated_samples`` (a list of
  ``{instruction, outputs: [A, B], preferences: {"human": 1 | 2}}``, 1 = A preferred);
* an **``evalign annotate export``** (:mod:`evalign.annotate.export`), JSONL, CSV or Parquet: the
  *wide* table (the items' columns ``instruction`` / ``input`` / ``response_a`` / ``response_b``, one
  ``pref_<annotator>`` column per annotator: +1 A preferred, -1 B, 0 tie, empty: not labelled) or
  the *long* one (one row per label: ``annotator`` and ``label``, the same codes). Annotators come in
  the order of their columns (wide) or of their first label (long); each one's examples are its
  labelled pairs in the file's order, ties left out (the prompt offers A or B only). The Alt-Test
  export (``{annotator: {item: label}}``) holds no item texts and is refused.

``examples`` keeps the first N examples of each annotator (None: all). Bad input is an
:class:`~evalign.errors.InputError` naming the file, line and field.

:func:`read_upstream_prompts` reads ``upstream_prompts.txt`` (the strings of upstream's
``model/prompts.py``, one ``===== name =====`` section each) from the same folder.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.errors import InputError
from evalign.signature import stable_hash

#: the file names in the data folder (``selective/`` under ``$EVALIGN_DATA_DIR``)
FEWSHOT_FILE = "fewshot.jsonl"
PROMPTS_FILE = "upstream_prompts.txt"
#: the data folder's set holding them
FOLDER = "selective"
#: the sections of ``upstream_prompts.txt`` the simulated annotators use
PROMPT_SECTIONS = ("system_prompt", "fewshot_inst_prompt", "fewshot_example_prompt", "fewshot_query_prompt")
#: a label code of an export -> the verdict shown in an example (ties are not examples)
_CODE_VERDICT = {1.0: "A", -1.0: "B"}


@dataclass(frozen=True)
class FewshotExample:
    """One labelled pair: the ``instruction``, the responses ``response_a`` / ``response_b`` (as shown:
    A first) and the verdict the annotator gave (``preferred``: ``A`` or ``B``)."""

    instruction: str
    response_a: str
    response_b: str
    preferred: str


@dataclass(frozen=True)
class AnnotatorExamples:
    """One annotator's few-shot examples (``annotator``: the name in the file)."""

    annotator: str
    examples: tuple[FewshotExample, ...]


@dataclass(frozen=True)
class FewshotSource:
    """What :func:`read_fewshot` read: the ``annotators`` (in the file's order), the ``file``, its
    ``format`` (``upstream``, ``wide`` or ``long``) and ``hash`` (of the example sets: part of each
    call's cache key and of the judge's signature)."""

    annotators: tuple[AnnotatorExamples, ...]
    file: str
    format: str

    @property
    def hash(self) -> str:
        """Content hash (16 hex chars) of the annotators' examples."""
        return fewshot_hash(self.annotators)

    def first(self, k: int) -> tuple[AnnotatorExamples, ...]:
        """The first ``k`` annotators; more than the file has is an :class:`InputError`."""
        if k < 1:
            raise InputError(f"needs at least 1 annotator, got {k}", file=self.file, field="annotator")
        if k > len(self.annotators):
            raise InputError(f"has {len(self.annotators)} annotator(s) with examples "
                             f"({', '.join(a.annotator for a in self.annotators)}); {k} were asked for",
                             file=self.file, field="annotator")
        return self.annotators[:k]


def fewshot_hash(annotators: Sequence[AnnotatorExamples]) -> str:
    """Content hash (16 hex chars) of few-shot example sets, in order."""
    return stable_hash([[a.annotator, [[e.instruction, e.response_a, e.response_b, e.preferred] for e in a.examples]]
                        for a in annotators])


@dataclass(frozen=True)
class _At:
    """Where records come from: the ``file`` and how it names a record's place (``line``, ``row``, ``record``)."""

    file: str
    line_word: str = "line"

    def error(self, message: str, line: int | None, *, field: str | None = None) -> InputError:
        return InputError(message, file=self.file, line=line, field=field, line_word=self.line_word)


def _text(v: Any) -> str | None:
    """A text cell (None for a missing one)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v if isinstance(v, str) else str(v)


def _upstream_set(rec: Mapping[str, Any], at: _At, line: int, examples: int | None) -> AnnotatorExamples:
    name = rec.get("annotator")
    if not isinstance(name, str) or not name:
        raise at.error("missing or not a string (the annotator's name)", line, field="annotator")
    samples = rec.get("evaluated_samples")
    if not isinstance(samples, list) or not samples:
        raise at.error("must be a non-empty list of {instruction, outputs, preferences}", line, field="evaluated_samples")
    out = []
    for i, s in enumerate(samples):
        where = f"evaluated_samples[{i}]"
        if not isinstance(s, Mapping):
            raise at.error("must be a mapping {instruction, outputs, preferences}", line, field=where)
        if not isinstance(s.get("instruction"), str):
            raise at.error("missing or not a string", line, field=f"{where}.instruction")
        outputs = s.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != 2 or not all(isinstance(o, str) for o in outputs):
            raise at.error("must be a list of two responses (A, B)", line, field=f"{where}.outputs")
        prefs = s.get("preferences")
        human = prefs.get("human") if isinstance(prefs, Mapping) else None
        if human not in (1, 2) or isinstance(human, bool):
            raise at.error(f"must be 1 (A preferred) or 2 (B), got {human!r}", line, field=f"{where}.preferences.human")
        out.append(FewshotExample(s["instruction"], outputs[0], outputs[1], "A" if human == 1 else "B"))
    return AnnotatorExamples(name, tuple(out[:examples] if examples is not None else out))


def _pair_texts(rec: Mapping[str, Any], at: _At, line: int) -> tuple[str, str, str]:
    """The instruction (with its input, as a judge shows it) and the two responses of an export row."""
    from evalign.io.text import join_instruction

    texts = {}
    for f in ("instruction", "response_a", "response_b"):
        v = _text(rec.get(f))
        if v is None:
            raise at.error("missing (an annotate export of a pair table has instruction, response_a, response_b)", line, field=f)
        texts[f] = v
    return join_instruction(texts["instruction"], rec.get("input")), texts["response_a"], texts["response_b"]


def _code(v: Any, at: _At, line: int, field: str) -> float | None:
    """A label code of an export (+1 / -1 / 0; None: not labelled)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v == "":
        return None
    try:
        code = float(v)
    except (TypeError, ValueError):
        code = math.nan
    if code not in (1.0, -1.0, 0.0):
        raise at.error(f"must be a pairwise label code (1 = A preferred, -1 = B, 0 = tie), got {v!r}", line, field=field)
    return code


def read_fewshot(path: str | Path, *, examples: int | None = None) -> FewshotSource:
    """The few-shot example sets of ``path`` (upstream's ``fewshot.jsonl`` or an ``evalign annotate``
    export: see the module doc), each cut to its first ``examples`` (None: all)."""
    from evalign.io.readers import detect_format, iter_records

    if examples is not None and examples < 1:
        raise InputError(f"must be >= 1, got {examples}", field="examples")
    path = Path(path)
    file = str(path)
    if not path.is_file():
        raise InputError("no such file", file=file)
    upstream = _upstream_records(path) if detect_format(path) == "jsonl" else None
    if upstream is not None:
        at = _At(file)
        sets = tuple(_upstream_set(rec, at, line, examples) for line, rec in upstream)
        fmt = "upstream"
    else:
        meta: dict[str, Any] = {}
        records = list(iter_records(path, detect_format(path), meta))
        at = _At(file, str(meta.get("line_word", "line")))
        if not records:
            raise InputError("no records (a few-shot file has one set of labelled examples per annotator)", file=file)
        line0, first = records[0]
        if "annotator" in first and "label" in first:
            sets, fmt = tuple(_long(records, at, examples)), "long"
        elif any(str(k).startswith("pref_") for k in first):
            sets, fmt = tuple(_wide(records, at, examples)), "wide"
        elif first and all(isinstance(v, Mapping) for v in first.values()):
            raise InputError("an Alt-Test annotators file ({annotator: {item: label}}) holds no item texts: export "
                             "the labels with --format wide or long", file=file)
        else:
            raise at.error("neither upstream's few-shot format (annotator, evaluated_samples) nor an evalign annotate "
                           "export (pref_<annotator> columns, or annotator and label)", line0,
                           field="evaluated_samples")
    names = [a.annotator for a in sets]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"annotator {dup!r} is given twice", file=file, field="annotator")
    return FewshotSource(tuple(sets), file, fmt)


def _upstream_records(path: Path) -> list[tuple[int, dict[str, Any]]] | None:
    """The lines of upstream's JSON-lines format (one ``{annotator, evaluated_samples}`` object each),
    or None when the file's first record is not one (an export: read as a table)."""
    import json

    out: list[tuple[int, dict[str, Any]]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # the table reader names the line and byte that is not UTF-8
    for lineno, line in enumerate(text.split("\n"), start=1):  # at newline only (U+2028 in a text)
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if not out:
                return None  # not JSON lines: the table reader says what is wrong
            raise InputError(f"malformed JSON ({e.msg})", file=str(path), line=lineno) from None
        if not out and not (isinstance(rec, dict) and "evaluated_samples" in rec):
            return None
        if not isinstance(rec, dict):
            raise InputError(f"each line must be a JSON object, got {type(rec).__name__}", file=str(path),
                             line=lineno)
        out.append((lineno, rec))
    return out or None


def _wide(records: Sequence[tuple[int, Mapping[str, Any]]], at: _At, examples: int | None) -> list[AnnotatorExamples]:
    columns = [k for k in records[0][1] if str(k).startswith("pref_")]
    got: dict[str, list[FewshotExample]] = {c: [] for c in columns}
    for line, rec in records:
        texts = None
        for c in columns:
            code = _code(rec.get(c), at, line, c)
            if code is None or code == 0.0:
                continue
            texts = texts or _pair_texts(rec, at, line)
            got[c].append(FewshotExample(*texts, _CODE_VERDICT[code]))
    return _sets({c[len("pref_"):]: v for c, v in got.items()}, at.file, examples)


def _long(records: Sequence[tuple[int, Mapping[str, Any]]], at: _At, examples: int | None) -> list[AnnotatorExamples]:
    got: dict[str, list[FewshotExample]] = {}
    for line, rec in records:
        name = _text(rec.get("annotator"))
        if not name:
            raise at.error("missing (the annotator's name)", line, field="annotator")
        code = _code(rec.get("label"), at, line, "label")
        got.setdefault(name, [])
        if code is None or code == 0.0:
            continue
        got[name].append(FewshotExample(*_pair_texts(rec, at, line), _CODE_VERDICT[code]))
    return _sets(got, at.file, examples)


def _sets(got: Mapping[str, list[FewshotExample]], file: str, examples: int | None) -> list[AnnotatorExamples]:
    """The annotators with at least one A/B label (those without: an error naming them)."""
    empty = [name for name, ex in got.items() if not ex]
    if empty:
        raise InputError(f"annotator(s) {', '.join(empty)} gave no A or B label (ties are not examples)", file=file,
                         field=f"pref_{empty[0]}")
    return [AnnotatorExamples(name, tuple(ex[:examples] if examples is not None else ex)) for name, ex in got.items()]


# --- upstream's prompt text ------------------------------------------------------------------------

_SECTION_RE = re.compile(r"^===== (\w+) =====$", re.MULTILINE)


def read_upstream_prompts(path: str | Path) -> dict[str, str]:
    """The sections of ``upstream_prompts.txt`` (``===== name =====`` then the text, each ending with
    one line break that is not part of it); the four of :data:`PROMPT_SECTIONS` must be there."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read ({e.strerror})", file=file) from None
    heads = list(_SECTION_RE.finditer(text))
    sections: dict[str, str] = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end() + 1:end]
        sections[m.group(1)] = body[:-1] if body.endswith("\n") else body
    for name in PROMPT_SECTIONS:
        if name not in sections:
            raise InputError("missing section ('===== name =====' then its text)", file=file, field=name)
    return sections


def find_upstream_prompts(data_dir: str | Path | None = None) -> Path | None:
    """``upstream_prompts.txt`` of the data folder (``selective/`` under ``data_dir``, else
    ``$EVALIGN_DATA_DIR``), or None when the folder does not ship it."""
    from evalign.io.data_dir import default_data_dir

    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    for c in (root / FOLDER / PROMPTS_FILE, root / PROMPTS_FILE):
        if c.is_file():
            return c
    return None


__all__ = ["FEWSHOT_FILE", "PROMPTS_FILE", "PROMPT_SECTIONS", "AnnotatorExamples", "FewshotExample", "FewshotSource",
           "fewshot_hash", "find_upstream_prompts", "read_fewshot", "read_upstream_prompts"]
