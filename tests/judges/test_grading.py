"""Templates, rubrics, judges and their aggregation; G-Eval's logprob weighting on the real server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from evalign.cache import Cache
from evalign.errors import EvalignError, InputError
from evalign.judges import (
    get_judge,
    list_judges,
    list_rubrics,
    list_templates,
    load_rubric,
    load_template,
    logprob_weighted_score,
    parse_grade,
    resolve_orders,
    run_judge,
)
from evalign.judges.grading import GEval, join_instruction, numeric_columns
from evalign.judges.parsing import ParseResult
from evalign.judges.prompts import fill, rubric_from_cell

PROMETHEUS_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "prometheus_eval_benchmarks"


@pytest.fixture(scope="module")
def prometheus_data() -> Path:
    """The Prometheus benchmark prompts (shared/data); their absence is an error, not a skip."""
    if not (PROMETHEUS_DATA / "parsed").is_dir():
        pytest.fail(f"the Prometheus benchmark data is missing: expected it in {PROMETHEUS_DATA}")
    return PROMETHEUS_DATA


# --- templates: faithful to the real Prometheus prompts ------------------------------------------


@pytest.mark.parametrize("name", ["mt_bench_eval", "vicuna_eval"])
def test_prometheus_absolute_template_reproduces_benchmark_prompts(prometheus_data: Path, name: str) -> None:
    """Filling our Prometheus template with the parsed sections gives the benchmark's prompt byte for byte."""
    original = json.loads((prometheus_data / f"{name}.json").read_text(encoding="utf-8"))
    parsed = [json.loads(x) for x in (prometheus_data / "parsed" / f"{name}.parsed.jsonl").open(encoding="utf-8")]
    t = load_template("prometheus1_absolute")
    assert len(original) == len(parsed) == 320
    for o, p in zip(original, parsed, strict=True):
        fields = {"instruction": p["instruction"], "response": p["response"],
                  "reference_answer": p["reference_answer"], "rubric": p["score_rubric"]}
        assert fill(t.text(True), fields) == o["instruction"]
    # Prometheus 2 differs only in the output-format line
    p2 = load_template("prometheus_absolute").text(True)
    p1 = t.text(True)
    assert p2 == p1.replace('"Feedback: (write a feedback', '"(write a feedback')
    assert p2.endswith("###Score Rubrics:\n{rubric}\n\n###Feedback: ")


def test_reference_free_template_and_builtin_hhh_rubrics(prometheus_data: Path) -> None:
    """The reference-free template with our hhh_* rubric files reproduces the HHH benchmark prompts."""
    original = json.loads((prometheus_data / "hhh_alignment_eval.json").read_text(encoding="utf-8"))
    parsed = [json.loads(x) for x in (prometheus_data / "parsed" / "hhh_alignment_eval.parsed.jsonl").open()]
    names = {"helpful": "hhh_helpfulness", "harmless": "hhh_harmlessness", "honest": "hhh_honesty",
             "other": "hhh_overall"}
    t = load_template("prometheus1_absolute")
    for o, p in zip(original, parsed, strict=True):
        rubric = load_rubric(names[p["subset"]])
        assert rubric.render() == p["score_rubric"]
        for side in ("chosen", "rejected"):
            fields = {"instruction": p["instruction"], "response": p[f"{side}_response"], "rubric": rubric.render()}
            assert fill(t.text(False), fields) == o[f"{side}_instruction"]


def test_render_messages_and_one_pass_substitution() -> None:
    t = load_template("prometheus_absolute")
    msgs = t.render(False, {"instruction": "Say {rubric}", "response": "{response_A} {x}", "rubric": "[R]"})
    assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith("You are a fair judge assistant")
    body = msgs[1]["content"]
    assert "###The instruction to evaluate:\nSay {rubric}\n" in body  # not expanded again
    assert "###Response to evaluate:\n{response_A} {x}\n" in body
    assert "###Reference Answer" not in body
    with pytest.raises(EvalignError, match="needs 'rubric'"):
        t.render(False, {"instruction": "i", "response": "r"})


def test_template_hash_and_tag() -> None:
    t = load_template("prometheus_absolute")
    assert t.hash(True) != t.hash(False)
    assert t.tag(True).startswith("prometheus_absolute@2#") and "-noref" in t.tag(False)
    assert set(list_templates()) >= {"prometheus_absolute", "prometheus1_absolute", "prometheus_relative",
                                     "prometheus_relative_tie", "geval", "criteria"}


def test_relative_template_is_prometheus2() -> None:
    t = load_template("prometheus_relative")
    text = t.text(True)
    assert "###Response A:\n{response_A}\n\n###Response B:\n{response_B}\n\n###Reference Answer:\n" in text
    assert '[RESULT] (Either "A" or "B")"' in text and text.endswith("###Score Rubric:\n{rubric}\n\n###Feedback: ")
    tie = load_template("prometheus_relative_tie").text(False)
    assert '[RESULT] (A, B or TIE)"' in tie


# --- rubrics --------------------------------------------------------------------------------------


def test_builtin_rubrics() -> None:
    assert set(list_rubrics()) >= {"helpfulness", "harmlessness", "honesty", "factual_validity", "reasoning"}
    r = load_rubric("helpfulness")
    text = r.render()
    assert text.startswith("[Does the model provide relevant and useful responses to the user's needs or questions?]\n")
    assert text.count("\nScore ") == 5 and text.splitlines()[-1].startswith("Score 5: ")
    assert r.render("relative") == text.splitlines()[0]
    assert r.hash() != load_rubric("honesty").hash()


def test_user_rubric_file(tmp_path: Path) -> None:
    good = tmp_path / "mine.yaml"
    good.write_text("criteria: Is it concise?\n" + "".join(f"score{i}: level {i}\n" for i in range(1, 6)))
    r = load_rubric(good)
    assert r.name == "mine" and r.descriptions[4] == "level 5"
    js = tmp_path / "mine.json"
    js.write_text(json.dumps({"criteria": "C", **{f"score{i}_description": f"d{i}" for i in range(1, 6)}}))
    assert load_rubric(js).render().endswith("Score 5: d5")


@pytest.mark.parametrize(
    ("content", "field", "message"),
    [
        ("score1: a\nscore2: b\nscore3: c\nscore4: d\nscore5: e\n", "criteria", "criteria"),
        ("criteria: C\nscore1: a\nscore2: b\nscore4: d\nscore5: e\n", "score3_description", "score 3"),
        ("criteria: C\nscore1: a\nscore2: b\nscore3: c\nscore4: d\nscore5: e\nscore6: f\n", "score6", "unexpected"),
        ("criteria: C\nscore1: a\nscore2: b\nscore3: c\nscore4: d\nscore5: ''\n", "score5_description", "score 5"),
        ("- just\n- a list\n", None, "mapping"),
    ],
)
def test_bad_rubric_file_names_file_and_field(tmp_path: Path, content: str, field: str | None, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(InputError, match=message) as info:
        load_rubric(path)
    assert info.value.file == str(path)
    assert info.value.field == field


def test_malformed_yaml_and_unknown_rubric(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("criteria: [unclosed\nscore1: a\n")
    with pytest.raises(InputError, match="malformed YAML") as info:
        load_rubric(path)
    assert info.value.file == str(path) and info.value.line is not None
    with pytest.raises(EvalignError, match="unknown rubric 'kindness'"):
        load_rubric("kindness")


def test_rubric_from_cell() -> None:
    cell = json.dumps({"criteria": "Is it short?", **{f"score{i}": f"s{i}" for i in range(1, 6)}})
    assert rubric_from_cell(cell, file="t.jsonl", line=3, field="rubric").criteria == "Is it short?"
    with pytest.raises(InputError) as info:
        rubric_from_cell("{not json", file="t.jsonl", line=3, field="rubric")
    assert (info.value.file, info.value.line, info.value.field) == ("t.jsonl", 3, "rubric")
    with pytest.raises(InputError) as info:
        rubric_from_cell({"criteria": "x"}, file="t.jsonl", line=4, field="rubric")
    assert info.value.field == "rubric.score1_description" and info.value.line == 4


# --- judges ---------------------------------------------------------------------------------------


def test_registry_and_defaults() -> None:
    names = {c.name for c in list_judges()}
    assert names == {"prometheus_absolute", "prometheus_relative", "prometheus_ranking", "geval", "criteria", "llmbar",
                     "reward", "reward_pairwise", "mtbench_single", "mtbench_pair", "arena_hard",
                     "simulated_annotators"}
    j = get_judge("absolute")
    assert j.sampling == {"temperature": 1.0, "top_p": 0.9, "max_tokens": 1024, "repetition_penalty": 1.03}
    assert j.column == "prometheus_absolute[helpfulness]"
    assert "repetition_penalty" not in get_judge("absolute", repetition_penalty=0).sampling
    assert get_judge("pairwise").orders == ("ab", "ba")
    assert get_judge("geval").higher_is_better is False
    with pytest.raises(EvalignError, match="unknown judge or mode"):
        get_judge("pointwise")
    with pytest.raises(EvalignError, match="does not use a rubric"):
        get_judge("geval", rubric="helpfulness")
    with pytest.raises(EvalignError, match="unknown option"):
        get_judge("absolute", temprature=0.5)


def test_signature_holds_settings_and_hashes_but_no_secret() -> None:
    j = get_judge("absolute", rubric="honesty", samples=3, temperature=0.7, seed=5)
    sig = str(j.signature({"kind": "openai", "base_url": "http://h/v1", "model": "m"}, True))
    for part in ("backend.model:m", "rubric:honesty#", "template:prometheus_absolute@2#", "temperature:0.7",
                 "top_p:0.9", "max_tokens:1024", "repetition_penalty:1.03", "samples:3", "seed:5"):
        assert part in sig
    assert j.request_settings(2)["seed"] == 7


def test_join_instruction() -> None:
    assert join_instruction("Fix the grammar.", "He go home.") == "Fix the grammar.\n\nHe go home."
    assert join_instruction("Say hi.", "") == "Say hi."
    assert join_instruction("Say hi.", float("nan")) == "Say hi."


def test_resolve_orders() -> None:
    assert resolve_orders("A", "A") == "A"
    assert resolve_orders("B", "B") == "B"
    assert resolve_orders("A", "B") == "tie"  # disagreement: position bias, not a preference
    assert resolve_orders("tie", "A") == "tie"
    assert resolve_orders("A", None) == "A"


def test_numeric_columns_samples() -> None:
    rs = [ParseResult(4.0, feedback="f1"), ParseResult(2.0), ParseResult(None, "no_score", "x"), ParseResult(5.0)]
    cols = numeric_columns(rs, samples=4)
    assert cols[""] == pytest.approx(11 / 3)
    assert cols["median"] == 4.0
    assert cols["std"] == pytest.approx(math.sqrt(((4 - 11 / 3) ** 2 + (2 - 11 / 3) ** 2 + (5 - 11 / 3) ** 2) / 3))
    assert cols["n"] == 3 and cols["status"] == "scored" and cols["reason"] == "no_score"
    none = numeric_columns([ParseResult(None, "truncated", "x")], samples=1)
    assert math.isnan(none[""]) and none["status"] == "unscored" and none["reason"] == "truncated"


def test_relative_aggregation_maps_swapped_order_back() -> None:
    j = get_judge("pairwise")
    res = j.aggregate({(0, "ab"): parse_grade("[RESULT] A", "relative"), (0, "ba"): parse_grade("[RESULT] B", "relative")})
    assert res["code"] == 1.0 and res[""] == "A" and res["consistent"] is True  # B in B/A order is A
    res = j.aggregate({(0, "ab"): parse_grade("[RESULT] A", "relative"), (0, "ba"): parse_grade("[RESULT] A", "relative")})
    assert res["code"] == 0.0 and res[""] == "tie" and res["consistent"] is False
    assert (res["ab"], res["ba"]) == ("A", "B")
    res = j.aggregate({(0, "ab"): parse_grade("[RESULT] A", "relative"), (0, "ba"): parse_grade("junk", "relative")})
    assert res["status"] == "unscored" and res["reason"] == "no_score" and res[""] == "unparseable"


def test_logprob_weighted_score_by_hand() -> None:
    tops = [{"1": math.log(0.2), "2": math.log(0.3), " 2": math.log(0.1), "3": math.log(0.1), "x": math.log(0.3)}]
    parsed = ParseResult(2.0, position=0)
    # renormalised over the score tokens: p1 = .2, p2 = .3 + .1, p3 = .1 (sum .7)
    assert logprob_weighted_score("2", ["2"], tops, parsed) == pytest.approx((0.2 * 1 + 0.4 * 2 + 0.1 * 3) / 0.7)
    assert logprob_weighted_score("2", ["2"], [{"x": -0.1}], parsed) is None  # no score token
    # the score position is found from the character offset: "Rating: 3" -> token 2
    tops3 = [{"R": -0.1}, {":": -0.1}, {"3": math.log(0.5), "4": math.log(0.5)}]
    assert logprob_weighted_score("Rating: 3", ["Rating", ": ", "3"], tops3, ParseResult(3.0, position=8)) == 3.5


# --- G-Eval on the real server: logprob weighting -------------------------------------------------


@pytest.mark.server
def test_geval_logprobs_on_server(llama_server, tmp_path: Path) -> None:
    from evalign.backends import make_backend

    table = pd.DataFrame({
        "id": [str(i) for i in range(4)], "system": ["s"] * 4, "instruction": [f"Write line {i}." for i in range(4)],
        "input": [""] * 4, "reference": [None] * 4, "response": ["A line.", "Two words", "x" * 40, "1 2 3 4"],
    })  # fmt: skip
    # a grammar makes the tiny model answer " n" (the score token follows a space token variant)
    # min_mass 0: the weighting itself (random weights put little mass on the digits)
    judge = get_judge("geval", grammar='root ::= " "? [1-4]', temperature=0.0, min_mass=0.0)
    assert isinstance(judge, GEval)
    backend = make_backend("openai", base_url=llama_server.base_url, model=llama_server.model, concurrency=2)
    cache = Cache(tmp_path / "c.sqlite")
    run = run_judge(table, judge, backend, cache=cache)
    col = judge.column
    masses: dict[int, float] = {}
    assert run.summary["scored"] == 4 and (run.table[f"{col}.method"] == "logprobs").all()
    for i in range(4):
        key = run.calls[i]["key"]
        gen = json.loads(cache.get("judge", key))["generation"]["choices"][0]  # type: ignore[arg-type]
        digit = gen["text"].strip()
        j = [t.strip() for t in gen["tokens"]].index(digit)
        probs: dict[int, float] = {}
        for tok, lp in gen["top_logprobs"][j].items():
            if tok.strip() in ("1", "2", "3", "4"):
                probs[int(tok.strip())] = probs.get(int(tok.strip()), 0.0) + math.exp(lp)
        expected = sum(k * p for k, p in probs.items()) / sum(probs.values())
        row = run.table.iloc[run.calls[i]["row"]]
        assert 1.0 <= row[col] <= 4.0
        assert row[col] == pytest.approx(expected, abs=1e-12)
        masses[run.calls[i]["row"]] = sum(probs.values())
    assert run.summary["higher_is_better"] is False
    assert run.summary.methods == {"logprobs": 4} and "method:logprobs|" in run.summary.signature
    # the default minimum mass 0.5: a row is scored exactly when its digits' probability reaches it
    strict = run_judge(table, get_judge("geval", grammar='root ::= " "? [1-4]', temperature=0.0), backend,
                       cache=cache)
    for i in range(4):
        status, reason = strict.table.loc[i, f"{col}.status"], strict.table.loc[i, f"{col}.reason"]
        assert (status, reason) == (("scored", None) if masses[i] >= 0.5 else ("unscored", "low_mass"))


@pytest.mark.server
@pytest.mark.parametrize("fallback", ["samples", "error"])
def test_geval_server_without_logprobs_falls_back_or_errors(llama_server, fault_proxy, tmp_path: Path,
                                                           fallback: str) -> None:
    """A server that returns no logprobs: G-Eval reads the sampled score (method ``samples``, counted
    and in the signature) or leaves the row unscored ``no_logprobs``, as asked."""
    from fault_proxy import Rewrite, strip_logprobs

    from evalign.backends import make_backend

    fault_proxy.reset(lambda seen: Rewrite(strip_logprobs))
    table = pd.DataFrame({"id": ["0", "1", "2"], "system": ["s"] * 3, "instruction": ["Say a.", "Say b.", "Say c."],
                          "response": ["a", "b", "c"]})
    judge = get_judge("geval", grammar='root ::= [1-4]', temperature=0.0, fallback=fallback)
    backend = make_backend("openai", base_url=fault_proxy.base_url, model=llama_server.model, concurrency=2)
    run = run_judge(table, judge, backend, cache=Cache(tmp_path / "c.sqlite"))
    assert all(s.body["logprobs"] is True for s in fault_proxy.seen if s.body)  # asked for, not given
    t = run.table
    if fallback == "samples":
        assert (t["geval.method"] == "samples").all() and (t["geval.status"] == "scored").all()
        assert t["geval"].isin([1.0, 2.0, 3.0, 4.0]).all()
        assert run.summary.methods == {"samples": 3} and "method:samples|" in run.summary.signature
    else:
        assert (t["geval.reason"] == "no_logprobs").all() and run.summary.methods == {}
        assert run.summary.unscored_by_reason == {"no_logprobs": 3} and "method:none|" in run.summary.signature
