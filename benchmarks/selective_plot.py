"""The risk-coverage curves of the docs' page "Where can I trust it?", drawn by the report code
(``evalign report --selective``, :func:`evalign.report.figures.risk_coverage`): per judge and candidate
threshold, the share of pairs at or above it (coverage) against the disagreement with people among them
(solid) and its Clopper-Pearson upper bound at level 1 - delta (dashed), the threshold chosen at
``--risk`` marked. By default Trust or Escalate's three released judges (read from the data folder);
with ``--table FILE --judge COL`` a judged pair table (e.g. ``benchmarks/selective_smollm2.py``'s).

    python benchmarks/selective_plot.py [--risk 0.15] [--delta 0.1] [--out docs/img/selective_risk_coverage.png]
    python benchmarks/selective_plot.py --table /tmp/llmbar_smollm2_logprobs.jsonl \
        --judge judge:smollm2-135m/vanilla-logprobs --out docs/img/selective_smollm2_risk_coverage.png
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RELEASED = "judge:mistral-7b-instruct,judge:gpt-3.5-turbo,judge:gpt-4-turbo"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--risk", type=float, default=0.15)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--table", type=Path, default=None, help="a judged pair table (default: trust-or-escalate)")
    ap.add_argument("--judge", default=RELEASED, help="judge columns (comma-separated)")
    ap.add_argument("--pref", default="pref_1")
    ap.add_argument("--out", type=Path, default=Path("docs/img/selective_risk_coverage.png"))
    a = ap.parse_args()
    data = ["--dataset", "trust-or-escalate"] if a.table is None else [str(a.table), "--pref", a.pref]
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "evalign", "report", *data, "-m", a.judge, "--selective", "--risk",
                        str(a.risk), "--delta", str(a.delta), "--bootstrap", "200", "-o", str(html)], check=True)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / "report_files" / "figures" / "risk_coverage.png", a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
