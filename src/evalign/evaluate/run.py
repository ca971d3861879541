"""The one orchestration of a meta-evaluation: :func:`evaluate` turns an :class:`EvalSpec` into an
:class:`EvalResult` (alignment, guards, baselines, system scores, trust tables, breakdown).

The stages are written once in :mod:`evalign.evaluate.stages`; :mod:`evalign.evaluate.items` and
:mod:`evalign.evaluate.pairs` hold the steps that differ between item and pair tables."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from evalign.evaluate.items import ItemEvaluation
from evalign.evaluate.pairs import PAIR_CURVE_POINTS, PairEvaluation
from evalign.evaluate.result import EvalResult
from evalign.evaluate.spec import EvalSpec
from evalign.evaluate.stages import MAX_CURVE_POINTS, PROGRESS, Progress, signature


def evaluate(spec: EvalSpec, *, progress: Progress | None = None) -> EvalResult:
    """Run the meta-evaluation described by ``spec`` (see :class:`EvalSpec`).

    ``progress(stage, done, total)``, if given (else the one of an enclosing
    :func:`evaluation_progress` block), is called as the resampling advances: ``stage`` is
    ``"bootstrap intervals"`` (``total`` = intervals of the trust table) or ``"permutation tests"`` /
    ``"bootstrap tests"`` (``total`` None: tests are run as the ranking needs them)."""
    with evaluation_progress(progress if progress is not None else PROGRESS.get()):
        evaluation = PairEvaluation(spec) if spec.mode == "pairs" else ItemEvaluation(spec)
        return evaluation.run()


@contextmanager
def evaluation_progress(progress: Progress | None) -> Iterator[None]:
    """Within this block, every :func:`evaluate` reports its resampling to ``progress`` (for a
    command line that calls code which calls :func:`evaluate`)."""
    token = PROGRESS.set(progress)
    try:
        yield
    finally:
        PROGRESS.reset(token)


__all__ = ["MAX_CURVE_POINTS", "PAIR_CURVE_POINTS", "Progress", "evaluate", "evaluation_progress", "signature"]
