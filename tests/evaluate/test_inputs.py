"""evalign.evaluate.inputs: one input path from a file or a dataset plus flags to the table and its labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalign.datasets import load_dataset, pairs_to_items
from evalign.evaluate import Human
from evalign.evaluate.inputs import InputsError, InputSettings, load_inputs
from evalign.evaluate.prepare import dataset_human
from evalign.io import write_table


@pytest.mark.parametrize("rule", ["flags", "tables", "labels"])
def test_a_dataset_gives_its_own_table_and_labels(rule: str) -> None:
    si = load_dataset("self_instruct")
    got = load_inputs(InputSettings(dataset="self_instruct", rule=rule))
    assert got.human == dataset_human(si) and got.human.kind == "system"
    assert got.items is not None and got.items.equals(si.items) and got.pairs is None
    assert got.source == "dataset self_instruct" and got.ds is not None and got.dataset

    pl = load_dataset("pandalm")
    got = load_inputs(InputSettings(dataset="pandalm", rule=rule))
    assert got.human == dataset_human(pl) and got.human.kind == "pairs"
    assert got.pairs is not None and got.pairs.equals(pl.pairs)
    assert got.items is not None and got.items.equals(pairs_to_items(pl.pairs))


def test_a_pair_file_finds_its_pref_columns(tmp_path: Path) -> None:
    pairs = load_dataset("pandalm").pairs
    assert pairs is not None
    path = tmp_path / "pairs.jsonl"
    write_table(pairs.head(20), path)
    for rule in ("flags", "tables", "labels"):
        got = load_inputs(InputSettings(file=path, rule=rule))
        assert got.human == Human(pref_columns=("pref_1", "pref_2", "pref_3")), rule
        assert got.pairs is not None and len(got.pairs) == 20 and got.source == str(path)
    got = load_inputs(InputSettings(file=path, pref=("pref_2",)))
    assert got.human.pref_columns == ("pref_2",)


def test_conditions_are_named(tmp_path: Path) -> None:
    items = load_dataset("self_instruct").items
    assert items is not None
    path = tmp_path / "items.jsonl"
    write_table(items.head(16), path)
    with pytest.raises(InputsError) as e:
        load_inputs(InputSettings(file=path))
    assert e.value.reason == "no_labels" and getattr(e.value, "input_stage", None) == "labels"
    with pytest.raises(InputsError) as e:
        load_inputs(InputSettings(file=path, pref=("pref_1",)))
    assert e.value.reason == "no_pair_table"
    with pytest.raises(InputsError) as e:
        load_inputs(InputSettings(file=path, dataset="pandalm"))
    assert e.value.reason == "not_sides"
    with pytest.raises(InputsError) as e:
        load_inputs(InputSettings(file=path, labels=Human(pref_columns=("pref_1",)), rule="labels"))
    assert e.value.reason == "file_not_pairs"
    with pytest.raises(InputsError) as e:
        load_inputs(InputSettings(dataset="hhh", system_human=None, human=None, rule="labels",
                                  labels=Human(column="x")))
    assert e.value.reason == "no_item_table" and e.value.dataset == "hhh"
    with pytest.raises(ValueError, match="rule"):
        load_inputs(InputSettings(dataset="hhh", rule="nope"))


def test_a_file_with_the_human_column_is_read_with_it(tmp_path: Path) -> None:
    items = load_dataset("self_instruct").items
    assert items is not None
    path = tmp_path / "items.jsonl"
    write_table(items.head(16).assign(rating=[float(i % 5) for i in range(16)]), path)
    got = load_inputs(InputSettings(file=path, human="rating", lower_is_better=True))
    assert got.human == Human(column="rating", higher_is_better=False)
    assert got.items is not None and list(got.items["rating"])[:3] == [0.0, 1.0, 2.0]
