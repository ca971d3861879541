"""Reports of a meta-evaluation: one self-contained HTML page (tables and matplotlib plots as
inline PNG), the plots as PNG files and the tables as Markdown and LaTeX.

Entry points: :func:`write_report` (build and write everything), :func:`build_report` (in memory)
and :class:`ReportData` (what to show). The report renders tables computed by :mod:`evalign.meta`;
it computes no statistic itself.

The names load their modules on first use: ``evalign.report.tables`` (what the terminal shows too)
does not import matplotlib or scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalign.report.build import Report, build_report, write_report
    from evalign.report.data import ReportData

#: the names below, each with the module it loads on first use
_LAZY = {"Report": "evalign.report.build", "build_report": "evalign.report.build",
         "write_report": "evalign.report.build", "ReportData": "evalign.report.data"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Report", "ReportData", "build_report", "write_report"]
