"""Bad inputs, as users make them, through every reader and verb this module owns (issue 12).

Each case asserts the exit code (1; 2 for a wrong command line), ONE error line on stderr that
names the file, the 1-based line/row/record and the field or option, no traceback, and that no
output file was written. The API tables assert an :class:`InputError` (or ``UsageError``) with
the place. ``CASE_COUNTS`` at the bottom counts the cases per verb (reported in the closing note).
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import evalign
from evalign.cli import app
from evalign.errors import EvalignError, InputError, OutputError, UsageError
from evalign.io import read_items, read_pairs, read_system_human

runner = CliRunner()

OK = '{"id": 1, "system": "a", "response": "the cat", "reference": "the cat"}\n'


def _rec(**kw: Any) -> str:
    base: dict[str, Any] = {"id": 1, "system": "a", "response": "the cat", "reference": "the cat"}
    base.update(kw)
    return json.dumps(base) + "\n"


def _deep(n: int) -> str:
    return '{"id": 1, "system": "a", "response": "x", "reference": "y", "extra": ' + "[" * n + "]" * n + "}\n"


def _parquet_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


# (case id, {file name: content (str = UTF-8 text, bytes = raw)}, extra args, exit code, parts of the message)
# The input is always the first file; "{tmp}" in args is replaced by the test folder.
SCORE_CASES: list[tuple[str, dict[str, str | bytes], list[str], int, list[str]]] = [
    # from the issue
    ("invalid-utf8-jsonl", {"x.jsonl": OK.encode() + b'{"id": 2, "system": "a", "response": "x\xff", "reference": "y"}\n'},
     [], 1, ["x.jsonl", "line 2 column 40", "not valid UTF-8"]),
    ("lone-surrogate-response", {"x.jsonl": _rec(response="x\ud800")}, [], 1,
     ["x.jsonl", "line 1", "field 'response'", "lone surrogate", "character 2"]),
    ("deep-nesting-100k", {"x.jsonl": _deep(100_000)}, [], 1, ["x.jsonl", "line 1", "nested too deeply"]),
    ("option-out-of-range", {"x.jsonl": OK}, ["-m", "chrf", "--option", "chrf.char_order=-3"], 2,
     ["--option chrf.char_order", "integer >= 1", "-3"]),
    ("option-metric-not-scored", {"x.jsonl": OK}, ["-m", "chrf", "--option", "bleu.smooth_method=floor"], 2,
     ["--option 'bleu.smooth_method=floor'", "metric 'bleu' is not scored", "-m bleu"]),
    ("csv-short-row", {"x.csv": "id,system,response,reference\n1,a,x,y\n2,a,x\n"}, [], 1,
     ["x.csv", "line 3", "field 'reference'", "missing"]),
    ("csv-empty-cell", {"x.csv": "id,system,response,reference\n1,a,,y\n"}, [], 1,
     ["x.csv", "line 2", "field 'response'", "missing"]),
    ("field-mapping-absent", {"x.jsonl": OK}, ["--response-field", "output"], 1,
     ["x.jsonl", "line 1", "field 'output'", "missing"]),
    ("unknown-metric-did-you-mean", {"x.jsonl": OK}, ["-m", "chfr"], 2, ["unknown metric 'chfr'", "did you mean 'chrf'"]),
    ("output-directory", {"x.jsonl": OK}, ["-o", "{tmp}/out/"], 1, ["-o", "out/", "is a directory"]),
    ("system-out-fails-before-o", {"x.jsonl": OK, "afile": "x"}, ["-o", "{tmp}/o.jsonl", "--system-out", "{tmp}/afile/s.csv"],
     1, ["--system-out", "afile", "is not a directory"]),
    ("response-true", {"x.jsonl": _rec(response=True)}, [], 1, ["line 1", "field 'response'", "must be a string, got bool"]),
    ("system-none-csv", {"x.csv": "id,system,response,reference\n1,,x,y\n"}, [], 1, ["x.csv", "line 2", "field 'system'", "missing"]),
    ("jsonl-column-1-based", {"x.jsonl": '{"id": 1, "system": "a", "response": "x" "reference": "y"}\n'}, [], 1,
     ["line 1 column 42", "malformed JSON"]),
    # our own
    ("option-not-a-number", {"x.jsonl": OK}, ["-m", "chrf", "--option", "chrf.char_order=six"], 2,
     ["--option chrf.char_order", "must be an integer", "'six'"]),
    ("option-unknown-key", {"x.jsonl": OK}, ["-m", "chrf", "--option", "chrf.char_ordr=3"], 2,
     ["--option chrf.char_ordr", "unknown option 'char_ordr'", "did you mean 'char_order'"]),
    ("option-no-equals", {"x.jsonl": OK}, ["-m", "chrf", "--option", "chrf.char_order"], 2, ["expected metric.key=value"]),
    ("option-choice", {"x.jsonl": OK}, ["-m", "bleu", "--option", "bleu.smooth_method=laplace"], 2,
     ["--option bleu.smooth_method", "one of exp, floor, add-k, none"]),
    ("option-bool", {"x.jsonl": OK}, ["-m", "rouge_l", "--option", "rouge_l.use_stemmer=maybe"], 2,
     ["--option rouge_l.use_stemmer", "true or false"]),
    ("option-python-only", {"x.jsonl": OK}, ["-m", "semscore", "--option", "semscore.cache=x"], 2,
     ["--option semscore.cache", "unknown option 'cache'"]),
    ("option-twice", {"x.jsonl": OK}, ["-m", "chrf", "--option", "chrf.beta=1", "--option", "chrf.beta=3"], 2, ["given twice"]),
    ("no-metric", {"x.jsonl": OK}, ["-m", ","], 2, ["-m", "at least one metric"]),
    ("metric-twice", {"x.jsonl": OK}, ["-m", "bleu,chrf", "-m", "bleu"], 2, ["-m bleu: given twice"]),
    ("surrogate-extra-column", {"x.jsonl": _rec(note=["ok", {"k": "\udfff"}])}, [], 1,
     ["line 1", "field 'note'", "lone surrogate"]),
    ("malformed-second-line", {"x.jsonl": OK + '{"id": 2, "system": "a", "response": \n'}, [], 1, ["line 2", "malformed JSON"]),
    ("array-malformed", {"x.json": '[\n {"id": 1, "system": "a", "response": "x", "reference": "y"},\n {"id": 2,,}\n]'}, [], 1,
     ["x.json", "line 3", "malformed JSON"]),
    ("array-element-not-object", {"x.json": '[{"id": 1, "system": "a", "response": "x", "reference": "y"}, 5]'}, [], 1,
     ["x.json", "record 2", "JSON object"]),
    ("array-missing-field", {"x.json": ' [{"id": 1, "system": "a", "response": "x", "reference": "y"}, {"id": 2, "system": "a"}]'},
     [], 1, ["record 2", "field 'response'", "missing"]),
    ("object-two-lists", {"x.json": '{"train": [{"id": 1}], "test": [{"id": 2}]}'}, [], 1, ["several lists", "'train'", "'test'"]),
    ("scalar-line", {"x.jsonl": "5\n"}, [], 1, ["line 1", "must be a JSON object, got int"]),
    ("empty-file", {"x.jsonl": ""}, [], 1, ["x.jsonl", "no records"]),
    ("blank-lines-only", {"x.jsonl": "\n  \n"}, [], 1, ["x.jsonl", "no records"]),
    ("output-unknown-suffix", {"x.jsonl": OK}, ["-o", "{tmp}/out.txt"], 2, ["-o", "unknown output type '.txt'"]),
    ("system-out-suffix", {"x.jsonl": OK}, ["--system-out", "{tmp}/s.xlsx"], 2, ["--system-out", "'.xlsx'"]),
    ("stdout-twice", {"x.jsonl": OK}, ["-o", "-", "--json"], 2, ["-o -", "standard output is already used"]),
    ("same-output-twice", {"x.jsonl": OK}, ["-o", "{tmp}/o.jsonl", "--system-out", "{tmp}/./o.jsonl"], 2,
     ["--system-out", "the same file as -o"]),
    ("no-such-input", {}, ["{tmp}/nope.jsonl"], 1, ["nope.jsonl", "no such file"]),
    ("input-directory", {"sub/x.jsonl": OK}, ["{tmp}/sub"], 1, ["sub", "is a directory"]),
    ("input-unknown-suffix", {"x.txt": OK}, [], 2, ["x.txt", "unknown file type '.txt'"]),
    ("duplicate-id-system", {"x.jsonl": OK + OK}, [], 1, ["line 2", "field 'id'", "duplicate", "first seen on line 1"]),
    ("reference-list-number", {"x.jsonl": _rec(reference=["a", 3])}, [], 1, ["field 'reference'", "must be strings"]),
    ("reference-empty-list", {"x.jsonl": _rec(reference=[])}, [], 1, ["field 'reference'", "empty list"]),
    ("reference-nan-literal", {"x.jsonl": OK.replace('"the cat"}', "NaN}")}, [], 1, ["field 'reference'", "missing"]),
    ("response-number", {"x.jsonl": _rec(response=3.5)}, [], 1, ["field 'response'", "must be a string, got float"]),
    ("id-bool", {"x.jsonl": _rec(id=True)}, [], 1, ["field 'id'", "string or an integer"]),
    ("id-missing-did-you-mean", {"x.jsonl": '{"ids": 1, "system": "a", "response": "x", "reference": "y"}\n'}, [], 1,
     ["field 'id'", "missing", "did you mean 'ids'"]),
    ("csv-long-row", {"x.csv": "id,system,response,reference\n1,a,x,y,z\n"}, [], 1, ["line 2", "5 cells", "4 columns"]),
    ("csv-duplicate-header", {"x.csv": "id,system,response,response\n1,a,x,y\n"}, [], 1, ["line 1", "duplicate column name"]),
    ("csv-invalid-utf8", {"x.csv": b"id,system,response,reference\n1,a,caf\xe9,y\n"}, [], 1, ["x.csv", "line 2 column 8", "UTF-8"]),
    ("csv-multiline-cell-line-number", {"x.csv": 'id,system,response,reference\n1,a,"two\nlines",y\n2,a,,y\n'}, [], 1,
     ["line 4", "field 'response'"]),
    ("tsv-missing", {"x.tsv": "id\tsystem\tresponse\treference\n1\ta\t\ty\n"}, [], 1, ["x.tsv", "line 2", "field 'response'"]),
    ("parquet-nan-response", {"x.parquet": _parquet_bytes(pd.DataFrame(
        {"id": ["1", "2"], "system": ["a", "a"], "response": ["x", None], "reference": ["y", "y"]}))}, [], 1,
     ["x.parquet", "row 2", "field 'response'", "missing"]),
    ("parquet-corrupt", {"x.parquet": b"PAR1 not really"}, [], 1, ["x.parquet", "cannot read Parquet"]),
    ("skip-invalid-all-bad", {"x.jsonl": _rec(response=None) + _rec(id=2, response=None)}, ["--skip-invalid"], 1,
     ["no records", "2 invalid ones skipped"]),
    ("bom-then-malformed", {"x.jsonl": b"\xef\xbb\xbf{oops}\n"}, [], 1, ["line 1 column 2", "malformed JSON"]),
]


def _materialise(tmp: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8", errors="surrogatepass")


def _listing(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*"))


def _assert_one_error_line(res: Any, code: int, parts: list[str]) -> str:
    assert res.exit_code == code, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert line.startswith("error: ") or line.startswith("Error: ") or "Usage:" in res.stderr, line
    for part in parts:
        assert part in line, (part, line)
    return line


@pytest.mark.parametrize(("files", "args", "code", "parts"), [c[1:] for c in SCORE_CASES], ids=[c[0] for c in SCORE_CASES])
def test_score_bad_input(tmp_path: Path, files: dict[str, str | bytes], args: list[str], code: int, parts: list[str]) -> None:
    _materialise(tmp_path, files)
    before = _listing(tmp_path)
    first = [str(tmp_path / next(iter(files)))] if files and not (args and args[0].startswith("{tmp}")) else []
    argv = ["score", *first, *[a.replace("{tmp}", str(tmp_path)) for a in args]]
    if "-m" not in argv:
        argv += ["-m", "exact_match"]
    if "-o" not in argv:
        argv += ["-o", str(tmp_path / "scored.jsonl")]
    res = runner.invoke(app, argv)
    _assert_one_error_line(res, code, parts)
    assert _listing(tmp_path) == before  # no output, no temp file


# --- read_items (API) ---------------------------------------------------------------------------

# (case id, source: a DataFrame or (file name, content)), read_items kwargs, line, field, words)
READ_ITEMS_CASES: list[tuple[str, Any, dict[str, Any], int | None, str | None, str]] = [
    ("frame-nan-response", pd.DataFrame({"id": [1], "system": ["a"], "response": [float("nan")]}), {}, 1, "response", "missing"),
    ("frame-pd-na-string-dtype", pd.DataFrame({"id": ["1", "2"], "system": ["a", "a"],
                                                "response": pd.array(["x", pd.NA], dtype="string")}), {}, 2, "response", "missing"),
    ("frame-none-system", pd.DataFrame({"id": [1, 2], "system": ["a", None], "response": ["x", "y"]}), {}, 2, "system", "missing"),
    ("frame-nan-id", pd.DataFrame({"id": [1.0, float("nan")], "system": ["a", "a"], "response": ["x", "y"]}), {}, 1, "id",
     "string or an integer"),
    ("frame-bool-human", pd.DataFrame({"id": [1], "system": ["a"], "response": ["x"], "h": [True]}), {"human": ["h"]}, 1, "h",
     "must be a number, got bool"),
    ("frame-inf-human", pd.DataFrame({"id": [1], "system": ["a"], "response": ["x"], "h": [np.inf]}), {"human": ["h"]}, 1, "h",
     "finite"),
    ("frame-text-human", pd.DataFrame({"id": [1], "system": ["a"], "response": ["x"], "h": ["4"]}), {"human": ["h"]}, 1, "h",
     "must be a number"),
    ("frame-missing-human-column", pd.DataFrame({"id": [1], "system": ["a"], "response": ["x"], "score": [1]}),
     {"human": ["scor"]}, 1, "scor", "did you mean 'score'"),
    ("frame-nat-reference", pd.DataFrame({"id": [1], "system": ["a"], "response": ["x"], "reference": [pd.NaT]}),
     {"require_reference": True}, 1, "reference", "missing"),
    ("frame-duplicate-columns", pd.DataFrame([[1, "a", "x", "y"]], columns=["id", "system", "response", "response"]), {}, None,
     None, "duplicate column 'response'"),
    ("frame-surrogate", pd.DataFrame({"id": [1], "system": ["a"], "response": ["ok"], "note": [["\ud83d"]]}, dtype=object), {},
     1, "note", "lone surrogate"),
    ("jsonl-true-human", ("x.jsonl", _rec(h=True)), {"human": ["h"]}, 1, "h", "must be a number, got bool"),
    ("jsonl-nan-human", ("x.jsonl", _rec().replace("}", ', "h": NaN}')), {"human": ["h"]}, 1, "h", "finite"),
    ("jsonl-mapped-field-absent", ("x.jsonl", _rec()), {"fields": {"response": "output"}}, 1, "output", "missing"),
    ("jsonl-mapped-reference-absent", ("x.jsonl", _rec()), {"fields": {"reference": "gold"}, "require_reference": True}, 1,
     "gold", "missing"),
    ("csv-true-human", ("x.csv", "id,system,response,h\n1,a,x,true\n"), {"human": ["h"]}, 2, "h", "must be a number"),
    ("csv-nan-text-human", ("x.csv", "id,system,response,h\n1,a,x,nan\n"), {"human": ["h"]}, 2, "h", "finite"),
    ("csv-short-row-id", ("x.csv", "system,response,id\na,x\n"), {}, 2, "id", "missing"),
    ("jsonl-id-float", ("x.jsonl", _rec(id=1.5)), {}, 1, "id", "string or an integer"),
    ("jsonl-empty-id", ("x.jsonl", _rec(id="")), {}, 1, "id", "missing"),
    ("jsonl-task-number", ("x.jsonl", _rec(task=3)), {}, 1, "task", "must be a string"),
    ("jsonl-reference-dict", ("x.jsonl", _rec(reference={"a": 1})), {}, 1, "reference", "string or a list"),
]


@pytest.mark.parametrize(("source", "kwargs", "line", "field", "words"), [c[1:] for c in READ_ITEMS_CASES],
                         ids=[c[0] for c in READ_ITEMS_CASES])
def test_read_items_bad_input(tmp_path: Path, source: Any, kwargs: dict[str, Any], line: int | None, field: str | None,
                              words: str) -> None:
    if isinstance(source, tuple):
        name, content = source
        _materialise(tmp_path, {name: content})
        source = tmp_path / name
    with pytest.raises(InputError) as ei:
        read_items(source, **kwargs)
    e = ei.value
    assert (e.line, e.field) == (line, field), str(e)
    assert words in str(e) and "\n" not in str(e)


# --- read_pairs (API) ---------------------------------------------------------------------------

PAIR = {"id": 1, "instruction": "q", "response_a": "x", "response_b": "y"}


def _pairs(*rows: dict[str, Any]) -> str:
    return "".join(json.dumps({**PAIR, "id": i + 1, **r}) + "\n" for i, r in enumerate(rows))


READ_PAIRS_CASES: list[tuple[str, str, list[str], int, str, str]] = [
    ("label-yes", _pairs({"p": 1}, {"p": "yes"}), ["p"], 2, "p", "'yes'"),
    ("label-A-is-fine-B-bad-word", _pairs({"p": "A"}, {"p": "better"}), ["p"], 2, "p", "A/B/tie"),
    ("label-bool", _pairs({"p": True}), ["p"], 1, "p", "True"),
    ("label-half", _pairs({"p": 0.5}), ["p"], 1, "p", "0.5"),
    ("label-three", _pairs({"p": 3}), ["p"], 1, "p", "got 3"),
    ("label-column-absent", _pairs({"pref": 1}), ["prefs"], 1, "prefs", "did you mean 'pref'"),
    ("missing-response-b", _pairs({"response_b": None}), [], 1, "response_b", "missing"),
    ("id-bool", _pairs({"id": False}), [], 1, "id", "string or an integer"),
    ("reference-list-number", _pairs({"reference": ["a", 1]}), [], 1, "reference", "list of strings"),
    ("duplicate-id", _pairs({"id": 7}, {"id": 7}), [], 2, "id", "duplicate"),
    ("surrogate", _pairs({"response_a": "\udc80"}), [], 1, "response_a", "lone surrogate"),
    ("system-a-number", _pairs({"system_a": 3}), [], 1, "system_a", "must be a string"),
]


@pytest.mark.parametrize(("content", "pref", "line", "field", "words"), [c[1:] for c in READ_PAIRS_CASES],
                         ids=[c[0] for c in READ_PAIRS_CASES])
def test_read_pairs_bad_input(tmp_path: Path, content: str, pref: list[str], line: int, field: str, words: str) -> None:
    p = tmp_path / "pairs.jsonl"
    p.write_text(content, encoding="utf-8", errors="surrogatepass")
    with pytest.raises(InputError) as ei:
        read_pairs(p, pref=pref)
    assert (ei.value.file, ei.value.line, ei.value.field) == (str(p), line, field), str(ei.value)
    assert words in str(ei.value)


def test_read_pairs_labels_documented_forms(tmp_path: Path) -> None:
    labels = [1, -1, 0, 2, "+1", "-1", "0", "1", "2", "A", "b", " Tie ", None, ""]
    p = tmp_path / "pairs.jsonl"
    p.write_text(_pairs(*[{"p": v} for v in labels]), encoding="utf-8")
    got = read_pairs(p, pref=["p"])["p"].tolist()
    want = [1, -1, 0, -1, 1, -1, 0, 1, -1, 1, -1, 0, math.nan, math.nan]
    assert len(got) == len(want)
    assert all((math.isnan(g) and math.isnan(w)) or g == w for g, w in zip(got, want, strict=True))


# --- evalign.score / system_scores (API) ---------------------------------------------------------

API_CASES: list[tuple[str, pd.DataFrame, int | None, str, str]] = [
    ("string-dtype-pd-na", pd.DataFrame({"id": ["1", "2"], "system": ["a", "a"], "reference": ["x", "y"],
                                         "response": pd.array(["x", pd.NA], dtype="string")}), 2, "response", "missing"),
    ("no-response-column", pd.DataFrame({"id": ["1"], "system": ["a"], "reference": ["x"], "responses": ["x"]}), None,
     "response", "did you mean 'responses'"),
    ("nan-response", pd.DataFrame({"id": ["1", "2"], "system": ["a", "a"], "reference": ["x", "y"],
                                   "response": ["x", float("nan")]}), 2, "response", "missing"),
    ("none-response", pd.DataFrame({"id": ["1"], "system": ["a"], "reference": ["x"], "response": [None]}), 1, "response",
     "missing"),
    ("number-response", pd.DataFrame({"id": ["1"], "system": ["a"], "reference": ["x"], "response": [3]}), 1, "response",
     "must be a string"),
    ("number-reference", pd.DataFrame({"id": ["1"], "system": ["a"], "reference": [3], "response": ["x"]}), 1, "reference",
     "string or a list"),
    ("surrogate-response", pd.DataFrame({"id": ["1"], "system": ["a"], "reference": ["x"],
                                         "response": pd.Series(["\ud800"], dtype=object)}), 1, "response", "lone surrogate"),
]


@pytest.mark.parametrize(("table", "line", "field", "words"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_score_bad_input(table: pd.DataFrame, line: int | None, field: str, words: str) -> None:
    with pytest.raises(InputError) as ei:
        evalign.score(table, ["exact_match"])
    assert (ei.value.line, ei.value.field) == (line, field) and words in str(ei.value)


def test_api_system_none_is_an_error_not_dropped() -> None:
    df = pd.DataFrame({"id": ["1", "2"], "system": ["a", None], "reference": ["x", "y"], "response": ["x", "y"]})
    scored, _ = evalign.score(df, ["exact_match"])
    assert scored["exact_match"].tolist() == [1.0, 1.0]
    with pytest.raises(InputError, match="row 2, field 'system': missing"):
        evalign.system_scores(scored, ["exact_match"])


def test_api_metric_options_checked() -> None:
    with pytest.raises(UsageError, match=r"option chrf\.char_order: must be an integer >= 1, got -3"):
        evalign.get_metric("chrf", char_order=-3)
    with pytest.raises(UsageError, match="must be an integer >= 1, got bool"):
        evalign.get_metric("chrf", char_order=True)
    with pytest.raises(UsageError, match="unknown option 'char_ordr' \\(did you mean 'char_order'\\?\\)"):
        evalign.get_metric("chrf", char_ordr=4)
    with pytest.raises(UsageError, match="unknown metric 'roug_l' \\(did you mean 'rouge_l'\\?\\)"):
        evalign.get_metric("roug_l")
    assert evalign.get_metric("chrf", char_order=4).options()["nc"] == 4


# --- report inputs: system-level human values -----------------------------------------------------

SYSTEM_HUMAN_CASES: list[tuple[str, str, bytes, type[Exception], list[str]]] = [
    ("malformed-json", "s.json", b'{"a": 1,\n "b": }', InputError, ["s.json", "line 2", "malformed JSON"]),
    ("bool-value", "s.json", b'{"a": 1, "b": true}', InputError, ["field 'b'", "finite number"]),
    ("text-value", "s.json", b'{"a": 1, "b": "high"}', InputError, ["field 'b'", "finite number"]),
    ("invalid-utf8", "s.json", b'{"a\xff": 1}', InputError, ["line 1 column 4", "UTF-8"]),
    ("empty-object", "s.json", b"{}", InputError, ["non-empty object"]),
    ("csv-missing-value", "s.csv", b"system,score\na,1\nb,\n", InputError, ["s.csv", "line 3", "field 'score'", "missing"]),
    ("csv-bool-value", "s.csv", b"system,score\na,true\n", InputError, ["line 2", "field 'score'", "must be a number"]),
    ("csv-duplicate-system", "s.csv", b"system,score\na,1\na,2\n", InputError, ["line 3", "duplicate system"]),
    ("csv-no-system-column", "s.csv", b"sytem,score\na,1\n", InputError, ["did you mean 'sytem'"]),
    ("csv-two-value-columns", "s.csv", b"system,x,y\na,1,2\n", InputError, ["exactly one value column"]),
    ("unknown-suffix", "s.txt", b"a 1", UsageError, ["s.txt"]),
    ("no-such-file", "", b"", InputError, ["no such file"]),
]


@pytest.mark.parametrize(("name", "content", "etype", "parts"), [c[1:] for c in SYSTEM_HUMAN_CASES],
                         ids=[c[0] for c in SYSTEM_HUMAN_CASES])
def test_report_system_human_bad_input(tmp_path: Path, name: str, content: bytes, etype: type[Exception],
                                       parts: list[str]) -> None:
    p = tmp_path / (name or "missing.json")
    if name:
        p.write_bytes(content)
    with pytest.raises(etype) as ei:
        read_system_human(p)
    for part in parts:
        assert part in str(ei.value)


def test_report_inputs_accept_bom_and_tsv(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_bytes(b'\xef\xbb\xbf {"ranks": {"a": 1, "b": 2}, "description": "x"}')
    assert read_system_human(p) == {"a": 1.0, "b": 2.0}
    t = tmp_path / "s.tsv"
    t.write_text("system\tscore\na\t1.5\n", encoding="utf-8")
    assert read_system_human(t) == {"a": 1.5}


# --- the top-level handler -----------------------------------------------------------------------


def test_unexpected_exception_is_one_line_with_debug_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalign.scoring

    def boom(*a: Any, **k: Any) -> Any:
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(evalign.scoring, "score", boom)
    src = tmp_path / "x.jsonl"
    src.write_text(OK, encoding="utf-8")
    res = runner.invoke(app, ["score", str(src), "-m", "exact_match", "-o", str(tmp_path / "o.jsonl")])
    line = _assert_one_error_line(res, 1, ["unexpected ZeroDivisionError", "division by zero second line", "--debug"])
    assert line.startswith("error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]
    res = runner.invoke(app, ["--debug", "score", str(src), "-m", "exact_match"])
    assert isinstance(res.exception, ZeroDivisionError)


def test_os_error_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "x.jsonl"
    src.write_text(OK, encoding="utf-8")
    out = tmp_path / "o.jsonl"

    real_replace = os.replace

    def full_disk(a: Any, b: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    res = runner.invoke(app, ["score", str(src), "-m", "exact_match", "-o", str(out)])
    monkeypatch.setattr(os, "replace", real_replace)
    line = _assert_one_error_line(res, 1, [str(out), "No space left on device"])
    assert ".tmp" not in line  # the real output, not the hidden temp file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]


def test_output_errors_name_row_and_column(tmp_path: Path) -> None:
    df = pd.DataFrame({"id": ["1", "2"], "obj": [1, object()]})
    with pytest.raises(OutputError, match=r"o\.jsonl: row 2, column 'obj': cannot write a object as JSON"):
        evalign.write_table(df, tmp_path / "o.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_sigterm_removes_the_temp_file(tmp_path: Path) -> None:
    code = (
        "import os, signal, sys\n"
        "from evalign.cli.common import exit_on_sigterm\n"
        "from evalign.io import atomic_path\n"
        "exit_on_sigterm()\n"
        f"with atomic_path({str(tmp_path / 'out.jsonl')!r}) as tmp:\n"
        "    tmp.write_text('half')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    signal.pause()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(evalign.__file__).parents[1])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60, capture_output=True, text=True)
    assert proc.returncode == 143, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_metrics_verb_bad_option() -> None:
    res = runner.invoke(app, ["metrics", "--jsn"])
    assert res.exit_code == 2 and "Traceback" not in res.output and "--jsn" in res.stderr


def test_usage_error_exit_code_is_2_and_evalign_error_1() -> None:
    assert UsageError("x").exit_code == 2 and EvalignError("x").exit_code == 1 and InputError("x").exit_code == 1


#: cases per verb / reader (issue 12's closing note counts these)
CASE_COUNTS = {
    "score (CLI)": len(SCORE_CASES) + 3,  # + unexpected exception, OSError, SIGTERM
    "read_items": len(READ_ITEMS_CASES),
    "read_pairs": len(READ_PAIRS_CASES),
    "API score/system_scores/get_metric": len(API_CASES) + 1 + 5,
    "report inputs (read_system_human)": len(SYSTEM_HUMAN_CASES),
    "metrics (CLI)": 1,
}


def test_case_counts_reported() -> None:
    assert CASE_COUNTS["score (CLI)"] >= 40 and sum(CASE_COUNTS.values()) >= 100
