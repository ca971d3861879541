"""Judge throughput: evalign's OpenAI-compatible backend vs the ``openai`` client, same requests, one run.

Two servers:

1. the real llama.cpp server (``python -m llama_cpp.server``) with the tiny random test model
   (tests/judges/llama_server.py): items/s of evalign at concurrency 1, 4 and 16 against a plain
   sequential loop of ``openai.OpenAI().chat.completions.create`` and ``AsyncOpenAI`` + gather;
2. an instant local stub (tests/judges/fault_proxy.py with no upstream): the client's own cost per
   request in ms (evalign vs openai vs bare httpx), i.e. what evalign adds on top of HTTP.

Usage: ``python benchmarks/judge_throughput.py [--items 48] [--max-tokens 16] [--stub-items 400]``.
Needs llama-cpp-python[server] (scripts/build_llama_server.sh) and the ``openai`` package.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "judges"))

from llama_server import LlamaServer, cached_tiny_gguf  # noqa: E402

from evalign.backends import Generation, GenerationRequest, OpenAICompatibleBackend  # noqa: E402


def prompts(n: int) -> list[str]:
    return [f"Rate response {i} from 1 to 5 for helpfulness. Response: the capital of France is Paris." for i in range(n)]


def time_it(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    """Best wall time (s) over ``repeats`` runs, and the item count of the last run."""
    best, count = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        count = fn()
        best = min(best, time.perf_counter() - t0)
    return best, count


def run_evalign(base_url: str, model: str, texts: list[str], max_tokens: int, concurrency: int) -> int:
    backend = OpenAICompatibleBackend(base_url, model, concurrency=concurrency, api_key_env=None)
    reqs = [GenerationRequest(messages=[{"role": "user", "content": t}], max_tokens=max_tokens) for t in texts]
    out = backend.run(reqs)
    return sum(isinstance(g, Generation) for g in out)


def run_openai_sequential(base_url: str, model: str, texts: list[str], max_tokens: int) -> int:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="none", max_retries=0)
    done = 0
    for t in texts:
        r = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": t}], max_tokens=max_tokens, temperature=0.0
        )
        done += r.choices[0].message.content is not None
    client.close()
    return done


def run_openai_async(base_url: str, model: str, texts: list[str], max_tokens: int, concurrency: int) -> int:
    import openai

    async def main() -> int:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0)
        sem = asyncio.Semaphore(concurrency)

        async def one(t: str) -> bool:
            async with sem:
                r = await client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": t}], max_tokens=max_tokens, temperature=0.0
                )
                return r.choices[0].message.content is not None

        res = await asyncio.gather(*(one(t) for t in texts))
        await client.close()
        return sum(res)

    return asyncio.run(main())


def run_httpx_sequential(base_url: str, model: str, texts: list[str], max_tokens: int) -> int:
    import httpx

    done = 0
    with httpx.Client() as c:
        for t in texts:
            r = c.post(base_url + "/chat/completions", json={
                "model": model, "messages": [{"role": "user", "content": t}], "max_tokens": max_tokens,
            })  # fmt: skip
            done += "choices" in r.json()
    return done


def run_httpx_async_sequential(base_url: str, model: str, texts: list[str], max_tokens: int) -> int:
    import httpx

    async def main() -> int:
        done = 0
        async with httpx.AsyncClient() as c:
            for t in texts:
                r = await c.post(base_url + "/chat/completions", json={
                    "model": model, "messages": [{"role": "user", "content": t}], "max_tokens": max_tokens,
                })  # fmt: skip
                done += "choices" in r.json()
        return done

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=48, help="requests per configuration on the llama.cpp server")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--stub-items", type=int, default=400, help="requests per configuration on the stub")
    ap.add_argument("--repeats", type=int, default=3, help="best of N runs")
    args = ap.parse_args()

    texts = prompts(args.items)
    print(f"# judge throughput, {args.items} chat requests, max_tokens={args.max_tokens}, best of {args.repeats}")
    with LlamaServer(cached_tiny_gguf(), log_path="/tmp/evalign-bench-llama.log") as info:
        run_evalign(info.base_url, info.model, texts[:4], args.max_tokens, 1)  # warm-up
        rows: list[tuple[str, float]] = []
        secs, n = time_it(lambda: run_openai_sequential(info.base_url, info.model, texts, args.max_tokens), args.repeats)
        rows.append(("openai client, sequential loop", n / secs))
        peer = n / secs
        secs, n = time_it(lambda: run_openai_async(info.base_url, info.model, texts, args.max_tokens, 16), args.repeats)
        rows.append(("openai AsyncOpenAI, 16 in flight", n / secs))
        for conc in (1, 4, 16):
            secs, n = time_it(lambda c=conc: run_evalign(info.base_url, info.model, texts, args.max_tokens, c),
                              args.repeats)  # fmt: skip
            rows.append((f"evalign backend, concurrency {conc}", n / secs))
        print(f"{'client':<36} {'items/s':>9} {'vs openai seq':>14}")
        for name, rate in rows:
            print(f"{name:<36} {rate:9.2f} {rate / peer:13.2f}x")

    stub_texts = prompts(args.stub_items)
    print(f"\n# client cost per request against an instant local stub ({args.stub_items} requests, sequential)")
    # the stub runs in its own process, so it does not compete with the client for the GIL
    stub = subprocess.Popen([sys.executable, str(ROOT / "tests" / "judges" / "fault_proxy.py")],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert stub.stdout is not None
        url = stub.stdout.readline().strip()
        run_evalign(url, "stub", stub_texts[:20], 8, 1)
        costs = {}
        for name, fn in [
            ("bare httpx.Client loop", lambda: run_httpx_sequential(url, "stub", stub_texts, 8)),
            ("bare httpx.AsyncClient loop", lambda: run_httpx_async_sequential(url, "stub", stub_texts, 8)),
            ("openai client loop", lambda: run_openai_sequential(url, "stub", stub_texts, 8)),
            ("evalign backend, concurrency 1", lambda: run_evalign(url, "stub", stub_texts, 8, 1)),
        ]:
            per = []
            for _ in range(args.repeats):
                secs, n = time_it(fn, 1)
                per.append(1000.0 * secs / n)
            costs[name] = statistics.median(per)
        base = costs["bare httpx.Client loop"]
        print(f"{'client':<36} {'ms/request':>10} {'over httpx':>11}")
        for name, ms in costs.items():
            print(f"{name:<36} {ms:10.3f} {ms - base:+10.3f}")
        ratio = costs["evalign backend, concurrency 1"] / costs["openai client loop"]
        own = costs["evalign backend, concurrency 1"] - costs["bare httpx.AsyncClient loop"]
        print(f"\nevalign's own overhead per request (over bare async httpx): {own:.3f} ms")
        print(f"evalign / openai per-request cost ratio on the stub: {ratio:.2f}")
    finally:
        stub.terminate()
        stub.wait(10)


if __name__ == "__main__":
    main()
