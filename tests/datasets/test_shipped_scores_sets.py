"""HANNA, the UniEval sets (Topical-Chat, QAGS, SF data-to-text) and Auto-J on their real files:
counts, labels and shipped metric / judge columns hand-checked against the raw files, and the
bundled files byte-identical to upstream's."""

from __future__ import annotations

import ast
import csv
import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalign.datasets import autoj, hanna, qags, sf_data2text, topical_chat
from evalign.datasets.base import bundled_path

HANNA_SHA256 = "d0ce43f9b5cc12894f8b7bf3f7b4da06d19cdbea2c989dd3f173f2240dfee26d"


@pytest.fixture(scope="module")
def hanna_ds() -> Any:
    return hanna.load_hanna()


@pytest.fixture(scope="module")
def hanna_raw() -> list[dict[str, str]]:
    with gzip.open(bundled_path(*hanna.FILE), "rt", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_hanna_bundled_file_is_upstreams(shared_data: Path) -> None:
    with gzip.open(bundled_path(*hanna.FILE), "rb") as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == HANNA_SHA256
    assert hashlib.sha256((shared_data / "hanna" / "hanna_metric_scores_llm.csv").read_bytes()).hexdigest() == \
        HANNA_SHA256


def test_hanna_table(hanna_ds: Any, hanna_raw: list[dict[str, str]]) -> None:
    items = hanna_ds.items
    assert len(items) == 1056 and items["system"].nunique() == 11 and items["id"].nunique() == 96
    assert items.groupby("system").size().eq(96).all() and items["story_id"].tolist() == list(range(1056))
    metrics = [c for c in hanna_ds.judge_columns if not c.startswith("judge:")]
    judges = [c for c in hanna_ds.judge_columns if c.startswith("judge:")]
    assert len(metrics) == 72 and len(judges) == 5 * 4 * 6
    # story 2 of CTRL (row 3 of the file, story id 194): labels, raters, a metric and an LLM grade
    raw = hanna_raw[2]
    row = items.set_index("story_id").loc[194]
    assert (row["system"], row["id"]) == (raw["Model"], "2")
    assert row["coherence"] == pytest.approx(ast.literal_eval(raw["Coherence"])[2])
    assert [row[f"complexity_{k}"] for k in (1, 2, 3)] == [ast.literal_eval(raw[f"Human {k} CX"])[2] for k in (1, 2, 3)]
    assert row["BERTScore F1"] == pytest.approx(ast.literal_eval(raw["BERTScore F1 Ξε"])[2])
    assert row["judge:chatgpt/surprise-p3"] == pytest.approx(ast.literal_eval(raw["ChatGPT SU 3"])[2])
    for c in hanna.CRITERIA:  # the label is the mean of its three raters, every story rated by 3
        assert np.allclose(items[c], items[hanna_ds.annotators_of(c)].mean(axis=1))
        cols = hanna_ds.columns_for(c)
        assert len(cols) == 72 + 20 and cols[:72] == metrics and all(f"/{c}-p" in j for j in cols[72:])
    assert set(hanna_ds.lower_is_better) == {"DepthScore", "InfoLM-FisherRao", "InfoLM-R-FisherRao",
                                             "InfoLM-Sim-FisherRao", "Repetition-1", "Repetition-2", "Repetition-3",
                                             *(m for m in metrics if m.startswith("BaryScore"))}


def test_hanna_left_out_columns_are_derived(hanna_raw: list[dict[str, str]]) -> None:
    """Upstream's LLM ``AVG k`` is the mean of its six criteria and ``Human Avg k`` the mean of the
    other two raters: both are left out as derived."""
    for raw in hanna_raw[:3]:
        grades = np.array([ast.literal_eval(raw[f"Mistral-7B {c} 2"]) for c in ("RE", "CH", "EM", "SU", "EG", "CX")])
        assert np.allclose(grades.mean(axis=0), ast.literal_eval(raw["Mistral-7B AVG 2"]))
        others = np.array([ast.literal_eval(raw[f"Human {k} EG"]) for k in (1, 3)])
        assert np.allclose(others.mean(axis=0), ast.literal_eval(raw["Human Avg 2 EG"]))


UNIEVAL = [("dialogue", "topical_chat"), ("fact", "qags_cnndm"), ("fact", "qags_xsum"), ("data2text", "sfhot"),
           ("data2text", "sfres")]


@pytest.mark.parametrize(("task", "name"), UNIEVAL)
def test_unieval_bundled_files_are_upstreams(task: str, name: str, shared_data: Path) -> None:
    with gzip.open(bundled_path("unieval", task, f"{name}_result.json.gz"), "rb") as fh:
        mine = fh.read()
    assert mine == (shared_data / "unieval" / "unieval_predict" / task / f"{name}_result.json").read_bytes()


def _raw(task: str, name: str) -> list[dict[str, Any]]:
    with gzip.open(bundled_path("unieval", task, f"{name}_result.json.gz"), "rt", encoding="utf-8") as fh:
        return json.load(fh)


def test_topical_chat() -> None:
    ds = topical_chat.load_topical_chat()
    items = ds.items
    raw = _raw("dialogue", "topical_chat")
    assert len(items) == 360 and items["id"].nunique() == 60 and items["system"].nunique() == 6
    assert items.groupby("id").size().eq(6).all()
    row, r = items.iloc[7], raw[7]
    assert row["response"] == r["system_output"].strip() and row["knowledge"] == r["context"].strip()
    assert row["messages"][-1] == {"role": "assistant", "content": row["response"]}
    assert row["messages"][-2] == {"role": "user", "content": row["instruction"]}
    turns = [t.strip() for t in r["source"].split("\n") if t.strip()]
    system = row["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(f"Knowledge fact for this conversation: "
                                                                         f"{r['context'].strip()}")
    if len(turns) % 2:  # odd history: every turn as a message, the first the user's
        assert [m["content"] for m in row["messages"][1:-1]] == turns and row["messages"][1]["role"] == "user"
    else:  # even: the assistant's opening turn is quoted in the system message
        assert system["content"].endswith(f"The assistant opened the conversation with: {turns[0]}")
        assert [m["content"] for m in row["messages"][1:-1]] == turns[1:]
    # every conversation is one the item validation accepts
    from evalign.io.conversations import parse_messages

    for msgs in items["messages"]:
        assert parse_messages(msgs, file=None, line=None) == msgs
    for a in topical_chat.ASPECTS:
        assert row[a] == pytest.approx(r["scores"][a]) and row[f"unieval:{a}"] == pytest.approx(r["predict_scores"][a])
        assert ds.columns_for(a) == [f"unieval:{a}"]
    assert ds.human_columns[0] == "overall"


def test_qags_and_sf() -> None:
    q = qags.load_qags()
    assert len(q.items) == 474 and q.items["task"].value_counts().to_dict() == {"xsum": 239, "cnndm": 235}
    raw = _raw("fact", "qags_xsum")[5]
    row = q.items.set_index("id").loc[f"xsum/{raw['doc_id']}"]
    assert (row["input"], row["response"]) == (raw["source"], raw["system_output"])
    assert row["consistency"] == pytest.approx(raw["scores"]["consistency"])
    assert row["unieval:consistency"] == pytest.approx(raw["predict_scores"]["consistency"])
    assert (q.grouping, q.statistic) == ("none", "kendall")
    sf = sf_data2text.load_sf_data2text()
    assert len(sf.items) == 2056 and sf.items["task"].value_counts().to_dict() == {"restaurant": 1181, "hotel": 875}
    raw = _raw("data2text", "sfhot")[0]
    row = sf.items.set_index("id").loc["hotel/0"]
    assert (row["input"], row["reference"], row["response"]) == (raw["source"], raw["reference"], raw["system_output"])
    assert [row[a] for a in sf_data2text.ASPECTS] == [raw["scores"][a] for a in sf_data2text.ASPECTS]
    assert sf.judge_columns == [f"unieval:{a}" for a in sf_data2text.ASPECTS]


def test_autoj(shared_data: Path) -> None:
    ds = autoj.load_autoj(data_dir=shared_data)
    pairs = ds.pairs
    assert len(pairs) == 1392 and pairs["id"].is_unique
    assert Counter(pairs["pref_1"]) == {1.0: 520, -1.0: 499, 0.0: 373}
    assert pairs["task"].value_counts().eq(24).all() and pairs["task"].nunique() == 58
    lines = (shared_data / "autoj_pairwise" / "autoj_pairwise.jsonl").read_text(encoding="utf-8").splitlines()
    for k in (0, 700, 1391):
        r = json.loads(lines[k])
        row = pairs.iloc[k]
        assert (row["instruction"], row["response_a"], row["response_b"], row["task"]) == (
            r["prompt"], r["response 1"], r["response 2"], r["scenario"])
        assert row["pref_1"] == {0: 1.0, 1: -1.0, 2: 0.0}[r["label"]]
    assert ds.judge_columns == []
