"""``evalign meta --selective``: its options, the request they make, and the terminal tables of the
:class:`~evalign.evaluate.selective.SelectiveReport` (see :mod:`evalign.evaluate.selective`)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from evalign.cli.common import CliError, console, err_console, print_table, split_multi
from evalign.errors import EvalignError
from evalign.io import write_json_atomic

SELECTIVE: Any = typer.Option(False, "--selective", help="Where can each judge be trusted: a confidence threshold "
                              "per judge (or cascade) with a guarantee of agreement with people (Trust or Escalate).")
RISK: Any = typer.Option(0.15, "--risk", help="With --selective: the largest share of verdicts given that may "
                                              "disagree with people.")
DELTA: Any = typer.Option(0.1, "--delta", help="With --selective: the chance the guarantee may fail.")
CASCADE: Any = typer.Option(None, "--cascade", help="With --selective: judges in order, cheap first (J1,J2,...): "
                                                    "each decides what it is sure of among what the earlier left.")
HOLDOUT: Any = typer.Option(None, "--holdout", help="With --selective: the share of items kept out of calibration "
                                                    "to report coverage and agreement on.")
SAVE_CALIBRATION: Any = typer.Option(None, "--save-calibration", help="With --selective: write the thresholds to "
                                                                      "this JSON file (for evalign escalate).")


def selective_request(selective: bool, risk: float, delta: float, cascade: str | None, holdout: float | None,
                      save: Path | None, *, seed: int, confidence: float, published: bool = False) -> Any:
    """The :class:`~evalign.evaluate.selective.SelectiveRequest` of the options (None without
    ``--selective``; its options without it are refused, and ``--selective`` with ``--published``)."""
    if selective and published:
        raise CliError("--selective calibrates the judges of one set: not with --published")
    if not selective:
        given = [o for o, v in (("--cascade", cascade), ("--holdout", holdout), ("--save-calibration", save)) if v]
        if given:
            raise CliError(f"{', '.join(given)} go with --selective")
        return None
    from evalign.judges.option_rules import check_options  # the rules every command's options follow

    check_options(risk=risk, delta=delta, holdout=holdout)
    from evalign.evaluate.selective import SelectiveRequest  # scipy: not at every command's start
    from evalign.meta.selective import SelectiveSettings

    try:
        settings = SelectiveSettings(alpha=risk, delta=delta)
        order = tuple(split_multi([cascade])) if cascade else ()
        if cascade is not None and not order:
            raise CliError("--cascade names the judges in order: J1,J2,...")
        return SelectiveRequest(settings, cascade=order, holdout=holdout, seed=seed, confidence=confidence)
    except EvalignError as e:
        msg = str(e).replace("field 'alpha'", "--risk").replace("field 'delta'", "--delta")
        raise CliError(msg.replace("field 'holdout'", "--holdout").replace("field 'cascade'", "--cascade")) from None


def with_selective(spec: Any, request: Any) -> Any:
    """``spec`` with the selective ``request`` (unchanged when None)."""
    import dataclasses

    return spec if request is None else dataclasses.replace(spec, selective=request)


@contextmanager
def selective_errors(request: Any) -> Iterator[None]:
    """Within this block, an error of the selective stage is shown with its option (``--cascade``,
    ``--selective``) instead of its field."""
    try:
        yield
    except EvalignError as e:
        text = str(e)
        if request is None or ("field 'cascade'" not in text and "field 'selective'" not in text):
            raise
        raise CliError(text.replace("field 'cascade': ", "--cascade: ").replace(
            "field 'selective': ", "--selective: ")) from None


def save_calibration(report: Any, path: Path | None, source: str) -> None:
    """Write ``report``'s calibration record (risk, delta, judges, thresholds, signatures) to ``path``
    (nothing when either is None), with each judge's spec and signature where ``evalign judge`` wrote
    them beside the verdict table ``source`` (what ``evalign judge --cascade`` runs)."""
    if report is None or path is None:
        return
    from evalign.evaluate.cascade import with_specs

    write_json_atomic(path, {**with_specs(report.record, source), "calibrated_on": source})
    err_console.print(f"[dim]calibration written to {escape(str(path))}[/dim]", highlight=False)


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}"


def selective_display(report: Any, confidence: float) -> Any:
    """The selective table as shown: a cascade's stages numbered before the judge, abstaining judges'
    threshold as ``abstain``, the interval in one column, the held-out figures (``--holdout``) last."""
    import pandas as pd

    rows = report.rows
    pct = round(100 * confidence)
    out = {
        "judge": [j if st in ("alone", "all") else f"{st}. {j}" for j, st in zip(rows["judge"], rows["stage"],
                                                                               strict=True)],
        "n": rows["n"],
        "threshold": ["abstain" if isinstance(t, float) and math.isinf(t) else _fmt(t, 4) for t in rows["threshold"]],
        "coverage": [_fmt(v) for v in rows["coverage"]],
        "accuracy": [_fmt(v) for v in rows["selective_accuracy"]],
        f"{pct}% CI": ["-" if math.isnan(lo) else f"[{lo:.3f}, {hi:.3f}]"
                       for lo, hi in zip(rows["ci_low"], rows["ci_high"], strict=True)],
        "bound": [_fmt(v) for v in rows["risk_bound"]],
        "decided": [_fmt(v) for v in rows["decided"]],
        "people": [_fmt(v) for v in rows["to_people"]],
    }
    if report.holdout is not None:
        out["held-out cov."] = [_fmt(v) for v in rows["holdout_coverage"]]
        out["held-out acc."] = [_fmt(v) for v in rows["holdout_accuracy"]]
    return pd.DataFrame(out)


def render_selective(report: Any, confidence: float) -> None:
    """The selective tables, the guarantee of each row in words, the judges refused and the notes."""
    s = report.settings
    title = (f"Where can each judge be trusted? Confidence thresholds by fixed-sequence testing (risk {s.alpha:g}, "
             f"delta {s.delta:g}, Clopper-Pearson bound of the disagreement, >= {s.min_items} items per candidate); "
             "coverage (of the items reaching the judge) and accuracy of the verdicts given, on the calibration items; "
             "decided / people: share of all items" + (
                 f"; held-out: {report.holdout:g} of the items kept out of calibration" if report.holdout else ""))
    print_table(selective_display(report, confidence), title=title, digits=3)
    for judge, stage, g in zip(report.rows["judge"], report.rows["stage"], report.rows["guarantee"], strict=True):
        where = judge if stage == "alone" else "the whole cascade" if stage == "all" else f"stage {stage} ({judge})"
        console.print(f"{where}: {g}", highlight=False, markup=False, emoji=False)
    for why in report.refused.values():
        err_console.print(f"[yellow]refused[/yellow]: {escape(why)}", highlight=False, emoji=False)
    for note in report.notes:
        err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False, emoji=False)
    err_console.print("[dim]note: the guarantee holds for new items drawn like the calibration items (exchangeable); "
                      "the items left to people are the hard ones, not a random sample[/dim]", highlight=False)
