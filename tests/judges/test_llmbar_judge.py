"""LLMBar's strategies as evalign judges (templates ``llmbar_*``, judge ``llmbar``): every prompt evalign
sends equals upstream's, built by upstream's own code (``LLMEvaluator/evaluate.py``: ``format_map`` of
its prompt file, then ``prompt_to_chatml``, copied below) from the files in
``$EVALIGN_DATA_DIR/llmbar/evaluators/upstream_prompts``; the stages (questions, reference output,
Swap's synthesis round) run in the runner with a scripted backend: the right calls, each cached, a
resumed run repeating none; the logit bias option; ``--mode pairwise --template llmbar_*``."""

from __future__ import annotations

import http.server
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.backends import Backend, BackendRequestError, Choice, Generation, GenerationRequest, Usage
from evalign.backends.openai import OpenAICompatibleBackend
from evalign.cache import Cache
from evalign.cli import app
from evalign.errors import EvalignError
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.base import judge_for_template, prompt_text
from evalign.judges.modes.llmbar import PARSERS, STRATEGY_TEMPLATES, LLMBarJudge, swap_output_names
from evalign.judges.prompts import load_template
from evalign.train.feedback_data import vanilla_messages

DATA = Path(os.environ.get("EVALIGN_DATA_DIR", str(Path(__file__).resolve().parents[3] / "shared" / "data")))
UPSTREAM = DATA / "llmbar" / "evaluators"

#: strategy -> (template, the prompt files of its stages in upstream's order: auxiliary..., comparison)
STRATEGIES = {
    "Vanilla": "llmbar_vanilla", "Vanilla_NoRules": "llmbar_vanilla_norules",
    "Vanilla_1shot": "llmbar_vanilla_1shot", "Vanilla_2shot": "llmbar_vanilla_2shot", "CoT": "llmbar_cot",
    "Metrics": "llmbar_metrics", "Reference": "llmbar_reference", "Metrics_Reference": "llmbar_metrics_reference",
    "Swap": "llmbar_swap", "Swap_CoT": "llmbar_swap_cot",
}  # fmt: skip


def prompt_to_chatml(prompt: str, start_token: str = "<|im_start|>", end_token: str = "<|im_end|>") -> list[dict[str, str]]:
    """Upstream's ``prompt_to_chatml`` (LLMEvaluator/evaluate.py), without the ``system name=`` case."""
    prompt = prompt.strip()
    assert prompt.startswith(start_token)
    assert prompt.endswith(end_token)
    message = []
    for p in prompt.split("<|im_start|>")[1:]:
        newline_splitted = p.split("\n", 1)
        role = newline_splitted[0].strip()
        content = newline_splitted[1].split(end_token, 1)[0].strip()
        message.append({"content": content, "role": role})
    return [{"role": m["role"], "content": m["content"]} for m in message]


def reverse_output_ab(explanation: str) -> str:
    """Upstream's ``reverse_OutputAB``."""
    for output in ("Output", "output"):
        explanation = explanation.replace(f"{output} (a)", f"**********{output} (a)**********")
        explanation = explanation.replace(f"{output} (b)", f"##########{output} (b)##########")
        explanation = explanation.replace(f"**********{output} (a)**********", f"{output} (b)")
        explanation = explanation.replace(f"##########{output} (b)##########", f"{output} (a)")
    return explanation


def configs(strategy: str) -> list[dict[str, Any]]:
    return json.loads((UPSTREAM / "upstream_configs" / "GPT-4" / f"{strategy}.json").read_text(encoding="utf-8"))


def upstream_prompt(config: dict[str, Any]) -> str:
    return (UPSTREAM / "upstream_prompts" / config["prompt"]).read_text(encoding="utf-8")


# texts that would catch a second substitution pass, lost whitespace or a swapped order
INSTRUCTION = "  Write {output_1} backwards.\n\nInput: 'Output (a)' {input}  "
OUT_1 = "First answer: {auxiliary_input_0} and {response_B}.\n"
OUT_2 = "  Second answer, Output (b) wins  "
ROW = {"instruction": INSTRUCTION, "response_a": OUT_1, "response_b": OUT_2}
AUX = {"questions": "1. Is it backwards?\n2. {input} kept?", "reference_output": "sdrawkcab  {output_2}"}
AUX_OF = {"auxiliary/Metrics.txt": "questions", "auxiliary/Reference.txt": "reference_output"}


@pytest.fixture(scope="module", autouse=True)
def _upstream_files() -> None:
    if not (UPSTREAM / "upstream_prompts").is_dir():
        pytest.fail(f"LLMBar's upstream prompts are missing: expected them in {UPSTREAM}/upstream_prompts")


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_prompt_is_upstreams(strategy: str) -> None:
    judge = get_judge("pairwise", template=STRATEGIES[strategy])
    assert isinstance(judge, LLMBarJudge) and judge.column == STRATEGIES[strategy]
    confs = configs(strategy)
    swap = strategy.startswith("Swap")
    stage_confs = [] if swap else confs[:-1]
    kwargs: dict[str, str] = {"input": ROW["instruction"]}
    first = dict(judge.prompts(ROW, None, False))
    # the stages: upstream's `module["prompt"].format(input=...)`, one call per item
    for i, conf in enumerate(stage_confs):
        name = AUX_OF[conf["prompt"]]
        assert first[name] == prompt_to_chatml(upstream_prompt(conf).format(input=INSTRUCTION))
        kwargs[f"auxiliary_input_{i}"] = AUX[name]
    done = {(0, name): (judge.parse_call({"choices": [{"text": f"\n{AUX[name]}\n"}]}, None, name), f"\n{AUX[name]}\n")
            for name in (AUX_OF[c["prompt"]] for c in stage_confs)}
    verdict_conf = confs[0] if swap else confs[-1]
    for order, (o1, o2) in {"ab": (OUT_1, OUT_2), "ba": (OUT_2, OUT_1)}.items():
        expected = prompt_to_chatml(upstream_prompt(verdict_conf).format_map({**kwargs, "output_1": o1, "output_2": o2}))
        sent = first[order] if not stage_confs else judge.call_messages(ROW, None, False, 0, order, done)
        assert sent == expected, order
    assert set(first) == ({AUX_OF[c["prompt"]] for c in stage_confs} or {"ab", "ba"})
    # the decoding of each call: upstream's max_tokens, temperature 0, no logit bias unless asked
    for order in first:
        conf = next((c for c in stage_confs if AUX_OF[c["prompt"]] == order), verdict_conf)
        settings = judge.call_settings(0, order)
        assert settings["max_tokens"] == conf["openai_kwargs"]["max_tokens"] and settings["temperature"] == 0.0
        assert "logit_bias" not in settings
    # with --logit-bias, each call (stage, verdict, synthesis) has its config's tokens_to_avoid / tokens_to_favor
    biased = get_judge("pairwise", template=STRATEGIES[strategy], logit_bias=True)
    calls = {**{AUX_OF[c["prompt"]]: c for c in stage_confs}, "ab": verdict_conf, "ba": verdict_conf}
    if swap:
        calls.update({"swap_ab": confs[1], "swap_ba": confs[1]})
    for order, conf in calls.items():
        kw = conf["openai_kwargs"]
        bias = {**dict.fromkeys(kw.get("tokens_to_avoid", []), -100.0), **dict.fromkeys(kw.get("tokens_to_favor", []), 7.0)}
        assert biased.call_settings(0, order).get("logit_bias", {}) == bias, order
    # the parser of each verdict round: the answer format of upstream's regexes for it
    assert PARSERS[judge.template.parser] == upstream_style(verdict_conf)
    if swap:
        assert PARSERS[judge.template.synthesis.parser] == upstream_style(confs[1])  # type: ignore[union-attr]
    else:
        assert judge.template.synthesis is None


def upstream_style(conf: dict[str, Any]) -> str:
    """The answer format of upstream's parsing regexes: a line that starts with "Output (a)" (direct) or
    "Output (a) is better." anywhere (cot)."""
    first = {r"(?:^|\n) ?Output \(a\)": "direct", r"Output \(a\) is better.": "cot"}
    return first[conf["parsing"]["1"]]


def test_every_comparison_strategy_has_a_template() -> None:
    """Every strategy upstream ran on two outputs (not the rating ones) is a template, in the judge's map too."""
    strategies = {f.stem for f in (UPSTREAM / "upstream_configs" / "GPT-4").glob("*.json")}
    assert {s for s in strategies if not s.startswith("Rating")} == set(STRATEGIES)
    assert STRATEGY_TEMPLATES == STRATEGIES


def test_shots_are_sent_between_the_system_prompt_and_the_pair() -> None:
    """The few-shot templates: upstream's example turns, verbatim, then the pair; a shot's text is never filled."""
    msgs = dict(get_judge("pairwise", template="llmbar_vanilla_2shot").prompts(ROW, None, False))["ba"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in msgs if m["role"] == "assistant"] == ["Output (b)", "Output (a)"]
    assert "grad school" in msgs[1]["content"] and "ophthalmologist" in msgs[3]["content"]
    # the examples' answers are in the prompt, and an answer is still read (echo masking leaves it)
    judge = get_judge("pairwise", template="llmbar_vanilla_2shot")
    for text, verdict in (("Output (b)", "B"), ("Output (a) is better.\n", "A"), ("  Output (b)\n\nIt is short.", "B")):
        assert judge.parse_call({"choices": [{"text": text}]}, prompt_text(msgs), "ba").verdict == verdict
    assert msgs[-1]["content"].startswith(f"# Instruction:\n{INSTRUCTION}\n\n# Output (a):\n{OUT_2}\n")
    t = load_template("llmbar_vanilla_1shot")
    shot = type(t)(**{**t.__dict__, "shots": (("user", "Example {instruction}"), ("assistant", "Output (a)"))})
    assert shot.render(False, {"instruction": "x", "response_A": "a", "response_B": "b"})[1]["content"] == (
        "Example {instruction}")
    # the shots are part of the template's hash: an edited example never reuses old grades
    assert shot.hash(False) != t.hash(False) != load_template("llmbar_vanilla").hash(False)


@pytest.mark.parametrize("strategy", ["Swap", "Swap_CoT"])
@pytest.mark.parametrize("first_round", [("A", "A"), ("B", "B")])
def test_swap_synthesis_prompt_is_upstreams(strategy: str, first_round: tuple[str, str]) -> None:
    """Upstream's synthesis round: the explanation that chose each output, rewritten for the order shown."""
    judge = get_judge("pairwise", template=STRATEGIES[strategy])
    texts = {"ab": f"Output (a) is short; output (b) is long.\nTherefore, Output ({first_round[0].lower()}) is better.",
             "ba": f"Output (b) is fine.\nTherefore, Output ({first_round[1].lower()}) is better.  "}
    done = {(0, o): (judge.parse_call({"choices": [{"text": t}]}, None, o), t) for o, t in texts.items()}
    # upstream, in the original numbering: the order whose winner is "1" and the one whose winner is "2"
    winner = {"ab": {"A": "1", "B": "2"}[first_round[0]], "ba": {"A": "2", "B": "1"}[first_round[1]]}
    assert set(winner.values()) == {"1", "2"}
    assert judge.next_calls({k: v[0] for k, v in done.items()}) == [(0, "swap_ab"), (0, "swap_ba")]
    winner2swap = {winner["ab"]: False, winner["ba"]: True}
    actual = {w: texts["ba" if s else "ab"].strip() for w, s in winner2swap.items()}
    for swap in (False, True):
        e1 = actual["1"] if swap == winner2swap["1"] else reverse_output_ab(actual["1"])
        e2 = actual["2"] if swap == winner2swap["2"] else reverse_output_ab(actual["2"])
        kw = {"input": INSTRUCTION, "output_1": OUT_2 if swap else OUT_1, "output_2": OUT_1 if swap else OUT_2,
              "explanation_1": e2 if swap else e1, "explanation_2": e1 if swap else e2}
        expected = prompt_to_chatml(upstream_prompt(configs(strategy)[1]).format_map(kw))
        assert judge.call_messages(ROW, None, False, 0, "swap_ba" if swap else "swap_ab", done) == expected
    assert judge.call_settings(0, "swap_ab")["max_tokens"] == configs(strategy)[1]["openai_kwargs"]["max_tokens"]


def test_swap_output_names_matches_upstream() -> None:
    text = "Output (a) beats output (b); Output (b) loses to output (a). Output (c) stays."
    assert swap_output_names(text) == reverse_output_ab(text)
    assert swap_output_names(swap_output_names(text)) == text


def test_vanilla_is_the_training_recipes_prompt() -> None:
    """The make-a-judge recipe's Vanilla prompt (train/feedback_data.py) is the same as the judge's."""
    judge = get_judge("pairwise", template="llmbar_vanilla")
    assert dict(judge.prompts(ROW, None, False))["ab"] == vanilla_messages(INSTRUCTION, OUT_1, OUT_2)


# --- the stages in the runner ----------------------------------------------------------------------


class Scripted(Backend):
    """Answers ``answer(request)``; records requests."""

    kind = "scripted"

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer
        self.calls: list[GenerationRequest] = []
        self.concurrency = 3

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "scripted"}

    async def generate(self, req: GenerationRequest) -> Generation:
        self.calls.append(req)
        out = self.answer(req)
        if isinstance(out, BaseException):
            raise out
        return Generation.from_choices([Choice(out, "stop")], Usage(1, 1))


def pairs(n: int = 4) -> pd.DataFrame:
    rows = [{"id": f"p{i}", "instruction": f"Task {i}.", "system_a": "x", "system_b": "y",
             "response_a": f"answer {i} one", "response_b": f"answer {i} two"} for i in range(n)]
    return read_pairs(pd.DataFrame(rows))


def shown_first(req: GenerationRequest) -> str:
    """The response shown as Output (a) in a verdict prompt."""
    m = re.search(r"# Output \(a\):\n(.*?)\n", req.messages[-1]["content"])  # type: ignore[index]
    assert m is not None
    return m.group(1)


def metrics_reference_answer(req: GenerationRequest) -> str:
    user = req.messages[-1]["content"]  # type: ignore[index]
    if user.startswith("Please propose"):
        return "  1. Does it do task?  "
    if user.startswith("Task"):
        return f"reference for {user}"
    # the verdict: always the response whose text ends in "one" (so both orders agree)
    return "Output (a)" if shown_first(req).endswith("one") else "Output (b)."


def test_metrics_reference_stages_run_cached_and_resumable(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    be = Scripted(metrics_reference_answer)
    judge = get_judge("pairwise", template="llmbar_metrics_reference")
    run = run_judge(pairs(), judge, be, cache=cache)
    t, col = run.table, run.column
    assert col == "llmbar_metrics_reference"
    assert t[col].tolist() == ["A"] * 4 and t[f"{col}.consistent"].tolist() == [True] * 4
    assert t[f"{col}.questions"].tolist() == ["1. Does it do task?"] * 4
    assert t[f"{col}.reference_output"].tolist() == [f"reference for Task {i}." for i in range(4)]
    # per row: two stage calls (150 / 384 tokens), then two verdict calls (50) showing the stages' outputs
    assert len(be.calls) == 16
    assert sorted(c.max_tokens for c in be.calls) == [50] * 8 + [150] * 4 + [384] * 4
    verdicts = [c for c in be.calls if c.max_tokens == 50]
    assert all("Here are at most three questions" in c.messages[-1]["content"]  # type: ignore[index]
               and "\n1. Does it do task?\n\n# A reference output" in c.messages[-1]["content"]  # type: ignore[index]
               for c in verdicts)
    assert "# A reference output generated by a strong AI assistant:\nreference for Task 2.\n\n# Which" in "".join(
        c.messages[-1]["content"] for c in verdicts)  # type: ignore[index]
    assert run.summary.calls.new == 16 and run.summary.scored == 4
    # resumed: no call is made again, same columns
    be2 = Scripted(metrics_reference_answer)
    again = run_judge(pairs(), get_judge("pairwise", template="llmbar_metrics_reference"), be2, cache=cache)
    assert be2.calls == [] and again.summary.calls.cached == 16
    assert again.table[col].tolist() == t[col].tolist()


def test_a_run_killed_after_the_stages_resumes_with_the_verdicts(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")

    def dying(req: GenerationRequest) -> Any:
        if req.max_tokens == 50:
            return BackendRequestError("server killed", fatal=True)
        return metrics_reference_answer(req)

    first = Scripted(dying)
    with pytest.raises(BackendRequestError, match="killed"):
        run_judge(pairs(2), get_judge("pairwise", template="llmbar_metrics_reference"), first, cache=cache)
    second = Scripted(metrics_reference_answer)
    run = run_judge(pairs(2), get_judge("pairwise", template="llmbar_metrics_reference"), second, cache=cache)
    assert sorted(c.max_tokens for c in second.calls) == [50] * 4  # only the verdicts
    assert run.table[run.column].tolist() == ["A", "A"]


def swap_answer(req: GenerationRequest) -> str:
    """First round (CoT): always the first-shown output (the orders disagree) for p0 and p1, the
    response ending in "one" for p2 and p3; synthesis: the response ending in "two"."""
    user = req.messages[-1]["content"]  # type: ignore[index]
    first = shown_first(req)
    if "# Debate between Assistant (a) and Assistant (b)" in user:
        return "Output (b)" if first.endswith("one") else "Output (a)"
    if first.startswith(("answer 0", "answer 1")):
        return "Output (a) is fine.\nTherefore, Output (a) is better."
    return f"Reasons.\nTherefore, Output ({'a' if first.endswith('one') else 'b'}) is better."


def test_swap_runs_the_synthesis_round_only_where_the_orders_disagree(tmp_path: Path) -> None:
    be = Scripted(swap_answer)
    run = run_judge(pairs(), get_judge("pairwise", template="llmbar_swap"), be, cache=Cache(tmp_path / "c.sqlite"))
    t, col = run.table, run.column
    assert t[f"{col}.synthesis"].tolist() == [True, True, False, False]
    assert t[col].tolist() == ["B", "B", "A", "A"]
    assert len(be.calls) == 4 * 2 + 2 * 2
    synthesis = [c for c in be.calls if "# Debate" in c.messages[-1]["content"]]  # type: ignore[index]
    assert len(synthesis) == 4 and {c.max_tokens for c in synthesis} == {50}
    # the debate: Assistant (a) argues for the output shown as (a), in the names of that order
    for c in synthesis:
        user = c.messages[-1]["content"]  # type: ignore[index]
        assert "who thinks Output (a) is better:\nOutput (a) is fine.\nTherefore, Output (a) is better.\n" in user
        assert "who thinks Output (b) is better:\nOutput (b) is fine.\nTherefore, Output (b) is better.\n" in user


def test_logit_bias_is_sent_only_when_asked(tmp_path: Path) -> None:
    be = Scripted(metrics_reference_answer)
    judge = get_judge("pairwise", template="llmbar_metrics_reference", logit_bias=True)
    run_judge(pairs(1), judge, be, cache=Cache(tmp_path / "c.sqlite"))
    stage_calls = [c for c in be.calls if c.max_tokens != 50]
    verdict_calls = [c for c in be.calls if c.max_tokens == 50]
    assert len(stage_calls) == 2 and all(c.logit_bias is None for c in stage_calls)  # upstream: none for stages
    bias = verdict_calls[0].logit_bias
    assert bias is not None and bias["Output (a)"] == 7.0 and bias[" Neither"] == -100.0 and len(bias) == 13
    assert "logit_bias:yes" in str(judge.signature({"kind": "scripted"}, False))
    cot = get_judge("pairwise", template="llmbar_cot", logit_bias=True).call_settings(0, "ab")["logit_bias"]
    assert set(cot.values()) == {-100.0}  # CoT favours no tokens upstream
    body = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m").build_body(verdict_calls[0])
    assert body["logit_bias"] == bias and body["logit_bias_type"] == "tokens"
    assert "logit_bias" not in OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m").build_body(stage_calls[0])


def test_unparseable_and_failed_stages(tmp_path: Path) -> None:
    def answer(req: GenerationRequest) -> Any:
        user = req.messages[-1]["content"]  # type: ignore[index]
        if user.startswith("Task 1"):
            return BackendRequestError("bad gateway")
        if user.startswith("Task"):
            return "ref"
        return "Both are good."

    be = Scripted(answer)
    run = run_judge(pairs(2), get_judge("pairwise", template="llmbar_reference"), be, cache=Cache(tmp_path / "c.sqlite"))
    t, col = run.table, run.column
    assert t[col][0] == "unparseable" and t[col].isna().tolist() == [False, True]
    assert t[f"{col}.reason"].tolist() == ["no_score", "backend_error"]
    assert len(be.calls) == 2 + 2  # no verdict call after a failed stage


def test_mode_pairwise_with_an_llmbar_template_and_options() -> None:
    assert judge_for_template("pairwise", "llmbar_cot") is LLMBarJudge
    assert judge_for_template("relative", "prometheus_relative_tie").name == "prometheus_relative"
    assert judge_for_template("absolute", "prometheus1_absolute").name == "prometheus_absolute"
    for mode in ("ranking", "absolute"):
        with pytest.raises(EvalignError, match="use --mode pairwise"):
            judge_for_template(mode, "llmbar_cot")
    with pytest.raises(EvalignError, match="no tie"):
        get_judge("pairwise", template="llmbar_vanilla", tie=True)
    with pytest.raises(EvalignError, match="single-order"):
        get_judge("pairwise", template="llmbar_swap", both_orders=False)
    with pytest.raises(EvalignError, match="not an LLMBar template"):
        LLMBarJudge(template="prometheus_relative")
    single = get_judge("pairwise", template="llmbar_vanilla", both_orders=False, max_tokens=7)
    assert [o for o, _ in single.prompts(ROW, None, False)] == ["ab"]
    assert single.call_settings(0, "ab")["max_tokens"] == 7
    # --max-tokens sets the verdict rounds, never the stages
    j = get_judge("pairwise", template="llmbar_metrics", max_tokens=9)
    assert j.call_settings(0, "questions")["max_tokens"] == 150 and j.call_settings(0, "ab")["max_tokens"] == 9
    # every template hashes its stages: an edited stage prompt never reuses old grades
    t = load_template("llmbar_metrics")
    edited = type(t)(**{**t.__dict__, "stages": (type(t.stages[0])(**{**t.stages[0].__dict__, "prompt": "x"}),)})
    assert edited.hash(False) != t.hash(False)


# --- through the command line, over HTTP --------------------------------------------------------------


class _Chat(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint answering like :func:`swap_answer`; keeps every request body."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        text = swap_answer(GenerationRequest(messages=body["messages"], max_tokens=body["max_tokens"]))
        out = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                          "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                       "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def test_cli_mode_pairwise_template_llmbar_swap_with_logit_bias(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        src = tmp_path / "pairs.jsonl"
        pairs().to_json(src, orient="records", lines=True)
        out = tmp_path / "judged.jsonl"
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        res = CliRunner().invoke(app, ["judge", str(src), "--mode", "pairwise", "--template", "llmbar_swap",
                                       "--logit-bias", "--base-url", url, "--model", "m", "--json", "-o", str(out)])
        assert res.exit_code == 0, res.output
        summary = json.loads(Path(f"{out}.summary.json").read_text(encoding="utf-8"))
        assert summary["judge"] == "llmbar" and summary["column"] == "llmbar_swap"
        assert summary["distribution"] == {"A": 2, "B": 2} and summary["calls"]["new"] == 12
        table = pd.read_json(out, lines=True)
        assert table["llmbar_swap"].tolist() == ["B", "B", "A", "A"]
        bodies = _Chat.bodies
        assert len(bodies) == 12 and all(b["logit_bias_type"] == "tokens" for b in bodies)
        # first round (CoT): tokens to avoid only; synthesis (answer only): Output (a) / (b) favoured too
        assert sorted(len(b["logit_bias"]) for b in bodies) == [11] * 8 + [13] * 4
        assert {b["temperature"] for b in bodies} == {0.0}
    finally:
        server.shutdown()
    res = CliRunner().invoke(app, ["judge", str(src), "--mode", "pairwise", "--logit-bias", "--base-url", url,
                                   "--model", "m"])
    assert res.exit_code == 1 and "--logit-bias applies to the LLMBar templates" in " ".join(res.output.split())
    res = CliRunner().invoke(app, ["judge", str(src), "--mode", "pairwise", "--template", "llmbar_cot", "--tie",
                                   "--base-url", url, "--model", "m"])
    assert res.exit_code == 1 and "no tie answer" in res.output
