"""Conversations in item and pair tables (``messages``, ``messages_a`` / ``messages_b``): read from
JSONL, CSV and Parquet, the derived fields, per-turn keys, one-line errors naming file, line and
field, and the per-turn expansion."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evalign.errors import InputError
from evalign.io import read_items, read_pairs, write_table
from evalign.io.conversations import expand_turns, parse_messages, truncate_to_turn

Q1, A1, Q2, A2 = "What is 2 + 2?", "4.", "And times 3?", "12."
CONV = [{"role": "user", "content": Q1}, {"role": "assistant", "content": A1},
        {"role": "user", "content": Q2}, {"role": "assistant", "content": A2}]
OTHER = [*CONV[:3], {"role": "assistant", "content": "13."}]


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_items_with_messages_get_instruction_response_and_turn(tmp_path: Path) -> None:
    rows = [{"id": "q", "system": "m", "messages": CONV, "rating": 4},
            {"id": "q", "system": "m", "messages": CONV[:2], "rating": 5},
            {"id": "r", "system": "m", "messages": [{"role": "system", "content": "Be brief."}, *CONV[:2]],
             "response": A1, "turn": 1, "rating": None}]
    df = read_items(_jsonl(tmp_path / "c.jsonl", rows), human=["rating"])
    assert df["instruction"].tolist() == [Q2, Q1, Q1]
    assert df["response"].tolist() == [A2, A1, A1]
    assert df["turn"].tolist() == [2, 1, 1]
    assert df.loc[0, "messages"] == CONV and df.loc[2, "messages"][0]["role"] == "system"
    # the same conversations from CSV (JSON text cells) and Parquet read the same
    for suffix in ("csv", "parquet"):
        path = tmp_path / f"c.{suffix}"
        write_table(df, path)
        back = read_items(path, human=["rating"])
        assert back["messages"].tolist() == df["messages"].tolist(), suffix
        assert back[["instruction", "response"]].equals(df[["instruction", "response"]]), suffix
        assert [int(t) for t in back["turn"]] == [2, 1, 1], suffix


def test_pairs_with_messages(tmp_path: Path) -> None:
    rows = [{"id": "p", "messages_a": CONV, "messages_b": OTHER, "pref_1": "A"},
            {"id": "p", "messages_a": CONV[:2], "messages_b": OTHER[:2], "pref_1": "tie"}]
    df = read_pairs(_jsonl(tmp_path / "p.jsonl", rows), pref=["pref_1"])
    assert df["instruction"].tolist() == [Q2, Q1]
    assert df["response_a"].tolist() == [A2, A1] and df["response_b"].tolist() == ["13.", A1]
    assert df["turn"].tolist() == [2, 1] and df["pref_1"].tolist() == [1.0, 0.0]
    write_table(df, tmp_path / "p.csv")
    assert read_pairs(tmp_path / "p.csv")["messages_b"].tolist() == df["messages_b"].tolist()


BAD_ITEMS = [
    ({"messages": CONV[:3]}, "messages", "must end with an assistant turn"),
    ({"messages": []}, "messages", "empty conversation"),
    ({"messages": "[{"}, "messages", "not a JSON array of messages"),
    ({"messages": {"role": "user"}}, "messages", "must be a list of {role, content} messages"),
    ({"messages": [CONV[0], "hi"]}, "messages[1]", "must be a {role, content} object"),
    ({"messages": [{"role": "usr", "content": Q1}, CONV[1]]}, "messages[0].role", "did you mean 'user'"),
    ({"messages": [{"role": "user"}, CONV[1]]}, "messages[0].content", "missing"),
    ({"messages": [{"role": "user", "content": 3}, CONV[1]]}, "messages[0].content", "must be a string"),
    ({"messages": [{"role": "user", "content": Q1, "name": "x"}, CONV[1]]}, "messages[0]", "unexpected key 'name'"),
    ({"messages": [CONV[1], CONV[0], CONV[1]]}, "messages[0].role", "must be 'user', got 'assistant'"),
    ({"messages": [CONV[0], CONV[0], CONV[1]]}, "messages[1].role", "must be 'assistant', got 'user'"),
    ({"messages": [CONV[0], {"role": "system", "content": "x"}, CONV[1]]}, "messages[1].role",
     "a system message may only come first"),
    ({"messages": [{"role": "system", "content": "x"}]}, "messages", "only a system message"),
    ({"messages": CONV, "response": "13."}, "response", "differs from the last assistant turn"),
    ({"messages": CONV, "instruction": "Other?"}, "instruction", "differs from the last user turn"),
    ({"messages": CONV, "turn": 1}, "turn", "differs from the number of assistant turns"),
    ({"messages": CONV, "input": "extra"}, "input", "leave 'input' empty"),
]


@pytest.mark.parametrize(("extra", "field", "words"), BAD_ITEMS)
def test_malformed_conversations_name_file_line_and_field(tmp_path: Path, extra: dict[str, object], field: str,
                                                          words: str) -> None:
    path = _jsonl(tmp_path / "bad.jsonl", [{"id": "ok", "system": "m", "messages": CONV},
                                           {"id": "x", "system": "m", **extra}])
    with pytest.raises(InputError) as e:
        read_items(path)
    assert (e.value.file, e.value.line, e.value.field) == (str(path), 2, field)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_malformed_conversation_in_csv_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    pd.DataFrame({"id": ["a", "b"], "system": ["m", "m"],
                  "messages": [json.dumps(CONV), json.dumps(CONV[:1])]}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"bad\.csv, line 3, field 'messages': must end with an assistant turn"):
        read_items(path)


@pytest.mark.parametrize(("rec", "field", "words"), [
    ({"messages_a": CONV}, "messages_b", "needs both conversations"),
    ({"messages_a": CONV, "messages_b": OTHER[:2]}, "messages_b", "has 1 user turn(s), messages_a has 2"),
    ({"messages_a": CONV, "messages_b": [*OTHER[:2], {"role": "user", "content": "Other?"}, OTHER[3]]},
     "messages_b[2].content", "user turn 2 differs from messages_a's"),
    ({"messages_a": CONV, "messages_b": OTHER, "response_a": "nope"}, "response_a", "differs from the last"),
    ({"messages_a": CONV, "messages_b": [OTHER[0], {"role": "assistant", "content": 1}]},
     "messages_b[1].content", "must be a string"),
])
def test_malformed_pair_conversations(tmp_path: Path, rec: dict[str, object], field: str, words: str) -> None:
    path = _jsonl(tmp_path / "bad.jsonl", [{"id": "p", **rec}])
    with pytest.raises(InputError) as e:
        read_pairs(path)
    assert (e.value.line, e.value.field) == (1, field) and words in str(e.value)


def test_per_turn_items_share_an_id_but_not_a_turn(tmp_path: Path) -> None:
    rows = [{"id": "q", "system": "m", "messages": CONV}, {"id": "q", "system": "m", "messages": CONV}]
    with pytest.raises(InputError, match=r"line 2, field 'id': duplicate \(id, system, turn\) = \('q', 'm', '2'\)"):
        read_items(_jsonl(tmp_path / "d.jsonl", rows))
    pairs = [{"id": "p", "messages_a": CONV, "messages_b": OTHER}] * 2
    with pytest.raises(InputError, match=r"duplicate \(id, turn\) = \('p', '2'\)"):
        read_pairs(_jsonl(tmp_path / "dp.jsonl", pairs))
    plain = [{"id": "p", "instruction": "x", "response_a": "a", "response_b": "b"}] * 2
    with pytest.raises(InputError, match=r"duplicate id 'p'; first seen on line 1"):  # unchanged without turns
        read_pairs(_jsonl(tmp_path / "pp.jsonl", plain))


def test_expand_turns_cuts_each_conversation_after_each_turn(tmp_path: Path) -> None:
    items = read_items(_jsonl(tmp_path / "c.jsonl", [{"id": "q", "system": "m", "messages": CONV, "h": 3},
                                                     {"id": "s", "system": "m", "response": "plain"}]))
    out = expand_turns(items, pairwise=False)
    assert out["id"].tolist() == ["q", "q", "s"]
    assert out["turn"].tolist()[:2] == [1, 2] and out["response"].tolist() == [A1, A2, "plain"]
    assert out["instruction"].tolist()[:2] == [Q1, Q2] and out["h"].tolist()[:2] == [3, 3]
    assert out.loc[0, "messages"] == CONV[:2] and out.loc[1, "messages"] == CONV
    pairs = read_pairs(_jsonl(tmp_path / "p.jsonl", [{"id": "p", "messages_a": CONV, "messages_b": OTHER}]))
    po = expand_turns(pairs, pairwise=True)
    assert po["response_a"].tolist() == [A1, A2] and po["response_b"].tolist() == [A1, "13."]
    assert po["turn"].tolist() == [1, 2]


def test_parse_messages_and_truncate() -> None:
    assert parse_messages(json.dumps(CONV), file=None, line=None) == CONV
    assert truncate_to_turn(CONV, 1) == CONV[:2]
    with pytest.raises(ValueError, match="2 assistant turn"):
        truncate_to_turn(CONV, 3)
