"""Reliability, round 5 (issue 39), part d: the same kinds of misuse tried again on other commands
(a separated style fit called converged, option errors named as fields, a folder given as a file,
a config file's two option mappings mixed up, files that are not UTF-8, SIGTERM as the command
exits). Each asserts the one line a user now gets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import evalign
from evalign.cli import app
from evalign.interrupt import TERM_EXIT_CODE, TERM_LINE

runner = CliRunner()
SRC = str(Path(evalign.__file__).parents[1])
DATA = Path(os.environ.get("EVALIGN_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
LATIN1 = "café".encode("latin-1")  # b'caf\xe9': not UTF-8


def one_error(text: str) -> str:
    """The one ``error:`` line of an output (asserted: exactly one, no traceback, no "this is a bug")."""
    flat = " ".join(text.split())
    assert flat.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in flat, text
    return flat


def _write(path: Path, rows: list[dict]) -> Path:  # type: ignore[type-arg]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------
# the style fit on battles one system always wins has no finite optimum: it says so (it was reported
# converged, with zero-width intervals)


def test_a_separated_style_fit_is_not_called_converged(tmp_path: Path) -> None:
    from evalign.rank.style import fit_logistic

    X = np.ones((10, 1))
    _, _, converged = fit_logistic(X, np.ones(10))
    assert converged is False
    _, _, converged = fit_logistic(X, np.array([1.0] * 7 + [0.0] * 3))  # a finite optimum: log(7/3)
    assert converged is True
    rows = [{"id": f"b{i}", "system_a": "x", "system_b": "y", "verdict": "A", "response_a": "a " * (i + 1),
             "response_b": "b"} for i in range(10)]
    path = _write(tmp_path / "b.jsonl", rows)
    res = runner.invoke(app, ["leaderboard", str(path), "--style-control", "--bootstrap", "0", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["style_control"]["converged"] is False
    res = runner.invoke(app, ["leaderboard", str(path), "--style-control", "--bootstrap", "0"], env={"COLUMNS": "200"})
    assert "note: the style fit did not converge" in " ".join(res.output.split())


# ------------------------------------------------------------------------------------------------
# alt-test names a bad option value as the option (exit 2), as every other command does


@pytest.mark.parametrize(("args", "message"), [
    (["--epsilon", "nan"], "error: --epsilon must be a number in [0, 1), got nan"),
    (["--epsilon", "inf"], "error: --epsilon must be a number in [0, 1), got inf"),
    (["--q", "2"], "error: --q must be a number in (0, 1), got 2.0"),
    (["--min-items", "1"], "error: --min-items must be an integer >= 2, got 1"),
    (["--scoring", "foo"], "error: --scoring: unknown scoring function 'foo' (known: auto, accuracy, neg_mae, neg_rmse)"),
])
def test_alt_test_option_errors_name_the_option(args: list[str], message: str) -> None:
    folder = DATA / "alttest" / "mtbench"
    res = runner.invoke(app, ["alt-test", str(folder / "human_annotations.json"), str(folder / "llm_annotations.json"),
                              *args])
    assert res.exit_code == 2 and message in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# a folder where a file is expected


def test_a_price_or_calibration_file_that_is_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))
    from test_usage import judged_pairs

    scored = tmp_path / "judged.jsonl"
    judged_pairs().to_json(scored, orient="records", lines=True)
    base = ["meta", str(scored), "--pref", "pref_1", "-m", "J", "--bootstrap", "20", "--permutations", "20"]
    res = runner.invoke(app, [*base, "--prices", str(tmp_path)])
    assert res.exit_code == 1 and f"error: {tmp_path}: is a folder, not a price file" in one_error(res.output)
    monkeypatch.setenv("EVALIGN_PRICES", str(tmp_path))
    res = runner.invoke(app, base)
    assert res.exit_code == 1
    assert f"error: {tmp_path}: is a folder, not a price file (from $EVALIGN_PRICES)" in one_error(res.output)
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}])
    res = runner.invoke(app, ["escalate", str(tmp_path), str(pairs), "-o", str(tmp_path / "d.jsonl"), "--rest",
                              str(tmp_path / "r.jsonl")])
    assert res.exit_code == 1 and f"error: {tmp_path}: is a folder, not a calibration file" in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# a bench config's judge with a backend option under `options` (or a decoding one under
# `backend_options`) was told "unknown judge option 'timeout' (did you mean 'timeout'?)"


@pytest.mark.parametrize(("entry", "message"), [
    ("options: {timeout: 5}", "judge x: timeout is a backend option: set it under backend_options, not options"),
    ("backend_options: {temperature: 1}",
     "judge x: temperature is a decoding or judge option: set it under options, not backend_options"),
    ("backend_options: {timeout: .nan}", "judge x: timeout must be > 0 seconds, got nan"),
])
def test_bench_config_options_in_the_wrong_mapping(tmp_path: Path, entry: str, message: str) -> None:
    cfg = tmp_path / "bench.yaml"
    cfg.write_text(f"judges:\n  - {{name: x, backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1', {entry}}}\n",
                   encoding="utf-8")
    res = runner.invoke(app, ["bench", "--config", str(cfg)])
    assert res.exit_code == 1
    assert f"error: {cfg}, line 2, field 'judges': {message}" in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# files that are not UTF-8: a template or rubric, a grammar, a calibration file, a few-shot file


def test_files_that_are_not_utf8_name_the_file(tmp_path: Path) -> None:
    items = _write(tmp_path / "items.jsonl", [{"id": "1", "system": "s", "instruction": "q", "response": "r"}])
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}])
    judge = ["judge", str(items), "--mode", "absolute", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
             "--max-retries", "0", "-o", str(tmp_path / "out.jsonl")]
    bad = tmp_path / "t.yaml"
    bad.write_bytes(b"criteria: " + LATIN1 + b"\n")
    for option in ("--template", "--rubric"):
        res = runner.invoke(app, [*judge, option, str(bad)])
        assert res.exit_code == 1
        assert (f"error: {bad}: not UTF-8 text (invalid continuation byte at byte 13); save the file as UTF-8"
                in one_error(res.output))
    grammar = tmp_path / "g.gbnf"
    grammar.write_bytes(b'root ::= "' + LATIN1 + b'"')
    res = runner.invoke(app, [*judge, "--grammar", str(grammar)])
    assert res.exit_code == 1
    assert (f"error: {grammar}: not UTF-8 text (invalid continuation byte at byte 13); save the grammar as UTF-8"
            in one_error(res.output))
    cal = tmp_path / "cal.json"
    cal.write_bytes(b'{"kind": "' + LATIN1 + b'"}')
    for args in (["escalate", str(cal), str(pairs)], ["judge", str(pairs), "--cascade", str(cal)]):
        res = runner.invoke(app, [*args, "-o", str(tmp_path / "d.jsonl"), "--rest", str(tmp_path / "r.jsonl")])
        assert res.exit_code == 1
        assert f"error: {cal}: not UTF-8 text (invalid continuation byte at byte 13)" in one_error(res.output)
    for name in ("fs.jsonl", "fs.json"):
        fewshot = tmp_path / name
        fewshot.write_bytes(b'[{"x": "' + LATIN1 + b'"}]')
        res = runner.invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--base-url", "http://127.0.0.1:9/v1",
                                  "--model", "m", "--simulated-annotators", "2", "--fewshot", str(fewshot)])
        assert res.exit_code == 1
        assert (f"error: {fewshot}, line 1 column 12: not valid UTF-8 (byte 0xe9); evalign reads UTF-8 text only"
                in one_error(res.output))


# ------------------------------------------------------------------------------------------------
# SIGTERM as the command exits (its status known, Python's teardown running the thread pools' and
# atexit's hooks): one line and 143, never a traceback of an exception raised inside a hook


@pytest.mark.parametrize("hook", ["threading._register_atexit", "atexit.register"])
def test_sigterm_in_an_exit_hook_prints_one_line_and_exits_143(tmp_path: Path, hook: str) -> None:
    script = tmp_path / "evalign"  # the console script's name: this process is the command
    script.write_text(
        "import atexit, os, signal, sys, threading\n"
        "from evalign.cli import main\n"
        "sys.argv = ['evalign', '--version']\n"
        f"{hook}(lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
        "main()\n", encoding="utf-8")
    res = subprocess.run([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": SRC}, capture_output=True,
                         text=True, timeout=60)
    assert (res.returncode, res.stderr.splitlines()) == (TERM_EXIT_CODE, [TERM_LINE]), res.stderr
    assert res.stdout.startswith("evalign ")


# ------------------------------------------------------------------------------------------------
# verify-judge checks its options as `judge` and `bench` do, before any model is loaded (a NaN
# temperature was named after the template; --n-resamples 0 reached the model load)


@pytest.mark.parametrize(("args", "message"), [
    (["--temperature", "nan"], "error: --temperature must be a number in [0, 2], got nan"),
    (["--max-tokens", "0"], "error: --max-tokens must be an integer >= 1, got 0"),
    (["--n-resamples", "0"], "error: --n-resamples must be an integer >= 1, got 0"),
    (["--limit", "0"], "error: --limit must be an integer >= 1, got 0"),
])
def test_verify_judge_checks_its_options_first(tmp_path: Path, args: list[str], message: str) -> None:
    missing = tmp_path / "no-model"
    res = runner.invoke(app, ["verify-judge", "--dataset", "pandalm", "--model", str(missing), *args])
    assert res.exit_code == 2 and message in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# synth checks its options as `judge` and `bench` do, before any call ("unexpected ValueError (this is
# a bug)" for --concurrency 0, --top-p 5, --max-tokens 0; a NaN temperature refused by the HTTP client)


@pytest.mark.parametrize(("args", "message"), [
    (["--concurrency", "0"], "error: --concurrency must be an integer >= 1, got 0"),
    (["--max-retries", "-1"], "error: --max-retries must be an integer >= 0, got -1"),
    (["--timeout", "nan"], "error: --timeout must be > 0 seconds, got nan"),
    (["--top-p", "5"], "error: --top-p must be a number in (0, 1], got 5.0"),
    (["--max-tokens", "0"], "error: --max-tokens must be an integer >= 1, got 0"),
    (["--temperature", "nan"], "error: --temperature must be a number in [0, 2], got nan"),
    (["--rounds", "-1"], "error: --rounds must be >= 0, got -1"),
    (["--rubric-threshold", "nan"], "error: --rubric-threshold must be in [0, 1], got nan"),
    (["--max-pairs", "0"], "error: --max-pairs must be >= 1, got 0"),
])
def test_synth_checks_its_options_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                                        message: str) -> None:
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    out = tmp_path / "syn.jsonl"
    res = runner.invoke(app, ["synth", "-o", str(out), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                              "--max-retries", "0", *args])
    assert res.exit_code == 2 and message in one_error(res.output)
    assert not out.exists() and not Path(f"{out}.summary.json").exists()


# ------------------------------------------------------------------------------------------------
# train-judge: a NaN learning rate or a negative warm-up ended in "unexpected ValueError (this is a
# bug)" after the data was read; every bad setting is now named as its option (exit 2), before training


@pytest.mark.parametrize(("args", "message"), [
    (["--lr", "nan"], "error: --learning-rate must be a finite number > 0, got nan"),
    (["--warmup-steps", "-1"], "error: --warmup-steps must be >= 0, got -1"),
    (["--weight-decay", "nan"], "error: --weight-decay must be a finite number >= 0, got nan"),
    (["--epochs", "inf"], "error: --epochs must be a finite number > 0, got inf"),
    (["--grad-accum", "0"], "error: --grad-accum must be >= 1, got 0"),
    (["--max-steps", "0"], "error: --max-steps must be >= 1, got 0"),
])
def test_train_judge_names_a_bad_setting_as_its_option(tmp_path: Path, args: list[str], message: str) -> None:
    data = _write(tmp_path / "train.jsonl", [{"prompt": f"q{i}", "chosen": "a full answer", "rejected": "no"}
                                             for i in range(4)])
    model = tmp_path / "base"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    out = tmp_path / "rm"
    res = runner.invoke(app, ["train-judge", str(data), "--kind", "reward", "--base-model", str(model), "-o", str(out),
                              "--device", "cpu", *args])
    assert res.exit_code == 2 and message in one_error(res.output)
    assert not out.exists()


# ------------------------------------------------------------------------------------------------
# escalate --audit out of range exited 1 where every other command exits 2 for a bad option value


@pytest.mark.parametrize("audit", ["nan", "1", "-0.1"])
def test_escalate_audit_out_of_range_is_a_usage_error(tmp_path: Path, audit: str) -> None:
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}])
    out, rest = tmp_path / "d.jsonl", tmp_path / "r.jsonl"
    res = runner.invoke(app, ["escalate", str(tmp_path / "cal.json"), str(pairs), "-o", str(out), "--rest", str(rest),
                              "--audit", audit])
    assert res.exit_code == 2 and f"error: --audit must be a number in [0, 1), got {float(audit)}" in one_error(res.output)
    assert not out.exists() and not rest.exists()


def test_judge_cascade_audit_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    pairs = _write(tmp_path / "pairs.jsonl", [{"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}])
    out = tmp_path / "d.jsonl"
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(tmp_path / "cal.json"), "-o", str(out), "--rest",
                              str(tmp_path / "r.jsonl"), "--audit", "1.5"])
    assert res.exit_code == 2 and "error: --audit must be a number in [0, 1), got 1.5" in one_error(res.output)
    assert not out.exists()


# ------------------------------------------------------------------------------------------------
# judge, probe and synth took any --api-key-env (the bench refused one that is not a variable's name):
# a key given there by mistake is now refused by every command, and never repeated


@pytest.mark.parametrize("verb", ["judge", "probe", "synth"])
def test_an_api_key_given_as_the_variable_name_is_refused_and_not_shown(tmp_path: Path, verb: str) -> None:
    out = tmp_path / "out.jsonl"
    row = ({"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"} if verb == "probe" else
           {"id": "1", "system": "s", "instruction": "q", "response": "a"})
    data = _write(tmp_path / "in.jsonl", [row])
    first = {"synth": ["synth", "-o", str(out)], "judge": ["judge", str(data), "--mode", "absolute", "-o", str(out)],
             "probe": ["probe", str(data), "-o", str(tmp_path / "card.json")]}[verb]
    backend = [] if verb == "synth" else ["--backend", "openai"]

    def run(env: str):
        return runner.invoke(app, [*first, *backend, "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                                   "--max-retries", "0", "--api-key-env", env])

    secret = "sk-PlantedKey123"
    res = run(secret)
    assert res.exit_code == 2, res.output
    assert ("error: --api-key-env must be the NAME of an environment variable (letters, digits, _), never the key "
            "itself") in one_error(res.output)
    assert secret not in res.output and not out.exists()
    res = run("MY_KEY_1")  # a variable's name passes the check (the call then fails: no server)
    assert res.exit_code == 1 and "--api-key-env" not in res.output and "cannot connect" in res.output
