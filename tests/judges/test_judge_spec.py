"""``evalign.judges.spec``: a judge as a frozen :class:`JudgeSpec` (to a dict and back, no secret in it),
built by the one :func:`make_judge` that every command goes through, its template read once, and
``--constrain`` refused by one rule with the same words wherever it is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import evalign.judges.base as judges_base
import evalign.judges.prompts as prompts
import evalign.judges.spec as judge_spec_module
from evalign.backends.spec import BackendSpec
from evalign.bench.judges import BenchJudge, parse_judge
from evalign.bench.suite import Recipe
from evalign.cli import app
from evalign.errors import EvalignError, UsageError
from evalign.judges import get_judge
from evalign.judges.base import JUDGES, judge_class
from evalign.judges.spec import JudgeSpec, make_judge

CONSTRAIN_ERROR = "--constrain (constrain) must be one of auto, on, off, got 'maybe'"
SERVER = "http://127.0.0.1:9/v1"  # nothing listens: every test here stops before a call

#: one spec per built-in judge, each with settings of its own
SPECS: dict[str, JudgeSpec] = {
    "prometheus_absolute": JudgeSpec(mode="absolute", rubric="honesty", decoding={"temperature": 0.0, "seed": 3},
                                     samples=2, reask=1, reference=False, column="abs"),
    "prometheus_relative": JudgeSpec(mode="pairwise", template="prometheus_relative_tie", rubric="helpfulness",
                                     both_orders=False, options={"tie": True}, constrain="off"),
    "geval": JudgeSpec(mode="geval", decoding={"max_tokens": 5}, options={"fallback": "error", "min_mass": 0.25}),
    "criteria": JudgeSpec(mode="criteria", criteria=("helpfulness", "honesty"), options={"score_criterion": "honesty"},
                          json_schema={"type": "object"}),
    "prometheus_ranking": JudgeSpec(mode="ranking", rubric_column="task", rubric_map=("helpful=helpfulness",),
                                    decoding={"temperature": 0.7}, options={"max_rounds": 3, "max_unparseable": 1}),
    "llmbar": JudgeSpec(mode="llmbar", template="llmbar_cot", options={"logit_bias": True}, constrain="on"),
    "mtbench_single": JudgeSpec(mode="mtbench_single", grammar='root ::= "[[" [1-9] "]]"'),
    "mtbench_pair": JudgeSpec(mode="mtbench_pair", both_orders=False),
    "arena_hard": JudgeSpec(mode="arena_hard", decoding={"max_tokens": 64}),
    "simulated_annotators": JudgeSpec(mode="simulated_annotators", options={"prompt": "evalign"}, column="sim"),
    "reward": JudgeSpec(mode="reward", column="rm",
                        backend=BackendSpec(kind="reward", model="/models/rm", options={"device": "cpu"})),
    "reward_pairwise": JudgeSpec(mode="reward_pairwise", options={"tie_margin": 0.5},
                                 backend=BackendSpec(kind="openai", model="m", url=(SERVER,),
                                                     options={"api_key_env": "JUDGE_KEY", "concurrency": 2})),
}


def test_every_builtin_judge_has_a_spec_here() -> None:
    builtin = {n for n in JUDGES.names() if judge_class(n).__module__.startswith("evalign.judges.modes.")}
    assert set(SPECS) == builtin


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_spec_goes_to_a_dict_and_back_for_every_mode(name: str) -> None:
    spec = SPECS[name]
    data = json.loads(json.dumps(spec.to_dict()))  # plain JSON values
    back = JudgeSpec.from_dict(data)
    assert back == spec and back.to_dict() == spec.to_dict()
    a, b = make_judge(spec), make_judge(back)
    assert type(a).name == name == type(b).name
    assert str(a.signature({"model": "m"}, False)) == str(b.signature({"model": "m"}, False))
    assert a.column == b.column


def test_make_judge_builds_what_get_judge_builds() -> None:
    """The spec's constructor options are those of get_judge (the API), and from_options reads them back."""
    opts = {"rubric": "honesty", "temperature": 0.0, "seed": 3, "samples": 2, "reask": 1, "column": "abs"}
    via_api = get_judge("absolute", **opts)
    spec = JudgeSpec.from_options("absolute", opts)
    assert spec.judge_options() == opts
    assert str(make_judge(spec).signature({}, True)) == str(via_api.signature({}, True))
    ranking = JudgeSpec.from_options("ranking", {"max_rounds": 2, "temperature": 0.5, "criteria": None})
    assert ranking.options == {"max_rounds": 2} and ranking.decoding == {"temperature": 0.5}


def test_a_spec_holds_no_secret() -> None:
    spec = JudgeSpec(mode="pairwise", backend=BackendSpec(kind="openai", model="m",
                                                          url=("http://alice:PW-4242@127.0.0.1:9/v1",),
                                                          options={"api_key_env": "JUDGE_KEY"}))
    for shown in (repr(spec), json.dumps(spec.to_dict())):
        assert "PW-4242" not in shown and "alice" not in shown and "JUDGE_KEY" in shown
    assert spec.to_dict()["backend"]["url"] == [SERVER]


def test_a_spec_refuses_what_is_not_a_setting() -> None:
    with pytest.raises(UsageError, match="unknown decoding setting 'temprature'"):
        JudgeSpec(mode="absolute", decoding={"temprature": 0})
    with pytest.raises(UsageError, match="option 'samples' is a setting of its own"):
        JudgeSpec(mode="absolute", options={"samples": 2})
    with pytest.raises(UsageError, match="unknown judge spec field 'rubrik'"):
        JudgeSpec.from_dict({"mode": "absolute", "rubrik": "x"})
    with pytest.raises(EvalignError, match=r"judge 'prometheus_absolute': unknown option\(s\) colour"):
        make_judge(JudgeSpec(mode="absolute", options={"colour": "red"}))  # the judge's own refusal, named
    with pytest.raises(EvalignError, match=r"judge 'prometheus_relative': unknown option\(s\) confidence_source"):
        make_judge(JudgeSpec(mode="pairwise", confidence="verbalized"))  # no built-in judge takes another source


# --- the template is read once ----------------------------------------------------------------------


@pytest.fixture
def template_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a template file or name (each module's name for :func:`load_template`)."""
    reads: list[str] = []
    real = prompts.load_template

    def counted(spec: Any) -> Any:
        reads.append(str(spec))
        return real(spec)

    for module in (prompts, judges_base, judge_spec_module):
        monkeypatch.setattr(module, "load_template", counted)
    return reads


def test_make_judge_reads_the_template_once(template_reads: list[str]) -> None:
    judge = make_judge(JudgeSpec(mode="pairwise", template="llmbar_cot"))
    assert type(judge).name == "llmbar" and template_reads == ["llmbar_cot"]
    template_reads.clear()
    judge = make_judge(JudgeSpec(mode="absolute"))  # the judge's own default: read by the judge, once
    assert judge.template.name == "prometheus_absolute" and template_reads == ["prometheus_absolute"]


def test_the_bench_reads_a_sets_template_once(template_reads: list[str]) -> None:
    """A recipe whose template's judge takes no rubric drops it, on the template already read (before: three
    reads, in bench/judges.py, get_judge and the judge)."""
    judge_ = parse_judge(f"x=openai:m@{SERVER},temperature=0.5")
    spec = judge_.for_set(Recipe(mode="pairwise", template="llmbar_cot", rubric="helpfulness"), kind="pairwise")
    judge = make_judge(spec)
    assert type(judge).name == "llmbar" and judge.rubric is None and judge.column == "x"
    assert judge.sampling["temperature"] == 0.5 and spec.backend == judge_.backend_spec
    assert template_reads == ["llmbar_cot"]


def test_evalign_judge_reads_the_template_once(template_reads: list[str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's judge: its class (which table to read) and the judge share one read."""
    built: list[Any] = []

    def stop(name: str, options: Any) -> Any:
        raise EvalignError("stopped before the backend")

    real = judge_spec_module.make_judge
    monkeypatch.setattr("evalign.cli.judge.make_judge", lambda spec: built.append(real(spec)) or built[-1])
    monkeypatch.setattr("evalign.cli.judge.checked_backend", stop)
    pairs = _pairs(tmp_path)
    res = CliRunner().invoke(app, ["judge", str(pairs), "--mode", "pairwise", "--template", "prometheus_relative_tie",
                                   "--base-url", SERVER, "--model", "m"])
    assert "stopped before the backend" in res.output
    assert [type(j).name for j in built] == ["prometheus_relative"]
    assert template_reads == ["prometheus_relative_tie"]


# --- --constrain: one rule, the same words from every command -----------------------------------------


def _items(tmp_path: Path) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": i, "system": "s", "instruction": f"Say {i}.", "response": "ok"}) + "\n"
                            for i in range(3)), encoding="utf-8")
    return path


def _pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "instruction": f"Say {i}.", "response_a": "a", "response_b": "bb",
                                        "system_a": "x", "system_b": "y"}) + "\n" for i in range(3)),
                    encoding="utf-8")
    return path


def _run_config(tmp_path: Path, options: dict[str, Any]) -> Path:
    path = tmp_path / "run.yaml"
    judge = {"mode": "pairwise", "model": "m", "base_url": SERVER, "options": options}
    path.write_text(json.dumps({"version": 1, "name": "t", "evaluations": [
        {"name": "a", "data": {"dataset": "pandalm"}, "judges": [judge]}]}), encoding="utf-8")
    return path


def test_constrain_is_refused_the_same_way_from_every_command(tmp_path: Path) -> None:
    items, pairs = _items(tmp_path), _pairs(tmp_path)
    backend = ["--base-url", SERVER, "--model", "m"]
    commands = {
        "judge": ["judge", str(items), *backend, "--constrain", "maybe"],
        "probe": ["probe", str(pairs), *backend, "--constrain", "maybe"],
        "bench": ["bench", "--judge", f"x=openai:m@{SERVER}", "--constrain", "maybe"],
        "bench judge option": ["bench", "--judge", f"x=openai:m@{SERVER},constrain=maybe"],
        "run": ["run", str(_run_config(tmp_path, {"constrain": "maybe"})), "--dry-run"],
    }
    for what, args in commands.items():
        res = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
        assert res.exit_code == 2, (what, res.output)
        assert CONSTRAIN_ERROR in " ".join(res.output.split()), (what, res.output)
        assert "Traceback" not in res.output
    for build in (lambda: get_judge("absolute", constrain="maybe"), lambda: JudgeSpec(mode="absolute", constrain="maybe"),
                  lambda: BenchJudge(name="x", backend="openai", model="m", base_url=(SERVER,),
                                     options={"constrain": "maybe"})):
        with pytest.raises(UsageError) as info:
            build()
        assert str(info.value) == CONSTRAIN_ERROR


def test_a_grammar_with_constrain_off_is_refused_the_same_way(tmp_path: Path) -> None:
    grammar = tmp_path / "g.gbnf"
    grammar.write_text('root ::= "[RESULT] " [1-5]', encoding="utf-8")
    res = CliRunner().invoke(app, ["judge", str(_items(tmp_path)), "--base-url", SERVER, "--model", "m",
                                   "--grammar", str(grammar), "--constrain", "off"], env={"COLUMNS": "400"})
    with pytest.raises(UsageError) as info:
        JudgeSpec(mode="absolute", grammar=grammar.read_text(), constrain="off")
    with pytest.raises(UsageError) as api:
        get_judge("absolute", json_schema={"type": "object"}, constrain="off")
    assert res.exit_code == 2 and str(info.value) == str(api.value) in " ".join(res.output.split())


# --- every command builds its judges through make_judge -----------------------------------------------


class _Built(EvalignError):
    """Raised by the stand-in make_judge once it has built the judge: nothing runs after it."""


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[JudgeSpec]:
    """The specs make_judge was called with, in every module that calls it (the call stops the command)."""
    seen: list[JudgeSpec] = []
    real = judge_spec_module.make_judge

    def spy(spec: JudgeSpec) -> Any:
        seen.append(spec)
        real(spec)
        raise _Built(f"built {spec.mode}")

    for where in ("evalign.judges.spec", "evalign.cli.judge", "evalign.run.execute", "evalign.bench.judging",
                  "evalign.train.verify"):
        monkeypatch.setattr(f"{where}.make_judge", spy)
    return seen


def test_evalign_judge_and_probe_build_through_make_judge(built: list[JudgeSpec], tmp_path: Path) -> None:
    backend = ["--base-url", SERVER, "--model", "m"]
    res = CliRunner().invoke(app, ["judge", str(_items(tmp_path)), *backend, "--rubric", "honesty", "--samples", "2"])
    assert "built absolute" in res.output
    assert built[-1].rubric == "honesty" and built[-1].samples == 2
    res = CliRunner().invoke(app, ["probe", str(_pairs(tmp_path)), *backend, "--single-order", "--temperature", "0"])
    assert "built pairwise" in res.output
    assert built[-1].both_orders is False and built[-1].decoding == {"temperature": 0.0}
    assert len(built) == 2


def test_evalign_run_builds_through_make_judge(built: list[JudgeSpec], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["run", str(_run_config(tmp_path, {"temperature": 0.0})), "-o", "out"])
    assert "built pairwise" in res.output, res.output
    assert [s.mode for s in built] == ["pairwise"] and built[0].decoding["temperature"] == 0.0
    assert built[0].template == judge_class("pairwise").default_template


def test_the_bench_builds_through_make_judge(built: list[JudgeSpec]) -> None:
    from evalign.bench import BenchSettings, run_bench

    with pytest.raises(_Built):
        run_bench([parse_judge(f"x=openai:m@{SERVER},max_tokens=99")], BenchSettings(per_set=5, sets=("hhh",)))
    assert [s.column for s in built] == ["x"] and built[0].decoding["max_tokens"] == 99
    assert built[0].backend == BackendSpec(kind="openai", model="m", url=(SERVER,))


def test_verify_builds_through_make_judge(built: list[JudgeSpec], tmp_path: Path) -> None:
    from evalign.train.verify import VerifyOptions, grade_dataset

    table = pd.read_json(_pairs(tmp_path), lines=True)
    with pytest.raises(_Built):
        grade_dataset(table, "pairwise", {"base": tmp_path}, VerifyOptions(template="llmbar_cot"))
    assert [(s.mode, s.template, s.column) for s in built] == [("pairwise", "llmbar_cot", "judge:base")]
