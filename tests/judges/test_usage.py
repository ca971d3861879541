"""Cost, time and drift of a judge: prices, the per-row usage columns, the run summary (cached and new
calls), the model versions behind the answers, and the cost column group of ``evalign meta`` /
``evaluate`` and the report (with an in-process backend; the real server's token counts are checked in
``test_conversation_smollm2.py`` and ``test_drift.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.backends import Backend, Choice, Generation, Usage
from evalign.cache import Cache
from evalign.cli import app
from evalign.errors import InputError, UsageError
from evalign.evaluate import EvalSpec, evaluate
from evalign.evaluate.spec import Column, Human
from evalign.judges import get_judge, read_pairs, run_judge
from evalign.judges.usage import (
    JudgeUsage,
    Price,
    PriceBook,
    drift_message,
    model_versions,
    parse_price,
    price_book,
    read_prices,
    table_usage,
)
from evalign.meta.resampling import Resampling
from evalign.report.assemble import from_results
from evalign.report.build import build_report


class Scripted(Backend):
    """Answers ``answer(n, req)`` (n = 1, 2, ...) with fixed token counts and the model version of
    ``version(n)``."""

    kind = "scripted"

    def __init__(self, answer: Any, version: Any = lambda n: ("judge-2024", "fp_1"), usage: Usage = Usage(100, 20)):
        super().__init__()
        self.answer, self.version, self.tokens, self.n = answer, version, usage, 0
        self.concurrency = 1

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": "judge"}

    async def generate(self, req: Any) -> Generation:
        self.n += 1
        model, fp = self.version(self.n)
        return Generation.from_choices([Choice(self.answer(self.n, req), "stop")], self.tokens, model=model,
                                       system_fingerprint=fp, seconds=0.5)


def pairs(n: int) -> pd.DataFrame:
    return read_pairs(pd.DataFrame({"id": [f"p{i}" for i in range(n)], "instruction": [f"Q{i}?" for i in range(n)],
                                    "response_a": ["good"] * n, "response_b": ["bad"] * n}))


def test_prices() -> None:
    assert parse_price("2.5/10") == Price(2.5, 10.0) and parse_price(" 0.15 / 0.6 ") == Price(0.15, 0.6)
    for bad in ("2.5", "a/b", "-1/2", "1/2/3"):
        with pytest.raises(UsageError, match="--price must be IN/OUT"):
            parse_price(bad)
    assert Price(2.5, 10).cost(4000, 800) == pytest.approx(0.018)
    book = PriceBook(models=(("gpt-4o-2024-08-06", Price(2.5, 10)), ("gpt-4o*", Price(5, 15))),
                     columns={"J": Price(1, 1)})
    assert book.for_model("gpt-4o-2024-08-06") == Price(2.5, 10)  # exact key before a glob
    assert book.for_model("gpt-4o-mini", "x") == Price(5, 15) and book.for_model("llama") is None
    assert book.price("J", ["gpt-4o"]) == Price(1, 1)  # the column's price first
    assert book.price("K", ["gpt-4o-2024-08-06"]) == Price(2.5, 10)
    assert book.price("K", ["gpt-4o-2024-08-06", "gpt-4o-mini"]) is None  # several priced models: no one price
    assert PriceBook(default=Price(1, 2)).price("K", ["unknown"]) == Price(1, 2)


def test_price_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text('gpt-4o-2024-08-06: {input: 2.5, output: 10}\n"llama*": 0.2/0.2\n')
    book = read_prices(path)
    assert book.for_model("llama-3.1-8b") == Price(0.2, 0.2)
    monkeypatch.setenv("EVALIGN_PRICES", str(path))
    assert price_book(None, ["J=1/2"]).price("J") == Price(1, 2)
    assert price_book(None, ["3/4"]).price("K", ["gpt-4o-2024-08-06"]) == Price(2.5, 10)
    for text, field in (("m: {input: 1}\n", "m"), ("m: {input: -1, output: 2}\n", "m"), ("m: cheap\n", "m")):
        path.write_text(text)
        with pytest.raises(InputError) as e:
            read_prices(path)
        assert e.value.file == str(path) and e.value.field == field
    with pytest.raises(InputError, match="no such price file"):
        read_prices(tmp_path / "missing.yaml")


def test_judge_usage_arithmetic() -> None:
    u = JudgeUsage(items=4, calls=8, unparsed=2, prompt_tokens=4000, completion_tokens=800, seconds=16.0,
                   price=Price(2.5, 10))
    assert (u.parse_rate, u.seconds_per_call, u.seconds_per_1000) == (0.75, 2.0, 4000.0)
    assert u.cost == pytest.approx(0.018) and u.cost_per_1000 == pytest.approx(4.5)
    assert np.isnan(u.with_price(None).cost_per_1000) and u.as_dict()["cost"] == pytest.approx(0.018)
    assert u.with_price(None).as_dict()["cost"] is None


def test_run_records_usage_per_row_and_in_the_summary(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    # the first answer of each row is unreadable; a re-ask reads it (2 calls per order)
    judge = get_judge("mtbench_pair", reask=1)
    be = Scripted(lambda n, req: "[[A]]" if req.messages[-1]["content"].startswith("Your answer") else "hmm")
    run = run_judge(pairs(3), judge, be, cache=cache, price=Price(2.5, 10))
    t = run.table
    assert t["mtbench_pair"].tolist() == ["tie"] * 3  # A in both orders = a tie once swapped back
    assert t["mtbench_pair.calls"].tolist() == [4] * 3 and t["mtbench_pair.unparsed"].tolist() == [2] * 3
    assert t["mtbench_pair.prompt_tokens"].tolist() == [400] * 3 and t["mtbench_pair.completion_tokens"].tolist() == [80] * 3
    assert t["mtbench_pair.seconds"].tolist() == [2.0] * 3 and t["mtbench_pair.model"].tolist() == ["judge-2024"] * 3
    assert t["mtbench_pair.fingerprint"].tolist() == ["fp_1"] * 3
    u = run.summary.usage
    assert (u["items"], u["calls"], u["unparsed"], u["prompt_tokens"], u["completion_tokens"]) == (3, 12, 6, 1200, 240)
    assert u["parse_rate"] == 0.5 and u["seconds_per_call"] == 0.5 and u["seconds_per_1000_items"] == 2000.0
    assert u["cost"] == pytest.approx((1200 * 2.5 + 240 * 10) / 1e6)
    assert u["cost_per_1000_items"] == pytest.approx(1000 * u["cost"] / 3)
    assert (u["new_calls"], u["new_prompt_tokens"]) == (12, 1200)
    assert run.summary.models == [{"model": "judge-2024", "system_fingerprint": "fp_1", "calls": 12}]
    assert run.summary.drift is None and be.n == 12
    # resumed: every answer from the cache, the same usage (what the items cost), none of it new
    again = run_judge(pairs(3), judge, Scripted(lambda n, req: "never called"), cache=cache)
    assert again.summary.usage["calls"] == 12 and again.summary.usage["new_calls"] == 0
    assert again.table["mtbench_pair.prompt_tokens"].tolist() == [400] * 3
    assert table_usage(again.table, "mtbench_pair") == JudgeUsage(3, 12, 6, 1200, 240, 6.0)


def test_a_model_version_change_is_reported(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    be = Scripted(lambda n, req: "Rating: [[7]]", version=lambda n: ("judge-2024", "fp_1" if n <= 2 else "fp_2"))
    run = run_judge(pd.DataFrame({"id": ["a", "b", "c"], "system": "s", "instruction": "q", "response": ["x", "y", "z"]}),
                    get_judge("mtbench_single"), be, cache=cache)
    assert run.summary.models == [{"model": "judge-2024", "system_fingerprint": "fp_1", "calls": 2},
                                  {"model": "judge-2024", "system_fingerprint": "fp_2", "calls": 1}]
    assert run.summary.drift is not None and "2 model versions" in run.summary.drift
    assert run.table["mtbench_single.fingerprint"].tolist() == ["fp_1", "fp_1", "fp_2"]
    assert drift_message(model_versions([("m", None), ("m", None)])) is None


def judged_pairs(n: int = 40, seed: int = 0) -> pd.DataFrame:
    """A judged pair table: 3 annotators, judge J (right on 80%) with usage columns, judge K without."""
    rng = np.random.default_rng(seed)
    gold = rng.choice(["A", "B"], n)
    flip = {"A": "B", "B": "A"}
    j = [g if rng.random() < 0.8 else flip[g] for g in gold]
    return pd.DataFrame({
        "id": [f"p{i}" for i in range(n)], "instruction": "q", "response_a": "a", "response_b": "bb",
        "system_a": "x", "system_b": "y", **{f"pref_{k}": [1.0 if g == "A" else -1.0 for g in gold] for k in (1, 2, 3)},
        "J": j, "J.status": "scored", "J.calls": 2, "J.unparsed": [1] + [0] * (n - 1), "J.prompt_tokens": 900,
        "J.completion_tokens": 100, "J.seconds": 4.0, "J.model": "judge-2024",
        "K": [g if rng.random() < 0.6 else flip[g] for g in gold], "K.status": "scored",
    })  # fmt: skip


def test_trust_table_cost_columns(tmp_path: Path) -> None:
    table = judged_pairs()
    path = tmp_path / "judged.jsonl"
    table.to_json(path, orient="records", lines=True)
    p = read_pairs(path, pref=["pref_1", "pref_2", "pref_3"])
    spec = EvalSpec(human=Human(pref_columns=("pref_1", "pref_2", "pref_3")),
                    columns=(Column("J", "judge", verdict=True), Column("K", "judge", verdict=True)), pairs=p,
                    resampling=Resampling(n_resamples=50, n_permutations=50), prices=price_book(None, ["J=2.5/10"]))
    rows = evaluate(spec).trust[0].rows.set_index("metric")
    assert rows.loc["J", "calls"] == 80 and rows.loc["J", "prompt_tokens"] == 36000
    assert rows.loc["J", "completion_tokens"] == 4000 and rows.loc["J", "s_per_call"] == 2.0
    assert rows.loc["J", "parse_rate"] == pytest.approx(79 / 80)
    assert rows.loc["J", "s_per_1000"] == pytest.approx(4000.0)
    assert rows.loc["J", "cost_per_1000"] == pytest.approx(1000 * (36000 * 2.5 + 4000 * 10) / 1e6 / 40)
    assert np.isnan(rows.loc["K", "calls"]) and np.isnan(rows.loc["K", "s_per_1000"])  # no usage columns
    # no judge with usage: the table keeps its columns as before
    plain = evaluate(EvalSpec(human=spec.human, columns=(Column("K", "judge", verdict=True),), pairs=p,
                              resampling=spec.resampling)).trust[0].rows
    assert "calls" not in plain.columns and "cost_per_1000" not in plain.columns


def test_report_plots_agreement_against_cost(tmp_path: Path) -> None:
    p = read_pairs(judged_pairs(), pref=["pref_1", "pref_2", "pref_3"])
    spec = EvalSpec(human=Human(pref_columns=("pref_1", "pref_2", "pref_3")),
                    columns=(Column("J", "judge", verdict=True), Column("K", "judge", verdict=True)), pairs=p,
                    resampling=Resampling(n_resamples=50, n_permutations=50), prices=price_book(None, ["2.5/10"]))
    report = build_report(from_results([evaluate(spec)]))
    section = next(s for s in report.sections if s.key == "judge_cost")
    assert section.figures[0].name == "agreement_vs_cost" and section.figures[0].png.startswith(b"\x89PNG")
    [(title, shown)] = section.tables.items()
    assert title.startswith("Cost and time of the judges")
    assert list(shown["metric"]) == ["J"] and "cost_per_1000" in shown.columns
    acc = next(s for s in report.sections if s.key == "pair_accuracy")
    assert all("calls" not in df.columns for df in acc.tables.values())  # the cost group has its own section


def test_cli_meta_shows_the_cost_table(tmp_path: Path) -> None:
    path = tmp_path / "judged.jsonl"
    judged_pairs().to_json(path, orient="records", lines=True)
    args = ["meta", str(path), "--pref", "pref_1,pref_2,pref_3", "-m", "J", "-m", "K", "--bootstrap", "50",
            "--permutations", "50"]
    res = CliRunner().invoke(app, [*args, "--price", "J=2.5/10"])
    assert res.exit_code == 0, res.output
    assert "Judges: cost and time" in res.output and "36,000" in res.output and "3.25" in res.output
    res = CliRunner().invoke(app, [*args, "--json"])
    rows = {r["metric"]: r for r in json.loads(res.output)["trust"][0]["rows"]}
    assert rows["J"]["calls"] == 80 and rows["J"]["cost_per_1000"] is None  # no price: no cost
    res = CliRunner().invoke(app, [*args, "--price", "cheap"])
    assert res.exit_code == 2 and "--price must be IN/OUT" in res.output


def test_each_turn_is_graded_with_its_own_prompt(tmp_path: Path) -> None:
    """``turns="each"``: the two-turn pair becomes two rows, turn 1 judged with FastChat's pair-v2 prompt
    and turn 2 with pair-v2-multi-turn."""
    seen: list[str] = []

    def answer(n: int, req: Any) -> str:
        seen.append(req.messages[-1]["content"])
        return "[[A]]"

    table = read_pairs(Path(__file__).resolve().parent / "data" / "mtbench_pairs.jsonl").head(1)
    run = run_judge(table, get_judge("mtbench_pair", both_orders=False), Scripted(answer),
                    cache=Cache(tmp_path / "c.sqlite"), turns="each")
    assert run.table["turn"].tolist() == [1, 2] and run.table["id"].tolist() == ["bottle", "bottle"]
    assert run.table["mtbench_pair"].tolist() == ["A", "A"]
    assert seen[0].startswith("[User Question]\nWrite a two-sentence product description")
    assert seen[1].startswith("<|The Start of Assistant A's Conversation with User|>")
    assert len(run.table["messages_a"].iloc[0]) == 2 and len(run.table["messages_a"].iloc[1]) == 4
