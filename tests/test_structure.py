"""The structure targets of issue 21 hold (``scripts/structure.py`` defines each figure)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _structure():  # the script is not a package module: load it by path
    spec = importlib.util.spec_from_file_location("structure", ROOT / "scripts" / "structure.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["structure"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_structure_targets() -> None:
    s = _structure()
    rep = s.report(s.measure(ROOT / "src" / "evalign"))
    assert rep["import_circle_members"] == []
    assert rep["upward_imports"] == []
    assert rep["complexity_over_25"] == []
    assert rep["longer_than_100_lines"] == []
    assert rep["private_imports"] == []
    assert rep["function_local_share_outside_cli"] < 0.10  # cli/ imports lazily to keep --help fast


def test_structure_finds_a_circle_and_an_upward_import(tmp_path: Path) -> None:
    """The yardstick itself: a made-up package with a circle, upward imports, a sideways import and a
    private import."""
    s = _structure()
    pkg = tmp_path / "evalign"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "meta").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "__init__.py").write_text("")
    (pkg / "meta" / "__init__.py").write_text("")
    (pkg / "judges").mkdir()
    (pkg / "judges" / "__init__.py").write_text("")
    (pkg / "judges" / "c.py").write_text("from evalign.meta.b import x\n")
    (pkg / "backends").mkdir()
    (pkg / "backends" / "__init__.py").write_text("")
    (pkg / "backends" / "d.py").write_text("def load():\n    from evalign.judges import c\n    return c\n")
    (pkg / "meta" / "a.py").write_text("from evalign.meta import b\nfrom evalign.cli.x import run\n")
    (pkg / "meta" / "b.py").write_text("from evalign.meta.a import _helper\n")
    (pkg / "cli" / "x.py").write_text(
        "def run(x):\n    if x and x > 1 or x < -1:\n        return [i for i in x if i]\n    return None\n"
    )
    rep = s.report(s.measure(pkg))
    assert rep["import_circle_members"] == [["evalign.meta.a", "evalign.meta.b"]]
    assert rep["upward_imports"] == ["evalign.backends.d -> evalign.judges.c", "evalign.meta.a -> evalign.cli.x"]
    assert rep["sideways_imports"] == ["evalign.judges.c -> evalign.meta.b"]  # judges and meta share a row
    assert rep["function_local_imports"] == 1
    assert rep["function_local_share_outside_cli"] == 0.2  # 1 of the 5 import statements (none in cli/)
    assert rep["private_imports"] == ["evalign.meta.b:1 imports evalign.meta.a._helper"]
    fn = next(f for f in s.measure(pkg).functions if f.name == "run")
    assert fn.complexity == 1 + 1 + 2 + 2  # if, and/or (2 extra operands), comprehension + its if
