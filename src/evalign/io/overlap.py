"""The one check that no command writes over a file it reads (issue 48).

Every command that reads files and writes files calls :func:`refuse_output_onto_inputs` before any
work, with its outputs and its inputs by the option that names them. An output that is an input
(after resolving links, relative paths and ``~``; compared by the file system's identity of the file
when it exists, so a second name of the same file, another letter case on a case-insensitive file
system or a hard link is the same file), or an output folder whose files would replace an input, is
a :class:`~evalign.errors.UsageError` (exit 2) naming both options and both paths.

A store a command is documented to resume (``annotate --db``, ``score --out-dir``, the cache) is not
passed as an output; ``-`` (standard input / output) and None (not given) are skipped.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from evalign.errors import UsageError

__all__ = ["OutputFolder", "refuse_output_onto_inputs", "same_file"]

#: what an input option may name: a path, several paths (a repeatable option) or nothing
InputPaths = str | os.PathLike[str] | Iterable[str | os.PathLike[str] | None] | None


@dataclass(frozen=True)
class OutputFolder:
    """An output folder and the files a command writes in it: ``names`` are glob patterns relative
    to the folder (``"train.jsonl"``, ``"sets/*"``; ``*`` also matches ``/``); empty: the command
    owns the whole folder (any input in it would be replaced)."""

    path: str | os.PathLike[str]
    names: tuple[str, ...] = ()


def _plain(p: str | os.PathLike[str]) -> Path:
    return Path(os.path.expanduser(os.fspath(p)))


def _identity(p: Path) -> tuple[object, ...]:
    """The file's identity: (device, inode) when it exists (links followed), else its resolved,
    case-normalised absolute path."""
    try:
        st = p.stat()
    except (OSError, ValueError):
        return ("path", os.path.normcase(str(p.resolve())))
    return ("inode", st.st_dev, st.st_ino)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file (see :func:`_identity`)."""
    return _identity(_plain(a)) == _identity(_plain(b))


def _inside(folder: Path, path: Path) -> str | None:
    """``path`` relative to ``folder`` (both resolved, links followed) when it lies inside, else None."""
    try:
        rel = path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        return None
    text = rel.as_posix()
    return None if text in ("", ".") else text


def _paths(value: InputPaths) -> Iterator[Path]:
    if value is None:
        return
    items = [value] if isinstance(value, str | os.PathLike) else list(value)
    for v in items:
        if v is not None and os.fspath(v) not in ("", "-"):
            yield _plain(v)


def _collision(output: Path | OutputFolder, in_option: str, given: Path) -> str | None:
    """What writing ``output`` would do to the input ``given`` of ``in_option`` (None: nothing)."""
    if isinstance(output, Path):
        return f"is the input {in_option} {given}" if same_file(output, given) else None
    folder = _plain(output.path)
    if same_file(folder, given):
        return f"is the input folder {in_option} {given}"
    rel = _inside(folder, given)
    if rel is None:
        return None
    if not output.names:
        return f"this command writes the whole folder, and the input {in_option} {given} lies in it"
    if any(fnmatch.fnmatch(rel.lower(), n.lower()) for n in output.names):
        return f"would write {folder / rel}, the input {in_option} {given}"
    return None


def refuse_output_onto_inputs(outputs: Mapping[str, str | os.PathLike[str] | OutputFolder | None],
                              inputs: Mapping[str, InputPaths]) -> None:
    """Refuse, before any work, an output that would replace an input: ``outputs`` and ``inputs`` map
    the option naming each (``"-o"``, ``"--rest"``, ``"VERDICTS"``, ``"--pairs"``) to its path (an
    input option may hold several; an output folder is an :class:`OutputFolder`). Raises
    :class:`~evalign.errors.UsageError` naming both options and paths; nothing happens otherwise."""
    for out_option, out in outputs.items():
        if out is None or (not isinstance(out, OutputFolder) and os.fspath(out) in ("", "-")):
            continue
        target = out if isinstance(out, OutputFolder) else _plain(out)
        shown = os.fspath(out.path if isinstance(out, OutputFolder) else out)
        for in_option, value in inputs.items():
            for given in _paths(value):
                why = _collision(target, in_option, given)
                if why is not None:
                    raise UsageError(f"{out_option} {shown}: {why}; writing it would replace what this command "
                                     "reads (give another output " + ("folder)" if isinstance(out, OutputFolder)
                                                                      else "path)"))
