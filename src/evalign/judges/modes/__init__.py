"""The grading modes, one module each (registered in :mod:`evalign.judges.base` as lazy entries):

* :mod:`~evalign.judges.modes.absolute` (``prometheus_absolute``, mode ``absolute``),
* :mod:`~evalign.judges.modes.relative` (``prometheus_relative``, modes ``relative`` / ``pairwise``),
* :mod:`~evalign.judges.modes.geval` (``geval``, modes ``geval`` / ``g-eval``),
* :mod:`~evalign.judges.modes.criteria` (``criteria``),
* :mod:`~evalign.judges.modes.ranking` (``prometheus_ranking``, mode ``ranking`` = ``--mode absolute --ranking``).
* :mod:`~evalign.judges.modes.llmbar` (``llmbar``, LLMBar's strategies: ``--mode pairwise --template llmbar_<strategy>``).

A new mode is a module here with a :class:`~evalign.judges.base.Judge` subclass plus one
``JUDGES.register(name, lazy="module:Class", aliases=(...))`` line in :mod:`evalign.judges.base`.
"""
