"""Shared builders of the annotate tests: small pair and item tables, and a store filled with labels."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np

from evalign.annotate.assign import label_code, shown_order
from evalign.annotate.items import read_items_to_label
from evalign.annotate.store import Store, StoreSettings

#: text no page may run: a script tag, an image whose error handler runs, an HTML comment opener
XSS = ['<script>window.__xss = 1</script>', '<img src=x onerror="window.__xss = 2">', '</div><b id="xss">bold</b>']


def write_pairs(path: Path, n: int, *, seed: int = 0, xss: bool = False) -> list[float]:
    """A pair table of ``n`` pairs between systems m1 and m2 (a judge verdict column ``judge``); the
    hidden truth (+1 / -1) of each pair is returned."""
    rng = np.random.default_rng(seed)
    truth = rng.choice([1.0, -1.0], size=n)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            judge = ("A" if truth[i] > 0 else "B") if rng.random() < 0.8 else "tie"
            rec = {"id": f"q{i:03d}", "instruction": f"Question {i}: which answer is better?",
                   "response_a": f"Answer A to question {i}.", "response_b": f"Answer B to question {i}.",
                   "system_a": "m1" if i % 2 else "m2", "system_b": "m2" if i % 2 else "m1", "judge:demo": judge,
                   "topic": f"t{i % 3}"}
            if xss:
                rec["instruction"] += " " + XSS[i % len(XSS)]
                rec["response_a"] += " " + XSS[(i + 1) % len(XSS)]
                rec["response_b"] += " " + XSS[(i + 2) % len(XSS)]
            fh.write(json.dumps(rec) + "\n")
    return truth.tolist()


def fill(store: Store, annotators: dict[str, float], truth: list[float], *, seed: int = 1) -> dict[str, list]:
    """Label every item for each annotator as the page would (left / right / tie in the order shown):
    the truth with probability ``annotators[name]``, else a tie or the other side. Returns each
    annotator's codes in the items' frame."""
    rng = np.random.default_rng(seed)
    out: dict[str, list] = {}
    for name, accuracy in annotators.items():
        codes = []
        for idx, t in enumerate(truth):
            key = store.item(idx)[0]
            order = shown_order(store.seed, name, key)
            code = t if rng.random() < accuracy else float(rng.choice([0.0, -t]))
            choice = "tie" if code == 0 else ("left" if (code > 0) == (order == "ab") else "right")
            value = label_code("pairwise", choice, order, ())
            assert value == code
            assert store.add_label(name, idx, value, shown=order, seconds=1.5, comment=None)
            codes.append(code)
        out[name] = codes
    return out


def pair_store(tmp_path: Path, n: int = 40, *, per_item: int = 3) -> tuple[Store, list[float], Path]:
    items = tmp_path / "pairs.jsonl"
    truth = write_pairs(items, n)
    store = Store(tmp_path / "labels.sqlite")
    store.initialise(read_items_to_label(items, "pairwise"), StoreSettings(task="pairwise", per_item=per_item,
                                                                          source=str(items)))
    return store, truth, items


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
