"""The package's size at a glance: the longest functions and the largest modules of ``irtlib``.

Run with ``.venv/bin/python benchmarks/code_metrics.py [--top 10]``. Lines are physical lines
from ``def`` to the function's last line (docstring included), modules' lines are ``wc -l``.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "irtlib"


def functions(root: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(lines, "module:qualified.name")`` of every function and method under ``root``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(root.parent).as_posix()

        def visit(node, prefix="", rel=rel):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = prefix + child.name
                    out.append((child.end_lineno - child.lineno + 1, f"{rel}:{name}"))
                    visit(child, name + ".", rel)
                elif isinstance(child, ast.ClassDef):
                    visit(child, prefix + child.name + ".", rel)

        visit(tree)
    return sorted(out, reverse=True)


def modules(root: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(lines, path)`` of every module under ``root``, largest first."""
    return sorted(((len(p.read_text(encoding="utf-8").splitlines()), p.relative_to(root.parent).as_posix())
                   for p in root.rglob("*.py")), reverse=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    print("longest functions (lines):")
    for n, name in functions()[:args.top]:
        print(f"  {n:5d}  {name}")
    print("largest modules (lines):")
    for n, name in modules()[:args.top]:
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
