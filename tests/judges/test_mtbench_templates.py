"""MT-Bench's eight judge prompts and Arena-Hard's as evalign templates: verbatim against the upstream
files in the data folder, rendered (single- and multi-turn, with and without the reference) exactly as
FastChat's own code renders them (PyPI ``fschat``: ``fastchat.llm_judge.common.run_judge_single`` /
``run_judge_pair``, its judge call replaced by one that records the messages it would send), and their
answers read as FastChat reads them."""

from __future__ import annotations

import importlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import jinja2
import pytest

from evalign.errors import EvalignError
from evalign.judges import get_judge, load_template, read_pairs
from evalign.judges.base import judge_for_template
from evalign.judges.modes.mtbench import FAMILIES, ArenaHard, MTBenchPair, MTBenchSingle

DATA = Path(os.environ.get("EVALIGN_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
FASTCHAT_PROMPTS = DATA / "fastchat_mt_bench" / "judge_prompts.jsonl"
JUDGEBENCH = DATA / "judgebench" / "upstream_prompts"

#: FastChat's prompt names -> evalign's templates
UPSTREAM = {
    "single-v1": "mtbench_single", "single-math-v1": "mtbench_single_math",
    "single-v1-multi-turn": "mtbench_single_multi_turn", "single-math-v1-multi-turn": "mtbench_single_math_multi_turn",
    "pair-v2": "mtbench_pair", "pair-math-v1": "mtbench_pair_math",
    "pair-v2-multi-turn": "mtbench_pair_multi_turn", "pair-math-v1-multi-turn": "mtbench_pair_math_multi_turn",
}  # fmt: skip
#: evalign's names of FastChat's single-turn placeholders (the turn-indexed ones are upstream's own)
SINGLE_TURN = {"{instruction}": "{question}", "{response}": "{answer}", "{response_A}": "{answer_a}",
               "{response_B}": "{answer_b}", "{reference_answer}": "{ref_answer_1}"}

Q = ["Write a haiku about rain.", "Now make it about snow, keeping the form."]
A = ["Soft rain on the roof\nwhispers to the sleeping town\npuddles hold the sky", "Snow on the cold roof"]
B = ["Rain falls. It is wet.", "Snow falls. It is white."]
REF = ["A 5-7-5 haiku about rain.", "A 5-7-5 haiku about snow."]


def upstream_prompts() -> dict[str, dict[str, Any]]:
    if not FASTCHAT_PROMPTS.is_file():
        pytest.fail(f"FastChat's judge prompts are missing: expected {FASTCHAT_PROMPTS}")
    return {json.loads(line)["name"]: json.loads(line) for line in FASTCHAT_PROMPTS.read_text().splitlines()}


@pytest.fixture(scope="module")
def fastchat() -> Any:
    """``fastchat.llm_judge.common`` (PyPI fschat). Its module imports the ``openai`` and ``anthropic``
    clients for its API calls, which these tests replace: a missing client is stubbed."""
    for client in ("openai", "anthropic"):
        try:
            importlib.import_module(client)
        except ImportError:
            sys.modules[client] = types.ModuleType(client)
    return importlib.import_module("fastchat.llm_judge.common")


class Recorder:
    """Stands in for FastChat's ``chat_completion_openai``: records the messages and settings it is
    given and answers ``judgment``."""

    def __init__(self, judgment: str = "") -> None:
        self.judgment = judgment
        self.calls: list[dict[str, Any]] = []

    def __call__(self, model: str, conv: Any, temperature: float, max_tokens: int, api_dict: Any = None) -> str:
        self.calls.append({"messages": conv.to_openai_api_messages(), "temperature": temperature,
                           "max_tokens": max_tokens})
        return self.judgment


def test_templates_are_fastchats_prompts_verbatim() -> None:
    for up_name, name in UPSTREAM.items():
        up = upstream_prompts()[up_name]
        t = load_template(name)
        text = t.with_reference if t.needs_reference else t.without_reference
        assert text is not None and t.has_reference == ("math" in up_name) == t.needs_reference
        for ours, theirs in SINGLE_TURN.items():
            text = text.replace(ours, theirs)
        assert t.system == up["system_prompt"], name
        assert text == up["prompt_template"], name
        assert t.parser == ("mtbench_rating" if up["type"] == "single" else "mtbench_verdict")
        assert "FastChat" in t.source and up_name in t.source


def test_arena_hard_is_judgebenchs_prompt_verbatim() -> None:
    t = load_template("arena_hard")
    assert t.system == (JUDGEBENCH / "arena_hard_judge_system.jinja2").read_text()
    user = jinja2.Template((JUDGEBENCH / "arena_hard_judge_prompt.jinja2").read_text())
    rendered = ArenaHard().prompts({"instruction": Q[0], "response_a": A[0], "response_b": B[0]}, None, False)
    assert rendered[0][1] == [{"role": "system", "content": t.system},
                              {"role": "user", "content": user.render(prompt=Q[0], answer_a=A[0], answer_b=B[0])}]
    assert rendered[1][1][1]["content"] == user.render(prompt=Q[0], answer_a=B[0], answer_b=A[0])  # order ba
    assert "arena-hard-auto" in t.source and "Apache" in t.source


def _row(turn: int, ref: bool, pair: bool) -> dict[str, Any]:
    conv = [m for k in range(turn) for m in ({"role": "user", "content": Q[k]}, {"role": "assistant", "content": A[k]})]
    other = [m for k in range(turn) for m in ({"role": "user", "content": Q[k]}, {"role": "assistant", "content": B[k]})]
    row: dict[str, Any] = {"id": "q", "instruction": Q[turn - 1], "turn": turn,
                           "reference": REF[:turn] if ref else None}
    if pair:
        row.update(messages_a=conv, messages_b=other, response_a=A[turn - 1], response_b=B[turn - 1])
    else:
        row.update(messages=conv, response=A[turn - 1])
    return row


@pytest.mark.parametrize(("turn", "ref"), [(1, False), (1, True), (2, False), (2, True)])
def test_single_rendering_equals_fastchats(fastchat: Any, monkeypatch: pytest.MonkeyPatch, turn: int, ref: bool) -> None:
    up_name = {(1, False): "single-v1", (1, True): "single-math-v1", (2, False): "single-v1-multi-turn",
               (2, True): "single-math-v1-multi-turn"}[(turn, ref)]
    rec = Recorder("The answer follows the form. Rating: [[7]]")
    monkeypatch.setattr(fastchat, "chat_completion_openai", rec)
    judge_obj = fastchat.Judge("gpt-4", upstream_prompts()[up_name], ref_based=ref, multi_turn=turn == 2)
    rating, _, _ = fastchat.run_judge_single({"turns": Q}, {"choices": [{"turns": A}]}, judge_obj,
                                             {"choices": [{"turns": REF}]} if ref else None, multi_turn=turn == 2)
    judge = get_judge("mtbench_single")
    [(_, messages)] = judge.prompts(_row(turn, ref, pair=False), None, ref)
    assert messages == rec.calls[0]["messages"]
    settings = judge.request_settings(0)
    assert (settings["temperature"], settings["max_tokens"]) == (rec.calls[0]["temperature"], rec.calls[0]["max_tokens"])
    gen = {"choices": [{"text": rec.judgment, "finish_reason": "stop"}]}
    assert judge.parse(gen, messages[-1]["content"]).value == float(rating) == 7.0


@pytest.mark.parametrize(("turn", "ref"), [(1, False), (1, True), (2, False), (2, True)])
def test_pair_rendering_equals_fastchats_both_games(fastchat: Any, monkeypatch: pytest.MonkeyPatch, turn: int,
                                                    ref: bool) -> None:
    up_name = {(1, False): "pair-v2", (1, True): "pair-math-v1", (2, False): "pair-v2-multi-turn",
               (2, True): "pair-math-v1-multi-turn"}[(turn, ref)]
    rec = Recorder("Assistant A keeps the form. [[A]]")
    monkeypatch.setattr(fastchat, "chat_completion_openai", rec)
    judge_obj = fastchat.Judge("gpt-4", upstream_prompts()[up_name], ref_based=ref, multi_turn=turn == 2)
    ref_answer = {"choices": [{"turns": REF}]} if ref else None
    a, b = {"choices": [{"turns": A}]}, {"choices": [{"turns": B}]}
    g1, _, _ = fastchat.run_judge_pair({"turns": Q}, a, b, judge_obj, ref_answer, multi_turn=turn == 2)
    fastchat.run_judge_pair({"turns": Q}, b, a, judge_obj, ref_answer, multi_turn=turn == 2)  # FastChat's game 2
    judge = get_judge("mtbench_pair")
    prompts = dict(judge.prompts(_row(turn, ref, pair=True), None, ref))
    assert [prompts["ab"], prompts["ba"]] == [c["messages"] for c in rec.calls]
    gen = {"choices": [{"text": rec.judgment, "finish_reason": "stop"}]}
    assert judge.parse(gen, prompts["ab"][-1]["content"]).value == g1 == "A"


def test_fastchat_reads_what_evalign_reads(fastchat: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """FastChat's own parsing of a range of answers (through run_judge_single / run_judge_pair) against
    evalign's: equal wherever the answer holds one value; several different values are 'conflicting'
    for evalign where FastChat takes the first (a rating) or A before B before C (a verdict)."""
    single, pair = upstream_prompts()["single-v1"], upstream_prompts()["pair-v2"]
    ratings = {"Rating: [[8]]": 8.0, "Good answer.\n\nRating: [[10]]": 10.0, "[[3.5]]": 3.5, "Rating: [5]": 5.0,
               "rating [[ 7 ]]": None, "I give [[6]] and finally [[6]].": 6.0, "[[2]] ... [[9]]": "conflicting",
               "no rating": None, "[[7.]]": 7.0}
    for text, want in ratings.items():
        monkeypatch.setattr(fastchat, "chat_completion_openai", Recorder(text))
        up, _, _ = fastchat.run_judge_single({"turns": Q}, {"choices": [{"turns": A}]},
                                             fastchat.Judge("gpt-4", single), None)
        ours = get_judge("mtbench_single").parse({"choices": [{"text": text, "finish_reason": "stop"}]})
        if want == "conflicting":
            assert ours.reason == "conflicting" and up == 2, text
        elif want is None:
            assert not ours.ok and up == -1, text
        else:
            assert ours.value == float(up) == want, text
    verdicts = {"[[A]]": "A", "so [[B]]": "B", "It is a tie: [[C]]": "tie", "[[A]] or [[B]]?": "conflicting",
                "[A]": None, "[[a]]": None}
    for text, want in verdicts.items():
        monkeypatch.setattr(fastchat, "chat_completion_openai", Recorder(text))
        up, _, _ = fastchat.run_judge_pair({"turns": Q}, {"choices": [{"turns": A}]}, {"choices": [{"turns": B}]},
                                           fastchat.Judge("gpt-4", pair), None)
        ours = get_judge("mtbench_pair").parse({"choices": [{"text": text, "finish_reason": "stop"}]})
        if want == "conflicting":
            assert ours.reason == "conflicting" and up == "A", text
        elif want is None:
            assert not ours.ok and up == "error", text
        else:
            assert ours.value == up == want, text


def test_families_choose_the_prompt_per_row() -> None:
    single = get_judge("mtbench_single")
    assert single.template.name == "mtbench_single" and single.reference_variant()
    for (ref, turn), name in FAMILIES["mtbench_single"].items():
        t, shown = single.family.choose(_row(turn, ref, pair=False), False, True, True)
        assert (t.name, shown) == (name, ref)
    # --no-reference: the general prompts even where the row has a reference
    assert get_judge("mtbench_single", reference=False).family.choose(_row(1, True, False), False, False, True)[0].name \
        == "mtbench_single"
    with pytest.raises(EvalignError, match="turn 3: MT-Bench's prompts show 2 turns at most"):
        single.family.choose({**_row(2, False, False), "turn": 3}, False, True, True)
    with pytest.raises(EvalignError, match="turn 2 needs the conversation"):
        single.prompts({"id": "x", "instruction": "q", "response": "a", "turn": 2}, None, False)
    # any member names the family; the signature lists every variant
    assert get_judge("mtbench_pair", template="mtbench_pair_math").family.name == "mtbench_pair"
    sig = str(get_judge("mtbench_pair").signature({"kind": "x"}, False))
    assert "template:family/mtbench_pair" in sig and sig.count("mtbench_pair_") >= 3


def test_modes_and_templates_route_to_their_judges() -> None:
    assert judge_for_template("pairwise", "mtbench_pair") is MTBenchPair
    assert judge_for_template("pairwise", "arena_hard") is ArenaHard
    assert judge_for_template("absolute", "mtbench_single_multi_turn") is MTBenchSingle
    assert judge_for_template("absolute", "prometheus_absolute").name == "prometheus_absolute"
    assert judge_for_template("geval", None).name == "geval"  # unchanged for the other modes
    assert get_judge("arena-hard").name == "arena_hard"
    with pytest.raises(EvalignError, match="always offers a tie"):
        get_judge("mtbench_pair", tie=False)


def test_arena_hard_labels_in_the_tables_frame(tmp_path: Path) -> None:
    from evalign.judges.parsing import ParseResult

    judge = ArenaHard()
    out = judge.aggregate({(0, "ab"): ParseResult("A", None, "A>>B"), (0, "ba"): ParseResult("B", None, "B>A")})
    assert (out[""], out["ab"], out["ba"], out["label_ab"], out["label_ba"]) == ("A", "A", "A", "A>>B", "A>B")
    out = judge.aggregate({(0, "ab"): ParseResult("tie", None, "A=B"), (0, "ba"): ParseResult("A", None, "A>B")})
    assert (out[""], out["label_ab"], out["label_ba"]) == ("tie", "A=B", "B>A")
    reask = judge.reask_messages([{"role": "user", "content": "x"}], "thinking...", ParseResult(None, "no_score"))
    assert reask[-1] == {"role": "user", "content": "continue your judgment and finish by outputting a final verdict label"}


def test_conversation_rows_in_generic_judges(tmp_path: Path) -> None:
    """A judge without turn placeholders grades the last turn in context: the transcript up to it."""
    rows = [{"id": "p", **{k: v for k, v in _row(2, False, pair=True).items() if k.startswith("messages")}}]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    rec = read_pairs(path).to_dict("records")[0]
    ab, ba = (m[-1]["content"] for _, m in get_judge("pairwise").prompts(rec, get_judge("pairwise").rubric, False))
    ctx = f"### User:\n{Q[0]}\n\n### Assistant A:\n{A[0]}\n\n### Assistant B:\n{B[0]}\n\n### User:\n{Q[1]}"
    assert f"###Instruction:\n{ctx}\n\n###Response A:\n{A[1]}" in ab
    ctx_ba = f"### Assistant A:\n{B[0]}\n\n### Assistant B:\n{A[0]}"
    assert ctx_ba in ba and f"###Response A:\n{B[1]}" in ba
    arena = dict(ArenaHard().prompts(rec, None, False))
    assert f"<|User Prompt|>\n{ctx}\n\n<|The Start of Assistant A's Answer|>\n{A[1]}" in arena["ab"][1]["content"]
