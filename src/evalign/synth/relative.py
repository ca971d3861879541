"""Relative (pairwise) training instances from absolute ones, as Prometheus 2 does with its
Preference Collection: two responses of different scores to one instruction under one rubric, the
better one as the target (``[RESULT] A`` or ``[RESULT] B``).

The target feedback is built from the two absolute feedbacks (evalign's construction; the Preference
Collection had GPT-4 rewrite them into one comparative feedback):
``"Response A: <feedback A> Response B: <feedback B> Response X is better. [RESULT] X"``.
Which side holds the better response is drawn with a seeded generator (about half A, half B), so a
trained judge cannot learn a position.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pandas as pd

from evalign.errors import InputError
from evalign.judges.prompts import Rubric, load_template

_NEEDED = ("orig_instruction", "orig_response", "orig_reference_answer", "orig_criteria", "orig_feedback",
           "orig_score", *(f"orig_score{i}_description" for i in range(1, 6)))

#: columns of a relative row (the absolute ``orig_*`` columns that apply, plus the pair's)
RELATIVE_COLUMNS = (
    "orig_instruction", "orig_response_A", "orig_response_B", "orig_reference_answer", "orig_criteria",
    "orig_score1_description", "orig_score2_description", "orig_score3_description",
    "orig_score4_description", "orig_score5_description", "orig_feedback_A", "orig_feedback_B",
    "orig_score_A", "orig_score_B", "orig_preference", "instruction", "output", "system", "mode",
)  # fmt: skip


def relative_instances(
    table: pd.DataFrame,
    *,
    template: str = "prometheus_relative",
    max_pairs_per_instruction: int | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """Pairwise rows (columns :data:`RELATIVE_COLUMNS`) from a Feedback-Collection-style table
    (absolute rows with the ``orig_*`` columns, e.g. the output of :func:`evalign.synth.run_synth` or
    the published Feedback Collection). Rows are grouped by instruction, reference and rubric; every two
    rows of a group with different scores make one pair (at most ``max_pairs_per_instruction`` per
    group, the pairs with the largest score gap first). Ties (equal scores) make no pair."""
    missing = [c for c in _NEEDED if c not in table.columns]
    if missing:
        raise InputError("not a Feedback Collection table (absolute rows with orig_* columns)",
                         file=str(table.attrs.get("source", "<table>")), field=missing[0])
    tpl = load_template(template)
    if tpl.mode != "relative":
        raise InputError(f"template '{template}' is not a relative template", field="template")
    rows = table[table["mode"] == "absolute"] if "mode" in table.columns else table
    key_cols = ["orig_instruction", "orig_reference_answer", "orig_criteria",
                *(f"orig_score{i}_description" for i in range(1, 6))]
    rng = random.Random(f"evalign-relative:{seed}")
    out: list[dict[str, Any]] = []
    for _, grp in rows.groupby(key_cols, sort=False):
        recs = grp.to_dict("records")
        pairs = [(a, b) for a, b in itertools.combinations(recs, 2) if int(a["orig_score"]) != int(b["orig_score"])]
        pairs.sort(key=lambda p: -abs(int(p[0]["orig_score"]) - int(p[1]["orig_score"])))
        if max_pairs_per_instruction is not None:
            pairs = pairs[:max_pairs_per_instruction]
        for a, b in pairs:
            better, worse = (a, b) if int(a["orig_score"]) > int(b["orig_score"]) else (b, a)
            first, second = (better, worse) if rng.random() < 0.5 else (worse, better)
            out.append(_pair_row(tpl, first, second, "A" if first is better else "B"))
    return pd.DataFrame(out, columns=list(RELATIVE_COLUMNS))


def _pair_row(tpl: Any, a: dict[str, Any], b: dict[str, Any], winner: str) -> dict[str, Any]:
    rubric = Rubric(name="pair", criteria=str(a["orig_criteria"]),
                    descriptions=tuple(str(a[f"orig_score{i}_description"]) for i in range(1, 6)))
    system, prompt = tpl.render_single_turn(True, {
        "instruction": a["orig_instruction"], "response_A": a["orig_response"], "response_B": b["orig_response"],
        "reference_answer": a["orig_reference_answer"], "rubric": rubric.render("relative")})
    feedback = (f"Response A: {a['orig_feedback']} Response B: {b['orig_feedback']} "
                f"Response {winner} is better.")
    row: dict[str, Any] = {
        "orig_instruction": a["orig_instruction"],
        "orig_response_A": a["orig_response"],
        "orig_response_B": b["orig_response"],
        "orig_reference_answer": a["orig_reference_answer"],
        "orig_criteria": a["orig_criteria"],
    }
    row.update({f"orig_score{i}_description": a[f"orig_score{i}_description"] for i in range(1, 6)})
    row.update({
        "orig_feedback_A": a["orig_feedback"],
        "orig_feedback_B": b["orig_feedback"],
        "orig_score_A": int(a["orig_score"]),
        "orig_score_B": int(b["orig_score"]),
        "orig_preference": winner,
        "instruction": prompt,
        "output": f"{feedback} [RESULT] {winner}",
        "system": system or "",
        "mode": "relative",
    })
    return row
