"""Running judges over tables against the real llama.cpp server (and the local HF backend):
columns, statuses and reasons, samples, pairs in both orders, caching, re-asking, faults, bias audit."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fault_proxy import Drop, Forward, Malformed, Status, Truncate, by_attempt
from scipy import stats

from evalign.backends import Backend, Choice, Generation, Usage, make_backend
from evalign.cache import Cache
from evalign.errors import BackendError, InputError
from evalign.io.text import text_lengths as response_length
from evalign.judges import get_judge, parse_grade, read_pairs, run_judge
from evalign.judges.bias import length_bias, order_swap_agreement, pairwise_length_bias

ABS_GRAMMAR = 'root ::= "Feedback: " [a-z ]{5,40} " [RESULT] " [1-5]'
PAIR_GRAMMAR = 'root ::= "Feedback: " [a-z ]{5,30} " [RESULT] " ("A" | "B")'
CRITERIA_GRAMMAR = (
    'root ::= "{\\"reasoning\\": \\"" [a-z ]{3,30} "\\", \\"naturalness\\": " [1-3] '
    '", \\"relatedness\\": " [1-3] ", \\"correctness\\": " [1-3] "}"'
)


def items(n: int, *, marker: bool = False, system: str = "sys") -> pd.DataFrame:
    """A small item table with varied response lengths (and a fault-proxy marker per row)."""
    rows = []
    for i in range(n):
        tag = f" [[req-{i}]]" if marker else ""
        rows.append({
            "id": f"q{i}", "system": system, "instruction": f"Describe topic {i}.{tag}", "input": "",
            "reference": f"A reference answer about topic {i}.", "response": ("word " * (1 + 3 * i)).strip(),
            "human": float(1 + i % 3),
        })  # fmt: skip
    df = pd.DataFrame(rows)
    df.attrs["source"] = "items.jsonl"
    return df


def pairs(n: int) -> pd.DataFrame:
    rows = [
        {"id": i, "instruction": f"Explain idea {i}.", "input": "", "reference": f"Idea {i} explained.",
         "system_a": "alpha", "system_b": "beta", "response_a": "short " * (1 + i), "response_b": "long " * (6 - i)}
        for i in range(n)
    ]  # fmt: skip
    return read_pairs(pd.DataFrame(rows))


def backend_for(url: str, model: str, **kw: Any) -> Backend:
    kw.setdefault("concurrency", 2)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("max_retries", 3)
    return make_backend("openai", base_url=url, model=model, **kw)


def chat_posts(proxy: Any) -> list[Any]:
    return [s for s in proxy.seen if s.path.endswith("/chat/completions")]


# --- absolute -------------------------------------------------------------------------------------


@pytest.mark.server
def test_gibberish_is_unscored_with_reasons_and_cached(llama_server, fault_proxy, tmp_path: Path) -> None:
    """The random model's text has no grade: every item is unscored with a reason, nothing is
    guessed, the raw outputs are in the cache, and a rerun makes no call."""
    table = items(6)
    cache = Cache(tmp_path / "c.sqlite")
    judge = get_judge("absolute", max_tokens=48, seed=3, constrain="off")  # the raw gibberish
    run = run_judge(table, judge, backend_for(fault_proxy.base_url, llama_server.model), cache=cache,
                    partial_path=tmp_path / "out.partial.jsonl")
    col = judge.column
    t = run.table
    cols = list(t.columns)
    at = cols.index(col)
    assert cols[at:at + 5] == [col, f"{col}.feedback", f"{col}.status", f"{col}.reason", f"{col}.error"]
    # then the usage columns (judges/usage.py): what each row's calls cost
    assert cols[at + 5:] == [f"{col}.{u}" for u in ("calls", "unparsed", "prompt_tokens", "completion_tokens",
                                                     "cache_read_tokens", "cache_write_tokens", "seconds", "model")]
    # each grade (or its absence) is exactly what the parser says about the cached raw output
    for c in run.calls:
        gen = json.loads(cache.get("judge", c["key"]))["generation"]["choices"][0]  # type: ignore[arg-type]
        expect = parse_grade(gen["text"], "absolute", gen["finish_reason"])
        row = t.iloc[c["row"]]
        assert row[f"{col}.reason"] == expect.reason
        if expect.ok:
            assert row[col] == expect.score
        else:
            assert math.isnan(row[col]) and row[f"{col}.status"] == "unscored"
    s = run.summary
    assert s["unscored"] >= 5  # gibberish
    assert s["scored"] + s["unscored"] == 6 and s["skipped"] == 0
    assert sum(s["unscored_by_reason"].values()) == s["unscored"]
    assert s["unscored_by_reason"] == dict(Counter(t.loc[t[f"{col}.status"] == "unscored", f"{col}.reason"]))
    assert s["calls"]["new"] == 6 and s["calls"]["cached"] == 0
    assert len(chat_posts(fault_proxy)) == 6
    lines = (tmp_path / "out.partial.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["event"] == "start" and len(lines) == 7
    # same command again: all from the cache, no request
    fault_proxy.reset()
    again = run_judge(table, get_judge("absolute", max_tokens=48, seed=3, constrain="off"),
                      backend_for(fault_proxy.base_url, llama_server.model), cache=cache)
    assert chat_posts(fault_proxy) == []
    assert again.summary["calls"]["cached"] == 6 and again.summary["calls"]["new"] == 0
    pd.testing.assert_frame_equal(again.table, run.table)
    # a cache that is not read makes every call anew
    run_judge(table, get_judge("absolute", max_tokens=48, seed=3, constrain="off"), backend_for(fault_proxy.base_url,
              llama_server.model), cache=Cache(tmp_path / "c.sqlite", read=False))
    assert len(chat_posts(fault_proxy)) == 6
    # constrained (the default), the calls differ (the constraint is in their cache key): made anew, and read
    fault_proxy.reset()
    shaped = run_judge(table, get_judge("absolute", max_tokens=48, seed=3),
                       backend_for(fault_proxy.base_url, llama_server.model), cache=cache)
    posts = chat_posts(fault_proxy)
    assert len(posts) == 6 and all(p.body["grammar"].startswith("root ::= ") for p in posts)
    assert shaped.summary["scored"] == 6 and shaped.summary.constraint["sent"] is True


@pytest.mark.server
def test_grammar_forced_scores_samples_and_length_bias(llama_server, fault_proxy, tmp_path: Path) -> None:
    table = items(6)
    judge = get_judge("absolute", grammar=ABS_GRAMMAR, samples=3, seed=11, max_tokens=96)
    cache = Cache(tmp_path / "c.sqlite")
    run = run_judge(table, judge, backend_for(fault_proxy.base_url, llama_server.model), cache=cache,
                    human="human")
    col = judge.column
    t = run.table
    assert (t[f"{col}.status"] == "scored").all() and run.summary["scored"] == 6
    # 3 samples per item, each its own call (sample index and seed in the key)
    assert len(chat_posts(fault_proxy)) == 18 and len({c["key"] for c in run.calls}) == 18
    seeds = sorted({s.body["seed"] for s in chat_posts(fault_proxy)})
    assert seeds == [11, 12, 13]
    for i in range(6):
        values = []
        for c in (c for c in run.calls if c["row"] == i):
            gen = json.loads(cache.get("judge", c["key"]))["generation"]["choices"][0]  # type: ignore[arg-type]
            assert gen["text"].startswith("Feedback: ")
            values.append(parse_grade(gen["text"], "absolute").score)
        assert all(v in (1.0, 2.0, 3.0, 4.0, 5.0) for v in values)
        row = t.iloc[i]
        assert row[col] == pytest.approx(np.mean(values))
        assert row[f"{col}.median"] == np.median(values)
        assert row[f"{col}.std"] == pytest.approx(np.std(values))
        assert row[f"{col}.n"] == 3
        assert row[f"{col}.feedback"] and "[RESULT]" not in row[f"{col}.feedback"]
    # the bias audit is scipy's rank correlation of score vs length, overall and within human grades
    lengths = t["response"].str.len().to_numpy()
    bias = run.summary["bias"]["length"]
    rho = stats.spearmanr(t[col], lengths)[0]
    assert bias["overall"]["spearman"] == pytest.approx(rho) or (math.isnan(rho) and math.isnan(bias["overall"]["spearman"]))
    assert set(bias["by_human"]) == {"1", "2", "3"}
    assert bias["by_human"]["1"]["n"] == 2
    assert sum(run.summary["distribution"].values()) == 6


@pytest.mark.server
def test_reask_is_bounded_and_cached(llama_server, fault_proxy, tmp_path: Path) -> None:
    """Gibberish stays gibberish: each unscored item is asked again exactly ``reask`` times, each
    re-ask carrying the unreadable answer, and none of it is repeated on a rerun."""
    table = items(3)
    cache = Cache(tmp_path / "c.sqlite")
    run = run_judge(table, get_judge("absolute", max_tokens=24, reask=2, seed=1, constrain="off"),
                    backend_for(fault_proxy.base_url, llama_server.model), cache=cache)
    unscored = run.summary["unscored"]
    assert unscored >= 2
    posts = chat_posts(fault_proxy)
    n_first = 3
    assert len(posts) == n_first + run.summary["calls"]["reasked"]
    reasks = [p for p in posts if len(p.body["messages"]) == 4]
    assert reasks and all(p.body["messages"][2]["role"] == "assistant" for p in reasks)
    assert "could not be read" in reasks[0].body["messages"][3]["content"]
    assert max(c["attempt"] for c in run.calls) <= 2
    fault_proxy.reset()
    run_judge(table, get_judge("absolute", max_tokens=24, reask=2, seed=1, constrain="off"),
              backend_for(fault_proxy.base_url, llama_server.model), cache=cache)
    assert chat_posts(fault_proxy) == []


@pytest.mark.server
def test_faults_every_item_graded_or_reported_once(llama_server, fault_proxy, tmp_path: Path) -> None:
    """Errors, drops, truncated and malformed bodies are retried; an item that keeps failing is
    reported unscored (backend_error), not cached, and graded on the next run; nothing is lost and
    nothing is graded twice."""
    table = items(8, marker=True)
    schedule = by_attempt({
        "[[req-0]]": [Status(500), Status(429, retry_after="0")],
        "[[req-1]]": [Drop()],
        "[[req-2]]": [Truncate()],
        "[[req-3]]": [Malformed(), Status(503)],
        "[[req-5]]": [Status(500)] * 10,  # more than the retries: fails for good
    })  # fmt: skip
    fault_proxy.reset(schedule)
    cache = Cache(tmp_path / "c.sqlite")
    judge = get_judge("absolute", grammar=ABS_GRAMMAR, seed=2, max_tokens=96)
    backend = backend_for(fault_proxy.base_url, llama_server.model, max_retries=3)
    run = run_judge(table, judge, backend, cache=cache)
    col = judge.column
    t = run.table
    assert len(t) == 8 and set(t["id"]) == {f"q{i}" for i in range(8)}
    assert t.loc[5, f"{col}.status"] == "unscored" and t.loc[5, f"{col}.reason"] == "backend_error"
    others = t.drop(index=5)
    assert (others[f"{col}.status"] == "scored").all()
    assert run.summary["calls"]["failed"] == 1 and run.summary["unscored_by_reason"] == {"backend_error": 1}
    assert run.summary["calls"]["http_retries"] >= 6
    answered = Counter(s.marker for s in chat_posts(fault_proxy) if type(s.action).__name__ == "Forward")
    assert answered == Counter({f"[[req-{i}]]": 1 for i in range(8) if i != 5})
    assert cache.count("judge") == 7  # the failed call is not cached
    # next run (the server healthy again): only the failed item is asked again, and now it is graded
    fault_proxy.reset(lambda seen: Forward())
    again = run_judge(table, judge, backend_for(fault_proxy.base_url, llama_server.model), cache=cache)
    assert [s.marker for s in chat_posts(fault_proxy)] == ["[[req-5]]"]
    assert (again.table[f"{col}.status"] == "scored").all()
    pd.testing.assert_series_equal(again.table[col].drop(index=5), run.table[col].drop(index=5))


@pytest.mark.server
def test_skip_self_evaluation(llama_server, fault_proxy, tmp_path: Path) -> None:
    table = pd.concat([items(2), items(2, system=llama_server.model).assign(id=["r0", "r1"])], ignore_index=True)
    judge = get_judge("absolute", max_tokens=16)
    run = run_judge(table, judge, backend_for(fault_proxy.base_url, llama_server.model),
                    cache=Cache(tmp_path / "c.sqlite"), skip_self=True)
    status = run.table[f"{judge.column}.status"].tolist()
    assert status[2:] == ["skipped", "skipped"] and "skipped" not in status[:2]
    assert run.summary["skipped"] == 2 and len(chat_posts(fault_proxy)) == 2
    assert run.table[f"{judge.column}.reason"].tolist()[2:] == ["self_evaluation"] * 2


# --- pairwise ---------------------------------------------------------------------------------------


@pytest.mark.server
def test_pairwise_both_orders_on_server(llama_server, fault_proxy, tmp_path: Path) -> None:
    table = pairs(5)
    judge = get_judge("pairwise", grammar=PAIR_GRAMMAR, seed=4, max_tokens=96)
    run = run_judge(table, judge, backend_for(fault_proxy.base_url, llama_server.model),
                    cache=Cache(tmp_path / "c.sqlite"))
    col = judge.column
    t = run.table
    posts = chat_posts(fault_proxy)
    assert len(posts) == 10  # every pair in both orders
    # the B/A order really shows response_b first
    first = posts[0].body["messages"][1]["content"]
    assert any("###Response A:\n" + table.loc[i, "response_b"] + "\n" in p.body["messages"][1]["content"]
               for p in posts for i in range(5))
    assert "###Reference Answer:\nIdea" in first
    assert (t[f"{col}.status"] == "scored").all()
    for _, row in t.iterrows():
        ab, ba = row[f"{col}.ab"], row[f"{col}.ba"]
        assert ab in ("A", "B") and ba in ("A", "B")
        expected = ab if ab == ba else "tie"
        assert row[col] == expected
        assert row[f"{col}.code"] == {"A": 1.0, "B": -1.0, "tie": 0.0}[expected]
        assert row[f"{col}.consistent"] == (ab == ba)
    swap = run.summary["bias"]["order_swap"]
    assert swap["position_agreement"] == pytest.approx((t[f"{col}.ab"] == t[f"{col}.ba"]).mean())
    assert swap["n_pairs"] == 5 and swap["n_verdicts"] == 10
    picked_first = (t[f"{col}.ab"] == "A").sum() + (t[f"{col}.ba"] == "B").sum()
    assert swap["prefers_first"] == pytest.approx(picked_first / 10)
    assert sum(run.summary["distribution"].values()) == 5


@pytest.mark.server
def test_pairwise_single_order_with_tie(llama_server, fault_proxy, tmp_path: Path) -> None:
    grammar = 'root ::= "Feedback: " [a-z ]{5,30} " [RESULT] " ("A" | "B" | "TIE")'
    judge = get_judge("pairwise", tie=True, both_orders=False, grammar=grammar, reference=False, seed=9,
                      max_tokens=96)
    run = run_judge(pairs(4), judge, backend_for(fault_proxy.base_url, llama_server.model),
                    cache=Cache(tmp_path / "c.sqlite"))
    posts = chat_posts(fault_proxy)
    assert len(posts) == 4
    assert "(A, B or TIE)" in posts[0].body["messages"][1]["content"]  # the tie template (June-2024 text + TIE)
    assert "###Reference Answer" not in posts[0].body["messages"][1]["content"]
    t = run.table
    assert set(t[judge.column]) <= {"A", "B", "tie", "unparseable"}
    assert t[f"{judge.column}.ba"].isna().all() and "order_swap" not in run.summary["bias"]


# --- criteria ---------------------------------------------------------------------------------------


@pytest.mark.server
def test_criteria_json_on_server(llama_server, fault_proxy, tmp_path: Path) -> None:
    judge = get_judge("criteria", grammar=CRITERIA_GRAMMAR, max_tokens=128)
    cache = Cache(tmp_path / "c.sqlite")
    run = run_judge(items(4), judge, backend_for(fault_proxy.base_url, llama_server.model), cache=cache)
    t = run.table
    # order-independent: requests run concurrently, so find the one for row 0 by its content
    contents = [p.body["messages"][1]["content"] for p in chat_posts(fault_proxy)]
    row0 = [c for c in contents if "[Task]: Describe topic 0." in c]
    assert len(row0) == 1 and "[Gold Answer] (If there are several gold answers then they are all correct " \
        "alternatives): A reference answer about topic 0." in row0[0]
    assert (t["criteria.status"] == "scored").all()
    for c in run.calls:
        gen = json.loads(cache.get("judge", c["key"]))["generation"]["choices"][0]  # type: ignore[arg-type]
        obj = json.loads(gen["text"])
        row = t.iloc[c["row"]]
        for k in ("naturalness", "relatedness", "correctness"):
            assert row[f"criteria.{k}"] == obj[k]
        assert row["criteria"] == obj["correctness"]  # the paper's main criterion is the score
        assert row["criteria.feedback"] == obj["reasoning"].strip()


# --- the local Hugging Face backend -----------------------------------------------------------------


def test_hf_backend_path(tiny_hf_model, tmp_path: Path) -> None:
    import torch

    torch.set_num_threads(1)
    backend = make_backend("hf", model_path=str(tiny_hf_model("raise")), batch_size=4)
    judge = get_judge("absolute", max_tokens=12, seed=0, reference=False, constrain="off")
    cache = Cache(tmp_path / "c.sqlite")
    table = items(3)
    run = run_judge(table, judge, backend, cache=cache)
    t = run.table
    # 12 tokens of random text: cut off at max_tokens (or no grade) -> unscored, never a guess
    assert set(t[f"{judge.column}.status"]) == {"unscored"}
    assert set(t[f"{judge.column}.reason"]) <= {"truncated", "no_score", "empty"}
    assert backend.requests == 3 and cache.count("judge") == 3
    assert run.summary["backend"]["kind"] == "hf"
    again = run_judge(table, judge, backend, cache=cache)
    assert backend.requests == 3 and again.summary["calls"]["cached"] == 3
    # constrained (the default where the backend can): the same random model answers in the shape, every row scored
    shaped = get_judge("absolute", max_tokens=24, seed=0, reference=False)
    run = run_judge(table, shaped, backend, cache=cache)
    assert run.summary.constraint == {"mode": "auto", "sent": True, "note": None, "outside_shape": 0}
    assert set(run.table[f"{shaped.column}.status"]) == {"scored"} and backend.requests == 6
    assert "|constraint:shape#" in run.signature


# --- edge cases with an in-process backend ----------------------------------------------------------


class ScriptedBackend(Backend):
    """Answers from a function of the request; counts calls. For edge cases only."""

    kind = "scripted"

    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer
        self.calls: list[Any] = []
        self.concurrency = 4

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "scripted"}

    async def generate(self, req: Any) -> Generation:
        self.calls.append(req)
        out = self.answer(req)
        if isinstance(out, Exception):
            raise out
        return Generation.from_choices([Choice(out, "stop")], Usage(1, 1))


def test_duplicate_rows_make_one_call(tmp_path: Path) -> None:
    table = items(2)
    dup = pd.concat([table, table.assign(system="other")], ignore_index=True)  # same prompt twice
    be = ScriptedBackend(lambda req: "Feedback: fine. [RESULT] 4")
    run = run_judge(dup, get_judge("absolute"), be, cache=Cache(tmp_path / "c.sqlite"))
    assert len(be.calls) == 2
    assert run.table["prometheus_absolute[helpfulness]"].tolist() == [4.0] * 4


def test_backend_error_is_reported_not_cached(tmp_path: Path) -> None:
    be = ScriptedBackend(lambda req: BackendError("boom") if "topic 1" in req.messages[1]["content"]
                         else "Feedback: ok [RESULT] 2")
    cache = Cache(tmp_path / "c.sqlite")
    run = run_judge(items(3), get_judge("absolute"), be, cache=cache)
    col = "prometheus_absolute[helpfulness]"
    reasons = run.table[f"{col}.reason"]
    assert reasons.isna().tolist() == [True, False, True] and reasons[1] == "backend_error"
    assert cache.count("judge") == 2


def test_rubric_per_row_and_reference_rules(tmp_path: Path) -> None:
    table = items(2)
    table["rubric"] = [
        json.dumps({"criteria": "Is it short?", **{f"score{i}": f"s{i}" for i in range(1, 6)}}),
        {"criteria": "Is it long?", **{f"score{i}_description": f"l{i}" for i in range(1, 6)}},
    ]
    be = ScriptedBackend(lambda req: "Feedback: ok [RESULT] 3")
    run = run_judge(table, get_judge("absolute", rubric_column="rubric"), be, cache=Cache(tmp_path / "c.sqlite"))
    assert "[Is it short?]\nScore 1: s1" in be.calls[0].messages[1]["content"] or \
        "[Is it short?]\nScore 1: s1" in be.calls[1].messages[1]["content"]
    assert run.column == "prometheus_absolute[rubric]"
    table.loc[1, "rubric"] = json.dumps({"criteria": "x", "score1": "a"})
    with pytest.raises(InputError) as info:
        run_judge(table, get_judge("absolute", rubric_column="rubric"), be, cache=Cache(tmp_path / "c.sqlite"))
    assert (info.value.file, info.value.line, info.value.field) == ("items.jsonl", 2, "rubric.score2_description")
    # reference: auto uses it when every row has one; True with a missing one is an error naming the row
    table = items(2)
    table.loc[1, "reference"] = None
    be.calls.clear()
    run_judge(table, get_judge("absolute"), be, cache=Cache(tmp_path / "c.sqlite"))
    assert "###Reference Answer" not in be.calls[0].messages[1]["content"]
    with pytest.raises(InputError, match="no reference") as info:
        run_judge(table, get_judge("absolute", reference=True), be, cache=Cache(tmp_path / "c.sqlite"))
    assert (info.value.line, info.value.field) == (2, "reference")


def test_read_pairs_errors(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"id": 1, "instruction": "i", "response_a": "a", "response_b": "b"}) + "\n"
                    + json.dumps({"id": 2, "instruction": "i", "response_a": "a"}) + "\n")
    with pytest.raises(InputError, match=r"field 'response_b': missing$") as info:
        read_pairs(path)
    assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, "response_b")
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps({"id": 1, "instruction": "i", "response_a": "a", "response_b": "b"}) + "\n")
    df = read_pairs(ok)
    assert df.loc[0, "system_a"] == "A" and df.loc[0, "id"] == "1"
    with pytest.raises(InputError, match="pair table"):
        run_judge(items(1), get_judge("pairwise"), ScriptedBackend(lambda r: "x"), cache=Cache(tmp_path / "c"))


# --- bias functions against scipy ----------------------------------------------------------------


def test_bias_functions() -> None:
    scores = np.array([1, 2, 2, 3, 5, np.nan, 4.0])
    texts = ["a", "bb b", "ccc", "dddd d", "eeeee eeeee", "f", "gg"]
    lengths = response_length(texts)
    assert response_length(texts, "words").tolist() == [1, 2, 1, 2, 2, 1, 1]
    out = length_bias(scores, texts, human=[1, 1, 1, 2, 2, 2, np.nan])
    ok = np.isfinite(scores)
    assert out["overall"]["spearman"] == pytest.approx(stats.spearmanr(scores[ok], lengths[ok])[0])
    assert out["overall"]["kendall"] == pytest.approx(stats.kendalltau(scores[ok], lengths[ok])[0])
    assert out["overall"]["n"] == 6
    assert out["by_human"]["1"]["n"] == 3 and out["by_human"]["2"]["n"] == 2
    assert math.isnan(out["by_human"]["2"]["spearman"])  # fewer than 3 items
    sw = order_swap_agreement(["A", "B", "A", None, None], ["A", "A", "tie", "B", None])
    # equal: pair 1 and pair 5 (two missing verdicts agree, as LLMBar counts them) -> 2 of 5
    assert sw["position_agreement"] == pytest.approx(2 / 5) and sw["n_pairs"] == 5
    # first shown picked: ab "A" twice; ba "B" once -> 3 of 6 decided verdicts
    assert sw["prefers_first"] == pytest.approx(3 / 6) and sw["n_verdicts"] == 6
    pl = pairwise_length_bias([1, -1, 0, 1], ["long text", "x", "y", "zz"], ["s", "longer", "q", "zzzz"])
    assert pl["n_decided"] == 3 and pl["prefers_longer"] == pytest.approx(2 / 3)
    # both orders pooled: the longer is A, B, (equal), B; ab picks A, A, -, B (2 of 3 decided on
    # pairs of different lengths), ba picks A, B, -, A (2 of 3) -> 4 of 6
    pooled = pairwise_length_bias([1, 0, 0, 0], ["long text", "x", "y", "zz"], ["s", "longer", "q", "zzzz"],
                                  orders=[["A", "A", "A", "B"], ["A", "B", "tie", "A"]])
    assert pooled["n_decided"] == 6 and pooled["prefers_longer"] == pytest.approx(4 / 6)
