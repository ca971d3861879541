"""Generated item tables (arbitrary Unicode including lone surrogates, missing cells, odd types)
through ``read_items`` and ``score``: either a correct result or an ``InputError``, never another
exception, and never a silent change (rows kept, texts and ratings unchanged)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import InputError
from evalign.io import read_items, references_of
from evalign.metrics.lexical import squad_normalize
from evalign.scoring import score

ANY_TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=12)  # surrogates included
CELL = st.one_of(
    st.none(),
    ANY_TEXT,
    st.just(""),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.lists(ANY_TEXT, max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
COLUMNS = ("id", "system", "response", "reference", "h", "extra")
RECORD = st.fixed_dictionaries({}, optional={c: CELL for c in COLUMNS})
MOSTLY = st.one_of(ANY_TEXT, ANY_TEXT, ANY_TEXT, CELL)  # usually valid text, sometimes anything


@st.composite
def _mostly_valid(draw: Any) -> list[dict[str, Any]]:
    """Tables that usually pass validation, so that results (not only errors) are checked."""
    n = draw(st.integers(1, 6))
    clean = draw(st.booleans())  # half of them without any odd value
    text = st.text(max_size=12) if clean else MOSTLY
    odd = st.nothing() if clean else CELL
    rows = []
    for i in range(n):
        rec: dict[str, Any] = {"id": i, "system": draw(st.one_of(st.sampled_from(["a", "b"]), odd)),
                               "response": draw(text)}
        if draw(st.booleans()):
            rec["reference"] = draw(st.one_of(text, st.lists(text, min_size=1, max_size=2)))
        rec["h"] = draw(st.one_of(st.none(), st.integers(0, 5), st.floats(0, 5), odd))
        rows.append(rec)
    return rows


TABLE = st.one_of(st.lists(RECORD, max_size=6), _mostly_valid())

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _check_result(records: list[dict[str, Any]], df: pd.DataFrame, *, csv_text: bool = False) -> None:
    """A table that was read keeps every row, every response and every rating as given."""
    assert len(df) == len(records)
    for rec, (_, row) in zip(records, df.iterrows(), strict=True):
        assert row["response"] == (str(rec["response"]) if csv_text else rec["response"])
        if "h" in rec:
            want = rec["h"]
            if _missing(want) or (csv_text and str(want) == ""):
                assert math.isnan(row["h"])
            else:
                assert row["h"] == float(want)


def _check_scores(df: pd.DataFrame) -> None:
    VALID_SEEN.append(len(df))
    scored, _ = score(df, ["exact_match", "rouge_l"])
    refs = references_of(df)
    for resp, rs, em, rl in zip(df["response"], refs, scored["exact_match"], scored["rouge_l"], strict=True):
        if not rs:
            assert math.isnan(em) and math.isnan(rl)
        else:
            assert em == float(any(squad_normalize(resp) == squad_normalize(r) for r in rs))
            assert 0.0 <= rl <= 1.0


@FAST
@given(TABLE)
def test_dataframe_tables(records: list[dict[str, Any]]) -> None:
    df = pd.DataFrame(records, dtype=object) if records else pd.DataFrame()
    try:
        out = read_items(df, human=["h"] if records and all("h" in r for r in records) else [])
    except InputError:
        return
    _check_result(records, out)
    _check_scores(out)


@FAST
@given(TABLE)
def test_jsonl_tables(tmp_path_factory: Any, records: list[dict[str, Any]]) -> None:
    p = tmp_path_factory.mktemp("h") / "x.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")  # ASCII escapes, NaN literals
    try:
        out = read_items(p, human=["h"] if records and all("h" in r for r in records) else [])
    except InputError:
        return
    _check_result(records, out)
    _check_scores(out)


def _csv_cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, list | dict):
        return json.dumps(v)
    return str(v)


@FAST
@given(TABLE)
def test_csv_tables(tmp_path_factory: Any, records: list[dict[str, Any]]) -> None:
    p = tmp_path_factory.mktemp("h") / "x.csv"
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(COLUMNS)
    for r in records:
        w.writerow([_csv_cell(r.get(c)) for c in COLUMNS])
    p.write_bytes(buf.getvalue().encode("utf-8", errors="surrogatepass"))  # surrogates become invalid UTF-8
    try:
        out = read_items(p)
    except InputError:
        return
    # CSV keeps texts as written; every row read, nothing changed
    assert len(out) == len(records)
    for r, resp in zip(records, out["response"], strict=True):
        assert resp == _csv_cell(r.get("response"))  # texts are never parsed or changed
    _check_scores(out)


runner = CliRunner()

#: sizes of the tables that were read and scored (the last test checks that results were checked)
VALID_SEEN: list[int] = []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TABLE)
def test_score_cli_never_crashes(tmp_path_factory: Any, records: list[dict[str, Any]]) -> None:
    d: Path = tmp_path_factory.mktemp("c")
    p = d / "x.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    res = runner.invoke(app, ["score", str(p), "-m", "exact_match", "-o", str(d / "o.jsonl")])
    assert "Traceback" not in res.output
    if res.exit_code == 0:
        # JSON lines end at "\n" only (a response may hold U+2028 or U+0085, which splitlines() splits on)
        back = [json.loads(line) for line in (d / "o.jsonl").read_text(encoding="utf-8").split("\n") if line]
        assert [b["response"] for b in back] == [r["response"] for r in records]
    else:
        assert res.exit_code == 1, res.output
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
        assert not (d / "o.jsonl").exists()


def test_generated_tables_were_scored_too() -> None:
    # run after the generated tests in this module: many tables passed validation and were scored
    assert sum(1 for n in VALID_SEEN if n > 0) >= 50, VALID_SEEN[:20]


def test_generated_values_cover_numpy_scalars() -> None:
    df = pd.DataFrame({"id": np.array([1, 2]), "system": ["a", "a"], "response": ["x", "y"], "h": np.array([1.5, np.nan])})
    out = read_items(df, human=["h"])
    assert out["id"].tolist() == ["1", "2"] and out["h"].iloc[0] == 1.5 and math.isnan(out["h"].iloc[1])
