"""What a hosted run cost: the price file's multipliers (batch, cache_read, cache_write_5m, cache_write_1h),
the run's real token split beside the list price, batched / flex calls, and the prompt cache's minimum."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalign.errors import InputError
from evalign.judges.prompt_cache import cache_minimum, prefix_report, shared_prefix_chars
from evalign.judges.summary import CallUsage
from evalign.judges.usage import MULTIPLIERS, JudgeUsage, Price, Tokens, read_prices


def test_multipliers_default_to_the_providers_lists() -> None:
    assert MULTIPLIERS == {"batch": 0.5, "cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2.0}
    p = Price(3, 15)
    assert (p.batch, p.cache_read, p.cache_write_5m, p.cache_write_1h) == (0.5, 0.1, 1.25, 2.0)


def test_the_issues_worked_example() -> None:
    """20,000 items, a 2,000-token shared prefix, 500 item tokens and 200 output tokens each, on a
    $3 / $15 model: about $210 sent plainly, about $51 batched and cached (issue 44)."""
    n, shared, own, out = 20_000, 2_000, 500, 200
    price = Price(3, 15)
    plain = Tokens(prompt=n * (shared + own), completion=n * out)
    assert price.run_cost(plain) == pytest.approx(price.cost(plain.prompt, plain.completion)) == pytest.approx(210)
    cached = Tokens(prompt=plain.prompt, completion=plain.completion, cache_read=(n - 1) * shared,
                    cache_write=shared, cache_write_1h=shared)
    assert price.run_cost(cached, batched=cached) == pytest.approx(51.0, abs=0.2)
    assert price.run_cost(cached) == pytest.approx(102.0, abs=0.1)  # cached, not batched


def test_run_cost_splits_cache_reads_writes_and_batched_calls() -> None:
    price = Price(2, 10, batch=0.4, cache_read=0.2, cache_write_5m=1.5, cache_write_1h=3)
    t = Tokens(prompt=1_000_000, completion=100_000, cache_read=400_000, cache_write=300_000, cache_write_1h=100_000)
    # uncached 300k at 2, reads 400k at 0.4, 5m writes 200k at 3, 1h writes 100k at 6, output 100k at 10
    assert price.split_cost(t) == pytest.approx(0.6 + 0.16 + 0.6 + 0.6 + 1.0)
    half = Tokens(prompt=500_000, completion=50_000)
    assert price.run_cost(t, batched=half) == pytest.approx(price.split_cost(t - half) + 0.4 * price.split_cost(half))
    u = JudgeUsage(items=10, calls=10, unparsed=0, prompt_tokens=t.prompt, completion_tokens=t.completion, seconds=1.0,
                   price=price, cache_read_tokens=t.cache_read, cache_write_tokens=t.cache_write,
                   cache_write_1h_tokens=t.cache_write_1h)
    d = u.as_dict()
    assert d["cost"] == pytest.approx(2.96) and d["cost_detail"]["run"]["cost"] == pytest.approx(2.96)
    assert d["cost_detail"]["list"] == {"cost": pytest.approx(3.0), "cost_per_1000_items": pytest.approx(300.0)}
    assert d["cache_read_tokens"] == 400_000 and d["cache_write_tokens"] == 300_000
    assert d["batched_tokens"] is None
    assert JudgeUsage(1, 1, 0, 10, 1, 0.1).as_dict()["cost_detail"] is None


def test_price_file_multipliers(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text('"claude-*": {input: 3, output: 15, cache_write_1h: 2.5, batch: 0.5}\ngpt-4o: 2.5/10\n')
    book = read_prices(path)
    assert book.for_model("claude-sonnet-4-5") == Price(3, 15, cache_write_1h=2.5)
    assert book.for_model("gpt-4o") == Price(2.5, 10)
    for text in ('m: {input: 1, output: 2, cache_reads: 0.1}\n', 'm: {input: 1, output: 2, batch: -1}\n',
                 'm: {input: 1, output: 2, batch: yes}\n'):
        path.write_text(text)
        with pytest.raises(InputError) as e:
            read_prices(path)
        assert str(e.value).startswith(f"{path}, field 'm': ")


def test_batched_and_flex_calls_are_priced_as_batch() -> None:
    flex = CallUsage.of({"usage": {"prompt_tokens": 100, "completion_tokens": 10},
                         "raw": {"service_tier": "flex", "usage": {}}})
    batched = CallUsage.of({"usage": {"prompt_tokens": 100, "completion_tokens": 10}, "batched": True})
    plain = CallUsage.of({"usage": {"prompt_tokens": 100, "completion_tokens": 10, "cache_read_tokens": 60,
                                    "cache_write_tokens": 30},
                          "raw": {"usage": {"cache_creation": {"ephemeral_1h_input_tokens": 30}}}})
    assert flex.batched and batched.batched and not plain.batched
    assert plain.tokens == Tokens(100, 10, 60, 30, 30)


def test_cache_minimums_by_model_family() -> None:
    assert cache_minimum("anthropic", "claude-sonnet-4-5-20250929") == 1024
    assert cache_minimum("anthropic", "claude-haiku-4-5") == 4096
    assert cache_minimum("anthropic", "claude-3-5-haiku-latest") == 2048
    assert cache_minimum("openai", "gpt-4o-mini") == 1024
    assert cache_minimum("gemini", "models/gemini-2.5-flash") == 1024
    assert cache_minimum("gemini", "gemini-2.5-pro") == 4096
    assert cache_minimum("gemini", "gemma-3") is None
    rubric = [{"role": "system", "content": "r" * 8000}]
    chats = [[*rubric, {"role": "user", "content": f"item {i}"}] for i in range(3)]
    assert shared_prefix_chars(chats) == shared_prefix_chars([chats[0], chats[1]]) > 8000
    assert shared_prefix_chars([]) == 0
    report = prefix_report(chats, kind="anthropic", model="claude-sonnet-4-5")
    assert report["reaches_minimum"] is True and report["note"] is None and report["shared_prefix_tokens"] >= 2000
    unknown = prefix_report(chats, kind="gemini", model="gemma-3")
    assert unknown["minimum"] is None and "no known cache minimum" in unknown["note"]
    off = prefix_report(chats, kind="openai", model="gpt-4o", prompt_cache="off")
    assert "off" in off["note"]


def test_report_shows_the_runs_cost_beside_the_list_price() -> None:
    import numpy as np
    import pandas as pd

    from evalign.evaluate import EvalSpec, evaluate
    from evalign.evaluate.spec import Column, Human
    from evalign.judges import read_pairs
    from evalign.judges.usage import price_book
    from evalign.meta.resampling import Resampling
    from evalign.report.assemble import from_results
    from evalign.report.build import build_report

    n = 30
    rng = np.random.default_rng(0)
    gold = rng.choice(["A", "B"], n)
    table = pd.DataFrame({
        "id": [f"p{i}" for i in range(n)], "instruction": "q", "response_a": "a", "response_b": "bb",
        "system_a": "x", "system_b": "y", "pref_1": [1.0 if g == "A" else -1.0 for g in gold],
        "J": list(gold), "J.status": "scored", "J.calls": 2, "J.unparsed": 0, "J.prompt_tokens": 1000,
        "J.completion_tokens": 100, "J.cache_read_tokens": 800, "J.cache_write_tokens": 0, "J.seconds": 1.0,
        "J.model": "claude-sonnet-4-5"})  # fmt: skip
    spec = EvalSpec(human=Human(pref_columns=("pref_1",)), columns=(Column("J", "judge", verdict=True),),
                    pairs=read_pairs(table, pref=["pref_1"]), resampling=Resampling(n_resamples=20, n_permutations=20),
                    prices=price_book(None, ["3/15"]))
    result = evaluate(spec)
    rows = result.trust[0].rows.set_index("metric")
    # per item: 200 uncached + 800 read at 0.1 input tokens, 100 output; the list price counts 1,000 input
    assert rows.loc["J", "cost_per_1000"] == pytest.approx(1000 * (280 * 3 + 100 * 15) / 1e6)
    assert rows.loc["J", "list_cost_per_1000"] == pytest.approx(1000 * (1000 * 3 + 100 * 15) / 1e6)
    section = next(s for s in build_report(from_results([result])).sections if s.key == "judge_cost")
    [shown] = section.tables.values()
    assert {"cost_per_1000", "list_cost_per_1000"} <= set(shown.columns)
