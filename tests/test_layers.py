"""irtlib's import graph, computed from the source, against the layer order of :mod:`irtlib._layers`.

The graph has one node per module of irtlib and one edge per import statement, at module level
or inside a function (a lazy import is still a dependency). It must have no cycle, no edge
against the layer order, no private name (``_x``) taken from another module, and nothing
outside :mod:`irtbook` may import the book.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from irtlib import _layers

PACKAGE = Path(__file__).resolve().parents[1] / "irtlib"
#: The book's own package (its own wheel): the unit ``book`` of the layer table.
BOOK = Path(__file__).resolve().parents[1] / "bookkit" / "irtbook"
TOP = ("irtlib", "irtbook")

#: Cycles allowed for now, each as a sorted tuple of its modules, with the reason (aim: none).
ALLOWED_CYCLES: dict[tuple[str, ...], str] = {}


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` imports ``target`` (and the names ``names`` from it) at ``line``."""

    source: str
    target: str
    line: int
    lazy: bool
    names: tuple[str, ...] = ()


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (``irtlib.core.kernels``), packages as their ``__init__``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        found[".".join(parts)] = path
    return found


@functools.cache
def _parsed(text: str, filename: str) -> ast.Module:
    """A module's syntax tree, parsed once per source text (every check walks the same trees; none changes them)."""
    return ast.parse(text, filename=filename)


def _tree(path: Path) -> ast.Module:
    return _parsed(path.read_text(), str(path))


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """The irtlib modules that ``module`` imports, with ``from X import sub`` resolved to the submodule."""
    tree = _tree(path)
    is_package = path.name == "__init__.py"
    edges = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] in TOP:
                        edges.append(Edge(module, alias.name, child.lineno, lazy))
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(module, is_package, child.level, child.module)
                if target.split(".")[0] not in TOP:
                    continue
                plain = []
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    if sub in modules:           # `from irtlib.io import jsonl`: the submodule
                        edges.append(Edge(module, sub, child.lineno, lazy))
                    else:
                        plain.append(alias.name)
                if plain or not child.names:
                    edges.append(Edge(module, target, child.lineno, lazy, tuple(plain)))
            else:
                visit(child, inner)
    visit(tree, False)
    return edges


def all_modules() -> dict[str, Path]:
    """Every module of irtlib and of the book's package irtbook, by dotted name."""
    return {**module_names(PACKAGE), **module_names(BOOK)}


def import_graph() -> list[Edge]:
    """Every import edge between the modules of irtlib and irtbook."""
    modules = all_modules()
    return [e for name, path in modules.items() for e in imports_of(name, path, modules)]


def private_attribute_uses(module: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """``mod._name`` where ``mod`` is a name bound to another irtlib module by an import."""
    tree = _tree(path)
    bound = {}
    for e in imports_of(module, path, modules):
        if e.target in modules and not e.names:
            bound[e.target.rsplit(".", 1)[-1]] = e.target
    for node in ast.walk(tree):
        for alias in getattr(node, "names", []) if isinstance(node, (ast.Import, ast.ImportFrom)) else []:
            if alias.asname:
                full = _resolve(module, path.name == "__init__.py", getattr(node, "level", 0),
                                getattr(node, "module", None))
                sub = f"{full}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
                if sub in modules:
                    bound[alias.asname] = sub
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and bound[node.value.id] != module):
            found.append(f"{module}:{node.lineno} uses {bound[node.value.id]}.{node.attr}")
    return found


def find_cycles(edges: list[Edge]) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.source != e.target:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(tuple(sorted(comp)))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(out)


def layer_violations(edges: list[Edge]) -> list[str]:
    """Edges from a unit into one it may not import (:func:`irtlib._layers.allowed`)."""
    bad = []
    for e in edges:
        src, dst = _layers.unit_of(e.source), _layers.unit_of(e.target)
        if e.target == "irtlib" and e.source != "irtlib.__main__":
            bad.append(f"{e.source}:{e.line} imports the top-level package irtlib (import the module instead)")
        elif src is not None and dst is not None and dst not in _layers.allowed(src):
            bad.append(f"{e.source}:{e.line} ({src}) imports {e.target} ({dst})"
                       + (" lazily" if e.lazy else ""))
    return bad


def private_violations(edges: list[Edge]) -> list[str]:
    """Private names (``_x``) and private modules taken from another module."""
    modules = all_modules()
    bad = []
    for e in edges:
        for name in e.names:
            if name.startswith("_") and not name.startswith("__") and e.target != e.source:
                bad.append(f"{e.source}:{e.line} imports {e.target}.{name}")
        leaf = e.target.rsplit(".", 1)[-1]
        owner = e.target.rsplit(".", 1)[0]
        if (leaf.startswith("_") and not leaf.startswith("__") and e.target in modules
                and _layers.unit_of(e.target) != "foundation" and not e.source.startswith(owner + ".")
                and e.source != owner):
            bad.append(f"{e.source}:{e.line} imports the private module {e.target}")
    for name, path in modules.items():
        bad.extend(private_attribute_uses(name, path, modules))
    return bad


# ---------------------------------------------------------------------------------------------
# the graph itself: these make sure the checks below look at something real
# ---------------------------------------------------------------------------------------------

def test_the_graph_sees_module_level_lazy_and_relative_imports():
    edges = import_graph()
    pairs = {(e.source, e.target, e.lazy) for e in edges}
    # a module-level relative import of a sibling, and of a name from a package
    assert ("irtlib.bank.build", "irtlib.bank.format", False) in pairs
    # a lazy (function-level) import
    assert any(e.lazy for e in edges if e.source == "irtlib.cli")
    # `from . import presets as _protocols` is an edge to the submodule
    assert ("irtlib.protocol.agreement", "irtlib.protocol.presets", False) in pairs
    assert len(module_names()) > 80


def test_the_checks_catch_what_they_are_meant_to(tmp_path):
    """The detectors on a hand-made package with one cycle, one upward and one private import."""
    pkg = tmp_path / "irtlib"
    for sub in ("core", "bank"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from irtlib.bank.b import g\n")
    (pkg / "bank" / "b.py").write_text("from irtlib.core.a import f, _hidden\nfrom irtlib.core import a\n"
                                       "x = a._secret\n")
    modules = module_names(pkg)
    edges = [e for n, p in modules.items() for e in imports_of(n, p, modules)]
    assert find_cycles(edges) == [("irtlib.bank.b", "irtlib.core.a")]
    assert layer_violations(edges) == ["irtlib.core.a:2 (core) imports irtlib.bank.b (bank) lazily"]
    hidden = [f"{e.source}:{e.line} imports {e.target}.{n}" for e in edges for n in e.names if n.startswith("_")]
    assert hidden == ["irtlib.bank.b:1 imports irtlib.core.a._hidden"]
    assert private_attribute_uses("irtlib.bank.b", modules["irtlib.bank.b"], modules) == [
        "irtlib.bank.b:3 uses irtlib.core.a._secret"]


# ---------------------------------------------------------------------------------------------
# the rules
# ---------------------------------------------------------------------------------------------

def test_no_import_cycle():
    cycles = [c for c in find_cycles(import_graph()) if c not in ALLOWED_CYCLES]
    assert cycles == [], cycles


def test_every_allowed_cycle_still_exists():
    """An allowed cycle that was removed must leave the list (so the list cannot grow stale)."""
    cycles = set(find_cycles(import_graph()))
    assert [c for c in ALLOWED_CYCLES if c not in cycles] == []


def test_no_import_against_the_layer_order():
    assert layer_violations(import_graph()) == []


def test_every_module_belongs_to_a_unit():
    units = {_layers.unit_of(name) for name in all_modules()} - {None}
    assert units == set(_layers.MAY_IMPORT)


def test_no_private_name_crosses_a_module():
    assert private_violations(import_graph()) == []


def test_the_book_is_a_leaf():
    users = sorted({f"{e.source} -> {e.target}" for e in import_graph()
                    if e.target.startswith("irtbook") and not e.source.startswith("irtbook")})
    assert users == []
    # and it is not inside the library's package (pip install irtlib does not get it)
    assert not (PACKAGE / "book").exists() and (BOOK / "__init__.py").is_file()


def test_the_layer_order_has_no_cycle_and_puts_the_book_on_top():
    for unit in _layers.MAY_IMPORT:
        below = _layers.allowed(unit) - {unit}
        assert all(unit not in _layers.allowed(b) for b in below), unit
    assert all("book" not in _layers.allowed(u) for u in _layers.MAY_IMPORT if u != "book")
    assert _layers.allowed("book") == set(_layers.MAY_IMPORT)


def test_the_books_package_has_the_librarys_version():
    """One book build ships one pair of wheels: irtbook's version is irtlib's."""
    import irtbook
    import irtlib

    assert irtbook.__version__ == irtlib.__version__


_RULE = re.compile(r"Layer rule\b(.*?)(?:\n\s*\n|\Z)", re.S)


@pytest.mark.parametrize("unit", sorted(u for u in _layers.MAY_IMPORT if u != "foundation"))
def test_each_subpackage_states_its_rule_as_the_table_does(unit):
    """The "Layer rule" paragraph of the subpackage's docstring names exactly the units directly below it."""
    init = BOOK / "__init__.py" if unit == "book" else PACKAGE / unit / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    match = _RULE.search(doc)
    assert match, f"{init}: no 'Layer rule' paragraph"
    text = match.group(1).split("today")[0]           # a remark on what is used today is not the rule
    named = {"foundation" if ref in _layers.FOUNDATION else ref
             for ref in re.findall(r"irtlib\.(\w+)", text) if ref not in ("_layers", unit)}
    if "foundation" in text:
        named.add("foundation")
    assert named == set(_layers.MAY_IMPORT[unit]), match.group(0)


def test_lazy_names_are_exactly_what_import_irtlib_does_not_load():
    """``_LAZY`` in irtlib/__init__ lists only subpackages that ``import irtlib`` leaves unloaded."""
    import irtlib

    code = "import sys, irtlib; print(' '.join(sorted(m for m in sys.modules if m.startswith('irtlib'))))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                timeout=120).stdout.split())
    assert irtlib._LAZY, "nothing lazy"
    assert [name for name in irtlib._LAZY if f"irtlib.{name}" in loaded] == []
    # and every unit `import irtlib` does not load is lazy (reachable as an attribute)
    units = {n.split(".")[1] for n in module_names() if n.count(".") >= 1 and not n.endswith("__main__")}
    units -= _layers.FOUNDATION
    assert sorted(u for u in units if f"irtlib.{u}" not in loaded) == sorted(irtlib._LAZY)


if __name__ == "__main__":       # print the violations: `python tests/test_layers.py`
    g = import_graph()
    print("cycles:", *find_cycles(g), sep="\n  ")
    print("layers:", *layer_violations(g), sep="\n  ")
    print("private:", *private_violations(g), sep="\n  ")
    print("book users:", *sorted({f"{e.source} -> {e.target}" for e in g if e.target.startswith("irtbook")
                                  and not e.source.startswith("irtbook")}), sep="\n  ")
