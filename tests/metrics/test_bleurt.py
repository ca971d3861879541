"""BLEURT on tiny random checkpoints in the layout of the lucadiliello/BLEURT-20 conversions.

The expected scores are computed here by hand with plain torch from the checkpoint's tensors
(embeddings, optional embedding projection, post-LayerNorm BERT layers, tanh pooler, linear
regression head), independently of the transformers classes the metric builds on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import tiny_models as T

from evalign.cache import Cache
from evalign.errors import ModelLoadError
from evalign.metrics import get_metric
from evalign.metrics.bleurt import ALIASES, Bleurt, resolve_checkpoint, truncate_seq_pair

REFS = ["the cat sat on the mat.", "a good day for a long walk", "what time is it?", "hello"]
CANDS = ["the dog sat on the red mat!", "a bad day", "the time is now, i think, or never", "hi there"]


@pytest.fixture(scope="module")
def bleurt_dirs(tmp_path_factory: pytest.TempPathFactory, torch_threads: None) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bleurt")
    return {
        "rembert": str(T.build_bleurt(root / "rembert", embedding_size=16)),
        "bert": str(T.build_bleurt(root / "bert", embedding_size=None, seed=4)),
    }


def hand_score(folder: str, ref: str, cand: str, max_length: int = 512) -> float:
    """The regression head's output for one pair, computed from the raw tensors."""
    import sentencepiece as spm
    import torch
    import torch.nn.functional as F

    cfg = json.loads((Path(folder) / "config.json").read_text())
    w = torch.load(Path(folder) / "pytorch_model.bin", weights_only=True)
    sp = spm.SentencePieceProcessor(model_file=str(Path(folder) / "spm.model"))
    r, c = sp.encode(ref), sp.encode(cand)
    while len(r) + len(c) > min(max_length, cfg["max_position_embeddings"]) - 3:
        if len(r) > len(c):
            r = r[:-1]
        else:
            c = c[:-1]
    cls, sep = sp.piece_to_id("[CLS]"), sp.piece_to_id("[SEP]")
    ids = torch.tensor([cls, *r, sep, *c, sep])
    types = torch.tensor([0] * (len(r) + 2) + [1] * (len(c) + 1))
    eps = cfg["layer_norm_eps"]

    def ln(x: torch.Tensor, p: str) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], w[p + ".weight"], w[p + ".bias"], eps)

    def lin(x: torch.Tensor, p: str) -> torch.Tensor:
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    e = "bleurt.embeddings."
    h = w[e + "word_embeddings.weight"][ids] + w[e + "token_type_embeddings.weight"][types]
    h = ln(h + w[e + "position_embeddings.weight"][: len(ids)], e + "LayerNorm")
    if cfg.get("embedding_size"):
        h = lin(h, "bleurt.encoder.embedding_projection")
    n_heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // n_heads
    for i in range(cfg["num_hidden_layers"]):
        p = f"bleurt.encoder.layer.{i}."

        def heads(x: torch.Tensor) -> torch.Tensor:
            return x.view(len(ids), n_heads, d).transpose(0, 1)

        q, k, v = (heads(lin(h, p + "attention.self." + n)) for n in ("query", "key", "value"))
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)
        ctx = (att @ v).transpose(0, 1).reshape(len(ids), -1)
        a = ln(lin(ctx, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        h = ln(lin(F.gelu(lin(a, p + "intermediate.dense")), p + "output.dense") + a, p + "output.LayerNorm")
    pooled = torch.tanh(lin(h[0], "bleurt.pooler.dense"))
    return float(lin(pooled, "classifier")[0])


@pytest.mark.parametrize("kind", ["rembert", "bert"])
def test_scores_are_the_regression_head_output(bleurt_dirs: dict[str, str], kind: str) -> None:
    folder = bleurt_dirs[kind]
    m = Bleurt(folder, device="cpu", batch_size=3, use_cache=False)
    got = m.score(CANDS, [[r] for r in REFS]).values
    want = np.array([hand_score(folder, r, c) for r, c in zip(REFS, CANDS, strict=True)])
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert np.ptp(want) > 0.05  # the random head separates the pairs: the check is not vacuous


def test_reference_comes_first(bleurt_dirs: dict[str, str]) -> None:
    folder = bleurt_dirs["rembert"]
    m = Bleurt(folder, device="cpu", use_cache=False)
    got = m.score(["the dog sat on the red mat!"], [["the cat sat on the mat."]]).values[0]
    assert got == pytest.approx(hand_score(folder, "the cat sat on the mat.", "the dog sat on the red mat!"), abs=1e-5)
    assert abs(got - hand_score(folder, "the dog sat on the red mat!", "the cat sat on the mat.")) > 1e-3


def test_truncation_as_bleurt(bleurt_dirs: dict[str, str]) -> None:
    assert truncate_seq_pair([1, 2, 3, 4, 5], [6, 7], 5) == ([1, 2, 3], [6, 7])
    assert truncate_seq_pair([1, 2, 3], [4, 5, 6], 4) == ([1, 2], [4, 5])
    assert truncate_seq_pair([1, 2, 3], [4, 5, 6], 5) == ([1, 2, 3], [4, 5])
    folder = bleurt_dirs["rembert"]
    long_ref = " ".join(["the cat sat on the mat"] * 5)
    m = Bleurt(folder, device="cpu", max_length=20, use_cache=False)
    res = m.score(["a dog", "hello"], [[long_ref], ["hi"]])
    assert res.info["truncated"] == 1
    assert res.values[0] == pytest.approx(hand_score(folder, long_ref, "a dog", max_length=20), abs=1e-5)
    # the checkpoint's position limit (48) caps a larger max_length
    m = Bleurt(folder, device="cpu", max_length=512, use_cache=False)
    res = m.score(["a dog"], [[long_ref * 3]])
    assert res.info["truncated"] == 1
    assert res.values[0] == pytest.approx(hand_score(folder, long_ref * 3, "a dog", max_length=48), abs=1e-5)


def test_several_references_and_none(bleurt_dirs: dict[str, str]) -> None:
    folder = bleurt_dirs["bert"]
    m = Bleurt(folder, device="cpu", use_cache=False)
    res = m.score(["a bad day", "x"], [["a good day for a long walk", "what time is it?"], []])
    each = [hand_score(folder, r, "a bad day") for r in ("a good day for a long walk", "what time is it?")]
    assert res.values[0] == pytest.approx(max(each), abs=1e-5)
    assert np.isnan(res.values[1])


def test_cache_second_run_computes_nothing(bleurt_dirs: dict[str, str], tmp_path: Path) -> None:
    folder = bleurt_dirs["rembert"]
    cache = Cache(tmp_path / "c.sqlite")
    calls: list[tuple[int, int]] = []
    m = Bleurt(folder, device="cpu", batch_size=2, cache=cache, progress=lambda d, t: calls.append((d, t)))
    first = m.score(CANDS + CANDS[:1], [[r] for r in REFS + REFS[:1]])
    assert first.info == {"pairs": 4, "computed": 4, "cached": 0, "truncated": 0}
    assert calls[-1] == (4, 4) and len(calls) == 2
    second = Bleurt(folder, device="cpu", cache=cache).score(CANDS, [[r] for r in REFS])
    assert second.info["computed"] == 0 and second.info["cached"] == 4
    np.testing.assert_array_equal(second.values, first.values[:4])
    # another max_length is another key
    third = Bleurt(folder, device="cpu", cache=cache, max_length=40).score(CANDS, [[r] for r in REFS])
    assert third.info["computed"] == 4


def test_registry_defaults_and_aliases() -> None:
    m = get_metric("bleurt")
    assert m.model == "lucadiliello/BLEURT-20" and m.higher_is_better and m.column == "bleurt"
    assert resolve_checkpoint("D12") == "lucadiliello/BLEURT-20-D12"
    assert resolve_checkpoint("bleurt-20-d3") == "lucadiliello/BLEURT-20-D3"
    assert get_metric("bleurt", model="BLEURT-20-D6").column == "bleurt[model=BLEURT-20-D6]"
    assert set(ALIASES.values()) == {f"lucadiliello/BLEURT-20{s}" for s in ("", "-D12", "-D6", "-D3")}


def test_missing_checkpoint_names_it_and_where_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(ModelLoadError) as e:
        Bleurt("D6", device="cpu", use_cache=False).score(["a"], [["b"]])
    msg = str(e.value)
    assert "lucadiliello/BLEURT-20-D6" in msg and "huggingface.co/lucadiliello/BLEURT-20-D6" in msg
    with pytest.raises(ModelLoadError, match="no such folder"):
        Bleurt(str(tmp_path / "nope"), device="cpu", use_cache=False).score(["a"], [["b"]])


def test_not_a_bleurt_checkpoint(tiny_bert: str) -> None:
    with pytest.raises(ModelLoadError, match="not a BLEURT checkpoint"):
        Bleurt(tiny_bert, device="cpu", use_cache=False).score(["a"], [["b"]])


def test_cache_partial_hit_fills_only_the_missing_pairs(bleurt_dirs: dict[str, str], tmp_path: Path) -> None:
    folder = bleurt_dirs["bert"]
    cache = Cache(tmp_path / "c.sqlite")
    Bleurt(folder, device="cpu", cache=cache).score(CANDS[:2], [[r] for r in REFS[:2]])
    mixed = Bleurt(folder, device="cpu", cache=cache).score(CANDS[::-1], [[r] for r in REFS[::-1]])
    assert mixed.info["computed"] == 2 and mixed.info["cached"] == 2
    fresh = Bleurt(folder, device="cpu", use_cache=False).score(CANDS[::-1], [[r] for r in REFS[::-1]])
    np.testing.assert_allclose(mixed.values, fresh.values, atol=1e-6)
