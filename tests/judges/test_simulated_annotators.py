"""Simulated annotators (:mod:`evalign.judges.modes.simulated`) and their few-shot files
(:mod:`evalign.io.fewshot`), without a model: both file formats (upstream's ``fewshot.jsonl``,
``evalign annotate`` exports written by the annotate store itself) and their errors (file, line,
field); the prompts (each annotator's examples shown, upstream's text or evalign's template); the
aggregation of the calls' verdict probabilities (mapped back from order ``ba``, averaged); the cache
key, which changes with the few-shot set."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalign.annotate.export import write_export
from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings
from evalign.errors import EvalignError, InputError
from evalign.io.data_dir import ENV_VAR
from evalign.io.fewshot import AnnotatorExamples, FewshotExample, read_fewshot, read_upstream_prompts
from evalign.judges import get_judge, read_pairs
from evalign.judges.base import prompt_text
from evalign.judges.modes.simulated import SimulatedAnnotators
from evalign.judges.prompts import load_template
from evalign.judges.runner import Call, call_key

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def shared_selective() -> Path:
    """The data folder's ``selective/`` (upstream's few-shot file and prompt text); missing is a failure."""
    root = Path(os.environ[ENV_VAR]) if os.environ.get(ENV_VAR) else SHARED
    if not (root / "selective" / "fewshot.jsonl").is_file():
        pytest.fail(f"the Trust or Escalate files are missing: expected them in {root}/selective (see SOURCE.md)")
    return root / "selective"


def upstream_line(name: str, samples: list[tuple[str, str, str, int]]) -> str:
    return json.dumps({"annotator": name, "evaluated_samples": [
        {"instruction": q, "outputs": [a, b], "preferences": {"human": h}} for q, a, b, h in samples]}) + "\n"


def write_upstream(path: Path) -> Path:
    path.write_text(
        upstream_line("ann_x", [("Name a fruit.", "Apple.", "Car.", 1), ("Add 1 and 1.", "3", "2", 2),
                                ("Say hi.", "Hi!", "Bye.", 1), ("Spell cat.", "c-a-t", "d-o-g", 1)])
        + upstream_line("ann_y", [("Name a colour.", "Table.", "Red.", 2), ("Capital of Peru?", "Lima.", "Oslo.", 1)])
        + upstream_line("ann_z", [("Pick a number.", "Seven.", "Blue.", 1)]), encoding="utf-8")
    return path


def test_upstream_format(tmp_path: Path) -> None:
    src = read_fewshot(write_upstream(tmp_path / "fewshot.jsonl"), examples=3)
    assert src.format == "upstream" and [a.annotator for a in src.annotators] == ["ann_x", "ann_y", "ann_z"]
    x, y, _ = src.annotators
    assert len(x.examples) == 3  # the first 3 of 4
    assert x.examples[1] == FewshotExample("Add 1 and 1.", "3", "2", "B")
    assert [e.preferred for e in y.examples] == ["B", "A"]
    assert [a.annotator for a in src.first(2)] == ["ann_x", "ann_y"]
    with pytest.raises(InputError, match="has 3 annotator"):
        src.first(4)
    assert len(read_fewshot(tmp_path / "fewshot.jsonl").annotators[0].examples) == 4  # None: all


def test_upstreams_own_files_from_the_data_folder() -> None:
    folder = shared_selective()
    src = read_fewshot(folder / "fewshot.jsonl")
    assert src.format == "upstream" and [a.annotator for a in src.annotators] == ["human_0", "human_1", "human_2"]
    raw = [json.loads(line) for line in (folder / "fewshot.jsonl").read_text(encoding="utf-8").splitlines()]
    for ann, rec in zip(src.annotators, raw, strict=True):
        assert [e.preferred for e in ann.examples] == ["A" if s["preferences"]["human"] == 1 else "B"
                                                       for s in rec["evaluated_samples"]]
        assert [(e.response_a, e.response_b) for e in ann.examples] == [tuple(s["outputs"])
                                                                         for s in rec["evaluated_samples"]]
    prompts = read_upstream_prompts(folder / "upstream_prompts.txt")
    assert prompts["system_prompt"] == "You are a helpful assistant."
    assert prompts["fewshot_query_prompt"].startswith("\n[Instruction]\n{instruction}\n")
    assert prompts["fewshot_query_prompt"].endswith("{assistant_b}\n\n[Preferred response]")
    assert prompts["fewshot_example_prompt"].endswith("[Preferred response]\n{preferred_response}\n")


def annotate_export(tmp_path: Path, fmt: str) -> Path:
    """A real ``evalign annotate`` export: three pairs labelled by two annotators through the store."""
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "instruction": q, "input": inp, "response_a": a,
                                         "response_b": b, "system_a": "m1", "system_b": "m2"}) + "\n"
                             for i, (q, inp, a, b) in enumerate([("Translate:", "chat", "cat", "dog"),
                                                                 ("2+2?", "", "4", "5"),
                                                                 ("Largest planet?", "", "Mars", "Jupiter")])))
    store = Store(tmp_path / "labels.sqlite")
    store.initialise(read_items_to_label(items, "pairwise"), StoreSettings(task="pairwise"))
    for name, codes in (("ann1", [1.0, 1.0, -1.0]), ("ann2", [0.0, -1.0, -1.0])):
        for idx, code in enumerate(codes):
            assert store.add_label(name, idx, code, shown="ab", seconds=1.0, comment=None)
    store.close()
    out = tmp_path / f"export_{fmt}.{'csv' if fmt == 'wide' else 'jsonl'}"
    write_export(tmp_path / "labels.sqlite", str(out), fmt)
    return out


@pytest.mark.parametrize("fmt", ["wide", "long"])
def test_annotate_exports(tmp_path: Path, fmt: str) -> None:
    path = annotate_export(tmp_path, fmt)
    src = read_fewshot(path)
    assert src.format == fmt and [a.annotator for a in src.annotators] == ["ann1", "ann2"]
    one, two = src.annotators
    assert one.examples == (FewshotExample("Translate:\n\nchat", "cat", "dog", "A"), FewshotExample("2+2?", "4", "5", "A"),
                            FewshotExample("Largest planet?", "Mars", "Jupiter", "B"))
    assert [e.preferred for e in two.examples] == ["B", "B"]  # ann2's tie is not an example
    assert [len(a.examples) for a in read_fewshot(path, examples=1).annotators] == [1, 1]


def test_bad_files_name_file_line_and_field(tmp_path: Path) -> None:
    def bad(text: str, name: str = "f.jsonl", **kw: Any) -> InputError:
        p = tmp_path / name
        p.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as e:
            read_fewshot(p, **kw)
        return e.value

    good = upstream_line("a", [("q", "x", "y", 1)])
    e = bad(good + json.dumps({"annotator": "b", "evaluated_samples": [{"instruction": "q", "outputs": ["x"],
                                                                         "preferences": {"human": 1}}]}) + "\n")
    assert (e.line, e.field) == (2, "evaluated_samples[0].outputs") and "f.jsonl" in str(e)
    e = bad(json.dumps({"annotator": "a", "evaluated_samples": [{"instruction": "q", "outputs": ["x", "y"],
                                                                  "preferences": {"human": 3}}]}) + "\n")
    assert (e.line, e.field) == (1, "evaluated_samples[0].preferences.human") and "got 3" in str(e)
    e = bad(json.dumps({"annotator": "a", "evaluated_samples": []}) + "\n")
    assert (e.line, e.field) == (1, "evaluated_samples")
    e = bad(good + "{not json\n")
    assert e.line == 2
    e = bad(good + good)
    assert e.field == "annotator" and "twice" in str(e)
    e = bad('{"id": "q1", "instruction": "q", "response_a": "x", "response_b": "y", "pref_ann": 1}\n'
            '{"id": "q2", "instruction": "q", "response_a": "x", "response_b": "y", "pref_ann": "left"}\n')
    assert (e.line, e.field) == (2, "pref_ann") and "label code" in str(e)
    e = bad("id,instruction,response_b,pref_ann\nq1,q,y,1\n", name="w.csv")
    assert (e.line, e.field) == (2, "response_a")
    e = bad('{"id": "q1", "instruction": "q", "response_a": "x", "response_b": "y", "pref_ann": 0}\n')
    assert e.field == "pref_ann" and "no A or B label" in str(e)
    e = bad('{"ann1": {"q1": "A"}, "ann2": {"q1": "B"}}\n', name="alt.json")
    assert "Alt-Test" in str(e) and "alt.json" in str(e)
    e = bad('{"id": "q1", "text": "x"}\n')
    assert e.line == 1 and "neither upstream's" in str(e)
    e = bad("")
    assert "no records" in str(e)
    e = bad(good, examples=0)
    assert e.field == "examples"


# --- the judge, without a model -------------------------------------------------------------------

SETS = (AnnotatorExamples("x", (FewshotExample("Name a fruit.", "Apple.", "Car.", "A"),)),
        AnnotatorExamples("y", (FewshotExample("Name a colour.", "Table.", "Red.", "B"),
                                FewshotExample("Say hi.", "Hi!", "Bye.", "A"))))
ROW = {"id": "p1", "instruction": "Capital of France?", "response_a": "Paris.", "response_b": "Rome.",
       "system_a": "m1", "system_b": "m2"}


def judge(prompt: str = "evalign", sets: tuple[AnnotatorExamples, ...] = SETS, **kw: Any) -> SimulatedAnnotators:
    j = get_judge("simulated_annotators", fewshot=sets, prompt=prompt, **kw)
    assert isinstance(j, SimulatedAnnotators)
    return j


def test_evalign_prompt_shows_each_annotators_examples_as_turns() -> None:
    j = judge()
    calls = dict(j.prompts(ROW, None, False))
    assert list(calls) == ["ab#0", "ba#0", "ab#1", "ba#1"]
    t = load_template("simulated_annotators")
    m = calls["ab#1"]
    assert [x["role"] for x in m] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert m[0]["content"] == t.system
    assert "Name a colour." in m[1]["content"] and "[Response B]\nRed." in m[1]["content"] and m[2]["content"] == "[[B]]"
    assert m[4]["content"] == "[[A]]" and "Name a fruit." not in prompt_text(m)
    assert "[Response A]\nParis.\n\n[Response B]\nRome." in m[-1]["content"]
    ba = calls["ba#1"]
    assert ba[:-1] == m[:-1] and "[Response A]\nRome.\n\n[Response B]\nParis." in ba[-1]["content"]
    assert "Name a fruit." in prompt_text(calls["ab#0"]) and "Name a colour." not in prompt_text(calls["ab#0"])


def test_upstream_prompt_is_upstreams_text() -> None:
    folder = shared_selective()
    j = judge("upstream", data_dir=folder.parent)
    assert j.prompt == "upstream" and j.template.name == "simulated_annotators_upstream"
    up = read_upstream_prompts(folder / "upstream_prompts.txt")
    m = dict(j.prompts(ROW, None, False))["ba#1"]
    # upstream's prepare_fewshot_prompt: the instruction, then "\n" + each example, then "\n" + the query
    want = up["fewshot_inst_prompt"]
    for q, a, b, pref in (("Name a colour.", "Table.", "Red.", "[[B]]"), ("Say hi.", "Hi!", "Bye.", "[[A]]")):
        want += "\n" + (up["fewshot_example_prompt"].replace("{instruction}", q).replace("{assistant_a}", a)
                        .replace("{assistant_b}", b).replace("{preferred_response}", pref))
    want += "\n" + (up["fewshot_query_prompt"].replace("{instruction}", "Capital of France?")
                    .replace("{assistant_a}", "Rome.").replace("{assistant_b}", "Paris."))
    assert m == [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": want}]
    assert judge("auto", data_dir=folder.parent).prompt == "upstream"
    assert judge("auto", data_dir=folder.parent / "nowhere").prompt == "evalign"
    with pytest.raises(EvalignError, match=r"upstream_prompts\.txt"):
        judge("upstream", data_dir=folder.parent / "nowhere")


def gen(text: str, p_a: float | None, p_b: float | None) -> dict[str, Any]:
    """A generated answer ``[[X]]`` whose letter position has these top logprobs."""
    top = {k: math.log(v) for k, v in (("A", p_a), ("B", p_b)) if v is not None}
    top["C"] = math.log(0.01)
    return {"choices": [{"text": text, "finish_reason": "stop", "tokens": ["[[", text[2], "]]"],
                         "top_logprobs": [{"[[": 0.0}, top, {"]]": 0.0}]}]}


def test_probabilities_mapped_back_and_averaged() -> None:
    j = judge()
    raw = {"ab#0": (0.6, 0.3), "ba#0": (0.2, 0.7), "ab#1": (0.9, 0.05), "ba#1": (0.5, None)}
    results = {(0, o): j.parse(gen("[[A]]" if pa > (pb or 0) else "[[B]]", pa, pb)) for o, (pa, pb) in raw.items()}
    first = {o: pa / (pa + (pb or 0.0)) for o, (pa, pb) in raw.items()}  # renormalised over A and B
    want = [first["ab#0"], 1 - first["ba#0"], first["ab#1"], 1 - first["ba#1"]]
    out = j.aggregate(results)
    assert out["p_a"] == pytest.approx(sum(want) / 4)
    assert out["confidence"] == pytest.approx(max(out["p_a"], 1 - out["p_a"]))
    assert out[""] == ("A" if out["p_a"] > 0.5 else "B") and out["confidence_source"] == "simulated_annotators"
    assert out["p_calls"] == 4 and out["annotators"] == 2 and out["ab"] == "A" and out["ba"] == "tie"
    # the same answers read for the pair with A and B swapped: every order's call is the other's
    swapped = {(0, {"ab": "ba", "ba": "ab"}[o[:2]] + o[2:]): r for (_, o), r in results.items()}
    assert j.aggregate(swapped)["p_a"] == pytest.approx(1 - out["p_a"])
    # no logprobs at all: the majority of the verdicts read, no confidence
    plain = {k: j.parse({"choices": [{"text": "[[A]]", "finish_reason": "stop"}]}) for k in results}
    out = j.aggregate(plain)
    assert out[""] == "tie" and math.isnan(out["confidence"]) and out["confidence_source"] is None  # A, B, A, B
    assert j.parse({"choices": [{"text": "[[C]]", "finish_reason": "stop"}]}).reason == "tie_not_allowed"


def test_cache_key_and_signature_change_with_the_fewshot_set() -> None:
    table = read_pairs(pd.DataFrame([ROW]))
    rec = table.to_dict("records")[0]
    identity = {"kind": "openai", "model": "m"}

    def key(j: SimulatedAnnotators, order: str = "ab#0") -> str:
        messages = dict(j.prompts(rec, None, False))[order]
        return call_key(identity, j, False, None, Call(0, 0, order, 0, messages, j.call_settings(0, order)))

    flipped = (AnnotatorExamples("x", (FewshotExample("Name a fruit.", "Apple.", "Car.", "B"),)), SETS[1])
    a, b = judge(), judge(sets=flipped)
    assert key(a) != key(b)  # annotator 0's example label differs
    assert key(a, "ab#1") != key(b, "ab#1")  # the same examples, but the set as a whole is in the template key
    assert key(a) == key(judge())
    sig_a, sig_b = str(a.signature(identity, False)), str(b.signature(identity, False))
    assert "annotators:2" in sig_a and "prompt:evalign" in sig_a and sig_a != sig_b


def test_options_refused() -> None:
    with pytest.raises(EvalignError, match="no tie"):
        judge(tie=True)
    with pytest.raises(EvalignError, match="both orders"):
        judge(both_orders=False)
    with pytest.raises(EvalignError, match="prompt must be"):
        judge("other")


def test_cli_options_and_a_bad_fewshot_file(tmp_path: Path) -> None:
    """The command line refuses what does not go together, and a bad few-shot file is one line naming
    the file, line and field (before any backend is reached: the URL here serves nothing)."""
    from typer.testing import CliRunner

    from evalign.cli import app

    table = tmp_path / "pairs.jsonl"
    pd.DataFrame([ROW]).to_json(table, orient="records", lines=True)
    bad = tmp_path / "few.jsonl"
    bad.write_text(upstream_line("a", [("q", "x", "y", 1)]) + json.dumps(
        {"annotator": "b", "evaluated_samples": [{"instruction": "q", "outputs": ["x", "y"],
                                                  "preferences": {"human": 0}}]}) + "\n", encoding="utf-8")
    base = ["judge", str(table), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    runner = CliRunner()
    cases = [
        (["--mode", "pairwise", "--simulated-annotators", "2"], "needs --fewshot"),
        (["--mode", "pairwise", "--fewshot", str(bad)], "go with --simulated-annotators"),
        (["--mode", "absolute", "--simulated-annotators", "2", "--fewshot", str(bad)], "--mode pairwise"),
        (["--mode", "pairwise", "--simulated-annotators", "2", "--fewshot", str(bad), "--tie"], "--tie"),
        (["--mode", "pairwise", "--simulated-annotators", "2", "--fewshot", str(bad)],
         "line 2, field 'evaluated_samples[0].preferences.human'"),
    ]
    for args, message in cases:
        res = runner.invoke(app, [*base, *args])
        assert res.exit_code != 0, args
        assert message in " ".join(res.output.split()), (args, res.output)
        assert "Traceback" not in res.output
