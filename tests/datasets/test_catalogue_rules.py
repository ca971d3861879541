"""What every catalogue entry declares (annotator kind, texts), the refusals of sets without texts,
the licence rule (nothing of a set without a licence inside the package), and that ``evalign meta
--dataset NAME`` with no ``-m`` ranks every shipped judge or metric column."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evalign.cli import app
from evalign.cli.meta import meta_spec
from evalign.datasets import ANNOTATOR_KINDS, CATALOGUE, annotator_kind, load_dataset_spec, require_texts
from evalign.datasets.base import bundled_path
from evalign.errors import EvalignError
from evalign.evaluate import Resampling
from evalign.evaluate.inputs import InputSettings

runner = CliRunner()
NO_TEXTS = {"summeval", "10k-prompts", "hanna"}
#: datasets read from the data folder because their repository has no licence file
NO_LICENCE = ("alttest", "judgebench", "selective")


def test_every_entry_declares_annotators_and_texts() -> None:
    for name, e in CATALOGUE.items():
        assert e.annotator_kind is None or e.annotator_kind in ANNOTATOR_KINDS, name
        assert e.annotator_basis, name
    assert {n for n, e in CATALOGUE.items() if not e.has_texts} == NO_TEXTS
    kinds = {n: annotator_kind(n) for n in CATALOGUE}
    assert kinds["alttest-mtbench"] == kinds["summeval"] == "experts" and kinds["10k-prompts"] == "skilled"
    assert kinds["hanna"] == "crowd" and kinds["judgebench"] is None and kinds["prometheus_vicuna"] is None
    assert annotator_kind("qags:xsum") == "crowd"
    with pytest.raises(ValueError, match="annotator_kind"):
        type(CATALOGUE["hanna"])("x", ("items",), "", "", True, annotator_kind="students")


@pytest.mark.parametrize("name", sorted(NO_TEXTS))
def test_sets_without_texts_are_refused_by_judge_and_score(name: str, tmp_path: Path) -> None:
    with pytest.raises(EvalignError, match=f"dataset '{name}' has no texts"):
        require_texts(name)
    judge = runner.invoke(app, ["judge", "--dataset", name, "--mode", "absolute", "--backend", "openai", "--model",
                                "m", "--base-url", "http://127.0.0.1:9/v1"])
    score = runner.invoke(app, ["score", "--dataset", name, "-m", "bleu"])
    for res in (judge, score):
        assert res.exit_code == 1
        assert res.output.strip().splitlines() == [
            f"error: dataset '{name}' has no texts (no instructions or responses: only its labels and shipped judge and "
            f"metric columns), so nothing can judge or score it; rank its shipped columns with `evalign meta "
            f"--dataset {name}`"]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"version: 1\nname: t\nevaluations:\n  - name: x\n    data: {{dataset: {name}}}\n"
                   "    metrics: [bleu]\n", encoding="utf-8")
    res = runner.invoke(app, ["run", str(cfg), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and f"evaluation 'x': dataset '{name}' has no texts" in res.output
    require_texts("topical-chat")  # a set with texts passes


def _digests(path: Path) -> set[str]:
    data = path.read_bytes()
    out = {hashlib.sha256(data).hexdigest()}
    if path.suffix == ".gz":
        out.add(hashlib.sha256(gzip.decompress(data)).hexdigest())
    return out


def test_nothing_of_a_set_without_a_licence_is_in_the_package(shared_data: Path) -> None:
    package = bundled_path()
    shipped = set().union(*(_digests(p) for p in package.rglob("*") if p.is_file()))
    names = {p.name.removesuffix(".gz") for p in package.rglob("*") if p.is_file()}
    upstream = [p for s in NO_LICENCE for p in (shared_data / s).rglob("*") if p.is_file() and p.name != "SOURCE.md"]
    assert len(upstream) > 20
    for p in upstream:
        assert not (_digests(p) & shipped), p
        assert p.name not in names or p.name in ("LICENSE", "README.md"), p
    assert not any(part in NO_LICENCE for p in package.rglob("*") for part in p.relative_to(package).parts)


SHIPPED = ["alttest-mtbench", "summeval", "10k-prompts", "hanna", "judgebench", "judgebench:claude", "topical-chat",
           "qags", "sf-data2text", "pandalm", "llmbar", "trust-or-escalate"]


def _spec(name: str, labels: str | None) -> object:
    return meta_spec(InputSettings(dataset=name, label_set=labels), [], [], [], True, level=None, grouping=None,
                     by=None, min_group_size=None, resampling=Resampling(n_resamples=10, n_permutations=10),
                     baselines=True)


@pytest.mark.parametrize("name", SHIPPED)
def test_meta_with_no_metric_ranks_every_shipped_column(name: str) -> None:
    ds = load_dataset_spec(name)
    entry = CATALOGUE[name.split(":")[0]]
    ranked: list[str] = []
    for label, ls in entry.label_sets.items():
        spec = _spec(name, label)
        cols = [c.name for c in spec.columns]  # type: ignore[attr-defined]
        assert cols == ds.columns_for(ls.column), (name, label)
        ranked += cols
        lower = {c.name for c in spec.columns if not c.higher_is_better}  # type: ignore[attr-defined]
        assert lower == set(ds.lower_is_better) & set(cols)
        assert spec.grouping == ds.grouping and tuple(spec.statistics) == ds.statistics  # type: ignore[attr-defined]
    assert set(ranked) == set(ds.judge_columns) and ds.judge_columns


def test_meta_cli_on_a_set_without_texts_and_with_its_own_statistic() -> None:
    res = runner.invoke(app, ["meta", "--dataset", "summeval", "--labels", "fluency", "--level", "system",
                              "--bootstrap", "20", "--permutations", "20", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    t = out["trust"][0]
    assert (t["statistic"], t["level"], out["n_systems"]) == ("kendall", "system", 16)
    assert {r["metric"] for r in t["rows"] if r["kind"] == "judge"} == {f"judge:{m}/fluency" for m in (
        "gemini_flash", "gemini_pro", "gpt-4o", "llama-31", "gpt-4o-mini", "mistral-v03")}
    res = runner.invoke(app, ["meta", "--dataset", "10k-prompts", "--bootstrap", "20", "--permutations", "20",
                              "--json"])
    t = json.loads(res.stdout)["trust"][0]
    assert (t["statistic"], t["grouping"]) == ("kendall", "none")
    res = runner.invoke(app, ["meta", "--dataset", "judgebench", "--bootstrap", "20", "--permutations", "20"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "judgebench_accuracy" in res.output and "note: judgebench_accuracy: JudgeBench's own accuracy" in res.output
