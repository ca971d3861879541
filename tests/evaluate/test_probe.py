"""Flip counting on scripted judges with known behaviour (an in-process backend that reads the LLMBar
prompt it is sent): a judge that always prefers the longer answer flips exactly on the pairs where a
probe makes the other response the longer one and never on position; a judge that always picks the
first answer flips on every pair under the swap, toward the response shown first; a judge that follows
the bandwagon note moves toward the named response. The runner's cache makes a second run call nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalign.backends import Generation
from evalign.backends.base import Backend
from evalign.backends.types import Choice, Usage
from evalign.cache import Cache
from evalign.evaluate.probe import ORIGINAL, ProbeSettings, run_probes
from evalign.judges import get_judge, read_pairs
from evalign.judges.perturb import PROBE_COLUMN, TARGET_COLUMN


def shown(req: Any) -> tuple[str, str, str]:
    """The system prompt and the two outputs of an llmbar_vanilla prompt, as shown."""
    system = req.messages[0]["content"] if req.messages[0]["role"] == "system" else ""
    user = req.messages[-1]["content"]
    a = user.split("# Output (a):\n", 1)[1].split("\n\n# Output (b):\n", 1)[0]
    b = user.split("# Output (b):\n", 1)[1].split("\n\n# Which is better", 1)[0]
    return system, a, b


class Scripted(Backend):
    """Answers ``Output (a)`` / ``Output (b)`` by a rule of the shown prompt; counts calls."""

    kind = "scripted"

    def __init__(self, rule: Any, model: str = "scripted-judge") -> None:
        super().__init__()
        self.rule, self.model, self.calls = rule, model, 0
        self.concurrency = 4

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model}

    async def generate(self, req: Any) -> Generation:
        self.calls += 1
        return Generation.from_choices([Choice(f"Output ({self.rule(*shown(req))})", "stop")], Usage(1, 1))


def longer(system: str, a: str, b: str) -> str:
    return "a" if len(a) > len(b) else "b"


def first(system: str, a: str, b: str) -> str:
    return "a"


def bandwagon(system: str, a: str, b: str) -> str:
    if "believe that Output (b)" in system:
        return "b"
    return "a" if "believe that Output (a)" in system or len(a) > len(b) else "b"


def table(n: int = 12) -> pd.DataFrame:
    """Pairs of distinct lengths (never equal, before or after a probe)."""
    rows = [{"id": f"p{i}", "instruction": f"Explain item {i}.", "system_a": "alpha", "system_b": "beta",
             "response_a": "a" * (40 + 7 * i), "response_b": "b" * (121 - 5 * i), "pref_1": 1.0}
            for i in range(n)]
    return read_pairs(pd.DataFrame(rows))


def judge(**kw: Any) -> Any:
    return get_judge("pairwise", template="llmbar_vanilla", **kw)


def by_probe(card: Any) -> dict[str, Any]:
    return {r.probe.name: r for r in card.results}


@pytest.mark.parametrize("both", [True, False])
def test_longer_judge_flips_exactly_where_the_probe_makes_the_other_longer(tmp_path: Path, both: bool) -> None:
    be = Scripted(longer)
    card = run_probes(table(), judge(both_orders=both), be, ProbeSettings(seed=7), cache=Cache(tmp_path / "c.sqlite"))
    rows, col = card.table, card.judge
    orig = rows[rows[PROBE_COLUMN] == ORIGINAL].reset_index(drop=True)
    res = by_probe(card)
    assert res["position"].flips.n_changed == 0 and res["position"].flips.n == 12  # never on position
    for name in ("verbosity", "authority", "distraction"):
        mine = rows[rows[PROBE_COLUMN] == name].reset_index(drop=True)
        expected = 0
        for i in range(len(orig)):
            t = mine.loc[i, TARGET_COLUMN].lower()
            o = "b" if t == "a" else "a"
            was_longer = len(orig.loc[i, f"response_{t}"]) > len(orig.loc[i, f"response_{o}"])
            now_longer = len(mine.loc[i, f"response_{t}"]) > len(mine.loc[i, f"response_{o}"])
            flips = now_longer and not was_longer
            expected += flips
            assert (mine.loc[i, col] != orig.loc[i, col]) == flips, (name, i)
        f = res[name].flips
        assert f.n == 12 and f.n_changed == f.toward == expected and f.away == 0
        assert 0 < expected < 12  # the table makes some pairs flip and some not
    # a note in the prompt changes nothing for a judge that reads only lengths
    assert res["bandwagon"].flips.n_changed == 0 and res["refinement"].flips.n_changed == 0
    assert res["self_enhancement"].status == "n/a" and "scripted-judge" in res["self_enhancement"].note
    # resumed: every call from the cache
    calls = be.calls
    assert calls == (6 * 12 * 2 if both else 7 * 12)  # original + 5 probes (+ the swapped rows)
    again = Scripted(longer)
    card2 = run_probes(table(), judge(both_orders=both), again, ProbeSettings(seed=7), cache=Cache(tmp_path / "c.sqlite"))
    assert again.calls == 0 and card2.calls["new"] == 0 and card2.frame().equals(card.frame())


def test_first_position_judge_flips_every_pair_toward_the_first(tmp_path: Path) -> None:
    card = run_probes(table(), judge(), Scripted(first), ProbeSettings(probes=("position", "verbosity")),
                      cache=Cache(tmp_path / "c.sqlite"))
    pos = by_probe(card)["position"].flips
    assert (pos.n, pos.n_changed, pos.toward, pos.away) == (12, 12, 12, 0)
    assert pos.p_value == pytest.approx(2 * 0.5**12)
    # resolved over both orders, the first-position judge says tie everywhere: no probe moves it
    assert set(card.table[card.judge]) == {"tie"}
    assert by_probe(card)["verbosity"].flips.n_changed == 0


def test_bandwagon_follower_moves_toward_the_named_response(tmp_path: Path) -> None:
    card = run_probes(table(), judge(), Scripted(bandwagon), ProbeSettings(probes=("bandwagon",), seed=2),
                      cache=Cache(tmp_path / "c.sqlite"))
    f = by_probe(card)["bandwagon"].flips
    rows = card.table
    mine = rows[rows[PROBE_COLUMN] == "bandwagon"].reset_index(drop=True)
    # the note names the target in both orders: the judge picks it every time
    assert (mine[card.judge] == mine[TARGET_COLUMN]).all()
    orig = rows[rows[PROBE_COLUMN] == ORIGINAL].reset_index(drop=True)
    lost = int((orig[card.judge] != mine[TARGET_COLUMN]).sum())
    assert (f.n_changed, f.toward, f.away) == (lost, lost, 0) and lost > 0


def test_self_enhancement_compares_own_pairs_with_humans(tmp_path: Path) -> None:
    t = table().assign(system_a=["scripted-judge"] * 6 + ["alpha"] * 6)
    card = run_probes(t, judge(), Scripted(longer), ProbeSettings(probes=("self_enhancement",), human="pref_1"),
                      cache=Cache(tmp_path / "c.sqlite"))
    r = by_probe(card)["self_enhancement"]
    assert r.status == "measured" and "6 pairs" in r.note
    own = t.iloc[:6]
    judge_picks_own = sum(len(a) > len(b) for a, b in zip(own["response_a"], own["response_b"], strict=True))
    # humans (pref_1 = +1) always prefer A = the judge's own answer: the judge can only move away from it
    assert (r.flips.n, r.flips.toward, r.flips.away) == (6, 0, 6 - judge_picks_own)
    no_humans = run_probes(t, judge(), Scripted(longer), ProbeSettings(probes=("self_enhancement",)),
                           cache=Cache(tmp_path / "c.sqlite"))
    o = by_probe(no_humans)["self_enhancement"].own
    assert (o.n, o.own) == (6, judge_picks_own)


def test_probes_need_a_pair_judge_and_distinct_names(tmp_path: Path) -> None:
    from evalign.errors import UsageError

    with pytest.raises(UsageError, match="given twice"):
        run_probes(table(2), judge(), Scripted(first), ProbeSettings(probes=("position", "position")),
                   cache=Cache(tmp_path / "c.sqlite"))
    with pytest.raises(UsageError, match="pairwise"):
        run_probes(table(2), get_judge("absolute"), Scripted(first), cache=Cache(tmp_path / "c.sqlite"))


def test_the_card_is_a_section_of_the_html_report(tmp_path: Path) -> None:
    from evalign.report import write_report
    from evalign.report.probes import card_display

    card = run_probes(table(4), judge(), Scripted(longer), ProbeSettings(probes=("position", "verbosity")),
                      cache=Cache(tmp_path / "c.sqlite"))
    shown = card_display([card.to_json()])
    assert shown["probe"].tolist() == ["position", "verbosity"] and shown["changed"].iloc[0] == "0.0%"
    files = write_report(tmp_path / "r", probes=[card.to_json()])
    page = files["html"].read_text(encoding="utf-8")
    assert "Judge bias probes" in page and "verbosity (verbosity; CALM (Ye et al. 2024" in page
