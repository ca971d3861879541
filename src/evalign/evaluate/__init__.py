"""The evaluation layer: one typed spec in (:class:`EvalSpec`), one typed, signed result out
(:class:`EvalResult`) with every table, baseline, guard, note and warning. The command line, the
report and the demo only render its result."""

from __future__ import annotations

from evalign.evaluate.result import EvalResult, TrustTable
from evalign.evaluate.run import evaluate, evaluation_progress, signature
from evalign.evaluate.spec import Column, EvalSpec, Human, Resampling, TrustRequest

__all__ = ["Column", "EvalResult", "EvalSpec", "Human", "Resampling", "TrustRequest", "TrustTable", "evaluate", "evaluation_progress",
           "signature"]
