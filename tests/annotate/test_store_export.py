"""The label store, the queue, the exports and the agreement of ``evalign annotate``; and the project's
verbs run on an export (``meta --pref ... --alt-test``, ``alt-test``, ``leaderboard --human``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from annotate_helpers import fill, pair_store, write_pairs
from typer.testing import CliRunner

from evalign.annotate.assign import is_ahead, label_code, queue, shown_order, valid_name
from evalign.annotate.export import agreement, alttest_labels, long_rows, majority, wide_rows
from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings
from evalign.cli import app
from evalign.errors import InputError, UsageError
from evalign.meta.agreement import cohen_kappa, krippendorff_alpha

runner = CliRunner()
ANNOTATORS = {"ann1": 0.85, "ann2": 0.8, "ann3": 0.75}


def test_queue_new_items_first_skips_last() -> None:
    counts = [2, 0, 1, 3, 0]
    assert queue(5, counts=counts, done=set(), skipped=[], per_item=3) == [1, 4, 2, 0]
    assert queue(5, counts=counts, done={1}, skipped=[4], per_item=3) == [2, 0, 4]
    assert queue(5, counts=counts, done={1}, skipped=[2, 4], per_item=3) == [0, 2, 4]
    assert queue(5, counts=[3] * 5, done=set(), skipped=[], per_item=3) == []


def test_new_items_first_to_the_annotators_with_fewest_labels() -> None:
    counts = [2, 0, 1, 3, 0, 1]
    # ahead of another annotator: the started items first (nearest K first), the new ones after them
    assert queue(6, counts=counts, done=set(), skipped=[], per_item=3, ahead=True) == [0, 2, 5, 1, 4]
    assert queue(6, counts=counts, done={0}, skipped=[2], per_item=3, ahead=True) == [5, 1, 4, 2]
    assert is_ahead("a", {"a": 5, "b": 2, "c": 5}) and not is_ahead("b", {"a": 5, "b": 2})
    assert not is_ahead("a", {"a": 3, "b": 3}) and not is_ahead("new", {"a": 3}) and not is_ahead("a", {"a": 9})


def test_page_gives_new_items_to_the_annotator_behind(tmp_path: Path) -> None:
    from evalign.annotate.app import state

    store, _, _ = pair_store(tmp_path, 8, per_item=2)
    for idx in (0, 1, 2):
        assert store.add_label("fast", idx, 1.0, shown="ab", seconds=1.0, comment=None)
    assert state(store, "slow")["item"]["key"] == "q003"  # behind (no labels): a new item first
    assert state(store, "fast")["item"]["key"] == "q003"  # alone so far: not ahead of anyone
    assert store.add_label("slow", 3, 1.0, shown="ab", seconds=1.0, comment=None)
    # fast (3 labels) is ahead of slow (1): the item slow started comes before the new ones
    assert state(store, "fast")["item"]["key"] == "q003"
    assert store.add_label("fast", 3, 1.0, shown="ab", seconds=1.0, comment=None)  # q003 has its K = 2 labels
    assert state(store, "fast")["item"]["key"] == "q004"  # nothing started left for fast: new items
    # slow (1 label) is behind: new items first, before the items fast started
    assert state(store, "slow")["item"]["key"] == "q004"
    assert state(store, "slow")["progress"] == {"done": 1, "total": 8}
    store.close()


def test_shown_order_is_seeded_per_annotator_and_item() -> None:
    orders = [shown_order("s", "ann1", f"q{i}") for i in range(200)]
    assert orders == [shown_order("s", "ann1", f"q{i}") for i in range(200)]
    assert 70 < orders.count("ab") < 130  # both orders, about half each
    assert orders != [shown_order("s", "ann2", f"q{i}") for i in range(200)]
    assert orders != [shown_order("other", "ann1", f"q{i}") for i in range(200)]


def test_label_codes_in_the_items_frame() -> None:
    assert label_code("pairwise", "left", "ab", ()) == 1.0
    assert label_code("pairwise", "left", "ba", ()) == -1.0
    assert label_code("pairwise", "right", "ba", ()) == 1.0
    assert label_code("pairwise", "tie", "ba", ()) == 0.0
    assert label_code("graded", "4", "ab", ()) == 4.0
    assert label_code("label", "2", "ab", ("good", "bad")) == "bad"
    for task, choice in (("pairwise", "a"), ("graded", "6"), ("label", "3"), ("label", "x")):
        with pytest.raises(ValueError):
            label_code(task, choice, "ab", ("good", "bad"))


def test_names() -> None:
    assert valid_name("ann_1.x-y") and valid_name("a" * 64)
    assert not any(valid_name(n) for n in ("", "a" * 65, "a b", "<script>", "../x", "ann/1", "é"))


def test_one_label_per_annotator_and_item_undo_skip(tmp_path: Path) -> None:
    store, _, _ = pair_store(tmp_path, 5)
    assert store.add_label("ann1", 0, 1.0, shown="ab", seconds=2.0, comment="ok")
    assert not store.add_label("ann1", 0, -1.0, shown="ab", seconds=1.0, comment=None)  # a second tab
    assert [lab.value for lab in store.labels()] == [1.0]
    assert store.add_label("ann2", 0, -1.0, shown="ba", seconds=1.0, comment=None)
    assert store.counts() == [2, 0, 0, 0, 0]
    store.skip("ann1", 1)
    assert queue(5, counts=store.counts(), done=store.done("ann1"), skipped=store.skipped("ann1"),
                 per_item=3) == [2, 3, 4, 1]
    assert store.undo("ann1") == 0
    assert store.done("ann1") == set() and store.done("ann2") == {0}
    assert store.undo("ann3") is None
    store.close()


def test_restart_resumes_and_refuses_other_items(tmp_path: Path) -> None:
    store, _, items = pair_store(tmp_path, 6)
    store.add_label("ann1", 2, 1.0, shown="ab", seconds=1.0, comment=None)
    seed = store.seed
    store.close()
    again = Store(tmp_path / "labels.sqlite")
    again.initialise(read_items_to_label(items, "pairwise"), StoreSettings(task="pairwise", per_item=2))
    assert again.seed == seed and again.done("ann1") == {2} and again.settings.per_item == 2
    other = tmp_path / "other.jsonl"
    write_pairs(other, 6, seed=9)
    with pytest.raises(UsageError, match="labels of other items"):
        again.initialise(read_items_to_label(other, "pairwise"), StoreSettings(task="pairwise"))
    again.close()
    # the WAL journal: labels committed before close are in the file (read with plain sqlite3)
    with sqlite3.connect(tmp_path / "labels.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 1


def test_bad_items_name_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "instruction": "x", "response_a": "1", "response_b": "2"}\n'
                   '{"id": "b", "instruction": "x", "response_a": "1"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl, line 2, field 'response_b'"):
        read_items_to_label(bad, "pairwise")
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "instruction": "x", "response": "1"}\n')
    with pytest.raises(InputError, match="needs a pair table"):
        read_items_to_label(items, "pairwise")
    assert read_items_to_label(items, "graded")[0].view["response"] == "1"


def test_wide_long_alttest_exports(tmp_path: Path) -> None:
    store, truth, _ = pair_store(tmp_path, 30)
    codes = fill(store, ANNOTATORS, truth)
    store.undo("ann3")  # item 29: ann3 gave none
    wide = wide_rows(store)
    assert len(wide) == 30
    assert list(wide[0])[-4:] == ["pref_ann1", "pref_ann2", "pref_ann3", "verdict"]
    assert list(wide[0])[:9] == ["id", "instruction", "response_a", "response_b", "system_a", "system_b",
                                 "judge:demo", "topic", "pref_ann1"]
    for i, row in enumerate(wide):
        got = [row["pref_ann1"], row["pref_ann2"], row["pref_ann3"]]
        want = [codes["ann1"][i], codes["ann2"][i], codes["ann3"][i] if i < 29 else None]
        assert got == want
        votes = [v for v in want if v is not None]
        top = max(set(votes), key=votes.count)
        expect = {1.0: "A", -1.0: "B", 0.0: "tie"}[top] if votes.count(top) * 2 > len(votes) or \
            len(set(votes)) == 1 else "tie"
        if len(votes) == 3 and votes.count(top) == 1:
            expect = "tie"
        assert row["verdict"] == expect
    long = long_rows(store)
    assert len(long) == 89 and {r["annotator"] for r in long} == set(ANNOTATORS)
    assert all(r["shown"] in ("ab", "ba") and r["seconds"] == 1.5 for r in long)
    assert long[0]["shown"] == shown_order(store.seed, "ann1", "q000")
    alt = alttest_labels(store)
    assert len(alt["ann3"]) == 29 and alt["ann1"]["q000"] == {1.0: "A", -1.0: "B", 0.0: "tie"}[codes["ann1"][0]]
    store.close()


def test_majority_rules() -> None:
    assert majority("pairwise", [1.0, 1.0, -1.0]) == "A"
    assert majority("pairwise", [1.0, -1.0, 0.0]) == "tie"
    assert majority("pairwise", []) is None
    assert majority("graded", [4.0, 4.0, 2.0]) == 4.0
    assert majority("graded", [5.0, 3.0, 2.0]) == 3.0  # no plurality: the median
    assert majority("label", ["ok", "bad", "ok"]) == "ok"
    assert majority("label", ["ok", "bad"]) is None


def test_agreement_is_the_projects(tmp_path: Path) -> None:
    store, truth, _ = pair_store(tmp_path, 30, per_item=3)
    codes = fill(store, ANNOTATORS, truth)
    store.undo("ann2")
    ag = agreement(store)
    a1, a2, a3 = (np.array(codes[n], dtype=float) for n in ANNOTATORS)
    a2[29] = np.nan
    assert ag.pairs[0].a == "ann1" and ag.pairs[0].b == "ann2" and ag.pairs[0].n_items == 29
    assert ag.pairs[0].kappa == pytest.approx(cohen_kappa(a1, a2))
    assert ag.pairs[1].kappa == pytest.approx(cohen_kappa(a1, a3))
    assert ag.alpha == pytest.approx(krippendorff_alpha(np.vstack([a1, a2, a3]), level="nominal"))
    assert ag.short == ("q029",)
    assert dict(ag.labels_per_annotator) == {"ann1": 30, "ann2": 29, "ann3": 30}
    store.close()


def test_graded_kappa_is_weighted(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{i}", "instruction": "q", "response": f"r{i}"}) + "\n"
                             for i in range(8)))
    store = Store(tmp_path / "g.sqlite")
    store.initialise(read_items_to_label(items, "graded"), StoreSettings(task="graded", per_item=2))
    x, y = [1, 2, 3, 4, 5, 5, 2, 1], [1, 3, 3, 5, 4, 5, 1, 1]
    for i, (a, b) in enumerate(zip(x, y, strict=True)):
        store.add_label("r1", i, float(a), shown=None, seconds=None, comment=None)
        store.add_label("r2", i, float(b), shown=None, seconds=None, comment=None)
    ag = agreement(store)
    assert ag.pairs[0].kappa == pytest.approx(cohen_kappa(np.array(x, float), np.array(y, float),
                                                          weights="quadratic", labels=[1.0, 2.0, 3.0, 4.0, 5.0]))
    assert ag.alpha == pytest.approx(krippendorff_alpha(np.array([x, y], float), level="ordinal"))
    assert wide_rows(store)[3]["rating_r2"] == 5.0
    store.close()


def test_cli_export_status_and_the_verbs_on_an_export(tmp_path: Path) -> None:
    every = tmp_path / "judged.jsonl"  # the judge's verdicts on 120 pairs; people label the first 40
    write_pairs(every, 120)
    items = tmp_path / "pairs.jsonl"
    items.write_text("".join(every.read_text().splitlines(keepends=True)[:40]))
    store = Store(tmp_path / "labels.sqlite")
    store.initialise(read_items_to_label(items, "pairwise"), StoreSettings(task="pairwise"))
    truth = [1.0 if json.loads(line)["judge:demo"] == "A" else -1.0 for line in items.read_text().splitlines()]
    fill(store, ANNOTATORS, truth)
    store.close()
    db = str(tmp_path / "labels.sqlite")
    wide, humans = tmp_path / "wide.jsonl", tmp_path / "humans.json"
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(wide)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(humans), "--format", "alttest"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["annotate", "export", db, "-o", str(tmp_path / "long.csv"), "--format", "long"])
    assert res.exit_code == 0 and len((tmp_path / "long.csv").read_text().splitlines()) == 121
    res = runner.invoke(app, ["annotate", "status", db, "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["labels_per_annotator"] == {"ann1": 40, "ann2": 40,
                                                                                     "ann3": 40}
    res = runner.invoke(app, ["annotate", "status", db])
    assert "Krippendorff's alpha" in res.stdout and "kappa ann1 ~ ann2" in res.stdout
    # meta on the export: the annotators' columns and the Alt-Test of the judge column
    res = runner.invoke(app, ["meta", str(wide), "--pref", "pref_ann1,pref_ann2,pref_ann3", "-m", "judge:demo",
                              "--alt-test", "--bootstrap", "50", "--permutations", "50", "--workers", "1", "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)
    assert meta["n_items"] == 40 and meta["human"] == "pref_ann1, pref_ann2, pref_ann3"
    table_alt = meta["alt_test"]["results"][0]
    # evalign alt-test on the alttest export (the judge's labels in the same words) gives the same figures
    rows = [json.loads(line) for line in wide.read_text().splitlines()]
    judges = tmp_path / "judges.json"
    judges.write_text(json.dumps({"demo": {r["id"]: r["judge:demo"] for r in rows}}))
    res = runner.invoke(app, ["alt-test", str(humans), str(judges), "--json"])
    assert res.exit_code == 0, res.output
    file_alt = json.loads(res.stdout)["results"][0]
    assert file_alt["n_items"] == table_alt["n_items"] == 40
    assert file_alt["advantage_probability"] == pytest.approx(table_alt["advantage_probability"])
    assert file_alt["winning_rate"] == pytest.approx(table_alt["winning_rate"])
    # leaderboard --human: the export's verdict column as the human verdicts of a PPI leaderboard
    res = runner.invoke(app, ["leaderboard", str(every), "--verdict", "judge:demo", "--human", str(wide), "--json"])
    assert res.exit_code == 0, res.output
    ppi = json.loads(res.stdout)["ppi"]
    assert ppi["n_human"] == 40 and ppi["n_battles"] == 120
    wins = {"m1": 0.0, "m2": 0.0}
    for r in rows:
        for side in ("a", "b"):
            s = r[f"system_{side}"]
            wins[s] += 0.5 if r["verdict"] == "tie" else float(r["verdict"] == side.upper())
    humans_rate = {w["system"]: w["humans"] for w in ppi["win_rates"]}
    assert humans_rate["m1"] == pytest.approx(wins["m1"] / 40)
    assert humans_rate["m2"] == pytest.approx(wins["m2"] / 40)


def test_cli_reserved_words_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = runner.invoke(app, ["annotate", "status", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 1 and "no such label store" in res.output
    res = runner.invoke(app, ["annotate", "export", str(tmp_path / "none.sqlite"), "-o", str(tmp_path / "x.json"),
                              "--format", "alttest"])
    assert res.exit_code == 1 and "no such label store" in res.output
    store, _, _ = pair_store(tmp_path, 3)
    store.close()
    res = runner.invoke(app, ["annotate", "export", str(tmp_path / "labels.sqlite"), "-o", str(tmp_path / "x.jsonl"),
                              "--format", "alttest"])
    assert res.exit_code == 2 and ".json" in res.output
    res = runner.invoke(app, ["annotate", "export", str(tmp_path / "labels.sqlite"), "-o", str(tmp_path / "x.jsonl"),
                              "--format", "tall"])
    assert res.exit_code == 2 and "--format must be one of wide, long, alttest" in res.output
    res = runner.invoke(app, ["annotate", str(tmp_path / "pairs.jsonl"), "--db", str(tmp_path / "l.sqlite"),
                              "--task", "label"])
    assert res.exit_code == 2 and "--labels" in res.output
    export = tmp_path / "export"  # a file named like the reserved word, given as ./export
    export.write_text((tmp_path / "pairs.jsonl").read_text())
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["annotate", "./export", "--db", "e.sqlite", "--task", "label"])
    assert res.exit_code == 2 and "--task label needs --labels" in res.output
    res = runner.invoke(app, ["annotate", "--help"])
    assert res.exit_code == 0
    for key in ("a = the left response is better", "t = tie", "u = undo", "s = skip", "1-5", "annotate export"):
        assert key in " ".join(res.output.split())


def test_concurrent_writers_and_duplicate_races(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store, _, _ = pair_store(tmp_path, 30)

    def label(args: tuple[str, int]) -> bool:
        name, idx = args
        return store.add_label(name, idx, 1.0, shown="ab", seconds=None, comment=None)

    jobs = [(name, idx) for idx in range(30) for name in ("a", "b", "a", "b")]  # every label sent twice
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(label, jobs))
    assert sum(results) == 60  # each (annotator, item) stored once, its duplicate refused
    assert store.counts() == [2] * 30
    store.close()
    with sqlite3.connect(tmp_path / "labels.sqlite") as db:  # committed, as another process sees it
        assert db.execute("SELECT COUNT(*) FROM labels").fetchone()[0] == 60
