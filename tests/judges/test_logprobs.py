"""The probability of a judge's verdict from the logprobs of its answer tokens: hand-made generations
(LLMBar's "Output (a)", Prometheus' "[RESULT] A", G-Eval's grade), alpaca_eval's own
``logprob_parser`` on the same logprobs, and the columns ``J.p_a`` / ``J.p`` / ``J.expected``."""

from __future__ import annotations

import importlib.metadata
import math
import sys
import types
from typing import Any

import pytest

from evalign.judges import get_judge
from evalign.judges.logprobs import LLMBAR, PROMETHEUS, choice_probabilities, first_shown_probability, p_a


def gen(tokens: list[str], tops: dict[int, dict[str, float]], finish: str = "stop") -> dict[str, Any]:
    """A generation as the runner stores it: one choice with tokens and, per position, top logprobs."""
    top = [tops.get(j, {t: 0.0}) for j, t in enumerate(tokens)]
    return {"choices": [{"text": "".join(tokens), "finish_reason": finish, "tokens": tokens, "top_logprobs": top,
                         "token_logprobs": [0.0] * len(tokens)}]}


LN = math.log


def test_llmbar_direct_both_orders() -> None:
    j = get_judge("llmbar", template="llmbar_vanilla", temperature=0.0, logprobs=True, top_logprobs=5)
    # order ab: "Output (a)" with P(a) = .6, P(b) = .3 (and .1 on another token): P(first) = .6 / .9
    ab = gen(["Output", " (", "a", ")"], {2: {"a": LN(0.6), "b": LN(0.3), "c": LN(0.1)}})
    # order ba: "Output (b)" (the first shown is B): P(first) = .2 / (.2 + .7)
    ba = gen(["Output", " (", "b", ")"], {2: {"b": LN(0.7), " a": LN(0.2)}})
    r_ab, r_ba = j.parse_call(ab, None, "ab"), j.parse_call(ba, None, "ba")
    assert r_ab.verdict == "A" and r_ba.verdict == "B"
    assert r_ab.p_first == pytest.approx(0.6 / 0.9) and r_ba.p_first == pytest.approx(0.2 / 0.9)
    out = j.aggregate({(0, "ab"): r_ab, (0, "ba"): r_ba})
    # in order ba the first shown is response B: P(A) = 1 - P(first) = .7 / .9
    assert out[""] == "A" and out["p_a"] == pytest.approx((0.6 / 0.9 + 0.7 / 0.9) / 2)


def test_llmbar_cot_reads_the_concluding_answer() -> None:
    j = get_judge("llmbar", template="llmbar_cot", temperature=0.0, logprobs=True, top_logprobs=5)
    toks = ["Output", " (", "a", ")", " is", " short", ".", " Therefore", ",", " Output", " (", "b", ")", " is",
            " better", "."]
    g = gen(toks, {2: {"a": LN(0.9), "b": LN(0.1)}, 11: {"b": LN(0.8), "a": LN(0.1)}})
    r = j.parse_call(g, None, "ab")
    assert r.verdict == "B" and r.p_first == pytest.approx(0.1 / 0.9)


def test_prometheus_relative_and_no_logprobs() -> None:
    j = get_judge("pairwise", temperature=0.0, logprobs=True, top_logprobs=5)
    toks = ["Feedback", ":", " A", " is", " right", ".", " [", "RESULT", "]", " A"]
    g = gen(toks, {2: {" A": LN(0.99)}, 9: {" A": LN(0.5), " B": LN(0.25), "B": LN(0.25)}})
    r = j.parse(g)
    # the " A" of the feedback is not the answer: only the token after [RESULT] is read
    assert r.verdict == "A" and r.p_first == pytest.approx(0.5)
    out = j.aggregate({(0, "ab"): r, (0, "ba"): j.parse(gen(toks, {9: {" A": LN(0.2), " B": LN(0.8)}}))})
    assert out[""] == "tie" and out["p_a"] == pytest.approx((0.5 + 0.8) / 2)
    plain = {"choices": [{"text": "Feedback: fine. [RESULT] B", "finish_reason": "stop"}]}
    r2 = j.parse(plain)
    assert r2.verdict == "B" and getattr(r2, "p_first", None) is None
    assert "p_a" not in j.aggregate({(0, "ab"): r2, (0, "ba"): r2})


def test_geval_grade_distribution() -> None:
    j = get_judge("geval", temperature=0.0)
    g = gen(["2", "\n"], {0: {"1": LN(0.2), "2": LN(0.5), "3": LN(0.2), "x": LN(0.1)}})
    r = j.parse(g)
    out = j.aggregate({(0, ""): r})
    # renormalised over the grade tokens (.9): J.p = .5 / .9, J.expected = (.2 + 1.0 + .6) / .9
    assert out["p"] == pytest.approx(0.5 / 0.9) and out["expected"] == pytest.approx(1.8 / 0.9)
    assert out["grade"] == 2.0 and out[""] == pytest.approx(1.8 / 0.9)


@pytest.fixture
def alpaca_parser(monkeypatch: pytest.MonkeyPatch) -> Any:
    """alpaca_eval's ``logprob_parser`` (pkg_resources stubbed: setuptools >= 81 dropped it)."""
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        from packaging.version import parse

        stub = types.ModuleType("pkg_resources")
        stub.parse_version = parse  # type: ignore[attr-defined]
        stub.get_distribution = lambda name: types.SimpleNamespace(version=importlib.metadata.version(name))  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "pkg_resources", stub)
    mod = pytest.importorskip("alpaca_eval.completion_parsers", reason="alpaca-eval is not installed")
    return mod.logprob_parser


@pytest.mark.parametrize("tops", [
    {"m": -0.0176, "M": -4.05, "Both": -14.9},
    {"M": -0.2, "m": -1.7},
    {"m": -3.0, "The": -0.1},  # M absent: probability 0, as alpaca_eval takes its logprob as -inf
])
def test_the_probability_is_alpaca_evals(alpaca_parser: Any, tops: dict[str, float]) -> None:
    completion = {"logprobs": {"content": [{"token": next(iter(tops)), "logprob": next(iter(tops.values())),
                                            "top_logprobs": [{"token": t, "logprob": v} for t, v in tops.items()]}]}}
    theirs = alpaca_parser(completion, numerator_token="m", denominator_tokens=["m", "M"], is_binarize=False)[0]
    ours = choice_probabilities([next(iter(tops))], [tops], __import__("re").compile(""), {"A": ("m",), "B": ("M",)})
    assert ours is not None
    assert 2.0 - ours["A"] == pytest.approx(theirs, abs=1e-12)  # alpaca_eval's preference: 2 - P(first better)


def test_p_a_over_samples_and_orders() -> None:
    class R:
        def __init__(self, p: float | None) -> None:
            self.p_first = p

    res = {(0, "ab"): R(0.9), (0, "ba"): R(0.3), (1, "ab"): R(None), (1, "ba"): R(0.4)}
    assert p_a(res, ("ab", "ba"), 2) == pytest.approx((0.9 + 0.7 + 0.6) / 3)  # type: ignore[arg-type]
    assert first_shown_probability({"tokens": None, "top_logprobs": None}, LLMBAR) is None
    assert first_shown_probability({"tokens": ["[RESULT]", " C"], "top_logprobs": [{}, {" C": 0.0}]}, PROMETHEUS) is None
