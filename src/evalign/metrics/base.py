"""The Metric base class and the metric registry.

A metric scores each response against its references (one or several; the rule for several is
*the best score over the references*) and declares ``name``, ``higher_is_better`` and a
reproducibility :class:`~evalign.signature.Signature`. Metrics register themselves with
:func:`register_metric`; each built-in metric is also a lazy ``"module:Class"`` placeholder in the
registry, so ``import evalign`` stays light and torch is imported only when a model metric is used.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from evalign.errors import EvalignError
from evalign.metrics.options import OptionSpec, check_options
from evalign.registry import Registry
from evalign.signature import Signature, make_signature

if TYPE_CHECKING:  # numpy is imported where scores are computed, not at every command's start
    import numpy as np


@dataclass
class MetricResult:
    """Scores of one metric over a list of items.

    ``values``: one float per item (NaN where undefined, e.g. no reference).
    ``extras``: further per-item arrays kept beside the value (e.g. BERTScore P and R), keyed by
    a suffix; they become columns ``<column>.<suffix>``.
    ``info``: run facts worth reporting (e.g. ``{"truncated": 3}``).
    """

    values: np.ndarray
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


class Metric(ABC):
    """A reference-based metric. Subclasses set ``name``, ``higher_is_better``, ``description``
    and implement :meth:`score` and :meth:`options`."""

    name: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    description: ClassVar[str] = ""
    #: distributions whose versions go into the signature
    dists: ClassVar[tuple[str, ...]] = ()
    #: ``progress(done, total)`` called by metrics with long work (model metrics); set by
    #: :func:`evalign.scoring.score` for the duration of a run
    progress: Callable[[int, int], None] | None = None
    #: whether the metric keeps results in the cache (then its constructor takes ``use_cache``)
    uses_cache: ClassVar[bool] = False
    #: options whose non-default values are added to the column name (e.g. ``model``)
    column_options: ClassVar[tuple[str, ...]] = ()
    #: defaults of the options named in ``column_options``
    defaults: ClassVar[dict[str, Any]] = {}
    #: the constructor's options with their types and ranges (see :mod:`evalign.metrics.options`);
    #: checked by :func:`get_metric` and parsed by ``--option``; empty = unchecked
    option_types: ClassVar[dict[str, OptionSpec]] = {}
    #: the system-level score: ``"mean"`` (mean of item scores) or ``"corpus"`` (the metric's corpus
    #: score from summed per-item sufficient statistics: :meth:`item_stats` and :meth:`score_from_stats`,
    #: which the statistics of :mod:`evalign.meta` and :mod:`evalign.rank` are handed)
    system_level: ClassVar[str] = "mean"

    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The settings that determine the scores (go into the signature)."""

    @abstractmethod
    def score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> MetricResult:
        """Score each response against its references (best over references; NaN if none)."""

    def system_score(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> float:
        """The score of one system over its items. Default: the mean of the item scores."""
        import numpy as np

        values = self.score(responses, references).values
        return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")

    def item_stats(self, responses: Sequence[str], references: Sequence[Sequence[str]]) -> Sequence[Sequence[float] | None]:
        """Each item's sufficient statistics for the system score (sacrebleu's hook of the same name),
        None for an item without a value. Default (a ``mean`` metric): ``[value, 1]``, so that
        :meth:`score_from_stats` of their sum is the mean item score."""
        import numpy as np

        values = self.score(responses, references).values
        return [[float(v), 1.0] if np.isfinite(v) else None for v in values]

    def score_from_stats(self, stats: Any) -> Any:
        """The system score of summed per-item statistics (:meth:`item_stats` added up). Default:
        ``stats[0] / stats[1]``, the mean item score."""
        return stats[0] / stats[1]

    @property
    def column(self) -> str:
        """Column name in the item table: the metric name, plus non-default key options."""
        opts = self.options()
        suffix = [
            f"{k}={_short(opts[k])}"
            for k in self.column_options
            if k in opts and opts[k] != self.defaults.get(k)
        ]
        return self.name if not suffix else f"{self.name}[{','.join(suffix)}]"

    def signature(self) -> Signature:
        """The reproducibility signature of this metric's scores."""
        return make_signature(self.name, self.options(), self.dists)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.signature()}>"


def _short(v: Any) -> str:
    s = str(v)
    return s.rsplit("/", 1)[-1] if "/" in s else s


# --- registry ---------------------------------------------------------------------------------

#: the metric registry: built-ins are lazy placeholders (imported on first use, so torch is imported
#: only when a model metric is used); plugins come from the ``evalign.metrics`` entry points
METRICS: Registry[type[Metric]] = Registry("metric", base_cls=Metric, entry_point_group="evalign.metrics")
METRICS.register("bleu", lazy="evalign.metrics.lexical:Bleu")
METRICS.register("chrf", lazy="evalign.metrics.lexical:Chrf")
METRICS.register("rouge_l", lazy="evalign.metrics.lexical:RougeL")
METRICS.register("rouge_1", lazy="evalign.metrics.lexical:Rouge1")
METRICS.register("rouge_2", lazy="evalign.metrics.lexical:Rouge2")
METRICS.register("rouge_lsum", lazy="evalign.metrics.lexical:RougeLsum")
METRICS.register("exact_match", lazy="evalign.metrics.lexical:ExactMatch")
METRICS.register("semscore", lazy="evalign.metrics.embedding:SemScore")
METRICS.register("pooled_similarity", lazy="evalign.metrics.embedding:PooledSimilarity")
METRICS.register("bertscore", lazy="evalign.metrics.embedding:BertScore")
METRICS.register("bartscore", lazy="evalign.metrics.learned:BartScore")
METRICS.register("bleurt", lazy="evalign.metrics.bleurt:Bleurt")
METRICS.register("discoscore", lazy="evalign.metrics.discoscore:DiscoScore")



def builtin_metric_names() -> list[str]:
    """Names of the metrics registered so far (built-in placeholders included), without importing any."""
    return METRICS.names(load=False)


M = TypeVar("M", bound=type[Metric])


def register_metric(cls: M) -> M:
    """Class decorator: make a metric available by its ``name`` (a placeholder naming it is replaced)."""
    METRICS.add(cls.name, cls)
    return cls


def get_metric(name: str, **options: Any) -> Metric:
    """An instance of metric ``name`` with ``options`` (e.g. ``get_metric("semscore", model=...)``).

    Options are checked against the metric's ``option_types`` first (:class:`~evalign.errors.UsageError`
    naming the metric and option)."""
    cls = METRICS.get(name)
    options = check_options(name, cls.option_types, options)
    try:
        return cls(**options)
    except TypeError as e:
        raise EvalignError(f"metric '{name}': bad option ({e})") from e


def metric_class(name: str) -> type[Metric]:
    """The class registered as ``name``."""
    return METRICS.get(name)


def list_metrics() -> list[type[Metric]]:
    """All known metric classes (built-in and plugins), sorted by name."""
    return [cls for _, cls in METRICS.items()]


# --- helpers shared by metrics -----------------------------------------------------------------


def flatten_references(
    responses: Sequence[str], references: Sequence[Sequence[str]]
) -> tuple[list[str], list[str], np.ndarray]:
    """Expand items with several references into (response, reference) pairs.

    Returns the pair responses, the pair references and, for each pair, the index of its item.
    """
    import numpy as np

    if len(responses) != len(references):
        raise ValueError(f"{len(responses)} responses but {len(references)} reference lists")
    hyp: list[str] = []
    ref: list[str] = []
    owner: list[int] = []
    for i, (h, refs) in enumerate(zip(responses, references, strict=True)):
        for r in refs:
            hyp.append(h)
            ref.append(r)
            owner.append(i)
    return hyp, ref, np.asarray(owner, dtype=np.int64)


def max_by_owner(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per item, the maximum of its pair values (NaN for items without pairs)."""
    import numpy as np

    out = np.full(n, -np.inf)
    np.maximum.at(out, owner, np.asarray(values, dtype=float))
    out[np.isneginf(out)] = np.nan
    return out


def argmax_by_owner(values: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per item, the index (into the pair arrays) of its best pair; -1 for items without pairs."""
    import numpy as np

    best = max_by_owner(values, owner, n)
    idx = np.full(n, -1, dtype=np.int64)
    for j in range(len(owner) - 1, -1, -1):  # first best pair wins
        if values[j] == best[owner[j]]:
            idx[owner[j]] = j
    return idx


def best_over_references(
    pair_fn: Callable[[list[str], list[str]], np.ndarray],
    responses: Sequence[str],
    references: Sequence[Sequence[str]],
) -> np.ndarray:
    """Apply a vectorised pair scorer to all (response, reference) pairs and keep each item's best."""
    import numpy as np

    hyp, ref, owner = flatten_references(responses, references)
    if not hyp:
        return np.full(len(responses), np.nan)
    return max_by_owner(np.asarray(pair_fn(hyp, ref), dtype=float), owner, len(responses))
