"""The option checks of ``evalign score --out-dir`` (the sharded engines), before any work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalign.cli.score_sharded import check_sharded, metric_names
from evalign.errors import UsageError


def _args(**over: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"file": "items.jsonl", "dataset": None, "out": None, "significance": False,
                            "engine": "local", "out_dir": "out", "address": None, "gpus_per_actor": 0.0,
                            "workers": None}
    return {**args, **over}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"engine": "spark"}, "--engine spark: expected local or ray"),
        ({"workers": 2}, "need --engine ray"),
        ({"out_dir": None}, "give --out-dir DIR"),
        ({"file": "-"}, "not --dataset or standard input"),
        ({"out": "x.jsonl"}, "-o: not with --out-dir"),
        ({"significance": True}, "--significance: not with --out-dir"),
        ({"engine": "ray", "address": "auto", "workers": 2}, "--workers: only without --address"),
    ],
)
def test_conflicting_options_are_usage_errors(over: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_sharded(**_args(**over))


def test_an_out_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x", encoding="utf-8")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_sharded(**_args(out_dir=str(f)))
    check_sharded(**_args(out_dir=str(tmp_path / "new")))


def test_metric_names_split_and_refuse_repeats() -> None:
    assert metric_names(["bleu,chrf", "rouge_l"]) == ["bleu", "chrf", "rouge_l"]
    with pytest.raises(UsageError, match="give at least one metric"):
        metric_names([])
    with pytest.raises(UsageError, match="-m bleu: given twice"):
        metric_names(["bleu", "bleu"])
