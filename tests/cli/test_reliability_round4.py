"""Reliability, round 4 (issue 32): the new surfaces, Ctrl-C at any moment, and a command line that
starts at once. One test (or a few) per case of the issue, in its order; the cases whose own tests
live elsewhere say where."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import evalign
from evalign.cli import VERBS, app
from evalign.interrupt import LINE, is_command_line
from sigint import default_sigint

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def one_error(text: str) -> str:
    """The one ``error:`` line of an output (asserted: exactly one, no traceback), whitespace folded."""
    flat = " ".join(text.split())
    assert flat.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in flat, text
    return flat


# ------------------------------------------------------------------------------------------------
# bad 1: a flag that names a metric, judge, system or label set refuses an unknown name (did you mean)


def _scored(path: Path) -> tuple[Path, Path]:
    """A scored item table (3 systems x 12 items, columns m1 and m2) and its system-level human values."""
    rows = [{"id": f"q{i}", "system": s, "response": "r", "reference": "r", "m1": k + i / 100, "m2": -k + i / 50}
            for i in range(12) for k, s in enumerate("abc")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    human = path.with_suffix(".human.json")
    human.write_text(json.dumps({"a": 1, "b": 2, "c": 3}), encoding="utf-8")
    return path, human


@pytest.mark.parametrize("verb", ["report", "meta"])
@pytest.mark.parametrize(("name", "hint"), [("m11", "m1"), ("m2x", "m2")])
def test_metric_lower_is_better_refuses_an_unknown_column(tmp_path: Path, verb: str, name: str, hint: str) -> None:
    scored, human = _scored(tmp_path / "scored.jsonl")
    out = tmp_path / "r.html"
    args = [verb, str(scored), "--system-human", str(human), "-m", "m1", "-m", "m2", "--metric-lower-is-better",
            name, "--bootstrap", "10", *(["-o", str(out)] if verb == "report" else ["--permutations", "10"])]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert (f"--metric-lower-is-better: unknown metric or judge column '{name}' (did you mean '{hint}'?); "
            "known: m1, m2") in one_error(res.output)
    assert not out.exists()
    ok = runner.invoke(app, [*args[: args.index(name)], "m2", *args[args.index(name) + 1:]])
    assert ok.exit_code == 0, ok.output


def test_api_lower_is_better_refuses_an_unknown_column(tmp_path: Path) -> None:
    import pandas as pd

    scored, _ = _scored(tmp_path / "scored.jsonl")
    df = pd.read_json(scored, lines=True).assign(h=lambda d: d["m1"])
    with pytest.raises(evalign.errors.UsageError, match=r"lower_is_better: unknown metric or judge column 'm11' "
                                                        r"\(did you mean 'm1'\?\)"):
        evalign.meta_evaluate(df, metrics=["m1"], human="h", lower_is_better=["m11"])


def test_meta_refuses_human_beside_system_human(tmp_path: Path) -> None:
    scored, human = _scored(tmp_path / "scored.jsonl")
    res = runner.invoke(app, ["meta", str(scored), "--system-human", str(human), "--human", "nosuch", "-m", "m1"])
    assert res.exit_code == 2 and "give either --human or --system-human, not both" in one_error(res.output)


def test_judge_template_rubric_and_rubric_column_say_did_you_mean(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": 1, "system": "s", "instruction": "q", "response": "r", "reference": "x",
                                 "rubrik": "helpfulness"}) + "\n")
    base = ["judge", str(items), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "-o", str(tmp_path / "o.jsonl")]
    for extra, hint in ((["--template", "prometheus_absolut"], "prometheus_absolute"),
                        (["--rubric", "helpfulnes"], "helpfulness"), (["--rubric-column", "rubric"], "rubrik")):
        res = runner.invoke(app, [*base, *extra])
        assert res.exit_code in (1, 2) and f"(did you mean '{hint}'?)" in one_error(res.output), extra


# ------------------------------------------------------------------------------------------------
# bad 2: Ctrl-C while a command is still starting (importing) gives the one line and exit 130


def console_script(folder: Path) -> Path:
    """The ``evalign`` console script as pip generates it from pyproject's entry point (the installed
    one may point at another checkout): a file named ``evalign`` that imports the entry point."""
    entry = re.search(r'^evalign = "([\w.]+):(\w+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert entry is not None, "no evalign entry point in pyproject.toml"
    module, func = entry.groups()
    path = folder / "evalign"
    path.write_text(
        f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom {module} import {func}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({func}())\n", encoding="utf-8")
    return path


def interrupt_after(cmd: list[str], module: str, cwd: Path) -> tuple[int, list[str], list[str]]:
    """Run ``cmd`` (a Python command line; ``-X importtime`` is added) and send SIGINT as soon as it
    has finished importing ``module``: returns the exit code, the stderr lines that are not import
    times, and the modules it finished importing."""
    env = {**os.environ, "EVALIGN_CACHE": str(cwd / "cache.sqlite"), "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-X", "importtime", *cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("import time:"):
                seen.append(line.rsplit("|", 1)[1].strip())
                if seen[-1] == module:
                    proc.send_signal(signal.SIGINT)
                    break
        _, rest = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert module in seen, f"the command ended before importing {module}"
    lines = rest.splitlines()
    seen += [ln.rsplit("|", 1)[1].strip() for ln in lines if ln.startswith("import time:")]
    return proc.returncode, [ln for ln in lines if not ln.startswith("import time:")], seen


COMMANDS = {  # the three commands: (entry, verb arguments, the file it would write)
    "score -o": ("script", ["score", "--dataset", "self_instruct", "-m", "rouge_l", "-o", "scored.jsonl"],
                 "scored.jsonl"),
    "meta --json": ("-m", ["meta", "--dataset", "self_instruct", "-m", "rouge_l", "--json"], None),
    "datasets export": ("script", ["datasets", "export", "pandalm", "-o", "pairs.jsonl"], "pairs.jsonl"),
}
#: moments: evalign's own package is loaded (evalign.cli is importing: typer, rich), the command
#: line module is loaded (click parses; the verb's module imports), pandas is loaded (the verb runs)
MOMENTS = ["evalign", "evalign.cli", "pandas"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_ctrl_c_at_any_moment_prints_one_line_and_exits_130(tmp_path: Path, name: str) -> None:
    entry, args, written = COMMANDS[name]
    prefix = [str(console_script(tmp_path))] if entry == "script" else ["-m", "evalign"]
    cut_short = []
    for moment in MOMENTS:
        rc, lines, imported = interrupt_after([*prefix, *args], moment, tmp_path)
        assert rc == 130, (name, moment, rc, lines)
        assert lines == [LINE], (name, moment, lines)
        assert written is None or not (tmp_path / written).exists(), (name, moment)
        cut_short.append(VERBS[args[0]][0] not in imported)  # (a failed import is listed too)
    assert cut_short[0], f"{name}: the first interrupt did not land before the verb's module was imported"


@pytest.mark.parametrize(("argv", "orig", "expected"), [
    (["/usr/local/bin/evalign", "score"], ["/usr/bin/python3", "/usr/local/bin/evalign", "score"], True),
    (["C:\\Scripts\\evalign-script.py"], [], True),
    (["evalign.exe"], [], True),
    (["-m", "score"], ["python3", "-m", "evalign", "score"], True),
    (["-m"], ["python3", "-X", "importtime", "-mevalign.cli"], True),
    (["-m"], ["python3", "-m", "pytest"], False),
    (["/home/me/train.py"], ["python3", "/home/me/train.py"], False),
    (["-c"], ["python3", "-c", "import evalign"], False),
    ([], [], False),
])
def test_only_the_command_line_changes_the_sigint_handler(argv: list[str], orig: list[str], expected: bool) -> None:
    assert is_command_line(argv, orig) is expected


def test_importing_evalign_as_a_library_keeps_python_s_handler() -> None:
    code = "import signal, evalign, evalign.cli; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         preexec_fn=default_sigint)
    assert res.stdout.strip() == "True", res.stderr


# ------------------------------------------------------------------------------------------------
# --version


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(console_script(tmp_path)), "--version"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout == f"evalign {evalign.__version__}\n", res.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+", evalign.__version__)
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # one source: pyproject reads evalign's
    assert re.search(r'^dynamic = \["version"\]', project, re.M) and not re.search(r'^version = "', project, re.M)
    assert 'version = { attr = "evalign.__version__" }' in project
    assert runner.invoke(app, ["--version"]).output == f"evalign {evalign.__version__}\n"


# ------------------------------------------------------------------------------------------------
# the suite itself: Ctrl-C tests pass when the suite runs as a background job (SIGINT ignored)


def test_ctrl_c_tests_pass_with_sigint_ignored() -> None:
    """``tests/test_io.py``'s Ctrl-C test run the way a background job runs it (SIGINT inherited as
    SIG_IGN); ``tests/judges/test_resume.py`` resets it for its child the same way (preexec_fn)."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_io.py::test_atomic_write_survives_ctrl_c"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, preexec_fn=ignore_sigint)
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout[-2000:]
    assert "preexec_fn=default_sigint" in (ROOT / "tests" / "judges" / "test_resume.py").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# weak: leaderboard (own tests: tests/rank/test_leaderboard.py, tests/cli/test_leaderboard_cli.py)


def _verdicts(path: Path, n: int = 24, **cols: object) -> Path:
    systems = ["s1", "s2", "s3", "s4"]
    rows = []
    for i in range(n):
        a, b = systems[i % 4], systems[(i + 1 + i // 4) % 4]
        if a == b:
            b = systems[(i + 2) % 4]
        row: dict[str, object] = {"id": f"q{i}", "system_a": a, "system_b": b, "verdict": "AB"[i % 2]}
        for name, make in cols.items():
            row[name] = make(i) if callable(make) else make
        rows.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_panel_of_judges_covering_different_items(tmp_path: Path) -> None:
    path = _verdicts(tmp_path / "v.jsonl", K=lambda i: "A" if i < 12 else None, L=lambda i: None if i < 12 else "B")
    for rule in ("majority", "mean"):
        res = runner.invoke(app, ["leaderboard", str(path), "--panel", "K,L", "--panel-rule", rule, "--bootstrap", "0"])
        assert res.exit_code == 0, res.output
        assert "no row was judged by every member of the panel" in " ".join(res.output.split())
    res = runner.invoke(app, ["leaderboard", str(path), "--verdict", "K", "--bootstrap", "0", "--json"])
    assert res.exit_code == 0, res.output
    systems = json.loads(res.stdout)["systems"]  # ranked from K (12 verdicts), not from the column "verdict"
    assert sum(r["n_wins"] + r["n_losses"] for r in systems) == 2 * 12 and sum(r["n_missing"] for r in systems) == 24


def test_judge_with_only_the_b_first_order_is_ranked_from_it(tmp_path: Path) -> None:
    path = _verdicts(tmp_path / "v.jsonl", J=lambda i: "A", **{"J.ba": lambda i: "A"})
    out = json.loads(runner.invoke(app, ["leaderboard", str(path), "--judge", "J", "--bootstrap", "0",
                                         "--json"]).stdout)
    assert "J.ab has no verdict: only the B-first order (J.ba) was judged, and its battles alone are ranked" in out["notes"]
    assert sum(r["n_unparseable"] for r in out["systems"]) == 0 and sum(r["n_battles"] for r in out["systems"]) == 48


def test_skip_self_gives_the_real_reason(tmp_path: Path) -> None:
    path = _verdicts(tmp_path / "v.jsonl")
    models = [a for s in ("s1", "s2", "s3", "s4") for a in ("--judge-model", s)]
    res = runner.invoke(app, ["leaderboard", str(path), *models, "--skip-self", "--bootstrap", "0"])
    assert res.exit_code == 1
    text = one_error(res.output)
    assert f"{path}: --skip-self leaves nothing to rank: each of the 24 battles includes a judge's own outputs" in text
    res = runner.invoke(app, ["leaderboard", str(path), "--judge-model", "s11", "--skip-self", "--bootstrap", "0"])
    assert res.exit_code == 2
    assert (f"--judge-model 's11' with --skip-self: no system of {path} is that judge (did you mean 's1'?)"
            in one_error(res.output))


def test_self_battle_names_file_and_line(tmp_path: Path) -> None:
    path = _verdicts(tmp_path / "v.jsonl")
    lines = path.read_text().splitlines()
    row = json.loads(lines[4])
    lines[4] = json.dumps({**row, "system_b": row["system_a"]})
    path.write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["leaderboard", str(path), "--bootstrap", "0"])
    assert res.exit_code == 1
    assert f"{path}, line 5, field 'system_b': a system battles itself" in one_error(res.output)


@pytest.mark.parametrize(("option", "value", "hint"), [("--baseline-system", "s11", "s1"), ("--anchor", "s4x", "s4")])
def test_leaderboard_system_options_say_did_you_mean(tmp_path: Path, option: str, value: str, hint: str) -> None:
    res = runner.invoke(app, ["leaderboard", str(_verdicts(tmp_path / "v.jsonl")), option, value, "--bootstrap", "0"])
    assert res.exit_code == 2 and f"(did you mean '{hint}'?)" in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# weak: templates are validated fully when they load, before any call (own tests: tests/judges/test_templates.py)


def _template(path: Path, base: str = "prometheus_relative", **changes: object) -> Path:
    import yaml

    from evalign.judges.prompts import TEMPLATES

    data = yaml.safe_load(Path(TEMPLATES.get(base)).read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


TEMPLATE_CASES = [  # (case, template changes, base, --mode, the error after "error: ")
    ("version-abc", {"version": "abc"}, "prometheus_relative", "pairwise",
     "{t}, field 'version': must be an integer >= 1 (the template's version), got 'abc'"),
    ("max-tokens-negative", {"sampling": {"max_tokens": -3}}, "llmbar_vanilla", "pairwise",
     "{t}, field 'sampling.max_tokens': must be an integer >= 1, got -3"),
    ("temperature-text", {"sampling": {"temperature": "hot"}}, "llmbar_vanilla", "pairwise",
     "{t}, field 'sampling.temperature': must be a number in [0, 2], got 'hot'"),
    ("sampling-typo", {"sampling": {"max_token": 5}}, "llmbar_vanilla", "pairwise",
     "{t}, field 'sampling.max_token': unknown sampling setting (did you mean 'max_tokens'?)"),
    ("placeholder-typo", {"without_reference": "Which is better?\n{instruction}\nA: {response_A}\nB: {respnse_B}"},
     "prometheus_relative", "pairwise",
     "{t}, field 'without_reference': {{respnse_B}} is not a placeholder (did you mean 'response_B'?)"),
    ("absolute-template-pairwise-mode", {}, "prometheus_absolute", "pairwise",  # (issue 48: by its declared mode)
     "template '{t}' declares mode absolute (the prometheus_absolute judge, which judges one response at a time), "
     "but the mode asked for is pairwise (the prometheus_relative judge, which judges pairs): give --mode absolute "
     "with this template, or a template of mode pairwise"),
    ("pairwise-template-without-responses", {"with_reference": None, "without_reference": "Which is better? {instruction}"},
     "prometheus_relative", "pairwise",
     "template 'prometheus_relative' ({t}), field 'without_reference': the relative judge shows {{response_A}} and "
     "{{response_B}} in its prompt, but this prompt has no {{response_A}}"),
]


@pytest.mark.parametrize(("case", "changes", "base", "mode", "message"), TEMPLATE_CASES, ids=[c[0] for c in TEMPLATE_CASES])
def test_template_is_checked_before_any_call(tmp_path: Path, case: str, changes: dict, base: str, mode: str,
                                             message: str) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}) + "\n")
    t = _template(tmp_path / "t.yaml", base, **changes)
    # port 9 (discard) has no server: a call would fail after retries, not with this error
    res = runner.invoke(app, ["judge", str(pairs), "--mode", mode, "--template", str(t), "--base-url",
                              "http://127.0.0.1:9/v1", "--model", "m", "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code in (1, 2), res.output
    assert "error: " + message.format(t=t) in one_error(res.output)
    assert not (tmp_path / "out.jsonl").exists()


# ------------------------------------------------------------------------------------------------
# weak: verify-judge --held-out with a manifest whose held_out is null (own test: tests/train/test_verify.py)


def test_verify_judge_held_out_null_names_the_field(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"questions": {"train": ["vicuna:1"], "held_out": None}}), encoding="utf-8")
    res = runner.invoke(app, ["verify-judge", "--dataset", "prometheus_vicuna", "--model", "smollm2-135m-instruct",
                              "--held-out", str(manifest)])
    assert res.exit_code == 1
    assert (f"{manifest}, field 'questions.held_out': must be a non-empty list of held-out questions "
            "(<source>:<id>, as `evalign judge-data` writes it), got nothing") in one_error(res.output)


# ------------------------------------------------------------------------------------------------
# weak: the API takes any verdict column named as a judge (own test: tests/evaluate/test_answers.py)


def test_meta_evaluate_pairs_accepts_a_verdict_column_given_as_judge() -> None:
    import pandas as pd

    prefs = [1.0, -1.0, 0.0] * 12
    t = pd.DataFrame({"id": [str(i) for i in range(36)], "instruction": "q", "response_a": "a", "response_b": "bb",
                      "pref_1": prefs, "J": [{1.0: "A", -1.0: "B", 0.0: "tie"}[p] for p in prefs]})
    r = evalign.meta_evaluate_pairs(t, prefs="pref_1", judges=["J"], n_resamples=20, n_permutations=20)
    row = r.to_pandas().set_index("metric").loc["J"]
    assert row["kind"] == "judge" and row["value"] == 1.0
    with pytest.raises(evalign.InputError) as e:
        evalign.meta_evaluate_pairs(t, prefs="pref_1", metrics=["J"], n_resamples=20, n_permutations=20)
    assert "did you mean 'J'" not in str(e.value)
    assert "named judge:NAME, or with a 'J.status' column, or given as a judge" in str(e.value)


# ------------------------------------------------------------------------------------------------
# weak: demo --judge checks its options and prerequisites first (own tests: tests/test_demo_judge.py)


@pytest.mark.parametrize(("args", "message"), [
    (["--judge-backend", "bogus"], "--judge-backend bogus: not one of auto, llama, hf"),
    (["--judge-backend", "lama"], "--judge-backend lama: not one of auto, llama, hf (did you mean 'llama'?)"),
    (["--judge-pairs", "-3"], "--judge-pairs must be at least 1 (LLMBar Natural pairs to judge), got -3"),
])
def test_demo_judge_checks_options_before_the_demo(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "demo"
    res = runner.invoke(app, ["demo", "--judge", *args, "-o", str(out)])
    assert res.exit_code == 2 and f"error: {message}" in one_error(res.output)
    assert not out.exists()  # nothing of the demo ran


def test_demo_judge_missing_server_is_said_for_a_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "uvicorn" else real(n, *a))
    out = tmp_path / "demo"
    res = runner.invoke(app, ["demo", "--judge", "--judge-backend", "llama", "-o", str(out)])
    assert res.exit_code == 2 and not out.exists()
    text = one_error(res.output)
    assert "--judge-backend llama: llama.cpp's OpenAI-compatible server (the local judge server) needs " \
           "llama-cpp-python with its [server] extra (missing: uvicorn)" in text
    assert "tests" not in text and "or use --judge-backend hf" in text


def test_demo_live_table_names_its_statistics(tmp_path: Path) -> None:
    from evalign.cache import Cache
    from evalign.cli.demo import live_table
    from evalign.demo_judge import LIVE_COLUMN, run_live_judge, write_live_judge
    from test_demo_judge import AlwaysFirst  # tests/, on the path

    live = run_live_judge(n_pairs=30, seed=3, n_resamples=50, backend=AlwaysFirst(), cache=Cache(tmp_path / "c"))
    data = json.loads(write_live_judge(live, tmp_path)["live_judge.json"].read_text(encoding="utf-8"))
    title, df = live_table(data)
    assert "accuracy" not in df.columns and list(df.columns) == ["cluster", "metric", "acc. both orders", "95% CI",
                                                                "acc. mean (2 orders)"]
    row = df.set_index("metric").loc[LIVE_COLUMN]
    assert row["acc. both orders"] == 0.0 and row["acc. mean (2 orders)"] == 0.5  # always "Output (a)"
    assert "right in both presentation orders" in title and "as LLMBar reports" in title


# ------------------------------------------------------------------------------------------------
# weak: train-judge reports every bad argument, the input first


def test_train_judge_reports_every_bad_argument_input_first(tmp_path: Path) -> None:
    missing = tmp_path / "MISSING.jsonl"
    res = runner.invoke(app, ["train-judge", str(missing), "--base-model", "BAD", "-o", str(tmp_path / "out"),
                              "--eval-dataset", "pandalmm"])
    assert res.exit_code == 1
    text = one_error(res.output)
    assert text.index(f"{missing}: no such file") < text.index("base model 'BAD' is neither a local folder") < \
        text.index("unknown dataset 'pandalmm' (did you mean 'pandalm'?)")
    assert not (tmp_path / "out").exists()


def test_train_judge_api_checks_the_data_before_the_model(tmp_path: Path) -> None:
    from evalign.errors import EvalignError
    from evalign.train import train_judge

    bad = tmp_path / "data.jsonl"
    bad.write_text(json.dumps({"instruction": "q"}) + "\n", encoding="utf-8")
    with pytest.raises(EvalignError, match=r"data.jsonl, line 1, field 'output': missing field .*; base model 'BAD'"):
        train_judge(bad, "BAD", tmp_path / "out")


# ------------------------------------------------------------------------------------------------
# weak: a 401 from the judge in `evalign run` is one line (no cache notice after a failure)


def test_run_with_a_401_judge_says_one_line(tmp_path: Path) -> None:
    import http.server
    import threading

    class Unauthorized(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = b'{"error": {"message": "invalid api key"}}'
            self.send_response(401)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unauthorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rows = [{"id": f"q{i}", "system": s, "instruction": "q", "response": "r" + s, "reference": "r", "rating": k}
                for i in range(4) for k, s in enumerate("ab")]
        (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (tmp_path / "cfg.yaml").write_text(
            "version: 1\nname: x\nevaluations:\n  - name: e\n    data: {file: items.jsonl}\n    judges:\n"
            f"      - {{mode: absolute, model: m, base_url: 'http://127.0.0.1:{server.server_port}/v1', "
            "api_key_env: MY_KEY}\n    meta:\n      human: {column: rating}\n", encoding="utf-8")
        cache = tmp_path / "new-cache.sqlite"  # created by this run
        env = {**os.environ, "MY_KEY": "sk-not-a-key", "EVALIGN_CACHE": str(cache)}
        res = subprocess.run([sys.executable, "-m", "evalign", "run", "cfg.yaml", "-o", "out"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    finally:
        server.shutdown()
    assert res.returncode == 1, res.stderr
    last = [ln for ln in res.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("error: POST http://127.0.0.1:") and "HTTP 401 (check the API key and its variable)" in last
    assert "created the evalign cache" not in res.stderr and "sk-not-a-key" not in res.stderr
    assert one_error(res.stderr)


# ------------------------------------------------------------------------------------------------
# weak: meta on fewer pairs than the ranking floor still describes judges run in both orders


def test_meta_below_the_ranking_floor_shows_order_diagnostics(tmp_path: Path) -> None:
    import pandas as pd

    gold = [1, -1] * 10
    ab = ["A"] * 20  # always the first shown: right on the 10 A pairs in the A-first order
    ba = ["B"] * 20  # ... and on the 10 B pairs once swapped (B shown first, mapped back)
    t = pd.DataFrame({"id": [str(i) for i in range(20)], "instruction": "q", "response_a": "a", "response_b": "bb",
                      "pref_1": gold, "J.ab": ab, "J.ba": ba, "J": ["tie"] * 20, "J.status": "scored"})
    path = tmp_path / "pairs.jsonl"
    t.to_json(path, orient="records", lines=True)
    res = runner.invoke(app, ["meta", str(path), "-m", "J", "--pref", "pref_1", "--bootstrap", "20",
                              "--permutations", "20"], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "groups too small to rank (reported, not ranked): (all) (20)" in text
    assert "Judges run in both orders" in text
    assert "│ J │ 0.500 │ 0.500 │ 0.500 │ 0.000 │ 0.000 │ 1.000 │" in text  # per order, mean, both, agree, first
    out = json.loads(runner.invoke(app, ["meta", str(path), "-m", "J", "--pref", "pref_1", "--bootstrap", "20",
                                         "--permutations", "20", "--json"]).stdout)
    row = next(r for r in out["overview"] if r["metric"] == "J")
    assert (row["accuracy_original"], row["accuracy_swapped"], row["position_agreement"], row["prefers_first"]) == \
        (0.5, 0.5, 0.0, 1.0)


# ------------------------------------------------------------------------------------------------
# weak: an LLMBar verdict complete before max_tokens cut the text is read, and counted
# (own tests: tests/judges/test_llmbar_parsing.py)


def test_verdicts_complete_before_the_cut_are_read_and_counted(tmp_path: Path) -> None:
    from evalign.backends.base import Backend
    from evalign.backends.types import Choice, Generation, GenerationRequest, Usage
    from evalign.cache import Cache
    from evalign.demo_judge import LIVE_COLUMN, live_note, run_live_judge

    class CutAfterTheAnswer(Backend):
        """SmolLM2 at max_tokens 16: the answer, then an explanation cut off."""

        kind = "cut-after-the-answer"

        def identity(self) -> dict[str, object]:
            return {"kind": self.kind}

        async def generate(self, req: GenerationRequest) -> Generation:
            return Generation.from_choices([Choice("Output (a) is better than Output (b). The sound of", "length")],
                                           Usage(1, 16))

    live = run_live_judge(n_pairs=10, seed=1, n_resamples=20, backend=CutAfterTheAnswer(), cache=Cache(tmp_path / "c"))
    t = live.run.table
    assert t[f"{LIVE_COLUMN}.ab"].tolist() == ["A"] * 10 and t[f"{LIVE_COLUMN}.status"].tolist() == ["scored"] * 10
    assert live.run.summary.calls.read_before_cut == 20 and live.run.summary.calls.unscored_by_reason == {}
    assert live_note(live).startswith("20 of 20 answers parsed (20 complete before the max_tokens cut)")


# ------------------------------------------------------------------------------------------------
# the report in a browser (own tests: tests/report/test_browser.py::test_demo_report_fits_1280_px in Chromium at
# 1280 px, tests/report/test_figures.py::test_demo_figures_name_what_they_show)


def test_report_results_tables_show_the_main_columns_and_the_rest_behind_a_toggle() -> None:
    import pandas as pd

    from evalign.report.build import main_columns
    from evalign.report.html import Section, render_html

    shown = pd.DataFrame({"table": ["pairs (A)", "pairs (B)"], "level": ["item", "item"], "rank": ["1", "1"],
                          "metric": ["m", "m"], "value [low, high]": ["0.5 [0.4, 0.6]"] * 2, "epsilon": ["0.1"] * 2,
                          "n pairs": ["10", "10"]})
    main, same = main_columns(shown)
    assert main == ["table", "rank", "metric", "value [low, high]"] and same == {"level": "item", "n pairs": "10"}
    page = render_html("t", None, [Section("acc", "Accuracy", tables={"Accuracy": shown}, main={"Accuracy": main})],
                       "f")
    assert '<input type="checkbox" class="allcols"' in page and "show all 7 columns (3 more)" in page
    assert '<th class="more">epsilon</th>' in page and '<td class="iv">0.5 [0.4, 0.6]</td>' in page


def test_report_forest_plot_blocks_are_per_table() -> None:
    import pandas as pd

    from evalign.report.build import _blocks

    t = pd.DataFrame({"statistic": ["acc"] * 4, "table": ["pairs (A)", "pairs (A)", "pairs (B)", "pairs (B)"],
                      "metric": ["m", "random", "m", "random"], "value": [0.6, 0.5, 0.7, 0.5]})
    assert [(s, w, list(p["metric"])) for s, w, p in _blocks(t)] == [("acc", "pairs (A)", ["m", "random"]),
                                                                       ("acc", "pairs (B)", ["m", "random"])]
