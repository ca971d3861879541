"""The panel options shared by ``meta``, ``leaderboard`` and ``judge`` (``--panel-rule``, ``--panel-tie``,
``--panel-min``, ``--panel-calibration``, ``--panel-soft``; their rules: :data:`evalign.judges.option_rules.PANEL_RULES`)
and the helpers that make :class:`~evalign.rank.panel.PanelSpec` of them (see :mod:`evalign.rank.panel`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from evalign.errors import UsageError

PANEL_RULE: Any = typer.Option("majority", "--panel-rule", help="How a panel decides: majority, weighted (by each "
                               "member's accuracy on --panel-calibration), mean, median (grades) or dawid-skene.")
PANEL_TIE: Any = typer.Option("tie", "--panel-tie", help="A majority without a plurality: tie (the verdict tie), "
                              "abstain (no verdict) or first (the first member's verdict).")
PANEL_MIN: Any = typer.Option(1, "--panel-min", help="An item on which fewer members gave a verdict gets none "
                              "(counted and said).")
PANEL_CALIBRATION: Any = typer.Option(None, "--panel-calibration", help="Labelled items (the members' columns and a "
                                      "label column, or pref_* columns) whose accuracy per member weighs its vote "
                                      "(--panel-rule weighted); never the evaluated items.")
PANEL_SOFT: Any = typer.Option(False, "--panel-soft", help="A panel's confidence: the mean probability its members "
                               "(J.p_a) give its verdict, instead of the share of votes behind it.")


def panel_settings(rule: str = "majority", tie: str = "tie", minimum: int = 1, soft: bool = False,
                   weights: Any = None) -> Any:
    """The :class:`~evalign.rank.panel.PanelSettings` of the options (a bad value: a usage error naming it)."""
    from evalign.rank.panel import PanelSettings  # numpy: not at every command's start

    return PanelSettings(rule=rule, tie=tie, min_members=minimum, soft=soft, weights=weights)


def panel_specs(values: list[str], settings: Any, *, option: str = "--panel") -> list[Any]:
    """Each ``NAME=COL1,COL2,...`` of ``values`` as a :class:`~evalign.rank.panel.PanelSpec`; names unique."""
    from evalign.rank.panel import parse_panel

    specs = [parse_panel(v, settings, option=option) for v in values]
    names = [p.name for p in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{option}: panel {twice[0]} named twice")
    return specs


def check_panel_options(given: bool, rule: str, tie: str, minimum: int, soft: bool, calibration: Path | None) -> None:
    """The panel options without a panel are refused (one line, exit 2), as every option that needs another."""
    if given:
        return
    used = [o for o, v in (("--panel-rule", rule != "majority"), ("--panel-tie", tie != "tie"),
                           ("--panel-min", minimum != 1), ("--panel-soft", soft),
                           ("--panel-calibration", calibration is not None)) if v]
    if used:
        raise UsageError(f"{', '.join(used)} go with --panel")


def check_panel_calibration(rule: str, calibration: Path | None, evaluated: Path | None = None, *,
                            holdout: float | None = None) -> None:
    """The ``weighted`` rule's weights come from labelled items apart from the evaluated ones: without
    ``--panel-calibration`` it is refused (with ``--selective --holdout`` too: the split into calibration and
    held-out items is drawn over the pairs every judge, the panel included, compared, so the panel's weights
    cannot be fitted on the calibration part before that split exists), and a calibration file that is the
    evaluated ``FILE`` itself is refused (the weights would be fitted on the items they are evaluated on)."""
    if rule != "weighted":
        return
    if calibration is None:
        if holdout is not None:
            raise UsageError("--panel-rule weighted with --selective --holdout: the weights are not fitted on the "
                             "calibration part (the split depends on the panel's own verdicts); give the weights' "
                             "labelled items apart: --panel-calibration FILE (e.g. the labelled items kept out of "
                             "FILE)")
        raise UsageError("--panel-rule weighted needs --panel-calibration FILE (labelled items, never the evaluated "
                         "ones)")
    if evaluated is not None and calibration.exists() and Path(evaluated).exists() \
            and calibration.resolve() == Path(evaluated).resolve():
        raise UsageError(f"--panel-calibration {calibration} is FILE itself: the weights would be fitted on the items "
                         "they are evaluated on (give labelled items apart from FILE)")


def calibration_weights_of(path: Path, members: list[str], *, graded: bool, label: str | None = None) -> dict[str, float]:
    """The ``weighted`` rule's member weights from the labelled items of ``path`` (JSONL, JSON, CSV,
    Parquet): the members' columns and a ``label`` column (``label``: another name; pairwise: a verdict
    A / B / tie or +1 / -1 / 0; grades: a number), or annotator columns ``pref_*`` (their majority)."""
    import numpy as np
    import pandas as pd

    from evalign.io.readers import detect_format, iter_records
    from evalign.meta.agreement import majority_vote
    from evalign.rank.panel import calibration_weights, verdict_votes

    if not path.exists():
        raise UsageError(f"--panel-calibration: no such file {path}")
    table = pd.DataFrame([rec for _, rec in iter_records(path, detect_format(path))])
    missing = [m for m in members if m not in table.columns]
    if missing:
        raise UsageError(f"--panel-calibration {path}: no column {missing[0]} (a member of the panel)")
    col = label or "label"
    prefs = sorted(c for c in table.columns if str(c).startswith("pref_"))
    if col in table.columns:
        if graded:
            y = pd.to_numeric(table[col], errors="coerce").to_numpy(float)
        else:
            text = table[col].astype(str).str.strip()
            signed = pd.to_numeric(text, errors="coerce")
            y = np.where(signed.notna(), signed.to_numpy(float), verdict_votes(table.assign(_y=text), ["_y"])[:, 0])
    elif prefs and not graded:
        y = majority_vote(np.column_stack([pd.to_numeric(table[c], errors="coerce").to_numpy(float) for c in prefs]))
    else:
        raise UsageError(f"--panel-calibration {path}: no label column ({col}) and no pref_* columns")
    if graded:
        votes = np.column_stack([pd.to_numeric(table[m], errors="coerce").to_numpy(float) for m in members])
    else:
        votes = verdict_votes(table, members)
    return calibration_weights(votes, y, members)


def add_panels(table: Any, panels: list[Any], *, graded: bool) -> tuple[Any, list[Any]]:
    """``table`` with each panel's columns (``NAME``, ``NAME.confidence``, ``NAME.confidence_source``) and
    the :class:`~evalign.rank.panel.PanelResult` of each; a missing member is a usage error naming it."""
    from evalign.errors import InputError
    from evalign.rank.panel import add_panel_columns

    results = []
    for p in panels:
        missing = [m for m in p.members if m not in table.columns]
        if missing:
            raise UsageError(f"--panel {p.name}: no judge column {missing[0]} in the table")
        try:
            table, res = add_panel_columns(table, p, values="grades" if graded else "verdicts")
        except InputError as e:
            raise UsageError(f"--panel {p.name}: {e}") from None
        results.append(res)
    return table, results


def panel_notes(panels: list[Any], results: list[Any]) -> list[str]:
    """One line per panel: its members, rule and what it could not decide (below --panel-min, no plurality)."""
    from evalign.rank.panel import describe

    out = []
    for p, r in zip(panels, results, strict=True):
        line = f"panel {p.name} = {', '.join(p.members)} ({describe(p)}; confidence: {r.confidence_source})"
        if r.n_below_min:
            line += f"; {r.n_below_min} items with fewer than {p.settings.min_members} members' verdicts: no verdict"
        if r.n_no_plurality:
            line += f"; {r.n_no_plurality} without a plurality (tie rule {p.settings.tie})"
        out.append(line)
    return out
