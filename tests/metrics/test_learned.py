"""bartscore against a direct computation with a tiny BART: -loss of model(labels=...) per pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evalign.errors import EvalignError, ModelLoadError
from evalign.metrics import get_metric

HYPS = ["The cat sat on the mat.", "Hello there", "the dog is red", "why not", "x " * 300]
REFS = [["A cat was sitting on a mat."], ["Hi!", "Hello there"], ["something else"], ["what is this?"], ["short"]]


@pytest.fixture(scope="module")
def direct(tiny_bart: str):  # type: ignore[no-untyped-def]
    """log p(tgt | src) per token, straight from BartForConditionalGeneration's loss."""
    import torch
    from transformers import AutoTokenizer, BartForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(tiny_bart)
    model = BartForConditionalGeneration.from_pretrained(tiny_bart).eval()

    def ll(src: str, tgt: str) -> float:
        s = tok([src], return_tensors="pt", truncation=True, max_length=256)
        t = tok([tgt], return_tensors="pt", truncation=True, max_length=256)["input_ids"]
        with torch.no_grad():
            return -float(model(**s, labels=t).loss)

    return ll


def _best(fn, hyps, refs):  # type: ignore[no-untyped-def]
    return np.asarray([max(fn(h, r) for r in rs) for h, rs in zip(hyps, refs, strict=True)])


def test_bartscore_hypo_ref_is_log_p_ref_given_response(tiny_bart: str, direct) -> None:  # type: ignore[no-untyped-def]
    m = get_metric("bartscore", model=tiny_bart, batch_size=2)
    res = m.score(HYPS, REFS)
    np.testing.assert_allclose(res.values, _best(direct, HYPS, REFS), atol=1e-5)
    assert np.all(res.values <= 0) and m.higher_is_better
    assert res.info["truncated"] == 1  # the 600-byte response is longer than 256 tokens
    assert m.column == "bartscore[model=bart]"


def test_bartscore_other_directions(tiny_bart: str, direct) -> None:  # type: ignore[no-untyped-def]
    ref_hypo = get_metric("bartscore", model=tiny_bart, direction="ref_hypo").score(HYPS, REFS).values
    np.testing.assert_allclose(ref_hypo, _best(lambda h, r: direct(r, h), HYPS, REFS), atol=1e-5)
    avg = get_metric("bartscore", model=tiny_bart, direction="avg_f").score(HYPS, REFS).values
    np.testing.assert_allclose(avg, _best(lambda h, r: (direct(h, r) + direct(r, h)) / 2, HYPS, REFS), atol=1e-5)
    harm_metric = get_metric("bartscore", model=tiny_bart, direction="harm_f")
    assert harm_metric.column == "bartscore[model=bart,direction=harm_f]"
    harm = harm_metric.score(HYPS, REFS).values

    def h(a: float, b: float) -> float:
        return a * b / (a + b)

    np.testing.assert_allclose(harm, _best(lambda x, r: h(direct(x, r), direct(r, x)), HYPS, REFS), atol=1e-5)
    with pytest.raises(EvalignError, match="direction"):
        get_metric("bartscore", model=tiny_bart, direction="sideways")


def test_bartscore_weights_file_as_model(tiny_bart: str, tmp_path: Path) -> None:
    """A state-dict file (like BARTScore's ParaBank2 bart_score.pth) loaded into a base model."""
    import torch
    from transformers import BartForConditionalGeneration

    model = BartForConditionalGeneration.from_pretrained(tiny_bart)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.9)
    pth = tmp_path / "bart_score.pth"
    torch.save(model.state_dict(), pth)
    m = get_metric("bartscore", model=str(pth), base_model=tiny_bart, variant="para")
    assert m.column == "bartscore[model=bart_score.pth,variant=para]"
    assert "base_model:" in str(m.signature())
    got = m.score(HYPS[:3], REFS[:3]).values
    base = get_metric("bartscore", model=tiny_bart).score(HYPS[:3], REFS[:3]).values
    assert np.all(np.abs(got - base) > 1e-4)  # other weights, other scores

    model.save_pretrained(tmp_path / "folder")
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tiny_bart).save_pretrained(tmp_path / "folder")
    same = get_metric("bartscore", model=str(tmp_path / "folder")).score(HYPS[:3], REFS[:3]).values
    np.testing.assert_allclose(got, same, atol=1e-5)


def test_bartscore_para_needs_weights_and_unknown_model_errors(tmp_path: Path) -> None:
    with pytest.raises(EvalignError, match=r"bart_score\.pth"):
        get_metric("bartscore", variant="para")
    with pytest.raises(ModelLoadError, match="no-such-bart"):
        get_metric("bartscore", model="evalign-test/no-such-bart").score(["a"], [["b"]])
    with pytest.raises(ModelLoadError, match=r"missing\.pth"):
        get_metric("bartscore", model=str(tmp_path / "missing.pth")).score(["a"], [["b"]])


def test_bartscore_without_reference_is_nan(tiny_bart: str) -> None:
    res = get_metric("bartscore", model=tiny_bart).score(["a cat", "a dog"], [[], ["the dog"]])
    assert np.isnan(res.values[0]) and res.values[1] < 0
