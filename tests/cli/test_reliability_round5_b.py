"""Reliability, round 5 (issue 39), the weak ones: internal messages for user errors, options that
differ between commands, and silent cases. One test (or a few) per case of the issue, in its order;
each asserts the one-line message a user now gets (or the note that was missing)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from scripted import AlwaysFirst, registered

from evalign.cli import app
from evalign.datasets import load_dataset
from evalign.datasets.base import bundled_path
from evalign.errors import EvalignError, InputError
from evalign.judges.perturb import load_probe

runner = CliRunner()
BENCH = ["bench", "--sets", "hhh", "--per-set", "6", "--resamples", "10", "--published", "none"]
PROBES = Path(__file__).resolve().parents[2] / "src" / "evalign" / "judges" / "probes"


@pytest.fixture(autouse=True, scope="module")
def scripted_backends() -> Iterator[None]:
    """The bench tests' scripted judges, registered while these tests run."""
    with registered():
        yield


def one_error(text: str) -> str:
    """The one ``error:`` line of an output (asserted: exactly one, no traceback, no "this is a bug")."""
    flat = " ".join(text.split())
    assert flat.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in flat, text
    return flat


# ------------------------------------------------------------------------------------------------
# internal messages for user errors


@pytest.mark.parametrize(("judge", "message"), [
    ("x=openai:m", "error: judge x: the openai backend needs its server's URL: x=openai:m@http://HOST:PORT/v1"),
    ("x=openai:m@ftp://host/v1", "error: judge x: the server's URL must be http:// or https:// (e.g. "
                                 "openai:m@http://localhost:8000/v1), got 'ftp://host/v1'"),
    ("x=openai:m@http://127.0.0.1:9/v1,concurrency=0", "error: judge x: concurrency must be an integer >= 1, got 0"),
    ("x=openai:m@http://127.0.0.1:9/v1,timeout=-1", "error: judge x: timeout must be > 0 seconds, got -1"),
])
def test_bench_judge_spec_errors_are_usage_errors(judge: str, message: str) -> None:
    res = runner.invoke(app, [*BENCH, "--judge", judge])
    assert res.exit_code == 2 and message in one_error(res.output)


@pytest.mark.parametrize(("text", "message"), [
    ("panels: {p: 3}", "line 3, field 'panels.p': must be a list of judge names (or {members: [...], rule, tie, min}), got 3"),
    ("templates: {hhh: 3}", "line 3, field 'templates.hhh': must be a template name or file, got 3"),
    ("decoding: {temperature: hot}", "line 3, field 'decoding.temperature': must be a number in [0, 2], got 'hot'"),
    ("sets: [{a: 1}]", "line 3, field 'sets': must be a list of set or category keys, got [{'a': 1}]"),
    ("resamples: 0", "line 3, field 'resamples': must be an integer >= 1, got 0"),
    ("per_set: 0", "line 3, field 'per_set': must be an integer >= 1, got 0"),
    ("judges:\n  - {name: y, backend: scripted-first, model: m, options: [1]}",
     "line 3, field 'options': must be a mapping of decoding settings, got [1]"),
    ("judges:\n  - {name: y, backend: openai, model: m, base_url: 3}",
     "line 3, field 'base_url': must be a URL or a list of URLs, got 3"),
])
def test_bench_config_wrong_types_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "bench.yaml"
    judge = "judges:\n  - {name: x, backend: scripted-first, model: m}\n"
    cfg.write_text(judge + (text.removeprefix("judges:\n") if text.startswith("judges:") else text) + "\n",
                   encoding="utf-8")
    AlwaysFirst.calls.clear()
    res = runner.invoke(app, ["bench", "--config", str(cfg), "--json"])
    assert res.exit_code == 1 and f"error: {cfg}, {message}" in one_error(res.output)
    assert AlwaysFirst.calls == []


def _probe_file(tmp_path: Path, name: str, **changes: object) -> Path:
    data = {**yaml.safe_load((PROBES / "verbosity.yaml").read_text(encoding="utf-8")), **changes}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("changes", "message"), [
    ({"version": "abc"}, "field 'version': must be an integer >= 1, got 'abc'"),
    ({"texts": ["a {} b"]}, "field 'texts': text uses {}: a placeholder names one of fields"),
    ({"texts": ["a { b"]}, "field 'texts': expected '}' before end of string in 'a { b'"),
])
def test_bad_probe_files_name_file_and_field(tmp_path: Path, changes: dict, message: str) -> None:
    path = _probe_file(tmp_path, "p", **changes)
    with pytest.raises(InputError) as info:
        load_probe(path)
    assert str(info.value).startswith(f"{path}, {message}")
    assert load_probe(_probe_file(tmp_path, "ok", texts=["a {{ b"])).texts == ("a {{ b",)


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_probe_and_price_files_not_utf8(tmp_path: Path, encoding: str) -> None:
    text = yaml.safe_dump({**yaml.safe_load((PROBES / "verbosity.yaml").read_text(encoding="utf-8")),
                           "description": "café"}, allow_unicode=True)
    probe = tmp_path / "probe.yaml"
    probe.write_bytes(text.encode(encoding))
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte \d+\); save the probe file as UTF-8") as info:
        load_probe(probe)
    assert info.value.file == str(probe)
    prices = tmp_path / "prices.yaml"
    prices.write_bytes('modèle: "1/2"\n'.encode(encoding))
    scored = _judged(tmp_path)
    res = runner.invoke(app, ["meta", str(scored), "--pref", "pref_1", "-m", "J", "--bootstrap", "20",
                              "--permutations", "20", "--prices", str(prices)])
    assert res.exit_code == 1
    assert f"error: {prices}: not UTF-8 text" in one_error(res.output)


def test_a_damaged_cache_entry_names_the_cache_and_no_cache_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache.sqlite"
    monkeypatch.setenv("EVALIGN_CACHE", str(cache))
    args = [*BENCH, "--judge", "x=scripted-first:m", "--json"]
    assert runner.invoke(app, args).exit_code == 0
    with sqlite3.connect(cache) as c:
        c.execute("UPDATE entries SET value = ?", (b"\xff not json",))
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    assert (f"error: cache {cache}: a stored judge answer is not readable JSON (UnicodeDecodeError); run with "
            "--no-cache to make the calls anew (their answers replace it)") in one_error(res.output)
    again = runner.invoke(app, [*args, "--no-cache"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["runs"][0]["calls"] == 12
    assert runner.invoke(app, args).exit_code == 0  # the answers made anew replaced the damaged ones
    # a cache file that is not a database: the error advises --no-cache, and --no-cache runs
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database " * 100, encoding="utf-8")
    monkeypatch.setenv("EVALIGN_CACHE", str(bad))
    res = runner.invoke(app, args)
    assert res.exit_code == 1 and "cannot open (file is not a database)" in one_error(res.output)
    res = runner.invoke(app, [*args, "--no-cache"])
    assert res.exit_code == 0, res.output


@pytest.fixture()
def mtbench_dir(tmp_path: Path) -> Path:
    """A writable copy of the Alt-Test MT-Bench folder and FastChat's questions."""
    data = Path(os.environ["EVALIGN_DATA_DIR"])
    if not (data / "alttest" / "mtbench" / "prompts.json").is_file():
        pytest.fail(f"the Alt-Test data is missing: expected {data}/alttest/mtbench/prompts.json")
    root = tmp_path / "data"
    shutil.copytree(data / "alttest" / "mtbench", root / "alttest" / "mtbench")
    shutil.copytree(data / "fastchat_mt_bench" / "mt_bench", root / "fastchat_mt_bench" / "mt_bench")
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return root


def test_truncated_alttest_mtbench_files_name_file_and_line(mtbench_dir: Path) -> None:
    assert len(load_dataset("alttest-mtbench", data_dir=mtbench_dir).pairs) == 120
    prompts = mtbench_dir / "alttest" / "mtbench" / "prompts.json"
    text = prompts.read_text(encoding="utf-8")
    prompts.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(InputError, match="malformed JSON") as info:
        load_dataset("alttest-mtbench", data_dir=mtbench_dir)
    assert info.value.file == str(prompts) and info.value.line == text[: len(text) // 2].count("\n") + 1
    prompts.write_text(text, encoding="utf-8")
    questions = mtbench_dir / "fastchat_mt_bench" / "mt_bench" / "question.jsonl"
    lines = questions.read_text(encoding="utf-8").splitlines(keepends=True)
    questions.write_text("".join(lines[:10]) + lines[10][:40], encoding="utf-8")
    with pytest.raises(InputError, match="malformed JSON") as info:
        load_dataset("alttest-mtbench", data_dir=mtbench_dir)
    assert info.value.file == str(questions) and info.value.line == 11


def test_hanna_gzip_truncated_or_not_gzip(tmp_path: Path) -> None:
    raw = bundled_path("hanna", "hanna_metric_scores_llm.csv.gz").read_bytes()
    cut, plain = tmp_path / "cut.csv.gz", tmp_path / "plain.csv.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    plain.write_bytes(gzip.decompress(raw)[:5000])
    with pytest.raises(InputError, match=r"not a readable gzipped CSV \(cut short\); download the file again") as info:
        load_dataset("hanna", path=cut)
    assert info.value.file == str(cut)
    with pytest.raises(InputError, match=r"not a readable gzipped CSV \(BadGzipFile") as info:
        load_dataset("hanna", path=plain)
    assert info.value.file == str(plain)


# ------------------------------------------------------------------------------------------------
# options that differ between commands


def test_temperature_above_2_refused_by_bench_as_by_judge(tmp_path: Path) -> None:
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m", "--temperature", "5"])
    assert res.exit_code == 2 and "error: --temperature must be a number in [0, 2], got 5.0" in one_error(res.output)
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m,temperature=5"])
    assert res.exit_code == 2 and "error: judge x: temperature must be a number in [0, 2], got 5" in one_error(res.output)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}) + "\n",
                     encoding="utf-8")
    res = runner.invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--backend", "openai", "--model", "m",
                              "--base-url", "http://127.0.0.1:9/v1", "--temperature", "5"])
    assert res.exit_code == 2 and "error: --temperature must be a number in [0, 2], got 5.0" in one_error(res.output)


def test_resamples_0_reported_as_the_option() -> None:
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m", "--resamples", "0"])
    assert res.exit_code == 2 and "error: --resamples must be an integer >= 1, got 0" in one_error(res.output)


def _judged(tmp_path: Path) -> Path:
    """A judged pair table with usage columns (judge J) and a second judge K."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))
    from test_usage import judged_pairs

    path = tmp_path / "judged.jsonl"
    judged_pairs().to_json(path, orient="records", lines=True)
    return path


def test_prices_must_be_finite_and_name_their_judge_and_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scored = _judged(tmp_path)
    base = ["meta", str(scored), "--pref", "pref_1,pref_2,pref_3", "-m", "J", "-m", "K", "--bootstrap", "20",
            "--permutations", "20"]
    res = runner.invoke(app, [*base, "--price", "1e999/1"])
    assert res.exit_code == 2
    assert "error: --price must be finite prices per million tokens, got '1e999/1'" in one_error(res.output)
    book = tmp_path / "prices.yaml"
    book.write_text('judge-2024: "1e999/1"\n', encoding="utf-8")
    res = runner.invoke(app, [*base, "--prices", str(book)])
    assert res.exit_code == 1
    assert f"error: {book}, field 'judge-2024': must be IN/OUT or {{input, output}}, got '1e999/1'" in one_error(res.output)
    res = runner.invoke(app, [*base, "--price", "judge:typo=1/2"])
    assert res.exit_code == 2 and "error: --price: unknown judge column 'judge:typo'; known: J, K" in one_error(res.output)
    res = runner.invoke(app, [*base, "--price", "J=1/2", "--json"])
    rows = {r["metric"]: r for r in json.loads(res.stdout)["trust"][0]["rows"]}
    assert rows["J"]["cost_per_1000"] == pytest.approx(1000 * (36000 * 1 + 4000 * 2) / 1e6 / 40)
    monkeypatch.setenv("EVALIGN_PRICES", str(tmp_path / "nosuch.yaml"))
    res = runner.invoke(app, base)
    assert res.exit_code == 1
    assert f"error: {tmp_path / 'nosuch.yaml'}: no such price file (from $EVALIGN_PRICES)" in one_error(res.output)


@pytest.mark.parametrize(("args", "message"), [
    (["preference", "--per-response"], "error: --per-response applies to the absolute recipe, not to preference"),
    (["preference", "--single-order"], "error: --single-order applies to the pairwise recipe, not to preference"),
    (["absolute", "--single-order"], "error: --single-order applies to the pairwise recipe, not to absolute"),
])
def test_judge_data_refuses_an_option_of_another_recipe(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, ["judge-data", args[0], "-o", str(out), *args[1:]])
    assert res.exit_code == 2 and message in one_error(res.output)
    assert not out.exists()


def test_panel_naming_a_judge_twice_is_refused() -> None:
    AlwaysFirst.calls.clear()
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m", "--panel", "p=x,x"])
    assert res.exit_code == 2
    assert "error: panel p: judge x named twice (a panel counts each judge once)" in one_error(res.output)
    assert AlwaysFirst.calls == []


def test_llama_spec_on_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    f = tmp_path / "model.bin"
    f.write_bytes(b"not a gguf")
    res = runner.invoke(app, [*BENCH, "--judge", f"x=llama:{f}"])
    assert res.exit_code == 1
    assert (f"error: {f}: not a GGUF file (it does not start with GGUF's magic bytes); the llama backend serves a "
            ".gguf file or a package alias") in one_error(res.output)
    res = runner.invoke(app, [*BENCH, "--judge", f"x=llama:{tmp_path / 'missing.gguf'}"])
    assert res.exit_code == 1 and f"error: {tmp_path / 'missing.gguf'}: no such GGUF file" in one_error(res.output)


def test_reward_backend_missing_folder(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    missing = tmp_path / "nosuch"
    res = runner.invoke(app, [*BENCH, "--backend", "reward", "--model", str(missing)])
    assert res.exit_code == 1
    assert (f"error: {missing}: no such model folder (a reward model is a local folder with config.json, weights and "
            "tokenizer files)") in one_error(res.output)
    assert "Repo id" not in res.output


# ------------------------------------------------------------------------------------------------
# silent


def test_per_set_below_the_ranking_floor_and_unconstrained_judges_get_notes() -> None:
    res = runner.invoke(app, [*BENCH[:4], "2", *BENCH[5:], "--judge", "x=scripted-first:m", "--json"])
    assert res.exit_code == 0, res.output
    notes = json.loads(res.stdout)["notes"]
    assert ("hhh: fewer than 5 units (--min-group), too few to rank: their tables are empty; sample more with "
            "--per-set 5 or more, or --full") in notes
    assert "judge x: output not constrained: the scripted-first backend takes no output constraint (hhh)" in notes
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m", "--constrain", "off", "--json"])
    notes = json.loads(res.stdout)["notes"]  # six units: ranked; off: nothing to say (but what cov@0.15 means)
    assert [n for n in notes if not n.startswith("cov@0.15: ")] == [], notes


def test_bench_html_output_checked_before_the_run(tmp_path: Path) -> None:
    AlwaysFirst.calls.clear()
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m", "--html", str(blocker / "p.html")])
    assert res.exit_code == 1
    assert f"error: --html {blocker / 'p.html'}: cannot create the folder {blocker}" in one_error(res.output)
    assert AlwaysFirst.calls == []  # no judge call before the error
    res = runner.invoke(app, [*BENCH, "--judge", "x=scripted-first:m", "--out", str(blocker)])
    assert res.exit_code == 1 and f"error: --out {blocker}: cannot create the folder" in one_error(res.output)
    assert AlwaysFirst.calls == []


def test_alt_test_refuses_an_infinite_label(tmp_path: Path) -> None:
    humans, judges = tmp_path / "humans.json", tmp_path / "judges.json"
    humans.write_text('{"h1": {"a": 1, "b": Infinity, "c": 3}, "h2": {"a": 1, "b": 2, "c": 3}, '
                      '"h3": {"a": 2, "b": 2, "c": 3}}', encoding="utf-8")
    judges.write_text('{"J": {"a": 1, "b": 2, "c": 3}}', encoding="utf-8")
    res = runner.invoke(app, ["alt-test", str(humans), str(judges)])
    assert res.exit_code == 1
    assert f"error: {humans}, field 'h1.b': a numeric label must be finite, got inf (null: no label)" in one_error(res.output)


def _battles(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _battle_rows() -> list[dict]:
    return [{"id": f"b{i}", "system_a": "x" if i % 2 else "y", "system_b": "y" if i % 2 else "x",
             "verdict": "A" if i % 3 else "B", "response_a": "a " * (i % 5 + 1), "response_b": "b b"} for i in range(20)]


def test_style_fit_non_convergence_is_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import evalign.rank.style as style

    path = _battles(tmp_path / "b.jsonl", _battle_rows())
    args = ["leaderboard", str(path), "--style-control", "--bootstrap", "0"]
    res = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "did not converge" not in res.output
    fit = style.fit_logistic
    monkeypatch.setattr(style, "fit_logistic", lambda X, y, **kw: (*fit(X, y, **kw)[:2], False))
    res = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0
    assert ("note: the style fit did not converge (a system or a feature separates the verdicts perfectly, e.g. one "
            "that always wins): its ratings and coefficients are not reliable; add battles") in " ".join(res.output.split())


def test_style_fit_refuses_a_null_response(tmp_path: Path) -> None:
    rows = _battle_rows()
    rows[2]["response_a"] = None
    path = _battles(tmp_path / "b.jsonl", rows)
    res = runner.invoke(app, ["leaderboard", str(path), "--style-control", "--bootstrap", "0"])
    assert res.exit_code == 1
    assert (f"error: {path}, row 3, field 'response_a': 1 decided battle(s) have no response text (null); "
            "--style-control needs both texts of every decided battle") in one_error(res.output)
    rows[2]["verdict"] = "unparseable"  # an undecided battle's text is not used: no error
    res = runner.invoke(app, ["leaderboard", str(_battles(path, rows)), "--style-control", "--bootstrap", "0", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["style_control"]["n_battles"] == 19


def test_a_bad_human_verdict_names_the_file(tmp_path: Path) -> None:
    battles = _battles(tmp_path / "b.jsonl", _battle_rows())
    human = _battles(tmp_path / "human.jsonl", [
        {"id": "b1", "system_a": "x", "system_b": "y", "verdict": "A"},
        {"id": "b2", "system_a": "y", "system_b": "x", "verdict": "A"},
        {"id": "b3", "system_a": "x", "system_b": "y", "verdict": "maybe"}])
    res = runner.invoke(app, ["leaderboard", str(battles), "--human", str(human), "--bootstrap", "0"])
    assert res.exit_code == 1
    assert (f"error: {human}, line 3, field 'verdict': verdict 'maybe' is not one of A, B, tie, unparseable"
            in one_error(res.output))


def test_judge_and_bench_share_the_backend_option_rules() -> None:
    from evalign.bench.judges import parse_judge
    from evalign.judges.option_rules import backend_option_problem

    assert backend_option_problem("concurrency", 0) == "must be an integer >= 1, got 0"
    from evalign.judges.option_rules import option_problem  # the command-line options' table beside it

    assert option_problem("port", 70000) == "must be an integer in [1, 65535], got 70000"
    assert option_problem("mix", float("nan")) == "must be a finite number >= 0, got nan"
    assert option_problem("port", None) is None and option_problem("no_such_option", -1) is None
    with pytest.raises(EvalignError, match="judge x: idle_timeout must be > 0 seconds, got 0"):
        parse_judge("x=openai:m@http://h/v1,idle_timeout=0")
    res = runner.invoke(app, ["judge", "nosuch.jsonl", "--backend", "openai", "--model", "m", "--base-url",
                              "http://127.0.0.1:9/v1", "--concurrency", "0"])
    assert res.exit_code == 2 and "error: --concurrency must be an integer >= 1, got 0" in one_error(res.output)
