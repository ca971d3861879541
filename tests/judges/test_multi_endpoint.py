"""Several ``--base-url`` endpoints in one judge run (:class:`MultiEndpointBackend`).

Scheduling rules with in-process fake endpoints (limits, failover, taken out and put back, no
healthy endpoint), the CLI's option checks, and a real run over two llama.cpp servers, one of them
killed mid-run: every item is graded exactly once and the killed endpoint is taken out.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fault_proxy import FaultProxy, Forward, Status
from llama_server import LlamaServer, free_port

from evalign.backends import (
    Backend,
    BackendRequestError,
    Choice,
    Generation,
    GenerationRequest,
    MultiEndpointBackend,
    OpenAICompatibleBackend,
    Usage,
    make_backend,
)
from evalign.backends.multi import http_probe
from evalign.cache import Cache
from evalign.judges.runner import NAMESPACE

ABS_GRAMMAR = 'root ::= "Feedback: " [a-z ]{5,40} " [RESULT] " [1-5]'


class Fake(Backend):
    """An endpoint in the event loop: answers after ``delay`` s, or fails with ``status`` while ``down``."""

    kind = "fake"

    def __init__(self, name: str, concurrency: int = 1, delay: float = 0.01, model: str = "m") -> None:
        super().__init__()
        self.base_url, self.concurrency, self.delay, self.model = name, concurrency, delay, model
        self.down = False
        self.status: int | None = None
        self.inflight = self.max_inflight = self.served = self.attempts = 0
        self.probes: list[float] = []  # when health checks came

    def identity(self) -> dict[str, Any]:
        return {"kind": "fake", "model": self.model, "base_url": self.base_url}

    async def generate(self, req: GenerationRequest) -> Generation:
        self.attempts += 1
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            await asyncio.sleep(self.delay)
            if self.down:
                raise BackendRequestError(f"{self.base_url}: broken", status=self.status, fatal=self.status in (401, 403))
            self.served += 1
            return Generation.from_choices([Choice(text=f"{self.base_url}:{req.prompt}", finish_reason="stop")],
                                           Usage(2, 1))  # fmt: skip
        finally:
            self.inflight -= 1


def multi(*eps: Fake, **kw: Any) -> MultiEndpointBackend:
    async def probe(b: Backend) -> bool:
        assert isinstance(b, Fake)
        b.probes.append(time.monotonic())
        return not b.down

    kw.setdefault("backoff_base", 0.01)
    return MultiEndpointBackend(endpoints=list(eps), probe=probe, **kw)


def reqs(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(prompt=f"p{i}", max_tokens=4) for i in range(n)]


def by_url(be: MultiEndpointBackend) -> dict[str, dict[str, Any]]:
    return {e["base_url"]: e for e in be.endpoint_stats()}


async def until(cond: Any, seconds: float = 5.0) -> None:
    """Wait until ``cond()`` holds (fails after ``seconds``)."""
    end = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < end, "condition not reached in time"
        await asyncio.sleep(0.02)


def test_per_endpoint_limits_are_respected_and_filled() -> None:
    a, b = Fake("a", concurrency=2), Fake("b", concurrency=3)
    be = multi(a, b)
    assert be.concurrency == 5
    out = be.run(reqs(40))
    assert all(isinstance(g, Generation) for g in out)
    assert [g.text.split(":")[1] for g in out] == [f"p{i}" for i in range(40)]  # results in input order
    assert (a.max_inflight, b.max_inflight) == (2, 3)
    assert a.served + b.served == 40 and a.served >= 10 and b.served >= 10
    stats = by_url(be)
    assert (stats["a"]["calls"], stats["b"]["calls"]) == (a.served, b.served)
    assert stats["a"]["taken_out"] == stats["b"]["taken_out"] == 0
    assert be.stats()["requests"] == 40 and be.stats()["prompt_tokens"] == 80


def test_failing_endpoint_is_taken_out_retried_elsewhere_and_put_back_after_cooldown() -> None:
    a, b = Fake("a", concurrency=2), Fake("b", concurrency=2)
    b.down, b.status = True, 503
    be = multi(a, b, cooldown=0.3)

    async def main() -> None:
        t0 = time.monotonic()
        first = await be.generate_many(reqs(20))
        assert all(isinstance(g, Generation) and g.text.startswith("a:") for g in first)
        # b failed the calls in flight there when it broke, then got none: taken out once
        assert 1 <= b.attempts <= 2 and b.served == 0 and a.served == 20
        retried = [g.retries for g in first]
        assert sum(retried) == b.attempts
        st = by_url(be)["b"]
        assert st["taken_out"] == 1 and not st["healthy"] and st["failures"] == b.attempts
        assert "HTTP" not in (st["last_error"] or "x") and "broken" in st["last_error"]
        while not b.probes:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        assert b.probes[0] - t0 >= 0.29  # no health check before the cooldown
        assert not by_url(be)["b"]["healthy"]  # still down at the first health check: stays out
        b.down = False
        await until(lambda: by_url(be)["b"]["healthy"])  # a later health check answers: put back
        assert by_url(be)["b"]["put_back"] == 1 and len(b.probes) >= 2
        assert all(y - x >= 0.29 for x, y in itertools.pairwise(b.probes))  # one check per cooldown
        second = await be.generate_many(reqs(20))
        assert all(isinstance(g, Generation) for g in second) and b.served >= 5
        await be.aclose()

    asyncio.run(main())


def test_busy_endpoint_429_is_not_taken_out() -> None:
    a, b = Fake("a"), Fake("b")
    a.down, a.status = True, 429
    be = multi(a, b, max_retries=3)
    out = be.run(reqs(6))
    assert all(isinstance(g, Generation) for g in out)
    assert by_url(be)["a"]["taken_out"] == 0 and by_url(be)["a"]["healthy"]
    assert by_url(be)["a"]["failures"] == a.attempts >= 1


def test_request_errors_are_not_retried_and_configuration_errors_stop_the_run() -> None:
    a, b = Fake("a"), Fake("b")
    a.down = b.down = True
    a.status = b.status = 400
    be = multi(a, b)
    out = be.run(reqs(3))
    assert all(isinstance(e, BackendRequestError) and e.status == 400 for e in out)
    assert a.attempts + b.attempts == 3  # one attempt each, nobody taken out
    assert all(e["healthy"] and e["taken_out"] == 0 for e in be.endpoint_stats())
    a.status = b.status = 401
    with pytest.raises(BackendRequestError) as info:
        multi(a, b).run(reqs(3))
    assert info.value.fatal and info.value.status == 401


def test_no_healthy_endpoint_fails_the_requests_quickly() -> None:
    a, b = Fake("a"), Fake("b")
    a.down = b.down = True
    be = multi(a, b, max_retries=2, cooldown=30)
    t0 = time.monotonic()
    out = be.run(reqs(12))
    assert time.monotonic() - t0 < 3
    assert all(isinstance(e, BackendRequestError) and not e.fatal for e in out)
    assert "no healthy endpoint: all 2 taken out" in str(out[-1]) and "a: a: broken" in str(out[-1])
    assert a.attempts + b.attempts == 2  # each failed once; then nobody sent anything
    assert be.stats()["failures"] == 12


def test_deadline_stops_the_run() -> None:
    a, b = Fake("a", delay=0.1), Fake("b", delay=0.1)
    be = multi(a, b, deadline=0.05)
    with pytest.raises(BackendRequestError, match=r"deadline of 0\.05 s") as info:
        be.run(reqs(6))
    assert info.value.fatal and a.served + b.served == 2  # the two calls started in time finished


def test_identity_does_not_name_the_endpoints() -> None:
    one = make_backend("multi", base_urls=["http://h1:8000/v1", "http://h2:8000/v1"], model="judge")
    other = make_backend("multi", base_urls=["http://h3:9000/v1", "http://h1:8000/v1", "http://h4/v1"], model="judge")
    assert one.identity() == other.identity() == {"kind": "openai", "model": "judge", "endpoint": "chat",
                                                  "system_prompt": "role"}  # fmt: skip
    assert make_backend("multi", base_urls=["http://h1/v1", "http://h2/v1"], model="x").identity() != one.identity()
    with pytest.raises(ValueError, match="same model"):
        multi(Fake("a", model="m1"), Fake("b", model="m2"))
    with pytest.raises(ValueError, match="non-empty list"):
        make_backend("multi", base_urls="http://h1/v1", model="judge")
    with pytest.raises(ValueError, match="more than once"):
        make_backend("multi", base_urls=["http://h1/v1", "http://h1/v1"], model="judge")


# -- the CLI ---------------------------------------------------------------------------------------
def write_items(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "system": "s", "instruction": f"Name colour number {i}.",
                                 "response": "Red " * (1 + i % 4)}) + "\n")  # fmt: skip
    return path


def judge_cmd(args: list[str]) -> list[str]:
    return [sys.executable, "-c", "from evalign.cli import main; main()", "judge", *args]


def test_cli_checks_every_url_and_fails_by_max_failed_when_no_endpoint_answers(tmp_path: Path) -> None:
    src = write_items(tmp_path / "items.jsonl", 3)
    env = {**os.environ, "EVALIGN_CACHE": str(tmp_path / "cache.sqlite")}
    base = [str(src), "--model", "m", "--base-url", "http://127.0.0.1:1/v1"]
    for extra, needle in ((["--base-url", "ftp://x"], "--base-url must be an http:// or https:// URL"),
                          (["--base-url", "http://127.0.0.1:1/v1"], "--base-url given twice")):  # fmt: skip
        proc = subprocess.run(judge_cmd([*base, *extra]), capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    dead = [f"http://127.0.0.1:{free_port()}/v1", f"http://127.0.0.1:{free_port()}/v1"]
    proc = subprocess.run(
        judge_cmd([str(src), "--model", "m", "--base-url", dead[0], "--base-url", dead[1], "--max-retries", "1"]),
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    msg = " ".join(proc.stderr.split())
    assert "3 of 3 judge calls failed after retries (more than --max-failed 0.5)" in msg
    assert "no healthy endpoint: all 2 taken out" in msg and "Traceback" not in msg
    table = proc.stdout[proc.stdout.index("Endpoints"):]  # calls per endpoint in the printed summary
    for url in dead:
        assert url in table
    assert table.count(" no ") >= 2


@pytest.mark.server
def test_two_llama_servers_one_killed_mid_run(llama_server, tiny_gguf: Path, tmp_path: Path) -> None:
    n = 30
    src = write_items(tmp_path / "items.jsonl", n)
    grammar = tmp_path / "g.gbnf"
    grammar.write_text(ABS_GRAMMAR)
    out = tmp_path / "judged.jsonl"
    cache_path = tmp_path / "cache.sqlite"
    env = {**os.environ, "EVALIGN_CACHE": str(cache_path)}
    server = LlamaServer(tiny_gguf, log_path=tmp_path / "second.log")
    with server as second:
        killed_after: int | None = None
        args = [str(src), "--mode", "absolute", "--rubric", "helpfulness", "--model", llama_server.model,
                "--base-url", llama_server.base_url, "--base-url", second.base_url, "--concurrency", "1",
                "--grammar", str(grammar), "--max-tokens", "64", "--seed", "1", "--json", "-o", str(out)]
        t0 = time.monotonic()
        proc = subprocess.Popen(judge_cmd(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)  # fmt: skip
        partial = Path(f"{out}.partial.jsonl")
        try:
            while proc.poll() is None and time.monotonic() - t0 < 90:
                done = partial.read_text().count('"key"') if partial.exists() else 0
                if killed_after is None and done >= 8:
                    assert server.proc is not None
                    server.proc.kill()  # the server dies: calls in flight there are cut off
                    server.proc.wait(10)
                    killed_after = done
                time.sleep(0.02)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    took = time.monotonic() - t0
    assert proc.returncode == 0, stderr
    assert killed_after is not None and killed_after < n, "the run ended before the second server was killed"
    summary = json.loads(stdout)
    eps = {e["base_url"]: e for e in summary["endpoints"]}
    first, dead = eps[llama_server.base_url], eps[second.base_url]
    # every item graded exactly once: one answered call per item, spread over both, none lost
    assert summary["calls"]["new"] == n and summary["calls"]["failed"] == 0 and summary["scored"] == n
    assert first["calls"] + dead["calls"] == n and first["calls"] > 0 and dead["calls"] > 0
    assert dead["calls"] <= killed_after + 1  # nothing answered there after the kill (one may have been finishing)
    assert Cache(cache_path).count(NAMESPACE) == n
    # the killed endpoint was taken out and is still out
    assert dead["taken_out"] == 1 and not dead["healthy"] and dead["failures"] >= 1
    assert first["taken_out"] == 0 and first["healthy"]
    assert summary["backend"] == {"kind": "openai", "model": llama_server.model, "endpoint": "chat",
                                  "system_prompt": "role"}  # fmt: skip
    print(f"two servers, one killed after {killed_after} calls: {n} items in {took:.1f} s; "
          f"calls {first['calls']} + {dead['calls']}")

    # resumed with another endpoint set (one of them dead): every grade from the cache, nothing sent
    gone = f"http://127.0.0.1:{free_port()}/v1"
    res = subprocess.run(judge_cmd([*args[:9], "--base-url", gone, *args[11:]]), capture_output=True,
                         text=True, env=env, timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    again = json.loads(res.stdout)
    assert again["calls"]["cached"] == n and again["calls"]["new"] == 0 and again["signature"] == summary["signature"]
    assert sum(e["calls"] for e in again["endpoints"]) == 0


@pytest.mark.server
def test_real_endpoint_answering_503_is_taken_out_and_put_back_by_its_health_check(llama_server,
                                                                                  fault_proxy: FaultProxy) -> None:
    broken = [True]
    fault_proxy.reset(lambda seen: Status(503) if broken[0] else Forward())
    proxied = fault_proxy.base_url
    be = make_backend("multi", base_urls=[llama_server.base_url, proxied], model=llama_server.model,
                      concurrency=1, cooldown=0.5, api_key_env=None)  # fmt: skip
    assert isinstance(be, MultiEndpointBackend)
    work = [GenerationRequest(messages=[{"role": "user", "content": f"Say {i}."}], max_tokens=4) for i in range(6)]

    async def main() -> None:
        first = await be.generate_many(work)
        assert all(isinstance(g, Generation) for g in first)
        st = by_url(be)[proxied]
        assert st["taken_out"] == 1 and not st["healthy"] and st["calls"] == 0 and "HTTP 503" in st["last_error"]
        assert by_url(be)[llama_server.base_url]["calls"] == 6
        broken[0] = False
        await until(lambda: by_url(be)[proxied]["healthy"])  # the health check (GET /models) answers: put back
        assert by_url(be)[proxied]["put_back"] == 1
        assert any(s.path.endswith("/v1/models") for s in fault_proxy.seen)
        second = await be.generate_many(work)
        assert all(isinstance(g, Generation) for g in second) and by_url(be)[proxied]["calls"] >= 1
        await be.aclose()
        dead = OpenAICompatibleBackend(f"http://127.0.0.1:{free_port()}/v1", "m", api_key_env=None)
        alive = OpenAICompatibleBackend(llama_server.base_url, "m", api_key_env=None)
        assert await http_probe(alive) and not await http_probe(dead, timeout=2)
        await dead.aclose()
        await alive.aclose()

    asyncio.run(main())
