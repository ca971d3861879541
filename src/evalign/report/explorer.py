"""The item explorer: every item of a scored table in one sortable, filterable HTML table.

:func:`explorer_html` returns a self-contained HTML fragment (one ``<section>`` with its own
``<style>`` and a small hand-written ``<script>``; no network, no library) to put into a page.
Every text is HTML-escaped. Rows are sorted by default by the **metric-human disagreement**
(:func:`disagreement`), largest first, so the items where a metric or judge most contradicts the
humans come first. Clicking a column header sorts by it (again: the other direction); the filter
box keeps rows whose text contains every typed word (case-insensitive); the system menu keeps one
system's rows.

Disagreement (defined here, shown in the table): each score column and the human column are
*rank-normalised* over the rows where they are defined: ``r = (rank - 1) / (n - 1)`` with average
ranks for ties, in [0, 1], 1 = best (columns where lower is better are flipped first). An item's
disagreement with one score column is ``|r_score - r_human|`` (0 = same relative position, 1 =
best by one and worst by the other); the item's disagreement is the largest over the score
columns, and the column that gives it is named. Rows without a human value or without any score
get no disagreement (shown as "-", sorted last).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evalign.evaluate.columns import verdict_codes
from evalign.report.html import visible_controls

#: the text columns shown when present, in this order
TEXT_COLUMNS = ("id", "system", "task", "instruction", "input", "response", "reference")


def rank_normalise(values: Sequence[float] | np.ndarray, *, higher_is_better: bool = True) -> np.ndarray:
    """``(rank - 1) / (n - 1)`` of each finite value among the finite values (average ranks for
    ties; 1 = best), NaN where the value is not finite; 0.5 for every value when ``n == 1`` or all
    values tie."""
    from scipy.stats import rankdata

    v = np.asarray(values, dtype=float)
    out = np.full(v.shape, np.nan)
    ok = np.isfinite(v)
    n = int(ok.sum())
    if n == 0:
        return out
    x = v[ok] if higher_is_better else -v[ok]
    if n == 1 or np.all(x == x[0]):
        out[ok] = 0.5
        return out
    out[ok] = (rankdata(x, method="average") - 1.0) / (n - 1.0)
    return out


def disagreement(
    items: pd.DataFrame,
    human: str,
    scores: Sequence[str],
    *,
    human_higher_is_better: bool = True,
    lower_is_better: Sequence[str] = (),
) -> pd.DataFrame:
    """Per row: ``disagreement`` (largest ``|r_score - r_human|`` over ``scores``, in [0, 1], NaN
    when undefined) and ``disagreement_with`` (the score column that gives it, or None). See the
    module doc for the rank normalisation."""
    h = rank_normalise(pd.to_numeric(items[human], errors="coerce"), higher_is_better=human_higher_is_better)
    diffs = np.column_stack([
        np.abs(rank_normalise(pd.to_numeric(items[c], errors="coerce"), higher_is_better=c not in lower_is_better) - h)
        for c in scores
    ]) if scores else np.full((len(items), 0), np.nan)
    best = np.full(len(items), np.nan)
    which: list[str | None] = [None] * len(items)
    for i in range(len(items)):
        row = diffs[i]
        if np.isfinite(row).any():
            j = int(np.nanargmax(row))
            best[i] = row[j]
            which[i] = scores[j]
    return pd.DataFrame({"disagreement": best, "disagreement_with": which}, index=items.index)


def _cell(v: Any, digits: int) -> tuple[str, str]:
    """(display text, sort key) of one value: numbers sort numerically, text by itself."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-", ""
    if isinstance(v, bool | np.bool_):
        return ("yes" if v else "no"), str(int(v))
    if isinstance(v, int | np.integer):
        return str(int(v)), repr(float(v))
    if isinstance(v, float | np.floating):
        f = float(v)
        return (str(int(f)) if f.is_integer() and abs(f) < 1e15 else f"{f:.{digits}f}"), repr(f)
    if isinstance(v, list | tuple | np.ndarray):
        return " | ".join(map(str, v)), " | ".join(map(str, v))
    return str(v), str(v)


def _head_cells(cols: Sequence[tuple[str, str, str]]) -> list[str]:
    """The header cells of the explorer table (the first column sorted, descending)."""
    head = []
    for k, (c, kind, role) in enumerate(cols):
        label = "vs" if c == "disagreement_with" else c
        aria = ' aria-sort="descending"' if k == 0 else ""
        head.append(f'<th data-k="{k}" data-type="{kind}" class="{role}" title="{html.escape(c, quote=True)}"{aria}>'
                    f'<button type="button">{html.escape(label)}</button></th>')
    return head


def _body_rows(table: pd.DataFrame, order: Any, cols: Sequence[tuple[str, str, str]], digits: int) -> list[str]:
    """One ``<tr>`` per shown row, in ``order``."""
    body = []
    for i in order:
        rec = table.iloc[int(i)]
        tds = []
        for c, kind, role in cols:
            shown, key = _cell(rec[c], digits)
            cls = role + (" long" if kind == "text" and role in ("text", "feedback") and c not in ("id", "system", "system_a", "system_b", "task")
                          else "") + (" resp" if str(c).startswith("response") else "")
            tds.append(f'<td class="{cls}" data-v="{html.escape(key, quote=True)}">'
                       f'<div>{html.escape(shown)}</div></td>')
        system = str(rec["system"]) if "system" in table.columns else ""
        body.append(f'<tr data-system="{html.escape(system, quote=True)}">{"".join(tds)}</tr>')
    return body


def _system_select(items: pd.DataFrame) -> str:
    """The system menu (empty when the table has no system column)."""
    systems = sorted(map(str, items["system"].unique())) if "system" in items.columns else []
    options = "".join(f'<option value="{html.escape(s, quote=True)}">{html.escape(s)}</option>' for s in systems)
    return (f'<label>system <select class="ex-system"><option value="">all</option>{options}</select></label>'
            if systems else "")


def _shown_texts(items: pd.DataFrame, wanted: Sequence[str]) -> list[str]:
    """The text columns shown, responses first (so that they are in view beside the scores at a
    laptop's width), then the others in the order asked; a column empty in every row is left out
    (it would only widen the table)."""
    present = [c for c in wanted if c in items.columns
               and items[c].map(lambda v: v is not None and not (isinstance(v, float) and math.isnan(v))
                                and str(v).strip() != "").any()]
    return [c for c in present if str(c).startswith("response")] + \
        [c for c in present if not str(c).startswith("response")]


def explorer_html(
    items: pd.DataFrame,
    *,
    human: Sequence[str],
    metrics: Sequence[str] = (),
    judges: Sequence[str] = (),
    feedback: Sequence[str] = (),
    text_columns: Sequence[str] | None = None,
    human_higher_is_better: bool = True,
    lower_is_better: Sequence[str] = (),
    max_rows: int | None = None,
    digits: int = 3,
    element_id: str = "evalign-explorer",
    title: str = "Item explorer",
) -> str:
    """A self-contained HTML fragment: the items as a sortable, filterable table.

    ``human``: human label columns (the first one is the reference of the disagreement);
    ``metrics`` / ``judges``: score columns (both enter the disagreement; ``lower_is_better``
    names those where lower is better); ``feedback``: judge feedback text columns;
    ``text_columns``: text columns shown first (default: those of :data:`TEXT_COLUMNS` present).
    Rows are ordered by decreasing disagreement; ``max_rows`` keeps only the first rows in that
    order (the fragment says how many were left out). ``element_id`` must be unique in the page.
    """
    if not human:
        raise ValueError("explorer_html needs at least one human label column")
    scores = [*metrics, *judges]
    missing = [c for c in [*human, *scores, *feedback] if c not in items.columns]
    if missing:
        raise ValueError(f"no column(s) {', '.join(missing)} in the item table")
    texts = _shown_texts(items, text_columns if text_columns is not None else TEXT_COLUMNS)
    dis = disagreement(items, human[0], scores, human_higher_is_better=human_higher_is_better,
                       lower_is_better=lower_is_better)
    order = np.argsort(np.where(np.isfinite(dis["disagreement"]), -dis["disagreement"], np.inf), kind="stable")
    total = len(items)
    if max_rows is not None:
        order = order[:max_rows]
    cols: list[tuple[str, str, str]] = [("disagreement", "num", "dis"), ("disagreement_with", "text", "dis")]
    cols += [(c, "text", "text") for c in texts]
    cols += [(c, "num", "human") for c in human]
    cols += [(c, "num", "metric") for c in metrics]
    cols += [(c, "num", "judge") for c in judges]
    cols += [(c, "text", "feedback") for c in feedback]
    table = pd.concat([dis, items], axis=1)
    table = table.loc[:, ~table.columns.duplicated()]
    eid = html.escape(element_id, quote=True)
    head = _head_cells(cols)
    body = _body_rows(table, order, cols, digits)
    select = _system_select(items)
    left_out = total - len(order)
    note = (f"Sorted by the largest metric-human disagreement: per score column, "
            f"|rank-normalised score - rank-normalised {human[0]}| (0 = same relative position, 1 = opposite "
            f"ends; ranks over all rows, 1 = best), the largest over {', '.join(scores) or 'no score column'}. "
            "Click a header to sort; type to filter.")
    if left_out:
        note += f" Showing the {len(order)} rows with the largest disagreement of {total}."
    config = json.dumps({"total": len(order)})
    return visible_controls(
        f'<section class="evalign-explorer" id="{eid}" data-config="{html.escape(config, quote=True)}">'
        f"<style>{_STYLE.replace('#ID', '#' + eid)}</style>"
        f"<h3>{html.escape(title)}</h3>"
        f'<p class="ex-note">{html.escape(note)}</p>'
        f'<div class="ex-controls"><label>filter <input type="search" class="ex-filter" '
        f'placeholder="words that every shown row contains"></label>{select}'
        f'<span class="ex-count" aria-live="polite">{len(order)} of {len(order)} rows</span></div>'
        f'<div class="ex-scroll"><table class="ex-table"><thead><tr>{"".join(head)}</tr></thead>'
        f'<tbody>{"".join(body)}</tbody></table></div>'
        f"<script>{_SCRIPT}</script></section>"
    )


@dataclass(frozen=True)
class ExplorerSpec:
    """What the report's item explorer shows: the arguments of :func:`explorer_html` (see there)."""

    items: pd.DataFrame
    human: tuple[str, ...]
    metrics: tuple[str, ...] = ()
    judges: tuple[str, ...] = ()
    feedback: tuple[str, ...] = ()
    text_columns: tuple[str, ...] | None = None
    human_higher_is_better: bool = True
    lower_is_better: tuple[str, ...] = ()
    title: str = "Item explorer"
    #: most rows shown (largest disagreement first); None = all
    max_rows: int | None = 3000

    def html(self, element_id: str = "evalign-explorer") -> str:
        """The fragment (:func:`explorer_html`)."""
        return explorer_html(self.items, human=self.human, metrics=self.metrics, judges=self.judges,
                             feedback=self.feedback, text_columns=self.text_columns,
                             human_higher_is_better=self.human_higher_is_better,
                             lower_is_better=self.lower_is_better, max_rows=self.max_rows,
                             element_id=element_id, title=self.title)


#: suffixes of judge feedback text columns (``J.feedback``, ``J.reason``)
FEEDBACK_SUFFIXES = (".feedback", ".reason")


def feedback_columns(table: pd.DataFrame, judges: Sequence[str]) -> tuple[str, ...]:
    """The feedback text columns of ``judges`` that ``table`` has and that hold some text."""
    out = []
    for j in judges:
        for suf in FEEDBACK_SUFFIXES:
            c = f"{j}{suf}"
            if c in table.columns and table[c].notna().any():
                out.append(c)
    return tuple(out)


def item_explorer(items: pd.DataFrame, human: str, *, metrics: Sequence[str], judges: Sequence[str] = (),
                  human_higher_is_better: bool = True, lower_is_better: Sequence[str] = (),
                  label: str = "humans") -> ExplorerSpec:
    """The explorer of an item table rated per item: its texts, the human rating ``human``, the
    metric and judge score columns and the judges' feedback."""
    present = [c for c in metrics if c in items.columns and pd.api.types.is_numeric_dtype(items[c])]
    js = [c for c in judges if c in items.columns and pd.api.types.is_numeric_dtype(items[c])]
    return ExplorerSpec(items, (human,), tuple(present), tuple(js), feedback_columns(items, js),
                        human_higher_is_better=human_higher_is_better, lower_is_better=tuple(lower_is_better),
                        title=f"Item explorer: every item with its scores and the rating '{human}' ({label})")


#: the pair explorer's human column: the annotators' mean preference code
PAIR_HUMAN = "human (A-B)"


def pair_explorer(pairs: pd.DataFrame, sides: pd.DataFrame | None, *, pref_columns: Sequence[str],
                  metrics: Sequence[str], judges: Sequence[str] = (), lower_is_better: Sequence[str] = (),
                  label: str = "humans") -> ExplorerSpec:
    """The explorer of a pair table: one row per pair with both responses; ``human (A-B)`` = the
    mean of the annotators' codes ``pref_columns`` (+1 = A better, -1 = B better, 0 = tie, in
    [-1, 1]); each metric as ``NAME (A-B)`` = its score of A minus its score of B (from the scored
    ``sides``, rows with ``side`` a / b and the pair's ``id``, or the pair table's ``NAME_a`` /
    ``NAME_b``); each judge's verdict as a code (+1 A, -1 B, 0 tie; see
    :func:`evalign.evaluate.columns.verdict_codes`) with its feedback. The disagreement then
    compares each metric's and judge's preference with the annotators'."""
    keep = [c for c in ("id", "task", "system_a", "system_b", "instruction", "input", "response_a", "response_b",
                        "reference") if c in pairs.columns]
    t = pairs[keep].reset_index(drop=True).copy()
    t[PAIR_HUMAN] = pairs[list(pref_columns)].apply(pd.to_numeric, errors="coerce").mean(axis=1).to_numpy()
    for c in pref_columns:
        t[c] = pairs[c].to_numpy()
    mcols = []
    for m in metrics:
        name = f"{m} (A-B)"
        if f"{m}_a" in pairs.columns and f"{m}_b" in pairs.columns:
            diff = pd.to_numeric(pairs[f"{m}_a"], errors="coerce") - pd.to_numeric(pairs[f"{m}_b"], errors="coerce")
            t[name] = diff.to_numpy()
        elif sides is not None and m in sides.columns and {"id", "side"} <= set(sides.columns):
            ids = pairs["id"].astype(str)
            by = {s: sides[sides["side"] == s].assign(id=lambda d: d["id"].astype(str)).drop_duplicates("id")
                  .set_index("id")[m] for s in ("a", "b")}
            t[name] = (pd.to_numeric(by["a"].reindex(ids), errors="coerce").to_numpy()
                       - pd.to_numeric(by["b"].reindex(ids), errors="coerce").to_numpy())
        else:
            continue
        mcols.append(name)
    jcols = []
    for j in judges:
        if j not in pairs.columns and f"{j}.verdict" not in pairs.columns:
            continue
        t[j] = verdict_codes(pairs, j)[0]
        jcols.append(j)
    fb = feedback_columns(pairs, jcols)
    for c in fb:
        t[c] = pairs[c].to_numpy()
    lower = tuple(f"{m} (A-B)" for m in lower_is_better)
    text = tuple(c for c in keep)
    return ExplorerSpec(t, (PAIR_HUMAN, *pref_columns), tuple(mcols), tuple(jcols), fb, text_columns=text,
                        lower_is_better=lower,
                        title=f"Pair explorer: every pair with the preferences of {label} (+1 = A better, -1 = B "
                              "better, 0 = tie), each metric's score difference A-B and each judge's verdict")


_STYLE = """
#ID{font:14px/1.4 system-ui,sans-serif;margin:1.5em 0}
#ID .ex-controls{display:flex;gap:1em;align-items:center;margin:.5em 0;flex-wrap:wrap}
#ID .ex-filter{width:22em;padding:.25em}
#ID .ex-note{color:#444;max-width:70em}
#ID .ex-scroll{max-height:80vh;overflow:auto;border:1px solid #ccc}
#ID table{border-collapse:collapse;width:100%}
#ID th{position:sticky;top:0;background:#f3f3f3;z-index:1;text-align:left;vertical-align:bottom}
#ID th button{all:unset;cursor:pointer;font-weight:600;display:block;padding:.3em .4em}
#ID th[aria-sort=ascending] button::after{content:" \\25B2"}
#ID th[aria-sort=descending] button::after{content:" \\25BC"}
#ID td{border-top:1px solid #e3e3e3;padding:.25em .4em;vertical-align:top}
#ID td.long div{max-height:7.5em;overflow:auto;white-space:pre-wrap;min-width:12em;max-width:28em}
#ID td.resp div{min-width:18em;max-width:30em}
#ID td.dis,#ID td.human,#ID td.metric,#ID td.judge{text-align:right;white-space:nowrap}
#ID td.dis{background:#fff4e0}
#ID th.human,#ID td.human{border-left:2px solid #0072b2}
#ID tr.ex-hidden{display:none}
"""

# Hand-written, no dependencies: sorting by a column (numbers numerically, empty cells last),
# filtering by words and by system, and the row count. It runs once per explorer section.
_SCRIPT = """
(function(){
var roots=document.querySelectorAll('section.evalign-explorer:not([data-ready])');
roots.forEach(function(root){
  root.setAttribute('data-ready','1');
  var tbody=root.querySelector('tbody'), heads=root.querySelectorAll('th');
  var filter=root.querySelector('.ex-filter'), sys=root.querySelector('.ex-system');
  var count=root.querySelector('.ex-count');
  var rows=Array.prototype.slice.call(tbody.rows);
  var texts=rows.map(function(r){return r.textContent.toLowerCase();});
  function key(r,k,num){var v=r.cells[k].getAttribute('data-v');
    if(v===''){return null;} return num?parseFloat(v):v.toLowerCase();}
  function sortBy(k,dir){
    var num=heads[k].getAttribute('data-type')==='num';
    var idx=rows.map(function(r,i){return i;});
    idx.sort(function(a,b){
      var x=key(rows[a],k,num), y=key(rows[b],k,num);
      if(x===null&&y===null){return a-b;} if(x===null){return 1;} if(y===null){return -1;}
      var c=num?(x-y):(x<y?-1:(x>y?1:0));
      return c===0?a-b:(dir==='ascending'?c:-c);});
    var frag=document.createDocumentFragment();
    idx.forEach(function(i){frag.appendChild(rows[i]);});
    tbody.appendChild(frag);
    heads.forEach(function(h){h.removeAttribute('aria-sort');});
    heads[k].setAttribute('aria-sort',dir);}
  heads.forEach(function(h,k){h.querySelector('button').addEventListener('click',function(){
    var cur=h.getAttribute('aria-sort');
    var dir=cur==='descending'?'ascending':(cur==='ascending'?'descending':
      (h.getAttribute('data-type')==='num'?'descending':'ascending'));
    sortBy(k,dir);});});
  function apply(){
    var words=(filter.value||'').toLowerCase().split(/\\s+/).filter(Boolean);
    var s=sys?sys.value:''; var shown=0;
    rows.forEach(function(r,i){
      var ok=(!s||r.getAttribute('data-system')===s)&&words.every(function(w){return texts[i].indexOf(w)>=0;});
      r.classList.toggle('ex-hidden',!ok); if(ok){shown++;}});
    count.textContent=shown+' of '+rows.length+' rows';}
  filter.addEventListener('input',apply); if(sys){sys.addEventListener('change',apply);}
});
})();
"""
