"""``evalign run CONFIG.yaml``: one YAML file describes the data, metrics, judges, meta-evaluation
and report of a study (see :mod:`evalign.run.config` for the layout); :func:`run_config` runs it
step by step (see :mod:`evalign.run.execute`) and writes the resolved config beside its outputs."""

from __future__ import annotations

from evalign.run.config import RunConfig, load_config, parse_config, shipped_configs
from evalign.run.execute import RunOutcome, resolve, run_config

__all__ = ["RunConfig", "RunOutcome", "load_config", "parse_config", "resolve", "run_config", "shipped_configs"]
