"""Reports of a meta-evaluation: one self-contained HTML page (tables and matplotlib plots as
inline PNG), the plots as PNG files and the tables as Markdown and LaTeX.

Entry points: :func:`write_report` (build and write everything), :func:`build_report` (in memory)
and :class:`ReportData` (what to show). The report renders tables computed by :mod:`evalign.meta`;
it computes no statistic itself.
"""

from __future__ import annotations

from evalign.report.build import Report, build_report, write_report
from evalign.report.data import ReportData

__all__ = ["Report", "ReportData", "build_report", "write_report"]
