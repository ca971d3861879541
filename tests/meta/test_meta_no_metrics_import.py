"""``evalign.meta`` imports nothing of ``evalign.metrics``: the statistics get a metric's per-item
statistics and its ``score_from_stats`` handed to them (issue 38)."""

from __future__ import annotations

import ast
from pathlib import Path

META = Path(__file__).resolve().parents[2] / "src" / "evalign" / "meta"


def _imports(path: Path) -> list[str]:
    """Every module an ``import`` / ``from ... import`` of ``path`` names (relative ones resolved
    against ``evalign.meta``), function-local and ``TYPE_CHECKING`` imports included."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ["evalign", "meta"][: 3 - node.level] if node.level <= 2 else []
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.append(mod)
            if mod in ("evalign", ""):  # from evalign import metrics
                out += [f"evalign.{a.name}" for a in node.names]
    return out


def test_meta_imports_nothing_of_metrics() -> None:
    files = sorted(META.glob("*.py"))
    assert len(files) > 10
    bad = {p.name: m for p in files for m in _imports(p) if m == "evalign.metrics" or m.startswith("evalign.metrics.")}
    assert bad == {}


def test_the_check_sees_an_import_of_metrics(tmp_path: Path) -> None:
    for text in ("from evalign.metrics.base import get_metric\n", "def f():\n    import evalign.metrics.lexical\n",
                 "from evalign import metrics\n", "from ..metrics import base\n"):
        p = tmp_path / "x.py"
        p.write_text(text)
        assert any(m.startswith("evalign.metrics") for m in _imports(p)), text
