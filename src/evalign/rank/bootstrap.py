"""The one bootstrap loop of system ranking: draw resamples, refit, collect the fitted scores.

In the shape of arena-hard-auto's ``get_bootstrap_result(battles, func_compute_elo, num_round)``: the
caller hands over what to resample and a *fitting function*; :func:`bootstrap` draws the resamples
from one seeded generator and returns the fitted scores of every round, stacked. The fitting
function sees a batch of rounds at once (``chunk`` rounds, all of them by default), so a vectorised
fit (Bradley-Terry's batched Newton, sacrebleu's corpus scores) stays vectorised, and memory stays
bounded by the batch.

Two ways to draw a round, each the exact draws of the statistics built on it (the tests pin their
results, so a change of draw order is a change of every interval):

* ``draw="counts"``: the multinomial counts of ``n`` units drawn with replacement from ``len(p)``
  distinct units of probabilities ``p`` (``p`` None: ``n`` equally likely units), one
  ``Generator.multinomial(n, p, size=R)`` call per batch. A resample of ``n`` battles with
  replacement, summarised by how often each distinct (system_a, system_b, verdict) cell or each item
  was drawn (:func:`evalign.rank.bradley_terry.bradley_terry`).
* ``draw="indices"``: ``n`` indices into ``range(n)`` drawn with replacement, as sacrebleu's paired
  bootstrap draws them (``Generator.choice(n, size=(R, n), replace=True)``;
  :mod:`evalign.rank.system_significance`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

#: what a round is handed to the fitting function as (see the module doc)
Draw = Literal["counts", "indices"]
#: what a fitting function returns for a batch of rounds: one array, or a tuple of arrays
Fitted = Any


def bootstrap(
    n: int,
    fit: Callable[[np.ndarray], Fitted],
    n_rounds: int,
    seed: int | None,
    *,
    p: np.ndarray | None = None,
    draw: Draw = "counts",
    chunk: int | None = None,
) -> Fitted:
    """The fitted scores of ``n_rounds`` bootstrap resamples, ``(n_rounds, ...)``.

    ``n``: units drawn per round; ``p``: the probability of each distinct unit (``draw="counts"``
    only); ``fit(draws)`` gets a batch of ``R`` rounds (``R x len(p)`` counts, or ``R x n`` indices)
    and returns ``R`` rows of fitted scores, or a tuple of such arrays (several things fitted on the
    same rounds, e.g. one per system: each is stacked on its own and keeps its own dtype);
    ``seed``: of ``numpy.random.default_rng`` (None: fresh entropy); ``chunk``: rounds per batch
    (None: all rounds in one batch). Rounds are drawn in order from one generator, so for
    ``draw="counts"`` the draws do not depend on ``chunk``.
    """
    if n_rounds < 0:
        raise ValueError("n_rounds must be >= 0")
    if draw not in ("counts", "indices"):
        raise ValueError(f"unknown draw {draw!r}; choose counts or indices")
    if draw == "indices" and p is not None:
        raise ValueError("draw='indices' draws equally likely units: give no p")
    rng = np.random.default_rng(seed)
    probs = (np.full(n, 1.0 / max(n, 1)) if p is None else np.asarray(p)) if draw == "counts" else None
    width = n if probs is None else len(probs)
    step = max(n_rounds if chunk is None else chunk, 1)

    def draws_of(start: int) -> np.ndarray:
        rounds = min(step, n_rounds - start)
        if rounds <= 0:
            return np.empty((0, width), dtype=np.int64)
        if probs is not None:
            return rng.multinomial(n, probs, size=rounds)
        return rng.choice(n, size=(rounds, n), replace=True)

    parts: list[Fitted] = []
    starts = list(range(0, max(n_rounds, 1), step))
    # the next batch is drawn in a second thread while this one is fitted (numpy releases the GIL in both);
    # batches are still drawn one after another from the one generator, so the draws are unchanged
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(draws_of, starts[0])
        for i in range(len(starts)):
            draws = pending.result()
            if i + 1 < len(starts):
                pending = pool.submit(draws_of, starts[i + 1])
            out = fit(draws)
            parts.append(tuple(np.asarray(x) for x in out) if isinstance(out, tuple) else np.asarray(out))
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(c) for c in zip(*parts, strict=True))
    return np.concatenate(parts)


__all__ = ["Draw", "Fitted", "bootstrap"]
