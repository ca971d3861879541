"""semscore, pooled_similarity and bertscore against their reference implementations
(sentence-transformers, transformers, bert-score) with tiny local models and the real MiniLM."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalign.backends import models as M
from evalign.cache import Cache
from evalign.errors import EvalignError, ModelLoadError
from evalign.metrics import get_metric
from evalign.metrics.encoders import SentenceTransformerEncoder

RESPONSES = [
    "The cat sat on the mat.",
    "Hello there, how are you?",
    "the dog is red and the house is blue",
    "",
    "Please let me know about the rate of the project.",
    "why not",
]
REFERENCES = [
    ["A cat was sitting on a mat."],
    ["Hi!", "Hello there, how are you?"],
    ["the red dog"],
    ["something"],
    ["If you have questions about my rate, let me know.", "please tell me"],
    ["what is this, a book?"],
]
LONG = " ".join(["the cat sat on the mat and the dog is red"] * 40)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _st_direct(model_path: str, responses: list[str], references: list[list[str]]) -> np.ndarray:
    """The straightforward SemScore: SentenceTransformer.encode both sides, cosine, max over refs."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(model_path, device="cpu")
    out = []
    for h, refs in zip(responses, references, strict=True):
        e = st.encode([h, *refs])
        out.append(max(_cos(e[:1].repeat(len(refs), 0), e[1:])))
    return np.asarray(out)


# --- semscore -----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["tiny_st_bert", "tiny_st_mpnet"])
def test_semscore_equals_sentence_transformers_cosine(which: str, request: pytest.FixtureRequest,
                                                      tmp_path: Path) -> None:
    path = request.getfixturevalue(which)
    m = get_metric("semscore", model=path, cache=Cache(tmp_path / "c.sqlite"), device="cpu")
    res = m.score(RESPONSES, REFERENCES)
    expected = _st_direct(path, RESPONSES, REFERENCES)
    np.testing.assert_allclose(res.values, expected, atol=1e-5)
    assert np.all(res.values <= 1.0 + 1e-9) and np.all(res.values >= -1.0)
    # multi-reference: the best reference wins (item 1's second reference is the response itself)
    assert res.values[1] == pytest.approx(1.0, abs=1e-6)
    assert res.info["truncated"] == 0


def test_semscore_real_minilm(minilm: str, tmp_path: Path) -> None:
    m = get_metric("semscore", model=minilm, cache=Cache(tmp_path / "c.sqlite"), device="cpu")
    assert m.column == "semscore[model=all-MiniLM-L6-v2]"
    sig = str(m.signature())
    assert "model_id:" in sig and "sentence-transformers:" in sig
    res = m.score(RESPONSES[:3], REFERENCES[:3])
    np.testing.assert_allclose(res.values, _st_direct(minilm, RESPONSES[:3], REFERENCES[:3]), atol=1e-5)
    # a paraphrase is closer than an unrelated sentence
    para = m.score(["A cat is sitting on the mat."], [["The cat sat on the mat."]]).values[0]
    other = m.score(["Stock markets fell sharply today."], [["The cat sat on the mat."]]).values[0]
    assert para > 0.8 > 0.3 > other


def test_semscore_default_column_and_registry() -> None:
    m = get_metric("semscore")
    assert m.column == "semscore"
    assert m.options()["model"] == "sentence-transformers/all-mpnet-base-v2"
    assert type(m).uses_cache and m.higher_is_better


def test_semscore_cache_second_run_encodes_nothing(tiny_st_bert: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = SentenceTransformerEncoder.encode

    def spy(self: SentenceTransformerEncoder, texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", spy)
    cache = Cache(tmp_path / "c.sqlite")
    # the same references repeat across three "systems": each distinct text is encoded once
    responses = RESPONSES * 3
    references = REFERENCES * 3
    seen: list[tuple[int, int]] = []
    first = get_metric("semscore", model=tiny_st_bert, cache=cache, batch_size=4,
                       progress=lambda done, total: seen.append((done, total))).score(responses, references)
    distinct = set(RESPONSES) | {r for refs in REFERENCES for r in refs}
    assert sum(calls) == len(distinct) == first.info["encoded"]
    assert len(calls) == len(seen) == -(-len(distinct) // 4) and seen[-1] == (len(distinct), len(distinct))
    assert cache.count("embedding") == 2 * len(distinct)  # a vector and a token count per text

    calls.clear()
    second = get_metric("semscore", model=tiny_st_bert, cache=cache).score(responses, references)
    assert calls == [] and second.info["encoded"] == 0 and second.info["cached"] == len(distinct)
    np.testing.assert_array_equal(first.values, second.values)

    # a changed text misses (only that text is encoded)
    third = get_metric("semscore", model=tiny_st_bert, cache=cache).score(["A brand new answer."], [["the red dog"]])
    assert calls == [1] and third.info["encoded"] == 1

    # use_cache=False neither reads nor writes
    calls.clear()
    before = cache.count("embedding")
    get_metric("semscore", model=tiny_st_bert, cache=cache, use_cache=False).score(responses, references)
    assert sum(calls) == len(distinct) and cache.count("embedding") == before


def test_semscore_cache_misses_for_changed_model(tiny_st_bert: str, tiny_st_mpnet: str, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite")
    a = get_metric("semscore", model=tiny_st_bert, cache=cache).score(RESPONSES, REFERENCES)
    b = get_metric("semscore", model=tiny_st_mpnet, cache=cache).score(RESPONSES, REFERENCES)
    assert b.info["cached"] == 0 and b.info["encoded"] == a.info["encoded"]
    # the same model with other weights (same folder layout) has another identity
    copy = tmp_path / "st_copy"
    shutil.copytree(tiny_st_bert, copy)
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(copy), device="cpu")
    import torch

    with torch.no_grad():
        for p in st.parameters():
            p.mul_(1.5)
    st.save(str(copy))
    assert M.model_identity(str(copy)) != M.model_identity(tiny_st_bert)
    c = get_metric("semscore", model=str(copy), cache=cache).score(RESPONSES, REFERENCES)
    assert c.info["cached"] == 0
    # and other settings (max_seq_length, pooling) also miss
    d = get_metric("semscore", model=tiny_st_bert, cache=cache, max_seq_length=8).score(RESPONSES, REFERENCES)
    assert d.info["cached"] == 0


def test_semscore_truncation_is_counted_and_matches_model(tiny_st_bert: str, tmp_path: Path) -> None:
    m = get_metric("semscore", model=tiny_st_bert, cache=Cache(tmp_path / "c.sqlite"))
    responses = [LONG, "", "the cat"]
    references = [["the cat sat on the mat"], [""], [LONG + " and more"]]
    res = m.score(responses, references)
    assert res.info["truncated"] == 2 and res.info["max_tokens"] == 48
    np.testing.assert_allclose(res.values, _st_direct(tiny_st_bert, responses, references), atol=1e-5)
    # counted again from the cache on a warm run
    again = m.score(responses, references)
    assert again.info["encoded"] == 0 and again.info["truncated"] == 2


def test_semscore_items_without_reference_are_nan(tiny_st_bert: str, tmp_path: Path) -> None:
    m = get_metric("semscore", model=tiny_st_bert, cache=Cache(tmp_path / "c.sqlite"))
    res = m.score(["a cat", "a dog"], [[], ["the dog"]])
    assert np.isnan(res.values[0]) and np.isfinite(res.values[1])
    assert np.isnan(m.score(["x"], [[]]).values).all()


# --- pooled_similarity ---------------------------------------------------------------------------


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_pooled_similarity_equals_direct_automodel(pooling: str, tiny_mpnet: str, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    m = get_metric("pooled_similarity", model=tiny_mpnet, pooling=pooling, cache=Cache(tmp_path / "c.sqlite"))
    assert m.column == f"pooled_similarity[model=mpnet{',pooling=cls' if pooling == 'cls' else ''}]"
    res = m.score(RESPONSES, REFERENCES)
    tok = AutoTokenizer.from_pretrained(tiny_mpnet)
    model = AutoModel.from_pretrained(tiny_mpnet).eval()

    def vec(text: str) -> np.ndarray:
        enc = tok([text], return_tensors="pt", truncation=True, max_length=64)
        with torch.no_grad():
            h = model(**enc).last_hidden_state[0]
        return (h[0] if pooling == "cls" else h.mean(0)).numpy()

    expected = [max(_cos(vec(h)[None], vec(r)[None])[0] for r in refs) for h, refs in zip(RESPONSES, REFERENCES, strict=True)]
    np.testing.assert_allclose(res.values, expected, atol=1e-5)
    with pytest.raises(EvalignError, match="pooling"):
        get_metric("pooled_similarity", model=tiny_mpnet, pooling="max")


# --- bertscore ------------------------------------------------------------------------------------


def _bert_score(model: str, cands: list[str], refs: list, **kw: object) -> tuple[np.ndarray, ...]:
    import bert_score

    P, R, F = bert_score.score(cands, refs, model_type=model, nthreads=0, **kw)
    return P.numpy().astype(float), R.numpy().astype(float), F.numpy().astype(float)


NONEMPTY = [i for i, r in enumerate(RESPONSES) if r]  # bert-score 0.3.13 crashes on "" with transformers 5
CANDS = [RESPONSES[i] for i in NONEMPTY] + [LONG]
SINGLE = [REFERENCES[i][0] for i in NONEMPTY] + ["the cat sat on the mat"]


@pytest.mark.parametrize("model_fixture", ["tiny_bert", "tiny_mpnet", "tiny_bart"])  # WordPiece, MPNet, byte BPE
@pytest.mark.parametrize("idf", [False, True])
def test_bertscore_equals_bert_score(model_fixture: str, idf: bool, request: pytest.FixtureRequest) -> None:
    model = request.getfixturevalue(model_fixture)
    m = get_metric("bertscore", model=model, num_layers=2, idf=idf, batch_size=3)
    res = m.score(CANDS, [[r] for r in SINGLE])
    P, R, F = _bert_score(model, CANDS, SINGLE, num_layers=2, idf=idf, batch_size=3)
    np.testing.assert_allclose(res.values, F, atol=1e-6)
    np.testing.assert_allclose(res.extras["precision"], P, atol=1e-6)
    np.testing.assert_allclose(res.extras["recall"], R, atol=1e-6)
    assert res.info["truncated"] == 1  # LONG is longer than the tiny models' 64 tokens
    assert m.column == f"bertscore[model={Path(model).name},num_layers=2{',idf=yes' if idf else ''}]"


def test_bertscore_multi_reference_best_f(tiny_bert: str) -> None:
    cands = [RESPONSES[i] for i in NONEMPTY]
    refs = [REFERENCES[i] for i in NONEMPTY]
    res = get_metric("bertscore", model=tiny_bert, num_layers=3).score(cands, refs)
    _, _, F = _bert_score(tiny_bert, cands, refs, num_layers=3)
    np.testing.assert_allclose(res.values, F, atol=1e-6)  # bert-score: max F over references
    # P and R are those of the best-F reference
    for j, (c, rs) in enumerate(zip(cands, refs, strict=True)):
        p, r, f = _bert_score(tiny_bert, [c] * len(rs), rs, num_layers=3)
        k = int(np.argmax(f))
        assert res.extras["precision"][j] == pytest.approx(p[k], abs=1e-6)
        assert res.extras["recall"][j] == pytest.approx(r[k], abs=1e-6)


def test_bertscore_rescale_with_baseline_file(tiny_bert: str, tmp_path: Path) -> None:
    base = tmp_path / "baseline.tsv"
    rows = ["LAYER,P,R,F"] + [f"{k},{0.30 + 0.01 * k},{0.32 + 0.01 * k},{0.31 + 0.01 * k}" for k in range(4)]
    base.write_text("\n".join(rows) + "\n")
    m = get_metric("bertscore", model=tiny_bert, num_layers=2, rescale=True, baseline_path=str(base))
    assert m.column == "bertscore[model=bert,num_layers=2,rescale=yes]"
    res = m.score(CANDS, [[r] for r in SINGLE])
    P, R, F = _bert_score(tiny_bert, CANDS, SINGLE, num_layers=2, rescale_with_baseline=True, lang="en",
                          baseline_path=str(base))
    np.testing.assert_allclose(res.values, F, atol=1e-6)
    np.testing.assert_allclose(res.extras["precision"], P, atol=1e-6)
    np.testing.assert_allclose(res.extras["recall"], R, atol=1e-6)
    assert "baseline:" in str(m.signature())


def test_bertscore_missing_baseline_is_a_clear_error(tiny_bert: str, tmp_path: Path) -> None:
    with pytest.raises(EvalignError, match="baseline"):
        get_metric("bertscore", model=tiny_bert, num_layers=2, rescale=True)
    with pytest.raises(EvalignError, match=r"nope\.tsv"):
        get_metric("bertscore", model=tiny_bert, num_layers=2, rescale=True, baseline_path=str(tmp_path / "nope.tsv"))
    with pytest.raises(EvalignError, match="num_layers"):
        get_metric("bertscore", model=tiny_bert)


def test_bertscore_empty_texts_score_zero(tiny_bert: str) -> None:
    res = get_metric("bertscore", model=tiny_bert, num_layers=2).score(["", "the cat", "a"], [["the dog"], [""], []])
    assert res.values[0] == 0.0 and res.values[1] == 0.0 and np.isnan(res.values[2])
    assert res.extras["precision"][0] == 0.0 and res.extras["recall"][1] == 0.0


def test_bertscore_default_model_and_layer() -> None:
    m = get_metric("bertscore")
    assert m.options()["model"] == "microsoft/deberta-xlarge-mnli" and m.num_layers == 40
    assert m.column == "bertscore"


# --- loading, offline behaviour, helpers ---------------------------------------------------------


@pytest.mark.parametrize("metric", ["semscore", "pooled_similarity", "bertscore"])
@pytest.mark.parametrize("model", ["evalign-test/no-such-model", "/no/such/folder/model"])
def test_unknown_model_raises_model_load_error(metric: str, model: str, tmp_path: Path) -> None:
    opts: dict[str, object] = {"num_layers": 2} if metric == "bertscore" else {"cache": Cache(tmp_path / "c.sqlite")}
    with pytest.raises(ModelLoadError) as info:
        get_metric(metric, model=model, **opts).score(["a"], [["b"]])
    msg = str(info.value)
    assert f"'{model}'" in msg and "model=/path" in msg and "HF_HUB_OFFLINE" in msg and "HF_HOME" in msg
    assert "\n" not in msg


def test_bundled_minilm_path(minilm: str) -> None:
    assert Path(minilm, "config.json").is_file()
    assert M.model_label(minilm) == "all-MiniLM-L6-v2"
    assert M.model_label("sentence-transformers/all-mpnet-base-v2") == "all-mpnet-base-v2"


def test_length_batches_respects_limits() -> None:
    lengths = [5, 50, 7, 50, 3, 20]
    batches = M.length_batches(lengths, batch_size=2, token_budget=1000)
    assert batches == [[1, 3], [5, 2], [0, 4]]
    tight = M.length_batches(lengths, batch_size=10, token_budget=60)
    assert sorted(i for b in tight for i in b) == list(range(6))
    assert all(max(lengths[i] for i in b) * len(b) <= 60 or len(b) == 1 for b in tight)
    with pytest.raises(EvalignError):
        M.length_batches(lengths, batch_size=0, token_budget=10)


def test_importing_metric_modules_does_not_import_torch() -> None:
    code = (
        "import sys, evalign.metrics.embedding, evalign.metrics.learned, evalign.backends.models;"
        "from evalign.metrics import list_metrics; list_metrics();"
        "bad=[m for m in ('torch','transformers','sentence_transformers','bert_score') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
