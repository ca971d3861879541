"""Issue 48: no command writes over a file it reads. An output equal to an input (after links,
relative paths and ``~``), or an output folder whose files would replace an input, is refused before
any work: a usage error (exit 2) naming both, the input left as it was (one check,
:func:`evalign.io.refuse_output_onto_inputs`, called by every command that reads and writes)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evalign.cli import app
from evalign.errors import UsageError
from evalign.io import OutputFolder, refuse_output_onto_inputs

runner = CliRunner()


def _verdicts(n: int = 120, seed: int = 1) -> pd.DataFrame:
    """Judged and labelled pairs: a judge ``x`` with P(A better), right more often when sure."""
    rng = np.random.default_rng(seed)
    pref = rng.choice([1.0, -1.0], size=n)
    sure = rng.uniform(0.5, 1.0, n)
    x = np.where(rng.uniform(size=n) < np.sqrt(sure), pref, -pref)
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "instruction": [f"q{i}" for i in range(n)],
                         "response_a": "a", "response_b": "b", "pref_1": pref,
                         "judge:x": np.where(x > 0, "A", "B"), "judge:x.p_a": np.where(x > 0, sure, 1 - sure)})


def _write(df: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_json(path, orient="records", lines=True)
    return path


def _calibrate(verdicts: Path, cal: Path) -> Path:
    res = runner.invoke(app, ["meta", str(verdicts), "--pref", "pref_1", "-m", "judge:x", "--bootstrap", "20",
                              "--permutations", "20", "--selective", "--risk", "0.3", "--save-calibration", str(cal)])
    assert res.exit_code == 0, res.output
    return cal


def _refused(res: object, *names: str) -> str:
    """The one error line of a refused command; it names every one of ``names``."""
    out = res.output  # type: ignore[attr-defined]
    assert res.exit_code == 2, out  # type: ignore[attr-defined]
    line = " ".join(out.split())
    assert line.startswith("error: ") and "writing it would replace what this command reads" in line, out
    for n in names:
        assert n in line, (n, out)
    return line


# --- the four reported cases ------------------------------------------------------------------------------


def test_meta_save_calibration_onto_the_verdict_table(tmp_path: Path) -> None:
    verdicts = _write(_verdicts(), tmp_path / "verdicts.jsonl")
    before = verdicts.read_bytes()
    res = runner.invoke(app, ["meta", str(verdicts), "--pref", "pref_1", "-m", "judge:x", "--bootstrap", "20",
                              "--permutations", "20", "--selective", "--save-calibration", str(verdicts)])
    _refused(res, f"--save-calibration {verdicts}", f"the input FILE {verdicts}")
    assert verdicts.read_bytes() == before  # the 120 judged and labelled rows kept


def test_escalate_out_onto_the_verdict_table(tmp_path: Path) -> None:
    verdicts = _write(_verdicts(), tmp_path / "verdicts.jsonl")
    cal = _calibrate(verdicts, tmp_path / "cal.json")
    before = verdicts.read_bytes()
    res = runner.invoke(app, ["escalate", str(cal), str(verdicts), "-o", str(verdicts), "--rest",
                              str(tmp_path / "people.jsonl")])
    _refused(res, f"-o {verdicts}", f"the input VERDICTS {verdicts}")
    assert verdicts.read_bytes() == before and not (tmp_path / "people.jsonl").exists()
    res = runner.invoke(app, ["escalate", str(cal), str(verdicts), "-o", str(tmp_path / "d.jsonl"), "--rest", str(cal)])
    _refused(res, f"--rest {cal}", f"the input CAL {cal}")


def test_judge_cascade_out_onto_the_pair_table(tmp_path: Path) -> None:
    pairs = _write(_verdicts(40)[["id", "instruction", "response_a", "response_b"]], tmp_path / "pairs.jsonl")
    cal = _calibrate(_write(_verdicts(), tmp_path / "verdicts.jsonl"), tmp_path / "cal.json")
    before = pairs.read_bytes()
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(cal), "-o", str(pairs), "--rest",
                              str(tmp_path / "people.jsonl")])
    _refused(res, f"-o {pairs}", f"the input FILE {pairs}")
    assert pairs.read_bytes() == before
    res = runner.invoke(app, ["judge", str(pairs), "--cascade", str(cal), "-o", str(tmp_path / "d.jsonl"), "--rest",
                              str(cal)])
    _refused(res, f"--rest {cal}", f"the input --cascade {cal}")


@pytest.mark.parametrize("recipe", ["contrastive", "preference"])
def test_judge_data_out_folder_onto_its_pairs(tmp_path: Path, recipe: str) -> None:
    folder = tmp_path / "data"
    pairs = _write(_verdicts(40), folder / "train.jsonl")
    before = pairs.read_bytes()
    res = runner.invoke(app, ["judge-data", recipe, "--pairs", str(pairs), "--exclude", "none", "-o", str(folder)])
    _refused(res, f"-o {folder}", f"would write {pairs}", f"the input --pairs {pairs}")
    assert pairs.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["train.jsonl"]  # nothing written


# --- links, relative paths, hard links ------------------------------------------------------------------


def test_an_output_through_a_symlink_is_the_file_it_points_to(tmp_path: Path) -> None:
    verdicts = _write(_verdicts(), tmp_path / "verdicts.jsonl")
    cal = _calibrate(verdicts, tmp_path / "cal.json")
    link = tmp_path / "elsewhere" / "decided.jsonl"
    link.parent.mkdir()
    link.symlink_to(verdicts)
    before = verdicts.read_bytes()
    res = runner.invoke(app, ["escalate", str(cal), str(verdicts), "-o", str(link), "--rest",
                              str(tmp_path / "people.jsonl")])
    _refused(res, f"-o {link}", f"the input VERDICTS {verdicts}")
    assert verdicts.read_bytes() == before and link.is_symlink()
    folder_link = tmp_path / "data-link"  # a folder reached through a link
    folder_link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _write(_verdicts(8), tmp_path / "elsewhere" / "manifest.json")
    res = runner.invoke(app, ["judge-data", "preference", "--pairs", str(tmp_path / "elsewhere" / "manifest.json"),
                              "-o", str(folder_link)])
    _refused(res, f"-o {folder_link}", "manifest.json")


def test_a_relative_output_is_resolved_against_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    verdicts = _write(_verdicts(), tmp_path / "run" / "verdicts.jsonl")
    (tmp_path / "run" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "run" / "sub")
    before = verdicts.read_bytes()
    res = runner.invoke(app, ["leaderboard", str(verdicts), "--judge", "judge:x", "-o", "../sub/../verdicts.jsonl"])
    _refused(res, "-o ../sub/../verdicts.jsonl", f"the input VERDICTS_FILE {verdicts}")
    res = runner.invoke(app, ["leaderboard", "../verdicts.jsonl", "--judge", "judge:x", "-o", str(verdicts)])
    _refused(res, f"-o {verdicts}", "the input VERDICTS_FILE ../verdicts.jsonl")
    assert verdicts.read_bytes() == before


def test_the_check_itself() -> None:
    """Hard links and ``~`` are the same file; a folder owning every file refuses any input in it; a
    folder with named files refuses only those; ``-`` and None are skipped."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        a = Path(d) / "a.jsonl"
        a.write_text("{}\n")
        os.link(a, Path(d) / "hard.jsonl")
        with pytest.raises(UsageError, match="is the input FILE"):
            refuse_output_onto_inputs({"-o": Path(d) / "hard.jsonl"}, {"FILE": a})
        home = Path("~").expanduser()
        if Path(d).is_relative_to(home):
            with pytest.raises(UsageError):
                refuse_output_onto_inputs({"-o": "~/" + str(a.relative_to(home))}, {"FILE": a})
        with pytest.raises(UsageError, match="writes the whole folder, and the input --x"):
            refuse_output_onto_inputs({"-o": OutputFolder(d)}, {"--x": [None, a]})
        refuse_output_onto_inputs({"-o": OutputFolder(d, ("b.jsonl", "sets/*"))}, {"--x": a})
        with pytest.raises(UsageError, match="would write"):
            refuse_output_onto_inputs({"-o": OutputFolder(d, ("*.JSONL",))}, {"--x": a})
        refuse_output_onto_inputs({"-o": "-", "--rest": None}, {"FILE": "-"})
        refuse_output_onto_inputs({"-o": Path(d) / "b.jsonl"}, {"FILE": a, "--t": "prometheus_absolute"})


# --- every command that reads and writes ----------------------------------------------------------------


def _items(tmp: Path, name: str = "items.jsonl") -> Path:
    rows = [{"id": f"i{k}", "system": s, "instruction": f"q{k}", "reference": f"r{k}", "response": f"{s}{k}",
             "human": k % 5 + 1} for k in range(6) for s in ("s1", "s2")]
    return _write(pd.DataFrame(rows), tmp / name)


def _battles(tmp: Path, name: str = "battles.jsonl") -> Path:
    rows = [{"id": f"b{k}", "system_a": "s1", "system_b": "s2", "verdict": "AB"[k % 2]} for k in range(8)]
    return _write(pd.DataFrame(rows), tmp / name)


def _config(tmp: Path, data: str) -> Path:
    cfg = {"version": 1, "name": "t", "metrics": ["exact_match"], "report": {"formats": ["json"]},
           "evaluations": [{"name": "toy", "data": {"file": data}, "meta": {"human": {"column": "human"}}}]}
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def _store(tmp: Path) -> Path:
    from evalign.annotate.items import read_items_to_label
    from evalign.annotate.store import Store, StoreSettings

    store = Store(tmp / "labels.sqlite")
    one = _write(pd.read_json(_items(tmp), lines=True).query("system == 's1'"), tmp / "to_label.jsonl")
    store.initialise(read_items_to_label(one, "graded"), StoreSettings(task="graded"))
    store.close()
    return tmp / "labels.sqlite"


def _data_dir(tmp: Path) -> Path:
    from evalign.datasets.catalogue import CATALOGUE

    folder = next(e.folder for e in CATALOGUE.values() if e.folder)
    _items(tmp / "data" / folder, "table.jsonl")
    return tmp / "data" / folder / "table.jsonl"


OPENAI = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
#: (case, build(tmp) -> (argv, the input that must stay as it was, words the error names))
CASES: list[tuple[str, Callable[[Path], tuple[list[str], Path, list[str]]]]] = [
    ("score -o", lambda t: (["score", str(_items(t)), "-m", "exact_match", "-o", str(t / "items.jsonl")],
                            t / "items.jsonl", ["-o", "FILE"])),
    ("score --system-out", lambda t: (["score", str(_items(t)), "-m", "exact_match", "--system-out",
                                       str(t / "items.jsonl")], t / "items.jsonl", ["--system-out", "FILE"])),
    ("score --out-dir", lambda t: (["score", str(_items(t, "shards/part-00000.jsonl")),
                                    "-m", "exact_match", "--out-dir", str(t / "shards")],
                                   t / "shards" / "part-00000.jsonl", ["--out-dir", "would write", "FILE"])),
    ("meta --save-calibration", lambda t: (["meta", str(_write(_verdicts(), t / "v.jsonl")), "--pref", "pref_1", "-m",
                                            "judge:x", "--selective", "--save-calibration", str(t / "v.jsonl")],
                                           t / "v.jsonl", ["--save-calibration", "FILE"])),
    ("meta --save-calibration onto a judge summary", lambda t: (
        ["meta", str(_write(_verdicts(), t / "v.jsonl")), "--pref", "pref_1", "-m", "judge:x", "--selective",
         "--save-calibration", str(_write(_verdicts(2), t / "other.jsonl.summary.json"))],
        t / "other.jsonl.summary.json", ["--save-calibration", "a judge summary beside FILE"])),
    ("judge -o", lambda t: (["judge", str(_items(t)), *OPENAI, "-o", str(t / "items.jsonl")], t / "items.jsonl",
                            ["-o", "FILE"])),
    ("judge -o summary", lambda t: (["judge", str(_items(t, "x.jsonl.summary.json")), *OPENAI, "-o",
                                     str(t / "x.jsonl")], t / "x.jsonl.summary.json", ["-o (its summary)", "FILE"])),
    ("judge -o --fewshot", lambda t: (["judge", str(_items(t)), *OPENAI, "--simulated-annotators", "2", "--fewshot",
                                       str(_items(t, "shots.jsonl")), "-o", str(t / "shots.jsonl")],
                                      t / "shots.jsonl", ["-o", "--fewshot"])),
    ("judge --cascade --rest", lambda t: (["judge", str(_items(t)), "--cascade", str(_write(_verdicts(), t / "c.json")),
                                           "-o", str(t / "d.jsonl"), "--rest", str(t / "items.jsonl")],
                                          t / "items.jsonl", ["--rest", "FILE"])),
    ("escalate -o", lambda t: (["escalate", str(_write(_verdicts(), t / "c.json")), str(_write(_verdicts(), t / "v.jsonl")),
                                "-o", str(t / "v.jsonl"), "--rest", str(t / "r.jsonl")], t / "v.jsonl",
                               ["-o", "VERDICTS"])),
    ("escalate --rest", lambda t: (["escalate", str(_write(_verdicts(), t / "c.json")), str(_write(_verdicts(), t / "v.jsonl")),
                                    "-o", str(t / "d.jsonl"), "--rest", str(t / "v.jsonl")], t / "v.jsonl",
                                   ["--rest", "VERDICTS"])),
    ("probe --table", lambda t: (["probe", str(_write(_verdicts(), t / "p.jsonl")), *OPENAI, "--table",
                                  str(t / "p.jsonl")], t / "p.jsonl", ["--table", "FILE"])),
    ("probe -o onto --probe", lambda t: (["probe", str(_write(_verdicts(), t / "p.jsonl")), *OPENAI, "--probe",
                                          str(_write(_verdicts(2), t / "probe.json")), "-o", str(t / "probe.json")],
                                         t / "probe.json", ["-o", "--probe"])),
    ("leaderboard -o", lambda t: (["leaderboard", str(_battles(t)), "-o", str(t / "battles.jsonl")],
                                  t / "battles.jsonl", ["-o", "VERDICTS_FILE"])),
    ("leaderboard -o onto --human", lambda t: (["leaderboard", str(_battles(t)), "--human", str(_battles(t, "h.jsonl")),
                                                "-o", str(t / "h.jsonl")], t / "h.jsonl", ["-o", "--human"])),
    ("report -o files", lambda t: (["report", str(_items(t, "r_files/items.jsonl")), "-m", "human", "--human", "human",
                                    "-o", str(t / "r.html")], t / "r_files" / "items.jsonl",
                                   ["-o (its files)", "SCORED_FILE"])),
    ("bench --html", lambda t: (["bench", "--judge", "x=openai:m@http://127.0.0.1:9/v1", "--config",
                                 str(_bench_config(t)), "--html", str(t / "bench.yaml")], t / "bench.yaml",
                                ["--html", "--config"])),
    ("synth -o summary", lambda t: (["synth", *OPENAI, "--seed-rubric", str(_rubric(t, "s.jsonl.summary.json")), "-o",
                                     str(t / "s.jsonl")], t / "s.jsonl.summary.json", ["-o (its summary)", "--seed-rubric"])),
    ("judge-data -o", lambda t: (["judge-data", "preference", "--pairs", str(_write(_verdicts(), t / "d" / "held_out.jsonl")),
                                  "-o", str(t / "d")], t / "d" / "held_out.jsonl", ["-o", "would write", "--pairs"])),
    ("train-judge -o", lambda t: (["train-judge", str(_items(t)), "--base-model", str(_model(t)), "-o", str(t / "model")],
                                  t / "model" / "config.json", ["-o", "is the input folder --base-model"])),
    ("annotate --db", lambda t: (["annotate", str(_items(t)), "--db", str(t / "items.jsonl")], t / "items.jsonl",
                                 ["--db", "ITEMS"])),
    ("annotate export -o", lambda t: (["annotate", "export", str(_store(t)), "-o", str(t / "labels.sqlite")],
                                      t / "labels.sqlite", ["-o", "LABELS.sqlite"])),
    ("annotate export --join", lambda t: (["annotate", "export", str(_store(t)), "--join", str(_items(t, "j.jsonl")),
                                           "-o", str(t / "j.jsonl")], t / "j.jsonl", ["-o", "--join"])),
    ("run --out", lambda t: (["run", str(_config(t, "out/toy/scored.jsonl")), "--out", str(t / "out")],
                             _items(t, "out/toy/scored.jsonl"), ["--out", "would write", "toy: data.file"])),
    ("datasets export -o", lambda t: (["datasets", "export", _dataset_name(), "--data-dir", str(t / "data"), "-o",
                                       str(kept := _data_dir(t))], kept, ["-o", "the input NAME"])),
]


def _bench_config(t: Path) -> Path:
    path = t / "bench.yaml"
    path.write_text("version: 1\nper_set: 2\n", encoding="utf-8")
    return path


def _rubric(t: Path, name: str) -> Path:
    path = t / name
    path.write_text(json.dumps({"name": "r", "criteria": "c", "score1_description": "1"}), encoding="utf-8")
    return path


def _model(t: Path) -> Path:
    (t / "model").mkdir(exist_ok=True)
    (t / "model" / "config.json").write_text("{}", encoding="utf-8")
    return t / "model"


def _dataset_name() -> str:
    from evalign.datasets.catalogue import CATALOGUE

    return next(name for name, e in CATALOGUE.items() if e.folder)


def test_cases_cover_every_command_that_writes() -> None:
    """Every command with an output option has a case (a new one fails here until it has)."""
    from evalign.cli import VERBS

    covered = {c.split()[0] for c, _ in CASES}
    no_output = {"metrics", "alt-test", "verify-judge", "cache", "demo"}  # demo: reads only the bundled data
    assert set(VERBS) - no_output <= covered, sorted(set(VERBS) - covered - no_output)


@pytest.mark.parametrize("case", [c for c, _ in CASES])
def test_every_command_refuses_an_output_onto_an_input(case: str, tmp_path: Path) -> None:
    argv, kept, words = dict(CASES)[case](tmp_path)
    before = kept.read_bytes()
    res = runner.invoke(app, argv, env={"COLUMNS": "400"})
    _refused(res, *words)
    assert kept.read_bytes() == before


@pytest.mark.parametrize("verb", ["score", "judge", "probe"])
def test_no_output_replaces_the_cache(tmp_path: Path, verb: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache is read too: an output onto it is refused (one named like a table, so that the output's
    format check lets it through)."""
    from evalign.cache import Cache

    cache = tmp_path / "cache" / "answers.jsonl"
    monkeypatch.setenv("EVALIGN_CACHE", str(cache))
    with Cache(cache) as c:
        c.put("judge", "k", b"an answer paid for")
    before = cache.read_bytes()
    argv = {"score": ["score", str(_items(tmp_path)), "-m", "exact_match", "-o", str(cache)],
            "judge": ["judge", str(_items(tmp_path)), *OPENAI, "-o", str(cache)],
            "probe": ["probe", str(_write(_verdicts(), tmp_path / "p.jsonl")), *OPENAI, "--table", str(cache)]}[verb]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert "is the input the cache ($EVALIGN_CACHE)" in " ".join(res.output.split())
    assert cache.read_bytes() == before
