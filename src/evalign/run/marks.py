"""The YAML reader of configs, now :mod:`evalign.io.yaml_files` (evalign's one YAML reader); the
names stay importable from here."""

from __future__ import annotations

from evalign.io.yaml_files import MAX_DEPTH, MAX_VALUES, MarkedList, MarkedMap, load_marked, read_marked

__all__ = ["MAX_DEPTH", "MAX_VALUES", "MarkedList", "MarkedMap", "load_marked", "read_marked"]
