"""`evalign judge --panel-member`: a live panel against a counting fake OpenAI-compatible server. Members
called in order, each only where the verdict is still open (majority of three: the third only where the first
two disagree), --panel-all calls everyone, the verdicts and confidences exact, calls made / saved, the cache
(a second run makes no call), a failing member never fails the panel, and the usage errors."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalign.cli import app

N = 6
#: each member's verdict on item i: m1 always A, m2 A on even items and B on odd ones, m3 always B;
#: "down" answers 500 on every call (a failing member)
ANSWERS = {"m1": lambda i: "A", "m2": lambda i: "A" if i % 2 == 0 else "B", "m3": lambda i: "B"}


class _Counting(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint answering ``[RESULT] A|B`` by model and item; counts calls per model."""

    calls: ClassVar[Counter[tuple[str, int]]] = Counter()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body["model"]
        text = " ".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
        item = int(re.search(r"alpha-(\d+)", text).group(1))  # type: ignore[union-attr]
        type(self).calls[(model, item)] += 1
        if model == "down":
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        verdict = ANSWERS[model](item)
        out = json.dumps({"id": "x", "object": "chat.completion", "model": model,
                          "choices": [{"index": 0, "message": {"role": "assistant",
                                                               "content": f"Feedback: fine. [RESULT] {verdict}"},
                                       "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 100, "completion_tokens": 10}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Counting.calls.clear()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    finally:
        srv.shutdown()


@pytest.fixture
def pairs(tmp_path: Path) -> Path:
    f = tmp_path / "pairs.jsonl"
    pd.DataFrame({"id": [str(i) for i in range(N)], "instruction": [f"question {i}" for i in range(N)],
                  "response_a": [f"alpha-{i}" for i in range(N)], "response_b": [f"beta-{i}" for i in range(N)],
                  "system_a": ["x"] * N, "system_b": ["y"] * N}).to_json(f, orient="records", lines=True)
    return f


def _run(pairs: Path, url: str, out: Path, *extra: str, members: tuple[str, ...] = ("m1", "m2", "m3")) -> dict:
    args = ["judge", str(pairs), "--mode", "pairwise", "--single-order", "-o", str(out), "--json"]
    for m in members:
        args += ["--panel-member", f"{m}=openai:{m}@{url},concurrency=2,max_retries=0,price=1/2"]
    res = CliRunner().invoke(app, [*args, *extra])
    assert res.exit_code == 0, res.output
    return json.loads(Path(f"{out}.summary.json").read_text(encoding="utf-8"))


def test_early_stopping_calls_the_third_member_only_where_the_first_two_disagree(pairs: Path, server: str,
                                                                                  tmp_path: Path) -> None:
    out = tmp_path / "panel.jsonl"
    s = _run(pairs, server, out)
    calls = _Counting.calls
    assert {i for (m, i) in calls if m == "m1"} == set(range(N)) == {i for (m, i) in calls if m == "m2"}
    assert sorted(i for (m, i) in calls if m == "m3") == [1, 3, 5]  # only where m1 and m2 disagree
    assert sum(calls.values()) == 2 * N + N // 2
    by = {r["member"]: r for r in s["members"]}
    assert (by["m1"]["calls"], by["m2"]["calls"], by["m3"]["calls"]) == (N, N, N // 2)
    assert by["m3"]["not_called"] == N // 2 and by["m3"]["calls_saved"] == N // 2 and s["calls_saved"] == N // 2
    assert s["calls"] == 2 * N + N // 2
    # price 1 per million input tokens, 2 per million output: per call 100 * 1e-6 + 10 * 2e-6 = 1.2e-4
    assert by["m3"]["cost"] == pytest.approx(3 * 1.2e-4) and s["cost"] == pytest.approx(15 * 1.2e-4)
    t = pd.read_json(out, lines=True, dtype=False)
    assert t["panel"].tolist() == ["A", "B"] * (N // 2)
    # even items: A, A (2 of 2); odd: A, B, B (2 of 3)
    assert t["panel.confidence"].tolist() == pytest.approx([1.0, 2 / 3] * (N // 2), abs=1e-15)
    assert set(t["panel.confidence_source"]) == {"votes"}
    assert t["m3.status"].tolist() == ["skipped", "scored"] * (N // 2)
    assert t["m3.reason"][0] == "not called" and pd.isna(t["m3"][0]) and t["m3"][1] == "B"
    # the cache: the same run again makes no call, and gives the same table
    _Counting.calls.clear()
    again = _run(pairs, server, tmp_path / "again.jsonl")
    assert sum(_Counting.calls.values()) == 0 and again["calls"] == 0 and again["cached"] == 2 * N + N // 2
    assert pd.read_json(tmp_path / "again.jsonl", lines=True, dtype=False)["panel"].tolist() == t["panel"].tolist()


def test_panel_all_calls_every_member(pairs: Path, server: str, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"
    s = _run(pairs, server, out, "--panel-all", "--no-cache")
    assert sum(_Counting.calls.values()) == 3 * N and s["calls_saved"] == 0 and not s["early_stopping"]
    t = pd.read_json(out, lines=True, dtype=False)
    assert t["panel"].tolist() == ["A", "B"] * (N // 2)
    assert t["panel.confidence"].tolist() == pytest.approx([2 / 3] * N, abs=1e-15)


def test_a_failing_member_never_fails_the_panel_and_min_members(pairs: Path, server: str, tmp_path: Path) -> None:
    out = tmp_path / "down.jsonl"
    s = _run(pairs, server, out, "--panel-min", "2", "--max-failed", "1", members=("m1", "down", "m3"))
    t = pd.read_json(out, lines=True, dtype=False)
    # m1 A, down none: open everywhere -> m3 (B) called on every item: A vs B, 2 votes, no plurality -> tie
    assert sorted(i for (m, i) in _Counting.calls if m == "m3") == list(range(N))
    assert t["panel"].tolist() == ["tie"] * N and s["no_plurality"] == N
    assert {r["member"]: r["failed"] for r in s["members"]}["down"] == N
    s3 = _run(pairs, server, tmp_path / "d3.jsonl", "--panel-min", "3", "--max-failed", "1",
              members=("m1", "down", "m3"))
    assert s3["below_min"] == N and s3["distribution"]["unparseable"] == N


def test_live_panel_usage_errors(pairs: Path, server: str, tmp_path: Path) -> None:
    r = CliRunner()
    for args, msg in (
        (["--panel-member", f"a=openai:m1@{server}"], "at least two members"),
        (["--panel-member", "a=m1", "--panel-member", "b=m2"], "--panel-member takes NAME=KIND:MODEL"),
        (["--panel-member", f"a=openai:m1@{server},color=red", "--panel-member", f"b=openai:m2@{server}"],
         "unknown option 'color'"),
        (["--panel-all"], "--panel-all goes with --panel-member"),
        (["--panel-member", f"a=openai:m1@{server}", "--panel-member", f"b=openai:m2@{server}", "--model", "x"],
         "--model do not apply"),
        (["--panel-member", f"a=openai:m1@{server}", "--panel-member", f"b=openai:m2@{server}", "--panel-rule",
          "mean"], "averages grades"),
        (["--panel-member", f"a=openai:m1@{server}", "--panel-member", f"b=openai:m2@{server}", "--panel-rule",
          "weighted"], "--panel-calibration FILE"),
    ):
        res = r.invoke(app, ["judge", str(pairs), "--mode", "pairwise", *args])
        assert res.exit_code in (1, 2), res.output
        assert msg in " ".join(res.output.split()) and res.output.count("error:") == 1
    assert not _Counting.calls


def test_live_panel_output_is_calibrated_by_meta_selective_and_escalated(server: str, tmp_path: Path) -> None:
    """The live panel's vote confidence goes through `meta --selective` and `escalate` like any judge's: with
    people preferring A everywhere, the unanimous (even) items are right and the 2-1 (odd) ones wrong, so the
    threshold keeps exactly the unanimous verdicts."""
    n = 80
    f = tmp_path / "pairs.jsonl"
    pd.DataFrame({"id": [str(i) for i in range(n)], "instruction": ["q"] * n,
                  "response_a": [f"alpha-{i}" for i in range(n)], "response_b": [f"beta-{i}" for i in range(n)],
                  "system_a": ["x"] * n, "system_b": ["y"] * n, "pref_1": [1] * n}).to_json(f, orient="records",
                                                                                            lines=True)
    out = tmp_path / "panel.jsonl"
    _run(f, server, out)
    cal = tmp_path / "cal.json"
    res = CliRunner().invoke(app, ["meta", str(out), "--pref", "pref_1", "-m", "panel", "--selective", "--risk",
                                   "0.15", "--save-calibration", str(cal), "--json"])
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["selective"]["rows"]
    assert row["judge"] == "panel" and row["coverage"] == 0.5 and row["selective_accuracy"] == 1.0
    assert 2 / 3 < row["threshold"] <= 1.0
    decided, rest = tmp_path / "decided.jsonl", tmp_path / "rest.jsonl"
    res = CliRunner().invoke(app, ["escalate", str(cal), str(out), "-o", str(decided), "--rest", str(rest)])
    assert res.exit_code == 0, res.output
    d = pd.read_json(decided, lines=True, dtype=False)
    assert sorted(d["id"].astype(int)) == list(range(0, n, 2))
    assert len(pd.read_json(rest, lines=True, dtype=False)) == n // 2


def test_early_stopping_calls_replays_the_live_calling_order() -> None:
    import numpy as np

    from evalign.evaluate.live_panel import early_stopping_calls
    from evalign.rank.panel import PanelSettings

    # the counting server's answers: m3 is called only on the odd items (test above)
    full = np.array([[{"A": 1.0, "B": -1.0}[ANSWERS[m](i)] for m in ("m1", "m2", "m3")] for i in range(N)])
    called = early_stopping_calls(full, PanelSettings(rule="majority"), ["m1", "m2", "m3"])
    assert called[:, :2].all() and np.flatnonzero(called[:, 2]).tolist() == [1, 3, 5]
    # a failed first member (NaN) or a tie vote leaves the item open for everyone after it
    v = np.array([[1, 1, -1], [np.nan, 1, 1], [0, 1, 1]], dtype=float)
    assert early_stopping_calls(v, PanelSettings(rule="majority"), ["a", "b", "c"]).astype(int).tolist() == \
        [[1, 1, 0], [1, 1, 1], [1, 1, 1]]
    # weighted: a's weight 2 outweighs b and c together (0.5 + 0.5): once a has voted nobody else is called
    w = PanelSettings(rule="weighted", weights={"a": 2.0, "b": 0.5, "c": 0.5})
    assert early_stopping_calls(v[[0, 2]], w, ["a", "b", "c"]).astype(int).tolist() == [[1, 0, 0], [1, 0, 0]]
    # --panel-min 3: no item closes before all three voted
    m3 = PanelSettings(rule="majority", min_members=3)
    assert early_stopping_calls(v, m3, ["a", "b", "c"]).all()
