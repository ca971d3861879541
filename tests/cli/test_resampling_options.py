"""``--resampling`` and ``--workers`` of ``evalign meta``: the method is named in the signature, the
values are those of the same numbers' API call, and bad values are one clear line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from evalign.cli import app

runner = CliRunner()
PANDALM = ["meta", "--dataset", "pandalm", "-m", "judge:gpt-3.5-turbo", "--bootstrap", "60", "--permutations", "60",
           "--json"]


def test_meta_names_the_resampling_method_and_workers_change_nothing() -> None:
    runs = {}
    for args in (["--resampling", "auto", "--workers", "1"], ["--resampling", "auto", "--workers", "2"],
                 ["--resampling", "items", "--workers", "1"]):
        res = runner.invoke(app, [*PANDALM, *args])
        assert res.exit_code == 0, res.output
        runs[" ".join(args)] = json.loads(res.stdout)
    auto1, auto2, items = runs.values()
    assert auto1["signature"]["resampling"] == "sufficient" and "resampling:sufficient" in auto1["signature"]["text"]
    assert items["signature"]["resampling"] == "items"
    assert any("same seed, different draws than the item-index path" in n for n in auto1["trust"][0]["notes"])
    assert not any("sufficient statistics" in n for n in items["trust"][0]["notes"])
    assert auto1["trust"] == auto2["trust"]  # the number of workers changes no number
    rows = {r["metric"]: r for r in auto1["trust"][0]["rows"] if r["group"] == "(all)"}
    rows_items = {r["metric"]: r for r in items["trust"][0]["rows"] if r["group"] == "(all)"}
    assert {m: r["value"] for m, r in rows.items()} == {m: r["value"] for m, r in rows_items.items()}


def test_bad_resampling_options_are_one_line() -> None:
    res = runner.invoke(app, [*PANDALM, "--resampling", "bootstrap"])
    assert res.exit_code != 0 and "--resampling must be auto or items, got 'bootstrap'" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, [*PANDALM, "--workers", "-1"])
    assert res.exit_code == 2 and "error: --workers must be an integer >= 0 (0: every core), got -1" in res.output
