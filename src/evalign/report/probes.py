"""The bias probes' report card (judge x probe) as a display table and as a section of the HTML report
(:class:`evalign.report.html.Section`); it renders the JSON form of
:class:`evalign.evaluate.probe.ProbeCard` and computes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.report.html import Section, render_html


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * float(v):.1f}%"


def _interval(lo: Any, hi: Any) -> str:
    return "-" if lo is None or hi is None else f"[{100 * float(lo):.1f}, {100 * float(hi):.1f}]"


def _p(v: Any) -> str:
    if v is None:
        return "-"
    return "<0.001" if float(v) < 0.001 else f"{float(v):.3f}"


def card_display(cards: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per judge x probe: n, changed (share and exact interval), toward / away the perturbed
    response, the sign test's p-value; self-enhancement without humans: the judge's own-win share."""
    rows = []
    for card in cards:
        for p in card["probes"]:
            f, own = p.get("flips"), p.get("own")
            row = {"judge": card["judge"], "probe": p["probe"], "n": "-", "changed": "-", "interval": "-",
                   "toward": "-", "away": "-", "p (sign test)": "-", "status": p["status"]}
            if f is not None:
                row.update(n=str(f["n"]), changed=_pct(f["changed"]), interval=_interval(f["changed_low"], f["changed_high"]),
                           toward=str(f["toward"]), away=str(f["away"]), **{"p (sign test)": _p(f["p_value"])})
            elif own is not None:
                row.update(n=str(own["n"]), changed=f"own wins {_pct(own['share'])}",
                           interval=_interval(own["low"], own["high"]), **{"p (sign test)": _p(own["p_value"])})
            rows.append(row)
    return pd.DataFrame(rows)


def probe_section(cards: Sequence[Mapping[str, Any]]) -> Section:
    """The report's section of bias probes: the card table, then what each probe compared and why a
    probe is n/a."""
    s = Section("bias_probes", "Judge bias probes")
    s.text = ("Each probe perturbs every pair (one response, or the judge's prompt) and judges it again: "
              "'changed' is the share of verdicts that changed (exact 95% interval), 'toward' / 'away' count the "
              "changes toward / away from the perturbed response, and p is the exact sign test of no effect "
              "(a change as likely either way).")
    s.tables["Bias probes"] = card_display(cards)
    for card in cards:
        s.items.append(f"{card['judge']} ({card.get('model') or 'model unknown'}) on {card['source']}: "
                       f"{card['n_pairs']} pairs, seed {card['seed']}; {card['signature']}")
        for p in card["probes"]:
            what = p["compared"] or "n/a"
            s.items.append(f"{p['probe']} ({p['bias']}; {p['source']}): {what}" + (f" ({p['note']})" if p["note"] else ""))
    return s


def write_probe_report(cards: Sequence[Mapping[str, Any]], path: str | Path, title: str = "Judge bias probes") -> Path:
    """A self-contained HTML page holding :func:`probe_section` (written atomically)."""
    from evalign import __version__
    from evalign.io import write_text_atomic

    page = render_html(title, None, [probe_section(cards)], f"Made with evalign {__version__}.")
    write_text_atomic(path, page)
    return Path(path)
