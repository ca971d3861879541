"""``evalign meta --published`` (and ``evalign report --published``): every judge and metric the
catalogue's datasets ship, on every set, in one table. The command parses its options into a
:class:`~evalign.evaluate.published.PublishedSettings` and renders the
:class:`~evalign.evaluate.published.PublishedTable` of :func:`~evalign.evaluate.published.published_table`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from evalign.cli.common import (
    CliError,
    Stages,
    console,
    emit_json,
    err_console,
    print_table,
    resampling_of,
    split_multi,
)


def published_settings(*, datasets: str | None, data_dir: Path | None, bootstrap: int, permutations: int,
                       seed: int, alpha: float, confidence: float, epsilon: float | None,
                       workers: int | None = None, panels: Any = ()) -> Any:
    """The settings of the cross-set table from the command line's options."""
    from evalign.datasets import list_datasets
    from evalign.errors import did_you_mean
    from evalign.evaluate.published import PublishedSettings  # scipy: not at every command's start

    names = tuple(split_multi([datasets] if datasets else []))
    known = list_datasets()
    for n in names:
        if n not in known:
            raise CliError(f"--dataset: unknown dataset '{n}'{did_you_mean(n, known)} (see `evalign datasets`)")
    return PublishedSettings(resampling=resampling_of(n_resamples=bootstrap, n_permutations=permutations, seed=seed,
                                                      alpha=alpha, confidence=confidence, workers=workers),
                             epsilon=epsilon, datasets=names, data_dir=data_dir, panels=tuple(panels))


def run_published(settings: Any, *, as_json: bool, top: int | None = None) -> Any:
    """Compute the cross-set table (a progress line per set on stderr) and print it (or its JSON)."""
    from evalign.evaluate.published import published_table  # scipy: not at every command's start

    with Stages(disable=as_json) as stages:
        table = published_table(settings, progress=stages.start)
    if as_json:
        emit_json(table.to_json())
    else:
        render(table, top)
    return table


def render(table: Any, top: int | None = None) -> None:
    """The cross-set table in the terminal, then the sets left out and why, and the notes."""
    from evalign.report.tables import published_blocks  # pandas: not at start

    if table.rows.empty:
        raise CliError("no dataset with shipped judge or metric columns has its files here (see `evalign datasets`)")
    console.print(escape(table.title + (f"; the best {top} of each set" if top else "")), highlight=False)
    for title, block in published_blocks(table.rows, top):
        print_table(block, title=title, digits=3)
    skipped = table.sets[~table.sets["status"].astype(str).str.endswith("ranked")]
    for s in skipped.itertuples():
        err_console.print(f"[dim]{escape(str(s.set))}: {escape(str(s.status))}[/dim]", highlight=False)
    for note in table.notes:
        err_console.print(f"[dim]note: {escape(note)}[/dim]", highlight=False)
    console.print(escape("value: each set's ranking statistic with its interval (pref. acc. = preference accuracy "
                         "with ties against the annotators' majority; pairwise acc. = pairwise accuracy of the "
                         "ratings; kendall = Kendall's tau); # = rank (-: no column of the set beats its best "
                         "trivial baseline, so evalign withholds the ranks); beats = significantly better than the best "
                         "trivial baseline; Alt-Test = winning rate / advantage probability (pass: winning rate >= "
                         "0.5); columns named judge:<name> are shown as <name>"), highlight=False)
