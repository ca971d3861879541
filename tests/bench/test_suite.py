"""The bench's suite as data: what ships, how it is read, and its errors (file, line, field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalign.bench.suite import load_suite, parse_suite, set_kind
from evalign.errors import EvalignError, InputError, UsageError

DEFAULT = ["llmbar-natural", "llmbar-adversarial", "pandalm", "alttest-mtbench", "autoj", "judgebench", "hhh",
           "topical-chat", "qags", "sf-data2text"]
OPTIONAL = ["tulu1", "llmbar-llmeval2", "llmbar-mtbench", "llmbar-faireval", "judgebench-claude", "tulu1-acceptability"]


def test_the_shipped_suite_lists_every_set_with_texts_and_labels() -> None:
    suite = load_suite()
    assert [c.key for c in suite.categories] == ["instruction", "chat", "reasoning", "safety", "grading"]
    assert [s.key for s in suite.select().sets] == DEFAULT
    assert sorted(s.key for s in suite.sets) == sorted(DEFAULT + OPTIONAL)
    by_key = {s.key: s for s in suite.sets}
    assert {k: by_key[k].category for k in DEFAULT} == {
        "llmbar-natural": "instruction", "llmbar-adversarial": "instruction", "pandalm": "instruction",
        "alttest-mtbench": "chat", "autoj": "chat", "judgebench": "reasoning", "hhh": "safety",
        "topical-chat": "grading", "qags": "grading", "sf-data2text": "grading"}  # fmt: skip
    kinds = {k: set_kind(by_key[k]) for k in DEFAULT}
    assert [k for k, v in kinds.items() if v == "graded"] == ["topical-chat", "qags", "sf-data2text"]
    assert by_key["hhh"].recipe.rubric_column == "task" and by_key["hhh"].recipe.rubric_map == "hhh"
    assert by_key["qags"].published == (("unieval", "unieval:consistency"),)
    assert by_key["llmbar-natural"].published == (("judge:*/vanilla", "judge:*/vanilla"),)
    assert len(suite.hash) == 16


def test_selecting_sets_categories_and_templates() -> None:
    suite = load_suite()
    assert [s.key for s in suite.select(["grading"]).sets] == ["topical-chat", "qags", "sf-data2text",
                                                                "tulu1-acceptability"]
    assert [s.key for s in suite.select(["hhh", "llmbar-natural"]).sets] == ["llmbar-natural", "hhh"]
    assert len(suite.select(["all"]).sets) == len(suite.sets)
    with pytest.raises(UsageError, match="did you mean 'pandalm'"):
        suite.select(["pandlm"])
    over = suite.select(["hhh", "autoj", "qags"]).with_templates({"chat": "llmbar_cot", "pairwise": "llmbar_vanilla",
                                                                   "qags": "prometheus1_absolute"})
    assert [s.recipe.template for s in over.sets] == ["llmbar_cot", "llmbar_vanilla", "prometheus1_absolute"]
    assert over.sets[1].recipe.rubric_column == "task"  # the rubric stays; the judge drops it when it takes none


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(text, encoding="utf-8")
    return p


GOOD = """version: 1
name: mine
categories:
  - {key: c, title: C}
sets:
  - key: s1
    dataset: llmbar:natural
    category: c
    judge: {mode: pairwise, template: llmbar_vanilla}
"""


def test_a_suite_file_of_ones_own(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, GOOD))
    assert suite.name == "mine" and [s.key for s in suite.sets] == ["s1"] and suite.sets[0].line == 6
    assert suite.sets[0].statistic == "kendall" and suite.sets[0].default is True


@pytest.mark.parametrize(("edit", "where", "message"), [
    (("    judge:", "    jduge:"), "line 9, field 'jduge'", "unknown set key 'jduge' (did you mean 'judge'?)"),
    (("category: c\n    judge", "category: d\n    judge"), "line 8, field 'category'", "unknown category 'd'"),
    (("key: s1", "key: S 1"), "line 6, field 'key'", "must be a lower-case name"),
    (("{mode: pairwise,", "{mode: pairwise, rubrik: x,"), "line 9, field 'rubrik'", "unknown judge key"),
    (("version: 1", "version: 2"), "line 1, field 'version'", "version must be 1"),
    (("    dataset: llmbar:natural\n", ""), "line 6, field 'dataset'", "missing"),
])  # fmt: skip
def test_a_bad_suite_names_file_line_and_field(tmp_path: Path, edit: tuple[str, str], where: str, message: str) -> None:
    p = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(InputError) as e:
        load_suite(p)
    assert str(e.value).startswith(f"{p}, {where}: ") and message in str(e.value)


def test_a_set_given_twice_and_bad_values(tmp_path: Path) -> None:
    twice = GOOD + "  - {key: s1, dataset: hhh, category: c, judge: {mode: pairwise}}\n"
    with pytest.raises(InputError, match="line 10, field 'key': set 's1' given twice"):
        load_suite(write(tmp_path, twice))
    with pytest.raises(InputError, match="field 'statistic': must be one of kendall, spearman, pearson"):
        parse_suite(GOOD + "    statistic: tau\n", "x.yaml")
    with pytest.raises(InputError, match="field 'published': must map shown names to columns"):
        parse_suite(GOOD + "    published: {a: 1}\n", "x.yaml")
    with pytest.raises(EvalignError, match="YAML tags are not read"):
        parse_suite(GOOD + "    stratify: !!python/tuple [a]\n", "x.yaml")
