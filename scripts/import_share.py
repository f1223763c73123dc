"""Share of evoharness's internal imports (``from evoharness...`` / ``import evoharness...``) that sit inside
functions rather than at module top. Usage: python scripts/import_share.py [--list] [PACKAGE_DIR]"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def internal_imports(path: Path) -> tuple[int, list[tuple[int, str]]]:
    """(module-level internal imports, [(line, module) of function-level ones])."""
    tree = ast.parse(path.read_text())
    top, inner = 0, []

    def name(node: ast.AST) -> str | None:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "evoharness":
            return node.module
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names if a.name.split(".")[0] == "evoharness"]
            return mods[0] if mods else None
        return None

    def walk(node: ast.AST, in_function: bool) -> None:
        nonlocal top
        for child in ast.iter_child_nodes(node):
            mod = name(child)
            if mod is not None:
                if in_function:
                    inner.append((child.lineno, mod))
                else:
                    top += 1
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    walk(tree, False)
    return top, inner


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    show = "--list" in argv
    args = [a for a in argv if a != "--list"]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "evoharness"
    if not root.is_dir():  # it printed 'internal imports: 0 ... (0.0%)' for a mistyped directory (or --help)
        print(f"error: {root}: no such package directory", file=sys.stderr)
        return 2
    top_n = inner_n = 0
    for path in sorted(root.rglob("*.py")):
        top, inner = internal_imports(path)
        top_n += top
        inner_n += len(inner)
        if show:
            for line, mod in inner:
                print(f"{path.relative_to(root.parent)}:{line}: {mod}")
    total = top_n + inner_n
    print(f"internal imports: {total}; at module top {top_n}; inside functions {inner_n} "
          f"({100 * inner_n / max(total, 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
