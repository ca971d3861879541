"""The design page's list of layers names the rooms of ``scripts/structure.py``'s ``ROOMS``, row by row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rooms() -> tuple[tuple[str, ...], ...]:
    """``ROOMS`` read from the script's source (a literal; nothing of the script runs)."""
    tree = ast.parse((ROOT / "scripts" / "structure.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "ROOMS":
            assert node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError("scripts/structure.py has no ROOMS")


def test_design_page_lists_the_layers_of_structure_py() -> None:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    listed = {int(m.group(1)): set(re.findall(r"`(\w+)`", m.group(2)))
              for m in re.finditer(r"^- layer (\d+): (.*)$", text, flags=re.MULTILINE)}
    rooms = [set(row) - {"__main__", "__init__"} for row in _rooms()]
    rooms = [row for row in rooms if row]
    assert sorted(listed) == list(range(len(rooms)))
    assert [listed[i] for i in range(len(rooms))] == rooms
    assert rooms[0] >= {"errors", "signature", "interrupt"} and rooms[-1] == {"cli"}
