#!/usr/bin/env python3
"""Structure figures of ``src/evalign``: the yardstick of the architecture work (issue 21).

Usage: ``python scripts/structure.py [--root src/evalign] [--json] [--list] [--rooms]``

Each figure, as defined here:

- **import circles**: strongly connected groups of more than one module in the graph of internal
  imports (every ``import evalign...`` / ``from evalign... import`` statement, module level or not;
  ``from package import name`` points at the submodule ``package.name`` when one exists, else at the
  package). An edge from a package's own ``__init__`` to its submodules, and from a module to the
  packages that contain it, is left out (Python imports the parents first anyway).
- **upward imports**: imports from a module to a module of a higher layer (``LAYERS`` below; a layer
  may import its own and every lower layer).
- **cyclomatic complexity** of a function: 1 + one per ``if``/``elif``, ``for``, ``while``,
  ``except``, ``with``-less decision (``IfExp``), each extra operand of ``and``/``or``, each ``if`` of a
  comprehension, each ``case`` of a ``match`` and each ``assert`` (McCabe 1976, as radon counts it).
  Nested functions are counted on their own.
- **function length**: lines from ``def`` to the function's last line, decorators excluded.
- **function-local imports**: internal import statements inside a function body, as a share of all
  internal import statements; outside ``cli/`` (whose commands import lazily to keep ``--help`` fast),
  the same share over the modules outside ``evalign.cli``.
- **private imports**: ``from evalign.x import _name`` where the importer is not ``evalign.x`` itself,
  and imports of a private module (``evalign.pkg._mod``) from outside ``evalign.pkg``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: the rooms of the package, lowest first (issue 38): a room may import its own and every lower row, never a
#: higher row; an import to another room of its own row is *sideways* (listed, not an upward import)
ROOMS: tuple[tuple[str, ...], ...] = (
    ("errors", "signature", "interrupt"),  # ground
    ("io", "registry", "cache", "columns"),
    ("backends",),  # model access: backends, the HTTP client, model loading
    ("metrics",),
    ("judges", "meta", "scoring"),
    ("rank", "datasets"),
    ("synth", "engine"),
    ("evaluate",),
    ("report", "train"),
    ("run", "bench", "annotate", "demo", "demo_judge"),
    ("cli",),
    ("__main__", "__init__"),
)

#: layer of each top-level part of the package (its row in :data:`ROOMS`)
LAYERS: dict[str, int] = {room: i for i, row in enumerate(ROOMS) for room in row}
#: the layer of a module that no row names (a new room must be placed in :data:`ROOMS`)
UNPLACED = len(ROOMS)

COMPLEXITY_LIMIT = 25
#: try statements (a ``try`` with an ``else`` branch adds a path)
_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
LENGTH_LIMIT = 100


@dataclass
class Function:
    module: str
    name: str
    line: int
    length: int
    complexity: int


@dataclass
class Figures:
    modules: int = 0
    functions: list[Function] = field(default_factory=list)
    edges: set[tuple[str, str]] = field(default_factory=set)
    internal_imports: int = 0
    local_imports: int = 0
    internal_imports_outside_cli: int = 0
    local_imports_outside_cli: int = 0
    private_imports: list[str] = field(default_factory=list)


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def complexity(node: ast.AST) -> int:
    """McCabe complexity of one function body (nested functions and classes excluded)."""
    count = 1
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(n, ast.If | ast.For | ast.AsyncFor | ast.While | ast.IfExp | ast.Assert | ast.ExceptHandler):
            count += 1
        elif isinstance(n, ast.BoolOp):
            count += len(n.values) - 1
        elif isinstance(n, ast.comprehension):
            count += 1 + len(n.ifs)
        elif isinstance(n, ast.match_case) or (isinstance(n, _TRY) and n.orelse):
            count += 1
        stack.extend(ast.iter_child_nodes(n))
    return count


def functions(tree: ast.AST, module: str) -> Iterator[Function]:
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            end = n.end_lineno or n.lineno
            yield Function(module, n.name, n.lineno, end - n.lineno + 1, complexity(n))


def _resolve_from(module: str, is_pkg: bool, node: ast.ImportFrom) -> str | None:
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    return target if target == "evalign" or target.startswith("evalign.") else None


def _inside_function(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            for m in ast.walk(n):
                if isinstance(m, ast.Import | ast.ImportFrom):
                    ids.add(id(m))
    return ids


def _in_type_checking(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            for m in ast.walk(n):
                ids.add(id(m))
    return ids


def measure(root: Path) -> Figures:
    fig = Figures()
    paths = sorted(root.rglob("*.py"))
    modules = {module_name(root, p) for p in paths}
    for path in paths:
        module = module_name(root, path)
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        fig.modules += 1
        fig.functions.extend(functions(tree, module))
        local = _inside_function(tree)
        typing_only = _in_type_checking(tree)
        for node in ast.walk(tree):
            targets: list[tuple[str, str | None]] = []
            if isinstance(node, ast.Import):
                targets = [(a.name, None) for a in node.names if a.name.startswith("evalign")]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(module, is_pkg, node)
                if base is None:
                    continue
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append((sub, None) if sub in modules else (base, a.name))
            if not targets:
                continue
            in_cli = room(module) == "cli"
            fig.internal_imports += 1
            fig.internal_imports_outside_cli += not in_cli
            if id(node) in local:
                fig.local_imports += 1
                fig.local_imports_outside_cli += not in_cli
            for target, name in targets:
                if name is not None and name.startswith("_") and not name.startswith("__") and target != module:
                    fig.private_imports.append(f"{module}:{node.lineno} imports {target}.{name}")
                parts = target.split(".")
                for i, part in enumerate(parts[1:], start=1):
                    if part.startswith("_") and not part.startswith("__"):
                        owner = ".".join(parts[:i])
                        if not (module == owner or module.startswith(owner + ".")):
                            fig.private_imports.append(f"{module}:{node.lineno} imports private module {target}")
                        break
                if id(node) in typing_only:
                    continue
                if module.startswith(target + ".") or (target.startswith(module + ".") and is_pkg):
                    continue  # parent package, or a package's own submodule
                if target != module and target in modules:
                    fig.edges.add((module, target))
    return fig


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1] if len(parts) > 1 else "__init__", UNPLACED)


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(edges: set[tuple[str, str]]) -> list[str]:
    """Imports to a higher row of :data:`ROOMS`."""
    return sorted(f"{a} -> {b}" for a, b in edges if layer(b) > layer(a) and a != "evalign")


def sideways(edges: set[tuple[str, str]]) -> list[str]:
    """Imports to another room of the same row of :data:`ROOMS` (``bench`` reading ``run``'s YAML)."""
    return sorted(f"{a} -> {b}" for a, b in edges
                  if a != "evalign" and layer(b) == layer(a) and room(b) != room(a))


def room_imports(edges: set[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """The import structure between rooms: room -> {room it imports: number of module-to-module imports}."""
    out: dict[str, dict[str, int]] = {}
    for a, b in edges:
        if a == "evalign" or room(a) == room(b):
            continue
        row = out.setdefault(room(a), {})
        row[room(b)] = row.get(room(b), 0) + 1
    row_of = lambda r: LAYERS.get(r, UNPLACED)  # noqa: E731
    return {r: dict(sorted(out[r].items(), key=lambda kv: (row_of(kv[0]), kv[0])))
            for r in sorted(out, key=lambda r: (row_of(r), r))}


def report(fig: Figures) -> dict[str, object]:
    fns = fig.functions
    complex_ = sorted((f for f in fns if f.complexity > COMPLEXITY_LIMIT), key=lambda f: -f.complexity)
    long_ = sorted((f for f in fns if f.length > LENGTH_LIMIT), key=lambda f: -f.length)
    ge20 = sum(f.complexity >= 20 for f in fns)
    circ = cycles(fig.edges)
    return {
        "modules": fig.modules,
        "functions": len(fns),
        "import_circles": len(circ),
        "import_circle_members": circ,
        "upward_imports": upward(fig.edges),
        "sideways_imports": sideways(fig.edges),
        "complexity_over_25": [f"{f.module}:{f.name} ({f.complexity})" for f in complex_],
        "complexity_ge_20": ge20,
        "complexity_ge_20_share": round(ge20 / max(len(fns), 1), 4),
        "longer_than_100_lines": [f"{f.module}:{f.name} ({f.length})" for f in long_],
        "max_complexity": max((f.complexity for f in fns), default=0),
        "max_length": max((f.length for f in fns), default=0),
        "internal_imports": fig.internal_imports,
        "function_local_imports": fig.local_imports,
        "function_local_share": round(fig.local_imports / max(fig.internal_imports, 1), 4),
        "function_local_share_outside_cli": round(
            fig.local_imports_outside_cli / max(fig.internal_imports_outside_cli, 1), 4),
        "private_imports": fig.private_imports,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1] / "src" / "evalign")
    ap.add_argument("--json", action="store_true", help="print every figure and list as JSON")
    ap.add_argument("--list", action="store_true", help="list the offenders under each count")
    ap.add_argument("--rooms", action="store_true", help="print the imports between rooms, row by row")
    args = ap.parse_args(argv)
    if args.rooms:
        for r, targets in room_imports(measure(args.root).edges).items():
            print(f"{LAYERS.get(r, UNPLACED):>2} {r:<11} -> " + ", ".join(f"{t} ({n})" for t, n in targets.items()))
        return 0
    rep = report(measure(args.root))
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    for key, value in rep.items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}")
            if args.list:
                for v in value:
                    print(f"    {v}")
        else:
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
