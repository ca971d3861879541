"""A live judge's confidence, calibrated: SmolLM2-135M-Instruct (llama.cpp's server, started here)
judges the 100 LLMBar Natural pairs in both orders with LLMBar's Vanilla prompt at temperature 0,
asking for the top logprobs of its answer, so every verdict carries ``J.p_a`` (P(A better), the
mean over both orders mapped back to the original order). Writes the judged pair table; then

    evalign meta OUT.jsonl --pref pref_1 -m judge:smollm2-135m/vanilla-logprobs --selective --risk 0.15

says where (if anywhere) its verdicts can be trusted.

    python benchmarks/selective_smollm2.py [--pairs 100] [--out /tmp/llmbar_smollm2_logprobs.jsonl]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from evalign.demo_judge import live_backend, sample_pairs
from evalign.evaluate.inputs import InputSettings, load_inputs
from evalign.io import write_table
from evalign.judges.modes.llmbar import LLMBarJudge
from evalign.judges.runner import run_judge

COLUMN = "judge:smollm2-135m/vanilla-logprobs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--top-logprobs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=Path("/tmp/llmbar_smollm2_logprobs.jsonl"))
    a = ap.parse_args()
    ds = load_inputs(InputSettings(dataset="llmbar:natural")).ds
    assert ds is not None and ds.pairs is not None
    pairs = sample_pairs(ds.pairs, a.pairs, 0) if a.pairs < len(ds.pairs) else ds.pairs
    judge = LLMBarJudge(template="llmbar_vanilla", column=COLUMN, temperature=0.0, max_tokens=16, seed=0,
                        logprobs=True, top_logprobs=a.top_logprobs)
    t0 = time.perf_counter()
    with live_backend("llama") as backend:
        run = run_judge(pairs, judge, backend)
    t = run.table
    have = t[f"{COLUMN}.p_a"].notna().sum() if f"{COLUMN}.p_a" in t.columns else 0
    print(f"{len(t)} pairs judged in both orders in {time.perf_counter() - t0:.0f} s; {have} with J.p_a")
    write_table(t, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
