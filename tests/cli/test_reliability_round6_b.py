"""Reliability, round 6 (issue 48), part b: the weak ones. Confidences taken silently (``meta
--selective``), a hand-edited calibration file not named, names turned into emoji by rich, a sloppy
server's logprobs stopping a simulated-annotators run, option values refused in other words (or not
at all) by other commands, ``meta --alt-test --min-items``.
Each asserts the one line (or the note) a user now gets."""

from __future__ import annotations

import http.server
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()


def one_error(text: str) -> str:
    """The one ``error:`` line of an output (asserted: exactly one, no traceback, no "this is a bug")."""
    flat = " ".join(text.split())
    assert flat.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in flat, text
    return flat


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------
# meta --selective: a probability or confidence that is not one names file, row and column


def _selective_rows(n: int = 120, seed: int = 3) -> list[dict[str, Any]]:
    """Pairs with one annotator, a judge ``judge:x`` stating P(A better) and a judge ``judge:y`` with a
    confidence; both right more often when sure."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        pref = float(rng.choice([1.0, -1.0]))
        sure = float(rng.uniform(0.5, 1.0))
        x = pref if rng.uniform() < sure else -pref
        rows.append({"id": f"p{i}", "instruction": f"q{i}", "response_a": "a", "response_b": "b", "pref_1": pref,
                     "judge:x": "A" if x > 0 else "B", "judge:x.p_a": sure if x > 0 else 1 - sure,
                     "judge:y": "A" if x > 0 else "B", "judge:y.confidence": sure})
    return rows


def _selective(path: Path, *extra: str) -> Any:
    return runner.invoke(app, ["meta", str(path), "--pref", "pref_1", "-m", "judge:x,judge:y", "--bootstrap", "20",
                               "--permutations", "20", "--selective", "--risk", "0.3", *extra],
                         env={"COLUMNS": "200"})


def test_a_probability_out_of_range_names_file_row_and_column(tmp_path: Path) -> None:
    rows = _selective_rows()
    rows[4]["judge:x.p_a"] = 1.2
    path = _write(tmp_path / "v.jsonl", rows)
    res = _selective(path)
    assert res.exit_code == 1
    assert (f"error: {path}, row 5, field 'judge:x.p_a': a probability must lie in [0, 1] (a number; empty or NaN: "
            "none), got 1.2") in one_error(res.output)


@pytest.mark.parametrize(("raw", "shown"), [
    ("Infinity", "inf"), ("-Infinity", "-inf"), ('"inf"', "'inf'"), ('"high"', "'high'"), ("true", "True"),
])
def test_an_infinite_or_text_confidence_is_refused(tmp_path: Path, raw: str, shown: str) -> None:
    rows = _selective_rows()
    lines = [json.dumps(r) for r in rows]
    lines[6] = lines[6].replace(f'"judge:y.confidence": {json.dumps(rows[6]["judge:y.confidence"])}',
                                f'"judge:y.confidence": {raw}')
    assert raw in lines[6]
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = _selective(path)
    assert res.exit_code == 1
    assert (f"error: {path}, row 7, field 'judge:y.confidence': a confidence must lie in [0, 1] (a number; empty or "
            f"NaN: none), got {shown}") in one_error(res.output)


@pytest.mark.parametrize("raw", ["NaN", "null", '""'])
def test_nan_or_empty_is_no_confidence(tmp_path: Path, raw: str) -> None:
    rows = _selective_rows()
    lines = [json.dumps(r) for r in rows]
    lines[6] = lines[6].replace(f'"judge:y.confidence": {json.dumps(rows[6]["judge:y.confidence"])}',
                                f'"judge:y.confidence": {raw}')
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = _selective(path, "--json")
    assert res.exit_code == 0, res.output
    sel = json.loads(res.stdout)["selective"]
    assert sel["alone"]["judge:y"]["n"] == 119
    assert "judge:y: 1 labelled items without a confidence are left out of its calibration" in sel["notes"]


def test_selective_json_exits_as_the_terminal_form(tmp_path: Path) -> None:
    """One system of graded items: the plain trust table is refused, the selective table computed;
    the terminal form and --json both exit 0."""
    rng = np.random.default_rng(5)
    n = 200
    human = rng.integers(1, 6, n).astype(float)
    p = rng.uniform(0.3, 1.0, n)
    grade = np.where(rng.uniform(size=n) < p, human, np.clip(human + rng.choice([-1, 1], n), 1, 5))
    t = pd.DataFrame({"id": [f"i{k}" for k in range(n)], "system": "s", "instruction": "q", "response": "r",
                      "human": human, "judge:g": grade, "judge:g.p": p})
    path = tmp_path / "items.jsonl"
    t.to_json(path, orient="records", lines=True)
    args = ["meta", str(path), "--human", "human", "-m", "judge:g", "--bootstrap", "20", "--permutations", "20",
            "--selective", "--risk", "0.3"]
    plain = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert plain.exit_code == 0, plain.output
    res = runner.invoke(app, [*args, "--json"])
    out = json.loads(res.stdout)
    assert out["refused"] and out["selective"]["rows"][0]["judge"] == "judge:g"
    assert res.exit_code == 0


# ------------------------------------------------------------------------------------------------
# judge --cascade with a hand-edited calibration file: the file and the field are named


def _cal(path: Path, spec: Any) -> Path:
    entry = {"column": "j", "threshold": 0.7, "signature": {"column": "j"}, "spec": spec}
    path.write_text(json.dumps({"kind": "evalign selective calibration", "risk": 0.15, "delta": 0.1,
                                "judges": [entry]}), encoding="utf-8")
    return path


GOOD_SPEC = {"judge": "pairwise", "options": {"template": "llmbar_vanilla", "column": "j"},
             "backend": {"kind": "openai", "model": "m", "url": ["http://127.0.0.1:9/v1"], "options": {}}}


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"judge": "bogus"}, "judges[0].spec.judge", "unknown judge or mode 'bogus'; known: absolute,"),
    ({"options": ["template", "llmbar_vanilla"]}, "judges[0].spec.options",
     "must be a mapping of the judge's options, got list"),
    ({"backend": {**GOOD_SPEC["backend"], "kind": "nope"}}, "judges[0].spec.backend", "unknown judge backend 'nope'"),
    ({"backend": {"kind": "openai"}}, "judges[0].spec.backend", "needs 'model'"),
])
def test_a_hand_edited_calibration_names_the_file_and_field(tmp_path: Path, change: dict[str, Any], field: str,
                                                            words: str) -> None:
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "p1", "instruction": "q", "response_a": "a", "response_b": "b"}])
    cal = _cal(tmp_path / "cal.json", {**GOOD_SPEC, **change})
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(cal), "-o", str(tmp_path / "d.jsonl"), "--rest",
                              str(tmp_path / "r.jsonl")])
    assert res.exit_code == 1
    line = one_error(res.output)
    assert f"error: {cal}, field '{field}':" in line and words in line
    assert not (tmp_path / "d.jsonl").exists()


# ------------------------------------------------------------------------------------------------
# names printed through rich: no emoji (``judge:x:`` stays as written), no markup


def test_the_console_shows_emoji_codes_as_written() -> None:
    from evalign.cli.common import SafeConsole

    con = SafeConsole(record=True, width=200)
    con.print("judge:x: decided 3 of 10 and :smile:", highlight=False)
    assert con.export_text().strip() == "judge:x: decided 3 of 10 and :smile:"


def test_names_with_emoji_codes_are_printed_as_written_by_several_commands(tmp_path: Path) -> None:
    # escalate: the judge column named in the summary
    rows = _selective_rows()
    verdicts = _write(tmp_path / "v.jsonl", rows)
    cal = tmp_path / "cal.json"
    res = _selective(verdicts, "--save-calibration", str(cal))
    assert res.exit_code == 0, res.output
    assert "judge:x: with probability" in res.output  # (meta's own lines already plain)
    res = runner.invoke(app, ["escalate", str(cal), str(verdicts), "-o", str(tmp_path / "d.jsonl"), "--rest",
                              str(tmp_path / "r.jsonl")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "judge:x: decided" in res.output and "❌" not in res.output
    # leaderboard: systems named with emoji codes, in its tables and notes
    battles = _write(tmp_path / "b.jsonl", [
        {"id": f"b{i}", "system_a": ":x:", "system_b": "m:smile:[bold]", "verdict": "A" if i % 3 else "B"}
        for i in range(12)])
    res = runner.invoke(app, ["leaderboard", str(battles), "--bootstrap", "20"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert ":x:" in res.output and "m:smile:[bold]" in res.output and "❌" not in res.output and "😄" not in res.output
    # meta: a metric column whose name holds an emoji code, in the trust table
    items = pd.DataFrame({"id": [f"i{k % 10}" for k in range(40)], "system": [f"s{k // 10}" for k in range(40)],
                          "instruction": "q", "response": "r", "human": np.arange(40.0) % 7,
                          "m:x:": np.arange(40.0) % 5})
    path = tmp_path / "items.jsonl"
    items.to_json(path, orient="records", lines=True)
    res = runner.invoke(app, ["meta", str(path), "--human", "human", "-m", "m:x:", "--bootstrap", "20",
                              "--permutations", "20"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "m:x:" in res.output and "❌" not in res.output


# ------------------------------------------------------------------------------------------------
# simulated annotators against a sloppy OpenAI-compatible server


class _Sloppy(http.server.BaseHTTPRequestHandler):
    """Answers the letter of the response ``ALPHA`` (A when it is shown first), with logprobs at the letter;
    ``shape`` picks what the logprobs look like: ``ok``, ``none`` (no logprobs at all), ``null`` / ``text``
    (the letter's logprob null or a text, on the pair whose instruction holds ``BAD``)."""

    shape = "ok"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        query = body["messages"][-1]["content"]  # (the annotator's examples are the turns before)
        first = "A" if query.index("ALPHA") < query.index("BETA") else "B"
        other = "B" if first == "A" else "A"
        letter: dict[str, Any] = {"token": first, "logprob": -0.2, "top_logprobs": [
            {"token": first, "logprob": -0.2}, {"token": other, "logprob": -1.8}]}
        if "BAD" in query and self.shape == "null":
            letter = {"token": first, "logprob": None, "top_logprobs": [{"token": first, "logprob": None}]}
        if "BAD" in query and self.shape == "text":
            letter = {"token": first, "logprob": "-0.2", "top_logprobs": [{"token": first, "logprob": "high"}]}
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": f"[[{first}]]"},
                                  "finish_reason": "stop"}
        if self.shape != "none":
            choice["logprobs"] = {"content": [{"token": "[[", "logprob": -0.01, "top_logprobs": []}, letter,
                                              {"token": "]]", "logprob": -0.01, "top_logprobs": []}]}
        out = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [choice],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 3}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def sloppy() -> Iterator[tuple[str, type[_Sloppy]]]:
    handler = type("Handler", (_Sloppy,), {"shape": "ok"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


def _simulated(tmp_path: Path, url: str) -> Any:
    pairs = _write(tmp_path / "pairs.jsonl", [
        {"id": f"p{i}", "instruction": ("BAD " if i == 1 else "") + f"Say {i}.", "response_a": f"ALPHA {i}",
         "response_b": "BETA"} for i in range(3)])
    fewshot = _write(tmp_path / "fewshot.jsonl", [
        {"annotator": name, "evaluated_samples": [{"instruction": "Name a fruit.", "outputs": ["Apple.", "Car."],
                                                   "preferences": {"human": 1}}]} for name in ("h0", "h1")])
    out = tmp_path / "judged.jsonl"
    res = runner.invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--base-url", url, "--model", "m",
                              "--simulated-annotators", "2", "--fewshot", str(fewshot), "--fewshot-prompt", "evalign",
                              "--no-cache", "--max-retries", "2", "-o", str(out)], env={"COLUMNS": "200"})
    return res, out


def test_simulated_annotators_say_once_that_the_server_gave_no_logprobs(tmp_path: Path, sloppy: Any) -> None:
    url, handler = sloppy
    handler.shape = "none"
    res, out = _simulated(tmp_path, url)
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert flat.count("no answer had logprobs at the verdict letter: the server returned none") == 1
    table = pd.read_json(out, lines=True)
    assert table["simulated_annotators"].tolist() == ["A", "A", "A"]
    assert table["simulated_annotators.confidence"].isna().all()
    summary = json.loads(Path(f"{out}.summary.json").read_text(encoding="utf-8"))
    assert len(summary["notes"]) == 1 and "the server returned none" in summary["notes"][0]
    handler.shape = "ok"  # with logprobs: nothing to say
    res, out = _simulated(tmp_path, url)
    assert res.exit_code == 0 and "logprobs at the verdict letter" not in res.output
    assert pd.read_json(out, lines=True)["simulated_annotators.confidence"].notna().all()


@pytest.mark.parametrize(("shape", "words"), [
    ("null", "malformed logprobs: token 1 ('A') has logprob null, not a number"),
    ("text", "malformed logprobs: token 1 ('A') has logprob \"-0.2\", not a number"),
])
def test_a_sloppy_logprob_leaves_its_call_unscored_and_the_run_goes_on(tmp_path: Path, sloppy: Any, shape: str,
                                                                       words: str) -> None:
    url, handler = sloppy
    handler.shape = shape
    res, out = _simulated(tmp_path, url)
    assert res.exit_code == 0, res.output
    assert "unexpected" not in res.output
    table = pd.read_json(out, lines=True).set_index("id")
    assert table.loc["p0", "simulated_annotators"] == "A" and table.loc["p2", "simulated_annotators"] == "A"
    sure = math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8))  # each call's P(ALPHA better), both orders
    assert table.loc["p0", "simulated_annotators.confidence"] == pytest.approx(sure)
    assert table.loc["p0", "simulated_annotators.p_calls"] == 4
    assert table.loc["p1", "simulated_annotators.status"] == "unscored"
    # the first failed call is recorded: the order shown first or the swapped one (calls run concurrently)
    error = str(table.loc["p1", "simulated_annotators.error"])
    assert words in error or words.replace("('A')", "('B')") in error, error


# ------------------------------------------------------------------------------------------------
# annotate: --port and --per-item out of range are usage errors naming the option


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "70000"], "error: --port must be an integer in [1, 65535], got 70000"),
    (["--port", "-1"], "error: --port must be an integer in [1, 65535], got -1"),
    (["--per-item", "0"], "error: --per-item must be an integer >= 1, got 0"),
])
def test_annotate_port_and_per_item(tmp_path: Path, args: list[str], message: str) -> None:
    items = _write(tmp_path / "pairs.jsonl", [{"id": "p1", "instruction": "q", "response_a": "a", "response_b": "b"}])
    res = runner.invoke(app, ["annotate", str(items), "--db", str(tmp_path / "l.sqlite"), *args])
    assert res.exit_code == 2 and message in one_error(res.output)
    assert not (tmp_path / "l.sqlite").exists()


# ------------------------------------------------------------------------------------------------
# judge-data: --mix nan / inf refused as -1 is; the embedding model's hint names judge-data's option


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_judge_data_mix_must_be_finite(tmp_path: Path, value: str) -> None:
    pairs = _write(tmp_path / "pairs.jsonl", [{"instruction": "q", "response_a": "a", "response_b": "b", "pref_1": 1}])
    res = runner.invoke(app, ["judge-data", "contrastive", "--pairs", str(pairs), "--mix", value, "-o",
                              str(tmp_path / "out")])
    assert res.exit_code == 2
    assert f"error: --mix must be a finite number >= 0, got {float(value)!r}" in one_error(res.output)
    assert not (tmp_path / "out").exists()


def test_judge_data_missing_embedding_model_names_its_own_option(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "instruction": f"Write a sentence about topic number {i}.", "response_a": "A fine answer.",
             "response_b": "Bad.", "pref_1": 1} for i in range(6)]
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    res = runner.invoke(app, ["judge-data", "contrastive", "--pairs", str(pairs), "--exclude", "none",
                              "--embedding-model", str(tmp_path / "no-such-model"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 1
    line = one_error(res.output)
    assert "no-such-model" in line and "--embedding-model minilm" in line and "semscore" not in line


# ------------------------------------------------------------------------------------------------
# meta --alt-test --min-items: as alt-test's


def _pilot(tmp_path: Path, n: int = 12) -> Path:
    rng = np.random.default_rng(2)
    rows = []
    for i in range(n):
        truth = float(rng.choice([1.0, -1.0]))
        rows.append({"id": f"p{i}", "instruction": f"q{i}", "response_a": "a", "response_b": "b",
                     **{f"pref_{k}": truth if rng.uniform() < 0.8 else -truth for k in range(3)},
                     "judge:x": "A" if truth > 0 else "B"})
    return _write(tmp_path / "pilot.jsonl", rows)


def test_meta_alt_test_min_items(tmp_path: Path) -> None:
    pilot = _pilot(tmp_path)
    base = ["meta", str(pilot), "--pref", "pref_0,pref_1,pref_2", "-m", "judge:x", "--alt-test", "--bootstrap", "20",
            "--permutations", "20", "--json"]
    res = runner.invoke(app, base)
    assert res.exit_code == 0, res.output
    (before,) = json.loads(res.stdout)["alt_test"]["results"]
    assert before["winning_rate"] is None and len(before["dropped_annotators"]) == 3  # 12 items < 30: none tested
    res = runner.invoke(app, [*base, "--min-items", "10"])
    assert res.exit_code == 0, res.output
    alt = json.loads(res.stdout)["alt_test"]
    (after,) = alt["results"]
    assert alt["min_items"] == 10 and after["judge"] == "judge:x" and after["winning_rate"] == 1.0
    assert [a["n_items"] for a in after["annotators"]] == [12, 12, 12]
    res = runner.invoke(app, [*base, "--min-items", "1"])
    assert res.exit_code == 2 and "error: --min-items must be an integer >= 2, got 1" in one_error(res.output)
    res = runner.invoke(app, ["meta", str(pilot), "--pref", "pref_0,pref_1,pref_2", "-m", "judge:x", "--min-items",
                              "10"])
    assert res.exit_code == 1 and "error: --min-items goes with --alt-test" in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# one table of option rules: a value one command refuses, every command that takes the option refuses
# in the same words (exit 2, named as the option)


def _commands(tmp: Path) -> dict[str, list[str]]:
    """Each command that takes a ruled option, as far as its options are checked (nothing is read before)."""
    pairs = str(tmp / "pairs.jsonl")
    out = ["-o", str(tmp / "d.jsonl"), "--rest", str(tmp / "r.jsonl")]
    return {
        "annotate": ["annotate", pairs, "--db", str(tmp / "l.sqlite")],
        "meta": ["meta", pairs, "--pref", "pref_1", "-m", "judge:x"],
        "meta --selective": ["meta", pairs, "--pref", "pref_1", "-m", "judge:x", "--selective"],
        "meta --published": ["meta", "--published", "--dataset", "pandalm"],
        "report": ["report", pairs, "--pref", "pref_1", "-m", "judge:x", "-o", str(tmp / "rep")],
        "report --selective": ["report", pairs, "--pref", "pref_1", "-m", "judge:x", "--selective", "-o",
                               str(tmp / "rep")],
        "leaderboard": ["leaderboard", pairs],
        "demo": ["demo", "-o", str(tmp / "demo")],
        "probe": ["probe", pairs, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
        "escalate": ["escalate", str(tmp / "cal.json"), pairs, *out],
        "judge --cascade": ["judge", pairs, "--cascade", str(tmp / "cal.json"), *out],
        "judge-data absolute": ["judge-data", "absolute", "-o", str(tmp / "jd")],
        "judge-data preference": ["judge-data", "preference", "--pairs", pairs, "-o", str(tmp / "jd")],
        "judge-data contrastive": ["judge-data", "contrastive", "--pairs", pairs, "-o", str(tmp / "jd")],
        "score --engine ray": ["score", pairs, "-m", "rouge_l", "--engine", "ray", "--out-dir", str(tmp / "sc")],
    }


#: option -> (bad values, the commands that take it)
SHARED_OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "port": (("70000", "-1"), ("annotate",)),
    "per_item": (("0",), ("annotate",)),
    "min_seconds": (("-1", "nan", "inf"), ("annotate",)),
    "gold_rate": (("0", "1.5", "nan"), ("annotate",)),
    "bootstrap": (("0",), ("meta", "report", "demo")),
    "permutations": (("0",), ("meta",)),
    "min_group_size": (("-3",), ("meta",)),
    "workers": (("-1",), ("meta", "report")),
    "shard_rows": (("0",), ("score --engine ray",)),
    "gpus_per_actor": (("nan", "inf", "-1"), ("score --engine ray",)),
    "seed": (("-1",), ("meta", "report", "leaderboard", "demo", "escalate", "judge --cascade", "judge-data preference")),
    "top": (("0",), ("meta --published",)),
    "confidence": (("1.5", "nan", "inf"), ("meta", "report", "probe")),
    "alpha": (("0", "nan"), ("meta", "leaderboard")),
    "risk": (("nan", "1.5"), ("meta --selective", "report --selective")),
    "delta": (("-1", "inf"), ("meta --selective", "report --selective")),
    "holdout": (("inf", "0"), ("meta --selective", "report --selective")),
    "audit": (("1.5", "nan"), ("escalate", "judge --cascade")),
    "held_out": (("nan", "2"), ("judge-data absolute", "judge-data preference", "judge-data contrastive")),
    "mix": (("nan", "inf", "-1"), ("judge-data contrastive",)),
    "near_duplicate": (("nan", "101"), ("judge-data preference", "judge-data contrastive")),
    "embedding_duplicate": (("inf", "2"), ("judge-data contrastive",)),
}


@pytest.mark.parametrize("key", sorted(SHARED_OPTIONS))
def test_every_command_refuses_an_option_value_in_the_same_words(tmp_path: Path, key: str) -> None:
    from evalign.judges.option_rules import OPTION_RULES, option_problem

    _write(tmp_path / "pairs.jsonl", [{"id": "p1", "instruction": "q", "response_a": "a", "response_b": "b",
                                       "pref_1": 1, "judge:x": "A", "system_a": "x", "system_b": "y",
                                       "verdict": "A"}])
    assert set(SHARED_OPTIONS) == set(OPTION_RULES)  # every rule is tried on every command that takes it
    values, names = SHARED_OPTIONS[key]
    commands = _commands(tmp_path)
    option = f"--{key.replace('_', '-')}"
    for value in values:
        parsed = float(value) if "." in value or value in ("nan", "inf") or key in (
            "confidence", "alpha", "risk", "delta", "holdout", "audit", "held_out", "mix", "near_duplicate",
            "embedding_duplicate", "gpus_per_actor", "min_seconds", "gold_rate") else int(value)
        want = f"error: {option} {option_problem(key, parsed)}"
        for name in names:
            res = runner.invoke(app, [*commands[name], option, value])
            assert res.exit_code == 2, (name, value, res.output)
            assert want in one_error(res.output), (name, value)
    assert not any((tmp_path / p).exists() for p in ("l.sqlite", "jd", "sc", "rep", "demo"))


def test_score_workers_below_one_is_one_error_line(tmp_path: Path) -> None:
    items = _write(tmp_path / "items.jsonl", [{"id": "i1", "system": "s", "response": "a", "reference": "a"}])
    res = runner.invoke(app, ["score", str(items), "-m", "rouge_l", "--engine", "ray", "--workers", "0", "--out-dir",
                              str(tmp_path / "sc")])
    assert res.exit_code == 2
    assert "error: --workers must be an integer >= 1 (CPUs Ray may use), got 0" in one_error(res.output)
    assert not (tmp_path / "sc").exists()


@pytest.mark.parametrize(("args", "option", "what"), [
    (["annotate", "pairs.jsonl", "--db", "l.sqlite", "--port", "abc"], "--port", "a valid integer"),
    (["meta", "pairs.jsonl", "--pref", "pref_1", "-m", "judge:x", "--bootstrap", "lots"], "--bootstrap",
     "a valid integer"),
    (["judge-data", "contrastive", "--pairs", "pairs.jsonl", "--mix", "high", "-o", "jd"], "--mix", "a valid number"),
    (["leaderboard", "pairs.jsonl", "--alpha", "five percent"], "--alpha", "a valid number"),
])
def test_a_text_where_a_number_goes_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       args: list[str], option: str, what: str) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    line = one_error(res.output)
    assert line.startswith(f"error: Invalid value for '{option}': Input should be {what}"), line
    assert "╭" not in res.output
