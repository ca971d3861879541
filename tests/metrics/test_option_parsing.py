"""``--option metric.key=value`` texts parsed through the metrics' declared option types."""

from __future__ import annotations

import pytest

from evalign.errors import UsageError
from evalign.metrics.option_parsing import parse_all_options, parse_options


def test_options_are_parsed_per_metric_through_their_declarations() -> None:
    out = parse_all_options(["chrf.char_order=4", "bleu.lowercase=true"], ["chrf", "bleu"], no_cache=False)
    assert out == {"chrf": {"char_order": 4}, "bleu": {"lowercase": True}}


def test_an_option_of_a_metric_not_scored_names_it() -> None:
    with pytest.raises(UsageError, match=r"metric 'chrf' is not scored in this run .*\(add -m chrf\)"):
        parse_all_options(["chrf.char_order=4"], ["bleu"], no_cache=False)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("chrf", "expected metric.key=value"),
        ("chrf.char_order=-3", "--option chrf.char_order: must be an integer >= 1"),
        ("chrf.char_ordr=4", "unknown option 'char_ordr'"),
    ],
)
def test_bad_options_are_usage_errors(option: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_all_options([option], ["chrf"], no_cache=False)


def test_the_same_option_twice_is_an_error() -> None:
    with pytest.raises(UsageError, match="given twice"):
        parse_all_options(["chrf.char_order=4", "chrf.char_order=5"], ["chrf"], no_cache=False)


def test_parse_options_keeps_only_the_metrics_own() -> None:
    assert parse_options(["chrf.char_order=4", "bleu.lowercase=true"], "chrf", no_cache=False) == {"char_order": 4}
