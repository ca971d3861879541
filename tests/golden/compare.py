"""Golden outputs: compare what a command prints and writes with files recorded from the code as it was
before the issue-21 restructuring, byte for byte after a small normaliser.

Imported by the tests as ``golden.compare`` (``tests/`` is on ``sys.path`` under pytest's default import
mode). Regenerate every golden file with ``EVALIGN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
tests/test_demo.py``: the checks then (re)write the files instead of comparing, and pass.

The normaliser masks only what legitimately varies between two runs of the same code on the same data:

* wall-clock timings, as ``<time>``: the ``s/1k items`` column of terminal (rich) tables; the
  ``s_per_1000`` column of CSV, Markdown, LaTeX and HTML tables; the values of the JSON keys
  ``s_per_1000`` and ``seconds...`` (``seconds_per_1000_items``, ``seconds_self_instruct``, ...); the
  ``(1.35s)`` after a metric signature on stderr;
* paths: the run's temporary folder as ``<TMP>``, the data folder (``$EVALIGN_DATA_DIR``) as ``<DATA>``,
  the interpreter's site-packages as ``<SITE>``;
* stderr lines of progress bars (a carriage return, or a tqdm bar ``NN%|``) are dropped; a command run
  without a terminal prints none today;
* figures inlined in an HTML page (base64 PNG), as ``<figure>``: each is also written as a file, and
  figures are compared as pixels (:func:`check_image`), not bytes.

Everything else (table layout, messages, column order, JSON formatting) is compared byte for byte, and so
are the numbers, up to the noise of floating point between processors: the same code gives
``0.3333333333333332`` on one CPU and ``...31`` on another (numpy's SIMD sums), and a sentence-transformer's
float32 kernels move a cosine (SemScore) by up to ~5e-7 in absolute terms (measured between two machines of
this project's CI pool), which is a large relative move for a small score such as 0.0107. So where the texts differ, they still match when everything but the
numbers is identical and each number equals its golden within :data:`REL_TOL` (relative) or
:data:`ABS_TOL` (absolute); a decimal printed with at most 6 decimals may also move by one unit in its last
place (a value on a rounding boundary). Integers must be equal.
Small outputs are stored whole (``NAME``), so a mismatch shows a readable diff; big ones (scored JSONL, the
demo's HTML report) as ``NAME.sha256``: the sha256 of the normalised text, then per line a short hash of the
line with its decimal numbers (:data:`DECIMAL`) taken out, followed by those numbers, so a mismatch
names the first differing line and prints it.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import itertools
import json
import os
import re
import sysconfig
from collections.abc import Iterable
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent
#: written files above this size (normalised) are stored as hashes, line by line; smaller ones whole
WHOLE_LIMIT = 200_000
#: written files compared as bytes (their hash)
BINARY = (".parquet", ".npz")
#: figures: compared as pixels, the mean of each square block of this many pixels a side per channel
PIXEL_BLOCK = 16
#: a block's mean (0-255, per channel) may move this much between two processors' renderings ...
PIXEL_TOL = 8.0
#: ... and the mean over all blocks and channels of the moves at most this much
PIXEL_MEAN_TOL = 0.25
UPDATE = os.environ.get("EVALIGN_UPDATE_GOLDEN", "") not in ("", "0")
TIME = "<time>"
#: column headers that hold wall-clock timings
TIME_HEADERS = ("s/1k items", "s_per_1000", r"s\_per\_1000")
#: JSON keys that hold wall-clock timings
_JSON_TIME = re.compile(r'("(?:s_per_1000|seconds[A-Za-z0-9_]*)"\s*:\s*)(-?[0-9][0-9.eE+-]*)')
_JSON_TIME_OBJECT = re.compile(r'"(?:s_per_1000|seconds[A-Za-z0-9_]*)"\s*:\s*\{[^{}]*\}')
_JSON_NUMBER = re.compile(r'("\s*:\s*)(-?[0-9][0-9.eE+-]*)')
_SIGNATURE_TIME = re.compile(r" \([0-9]+(?:\.[0-9]+)?s\)$", re.MULTILINE)
_PROGRESS = re.compile(r"\r|[0-9]+%\|")
_HTML_PNG = re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+")
#: a number as printed (integer, decimal, exponent)
NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
#: a number with a decimal point: the ones a big file's line records take out and compare up to noise
DECIMAL = re.compile(r"-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?")
REL_TOL = 1e-6
ABS_TOL = 1e-6


# ------------------------------------------------------------------------------------------------
# normalisers


def mask_html_figures(text: str) -> str:
    """The base64 PNG figures inlined in an HTML page, as ``<figure>`` (each is also written as a file,
    compared as pixels by :func:`check_image`)."""
    return _HTML_PNG.sub("data:image/png;base64,<figure>", text)


def mask_paths(text: str, tmp: Iterable[Path | str] = ()) -> str:
    """The temporary folders (longest first), the data folder and site-packages as placeholders."""
    for p in sorted((str(t) for t in tmp), key=len, reverse=True):
        text = text.replace(os.path.realpath(p), "<TMP>").replace(p, "<TMP>")
    data = os.environ.get("EVALIGN_DATA_DIR")
    if data:
        text = text.replace(data.rstrip("/"), "<DATA>")
    return text.replace(sysconfig.get_paths()["purelib"], "<SITE>")


def mask_terminal_tables(text: str, headers: Iterable[str] = ("s/1k items",)) -> str:
    """Blank the body cells of the columns titled ``headers`` in rich tables (box drawn with ┏ ┃ ┡ │ └)
    as ``<time>``, right-aligned in the cell. A header may wrap over several header lines."""
    wanted = {" ".join(h.split()) for h in headers}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("┏"):
            i += 1
            continue
        j = i + 1
        head: list[str] = []
        while j < len(lines) and lines[j].lstrip().startswith("┃"):
            head.append(lines[j])
            j += 1
        if not head:
            i = j
            continue
        seps = [k for k, ch in enumerate(head[0]) if ch == "┃"]
        spans = list(itertools.pairwise(seps))
        targets = [(a, b) for a, b in spans
                   if " ".join(" ".join(h[a + 1:b] for h in head).split()) in wanted]
        k = j
        while k < len(lines) and not lines[k].lstrip().startswith("└"):
            row = lines[k]
            if row.lstrip().startswith("│"):
                for a, b in targets:
                    if b < len(row) and row[a] == "│" and row[b] == "│":
                        cell = row[a + 1:b]
                        if cell.strip() not in ("", "-"):
                            width = b - a - 1
                            row = row[:a + 1] + f"{TIME} ".rjust(width) + row[b:]
                lines[k] = row
            k += 1
        i = k
    return "\n".join(lines)


_RULE = re.compile(r"^(\\(?:midrule|hline|cmidrule\S*)|\|[-:| ]+\|)$")


def _mask_cells(rows: list[list[str]], headers: Iterable[str]) -> list[list[str]]:
    """Rows of cells: from a row holding one of ``headers`` on, the cells below it with a value."""
    wanted = set(headers)
    cols: list[int] = []
    width = 0
    out = []
    for row in rows:
        hit = [c for c, v in enumerate(row) if v.strip() in wanted]
        if hit:
            cols, width = hit, len(row)
        elif cols and len(row) == width:
            row = [TIME if c in cols and v.strip() not in ("", "-", "nan", "NaN", "None") else v
                   for c, v in enumerate(row)]
        elif not (len(row) == 1 and _RULE.match(row[0])):  # a rule under the header keeps the columns
            cols = []
        out.append(row)
    return out


def mask_csv(text: str, headers: Iterable[str] = TIME_HEADERS) -> str:
    """CSV: the timing columns' values as ``<time>`` (re-written by the csv module, both sides alike)."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator="\n").writerows(_mask_cells(rows, headers))
    return buf.getvalue()


def mask_markdown(text: str, headers: Iterable[str] = TIME_HEADERS) -> str:
    """Markdown (``| a | b |``) and LaTeX (``a & b \\\\``) tables: the timing columns as ``<time>``."""
    out = []
    rows: list[list[str]] = []
    kinds: list[str] = []
    for line in text.split("\n"):
        if line.startswith("| ") and line.endswith(" |"):
            rows.append(line[2:-2].split(" | "))
            kinds.append("md")
        elif " & " in line and line.endswith(" \\\\"):
            rows.append(line[:-3].split(" & "))
            kinds.append("tex")
        else:
            rows.append([line])
            kinds.append("text")
    for row, kind in zip(_mask_cells(rows, headers), kinds, strict=True):
        if kind == "md":
            out.append("| " + " | ".join(row) + " |")
        elif kind == "tex":
            out.append(" & ".join(row) + " \\\\")
        else:
            out.append(row[0])
    return "\n".join(out)


_TABLE = re.compile(r"<table\b.*?</table>", re.DOTALL)
_ROW = re.compile(r"<tr\b.*?</tr>", re.DOTALL)
_CELL = re.compile(r"(<t([hd])\b[^>]*>)(.*?)(</t\2>)", re.DOTALL)


def mask_html(text: str, headers: Iterable[str] = TIME_HEADERS) -> str:
    """HTML tables (pandas ``to_html``): the cells under a ``<th>s_per_1000</th>`` as ``<time>``."""
    wanted = set(headers)

    def table(m: re.Match[str]) -> str:
        cols: list[int] = []

        def row(r: re.Match[str]) -> str:
            nonlocal cols
            cells = list(_CELL.finditer(r.group(0)))
            hit = [c for c, cm in enumerate(cells) if cm.group(2) == "h" and cm.group(3).strip() in wanted]
            if hit:
                cols = hit
                return r.group(0)
            if not cols:
                return r.group(0)
            n = iter(range(len(cells)))

            def cell(cm: re.Match[str]) -> str:
                c = next(n)
                if c in cols and cm.group(3).strip() not in ("", "-", "NaN", "nan", "None"):
                    return cm.group(1) + TIME + cm.group(4)
                return cm.group(0)

            return _CELL.sub(cell, r.group(0))

        return _ROW.sub(row, m.group(0))

    return _TABLE.sub(table, text)


def mask_json_times(text: str) -> str:
    """JSON text: the numbers under the keys ``s_per_1000`` and ``seconds...`` (or in a flat object under
    such a key, e.g. ``"seconds": {"bleu": 0.31}``) as ``"<time>"``; the rest of the text, formatting
    included, untouched."""
    text = _JSON_TIME_OBJECT.sub(lambda m: _JSON_NUMBER.sub(lambda n: f'{n.group(1)}"{TIME}"', m.group(0)), text)
    return _JSON_TIME.sub(lambda m: f'{m.group(1)}"{TIME}"', text)


def mask_stderr(text: str) -> str:
    """stderr: progress-bar lines dropped, the ``(1.35s)`` after a metric signature masked."""
    lines = [ln for ln in text.split("\n") if not _PROGRESS.search(ln)]
    return _SIGNATURE_TIME.sub(f" ({TIME})", "\n".join(lines))


def normalise_file(path: Path, tmp: Iterable[Path | str] = ()) -> str:
    """A written file's text, normalised by its kind (extension)."""
    with path.open(encoding="utf-8", newline="") as f:  # line endings as written
        text = f.read()
    suffix = path.suffix
    if suffix == ".csv":
        text = mask_csv(text)
    elif suffix in (".md", ".tex"):
        text = mask_markdown(text)
    elif suffix in (".html", ".htm"):
        text = mask_html(mask_html_figures(text))
    elif suffix in (".json", ".jsonl"):
        text = mask_json_times(text)
    return mask_paths(text, tmp)


def normalise_stdout(text: str, tmp: Iterable[Path | str] = ()) -> str:
    """A command's stdout: terminal tables' and JSON timings masked, paths as placeholders."""
    return mask_paths(mask_json_times(mask_terminal_tables(text)), tmp)


def normalise_stderr(text: str, tmp: Iterable[Path | str] = ()) -> str:
    """A command's stderr: progress bars dropped, signature timings masked, paths as placeholders."""
    return mask_paths(mask_stderr(text), tmp)


# ------------------------------------------------------------------------------------------------
# comparison


def _diff(expected: str, actual: str, name: str, limit: int = 80) -> str:
    lines = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"golden/{name}", "now",
                                      lineterm="", n=2))
    more = f"\n... ({len(lines) - limit} more diff lines)" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + more


def numbers_close(expected: str, actual: str) -> bool:
    """Two printed numbers equal up to floating-point noise (see the module's docstring)."""
    if expected == actual:
        return True
    if not any(c in expected + actual for c in ".eE"):  # integers: exactly
        return False
    a, b = float(expected), float(actual)
    if abs(a - b) <= max(REL_TOL * max(abs(a), abs(b)), ABS_TOL):
        return True
    decimals = [len(x.split(".")[1]) if "." in x and "e" not in x.lower() else None for x in (expected, actual)]
    return decimals[0] is not None and decimals[0] == decimals[1] and decimals[0] <= 6 \
        and abs(a - b) <= 1.01 * 10.0 ** -decimals[0]


def same_up_to_noise(expected: str, actual: str) -> bool:
    """``expected`` and ``actual`` identical but for numbers that are :func:`numbers_close` (runs of spaces
    around a number of another width allowed)."""
    want, got = NUMBER.findall(expected), NUMBER.findall(actual)
    if len(want) != len(got):
        return False
    skeleton = [re.sub(" +", " ", part) for part in NUMBER.split(expected)]
    if skeleton != [re.sub(" +", " ", part) for part in NUMBER.split(actual)]:
        return False
    return all(numbers_close(w, g) for w, g in zip(want, got, strict=True))


def check_text(name: str, text: str) -> None:
    """Compare ``text`` with the golden file ``name`` (or write it under EVALIGN_UPDATE_GOLDEN=1)."""
    path = GOLDEN_DIR / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
        return
    assert path.exists(), f"no golden file {path} (record it with EVALIGN_UPDATE_GOLDEN=1)"
    with path.open(encoding="utf-8", newline="") as f:
        expected = f.read()
    if expected != text and not same_up_to_noise(expected, text):
        raise AssertionError(f"output differs from golden/{name}:\n{_diff(expected, text, name)}")


def _line_record(line: str) -> str:
    """A line's record: the short hash of the line with its decimal numbers taken out, then them (so
    ``1.0`` on one processor and ``0.9999999999999998`` on another still match)."""
    numbers = DECIMAL.findall(line)
    masked = DECIMAL.sub("#", line)
    return " ".join([hashlib.sha256(masked.encode("utf-8")).hexdigest()[:16], *numbers])


def _record_matches(record: str, line: str) -> bool:
    digest, *numbers = record.split(" ")
    got = _line_record(line).split(" ")
    return got[0] == digest and len(got) - 1 == len(numbers) \
        and all(w == g or abs(float(w) - float(g)) <= max(REL_TOL * max(abs(float(w)), abs(float(g))), ABS_TOL)
                for w, g in zip(numbers, got[1:], strict=True))


def check_hashed(name: str, text: str) -> None:
    """Compare a big ``text`` with ``name.sha256`` (its sha256, then a record per line: a short hash and the
    line's full-precision numbers, compared up to noise): on a mismatch the message names the first
    differing line and shows it."""
    path = GOLDEN_DIR / f"{name}.sha256"
    lines = text.split("\n")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    record = f"sha256 {digest} bytes {len(text.encode('utf-8'))} lines {len(lines)}\n" + "".join(
        f"{_line_record(line)}\n" for line in lines)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(record, encoding="utf-8", newline="")
        return
    assert path.exists(), f"no golden file {path} (record it with EVALIGN_UPDATE_GOLDEN=1)"
    head, *hashes = path.read_text(encoding="utf-8").splitlines()
    if head.split()[1] == digest:
        return
    for i, line in enumerate(lines):
        if i >= len(hashes) or not _record_matches(hashes[i], line):
            raise AssertionError(f"golden/{name}: first difference at line {i + 1} "
                                 f"(golden: {head}; now {len(lines)} lines):\n{line[:3000]}")
    if len(hashes) == len(lines):
        return  # every line equal up to noise
    raise AssertionError(f"golden/{name}: {len(hashes) - len(lines)} line(s) missing at the end (golden: {head})")


def _pixel_blocks(png: bytes) -> tuple[tuple[int, int], list[list[float]]]:
    """A PNG's size and its block means: per row of :data:`PIXEL_BLOCK`-pixel squares, the mean of each
    square's red, green, blue and alpha (0-255), one decimal."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        a = np.asarray(im.convert("RGBA"), dtype=np.float64)
    h, w = a.shape[:2]
    b = PIXEL_BLOCK
    ph, pw = -h % b, -w % b  # pad with white so edge blocks are whole
    a = np.pad(a, ((0, ph), (0, pw), (0, 0)), constant_values=255.0)
    means = a.reshape((h + ph) // b, b, (w + pw) // b, b, 4).mean(axis=(1, 3))
    return (w, h), [[round(float(v), 1) for v in row.ravel()] for row in means]


def check_image(name: str, png: bytes) -> None:
    """Compare a figure with ``name.pixels`` (its sha256, size, then its block means, see
    :func:`_pixel_blocks`): identical bytes pass; otherwise the size must be equal and the pixels close
    (each block mean within :data:`PIXEL_TOL`, all of them on average within :data:`PIXEL_MEAN_TOL`), as a
    curve drawn through values that moved by float noise (~1e-8) lands on other anti-aliased pixels."""
    path = GOLDEN_DIR / f"{name}.pixels"
    digest = hashlib.sha256(png).hexdigest()
    (w, h), rows = _pixel_blocks(png)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(" ".join(f"{v:.1f}" for v in row) + "\n" for row in rows)
        path.write_text(f"png {w}x{h} block {PIXEL_BLOCK} sha256 {digest}\n{body}", encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path} (record it with EVALIGN_UPDATE_GOLDEN=1)"
    head, *lines = path.read_text(encoding="utf-8").splitlines()
    _, size, _, block, _, want_digest = head.split()
    if want_digest == digest:
        return
    assert int(block) == PIXEL_BLOCK, f"golden/{name}: recorded with blocks of {block} pixels"
    assert size == f"{w}x{h}", f"golden/{name}: the figure is {w}x{h} pixels, the golden one {size}"
    want = [[float(v) for v in line.split()] for line in lines]
    worst, total, count = 0.0, 0.0, 0
    for i, (a, b) in enumerate(zip(want, rows, strict=True)):
        for j, (x, y) in enumerate(zip(a, b, strict=True)):
            d = abs(x - y)
            total, count = total + d, count + 1
            if d > worst:
                worst, where = d, (i, j // 4)
    mean = total / max(count, 1)
    if worst > PIXEL_TOL or mean > PIXEL_MEAN_TOL:
        raise AssertionError(f"golden/{name}: the pixels differ (largest block move {worst:.1f} of 255 at block "
                             f"row {where[0]}, column {where[1]} of {PIXEL_BLOCK}px; mean move {mean:.3f}; "
                             f"allowed {PIXEL_TOL}, {PIXEL_MEAN_TOL})")


def check_json_text(name: str, text: str) -> None:
    """Like :func:`check_text`, for text that must also parse as JSON."""
    json.loads(text)
    check_text(name, text)


def check_files(name: str, root: Path, skip: tuple[str, ...] = (), tmp: Iterable[Path | str] = ()) -> None:
    """Every file written under ``root``: their sorted list (``NAME/FILES``), then each file normalised
    (``NAME/<path>``): small ones whole, big ones (over :data:`WHOLE_LIMIT`) and binary ones (figures,
    Parquet, npz) as hashes.
    ``skip``: path prefixes left out (the caller says why); ``cache.sqlite*`` is always left out.
    ``tmp``: further temporary folders to mask (``root`` always is)."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    files = [f for f in files if not f.startswith((*skip, "cache.sqlite"))]
    check_text(f"{name}/FILES", "\n".join(files) + "\n")
    for rel in files:
        path = root / rel
        if path.suffix == ".png":
            check_image(f"{name}/{rel}", path.read_bytes())
            continue
        if path.suffix in BINARY:  # the same bytes for the same figure or table (checked: two runs)
            check_hashed(f"{name}/{rel}", path.read_bytes().hex())
            continue
        text = normalise_file(path, [root, *tmp])
        if len(text.encode("utf-8")) > WHOLE_LIMIT:
            check_hashed(f"{name}/{rel}", text)
        else:
            check_text(f"{name}/{rel}", text)
