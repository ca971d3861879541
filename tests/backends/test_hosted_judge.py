"""``evalign judge`` / ``bench`` / ``probe`` with the native anthropic and gemini backends, against the
fakes of their wire formats (fake_providers.py): the prompt cache's tokens in the summary and per row,
the cost from the real token split beside the list price, Gemini's logprobs -> G-Eval's weighted score,
a safety block unscored with its reason, Claude's missing logprobs said once, and the key nowhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from fake_providers import FakeProviders
from typer.testing import CliRunner

from evalign.cli import app

KEY = "sk-ant-fake-SECRET-98765"


def write_items(path: Path, n: int = 4) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "system": "sys", "instruction": f"Name a colour ({i}).", "reference": "Blue.",
                                 "response": "Red " * (i + 1), "human": 1 + i % 2}) + "\n")
    return path


def judge(fake_url: str, src: Path, *args: str) -> dict:
    res = CliRunner().invoke(app, ["judge", str(src), "--model", "claude-sonnet-4-5", "--base-url", fake_url,
                                   "--api-key-env", "FAKE_KEY", "--concurrency", "1", "--json", *args])
    assert res.exit_code == 0, res.output
    assert KEY not in res.output
    return json.loads(res.stdout)


def no_key_anywhere(*folders: Path) -> None:
    for folder in folders:
        for f in folder.rglob("*"):
            if f.is_file():
                assert KEY.encode() not in f.read_bytes(), f


def test_anthropic_judge_cache_tokens_and_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    prices = tmp_path / "prices.yaml"
    prices.write_text('"claude-sonnet-*": {input: 3, output: 15, cache_read: 0.1, cache_write_5m: 1.25}\n')
    src = write_items(tmp_path / "items.jsonl")
    out = tmp_path / "judged.jsonl"
    with FakeProviders(reply=lambda s: "Feedback: it names a colour. [RESULT] 4") as fake:
        s = judge(fake.anthropic_url, src, "--backend", "anthropic", "--mode", "absolute", "--rubric", "honesty",
                  "--prices", str(prices), "-o", str(out))
        sent = fake.requests
    assert len(sent) == 4 and all(r.headers["x-api-key"] == KEY for r in sent)
    assert all(r.headers["anthropic-version"] == "2023-06-01" for r in sent)
    assert all(r.body["system"][0]["cache_control"] == {"type": "ephemeral"} for r in sent)
    system = sent[0].cached_prefix.split()  # the system prompt and the template's text before the item
    assert len(system) > len(sent[0].system.split()) and all(r.cached_prefix == sent[0].cached_prefix for r in sent)
    u = s["usage"]
    # the fake counts words: the first call writes the system prompt, the three others read it
    assert u["cache_write_tokens"] == len(system) and u["cache_read_tokens"] == 3 * len(system)
    prompt, completion = u["prompt_tokens"], u["completion_tokens"]
    uncached = prompt - 4 * len(system)
    run = (uncached * 3 + len(system) * 3 * 1.25 + 3 * len(system) * 3 * 0.1 + completion * 15) / 1e6
    listed = (prompt * 3 + completion * 15) / 1e6
    assert u["cost_detail"]["run"]["cost"] == pytest.approx(run) and u["cost"] == pytest.approx(run)
    assert u["cost_detail"]["list"]["cost"] == pytest.approx(listed) and run < listed
    assert u["cost_detail"]["run"]["cost_per_1000_items"] == pytest.approx(1000 * run / 4)
    assert u["cost_detail"]["list"]["cost_per_1000_items"] == pytest.approx(1000 * listed / 4)
    assert u["price"]["cache_read"] == 0.1 and u["price"]["batch"] == 0.5
    assert s["prompt_cache"]["mode"] == "auto" and s["prompt_cache"]["minimum"] == 1024
    assert s["prompt_cache"]["reaches_minimum"] is False and "below" in s["prompt_cache"]["note"]
    assert s["scored"] == 4 and s["models"][0]["model"] == "claude-sonnet-4-5"
    table = pd.read_json(out, lines=True)
    col = s["column"]
    assert table[f"{col}.cache_write_tokens"].tolist() == [len(system), 0, 0, 0]
    assert table[f"{col}.cache_read_tokens"].tolist() == [0, len(system), len(system), len(system)]
    no_key_anywhere(tmp_path, Path(os.environ["EVALIGN_CACHE"]).parent)
    # the text summary says both costs
    res = CliRunner().invoke(app, ["judge", str(src), "--backend", "anthropic", "--model", "claude-sonnet-4-5",
                                   "--base-url", fake.anthropic_url, "--api-key-env", "FAKE_KEY", "--mode",
                                   "absolute", "--rubric", "honesty", "--prices", str(prices)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "this run's token split / list price" in res.output and "read from / written to" in res.output


def test_gemini_geval_weights_the_logprobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_KEY", KEY)
    src = write_items(tmp_path / "items.jsonl", 3)
    out = tmp_path / "g.jsonl"
    with FakeProviders(reply=lambda s: "3", top={"3": 0.6, "4": 0.3, "2": 0.1}) as fake:
        s = judge(fake.gemini_url, src, "--backend", "gemini", "--model", "gemini-2.5-flash", "--mode", "geval",
                  "-o", str(out))
        body = fake.requests[0].body
        path = fake.requests[0].path
    assert path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert body["generationConfig"]["responseLogprobs"] is True and body["generationConfig"]["logprobs"] >= 3
    assert s["methods"] == {"logprobs": 3} and s["notes"] == []
    table = pd.read_json(out, lines=True)
    col = s["column"]
    assert table[col].tolist() == pytest.approx([0.6 * 3 + 0.3 * 4 + 0.1 * 2] * 3)
    no_key_anywhere(tmp_path)


def test_claude_geval_falls_back_to_the_sampled_grade(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = write_items(tmp_path / "items.jsonl", 3)
    with FakeProviders(reply=lambda s: "3") as fake:
        res = CliRunner().invoke(app, ["judge", str(src), "--backend", "anthropic", "--model", "claude-haiku-4-5",
                                       "--base-url", fake.anthropic_url, "--mode", "geval", "--json"])
        assert all("logprobs" not in r.body for r in fake.requests)
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert s["methods"] == {"samples": 3} and s["mean"] == 3.0
    assert caplog.text.count("Claude returns no logprobs") == 1
    said = ("G-Eval: the backend returned no logprobs at the score position (Claude returns none): 3 of 3 rows "
            "read the sampled grade instead (--geval-fallback samples); their J.p / J.expected stay empty")
    assert s["notes"] == [said]  # once in the run summary
    assert res.stderr.count("note: G-Eval: the backend returned no logprobs") == 1  # and once on the terminal


def test_the_no_logprobs_note_is_in_a_rerun_from_the_cache_and_with_fallback_error(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl", 3)
    args = ["judge", str(src), "--backend", "anthropic", "--model", "claude-haiku-4-5", "--mode", "geval", "--json"]
    with FakeProviders(reply=lambda s: "3") as fake:
        first = CliRunner().invoke(app, [*args, "--base-url", fake.anthropic_url])
        n = len(fake.requests)
        again = CliRunner().invoke(app, [*args, "--base-url", fake.anthropic_url])
        strict = CliRunner().invoke(app, [*args, "--base-url", fake.anthropic_url, "--geval-fallback", "error"])
        assert len(fake.requests) == n == 3  # the reruns answered from the cache
    assert first.exit_code == again.exit_code == strict.exit_code == 0, (first.output, strict.output)
    assert json.loads(again.stdout)["notes"] == json.loads(first.stdout)["notes"]
    s = json.loads(strict.stdout)
    assert s["unscored_by_reason"] == {"no_logprobs": 3}
    assert s["notes"] == ["G-Eval: the backend returned no logprobs at the score position (Claude returns none): "
                          "3 of 3 rows left unscored no_logprobs (--geval-fallback error); their J.p / J.expected "
                          "stay empty"]


def test_gemini_safety_block_is_unscored_with_its_reason(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl", 2)
    with FakeProviders(finish_reason="SAFETY") as fake:
        s = judge(fake.gemini_url, src, "--backend", "gemini", "--model", "gemini-2.5-pro", "--mode", "absolute")
        assert len(fake.requests) == 2  # answered: not retried, not re-asked
    assert s["unscored"] == 2 and s["unscored_by_reason"] == {"blocked": 2}


def test_bench_and_probe_take_the_hosted_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    prices = tmp_path / "prices.yaml"
    prices.write_text('"claude-*": {input: 3, output: 15}\n')
    monkeypatch.setenv("EVALIGN_PRICES", str(prices))
    pairs = tmp_path / "pairs.jsonl"
    with pairs.open("w") as fh:
        for i in range(3):
            fh.write(json.dumps({"id": i, "system_a": "x", "system_b": "y", "instruction": f"Say hi ({i}).", "response_a": "Hello!",
                                 "response_b": "Hi " * (i + 1), "winner": "A"}) + "\n")
    with FakeProviders(reply=lambda s: "Feedback: ok. [RESULT] A") as fake:
        res = CliRunner().invoke(app, ["probe", str(pairs), "--backend", "gemini", "--model", "gemini-2.5-flash",
                                       "--base-url", fake.gemini_url, "--probe", "position", "--json"])
        assert res.exit_code == 0, res.output
        assert {r.provider for r in fake.requests} == {"gemini"}
        n_probe = len(fake.requests)
        bench = CliRunner().invoke(app, ["bench", "--judge", f"claude=anthropic:claude-sonnet-4-5@{fake.anthropic_url}",
                                         "--sets", "llmbar-natural", "--per-set", "2", "--published", "none",
                                         "--json"])
        assert bench.exit_code == 0, bench.output
        sent = fake.requests[n_probe:]
        shown = CliRunner().invoke(app, ["bench", "--judge", f"claude=anthropic:claude-sonnet-4-5@{fake.anthropic_url}",
                                         "--sets", "llmbar-natural", "--per-set", "2", "--published", "none"],
                                   env={"COLUMNS": "250"})
        assert shown.exit_code == 0, shown.output
    assert "cost (list)" in shown.output and "cache read/write" in shown.output
    run = json.loads(bench.stdout)["runs"][0]
    assert run["cache_read_tokens"] > 0 and run["cache_write_tokens"] > 0
    assert 0 < run["cost"] < run["list_cost"]
    assert sent and {r.provider for r in sent} == {"anthropic"}
    assert {r.headers["x-api-key"] for r in sent} == {KEY}  # the default variable of the anthropic kind
    assert KEY not in bench.output and KEY not in res.output


def test_run_config_takes_a_hosted_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    rows = [{"id": f"p{i}", "instruction": f"q {i}?", "system_a": "x", "system_b": "y", "response_a": "apples",
             "response_b": "no", "pref_1": 1} for i in range(6)]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    def better(seen: object) -> str:  # the response that names the apples
        a = seen.user.split("###Response A:")[1].split("###Response B:")[0]  # type: ignore[attr-defined]
        return f"Feedback: compared. [RESULT] {'A' if 'apples' in a else 'B'}"

    with FakeProviders(reply=better) as fake:
        cfg = {"version": 1, "name": "hosted", "evaluations": [{
            "name": "pairs", "data": {"file": "pairs.jsonl"}, "metrics": ["rouge_l"],
            "judges": [{"mode": "pairwise", "backend": "gemini", "model": "gemini-2.5-flash",
                        "base_url": fake.gemini_url, "name": "gem", "backend_options": {"prompt_cache": "off"}}],
            "meta": {"resampling": {"n_resamples": 10, "n_permutations": 10}}}], "report": {"formats": ["csv"]}}
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        res = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
        assert res.exit_code == 0, (res.output, res.exception)
        sent = fake.requests
    assert len(sent) == 12 and {r.headers["x-goog-api-key"] for r in sent} == {KEY}  # both orders of 6 pairs
    judged = pd.read_json(tmp_path / "out" / "pairs" / "pairs.jsonl", lines=True)
    assert judged["gem"].tolist() == ["A"] * 6
    no_key_anywhere(tmp_path / "out")


def test_synth_and_cascade_specs_take_a_hosted_teacher(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalign.backends import BackendSpec, GenerationRequest, open_backend
    from evalign.cli.synth import make_teacher

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    with FakeProviders(reply=lambda s: "a rubric") as fake:
        teacher = make_teacher("gemini", "gemini-2.5-flash", fake.gemini_url, None, 2, 8, None, 30.0, 1)
        assert type(teacher).__name__ == "GeminiBackend" and teacher.api_key_env == "GEMINI_API_KEY"
        assert teacher.run([GenerationRequest(prompt="Write a rubric.")])[0].text == "a rubric"
        # the spec a cascade stage or `judge --cascade` rebuilds its judge from
        spec = BackendSpec.from_dict({"kind": "anthropic", "model": "claude-haiku-4-5", "url": [fake.anthropic_url],
                                      "options": {"system_prompt": "role", "prompt_cache": "1h"}})
        with open_backend(spec) as backend:
            assert backend.run([GenerationRequest(messages=[{"role": "system", "content": "S"},
                                                            {"role": "user", "content": "x"}])])[0].text == "a rubric"
        assert fake.requests[0].headers["x-goog-api-key"] == KEY
        assert fake.requests[1].body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
        assert "x-api-key" not in fake.requests[1].headers  # $ANTHROPIC_API_KEY is not set: no key sent


def test_gemini_logprobs_give_a_pair_judges_p_a(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"id": i, "system_a": "x", "system_b": "y", "instruction": f"Fruit? ({i})",
                                         "response_a": "apples", "response_b": "no"}) + "\n" for i in range(3)))

    def first_is_better(seen: object) -> bool:
        return "apples" in seen.user.split("###Response A:")[1].split("###Response B:")[0]  # type: ignore[attr-defined]

    def reply(seen: object) -> str:
        return f"Feedback: compared. [RESULT] {'A' if first_is_better(seen) else 'B'}"

    def top(seen: object) -> dict[str, float]:  # 0.8 on the verdict given, 0.2 on the other
        return {"A": 0.8, "B": 0.2} if first_is_better(seen) else {"B": 0.8, "A": 0.2}

    out = tmp_path / "judged.jsonl"
    with FakeProviders(reply=reply, top=top, top_pos=-1) as fake:
        s = judge(fake.gemini_url, pairs, "--backend", "gemini", "--model", "gemini-2.5-flash", "--mode", "pairwise",
                  "--top-logprobs", "5", "-o", str(out))
        assert all(r.body["generationConfig"]["logprobs"] == 5 for r in fake.requests)
    table = pd.read_json(out, lines=True)
    col = s["column"]
    assert table[col].tolist() == ["A"] * 3
    assert table[f"{col}.p_a"].tolist() == pytest.approx([0.8] * 3)  # both orders mapped back to A


def test_a_json_answer_goes_as_anthropics_structured_output(tmp_path: Path) -> None:
    from evalign.judges.parsing import CRITERIA

    src = write_items(tmp_path / "items.jsonl", 2)
    with FakeProviders(reply=lambda s: json.dumps(dict.fromkeys(CRITERIA, 2))) as fake:
        s = judge(fake.anthropic_url, src, "--backend", "anthropic", "--mode", "criteria", "--no-reference")
        fmt = fake.requests[0].body["output_config"]["format"]
    assert s["scored"] == 2 and s["mean"] == 2.0 and s["constraint"]["sent"] is True
    assert fmt["type"] == "json_schema" and fmt["schema"]["type"] == "object"
    assert fmt["schema"]["additionalProperties"] is False
    text = json.dumps(fmt["schema"])
    assert '"minimum"' not in text and '"maximum"' not in text  # refused keywords, moved into descriptions
    assert fmt["schema"]["properties"]["correctness"] == {"type": "integer", "description": "{minimum: 1, maximum: 3}"}
