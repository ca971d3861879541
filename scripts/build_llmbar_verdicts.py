"""Build the compact LLMBar judge verdicts shipped in the package (no raw texts).

Reads the upstream evaluator outputs ``<data>/llmbar/evaluators/*.jsonl`` (see the section
"Evaluator outputs" of ``<data>/llmbar/SOURCE.md``) and writes
``src/evalign/data/llmbar/verdicts.csv.gz``: one row per (set, evaluator, strategy, index), sorted,
with the columns

``set, evaluator, strategy, index, label, winner_swap_false, winner_swap_true, score_1, score_2``

``winner_swap_*`` are upstream's parsed verdicts in the ORIGINAL numbering (``1``, ``2``, empty =
null: upstream could not parse); ``score_1`` / ``score_2`` are the rating strategies' integer scores
(empty when the judge's score text was not an integer, or for comparison rows). The gzip stream
has no timestamp, so the file is byte-identical from run to run.

Usage: ``python scripts/build_llmbar_verdicts.py [--data-dir DIR] [--out PATH]``
(``DIR`` defaults to ``$EVALIGN_DATA_DIR``, else ``../shared/data`` beside the checkout).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ("set", "evaluator", "strategy", "index", "label", "winner_swap_false", "winner_swap_true",
           "score_1", "score_2")


def _winner(v: object) -> str:
    if v is None:
        return ""
    s = str(v)
    if s not in ("1", "2"):
        raise ValueError(f"unexpected upstream winner {v!r}")
    return s


def _score(v: object) -> str:
    """The integer a rating text holds, as upstream read it (``int(text)``), or empty."""
    if v is None:
        return ""
    try:
        return str(int(str(v)))
    except ValueError:
        return ""


def read_rows(evaluators: Path) -> list[tuple[str, ...]]:
    """One tuple per upstream row (see the module doc), sorted."""
    rows = []
    files = sorted(evaluators.glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no *.jsonl in {evaluators}")
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                rating = "score_1" in r
                rows.append((
                    str(r["set"]), str(r["evaluator"]), str(r["strategy"]), int(r["index"]), int(r["label"]),
                    _winner(r["winner_swap_false"]), _winner(r["winner_swap_true"]),
                    _score(r["score_1"]) if rating else "", _score(r["score_2"]) if rating else "",
                ))
    rows.sort(key=lambda t: (t[0], t[1], t[2], t[3]))
    keys = {t[:4] for t in rows}
    if len(keys) != len(rows):
        raise SystemExit("duplicate (set, evaluator, strategy, index) rows")
    return [tuple(str(x) for x in t) for t in rows]


def write(rows: list[tuple[str, ...]], out: Path) -> None:
    """The CSV, gzip-compressed without a timestamp (reproducible bytes)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    w.writerows(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(buf.getvalue().encode("utf-8"))


def main() -> None:
    env = os.environ.get("EVALIGN_DATA_DIR", "").strip()
    default = Path(env) if env else ROOT.parent / "shared" / "data"
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data-dir", type=Path, default=default)
    ap.add_argument("--out", type=Path, default=ROOT / "src" / "evalign" / "data" / "llmbar" / "verdicts.csv.gz")
    args = ap.parse_args()
    rows = read_rows(args.data_dir / "llmbar" / "evaluators")
    write(rows, args.out)
    configs = {r[:3] for r in rows}
    print(f"{len(rows)} rows, {len(configs)} configurations -> {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
