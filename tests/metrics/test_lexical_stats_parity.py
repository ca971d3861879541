"""The sacrebleu-style hooks of the corpus metrics: ``item_stats`` summed and handed to
``score_from_stats`` give exactly sacrebleu's ``corpus_score`` (many random corpora, several
settings, items with one to three references and some without); the private sacrebleu call behind
``score_from_stats`` is made in one place of the package only."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.utils import sum_of_lists

from evalign.metrics import get_metric

SRC = Path(__file__).resolve().parents[2] / "src" / "evalign"
WORDS = ["a", "b", "c", "the", "cat", "A", "B.", "(x)", "x,", "é", "ß", "don't", "x-y", "3.5", "1,000", "&amp;",
         "«»", "$5-6", "sat", "on", "mat", "dog"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))


def _corpus(rng: random.Random, n: int) -> tuple[list[str], list[list[str]]]:
    hyps = [_text(rng) for _ in range(n)]
    refs = [[_text(rng) for _ in range(rng.randint(1, 3))] for _ in range(n)]
    return hyps, refs


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's reference streams: items with fewer references padded with None."""
    k = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(k)]


@pytest.mark.parametrize(("name", "kw", "peer"), [
    ("bleu", {}, BLEU()),
    ("bleu", {"lowercase": True, "tokenize": "intl"}, BLEU(lowercase=True, tokenize="intl")),
    ("bleu", {"smooth_method": "floor", "smooth_value": 0.1}, BLEU(smooth_method="floor", smooth_value=0.1)),
    ("chrf", {}, CHRF()),
    ("chrf", {"word_order": 2}, CHRF(word_order=2)),
    ("chrf", {"char_order": 3, "beta": 1, "lowercase": True}, CHRF(char_order=3, beta=1, lowercase=True)),
])
def test_corpus_score_from_item_stats_equals_sacrebleu(name: str, kw: dict[str, object], peer: object) -> None:
    rng = random.Random(f"{name}{sorted(kw.items())}")  # a str seed is the same in every process
    metric = get_metric(name, **kw)
    for trial in range(60):
        hyps, refs = _corpus(rng, rng.randint(1, 12))
        if trial % 2:  # half the corpora scored first, so item_stats reuses the sentence statistics
            metric.score(hyps, refs)
        stats = metric.item_stats(hyps, refs)
        assert all(s is not None for s in stats)
        ours = metric.score_from_stats(sum_of_lists(stats))
        theirs = peer.corpus_score(hyps, _streams(refs)).score  # type: ignore[attr-defined]
        assert ours == theirs, (hyps, refs)
        assert metric.system_score(hyps, refs) == theirs


def test_items_without_a_reference_are_left_out_of_the_corpus_score() -> None:
    rng = random.Random(7)
    metric = get_metric("bleu")
    hyps, refs = _corpus(rng, 10)
    with_empty = [*refs[:5], [], *refs[5:]]
    stats = metric.item_stats([*hyps[:5], "no reference", *hyps[5:]], with_empty)
    assert stats[5] is None
    assert metric.score_from_stats(sum_of_lists([s for s in stats if s is not None])) == \
        BLEU().corpus_score(hyps, _streams(refs)).score


def test_score_from_stats_keeps_the_statistics_number_type() -> None:
    """Summed as float32 (as sacrebleu's paired bootstrap sums them), chrF comes back as float32."""
    metric = get_metric("chrf")
    rng = random.Random(3)
    hyps, refs = _corpus(rng, 8)
    summed = np.asarray(metric.item_stats(hyps, refs), dtype=np.float32).sum(axis=0)
    score = metric.score_from_stats(summed)
    assert isinstance(score, np.float32)
    assert score == pytest.approx(CHRF().corpus_score(hyps, _streams(refs)).score, abs=1e-3)


def test_mean_metric_hooks_give_the_mean_item_score() -> None:
    rng = random.Random(5)
    metric = get_metric("rouge_l")
    hyps, refs = _corpus(rng, 20)
    refs[3] = []
    stats = metric.item_stats(hyps, refs)
    assert stats[3] is None and all(s is not None and s[1] == 1.0 for i, s in enumerate(stats) if i != 3)
    values = metric.score(hyps, refs).values
    assert metric.score_from_stats(sum_of_lists([s for s in stats if s is not None])) == \
        pytest.approx(float(np.nanmean(values)), abs=1e-12)
    assert metric.system_score(hyps, refs) == pytest.approx(float(np.nanmean(values)), abs=1e-12)


def test_the_private_sacrebleu_call_is_made_in_one_place() -> None:
    calls = [(p.relative_to(SRC).as_posix(), i) for p in SRC.rglob("*.py")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\._compute_score_from_stats\(", line)]
    assert [c[0] for c in calls] == ["metrics/lexical.py"], calls
