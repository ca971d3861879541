"""What an output constraint costs per call and per generated token, in CPU seconds (issue 29).

Wall time on a shared machine measures the other tenants; the CPU time of the process that
generates (the llama.cpp server's process, all its threads; the ``hf`` backend's own process) does
not, or far less. For each answer-shape kind, on the real SmolLM2-135M-Instruct:

* ``verdict``: LLMBar Vanilla (``Output \\((a|b)\\)``, nothing before it);
* ``text``: Prometheus absolute (free text bounded to ``--max-tokens``, then `` [RESULT] n``);
* ``json``: the criteria judge (a JSON object with a free-text ``reasoning`` string);
* ``digit``: G-Eval (one digit; logprobs asked as the judge does);

the same prompt (the judge's own request: messages, sampling settings, ``max_tokens``) is sent
unconstrained and constrained, alternately (``--reps`` rounds, the order flipped each round), each
call after a short unrelated request so no variant reuses another's cached prompt (llama.cpp keeps
the last prompt's KV cache and reuses its longest common prefix). A prompt-only call (``max_tokens``
1, unconstrained) gives each prompt's processing cost; ``CPU ms / token`` is
(call CPU - prompt CPU) / (completion tokens - 1), the decoding cost of one more token.

Usage::

    python benchmarks/constraint_cost.py --backends llama,hf --reps 3 --results benchmarks/results/constraint_cost_cpu.md

Prints one JSON line per measured call and a markdown table (medians over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evalign.backends import GenerationRequest, HFLocalBackend, OpenAICompatibleBackend
from evalign.backends.llama_server import LlamaServer
from evalign.backends.model_source import packaged_gguf_path
from evalign.judges import get_judge
from real_judge_modes import ALIAS, natural_pairs, vicuna_items

#: shape kind -> (judge name, judge options, takes pairs)
SHAPES: dict[str, tuple[str, dict[str, Any], bool]] = {
    "verdict": ("pairwise", {"template": "llmbar_vanilla"}, True),
    "text": ("absolute", {}, False),
    "json": ("criteria", {}, False),
    "digit": ("geval", {}, False),
}
FLUSH = [{"role": "user", "content": "Name a colour."}]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads)."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def shape_request(kind: str, max_tokens: int) -> tuple[list[dict[str, str]], dict[str, Any], dict[str, Any]]:
    """The judge's first request for shape ``kind``: messages, unconstrained settings, constraint."""
    name, opts, pairs = SHAPES[kind]
    gen = {"max_tokens": max_tokens, "temperature": 0.0, "seed": 7} if kind in ("text", "json") else {"seed": 7}
    judge = get_judge(name, **opts, **gen, constrain="on")
    row = (natural_pairs(1) if pairs else vicuna_items(1)).to_dict("records")[0]
    order, messages = judge.prompts(row, judge.rubric, False)[0]
    settings = judge.request_settings(0)
    constrained = judge.constrained(settings, order)
    return messages, settings, constrained["constraint"]


@contextmanager
def backend_of(kind: str, threads: int) -> Iterator[tuple[Any, int]]:
    """A fresh backend of ``kind`` and the id of the process that generates."""
    if kind == "hf":
        yield HFLocalBackend(ALIAS, device="cpu", batch_size=1), os.getpid()
        return
    server = LlamaServer(packaged_gguf_path(ALIAS), n_ctx=8192, n_threads=threads, alias="smollm2",
                         log_path=Path(tempfile.gettempdir()) / "evalign-bench-constraint-cost.log")
    with server as info:
        assert server.proc is not None
        yield (OpenAICompatibleBackend(info.base_url, info.model, api_key_env=None, concurrency=1, timeout=1800,
                                       constraint_format="llama.cpp"), server.proc.pid)


def timed(backend: Any, pid: int, req: GenerationRequest) -> dict[str, Any]:
    """One call: wall and CPU seconds, tokens, finish reason, the answer's tail."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    g = backend.run([req], raise_errors=True)[0]
    return {"wall_s": time.monotonic() - t0, "cpu_s": cpu_seconds(pid) - c0,
            "prompt_tokens": g.usage.prompt_tokens, "tokens": g.usage.completion_tokens,
            "finish": g.finish_reason, "tail": g.text[-50:]}


def measure(kind: str, backend: Any, pid: int, reps: int, max_tokens: int,
            emit: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """``reps`` rounds of prompt-only / unconstrained / constrained calls of shape ``kind``."""
    messages, settings, constraint = shape_request(kind, max_tokens)
    flush = GenerationRequest(messages=FLUSH, max_tokens=1, temperature=0.0)
    variants = {"prompt": GenerationRequest(messages=messages, **{**settings, "max_tokens": 1}),
                "off": GenerationRequest(messages=messages, **settings),
                "on": GenerationRequest(messages=messages, **settings, constraint=constraint)}
    for req in variants.values():  # warm-up (lazy loads: llguidance's tokenizer, the grammar code path)
        backend.run([flush], raise_errors=True)
        backend.run([req], raise_errors=True)
    rows = []
    for rep in range(reps):
        order = ["prompt", "off", "on"] if rep % 2 == 0 else ["prompt", "on", "off"]
        for name in order:
            backend.run([flush], raise_errors=True)
            r = {"shape": kind, "variant": name, "rep": rep, **timed(backend, pid, variants[name]),
                 "load": round(os.getloadavg()[0], 1)}
            rows.append(r)
            emit(r)
    return rows


def summarise(backend: str, kind: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per variant and the per-token decoding cost."""
    def med(variant: str, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["variant"] == variant)

    prompt_cpu = med("prompt", "cpu_s")
    out: dict[str, Any] = {"backend": backend, "shape": kind, "prompt_tokens": med("prompt", "prompt_tokens"),
                           "prompt_cpu_s": prompt_cpu}
    for v in ("off", "on"):
        per = [(r["cpu_s"] - prompt_cpu) / (r["tokens"] - 1) for r in rows if r["variant"] == v and r["tokens"] > 1]
        out[v] = {"wall_s": med(v, "wall_s"), "cpu_s": med(v, "cpu_s"), "tokens": med(v, "tokens"),
                  "cpu_ms_per_token": 1e3 * statistics.median(per) if per else float("nan")}
    return out


def markdown(summaries: list[dict[str, Any]], args: argparse.Namespace, loads: tuple[float, float]) -> str:
    """The summaries as a markdown section."""
    lines = [f"# Output constraints: CPU cost per call and per token ({platform.machine()}, {os.cpu_count()} cores)",
             "", f"SmolLM2-135M-Instruct; `python benchmarks/constraint_cost.py --backends {args.backends} --reps "
             f"{args.reps} --max-tokens {args.max_tokens} --threads {args.threads}`; medians over the rounds; load "
             f"average (1 min) {loads[0]:.1f} before, {loads[1]:.1f} after. CPU = the generating process's user + "
             "system seconds (llama.cpp: the server process; hf: the benchmark's own process).", "",
             "| backend | shape | prompt tokens | prompt CPU s | off: tokens | off: wall s | off: CPU s | "
             "off: CPU ms/token | on: tokens | on: wall s | on: CPU s | on: CPU ms/token | per-token ratio on/off |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        off, on = s["off"], s["on"]
        ratio = on["cpu_ms_per_token"] / off["cpu_ms_per_token"] if off["cpu_ms_per_token"] > 0 else float("nan")
        lines.append(f"| {s['backend']} | {s['shape']} | {s['prompt_tokens']:.0f} | {s['prompt_cpu_s']:.2f} | "
                     f"{off['tokens']:.0f} | {off['wall_s']:.2f} | {off['cpu_s']:.2f} | {off['cpu_ms_per_token']:.1f} | "
                     f"{on['tokens']:.0f} | {on['wall_s']:.2f} | {on['cpu_s']:.2f} | {on['cpu_ms_per_token']:.1f} | "
                     f"{ratio:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="llama,hf")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--jsonl", type=Path, default=None, help="also append each call as a JSON line here")
    args = ap.parse_args()

    def emit(r: dict[str, Any]) -> None:
        print(json.dumps(r), flush=True)
        if args.jsonl:
            with args.jsonl.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(r) + "\n")

    load0 = os.getloadavg()[0]
    summaries = []
    for name in args.backends.split(","):
        with backend_of(name, args.threads) as (backend, pid):
            for kind in args.shapes.split(","):
                rows = measure(kind, backend, pid, args.reps, args.max_tokens,
                               lambda r, name=name: emit({"backend": name, **r}))
                summaries.append(summarise(name, kind, rows))
                print(json.dumps(summaries[-1]), flush=True)
    text = markdown(summaries, args, (load0, os.getloadavg()[0]))
    print(text)
    if args.results:
        args.results.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
