"""Training data from existing labels: Prometheus GPT-4 feedback (absolute) split by question, and
PandaLM's human majority preferences with LLMBar's Vanilla prompt (pairwise)."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from evalign.errors import EvalignError, InputError
from evalign.train.data import read_examples
from evalign.train.feedback_data import (
    LLMBAR_VANILLA,
    GradedResponse,
    absolute_data,
    absolute_rows,
    chatml_messages,
    feedback_target,
    graded_response,
    load_prometheus_graded,
    majority_preference,
    median_feedback,
    pairwise_rows,
    pandalm_pairwise_data,
    read_graded,
    split_by_question,
    vanilla_messages,
    write_recipe,
    write_rows,
)

DATA = Path(os.environ.get("EVALIGN_DATA_DIR", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
PROMETHEUS = DATA / "prometheus_eval_benchmarks"
VANILLA_FILE = DATA / "llmbar" / "evaluators" / "upstream_prompts" / "comparison" / "Vanilla.txt"


@pytest.fixture(scope="module")
def graded() -> list[GradedResponse]:
    """Vicuna and MT-Bench in Prometheus format (shared/data); their absence is an error, not a skip."""
    if not (PROMETHEUS / "parsed").is_dir():
        pytest.fail(f"the Prometheus benchmark data is missing: expected it in {PROMETHEUS}")
    return load_prometheus_graded("vicuna") + load_prometheus_graded("mt_bench")


# --- the split -------------------------------------------------------------------------------------


def test_split_keeps_every_question_on_one_side_and_is_stable(graded: list[GradedResponse]) -> None:
    d = absolute_data(graded, held_out=0.2, seed=0)
    assert len(graded) == 640 and len({g.question for g in graded}) == 160
    assert len(d.held_out_questions) == 32 and len(d.train_questions) == 128
    assert not set(d.train_questions) & set(d.held_out_questions)
    assert {r["question"] for r in d.train} == set(d.train_questions)
    assert {r["question"] for r in d.held_out} == set(d.held_out_questions)
    assert {g.question for g in d.held_out_graded} == set(d.held_out_questions)
    assert len(d.held_out_graded) == 128 and len(d.train_graded) == 512  # 4 responses per question
    # 3 rows per response, less the one MT-Bench feedback that holds "[RESULT]" itself
    assert len(d.train) + len(d.held_out) == 3 * 640 - 1
    assert d.dropped == {"feedback_has_result": 1, "feedback_unparseable": 0}
    again = absolute_data(graded, held_out=0.2, seed=0)
    assert again.held_out_questions == d.held_out_questions and again.train == d.train
    other = absolute_data(graded, held_out=0.2, seed=1)
    assert other.held_out_questions != d.held_out_questions
    assert not set(other.train_questions) & set(other.held_out_questions)
    # the order of the input rows does not matter
    assert absolute_data(graded[::-1], held_out=0.2, seed=0).held_out_questions == d.held_out_questions
    assert json.loads(json.dumps(d.manifest()))["questions"]["held_out"] == list(d.held_out_questions)


def test_split_edges() -> None:
    rows = [{"question": q, "k": i} for i, q in enumerate("aabbbcdd")]
    s = split_by_question(rows, held_out=0.25, seed=3)
    assert len(s.held_out_questions) == 1 and len(s.train_questions) == 3
    assert len(s.train) + len(s.held_out) == len(rows)
    assert [r["k"] for r in s.train] == sorted(r["k"] for r in s.train)  # input order kept
    assert split_by_question(rows, held_out=0.0).held_out == []
    assert split_by_question(rows, held_out=1.0).train == []
    assert len(split_by_question(rows, held_out=0.01).held_out_questions) == 1  # at least one question
    assert len(split_by_question(rows, held_out=0.99).train_questions) == 1  # never all below 1
    assert split_by_question(rows, held_out=0.5, key=lambda r: r["k"] % 2).held_out_questions in (("0",), ("1",))
    with pytest.raises(EvalignError, match="held_out must be in"):
        split_by_question(rows, held_out=1.5)


# --- the absolute rows ------------------------------------------------------------------------------


def test_one_rendered_row_is_the_template_filled_by_hand() -> None:
    rec = json.loads((PROMETHEUS / "parsed" / "vicuna_eval.parsed.jsonl").open(encoding="utf-8").readline())
    g = graded_response(rec, source="vicuna")
    rows = absolute_rows([g])
    assert len(rows) == 3
    expected = (
        "###Task Description:\n"
        "An instruction (might include an Input inside it), a response to evaluate, a reference answer that gets a "
        "score of 5, and a score rubric representing a evaluation criteria are given.\n"
        "1. Write a detailed feedback that assess the quality of the response strictly based on the given score "
        "rubric, not evaluating in general.\n"
        "2. After writing a feedback, write a score that is an integer between 1 and 5. You should refer to the "
        "score rubric.\n"
        '3. The output format should look as follows: "Feedback: (write a feedback for criteria) [RESULT] (an '
        'integer number between 1 and 5)"\n'
        "4. Please do not generate any other opening, closing, and explanations.\n\n"
        "###The instruction to evaluate:\n" + rec["instruction"] + "\n\n"
        "###Response to evaluate:\n" + rec["response"] + "\n\n"
        "###Reference Answer (Score 5):\n" + rec["reference_answer"] + "\n\n"
        "###Score Rubrics:\n" + rec["score_rubric"] + "\n\n"
        "###Feedback: "
    )
    row = rows[1]
    assert row["instruction"] == expected
    original = json.loads((PROMETHEUS / "vicuna_eval.json").read_text(encoding="utf-8"))[0]["instruction"]
    assert row["instruction"] == original  # the benchmark's own prompt, byte for byte
    assert row["output"] == "Feedback: " + rec["gpt4_feedback"][1].strip() + " [RESULT] " + str(rec["gpt4_score"][1])
    assert row["system"] == "You are a fair evaluator language model."
    assert (row["mode"], row["question"], row["feedback_index"], row["score"]) == ("absolute", "vicuna:1", 1, 5)


def test_reference_free_rows_median_feedback_and_drops() -> None:
    g = GradedResponse("toy", "7", None, "Say hi.", "hi", None, "[Polite?]\nScore 1: no\nScore 5: yes",
                       ("Rude. [RESULT] 1", "  Fine.  ", "Good.", "Great."), (1, 3, 4, 5))
    dropped: Counter[str] = Counter()
    rows = absolute_rows([g], dropped=dropped)
    assert [r["output"] for r in rows] == ["Feedback: Fine. [RESULT] 3", "Feedback: Good. [RESULT] 4",
                                           "Feedback: Great. [RESULT] 5"]
    assert dropped == {"feedback_has_result": 1}
    assert "###Reference Answer" not in rows[0]["instruction"]
    assert rows[0]["instruction"].startswith("###Task Description:\nAn instruction (might include an Input inside "
                                             "it), a response to evaluate, and a score rubric")
    assert median_feedback(g) == 1  # lower median of 1, 3, 4, 5 is 3
    one = absolute_rows([g], per_feedback=False)
    assert [r["feedback_index"] for r in one] == [1] and one[0]["mean_score"] == 3.25
    assert feedback_target(" x \n", 2, prefix="") == "x [RESULT] 2"


def test_per_response_rows_and_training_file(graded: list[GradedResponse], tmp_path: Path) -> None:
    d = absolute_data(graded[:40], held_out=0.25, seed=0, per_feedback=False)
    assert len(d.train) + len(d.held_out) == 40
    path = write_rows(d.train, tmp_path / "train.jsonl")
    ex = read_examples(path)  # today's training reader takes the file as it is
    assert [e.instruction for e in ex] == [r["instruction"] for r in d.train]
    assert [e.output for e in ex] == [r["output"] for r in d.train]
    assert {e.system for e in ex} == {"You are a fair evaluator language model."}
    paths = write_recipe(d, tmp_path / "recipe")
    assert sorted(paths) == ["held_out", "manifest", "train"]
    assert len(read_examples(paths["held_out"])) == len(d.held_out)
    manifest = json.loads(paths["manifest"].read_text(encoding="utf-8"))
    assert manifest["rows"] == {"train": len(d.train), "held_out": len(d.held_out)}
    assert manifest["settings"]["per_feedback"] is False


def test_bad_graded_rows(tmp_path: Path) -> None:
    ok = {"idx": 1, "instruction": "i", "response": "r", "reference_answer": "ref", "score_rubric": "[c]",
          "gpt4_feedback": ["f"], "gpt4_score": [3]}
    for change, field in (({"gpt4_score": [6]}, "gpt4_score"), ({"gpt4_score": [3, 4]}, "gpt4_score"),
                          ({"response": " "}, "response"), ({"score_rubric": None}, "score_rubric")):
        p = tmp_path / "bad.jsonl"
        p.write_text(json.dumps({**ok, **change}) + "\n", encoding="utf-8")
        with pytest.raises(InputError) as e:
            read_graded(p)
        assert e.value.field == field and e.value.line == 1
    with pytest.raises(EvalignError, match="unknown Prometheus set 'hhh'"):
        load_prometheus_graded("hhh")


# --- the pairwise rows ------------------------------------------------------------------------------


def test_vanilla_prompt_is_llmbars_file_verbatim() -> None:
    if not VANILLA_FILE.is_file():
        pytest.fail(f"the LLMBar prompts are missing: expected {VANILLA_FILE}")
    assert VANILLA_FILE.read_text(encoding="utf-8") == LLMBAR_VANILLA
    msgs = chatml_messages(LLMBAR_VANILLA)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"].startswith("You are a helpful assistant in evaluating")
    assert msgs[1]["content"].endswith('Your response should be either "Output (a)" or "Output (b)":')


def test_vanilla_messages_filled_by_hand() -> None:
    sys_msg, user = vanilla_messages("Add {x}.\n\n2 + 2", "{output_2} 4", "5 ")
    assert sys_msg == {"role": "system", "content": "You are a helpful assistant in evaluating the quality of the "
                       "outputs for a given instruction. Your goal is to select the best output for the given "
                       "instruction."}
    assert user["role"] == "user"
    assert user["content"].endswith(
        "# Instruction:\nAdd {x}.\n\n2 + 2\n\n# Output (a):\n{output_2} 4\n\n# Output (b):\n5 \n\n"
        '# Which is better, Output (a) or Output (b)? Your response should be either "Output (a)" or "Output (b)":')
    assert user["content"].startswith("Select the Output (a) or Output (b) that is better for the given instruction.")


def test_majority_rules() -> None:
    nan = float("nan")
    assert majority_preference([1, 1, -1]) == "A"
    assert majority_preference([-1.0, -1.0, -1.0]) == "B"
    assert majority_preference([0, 0, 1]) == "tie"
    assert majority_preference([1, -1, 0]) == "none"  # no majority
    assert majority_preference([1, -1, nan]) == "none"  # 1 of 2 is not more than half
    assert majority_preference([1, None, nan]) == "A"  # the only label given
    assert majority_preference([nan, nan, nan]) == "none"


def test_pandalm_rules_on_hand_made_pairs() -> None:
    pairs = pd.DataFrame({
        "id": ["p1", "p2", "p3", "p4", "p5"], "source_id": ["q1", "q1", "q2", "q3", "q3"],
        "instruction": ["Fix it.", "Fix it.", "Sum.", "Name one.", "Name one."],
        "input": ["teh cat", "teh cat", "", None, float("nan")],
        "response_a": ["the cat", "teh cat", "4", "Ann", "Bo"], "response_b": ["teh cat", "the cat", "5", "Al", "Cy"],
        "pref_1": [1, -1, 0, 1, 1], "pref_2": [1, -1, 0, -1, 1], "pref_3": [-1, 1, 1, 0, 1],
    })  # fmt: skip
    dropped: Counter[str] = Counter()
    rows = pairwise_rows(pairs, pref_columns=["pref_1", "pref_2", "pref_3"], dropped=dropped)
    assert dropped == {"tie": 1, "no_majority": 1}  # p3 (tie majority), p4 (1 / 2 / tie once each)
    assert [(r["pair_id"], r["order"], r["output"]) for r in rows] == [
        ("p1", "ab", "Output (a)"), ("p1", "ba", "Output (b)"),
        ("p2", "ab", "Output (b)"), ("p2", "ba", "Output (a)"),
        ("p5", "ab", "Output (a)"), ("p5", "ba", "Output (b)"),
    ]
    p1_ab, p1_ba = rows[0]["instruction"], rows[1]["instruction"]
    assert "# Instruction:\nFix it.\n\nteh cat\n\n# Output (a):\nthe cat\n\n# Output (b):\nteh cat\n\n" in p1_ab
    assert "# Output (a):\nteh cat\n\n# Output (b):\nthe cat\n\n" in p1_ba  # the swapped presentation
    assert "# Instruction:\nName one.\n\n# Output (a):\nBo\n" in rows[4]["instruction"]  # no input: no blank block
    assert {r["question"] for r in rows} == {"q1", "q3"}
    assert {r["system"] for r in rows} == {chatml_messages(LLMBAR_VANILLA)[0]["content"]}
    one = pairwise_rows(pairs, pref_columns=["pref_1", "pref_2", "pref_3"], both_orders=False)
    assert [r["order"] for r in one] == ["ab"] * 3


def test_pandalm_bundled_counts(tmp_path: Path) -> None:
    d = pandalm_pairwise_data()
    # 999 pairs; majority tie 105 (PandaLM's README); no pair without a majority
    assert (d.pairs_kept, d.dropped) == (894, {"tie": 105, "no_majority": 0})
    assert len(d.train) == 2 * 894 and d.held_out == []
    outs = [r["output"] for r in d.train]
    assert outs.count("Output (a)") == outs.count("Output (b)") == 894  # both orders balance the answers
    held = pandalm_pairwise_data(held_out=0.1, seed=0)
    assert not set(held.train_questions) & set(held.held_out_questions)
    assert {r["question"] for r in held.held_out} == set(held.held_out_questions)
    assert math.isclose(len(held.held_out_questions), 0.1 * len(set(held.train_questions) | set(held.held_out_questions)),
                        abs_tol=1)
    ex = read_examples(write_rows(d.train[:4], tmp_path / "pairs.jsonl"))
    assert ex[0].output == d.train[0]["output"] and ex[0].system == d.train[0]["system"]


def test_judge_data_command_writes_both_recipes(tmp_path: Path) -> None:
    """``evalign judge-data``: the files train-judge reads, split by question (none on both sides)."""
    from typer.testing import CliRunner

    from evalign.cli import app

    res = CliRunner().invoke(app, ["judge-data", "absolute", "--out", str(tmp_path / "abs"), "--set", "vicuna",
                                   "--held-out", "0.25", "--seed", "1", "--json"])
    assert res.exit_code == 0, res.output
    man = json.loads(res.stdout)
    assert man["recipe"] == "absolute" and man["settings"]["sources"] == ["vicuna"] and man["settings"]["seed"] == 1
    assert len(man["questions"]["held_out"]) == 20 and len(man["questions"]["train"]) == 60  # 80 questions
    train = pd.read_json(tmp_path / "abs" / "train.jsonl", lines=True)
    held = pd.read_json(tmp_path / "abs" / "held_out.jsonl", lines=True)
    assert not set(train["question"]) & set(held["question"])
    assert len(train) == man["rows"]["train"] and len(held) == man["rows"]["held_out"]
    assert len(read_examples(tmp_path / "abs" / "train.jsonl")) == len(train)  # what train-judge reads
    res = CliRunner().invoke(app, ["judge-data", "pairwise", "-o", str(tmp_path / "pw")])
    assert res.exit_code == 0, res.output
    man = json.loads((tmp_path / "pw" / "manifest.json").read_text())
    assert man["rows"] == {"train": 2 * man["pairs_kept"], "held_out": 0}  # both orders, nothing held out
    assert f"pairwise: {2 * man['pairs_kept']} training rows" in res.stdout
    bad = CliRunner().invoke(app, ["judge-data", "graded", "-o", str(tmp_path / "x")])
    assert bad.exit_code == 1 and "recipe must be 'absolute' or 'pairwise', got 'graded'" in bad.output
