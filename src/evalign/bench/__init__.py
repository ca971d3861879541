"""``evalign bench``: a judge's trust profile across every human-judgment set evalign has.

The suite (``suite.yaml``, data) names the sets, the template each is judged with and the categories;
each set is sampled (fixed, seeded, stratified: :mod:`evalign.bench.sample`), your judges run on the
samples through the judge runner (cached, resumable: :mod:`evalign.bench.judging`), and every set and
category is evaluated by :func:`evalign.evaluate.evaluate` beside the published judges and the
baselines (:mod:`evalign.bench.profile`). It orchestrates judges and evaluate and adds no statistic of
its own. :func:`run_bench` returns a :class:`BenchProfile`; ``evalign bench`` renders it.
"""

from evalign.bench.judges import BenchJudge, judge_spec, parse_judge
from evalign.bench.result import BenchProfile
from evalign.bench.runner import bench_suite, run_bench, suite_listing
from evalign.bench.settings import BenchSettings
from evalign.bench.suite import Suite, SuiteSet, load_suite

__all__ = ["BenchJudge", "BenchProfile", "BenchSettings", "Suite", "SuiteSet", "bench_suite", "judge_spec",
           "load_suite", "parse_judge", "run_bench", "suite_listing"]
