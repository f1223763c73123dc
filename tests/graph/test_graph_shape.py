"""The graph package stays readable: no file over 200 lines, no import cycle between its modules."""

from __future__ import annotations

import ast
from pathlib import Path

import evoharness.graph as graph_pkg

GRAPH = Path(graph_pkg.__file__).parent


def _imports(path: Path) -> set[str]:
    """The evoharness.graph modules ``path`` imports (anywhere in the file, lazy imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evoharness.graph."):
            out.add(node.module.removeprefix("evoharness.graph."))
    return out


def test_no_graph_file_over_200_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in GRAPH.glob("*.py")}
    assert {n: s for n, s in sizes.items() if s > 200} == {}


def test_graph_modules_import_no_cycle():
    deps = {p.stem: _imports(p) for p in GRAPH.glob("*.py")}
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(mod: str, path: list[str]) -> None:
        if state.get(mod) == 2:
            return
        assert state.get(mod) != 1, f"import cycle: {' -> '.join([*path, mod])}"
        state[mod] = 1
        for dep in sorted(deps.get(mod, ())):
            visit(dep, [*path, mod])
        state[mod] = 2

    for mod in sorted(deps):
        visit(mod, [])
