"""A judge whose model version changes is said to have changed: during one run, and on a run resumed
from the cache. The real llama.cpp server (tiny random model) sits behind the fault proxy, which
stamps each answer with a ``model`` and ``system_fingerprint`` as a hosted API does; the token counts
of the table are the server's own ``usage``; the API key is stored nowhere."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fault_proxy import Rewrite, Seen
from typer.testing import CliRunner

from evalign.cli import app

pytestmark = pytest.mark.server

SECRET = "sk-test-DRIFT-5e1c77"


def write_items(path: Path, n: int) -> Path:
    conv = [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another one?"}]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "system": "s",
                                 "messages": [*conv, {"role": "assistant", "content": "Red " * (i + 1)}]}) + "\n")
    return path


class Stamp:
    """The proxy's rewrite: every answer says it came from ``model`` with fingerprint ``fp`` (set
    ``fp_after`` to change it from the ``switch``-th request on); the server's usage is recorded."""

    def __init__(self, fp: str, fp_after: str | None = None, switch: int = 0) -> None:
        self.fp, self.fp_after, self.switch = fp, fp_after, switch
        self.usage: list[dict[str, int]] = []

    def __call__(self, seen: Seen) -> Rewrite:
        def fn(resp: dict[str, Any]) -> dict[str, Any]:
            self.usage.append(dict(resp["usage"]))
            fp = self.fp_after if self.fp_after is not None and seen.index >= self.switch else self.fp
            return {**resp, "model": "tiny-judge-2025-01", "system_fingerprint": fp}

        return Rewrite(fn)


def judge(src: Path, out: Path, proxy_url: str, model: str, *extra: str) -> Any:
    args = ["judge", str(src), "--mode", "mtbench_single", "--base-url", proxy_url, "--model", model,
            "--api-key-env", "EVALIGN_DRIFT_KEY", "--max-tokens", "8", "--concurrency", "1", "--price", "1/2",
            "-o", str(out), *extra]
    return CliRunner().invoke(app, args)


def test_fingerprint_change_mid_run_and_on_resume(llama_server: Any, fault_proxy: Any, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALIGN_DRIFT_KEY", SECRET)
    src = write_items(tmp_path / "items.jsonl", 4)
    stamp = Stamp("fp_one")
    fault_proxy.reset(stamp)
    res = judge(src, tmp_path / "a.jsonl", fault_proxy.base_url, llama_server.model, "--limit", "2")
    assert res.exit_code == 0, res.output
    first = json.loads((tmp_path / "a.jsonl.summary.json").read_text())
    assert first["drift"] is None and "model versions" not in res.output
    assert first["models"] == [{"model": "tiny-judge-2025-01", "system_fingerprint": "fp_one", "calls": 2}]
    # token counts are the server's own usage, call by call
    table = pd.read_json(tmp_path / "a.jsonl", lines=True)
    assert table["mtbench_single.prompt_tokens"].tolist() == [u["prompt_tokens"] for u in stamp.usage]
    assert table["mtbench_single.completion_tokens"].tolist() == [u["completion_tokens"] for u in stamp.usage]
    assert first["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in stamp.usage) > 0
    assert first["usage"]["cost"] == pytest.approx((first["usage"]["prompt_tokens"] * 1
                                                    + first["usage"]["completion_tokens"] * 2) / 1e6)

    # the hosted model changed: the resumed run reads 2 answers from the cache and gets 2 new ones
    fault_proxy.reset(Stamp("fp_two"))
    res = judge(src, tmp_path / "b.jsonl", fault_proxy.base_url, llama_server.model)
    assert res.exit_code == 0, res.output
    warning = [ln for ln in res.output.splitlines() if "model versions" in ln]
    assert len(warning) == 1 and warning[0].startswith("warning: the judge's answers come from 2 model versions")
    second = json.loads((tmp_path / "b.jsonl.summary.json").read_text())
    assert {(v["system_fingerprint"], v["calls"]) for v in second["models"]} == {("fp_one", 2), ("fp_two", 2)}
    assert second["calls"]["cached"] == 2 and second["calls"]["new"] == 2 and second["drift"]
    table = pd.read_json(tmp_path / "b.jsonl", lines=True)
    assert table["mtbench_single.fingerprint"].tolist() == ["fp_one", "fp_one", "fp_two", "fp_two"]
    assert table["mtbench_single.model"].tolist() == ["tiny-judge-2025-01"] * 4

    # during one run (no cache): the fingerprint changes after the first answer
    fault_proxy.reset(Stamp("fp_a", "fp_b", switch=1))
    res = judge(src, tmp_path / "c.jsonl", fault_proxy.base_url, llama_server.model, "--no-cache")
    assert res.exit_code == 0, res.output
    third = json.loads((tmp_path / "c.jsonl.summary.json").read_text())
    assert [(v["system_fingerprint"], v["calls"]) for v in third["models"]] == [("fp_b", 3), ("fp_a", 1)]
    assert "warning: the judge's answers come from 2 model versions" in res.output

    # the key was sent, and is kept nowhere
    assert all(s.authorized and SECRET in s.authorized for s in fault_proxy.seen)
    cache = Path(os.environ["EVALIGN_CACHE"])
    for f in [*tmp_path.iterdir(), *cache.parent.iterdir()]:
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f
