"""A live panel (``judge --panel-member ...``) with ``--batch-api`` against the fake OpenAI Batch API: one wave
per member, each one batch submission over the items still open (majority of three: the third member's batch
holds only the items the first two disagreed on); the verdicts and confidences equal the synchronous live
panel's; a rerun re-attaches / reads the cache and submits nothing; a member without a batch API is refused
before any call."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fake_batch_api import FakeOpenAI
from typer.testing import CliRunner

from evalign.cli import app

N = 8
#: each member's verdict on item i: m1 always A, m2 A on items divisible by 3 and B otherwise, m3 always B
ANSWERS = {"m1": lambda i: "A", "m2": lambda i: "A" if i % 3 == 0 else "B", "m3": lambda i: "B"}


def answer(body: dict[str, Any]) -> str:
    text = " ".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
    item = int(re.search(r"alpha-(\d+)", text).group(1))  # type: ignore[union-attr]
    return f"Feedback: fine. [RESULT] {ANSWERS[body['model']](item)}"


def item_of(line: dict[str, Any]) -> int:
    text = " ".join(m["content"] for m in line["body"]["messages"] if isinstance(m.get("content"), str))
    return int(re.search(r"alpha-(\d+)", text).group(1))  # type: ignore[union-attr]


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    f = tmp_path / "pairs.jsonl"
    pd.DataFrame({"id": [str(i) for i in range(N)], "instruction": [f"question {i}" for i in range(N)],
                  "response_a": [f"alpha-{i}" for i in range(N)], "response_b": [f"beta-{i}" for i in range(N)],
                  "system_a": ["x"] * N, "system_b": ["y"] * N}).to_json(f, orient="records", lines=True)
    return f


def panel(pairs: Path, url: str, out: Path, *extra: str, members: tuple[str, ...] = ("m1", "m2", "m3")) -> list[str]:
    args = ["judge", str(pairs), "--mode", "pairwise", "--single-order", "--constrain", "off", "-o", str(out),
            "--json"]
    for m in members:
        args += ["--panel-member", f"{m}=openai:{m}@{url},api_key_env=FAKE_BATCH_KEY,max_retries=0,price=1/2"]
    return [*args, *extra]


def invoke(args: list[str], cache: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("EVALIGN_CACHE", str(cache))
    monkeypatch.setenv("FAKE_BATCH_KEY", "sk-fake-batch-0001")
    return CliRunner().invoke(app, args)


def test_batch_panel_one_submission_per_member_over_the_open_items(pairs: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    disagree = [i for i in range(N) if ANSWERS["m1"](i) != ANSWERS["m2"](i)]
    assert disagree == [1, 2, 4, 5, 7]
    with FakeOpenAI(answer=answer) as fake:
        res = invoke(panel(pairs, fake.base_url, tmp_path / "batched.jsonl", "--batch-api", "--batch-poll", "0.01"),
                     tmp_path / "batch-cache.sqlite", monkeypatch)
        assert res.exit_code == 0, res.output
        assert fake.sync_calls == 0
        batches = list(fake.batches)
        models = [{x["body"]["model"] for x in fake.inputs[b]} for b in batches]
        items = [sorted(item_of(x) for x in fake.inputs[b]) for b in batches]
        assert models == [{"m1"}, {"m2"}, {"m3"}]  # one submission per member, in calling order
        assert items == [list(range(N)), list(range(N)), disagree]  # the third: only where m1 and m2 disagree
        assert max(fake.submitted.values()) == 1
        s = json.loads(Path(f"{tmp_path / 'batched.jsonl'}.summary.json").read_text(encoding="utf-8"))
        by = {r["member"]: r for r in s["members"]}
        assert [by[m]["batch"]["lines"] for m in ("m1", "m2", "m3")] == [N, N, len(disagree)]
        assert [by[m]["batch"]["batches"] for m in ("m1", "m2", "m3")] == [1, 1, 1]
        assert s["batch"] == {"batches": 3, "lines": 2 * N + len(disagree), "failed_lines": 0, "retried_lines": 0}
        assert (by["m3"]["calls"], by["m3"]["not_called"], s["calls_saved"]) == (len(disagree), N - len(disagree),
                                                                                  N - len(disagree))

        # the same panel without --batch-api (its own cache): the same verdicts and confidences
        sync = invoke(panel(pairs, fake.base_url, tmp_path / "sync.jsonl"), tmp_path / "sync-cache.sqlite",
                      monkeypatch)
        assert sync.exit_code == 0, sync.output
        assert fake.sync_calls == 2 * N + len(disagree) and len(fake.batches) == 3

        # run again with --batch-api: everything from the cache, nothing submitted
        again = invoke(panel(pairs, fake.base_url, tmp_path / "again.jsonl", "--batch-api", "--batch-poll", "0.01"),
                       tmp_path / "batch-cache.sqlite", monkeypatch)
        assert again.exit_code == 0, again.output
        assert len(fake.batches) == 3 and max(fake.submitted.values()) == 1
    t = pd.read_json(tmp_path / "batched.jsonl", lines=True, dtype=False)
    u = pd.read_json(tmp_path / "sync.jsonl", lines=True, dtype=False)
    expected = ["A" if i not in disagree else "B" for i in range(N)]
    assert t["panel"].tolist() == u["panel"].tolist() == expected
    assert t["panel.confidence"].tolist() == u["panel.confidence"].tolist() == pytest.approx(
        [1.0 if i not in disagree else 2 / 3 for i in range(N)], abs=1e-15)
    for m in ("m1", "m2", "m3"):
        assert t[m].tolist() == u[m].tolist() and t[f"{m}.status"].tolist() == u[f"{m}.status"].tolist()
    assert pd.read_json(tmp_path / "again.jsonl", lines=True, dtype=False)["panel"].tolist() == expected


def test_batch_panel_refuses_a_member_without_a_batch_api(pairs: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["judge", str(pairs), "--mode", "pairwise", "--batch-api", "-o", str(tmp_path / "x.jsonl"),
            "--panel-member", "m1=openai:m1@http://127.0.0.1:9/v1",
            "--panel-member", "m2=openai:m2@http://127.0.0.1:9/v1@http://127.0.0.1:10/v1"]
    res = invoke(args, tmp_path / "c.sqlite", monkeypatch)
    assert res.exit_code == 2
    assert "error: --batch-api: --panel-member m2 is on several URLs, which has no batch API" in res.output
    assert not (tmp_path / "x.jsonl").exists()
