"""The package stays light to import, and the public names resolve."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "sentence_transformers", "bert_score", "httpx", "matplotlib", "sacrebleu")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return [m for m in json.loads(out.strip().splitlines()[-1]) if m in HEAVY]


def test_import_evalign_is_light() -> None:
    assert _loaded_after("import evalign") == []


def test_listing_metrics_and_judges_imports_no_model_library() -> None:
    assert _loaded_after("import evalign\nevalign.list_metrics()\nimport evalign.judges\nimport evalign.meta") == []


def test_lazy_public_names() -> None:
    import evalign

    assert evalign.parse_grade("Feedback: fine. [RESULT] 4").value == 4.0
    assert callable(evalign.correlation) and callable(evalign.load_dataset)
    for name in evalign.__all__:
        assert getattr(evalign, name) is not None
