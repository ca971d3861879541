"""``evalign run CONFIG.yaml``: the shipped demo config, equality with ``evalign demo``, the resolved
config reproducing a run, step skipping, judges run from a config, and config errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evalign.cli import app
from evalign.io import write_table

runner = CliRunner()
SHIPPED = Path(__file__).resolve().parents[2] / "src" / "evalign" / "data" / "configs" / "demo.yaml"


def _run(args: list[str], code: int = 0) -> Any:
    res = runner.invoke(app, args)
    assert res.exit_code == code, (res.output, res.exception)
    return res


def _write(path: Path, cfg: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------
# the shipped demo config


def test_shipped_demo_config_loads_and_resolves() -> None:
    from evalign.datasets import load_dataset
    from evalign.demo import LEXICAL
    from evalign.run import load_config, shipped_configs

    assert shipped_configs()["demo"].read_text() == SHIPPED.read_text()
    cfg = load_config("demo")
    # the demo's metrics: the lexical ones and SemScore with the bundled MiniLM
    assert [m.name for m in cfg.metrics] == [*LEXICAL, "semscore"]
    assert cfg.metrics[-1].options == {"model": "minilm"}
    assert cfg.out_dir() == Path("evalign-demo")
    res = _run(["run", "demo", "--dry-run"])
    resolved = yaml.safe_load(res.stdout)
    si, pl = resolved["evaluations"]
    assert [e["name"] for e in resolved["evaluations"]] == ["self_instruct", "pandalm"]
    # every default filled in: the labels, the trust table, the resampling, the metric options
    assert si["meta"]["human"]["system"] == load_dataset("self_instruct").system_human
    assert si["meta"]["human"]["higher_is_better"] is False
    assert si["meta"]["trust"] == [{"statistic": "kendall", "level": "system", "grouping": "item"}]
    assert si["meta"]["resampling"] == {"n_resamples": 1000, "n_permutations": 1000, "confidence": 0.95,
                                        "alpha": 0.05, "seed": 0, "method": "auto", "workers": None}
    assert si["meta"]["min_group_size"] == 10 and si["meta"]["baselines"] is True
    assert pl["meta"]["human"]["pref_columns"] == ["pref_1", "pref_2", "pref_3"]
    assert pl["meta"]["trust"][0]["statistic"] == "preference_accuracy" and pl["meta"]["by"] == "task"
    assert pl["meta"]["min_group_size"] == 30 and pl["meta"]["curves"] is True
    assert [c["name"] for c in pl["columns"]] == ["judge:gpt-3.5-turbo", "judge:pandalm-7b"]
    chrf = next(m for m in si["metrics"] if m["name"] == "chrf")
    assert chrf["options"] == {"char_order": 6, "word_order": 0, "beta": 2, "lowercase": False, "whitespace": False}
    # the resolved text is itself a valid config
    from evalign.run.config import parse_config

    again = parse_config(yaml.safe_load(res.stdout), file="resolved")
    assert [e.name for e in again.evaluations] == ["self_instruct", "pandalm"]


def test_run_on_the_demo_config_equals_evalign_demo(tmp_path: Path) -> None:
    """The shipped config with two metrics and 20 resamples (for speed) gives the demo's tables."""
    from evalign.demo import run_demo
    from evalign.metrics.base import get_metric

    cfg = yaml.safe_load(SHIPPED.read_text())
    cfg["metrics"] = ["bleu", "exact_match"]
    for ev in cfg["evaluations"]:
        ev["meta"]["resampling"] = {"n_resamples": 20, "n_permutations": 20, "seed": 0}
    cfg["report"]["formats"] = ["csv", "json"]
    out = tmp_path / "out"
    _run(["run", str(_write(tmp_path / "demo.yaml", cfg)), "--out", str(out)])

    demo = run_demo(metrics=[get_metric("bleu"), get_metric("exact_match")], n_resamples=20, seed=0)

    def same(ours: Path, theirs: pd.DataFrame) -> None:
        write_table(theirs, tmp_path / "theirs.csv")
        a = pd.read_csv(ours)
        a = a[a["group"] == "(all)"].drop(columns=["group"]) if "group" in a.columns else a
        b = pd.read_csv(tmp_path / "theirs.csv")
        drop = [c for c in ("s_per_1000",) if c in a.columns]  # timings differ between runs
        pd.testing.assert_frame_equal(a.drop(columns=drop).reset_index(drop=True),
                                      b.drop(columns=drop).reset_index(drop=True))

    same(out / "self_instruct" / "trust_kendall_system.csv", demo.correlations)
    same(out / "pandalm" / "trust_preference_accuracy_item.csv", demo.preference)
    board = pd.read_csv(out / "self_instruct" / "systems.csv").rename(columns={"human": "human_rank"})
    board = board.sort_values("human_rank").reset_index(drop=True)
    write_table(demo.leaderboard, tmp_path / "lb.csv")
    pd.testing.assert_frame_equal(board, pd.read_csv(tmp_path / "lb.csv"))
    # the upstream judges are ranked beside the metrics, as in the demo
    pref = pd.read_csv(out / "pandalm" / "trust_preference_accuracy_item.csv")
    pref = pref[pref["group"] == "(all)"].set_index("metric")
    assert pref.loc["judge:pandalm-7b", "kind"] == "judge"
    assert pref.loc["judge:pandalm-7b", "value"] == pytest.approx(0.6677, abs=1e-4)


# ------------------------------------------------------------------------------------------------
# a study from files: resolved config, skipping, signatures


def _items(path: Path, n: int = 12) -> Path:
    rows = []
    for i in range(n):
        ref = f"the answer to question {i} is {i} apples"
        for s, resp in (("good", ref), ("half", f"the answer is {i}"), ("bad", "no idea")):
            rows.append({"qid": f"q{i}", "model": s, "instruction": f"question {i}?", "reference": ref,
                         "output": resp, "rating": {"good": 5, "half": 3, "bad": 1}[s] - (i % 2) * (s == "half")})
    write_table(pd.DataFrame(rows), path)
    return path


def _file_config(tmp_path: Path, **meta: Any) -> dict[str, Any]:
    _items(tmp_path / "items.jsonl")
    return {
        "version": 1,
        "name": "files",
        "metrics": ["bleu", {"name": "chrf", "options": {"char_order": 4}}],
        "evaluations": [{
            "name": "toy",
            "data": {"file": "items.jsonl", "fields": {"id": "qid", "system": "model", "response": "output"}},
            "meta": {"human": {"column": "rating"},
                     "resampling": {"n_resamples": 10, "n_permutations": 10, "seed": 3}, **meta},
        }],
        "report": {"formats": ["json", "csv"]},
    }


def test_resolved_config_reproduces_the_run_and_steps_are_skipped(tmp_path: Path) -> None:
    path = _write(tmp_path / "study.yaml", _file_config(tmp_path))
    out = tmp_path / "out"
    _run(["run", str(path), "--out", str(out)])
    first = json.loads((out / "toy" / "evaluation.json").read_text())
    assert first["n_items"] == 12 and first["n_systems"] == 3
    scored = pd.read_json(out / "toy" / "scored.jsonl", lines=True)
    assert {"bleu", "chrf"} <= set(scored.columns)
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())
    ev = resolved["evaluations"][0]
    assert ev["data"]["file"] == "../items.jsonl" and resolved["report"]["out"] == "."
    assert ev["meta"]["trust"] == [{"statistic": "pairwise_accuracy", "level": "item", "grouping": "item"}]
    assert ev["meta"]["resampling"]["seed"] == 3 and ev["meta"]["human"]["column"] == "rating"
    sigs = resolved["signatures"]["toy"]
    assert sigs["metrics"]["bleu"].startswith("bleu|") and "tok:13a" in sigs["metrics"]["bleu"]
    assert sigs["metrics"]["chrf"].startswith("chrf|") and "nc:4" in sigs["metrics"]["chrf"]
    assert sigs["evaluation"] == first["signature"]["text"]
    # the resolved config reproduces the run in its own folder, skipping every finished step
    res = _run(["run", str(out / "resolved.yaml"), "--json"])
    again = json.loads((out / "toy" / "evaluation.json").read_text())
    assert again == first
    run = json.loads((out / "run.json").read_text())
    assert run["evaluations"]["toy"]["skipped"] == ["metric bleu", "metric chrf", "meta-evaluation"]
    assert run["signature_changes"] == [] and json.loads(res.stdout)["signature_changes"] == []
    # --force redoes the steps, with the same numbers
    _run(["run", str(out / "resolved.yaml"), "--force"])
    assert json.loads((out / "run.json").read_text())["evaluations"]["toy"]["skipped"] == []
    forced = json.loads((out / "toy" / "evaluation.json").read_text())["trust"]
    assert _untimed(forced) == _untimed(first["trust"])
    assert [r["value"] for r in forced[0]["rows"]] == [r["value"] for r in first["trust"][0]["rows"]]


def _untimed(trust: list[dict[str, Any]]) -> list[Any]:
    """Trust tables without the timing column (seconds per 1,000 items differ between runs)."""
    return [{**t, "rows": [{k: v for k, v in r.items() if k != "s_per_1000"} for r in t["rows"]]} for t in trust]


def test_changed_settings_redo_only_their_steps_and_changed_signatures_are_reported(tmp_path: Path) -> None:
    cfg = _file_config(tmp_path)
    path = _write(tmp_path / "study.yaml", cfg)
    out = tmp_path / "out"
    _run(["run", str(path), "--out", str(out)])
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())
    resolved["evaluations"][0]["meta"]["resampling"]["seed"] = 4
    resolved["signatures"]["toy"]["metrics"]["bleu"] = "bleu|an older signature"
    _write(out / "resolved.yaml", resolved)
    res = _run(["run", str(out / "resolved.yaml")])
    run = json.loads((out / "run.json").read_text())
    assert run["evaluations"]["toy"]["skipped"] == ["metric bleu", "metric chrf"]
    changes = run["signature_changes"]
    assert len(changes) == 2
    assert changes[0].startswith("toy: the signature of bleu changed: was bleu|an older signature, now bleu|case:mixed")
    assert changes[1].startswith("toy: the evaluation signature changed: was ") and "seed:3" in changes[1]
    assert "seed:4" in changes[1].split(", now ")[1]
    assert "warning" in res.output and "seed:4" in (out / "resolved.yaml").read_text()


def test_workers_change_no_step_and_the_resampling_method_redoes_the_meta_evaluation(tmp_path: Path) -> None:
    """The number of worker processes gives the same numbers: no step is redone for it. The
    resampling method changes the draws: the meta-evaluation is redone and its signature says how."""
    out = tmp_path / "out"
    _run(["run", str(_write(tmp_path / "study.yaml", _file_config(tmp_path))), "--out", str(out)])
    first = json.loads((out / "toy" / "evaluation.json").read_text())
    assert "resampling:sufficient" in first["signature"]["text"]  # pairwise accuracy grouped by item
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())
    assert resolved["evaluations"][0]["meta"]["resampling"]["method"] == "auto"
    resolved["evaluations"][0]["meta"]["resampling"]["workers"] = 2
    _write(out / "resolved.yaml", resolved)
    _run(["run", str(out / "resolved.yaml")])
    assert json.loads((out / "run.json").read_text())["evaluations"]["toy"]["skipped"] == [
        "metric bleu", "metric chrf", "meta-evaluation"]
    resolved["evaluations"][0]["meta"]["resampling"]["method"] = "items"
    _write(out / "resolved.yaml", resolved)
    _run(["run", str(out / "resolved.yaml")])
    assert json.loads((out / "run.json").read_text())["evaluations"]["toy"]["skipped"] == ["metric bleu", "metric chrf"]
    items = json.loads((out / "toy" / "evaluation.json").read_text())
    assert "resampling:items" in items["signature"]["text"]
    assert [r["value"] for r in items["trust"][0]["rows"]] == [r["value"] for r in first["trust"][0]["rows"]]
    resolved["evaluations"][0]["meta"]["resampling"]["method"] = "indices"
    _write(out / "resolved.yaml", resolved)
    res = _run(["run", str(out / "resolved.yaml")], code=2)
    assert "resampling" in res.output and "must be one of auto, items" in res.output


def test_a_file_with_labels_from_a_dataset_variant(tmp_path: Path) -> None:
    """Scored responses in a file, the human labels (and annotators) from ``tulu1:vicuna``."""
    from evalign.cli.dataset_options import load_dataset_spec

    ds = load_dataset_spec("tulu1:vicuna")
    assert ds.items is not None
    runs = ds.items[["id", "system", "instruction", "reference", "response"]].rename(columns={"response": "output"})
    write_table(runs, tmp_path / "runs.jsonl")
    cfg = {"version": 1, "evaluations": [{
        "name": "vicuna", "data": {"file": "runs.jsonl", "dataset": "tulu1:vicuna", "fields": {"response": "output"}},
        "metrics": ["exact_match"], "meta": {"resampling": {"n_resamples": 10, "n_permutations": 10}}}],
        "report": {"formats": ["json"]}}
    out = tmp_path / "out"
    _run(["run", str(_write(tmp_path / "tulu.yaml", cfg)), "--out", str(out)])
    result = json.loads((out / "vicuna" / "evaluation.json").read_text())
    # the same numbers as the dataset's own table
    cfg["evaluations"][0]["data"] = {"dataset": "tulu1:vicuna"}
    _run(["run", str(_write(tmp_path / "tulu_ds.yaml", cfg)), "--out", str(tmp_path / "ds")])
    direct = json.loads((tmp_path / "ds" / "vicuna" / "evaluation.json").read_text())
    assert result["n_systems"] == ds.items["system"].nunique() and result["n_items"] == direct["n_items"] > 0
    assert _untimed(result["trust"])[0]["rows"] == _untimed(direct["trust"])[0]["rows"]
    meta = yaml.safe_load((out / "resolved.yaml").read_text())["evaluations"][0]["meta"]
    assert meta["human"]["column"] == "acceptable" and meta["human"]["annotators"] == list(ds.annotator_columns)
    assert meta["source"] == "runs.jsonl"
    assert "human_ceiling" in {r["metric"] for r in result["trust"][0]["rows"]}
    assert yaml.safe_load((out / "resolved.yaml").read_text())["name"] == "tulu"  # the file's name


def test_step_files_are_read_only_when_signed_on_this_machine(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed step file, or an output folder whose signing secret is not in this cache, is
    recomputed and never unpickled."""
    path = _write(tmp_path / "study.yaml", _file_config(tmp_path))
    out = tmp_path / "out"
    _run(["run", str(path), "--out", str(out)])
    first = json.loads((out / "toy" / "evaluation.json").read_text())
    steps = sorted((out / ".steps").glob("*.pkl"))
    assert len(steps) == 3 and len(list((out / ".steps").glob("*.sig"))) == 3
    for p in steps:  # replace every step file with a pickle that would run code when loaded
        p.write_bytes(b"cos\nsystem\n(S'echo pwned > " + str(tmp_path / "pwned").encode() + b"'\ntR.")
    _run(["run", str(path), "--out", str(out)])
    assert not (tmp_path / "pwned").exists()
    assert json.loads((out / "run.json").read_text())["evaluations"]["toy"]["skipped"] == []
    assert _untimed(json.loads((out / "toy" / "evaluation.json").read_text())["trust"]) == _untimed(first["trust"])
    # another machine (another cache): nothing is read back
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "other-cache.sqlite"))
    _run(["run", str(path), "--out", str(out)])
    assert json.loads((out / "run.json").read_text())["evaluations"]["toy"]["skipped"] == []


def test_an_interrupted_run_keeps_finished_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric that fails stops the run; the metric before it is written and recorded, and the
    next run does not compute it again."""
    import numpy as np

    from evalign.metrics.base import METRICS, Metric, MetricResult
    from evalign.run import load_config, run_config

    calls: list[str] = []

    class Flaky(Metric):
        name = "flaky_run13"
        fail = True

        def options(self) -> dict[str, Any]:
            return {}

        def score(self, responses: Any, references: Any) -> MetricResult:
            calls.append(self.name)
            if Flaky.fail:
                raise KeyboardInterrupt
            return MetricResult(values=np.array([float(len(r)) for r in responses]))

    monkeypatch.setitem(METRICS._entries, "flaky_run13", Flaky)
    cfg = _file_config(tmp_path)
    cfg["metrics"] = ["bleu", "flaky_run13"]
    path = _write(tmp_path / "study.yaml", cfg)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_config(load_config(path), out=out)
    scored = pd.read_json(out / "toy" / "scored.jsonl", lines=True)
    assert "bleu" in scored.columns and "flaky_run13" not in scored.columns  # written before the failure
    Flaky.fail = False
    done = run_config(load_config(path), out=out)
    assert done.evaluations[0].skipped == ["metric bleu"]
    assert calls == ["flaky_run13", "flaky_run13"]
    scored = pd.read_json(out / "toy" / "scored.jsonl", lines=True)
    assert scored["flaky_run13"].tolist() == [float(len(r)) for r in scored["response"]]


# ------------------------------------------------------------------------------------------------
# judges run from a config (an in-process backend) and precomputed judge columns


class _Scripted:
    """A backend that grades by response length (longer = better), counting its calls."""

    calls = 0

    @staticmethod
    def make() -> type:
        from evalign.backends import Backend, Choice, Generation, Usage

        class Scripted(Backend):
            kind = "scripted_run13"

            def __init__(self, model: str = "len", concurrency: int = 2) -> None:
                super().__init__()
                self.model = model
                self.concurrency = concurrency

            def identity(self) -> dict[str, Any]:
                return {"kind": self.kind, "model": self.model}

            async def generate(self, req: Any) -> Any:
                _Scripted.calls += 1
                text = req.messages[-1]["content"]
                if "###Response A:" in text:  # a pair: the response that names the apples is better
                    a = text.split("###Response A:")[1].split("###Response B:")[0]
                    verdict = "A" if "apples" in a else "B"
                    return Generation.from_choices([Choice(f"Feedback: compared. [RESULT] {verdict}", "stop")],
                                                   Usage(1, 1))
                response = text.split("###Response to evaluate:")[-1].split("###")[0]
                grade = 5 if "apples" in response else 3 if "answer" in response else 1
                return Generation.from_choices([Choice(f"Feedback: graded. [RESULT] {grade}", "stop")], Usage(1, 1))

        return Scripted


@pytest.fixture
def scripted_backend(monkeypatch: pytest.MonkeyPatch) -> str:
    from evalign.backends.registry import BACKENDS

    monkeypatch.setitem(BACKENDS._entries, "scripted_run13", _Scripted.make())
    _Scripted.calls = 0
    return "scripted_run13"


def test_judges_to_run_are_ranked_beside_metrics_and_not_rerun(tmp_path: Path, scripted_backend: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _file_config(tmp_path)
    cfg["evaluations"][0]["judges"] = [{"mode": "absolute", "backend": scripted_backend, "model": "len",
                                        "rubric": "helpfulness", "name": "lenjudge", "api_key_env": "MY_KEY"}]
    monkeypatch.setenv("MY_KEY", "secret-value-never-written")
    out = tmp_path / "out"
    _run(["run", str(_write(tmp_path / "study.yaml", cfg)), "--out", str(out)])
    assert _Scripted.calls == 36  # 12 items x 3 systems, one call each
    scored = pd.read_json(out / "toy" / "scored.jsonl", lines=True)
    grades = dict(zip(scored["model"] if "model" in scored else scored["system"], scored["lenjudge"], strict=False))
    assert grades == {"good": 5.0, "half": 3.0, "bad": 1.0}
    trust = pd.read_csv(out / "toy" / "trust_pairwise_accuracy_item_item.csv").set_index("metric")
    assert trust.loc["lenjudge", "kind"] == "judge" and trust.loc["bleu", "kind"] == "metric"
    resolved_text = (out / "resolved.yaml").read_text()
    assert "secret-value-never-written" not in resolved_text
    judge = yaml.safe_load(resolved_text)["evaluations"][0]["judges"][0]
    assert judge["api_key_env"] == "MY_KEY" and judge["backend_options"] == {"concurrency": 2}
    assert judge["options"]["samples"] == 1 and judge["rubric"] == "helpfulness"
    assert "lenjudge" in yaml.safe_load(resolved_text)["signatures"]["toy"]["judges"]
    for p in out.rglob("*"):
        if p.is_file() and p.suffix in (".json", ".jsonl", ".yaml", ".csv", ".html"):
            assert "secret-value-never-written" not in p.read_text(errors="replace"), p
    _run(["run", str(out / "resolved.yaml")])
    assert _Scripted.calls == 36  # the judge step was skipped


def test_pairwise_judge_on_a_pair_file(tmp_path: Path, scripted_backend: str) -> None:
    rows = []
    for i in range(40):
        good, bad = f"the answer to question {i} is {i} apples", f"maybe {i}"
        a_first = i % 2 == 0
        rows.append({"id": f"p{i}", "instruction": f"question {i}?", "reference": good,
                     "system_a": "x" if a_first else "y", "system_b": "y" if a_first else "x",
                     "response_a": good if a_first else bad, "response_b": bad if a_first else good,
                     "pref_1": 1 if a_first else -1, "pref_2": 1 if a_first else (0 if i % 4 == 1 else -1)})
    write_table(pd.DataFrame(rows), tmp_path / "pairs.jsonl")
    cfg = {"version": 1, "name": "pairs", "evaluations": [{
        "name": "pairs", "data": {"file": "pairs.jsonl"}, "metrics": ["rouge_l"],
        "judges": [{"mode": "pairwise", "backend": scripted_backend, "model": "len", "name": "cmp"}],
        "meta": {"resampling": {"n_resamples": 10, "n_permutations": 10}}}], "report": {"formats": ["csv"]}}
    out = tmp_path / "out"
    _run(["run", str(_write(tmp_path / "p.yaml", cfg)), "--out", str(out)])
    assert _Scripted.calls == 80  # both orders of 40 pairs
    judged = pd.read_json(out / "pairs" / "pairs.jsonl", lines=True)
    assert (judged["cmp"] == ["A" if i % 2 == 0 else "B" for i in range(40)]).all()
    trust = pd.read_csv(out / "pairs" / "trust_preference_accuracy_item.csv")
    trust = trust[trust["group"] == "(all)"].set_index("metric")
    assert trust.loc["cmp", "kind"] == "judge" and trust.loc["rouge_l", "kind"] == "metric"
    # the majority of pref_1 and pref_2 is the better response in every pair (a tie where they split: 10 pairs)
    ties = sum(1 for i in range(40) if i % 4 == 1)
    assert trust.loc["cmp", "value"] == pytest.approx((40 - ties) / 40)
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())["evaluations"][0]
    assert resolved["meta"]["human"]["pref_columns"] == ["pref_1", "pref_2"]
    from evalign.judges.grading import judge_class

    cls = judge_class("pairwise")
    judge = resolved["judges"][0]
    assert judge["template"] == cls.default_template and judge["rubric"] == "helpfulness"
    assert judge["options"]["both_orders"] is True and judge["options"]["tie"] is False
    assert {k: judge["options"][k] for k in cls.sampling_defaults} == dict(cls.sampling_defaults)
    # the resolved config names the same judge: its step is skipped, no call is made
    _run(["run", str(out / "resolved.yaml")])
    assert _Scripted.calls == 80
    assert json.loads((out / "run.json").read_text())["evaluations"]["pairs"]["skipped"] == [
        "metric rouge_l", "judge cmp", "meta-evaluation"]


# ------------------------------------------------------------------------------------------------
# errors: file, line, key, did you mean; exit 2


BASE = """version: 1
name: bad
evaluations:
  - name: a
    data: {dataset: pandalm}
"""


@pytest.mark.parametrize(("tail", "expected"), [
    ("    metircs: [bleu]\n", "bad.yaml, line 6, in 'evaluations[1]': unknown key 'metircs' (did you mean 'metrics'?)"),
    ("    metrics: [bleu]\n    meta: {levl: item}\n",
     "bad.yaml, line 7, in 'evaluations[1].meta': unknown key 'levl' (did you mean 'level'?)"),
    ("    metrics: [bleu]\n    meta:\n      resampling: {n_resamples: 10, seeed: 3}\n",
     "bad.yaml, line 8, in 'evaluations[1].meta.resampling': unknown key 'seeed' (did you mean 'seed'?)"),
    ("    metrics: [bleu]\n    meta:\n      resampling:\n        n_resamples: 0\n",
     "bad.yaml, line 9, field 'evaluations[1].meta.resampling.n_resamples': must be an integer >= 1, got 0"),
    ("    metrics: [bleuu]\n", "bad.yaml, line 6: unknown metric 'bleuu' (did you mean 'bleu'?)"),
    ("    metrics:\n      - name: chrf\n        options: {char_ordr: 3}\n",
     "bad.yaml, line 8: metric 'chrf': unknown option 'char_ordr' (did you mean 'char_order'?)"),
    ("    metrics:\n      - name: chrf\n        options:\n          char_order: -3\n",
     "bad.yaml, line 9: option chrf.char_order: must be an integer >= 1, got -3"),
    ("    judges:\n      - {mode: pairwise, model: m, base_url: 'http://x/v1', api_key: sk-123}\n",
     "field 'evaluations[1].judges[1].api_key': a key is never written in a config"),
    ("    judges:\n      - {mode: pairwise, model: m, base_url: 'http://x/v1', api_key_env: sk-123abc-}\n",
     "api_key_env': must be the NAME of an environment variable"),
    ("    judges:\n      - mode: pairwise\n        model: m\n        base_url: http://x/v1\n"
     "        options: {temprature: 0}\n",
     "bad.yaml, line 10, in 'evaluations[1].judges[1].options': unknown key 'temprature' (did you mean "
     "'temperature'?)"),
    ("    judges:\n      - {mode: pairwse, model: m, base_url: 'http://x/v1'}\n",
     "bad.yaml, line 7: unknown judge or mode 'pairwse' (did you mean 'pairwise'?)"),
])
def test_config_errors_name_file_line_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str,
                                              expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text(BASE + tail, encoding="utf-8")
    res = _run(["run", "bad.yaml", "--dry-run"], code=2)
    text = " ".join(res.output.split())
    assert expected in text and "Traceback" not in text
    assert text.count("error:") == 1


def test_bad_yaml_and_missing_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("broken.yaml").write_text("version: 1\nevaluations: [\n  name: x\n", encoding="utf-8")
    res = _run(["run", "broken.yaml"], code=1)
    assert "broken.yaml, line" in res.output and "not valid YAML" in res.output
    res = _run(["run", "nope.yaml"], code=2)
    assert "nope.yaml: no such config file" in res.output and "demo" in res.output


def test_docs_config_example_is_a_valid_config(tmp_path: Path) -> None:
    import re

    from evalign.run.config import parse_config
    from evalign.run.marks import load_marked

    page = (Path(__file__).resolve().parents[2] / "docs" / "config.md").read_text(encoding="utf-8")
    block = re.findall(r"<!-- run: config -->\n```yaml\n(.*?)```", page, re.S)[0]
    (tmp_path / "verdicts.jsonl").write_text("", encoding="utf-8")  # the example's verdict file, beside it
    cfg = parse_config(load_marked(block, "docs/config.md"), file="docs/config.md", base=tmp_path)
    ev = cfg.evaluations[0]
    assert cfg.name == "pandalm-study" and [m.name for m in cfg.metrics] == ["rouge_l", "chrf"]
    assert ev.judges[0].api_key_env == "MY_JUDGE_KEY" and ev.judges[0].options == {"tie": True}
    assert ev.meta["resampling"]["n_resamples"] == 1000 and ev.columns[0].name == "judge:pandalm-7b"
    board = cfg.leaderboards[0]
    assert board.spec.column == "judge:pandalm-7b" and board.spec.board.baseline == "text-davinci-003"
    assert board.trust_evaluation == "pandalm" and board.verdicts == (tmp_path / "verdicts.jsonl").resolve()


def test_dry_run_never_prints_credentials_of_a_judge_base_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("cfg.yaml").write_text(BASE + "    judges:\n      - {mode: pairwise, model: m, base_url: "
                                "'http://alice:PW-SECRET-4242@127.0.0.1:9/v1'}\n", encoding="utf-8")
    res = _run(["run", "cfg.yaml", "--dry-run"])
    assert "PW-SECRET-4242" not in res.output and "alice" not in res.output
    judge = yaml.safe_load(res.stdout)["evaluations"][0]["judges"][0]
    assert judge["base_url"] == "http://127.0.0.1:9/v1"  # the URL is kept, without its credentials


# ------------------------------------------------------------------------------------------------
# a leaderboard step: pairwise verdicts ranked, with the trust of their judge from an evaluation of the run

JUDGE = "judge:gpt-3.5-turbo"


def _verdicts(path: Path) -> Path:
    rows = []
    for i in range(12):
        for a, b, v in (("x", "y", "A" if i % 3 else "B"), ("y", "z", "A" if i % 4 else "tie"), ("z", "x", "B")):
            rows.append({"id": f"q{i}", "system_a": a, "system_b": b, JUDGE: v, "len_a": 10 + i, "len_b": 20 - i})
    write_table(pd.DataFrame(rows), path)
    return path


def test_leaderboard_step_with_the_judges_trust_and_report_section(tmp_path: Path) -> None:
    from evalign.rank import BTSettings, LeaderboardSettings
    from evalign.rank.leaderboard_run import LeaderboardSpec, judge_trust, run_leaderboard

    _verdicts(tmp_path / "verdicts.jsonl")
    cfg = {"version": 1, "name": "lb", "evaluations": [{
        "name": "pandalm", "data": {"dataset": "pandalm"}, "columns": [JUDGE],
        "meta": {"resampling": {"n_resamples": 20, "n_permutations": 20}}}],
        "leaderboards": [{"name": "board", "verdicts": "verdicts.jsonl", "verdict": JUDGE, "baseline": "z",
                          "bootstrap": 50, "seed": 3}],
        "report": {"formats": ["html", "json", "csv"]}}
    out = tmp_path / "out"
    _run(["run", str(_write(tmp_path / "lb.yaml", cfg)), "--out", str(out)])
    trust_rows = pd.read_csv(out / "pandalm" / "trust_preference_accuracy_item.csv")
    row = trust_rows[(trust_rows["group"] == "(all)") & (trust_rows["metric"] == JUDGE)].iloc[0]
    board = json.loads((out / "leaderboards" / "board.json").read_text())
    assert board["judge"]["trust"]["value"] == pytest.approx(row["value"])
    assert board["judge"]["trust"]["low"] == pytest.approx(row["ci_low"])
    assert board["judge"]["trust"]["statistic"] == "preference_accuracy"
    # the same numbers as the command / the API on the same file
    spec = LeaderboardSpec(verdict=JUDGE, board=LeaderboardSettings(baseline="z", bt=BTSettings(n_bootstrap=50,
                                                                                                 seed=3)))
    api = run_leaderboard(tmp_path / "verdicts.jsonl", spec)
    table = pd.read_csv(out / "leaderboards" / "board.csv")
    assert table["system"].tolist() == api.board.table["system"].tolist()
    np.testing.assert_allclose(table["bt_score"], api.board.table["bt_score"])
    np.testing.assert_allclose(table["win_rate"], api.board.table["win_rate"])
    # the report's section: the judge with its trust, the table, the forest plot and the heatmap
    page = (out / "report.html").read_text()
    section = page.split('<section id="pairwise_leaderboard">', 1)[1].split("</section>", 1)[0]
    t = judge_trust(json.loads((out / "pandalm" / "evaluation.json").read_text()), JUDGE)
    assert t is not None and f"judge: {JUDGE}; agreement with humans: {t.line()}" in html_unescape(section)
    assert 'id="fig-pairwise_leaderboard_bt"' in section and 'id="fig-pairwise_leaderboard_win_rates"' in section
    assert (out / "pairwise_leaderboard_bt.png").is_file() or (out / "figures" / "pairwise_leaderboard_bt.png").is_file()
    # the resolved config has every option, and reproduces the leaderboard
    resolved = yaml.safe_load((out / "resolved.yaml").read_text())
    entry = resolved["leaderboards"][0]
    assert entry["verdicts"] == os.path.relpath(tmp_path / "verdicts.jsonl", out) and entry["resample"] == "battles"
    assert entry["bootstrap"] == 50 and entry["lc"] is True and entry["trust"] == {"evaluation": None, "column": None}
    _run(["run", str(out / "resolved.yaml")])
    assert json.loads((out / "leaderboards" / "board.json").read_text())["systems"] == board["systems"]


def html_unescape(text: str) -> str:
    import html

    return html.unescape(" ".join(text.split()))


@pytest.mark.parametrize(("entry", "expected"), [
    ({"verdicts": "verdicts.jsonl", "baselin": "z"},
     "lb.yaml, line 11, in 'leaderboards[1]': unknown key 'baselin' (did you mean 'baseline'?)"),
    ({"verdicts": "verdicts.jsonl", "resample": "pairs"},
     "lb.yaml, line 11, field 'leaderboards[1].resample': --resample must be one of battles, items, got 'pairs'"),
    ({"verdicts": "nope.jsonl"}, "field 'leaderboards[1].verdicts': no such file"),
    ({"verdict": "v"}, "field 'leaderboards[1]': a leaderboard needs 'verdicts'"),
    ({"verdicts": "verdicts.jsonl", "trust": {"evaluation": "other"}},
     "field 'leaderboards[1].trust.evaluation': no evaluation named 'other' in this config (evaluations: a)"),
    ({"verdicts": "verdicts.jsonl", "bootstrap": "many"},
     "field 'leaderboards[1].bootstrap': must be an integer, got the text 'many'"),
])
def test_leaderboard_config_errors_name_the_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 entry: dict[str, Any], expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    _verdicts(tmp_path / "verdicts.jsonl")
    cfg = {"version": 1, "name": "bad", "evaluations": [{"name": "a", "data": {"dataset": "pandalm"},
                                                         "columns": [JUDGE]}], "leaderboards": [entry]}
    _write(tmp_path / "lb.yaml", cfg)
    res = _run(["run", "lb.yaml", "--dry-run"], code=2)
    text = " ".join(res.output.split())
    assert expected in text and text.count("error:") == 1, text
