"""Trust or Escalate's released calibration files as the catalogue set ``trust-or-escalate``: the
human labels, each judge's verdict (the arg max of upstream's ``probs``) and its confidence
(``max(probs)``) beside it, read from the data folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from evalign.datasets import CATALOGUE, load_dataset_spec
from evalign.datasets.trust_or_escalate import JUDGES, load_trust_or_escalate
from evalign.errors import EvalignError, InputError


def test_pairs_verdicts_and_confidences_equal_the_files(shared_data: Path) -> None:
    ds = load_trust_or_escalate(data_dir=shared_data)
    p = ds.pairs
    assert p is not None and len(p) == 500 and ds.pref_columns == ["pref_1"]
    assert ds.judge_columns == [f"judge:{j}" for j in JUDGES]
    for j in JUDGES:
        rows = [json.loads(line) for line in (shared_data / "selective" / f"{j}.calibration.jsonl").open()]
        probs = np.array([r["probs"] for r in rows])
        assert p["instruction"].tolist() == [r["instruction"] for r in rows]
        assert p["response_b"].tolist() == [r["outputs"][1] for r in rows]
        assert p["pref_1"].tolist() == [1.0 if r["preferences"]["human"] == 1 else -1.0 for r in rows]
        assert p[f"judge:{j}"].tolist() == ["A" if a > b else "B" for a, b in probs]
        np.testing.assert_array_equal(p[f"judge:{j}.confidence"].to_numpy(), probs.max(axis=1))
        assert p[f"judge:{j}.confidence_source"].str.startswith("simulated annotators").all()
    assert (p["pref_1"] == 1).sum() == 241  # 241 A, 259 B, no ties
    acc = {j: float(np.mean((p[f"judge:{j}"] == "A") == (p["pref_1"] == 1))) for j in JUDGES}
    assert acc == {"mistral-7b-instruct": 0.75, "gpt-3.5-turbo": 0.756, "gpt-4-turbo": 0.784}


def test_catalogue_entry_and_missing_files(tmp_path: Path, shared_data: Path) -> None:
    e = CATALOGUE["trust-or-escalate"]
    assert e.licence.startswith("none: read from the data folder") and not e.ships and e.folder == "selective"
    assert "2407.18370" in e.citation
    assert load_dataset_spec("trust-or-escalate", data_dir=shared_data).pairs is not None
    with pytest.raises(EvalignError, match="dataset files not found"):
        load_trust_or_escalate(data_dir=tmp_path)


def test_a_pair_missing_from_a_file_is_named(tmp_path: Path, shared_data: Path) -> None:
    folder = tmp_path / "selective"
    folder.mkdir()
    for j in JUDGES:
        shutil.copy(shared_data / "selective" / f"{j}.calibration.jsonl", folder)
    path = folder / "gpt-4-turbo.calibration.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[2])
    row["probs"] = [1.5, 0.1]
    lines[2] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"gpt-4-turbo.calibration.jsonl, line 3, field 'probs'"):
        load_trust_or_escalate(data_dir=tmp_path)
