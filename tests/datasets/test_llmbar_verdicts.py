"""The shipped LLMBar judge verdicts: recounted against the raw upstream outputs in the data folder,
and aligned with the LLMBar adapter's pair table."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalign.datasets import llmbar_verdicts as lv
from evalign.datasets.base import load_dataset
from evalign.meta.order_diagnostics import order_diagnostics, table_order_diagnostics

Config = tuple[str, str, str]


@pytest.fixture(scope="module")
def raw(shared_data: Path) -> dict[Config, list[dict[str, object]]]:
    """The raw upstream rows per (set, evaluator, strategy), texts included."""
    out: dict[Config, list[dict[str, object]]] = defaultdict(list)
    files = sorted((shared_data / "llmbar" / "evaluators").glob("*.jsonl"))
    assert len(files) == 8
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                out[(r["set"], r["evaluator"], r["strategy"])].append(r)
    return dict(out)


@pytest.fixture(scope="module")
def pairs(shared_data: Path) -> tuple[pd.DataFrame, list[str]]:
    """The adapter's pair table (the verdict columns wired in) and its judge columns."""
    d = load_dataset("llmbar", processed=True, data_dir=shared_data)
    return d.pairs, d.judge_columns


def test_the_adapter_ships_the_verdict_columns(pairs: tuple[pd.DataFrame, list[str]]) -> None:
    table, names = pairs
    assert names == lv.judge_columns() and names[:2] == ["judge:gpt-4/vanilla", "judge:gpt-4/vanilla_norules"]
    base = table[[c for c in table.columns if not c.startswith("judge:")]]
    again, again_names = lv.with_verdicts(base)
    assert again_names == names
    pd.testing.assert_frame_equal(again, table)
    # a variant carries only the configurations that judged its sets (65 on Natural)
    nat = load_dataset("llmbar", subsets=["Natural"])
    assert len(nat.judge_columns) == 65 and len(nat.pairs) == 100
    assert nat.judge_columns == lv.judge_columns(["Natural"])
    assert "judge:gpt-4/vanilla.ab" in nat.pairs.columns and "judge:gpt-4/vanilla.ab" not in nat.judge_columns
    assert "MIT" in nat.licence and "princeton-nlp/LLMBar" in nat.citation


def _code(w: object) -> float:
    return {"1": 1.0, "2": -1.0}.get(str(w), np.nan) if w is not None else np.nan


def test_compact_file_is_small_and_complete() -> None:
    from evalign.datasets.base import bundled_path

    assert bundled_path(*lv.VERDICTS_FILE).stat().st_size < 300_000
    df = lv.load_verdicts()
    assert len(df) == 30_963
    assert df.groupby(["set", "evaluator", "strategy"]).ngroups == 349
    per_set = df.groupby("subset")["column"].nunique().to_dict()
    assert per_set == {"Natural": 65, "Adversarial/Neighbor": 65, "Adversarial/GPTInst": 65,
                       "Adversarial/GPTOut": 65, "Adversarial/Manual": 65, "Processed/FairEval": 8,
                       "Processed/LLMEval2": 8, "Processed/MT-Bench": 8}
    assert not any(c for c in df.columns if "completion" in c)


def test_compact_file_equals_the_raw_verdicts(raw: dict[Config, list[dict[str, object]]]) -> None:
    df = lv.load_verdicts()
    got = {(s, e, t, int(i)): (int(lab), w0, w1) for s, e, t, i, lab, w0, w1 in
           zip(df["set"], df["evaluator"], df["strategy"], df["index"], df["label"], df["winner_swap_false"],
               df["winner_swap_true"], strict=True)}
    want = {(*k, int(r["index"])): (int(r["label"]), r["winner_swap_false"], r["winner_swap_true"])  # type: ignore[call-overload]
            for k, rs in raw.items() for r in rs}
    assert got == want


def test_recount_reproduces_upstream_accuracy_for_every_configuration(
    raw: dict[Config, list[dict[str, object]]],
) -> None:
    """For all 349 configurations: accuracy in the original order from the shipped file equals
    upstream's count ``winner_swap_false == label`` on the raw rows (SOURCE.md: that count is
    upstream's reported accuracy); the other LLMBar figures are recounted the same way."""
    df = lv.load_verdicts()
    assert len(raw) == 349
    differ_if_nulls_disagree = 0
    for (s, e, t), g in df.groupby(["set", "evaluator", "strategy"]):
        rs = raw[(s, e, t)]
        n = len(rs)
        label = [str(r["label"]) for r in rs]
        w0 = [r["winner_swap_false"] for r in rs]
        w1 = [r["winner_swap_true"] for r in rs]
        diag = order_diagnostics(
            [_code(w) for w in g["winner_swap_false"]], [_code(w) for w in g["winner_swap_true"]],
            np.where(g["label"].to_numpy() == 1, 1.0, -1.0),
        )
        assert diag.n == n == len(g)
        assert diag.accuracy_original == sum(a == lab for a, lab in zip(w0, label, strict=True)) / n, (s, e, t)
        assert diag.accuracy_swapped == sum(b == lab for b, lab in zip(w1, label, strict=True)) / n
        assert diag.accuracy_both == sum(a == lab and b == lab for a, b, lab in zip(w0, w1, label, strict=True)) / n
        assert diag.position_agreement == sum(a == b for a, b in zip(w0, w1, strict=True)) / n
        strict = order_diagnostics(
            [_code(w) for w in g["winner_swap_false"]], [_code(w) for w in g["winner_swap_true"]],
            np.where(g["label"].to_numpy() == 1, 1.0, -1.0), nulls_agree=False,
        )
        differ_if_nulls_disagree += strict.position_agreement != diag.position_agreement
    assert differ_if_nulls_disagree == 39  # the count: upstream's "two nulls agree" matters


def test_judge_columns_named_in_the_papers_order() -> None:
    names = lv.judge_columns(["Natural"])
    assert len(names) == 65 and names[0] == "judge:gpt-4/vanilla"
    assert "judge:chatgpt-0301/metrics_reference" in names and "judge:gpt-4/rating_metrics_reference" in names
    assert all(n == n.lower() and n.startswith("judge:") for n in names)
    assert lv.judge_columns(["Processed/FairEval"]) == [
        f"judge:{e}/{s}" for e in ("gpt-4", "chatgpt", "llama2", "palm2") for s in ("vanilla_norules", "metrics_reference")
    ]


def test_columns_align_with_the_pair_table(pairs: tuple[pd.DataFrame, list[str]], raw) -> None:
    table, names = pairs
    assert len(names) == 65 and len(table) == 885
    assert table["id"].is_unique
    # every judged row carries upstream's label where the adapter has its gold: alignment by index
    df = lv.load_verdicts()
    pos = {pid: i for i, pid in enumerate(table["id"])}
    rows = [pos[f"{sub}/{k}"] for sub, k in zip(df["subset"], df["index"], strict=True)]
    gold = table["pref_1"].to_numpy()[rows]
    assert (gold == np.where(df["label"].to_numpy() == 1, 1.0, -1.0)).all()
    # and the texts of the raw rows' set are the pair table's: first row of each set, by hand
    natural0 = table.loc[table["id"] == "Natural/0"].iloc[0]
    r = next(r for r in raw[("LLMBar/Natural", "ChatGPT-0301", "CoT")] if r["index"] == 0)
    assert (r["winner_swap_false"], r["winner_swap_true"]) == ("2", "1")
    col = "judge:chatgpt-0301/cot"
    assert (natural0[f"{col}.ab"], natural0[f"{col}.ba"], natural0[col], natural0[f"{col}.status"]) == \
        ("B", "A", "tie", "scored")
    # each judge column's .ab/.ba equal the raw winners row by row
    for (s, e, t), rs in raw.items():
        col = lv.judge_name(e, t)
        sub = lv.SET_NAMES[s]
        idx = [pos[f"{sub}/{r['index']}"] for r in rs]
        want_ab = [{"1": "A", "2": "B"}.get(r["winner_swap_false"]) for r in rs]  # type: ignore[call-overload]
        want_ba = [{"1": "A", "2": "B"}.get(r["winner_swap_true"]) for r in rs]  # type: ignore[call-overload]
        assert table[f"{col}.ab"].to_numpy()[idx].tolist() == want_ab, col
        assert table[f"{col}.ba"].to_numpy()[idx].tolist() == want_ba, col


def test_resolved_verdicts_status_and_skipped_rows(pairs: tuple[pd.DataFrame, list[str]]) -> None:
    table, _ = pairs
    for col in ("judge:gpt-4/vanilla", "judge:llama2/cot", "judge:palm2/swap"):
        ab, ba, v = table[f"{col}.ab"], table[f"{col}.ba"], table[col]
        judged = table[f"{col}.status"] != "skipped"
        for a, b, got in zip(ab[judged], ba[judged], v[judged], strict=True):
            want = "unparseable" if a is None or b is None else (a if a == b else "tie")
            assert got == want
        assert ((table[f"{col}.status"] == "unscored") == (v == "unparseable")).all()
        assert (table.loc[v == "unparseable", f"{col}.reason"] == "no_score").all()
    # a configuration absent from the Processed sets: their rows are skipped, not wrong
    one_shot = table["judge:gpt-4/vanilla_1shot.status"]
    processed = table["task"].str.startswith("Processed/")
    assert (one_shot[processed] == "skipped").all() and (one_shot[~processed] != "skipped").all()
    assert table.loc[processed, "judge:gpt-4/vanilla_1shot"].isna().all()
    # upstream's nulls: LLaMA2 / PaLM2 leave some unparsed; they are unparseable, counted wrong
    assert (table["judge:llama2/vanilla"] == "unparseable").sum() + (table["judge:palm2/vanilla"] == "unparseable").sum() > 0


def test_rating_strategies(pairs: tuple[pd.DataFrame, list[str]]) -> None:
    table, _ = pairs
    col = "judge:gpt-4/rating"
    row = table.loc[table["id"] == "Adversarial/GPTInst/61"].iloc[0]  # score_1 "" upstream
    assert (row[f"{col}.ab"], row[f"{col}.ba"], row[col], row[f"{col}.status"]) == ("A", "B", "unparseable", "unscored")
    df = lv.load_verdicts()
    g = df[(df["column"] == col) & df["score_1"].notna() & df["score_2"].notna()]
    pos = {pid: i for i, pid in enumerate(table["id"])}
    got = table[col].to_numpy()[[pos[f"{s}/{k}"] for s, k in zip(g["subset"], g["index"], strict=True)]]
    want = np.where(g["score_1"] > g["score_2"], "A", np.where(g["score_1"] < g["score_2"], "B", "tie"))
    assert (got == want).all() and (want == "tie").sum() > 0


def test_meta_reads_the_columns_and_the_diagnostics_run_on_them(pairs: tuple[pd.DataFrame, list[str]]) -> None:
    from evalign.evaluate.columns import verdict_codes

    table, names = pairs
    natural = table[table["task"] == "Natural"].reset_index(drop=True)
    for name in names:
        codes, skipped = verdict_codes(natural, name)
        assert not skipped.any()
        correct = (codes == natural["pref_1"].to_numpy()).mean()
        d = table_order_diagnostics(natural, name, "pref_1")
        assert d.n == 100
        # the resolved verdict is right only when both orders are: a tie or unparseable is wrong
        assert correct == d.accuracy_both, name
    gpt4 = table_order_diagnostics(natural, "judge:gpt-4/vanilla", "pref_1")
    assert (gpt4.accuracy_original, gpt4.accuracy_swapped, gpt4.accuracy_mean) == (0.95, 0.96, 0.955)


def test_a_sample_of_rows_keeps_its_alignment(pairs: tuple[pd.DataFrame, list[str]], shared_data: Path) -> None:
    full, _ = pairs
    d = load_dataset("llmbar", subsets=["Natural", "Processed/FairEval"], data_dir=shared_data)
    sample = d.pairs.sample(frac=0.3, random_state=1)
    got, names = lv.with_verdicts(sample)
    assert len(names) == 65 and list(got.index) == list(sample.index)
    by_id = full.set_index("id")
    for name in ("judge:gpt-4/vanilla", "judge:llama2/metrics_reference", "judge:gpt-4/rating"):
        for suffix in lv.SUFFIXES:
            assert got[name + suffix].tolist() == by_id.loc[got["id"], name + suffix].tolist()


def test_bad_tables_are_refused() -> None:
    from evalign.errors import InputError

    d = load_dataset("llmbar", subsets=["Adversarial/GPTOut"])
    with pytest.raises(InputError, match="no 'task' column"):
        lv.verdict_columns(d.pairs.drop(columns=["task"]))
    bad = d.pairs.copy()
    bad.loc[bad.index[0], "id"] = "Natural/0"
    with pytest.raises(InputError, match="is not '<subset>/<row>'"):
        lv.verdict_columns(bad)
    assert lv.verdict_columns(d.pairs.iloc[:0]).empty
