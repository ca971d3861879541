"""A leaderboard from a file of pairwise verdicts: one spec in (:class:`LeaderboardSpec`), one result out
(:class:`LeaderboardOutcome`). Reads the battle table (:func:`evalign.io.read_battles`: errors name
file, line and field), picks the ranked column (a verdict column, the output of ``evalign judge`` in
relative mode, or a panel of several columns) and runs :func:`evalign.rank.leaderboard`.
The command line, ``evalign run`` and the Python API all come through :func:`run_leaderboard`; the
terminal and the report show the outcome with :mod:`evalign.report.boards`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.errors import InputError, UsageError, did_you_mean
from evalign.io import read_battles
from evalign.judges.option_rules import check_options
from evalign.meta.resampling import MAX_RESAMPLES
from evalign.rank import (
    A_WINS,
    B_WINS,
    TIE,
    UNPARSEABLE,
    BTSettings,
    LCSettings,
    Leaderboard,
    LeaderboardSettings,
    PanelResult,
    has_verdicts,
    judge_battles,
    judge_panel,
    leaderboard,
    read_verdicts,
    self_preference,
)
from evalign.rank.panel import RULES as PANEL_RULES
from evalign.rank.panel import PanelSettings, parse_panel, verdict_votes

#: the column the ranked verdicts are in when a panel is ranked
PANEL_COLUMN = "panel"
#: the item a battle's instruction comes from, when ``id`` names the pair (see :func:`battles_of`)
ITEM_ID = "item_id"


@dataclass(frozen=True)
class LeaderboardSpec:
    """What to rank and how.

    Attributes:
        verdict: a verdict column (A / B / tie / unparseable); the default when neither ``judge``
            nor ``panel`` is given is ``"verdict"``.
        judge: the name of a judge column of ``evalign judge`` output in relative mode (``NAME``,
            ``NAME.ab``, ``NAME.ba``): both presentation orders become battles.
        panel: two or more verdict columns combined into one judge (:func:`judge_panel`).
        panel_rule: ``"majority"`` (plurality vote, ``tie_rule`` without a winner), ``"mean"`` /
            ``"median"`` (of the codes A = +1, tie = 0, B = -1; its sign is the verdict), ``"weighted"``
            (with ``panel_weights``) or ``"dawid-skene"`` (see :mod:`evalign.rank.panel`).
        tie_rule: the panel's verdict when a majority vote has no winner (``tie``, ``abstain`` -- its
            old name ``unparseable`` kept -- or ``first``).
        panel_name: the panel's column name (``--panel NAME=COL1,COL2``; default ``panel``).
        panel_min: fewer members with a verdict than this: no verdict (``--panel-min``).
        panel_weights: the members' weights of the ``weighted`` rule.
        board: the statistics' settings.
    """

    verdict: str | None = None
    judge: str | None = None
    panel: tuple[str, ...] = ()
    panel_rule: str = "majority"
    tie_rule: str = "tie"
    board: LeaderboardSettings = field(default_factory=LeaderboardSettings)
    panel_name: str | None = None
    panel_min: int = 1
    panel_weights: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        given = [n for n, v in (("--verdict", self.verdict), ("--judge", self.judge), ("--panel", self.panel)) if v]
        if len(given) > 1:
            raise UsageError(f"give one of --verdict, --judge or --panel, not {' and '.join(given)}")
        if self.panel and len(self.panel) < 2:
            raise UsageError("--panel needs at least two columns")
        if self.panel_rule not in PANEL_RULES:
            raise UsageError(f"unknown panel rule {self.panel_rule!r}; choose {', '.join(PANEL_RULES)}")
        self.panel_settings()  # a bad tie rule or minimum: the option's error now

    def panel_settings(self) -> PanelSettings:
        """The panel's rule as :class:`~evalign.rank.panel.PanelSettings`."""
        return PanelSettings(rule=self.panel_rule, tie=self.tie_rule, min_members=self.panel_min,
                             weights=self.panel_weights)

    @property
    def column(self) -> str:
        """The ranked column's name (the judge, the verdict column or ``panel``)."""
        if self.panel:
            return self.panel_name or PANEL_COLUMN
        return self.judge or self.verdict or "verdict"


@dataclass(frozen=True)
class JudgeTrust:
    """The agreement with humans of the judge behind a leaderboard, from a meta-evaluation: the judge's
    ``column`` there, the trust table's ``statistic`` and ``level``, the ``value`` with its interval
    ``low``..``high`` (NaN without one), ``n`` (items or systems; None when unknown) and ``source``
    (what it was measured on, e.g. ``llmbar``)."""

    column: str
    statistic: str
    level: str
    value: float
    low: float
    high: float
    n: int | None
    source: str

    def line(self) -> str:
        """One line: ``preference_accuracy 0.620 [0.550, 0.690] (item level, n = 100) on llmbar``."""
        interval = f" [{self.low:.3f}, {self.high:.3f}]" if np.isfinite(self.low) and np.isfinite(self.high) else ""
        n = f", n = {self.n}" if self.n is not None else ""
        return f"{self.statistic} {self.value:.3f}{interval} ({self.level} level{n}) on {self.source}"


def judge_trust(result: Any, column: str) -> JudgeTrust | None:
    """The trust of judge ``column`` in a meta-evaluation ``result`` (an
    :class:`~evalign.evaluate.EvalResult`, or its JSON form: the output of ``evalign meta --json`` or a
    run's ``evaluation.json``): its row of group ``(all)`` in the first trust table that has one; None
    when the result did not rank that column."""
    data = result.to_json() if hasattr(result, "to_json") else result
    if not isinstance(data, dict) or not isinstance(data.get("trust"), list):
        raise InputError("not a meta-evaluation result (no 'trust' tables): give the output of "
                         "`evalign meta --json` or a run's evaluation.json")
    for table in data["trust"]:
        for row in table.get("rows", []):
            if row.get("metric") == column and row.get("group", "(all)") == "(all)" and row.get("value") is not None:
                n = row.get("n")
                return JudgeTrust(column, str(table.get("statistic")), str(table.get("level")),
                                  _number(row.get("value")), _number(row.get("ci_low")), _number(row.get("ci_high")),
                                  int(n) if n is not None else None,
                                  str(data.get("source") or data.get("title") or "a meta-evaluation"))
    return None


def _number(v: Any) -> float:
    return float(v) if v is not None else float("nan")


def read_judge_trust(path: str | Path, column: str) -> JudgeTrust:
    """:func:`judge_trust` of the JSON file at ``path``; an error names the file when it is not a
    meta-evaluation result or did not rank ``column``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read a meta-evaluation result ({getattr(e, 'strerror', None) or e})",
                         file=str(path)) from None
    try:
        trust = judge_trust(data, column)
    except InputError as e:
        raise InputError(e.reason, file=str(path)) from None
    if trust is None:
        ranked = sorted({str(r.get("metric")) for t in data["trust"] for r in t.get("rows", [])
                         if r.get("kind") == "judge"})
        raise InputError(f"the judge column {column!r} was not ranked there (judges ranked: "
                         f"{', '.join(ranked) or 'none'})", file=str(path))
    return trust


@dataclass(frozen=True)
class LeaderboardOutcome:
    """The leaderboard and what it was computed from; ``trust``: the agreement with humans of the
    judge whose verdicts were ranked, where it is known (None: unknown)."""

    board: Leaderboard
    spec: LeaderboardSpec
    source: str
    n_rows: int
    panel: PanelResult | None = None
    trust: JudgeTrust | None = None
    #: the prediction-powered leaderboard (``--human``): :class:`evalign.rank.ppi_board.PPIBoard`
    ppi: Any = None
    #: the style-controlled ratings (``--style-control``): :class:`evalign.rank.style.StyleControl`
    style: Any = None
    #: what the reader must know of the verdicts read (beside the board's own notes)
    notes: tuple[str, ...] = ()

    def judge_line(self) -> str:
        """Which judge produced the verdicts and what is known of its agreement with humans."""
        spec = self.spec
        who = f"judge: panel of {', '.join(spec.panel)}" if spec.panel else f"judge: {spec.column}"
        if spec.board.judges:
            who += f" (model {', '.join(spec.board.judges)})"
        if self.trust is None:
            return f"{who}; agreement with humans: unknown (see --trust-from)"
        return f"{who}; agreement with humans: {self.trust.line()}"


def _used_columns(spec: LeaderboardSpec, columns: Any) -> list[str]:
    if spec.panel:
        return list(spec.panel)
    if spec.judge:
        return [spec.judge] + [c for c in (f"{spec.judge}.ab", f"{spec.judge}.ba") if c in columns]
    return [spec.column]


def _in_file(table: pd.DataFrame, e: InputError) -> InputError:
    """An error of the statistics about a row of ``table`` (``row N``, or no place), naming the file
    and the row's line instead."""
    lines = table.attrs.get("lines")
    line = lines[e.line - 1] if lines and e.line and e.line <= len(lines) else e.line
    return InputError(e.reason, file=table.attrs.get("source"), line=line, field=e.field,
                      line_word=table.attrs.get("line_word", "line"))


def _check_rows(table: pd.DataFrame, columns: list[str]) -> None:
    """Every verdict readable and no system battling itself; an error names the file and the line
    of the first bad row."""
    try:
        for c in columns:
            read_verdicts(table[c].to_numpy(), c)
        same = np.flatnonzero(table["system_a"].astype(str).to_numpy() == table["system_b"].astype(str).to_numpy())
        if same.size:
            raise InputError("a system battles itself (system_a is system_b)", line=int(same[0]) + 1,
                             field="system_b", line_word="row")
    except InputError as e:
        raise _in_file(table, e) from None


def _panel(table: pd.DataFrame, spec: LeaderboardSpec) -> tuple[pd.DataFrame, PanelResult]:
    cols = list(spec.panel)
    settings = spec.panel_settings()
    if settings.rule in ("mean", "median"):  # of the codes A = +1, tie = 0, B = -1; the sign is the verdict
        codes = pd.DataFrame(verdict_votes(table, cols), columns=cols)
        res = judge_panel(codes, cols, settings=settings, values="grades")
        mean = np.asarray(res.combined, dtype=float)
        verdicts = np.where(np.isnan(mean), "unparseable", np.where(mean > 0, "A", np.where(mean < 0, "B", "tie")))
    else:
        res = judge_panel(table, cols, settings=settings)
        verdicts = np.asarray(res.combined, dtype=object)
    return table.assign(**{spec.column: verdicts}), res


def battles_of(table: pd.DataFrame, spec: LeaderboardSpec) -> tuple[pd.DataFrame, PanelResult | None]:
    """The battle table to rank (verdicts in column ``verdict``) and the panel's agreement, if any.
    Battles are grouped by instruction by ``item_id`` where every row has one (pairs exported with
    ``evalign datasets export --as pairs --against``, whose ``id`` is unique per pair), else ``id``."""
    _check_rows(table, _used_columns(spec, table.columns))
    if ITEM_ID in table.columns and table[ITEM_ID].notna().all():
        table = table.assign(id=table[ITEM_ID].astype(str))
    if spec.judge:
        return judge_battles(table, spec.judge), None
    panel = None
    if spec.panel:
        table, panel = _panel(table, spec)
    if spec.column == "verdict":
        return table, panel
    # the ranked column becomes "verdict": a column of that name the file has is not the one ranked
    return table.drop(columns=["verdict"], errors="ignore").rename(columns={spec.column: "verdict"}), panel


def run_leaderboard(source: str | Path | pd.DataFrame, spec: LeaderboardSpec = LeaderboardSpec(), *,
                    trust: JudgeTrust | None = None, human: str | Path | pd.DataFrame | None = None,
                    human_verdict: str = "verdict", style_control: bool = False,
                    length_unit: str = "words") -> LeaderboardOutcome:
    """Read a verdict table and rank its systems (module doc); errors name the file, line and field.
    ``trust``: the ranked judge's agreement with humans, when known (:func:`judge_trust`).
    ``human``: human verdicts (column ``human_verdict``) on a subset of the same battles: adds the
    prediction-powered leaderboard (:func:`evalign.rank.prediction_powered.ppi_board_of`).
    ``style_control``: adds Bradley-Terry ratings with length and markdown as covariates
    (``length_unit`` words or chars; :func:`evalign.rank.prediction_powered.style_board_of`)."""
    table = read_battles(source, columns=_used_columns(spec, ()))
    battles, panel = battles_of(table, spec)
    _check_systems(spec, battles, str(table.attrs["source"]))
    codes = read_verdicts(battles["verdict"].to_numpy(), spec.column)
    if not np.isin(codes, (A_WINS, B_WINS, TIE)).any():
        n_bad = int((codes == UNPARSEABLE).sum())
        raise InputError(f"no resolved verdict to rank: {n_bad} unparseable, {len(codes) - n_bad} missing",
                         file=str(table.attrs["source"]), field=spec.column)
    try:
        board = leaderboard(battles, settings=spec.board)
    except InputError as e:
        if e.file is not None:
            raise
        raise InputError(e.reason, file=str(table.attrs["source"]), field=e.field) from None
    ppi = style = None
    if human is not None or style_control:
        from evalign.rank.prediction_powered import ppi_board_of, style_board_of

        alpha = 1 - spec.board.bt.confidence
        if human is not None:
            ppi = ppi_board_of(battles, human, column=human_verdict, baseline=spec.board.baseline, alpha=alpha,
                               bt=spec.board.bt)
        if style_control:
            style = style_board_of(battles, bt=spec.board.bt, alpha=alpha, length_unit=length_unit,
                                   source=str(table.attrs["source"]))
    return LeaderboardOutcome(board, spec, str(table.attrs["source"]), len(table), panel, trust, ppi, style,
                              notes=order_notes(table, spec))


def _check_systems(spec: LeaderboardSpec, battles: pd.DataFrame, source: str) -> None:
    """Every option that names a system names one of the file's (with a "did you mean")."""
    systems = sorted(set(battles["system_a"].astype(str).unique()) | set(battles["system_b"].astype(str).unique()))
    for option, name in (("--baseline-system", spec.board.baseline), ("--anchor", spec.board.bt.anchor)):
        if name is not None and name not in systems:
            raise UsageError(f"{option} {name!r} is not a system of {source}{did_you_mean(name, systems)} "
                             f"(systems: {', '.join(systems)})")
    if spec.board.skip_self:  # the judge models name the systems to drop
        matched = {j for j, _ in self_preference(battles, spec.board.judges).pairs}
        for name in spec.board.judges:
            if name not in matched:
                raise UsageError(f"--judge-model {name!r} with --skip-self: no system of {source} is that judge"
                                 f"{did_you_mean(name, systems)}, so nothing would be dropped (systems: "
                                 f"{', '.join(systems)})")


def order_notes(table: pd.DataFrame, spec: LeaderboardSpec) -> tuple[str, ...]:
    """What the reader must know of the presentation orders behind a ``--judge`` ranking: a judge
    with verdicts in the B-first order (``NAME.ba``) only is ranked from that order alone."""
    if spec.judge and has_verdicts(table, f"{spec.judge}.ba") and not has_verdicts(table, f"{spec.judge}.ab"):
        return (f"{spec.judge}.ab has no verdict: only the B-first order ({spec.judge}.ba) was judged, and its "
                "battles alone are ranked",)
    return ()


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UsageError(f"{option} must be one of {', '.join(choices)}, got '{value}'")
    return value


def leaderboard_spec(*, verdict: str | None = None, judge: str | None = None, panel: Sequence[str] = (),
                     panel_rule: str = "majority", baseline: str | None = None, anchor: str | None = None,
                     bootstrap: int = 1000, resample: str = "battles", seed: int = 0, alpha: float = 0.05,
                     orders: str = "pool", lc: bool = True, difficulty: str = "fitted",
                     judge_models: Sequence[str] = (), skip_self: bool = False, panel_tie: str = "tie",
                     panel_min: int = 1) -> LeaderboardSpec:
    """The options of ``evalign leaderboard`` (and of a run config's ``leaderboards`` entry) as one frozen
    :class:`LeaderboardSpec`; a bad value is a :class:`~evalign.errors.UsageError` naming the option."""
    if not (isinstance(bootstrap, int) and bootstrap >= 0):  # (0: no intervals; not meta's rule)
        raise UsageError(f"--bootstrap must be an integer >= 0 (0: no intervals), got {bootstrap!r}")
    if bootstrap > MAX_RESAMPLES:
        raise UsageError(f"--bootstrap must be at most {MAX_RESAMPLES:,}, got {bootstrap:,}")
    check_options(alpha=alpha, seed=seed)  # the rules every command's options follow
    if skip_self and not judge_models:
        raise UsageError("--skip-self needs --judge-model NAME (the judge whose own outputs to drop)")
    bt = BTSettings(anchor=anchor, n_bootstrap=bootstrap, seed=seed, alpha=alpha,
                    cluster=_choice("--resample", resample, ("battles", "items")) == "items")
    board = LeaderboardSettings(
        baseline=baseline, orders=_choice("--orders", orders, ("pool", "combine")), bt=bt,  # type: ignore[arg-type]
        lc=LCSettings(difficulty=_choice("--difficulty", difficulty, ("fitted", "zero"))) if lc else None,  # type: ignore[arg-type]
        judges=tuple(judge_models), skip_self=skip_self,
    )
    name, members = panel_members(panel)
    return LeaderboardSpec(verdict=verdict, judge=judge, panel=members, board=board, panel_name=name,
                           panel_rule=_choice("--panel-rule", panel_rule, PANEL_RULES), tie_rule=panel_tie,
                           panel_min=panel_min)


def panel_members(values: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """``--panel`` values as (name, members): values without ``NAME=`` are the members of one panel
    (each value may hold several, comma-separated), named ``panel``; or one ``NAME=COL1,COL2,...``."""
    named = [v for v in values if "=" in v]
    if not named:
        return None, tuple(x.strip() for v in values for x in v.split(",") if x.strip())
    if len(values) > 1:
        raise UsageError("--panel: a leaderboard ranks one panel: give NAME=COL1,COL2,... once, or the members "
                         "without a name")
    spec = parse_panel(named[0])
    return spec.name, spec.members


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def panel_summary(panel: PanelResult) -> dict[str, Any]:
    """The panel's members and agreement, JSON-ready."""
    return {
        "members": list(panel.members),
        "rule": panel.how,
        "fleiss_kappa": _finite(panel.fleiss_kappa),
        "krippendorff_alpha": _finite(panel.krippendorff_alpha),
        "mean_cohen_kappa": _finite(panel.mean_cohen_kappa),
        "cohen_kappa": {f"{a} vs {b}": _finite(v) for (a, b), v in panel.cohen_kappa.items()},
        "n_complete": panel.n_complete,
    }


def outcome_dict(out: LeaderboardOutcome) -> dict[str, Any]:
    """The whole result, JSON-ready: the system table, the win-rate matrix, settings, notes, panel."""
    b = out.board
    bt = b.bt.settings
    pos = b.positions
    return {
        "source": out.source,
        "column": out.spec.column,
        "n_rows": out.n_rows,
        "baseline": b.settings.baseline,
        "orders": b.settings.orders,
        "bradley_terry": {"anchor": bt.anchor, "scale": bt.scale, "n_bootstrap": bt.n_bootstrap,
                          "resample": "items" if bt.cluster else "battles", "confidence": bt.confidence,
                          "seed": bt.seed, "alpha": bt.alpha, "converged": b.bt.converged},
        "lc_difficulty": b.lc.difficulty_source if b.lc is not None else None,
        "position_agreement": None if pos is None else {
            "agreement": _finite(pos.agreement), "n_pairs": pos.n_pairs, "n_unmatched": pos.n_unmatched,
            "first_position_rate": _finite(pos.first_position_rate)},
        "systems": b.table.to_dict(orient="records"),
        "win_rate_matrix": {"systems": list(b.matrix.systems),
                            "rate": [[_finite(v) for v in row] for row in b.matrix.rate],
                            "n": b.matrix.n.astype(int).tolist()},
        "panel": panel_summary(out.panel) if out.panel is not None else None,
        "judge": {"column": out.spec.column, "models": list(out.spec.board.judges),
                  "trust": None if out.trust is None else {**asdict(out.trust), "value": _finite(out.trust.value),
                                                           "low": _finite(out.trust.low),
                                                           "high": _finite(out.trust.high)}},
        "notes": [*out.notes, *b.notes],
        **_extras_dict(out),
    }


def _extras_dict(out: LeaderboardOutcome) -> dict[str, Any]:
    """The PPI leaderboard and the style-controlled ratings, when asked for."""
    if out.ppi is None and out.style is None:
        return {}
    from evalign.rank.prediction_powered import ppi_dict, style_dict

    return {"ppi": ppi_dict(out.ppi) if out.ppi is not None else None,
            "style_control": style_dict(out.style) if out.style is not None else None}


__all__ = ["ITEM_ID", "PANEL_COLUMN", "JudgeTrust", "LeaderboardOutcome", "LeaderboardSpec", "battles_of", "judge_trust",
           "leaderboard_spec", "outcome_dict", "panel_summary", "read_judge_trust", "run_leaderboard"]
