"""The former name of :mod:`evalign.metrics.models`, kept importable: it IS that module (one module
object under both names, so a name replaced on one is replaced on the other)."""

from __future__ import annotations

import sys

from evalign.metrics import models
from evalign.metrics.models import *  # noqa: F403  (the names, for type checkers)

sys.modules[__name__] = models
