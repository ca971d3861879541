"""Judge client overhead: evalign's judge client vs the ``openai`` client calling the same llama.cpp
server directly, same prompts, same concurrency, one run (issue 18, Speed).

The server (``python -m llama_cpp.server``) serves the tiny random-weight GGUF of the tests
(tests/judges/llama_server.py), so the server is not the bottleneck. Each configuration sends the
same ``--prompts`` chat requests (temperature 0, ``--max-tokens``) with ``--concurrency`` in flight:

* ``openai``: ``AsyncOpenAI().chat.completions.create`` under a semaphore, no streaming (the peer);
* ``openai stream``: the same with ``stream=True``, the chunks joined;
* ``evalign``: :class:`evalign.backends.OpenAICompatibleBackend` as ``evalign judge`` runs it
  (not streamed, the default);
* ``evalign --stream``: the same with ``stream=True`` (opt-in; compared with ``openai stream``).

The rounds alternate (peer, ours, peer, ours ...) so background load hits both alike; the figure
is calls/s of the median round, and the ratio evalign / openai (goal >= 0.95x).

Usage: ``python benchmarks/judge_client_overhead.py [--prompts 50] [--concurrency 4] [--rounds 5]``.
Needs llama-cpp-python[server] (scripts/build_llama_server.sh) and the ``openai`` package.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "judges"))

from llama_server import LlamaServer, cached_tiny_gguf  # noqa: E402

from evalign.backends import Generation, GenerationRequest, OpenAICompatibleBackend  # noqa: E402


def prompts(n: int) -> list[str]:
    """``n`` distinct judge-like prompts."""
    return [f"Rate response {i} from 1 to 5 for helpfulness. Response: the capital of France is Paris." for i in range(n)]


def run_evalign(url: str, model: str, texts: list[str], max_tokens: int, concurrency: int, stream: bool) -> int:
    """Calls answered by evalign's backend."""
    backend = OpenAICompatibleBackend(url, model, concurrency=concurrency, api_key_env=None, stream=stream)
    reqs = [GenerationRequest(messages=[{"role": "user", "content": t}], max_tokens=max_tokens) for t in texts]
    return sum(isinstance(g, Generation) for g in backend.run(reqs))


def run_openai(url: str, model: str, texts: list[str], max_tokens: int, concurrency: int, stream: bool) -> int:
    """Calls answered by ``AsyncOpenAI`` with ``concurrency`` in flight."""
    import openai

    async def main() -> int:
        client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        sem = asyncio.Semaphore(concurrency)

        async def one(t: str) -> bool:
            async with sem:
                kw = {"model": model, "messages": [{"role": "user", "content": t}], "max_tokens": max_tokens,
                      "temperature": 0.0, "top_p": 1.0}
                if not stream:
                    r = await client.chat.completions.create(**kw)
                    return r.choices[0].message.content is not None
                parts = []
                async for chunk in await client.chat.completions.create(**kw, stream=True):
                    if chunk.choices and chunk.choices[0].delta.content:
                        parts.append(chunk.choices[0].delta.content)
                return True

        res = await asyncio.gather(*(one(t) for t in texts))
        await client.close()
        return sum(res)

    return asyncio.run(main())


def rate(fn: Callable[[], int]) -> float:
    """Calls per second of one run."""
    t0 = time.perf_counter()
    n = fn()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=50)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; the median is reported")
    args = ap.parse_args()
    texts = prompts(args.prompts)
    with LlamaServer(cached_tiny_gguf(), log_path="/tmp/evalign-bench-client-llama.log") as info:
        url, model = info.base_url, info.model
        c, m = args.concurrency, args.max_tokens
        configs: dict[str, Callable[[], int]] = {
            "openai": lambda: run_openai(url, model, texts, m, c, False),
            "openai stream": lambda: run_openai(url, model, texts, m, c, True),
            "evalign": lambda: run_evalign(url, model, texts, m, c, False),
            "evalign --stream": lambda: run_evalign(url, model, texts, m, c, True),
        }
        for fn in configs.values():  # warm-up (connections, the server's first prompt)
            fn()
        rates: dict[str, list[float]] = {k: [] for k in configs}
        for _ in range(args.rounds):
            for name, fn in configs.items():
                rates[name].append(rate(fn))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"# {args.prompts} chat calls, max_tokens={m}, concurrency {c}, median of {args.rounds} alternating rounds, "
          "llama.cpp server with the tiny random GGUF")
    print(f"{'client':<22} {'calls/s':>8} {'vs openai':>10}")
    for name, r in med.items():
        print(f"{name:<22} {r:8.2f} {r / med['openai']:9.2f}x")
    print(f"\nevalign / openai (both plain, the defaults): {med['evalign'] / med['openai']:.3f}x; "
          f"both streamed: {med['evalign --stream'] / med['openai stream']:.3f}x (goal >= 0.95x)")


if __name__ == "__main__":
    main()
