from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.io import atomic_path, read_items, references_of, write_json_atomic, write_table
from sigint import sigint_raises  # tests/, on the path


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


GOOD = [
    {"id": 1, "system": "a", "instruction": "Say hi", "reference": "hi", "response": "hi there", "rating": 4},
    {"id": 1, "system": "b", "instruction": "Say hi", "reference": ["hi", "hello"], "response": "yo", "rating": 2},
    {"id": 2, "system": "a", "reference": "bye", "response": "bye", "rating": None, "extra": [1, 2]},
]


def test_read_jsonl_keeps_columns_and_normalises(tmp_path: Path) -> None:
    df = read_items(_jsonl(tmp_path / "x.jsonl", GOOD), human=["rating"])
    assert list(df.columns) == ["id", "system", "instruction", "input", "reference", "response", "rating", "extra"]
    assert df["id"].tolist() == ["1", "1", "2"]
    assert df.loc[2, "instruction"] == "" and df.loc[0, "input"] == ""
    assert references_of(df) == [["hi"], ["hi", "hello"], ["bye"]]
    assert df["rating"].iloc[0] == 4.0 and math.isnan(df["rating"].iloc[2])
    assert df.loc[2, "extra"] == [1, 2]


def test_field_mapping(tmp_path: Path) -> None:
    rows = [{"qid": "q1", "model": "m", "output": "x", "target": "y"}]
    df = read_items(
        _jsonl(tmp_path / "x.jsonl", rows),
        fields={"id": "qid", "system": "model", "response": "output", "reference": "target"},
    )
    assert df.loc[0, "response"] == "x" and df.loc[0, "reference"] == "y" and df.loc[0, "system"] == "m"


@pytest.mark.parametrize(
    ("content", "line", "field", "words"),
    [
        ('{"id": 1, "system": "a", "response": "x"}\n{"id": 2, "system": "a", "response": "x"\n', 2, None, "malformed JSON"),
        ('{"id": 1, "system": "a", "response": "x"}\n\n{"id": 2, "system": "a"}\n', 3, "response", "missing"),
        ('{"id": 1, "system": "a", "response": 5}\n', 1, "response", "must be a string"),
        ('{"id": 1, "system": "a", "response": "x", "reference": [1]}\n', 1, "reference", "strings"),
        ('{"id": 1, "system": "a", "response": "x", "rating": NaN}\n', 1, "rating", "finite"),
        ('{"id": 1, "system": "a", "response": "x", "rating": "good"}\n', 1, "rating", "number"),
        ('{"id": 1, "system": "a", "response": "x"}\n{"id": 1, "system": "a", "response": "y"}\n', 2, "id", "duplicate"),
        ('{"id": [1], "system": "a", "response": "x"}\n', 1, "id", "string or an integer"),
        ('{"id": 1, "response": "x"}\n', 1, "system", "missing"),
        ('5\n', 1, None, "JSON object"),
    ],
)
def test_jsonl_errors_name_file_line_field(tmp_path: Path, content: str, line: int, field: str | None, words: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as ei:
        read_items(p, human=["rating"] if "rating" in content else ())
    e = ei.value
    assert e.file == str(p) and e.line == line and e.field == field
    assert words in str(e) and str(p) in str(e) and f"line {line}" in str(e)


def test_missing_reference_when_required(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "x.jsonl", [{"id": 1, "system": "a", "response": "x"}])
    with pytest.raises(InputError, match="field 'reference'"):
        read_items(p, require_reference=True)
    with pytest.raises(InputError, match="field 'target'"):
        read_items(p, require_reference=True, fields={"reference": "target"})


def test_csv_lines_count_header_and_parse_numbers(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text('id,system,response,reference,rating\n1,a,x,"[""r1"", ""r2""]",3\n2,a,y,r,oops\n', encoding="utf-8")
    with pytest.raises(InputError) as ei:
        read_items(p, human=["rating"])
    assert ei.value.line == 3 and ei.value.field == "rating"
    p.write_text('id,system,response,reference,rating\n1,a,x,"[""r1"", ""r2""]",3\n2,a,y,r,\n', encoding="utf-8")
    df = read_items(p, human=["rating"])
    assert references_of(df) == [["r1", "r2"], ["r"]]
    assert df["rating"].iloc[0] == 3.0 and math.isnan(df["rating"].iloc[1])


def test_dataframe_and_parquet_roundtrip(tmp_path: Path) -> None:
    df = read_items(_jsonl(tmp_path / "x.jsonl", GOOD), human=["rating"])
    df["score"] = [0.5, float("nan"), 1.0]
    for suffix in ("jsonl", "csv", "parquet"):
        out = tmp_path / f"out.{suffix}"
        write_table(df, out)
        back = read_items(out, human=["rating", "score"])
        assert back["id"].tolist() == df["id"].tolist()
        assert references_of(back) == references_of(df)
        assert back["score"].iloc[0] == 0.5 and math.isnan(back["score"].iloc[1])
    frame = pd.DataFrame([{"id": 1, "system": "a", "response": float("nan")}])
    with pytest.raises(InputError, match="<DataFrame>, row 1, field 'response': missing"):
        read_items(frame)


def test_atomic_write_leaves_old_file_on_error(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def test_atomic_write_survives_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    with sigint_raises(), pytest.raises(KeyboardInterrupt), atomic_path(out) as tmp:  # also in a background job
        tmp.write_text("{")
        signal.raise_signal(signal.SIGINT)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    write_json_atomic(out, {"x": float("nan"), "y": [1.5]})
    assert json.loads(out.read_text()) == {"x": None, "y": [1.5]}


def test_unknown_suffix_and_missing_file(tmp_path: Path) -> None:
    from evalign.errors import UsageError

    with pytest.raises(UsageError, match="unknown file type"):
        read_items(tmp_path / "x.txt")
    with pytest.raises(InputError, match="no such file"):
        read_items(tmp_path / "x.jsonl")


def test_read_system_human_json_nested_csv_and_errors(tmp_path: Path) -> None:
    from evalign.datasets.base import bundled_path
    from evalign.io import read_system_human

    ranks = read_system_human(bundled_path("self_instruct", "human_system_ranking.json"))
    assert ranks["text-davinci-003"] == 3.0 and len(ranks) == 8
    csv = tmp_path / "s.csv"
    csv.write_text("system,score\na,1.5\nb,2\n", encoding="utf-8")
    assert read_system_human(csv) == {"a": 1.5, "b": 2.0}
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1, "b": "high"}', encoding="utf-8")
    with pytest.raises(InputError, match="field 'b': must be a finite number"):
        read_system_human(bad)
    bad.write_text('{"a": 1,', encoding="utf-8")
    with pytest.raises(InputError, match="malformed JSON"):
        read_system_human(bad)


def test_read_pairs_validates_lines(tmp_path: Path) -> None:
    from evalign.io import read_pairs

    p = _jsonl(tmp_path / "p.jsonl", [
        {"id": 1, "instruction": "q", "response_a": "x", "response_b": "y", "pref_1": 1},
        {"id": 2, "instruction": "q", "response_a": "x"},
    ])
    with pytest.raises(InputError) as ei:
        read_pairs(p)
    assert (ei.value.line, ei.value.field) == (2, "response_b")


# --- inputs people have, and the writer (issue 12) -------------------------------------------------

ROW = {"id": 1, "system": "a", "response": "x", "reference": "y"}


@pytest.mark.parametrize(
    ("name", "content", "json_key"),
    [
        ("bom.jsonl", b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n", None),
        ("ws.json", b"\n   \t[" + json.dumps(ROW).encode() + b"]\n", None),
        ("bom-list.json", b"\xef\xbb\xbf [" + json.dumps(ROW).encode() + b"]", None),
        ("wrapped.json", json.dumps({"version": 2, "items": [ROW]}, indent=2).encode(), "items"),
        ("wrapped-one-line.json", json.dumps({"data": [ROW]}).encode(), "data"),
        ("pretty-record.json", json.dumps(ROW, indent=2).encode(), None),
        ("tabs.tsv", b"id\tsystem\tresponse\treference\n1\ta\tx\ty\n", None),
        ("bom.csv", b"\xef\xbb\xbfid,system,response,reference\n1,a,x,y\n", None),
    ],
)
def test_inputs_people_have(tmp_path: Path, name: str, content: bytes, json_key: str | None) -> None:
    p = tmp_path / name
    p.write_bytes(content)
    df = read_items(p)
    assert df[["id", "system", "response", "reference"]].to_dict("records") == [
        {"id": "1", "system": "a", "response": "x", "reference": "y"}
    ]
    assert df.attrs.get("json_key") == json_key


def test_stdin_is_jsonl(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    fake = io.TextIOWrapper(io.BytesIO(json.dumps(ROW).encode() + b"\n"))
    monkeypatch.setattr(sys, "stdin", fake)
    df = read_items("-")
    assert df.attrs["source"] == "<stdin>" and df["response"].tolist() == ["x"]


def test_csv_missing_cells_are_missing_not_empty_text(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("id,system,response,reference,note\n1,a,x,,\n2,a,y\n", encoding="utf-8")
    df = read_items(p)
    assert df["reference"].tolist() == [None, None] and df["note"].tolist() == [None, None]
    with pytest.raises(InputError, match=r"line 2, field 'reference': missing"):
        read_items(p, require_reference=True)


def test_skip_invalid_rows_are_counted(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "x.jsonl", [ROW, {**ROW, "id": 2, "response": None}, {**ROW, "id": 3}])
    df = read_items(p, on_invalid="skip")
    assert df["id"].tolist() == ["1", "3"]
    assert len(df.attrs["skipped"]) == 1 and "line 2, field 'response': missing" in df.attrs["skipped"][0]


def test_parse_preference_strict() -> None:
    from evalign.io import parse_preference

    assert [parse_preference(v) for v in (1, -1, 0, 2, "A", "b", "TIE", "+1", "2")] == [1, -1, 0, -1, 1, -1, 0, 1, -1]
    assert [parse_preference(v) for v in ("1.0", "-1.0", "0.0", "2.0")] == [1, -1, 0, -1]  # a float column in CSV
    assert math.isnan(parse_preference(None)) and math.isnan(parse_preference("")) and math.isnan(parse_preference(float("nan")))
    for bad in ("yes", "AB", 0.5, True, 3, "1.5"):
        with pytest.raises(ValueError, match="A/B/tie"):
            parse_preference(bad)


def test_parquet_timestamps_are_written_as_iso_text(tmp_path: Path) -> None:
    src = tmp_path / "x.parquet"
    pd.DataFrame({**{k: [str(v)] for k, v in ROW.items()}, "when": pd.to_datetime(["2024-05-01 12:30"])}).to_parquet(src)
    out = tmp_path / "o.jsonl"
    write_table(read_items(src), out)
    assert json.loads(out.read_text())["when"] == "2024-05-01T12:30:00"


def test_new_files_get_the_umask_and_old_files_keep_their_mode(tmp_path: Path) -> None:
    import os

    df = read_items(_jsonl(tmp_path / "x.jsonl", [ROW]))
    old = os.umask(0o027)
    try:
        write_table(df, tmp_path / "new.csv")
        assert (tmp_path / "new.csv").stat().st_mode & 0o777 == 0o640
        (tmp_path / "kept.jsonl").write_text("old")
        os.chmod(tmp_path / "kept.jsonl", 0o604)
        write_table(df, tmp_path / "kept.jsonl")
        assert (tmp_path / "kept.jsonl").stat().st_mode & 0o777 == 0o604
        assert json.loads((tmp_path / "kept.jsonl").read_text())["response"] == "x"
    finally:
        os.umask(old)


def test_write_to_stdout_and_tsv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    df = read_items(_jsonl(tmp_path / "x.jsonl", [ROW]))
    write_table(df, "-")
    assert json.loads(capsys.readouterr().out)["reference"] == "y"
    write_table(df, tmp_path / "o.tsv")
    assert (tmp_path / "o.tsv").read_text().splitlines()[0] == "id\tsystem\tinstruction\tinput\treference\tresponse"
    assert read_items(tmp_path / "o.tsv")["response"].tolist() == ["x"]


def test_check_output(tmp_path: Path) -> None:
    from evalign.errors import OutputError, UsageError
    from evalign.io import check_output

    assert check_output(tmp_path / "new" / "deeper" / "o.parquet") == "parquet"
    assert check_output("-") == "jsonl"
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path)
    with pytest.raises(OutputError, match="is a directory"):
        check_output(f"{tmp_path}/nothing-yet/")
    with pytest.raises(UsageError, match=r"unknown output type '\.xlsx'"):
        check_output(tmp_path / "o.xlsx")
    with pytest.raises(UsageError, match=r"written as \.csv / \.jsonl"):
        check_output(tmp_path / "o.parquet", formats=("csv", "jsonl"))
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        check_output(tmp_path / "f" / "o.csv")


def test_csv_json_lists_only_outside_text_fields(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text('id,system,response,reference,tags\n1,a,"[""not"", ""a list""]","[""r1"", ""r2""]","[1, 2]"\n',
                 encoding="utf-8")
    df = read_items(p)
    assert df["response"].tolist() == ['["not", "a list"]']  # a response is text, even if it looks like JSON
    assert references_of(df) == [["r1", "r2"]] and df["tags"].tolist() == [[1, 2]]
