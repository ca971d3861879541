"""The columnar battle reader (:func:`evalign.io.read_battles`) raises exactly the error a record-by-record
reading raises (the first bad row, its line, field and message), on random tables with random faults in
every format, and gives the same table on good ones; its line numbers cost nothing to copy."""

from __future__ import annotations

import copy
import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.io import LineNumbers, read_battles
from evalign.io.battle_table import validate_battle
from evalign.io.readers import detect_format, iter_frame, iter_records

FAULTS = ("surrogate", "no_system", "blank_system", "int_system", "float_id", "bool_id", "inf_len", "text_len",
          "bool_len", "nested_surrogate", "missing_key")


def _record_by_record(source: Any, *, columns: tuple[str, ...]) -> pd.DataFrame:
    """The reference: every record through :func:`validate_battle`, one by one (the reading before the
    columnar one)."""
    if isinstance(source, pd.DataFrame):
        name, word, from_text = str(source.attrs.get("source", "<DataFrame>")), "row", False
        records = iter_frame(source)
    else:
        fmt = detect_format(source)
        meta: dict[str, Any] = {}
        name, from_text = str(source), fmt in ("csv", "tsv")
        records = iter_records(Path(source), fmt, meta)
        word = "row" if fmt == "parquet" else "line"
    rows = [validate_battle(rec, file=name, line=line, word=word, from_text=from_text, columns=columns)
            for line, rec in records]
    return pd.DataFrame(rows)


def _table(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    names = [f"sys-{i}" for i in range(6)]
    out = []
    for i in range(n):
        a, b = rng.choice(len(names), size=2, replace=False)
        out.append({"id": f"q{i // 2}" if rng.random() < 0.8 else i, "system_a": names[a], "system_b": names[b],
                    "verdict": str(rng.choice(["A", "B", "tie", "unparseable"])),
                    "len_a": int(rng.integers(1, 500)), "len_b": float(rng.integers(1, 500)),
                    "response_a": "caf\u00e9 " * int(rng.integers(1, 4)), "response_b": "plain"})
    return out


def _fault(rec: dict[str, Any], fault: str) -> None:
    if fault == "surrogate":
        rec["response_b"] = "bad \ud800 text"
    elif fault == "no_system":
        rec["system_a"] = None
    elif fault == "blank_system":
        rec["system_b"] = "  "
    elif fault == "int_system":
        rec["system_b"] = 7
    elif fault == "float_id":
        rec["id"] = 1.5
    elif fault == "bool_id":
        rec["id"] = True
    elif fault == "inf_len":
        rec["len_a"] = math.inf
    elif fault == "text_len":
        rec["len_b"] = "long"
    elif fault == "bool_len":
        rec["len_a"] = False
    elif fault == "nested_surrogate":
        rec["extra"] = {"k": ["ok", "x\udfff"]}
    elif fault == "missing_key":
        del rec["verdict"]


def _write(records: list[dict[str, Any]], path: Path) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8", errors="surrogatepass")
    else:
        keys = list(dict.fromkeys(k for r in records for k in r))
        with path.open("w", newline="", encoding="utf-8", errors="surrogatepass") as fh:
            w = csv.DictWriter(fh, keys)
            w.writeheader()
            for r in records:
                w.writerow({k: json.dumps(v) if isinstance(v, dict | list) else ("" if v is None else v)
                            for k, v in r.items()})
    return path


def _outcome(fn: Any, source: Any, columns: tuple[str, ...]) -> tuple[str, Any]:
    try:
        return "ok", fn(source, columns=columns)
    except InputError as e:
        return "error", str(e)


def _same(new: tuple[str, Any], old: tuple[str, Any]) -> None:
    assert new[0] == old[0], (new, old)
    if new[0] == "error":
        assert new[1] == old[1]
    else:
        got, want = new[1], old[1]
        assert list(got.columns) == list(want.columns)
        for c in want.columns:
            assert [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in got[c].tolist()] == \
                   [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in want[c].tolist()], c


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_text_files_raise_the_record_by_record_error(tmp_path: Path, suffix: str) -> None:
    rng = np.random.default_rng(7)
    for trial in range(60):
        records = _table(rng, int(rng.integers(1, 30)))
        for _ in range(int(rng.integers(0, 3))):
            _fault(records[int(rng.integers(len(records)))], str(rng.choice(FAULTS)))
        path = _write(records, tmp_path / f"t{trial}{suffix}")
        _same(_outcome(read_battles, path, ("verdict",)), _outcome(_record_by_record, path, ("verdict",)))


def test_frames_and_parquet_raise_the_record_by_record_error(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    frame_faults = ("no_system", "blank_system", "inf_len", "text_len", "surrogate", "float_id", "int_system")
    for trial in range(40):
        records = _table(rng, int(rng.integers(2, 30)))
        for _ in range(int(rng.integers(0, 3))):
            _fault(records[int(rng.integers(len(records)))], str(rng.choice(frame_faults)))
        df = pd.DataFrame(records, dtype=object)  # pandas' text columns cannot hold a lone surrogate
        df.attrs["source"] = f"frame{trial}"
        _same(_outcome(read_battles, df, ("verdict",)), _outcome(_record_by_record, df, ("verdict",)))
        if any(isinstance(v, str) and not v.isascii() and "\ud800" in v for v in df["response_b"]):
            continue  # Parquet cannot hold a lone surrogate
        try:
            path = tmp_path / f"t{trial}.parquet"
            df.infer_objects().to_parquet(path)
        except Exception:  # mixed-type columns pyarrow cannot store
            continue
        _same(_outcome(read_battles, path, ("verdict",)), _outcome(_record_by_record, path, ("verdict",)))


def test_a_missing_verdict_column_names_the_first_line_with_a_hint(tmp_path: Path) -> None:
    path = _write([{"system_a": "x", "system_b": "y", "verdct": "A"}], tmp_path / "v.jsonl")
    with pytest.raises(InputError) as e:
        read_battles(path, columns=("verdict",))
    assert str(e.value) == f"{path}, line 1, field 'verdict': missing (did you mean 'verdct'?)"


def test_the_first_bad_row_wins_across_checks(tmp_path: Path) -> None:
    records = _table(np.random.default_rng(0), 10)
    records[6]["response_a"] = "x\ud800"  # a later row's surrogate ...
    records[3]["len_b"] = "many"  # ... loses to an earlier row's bad length
    path = _write(records, tmp_path / "b.jsonl")
    with pytest.raises(InputError) as e:
        read_battles(path)
    assert str(e.value) == f"{path}, line 4, field 'len_b': must be a number, got str ('many')"


def test_blank_lines_keep_their_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text('{"system_a": "x", "system_b": "y", "verdict": "A"}\n\n'
                    '{"system_a": "x", "system_b": "y", "verdict": "B", "len_a": "3"}\n', encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_battles(path)
    assert str(e.value) == f"{path}, line 3, field 'len_a': must be a number, got str ('3')"


def test_line_numbers_are_not_copied_by_pandas() -> None:
    lines = LineNumbers([1, 3, 4])
    assert copy.deepcopy(lines) is lines and copy.copy(lines) is lines
    assert list(lines) == [1, 3, 4] and lines[1] == 3 and len(lines) == 3 and lines == [1, 3, 4]
    df = pd.DataFrame({"system_a": ["x"] * 3, "system_b": ["y"] * 3, "verdict": ["A", "B", "tie"]})
    df.attrs["lines"] = lines
    assert df["verdict"].attrs["lines"] is lines  # a derived column carries the same object


def test_a_large_table_is_read_and_completed_column_by_column(tmp_path: Path) -> None:
    n = 200_000
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"id": np.arange(n) // 2, "system_a": np.array(["a", "b"])[rng.integers(0, 2, n)],
                       "verdict": rng.choice(["A", "B"], n), "len_a": rng.integers(1, 9, n)})
    df["system_b"] = np.where(df["system_a"] == "a", "b", "a")
    path = tmp_path / "big.parquet"
    df.to_parquet(path)
    out = read_battles(path, columns=("verdict",))
    assert out["id"].tolist()[:4] == ["0", "0", "1", "1"] and out["len_a"].dtype == np.float64
    assert isinstance(out.attrs["lines"], range) and out.attrs["lines"][-1] == n
    df.loc[n - 5, "len_a"] = -1  # negative lengths are numbers: fine
    df["len_b"] = np.where(np.arange(n) == n - 2, np.inf, 1.0)
    df.to_parquet(path)
    with pytest.raises(InputError) as e:
        read_battles(path)
    assert str(e.value) == f"{path}, row {n - 1}, field 'len_b': must be a finite number, got inf"
