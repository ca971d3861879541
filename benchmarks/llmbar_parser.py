"""evalign's LLMBar verdict parser on every real judge text LLMBar released (56,060 completions).

Re-parses ``completion_swap_false`` / ``completion_swap_true`` of the 28,030 comparison rows of
``<data>/llmbar/evaluators/*.jsonl`` with the parser of the matching ``llmbar_*`` template, as the
``llmbar`` judge reads its calls (``LLMBarJudge.parse_call``: the template's ``parser``, or its
``synthesis`` round's), and compares with upstream's parsed winner. Rating rows (no comparison
text) are left out. Prints the agreement rate, the disagreement categories with
counts and examples, and the time to parse all texts (target: under 2 s).

Which upstream stage a text is: for Swap / Swap_CoT the final text is the synthesis round when the
row has ``stages`` (the first round's two orders disagreed), else the first round (CoT format).
Upstream's regexes (``upstream_configs/<Evaluator>/<Strategy>.json``) of that stage re-applied to
the text reproduce every upstream winner (checked here).

Usage: ``python benchmarks/llmbar_parser.py [--data-dir DIR] [--examples K] [--json OUT]``
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from evalign.judges import get_judge
from evalign.judges.llmbar_parsing import parse_upstream
from evalign.judges.modes.llmbar import PARSERS, STRATEGY_TEMPLATES

ROOT = Path(__file__).resolve().parents[1]
_SHOWN = {"false": {"1": "A", "2": "B"}, "true": {"1": "B", "2": "A"}}


def load_texts(data_dir: Path) -> list[dict[str, Any]]:
    """One record per judge text: config, order, text, finish reason, style, upstream regexes and
    upstream's winner in the SHOWN order (``A`` = the text's Output (a))."""
    ev = data_dir / "llmbar" / "evaluators"
    configs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in sorted((ev / "upstream_configs").glob("*/*.json")):
        configs[(f.parent.name, f.stem)] = json.loads(f.read_text(encoding="utf-8"))
    out = []
    for f in sorted(ev.glob("*.jsonl")):
        with f.open(encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                if "completion_swap_false" not in r:
                    continue
                strategy = r["strategy"]
                stages = configs[(r["evaluator"], strategy)]
                synthesis = strategy in ("Swap", "Swap_CoT") and bool(r.get("stages"))
                final = stages[1] if synthesis else stages[0] if strategy in ("Swap", "Swap_CoT") else stages[-1]
                style = template_style(strategy, synthesis)
                for order in ("false", "true"):
                    w = r[f"winner_swap_{order}"]
                    out.append({
                        "set": r["set"], "evaluator": r["evaluator"], "strategy": strategy, "index": r["index"],
                        "order": "ab" if order == "false" else "ba", "text": r[f"completion_swap_{order}"],
                        "finish": r.get(f"finish_swap_{order}") or None, "style": style,
                        "parsing": final["parsing"], "upstream": _SHOWN[order].get(w) if w is not None else None,
                        "call": "swap_ab" if synthesis else "ab",
                    })
    return out


@functools.cache
def template_style(strategy: str, synthesis: bool) -> str:
    """The answer format evalign reads a text of ``strategy`` in: its template's parser (the synthesis
    round's for a Swap text from that round)."""
    judge = get_judge("pairwise", template=STRATEGY_TEMPLATES[strategy])
    parser = judge.template.synthesis.parser if synthesis and judge.template.synthesis else judge.template.parser
    return PARSERS[parser]


def parse_all(texts: list[dict[str, Any]]) -> list[Any]:
    """evalign's result for every text: the ``llmbar`` judge of the strategy's template reading the
    call (first round or synthesis) the text answered."""
    judges = {s: get_judge("pairwise", template=n) for s, n in STRATEGY_TEMPLATES.items()}
    out = []
    for t in texts:
        gen = {"choices": [{"text": t["text"], "finish_reason": t["finish"]}]}
        out.append(judges[t["strategy"]].parse_call(gen, None, t["call"]))
    return out


def category(t: dict[str, Any], verdict: str | None, reason: str | None, position: int | None) -> str:
    """A disagreement's category (what each side read, and where)."""
    upstream = t["upstream"]
    if upstream is not None and verdict is not None:
        letter = "a" if upstream == "A" else "b"
        exp = t["parsing"]["1" if upstream == "A" else "2"]
        m = re.search(exp, (t["text"] or "").strip())
        kind = "line-start" if exp.startswith("(?:^|") else "'is better'"
        where = "the opening answer" if position == 0 else "the concluding claim"
        when = "a later" if m is not None and position is not None and position < m.start() else "an earlier"
        return (f"different verdict: evalign reads {where} ({verdict}); upstream's {kind} regex for ({letter}) "
                f"matched {when} sentence")
    if upstream is None:
        return f"evalign reads {verdict}, upstream none"
    return f"upstream reads {upstream}, evalign unscored ({reason})"


def write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    """Every disagreement as a CSV row (the test table of ``tests/judges/test_llmbar_parsing.py``)."""
    keys = ("set", "evaluator", "strategy", "index", "order", "upstream", "evalign", "reason", "category")
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(keys)
        for r in sorted(rows, key=lambda r: (r["set"], r["evaluator"], r["strategy"], r["index"], r["order"])):
            w.writerow(["" if r[k] is None else r[k] for k in keys])


def main() -> None:
    env = os.environ.get("EVALIGN_DATA_DIR", "").strip()
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data-dir", type=Path, default=Path(env) if env else ROOT.parent / "shared" / "data")
    ap.add_argument("--examples", type=int, default=2, help="examples shown per category")
    ap.add_argument("--json", type=Path, default=None, help="write the figures and every disagreement here")
    ap.add_argument("--write-table", type=Path, default=None, help="write every disagreement as CSV (the test table)")
    args = ap.parse_args()

    texts = load_texts(args.data_dir)
    mismatch = 0
    t0 = time.perf_counter()
    upstream = [parse_upstream(t["text"], t["parsing"]) for t in texts]
    upstream_seconds = time.perf_counter() - t0
    for t, w in zip(texts, upstream, strict=True):  # upstream's regexes of the final stage reproduce its winners
        mismatch += ({"1": "A", "2": "B"}.get(w) if w else None) != t["upstream"]
    t0, c0 = time.perf_counter(), time.process_time()
    results = parse_all(texts)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0

    agree = 0
    cats: Counter[str] = Counter()
    examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_style: Counter[tuple[str, bool]] = Counter()
    status = Counter("scored" if r.ok else f"unscored:{r.reason}" for r in results)
    for t, r in zip(texts, results, strict=True):
        same = r.verdict == t["upstream"]
        agree += same
        by_style[(t["style"], same)] += 1
        if not same:
            c = category(t, r.verdict, r.reason, r.position)
            cats[c] += 1
            examples[c].append({k: t[k] for k in ("set", "evaluator", "strategy", "index", "order", "style",
                                                  "finish", "upstream", "text")} | {"evalign": r.verdict,
                                                                                    "reason": r.reason,
                                                                                    "category": c})
    n = len(texts)
    print(f"LLMBar judge texts: {n:,} ({n // 2:,} comparison rows x 2 orders); upstream regexes re-applied: "
          f"{n - mismatch:,} of {n:,} reproduce upstream's winner")
    print(f"parse time: {seconds:.2f} s ({n / seconds:,.0f} texts/s; CPU {cpu:.2f} s); upstream's two regexes, "
          f"same texts: {upstream_seconds:.2f} s")
    print(f"agreement with upstream: {agree:,} / {n:,} = {agree / n:.2%}")
    for style in ("direct", "cot"):
        tot = by_style[(style, True)] + by_style[(style, False)]
        print(f"  {style:6s}: {by_style[(style, True)]:,} / {tot:,} = {by_style[(style, True)] / tot:.2%}")
    by_evaluator: Counter[tuple[str, bool]] = Counter(
        (t["evaluator"], r.verdict == t["upstream"]) for t, r in zip(texts, results, strict=True))
    print("  by evaluator: " + ", ".join(
        f"{e} {by_evaluator[(e, True)] / (by_evaluator[(e, True)] + by_evaluator[(e, False)]):.2%}"
        for e in sorted({e for e, _ in by_evaluator})))
    print("evalign status: " + ", ".join(f"{k} {v:,}" for k, v in status.most_common()))
    print(f"disagreements: {n - agree:,}")
    for c, k in cats.most_common():
        print(f"  {k:6,}  {c}")
        for e in examples[c][: args.examples]:
            txt = " ".join(e["text"].split())
            short = txt if len(txt) <= 220 else txt[:100] + " [...] " + txt[-110:]
            print(f"          {e['evaluator']}/{e['strategy']} {e['set']}#{e['index']} {e['order']}: {short!r}")
    if args.json:
        args.json.write_text(json.dumps({
            "texts": n, "agreement": agree / n, "agree": agree, "seconds": seconds, "cpu_seconds": cpu,
            "upstream_seconds": upstream_seconds,
            "upstream_reproduced": n - mismatch, "categories": dict(cats.most_common()),
            "status": dict(status), "disagreements": [e for c in cats for e in examples[c]],
        }, indent=1), encoding="utf-8")
    if args.write_table:
        write_table(args.write_table, [e for c in cats for e in examples[c]])
    if seconds > 2.0:
        print(f"WARNING: parsing took {seconds:.2f} s (> 2 s target)", file=sys.stderr)


if __name__ == "__main__":
    main()
