"""The layer order of irtlib's subpackages, machine-readable.

Each *unit* is a subpackage of :mod:`irtlib` (``core``, ``io``, ...), a top-level module
(``cli``), or ``foundation`` (:mod:`irtlib.errors`, :mod:`irtlib._typing`, :mod:`irtlib._version`
and this module). A module may import from its own unit and from the units that
:data:`MAY_IMPORT` lists for its unit, directly or through them ("and below"). Imports across
units are absolute (``from irtlib.core.kernels import probability``), within a unit relative.

The order, lowest first::

    foundation < core < io < calibration < {fit, selection} < {extended, protocol, bank}
               < {datasets, viz} < cli < book

``book`` is the leaf: the book's own package :mod:`irtbook` (``bookkit/irtbook`` in the repository, its
own wheel), which may import every unit of irtlib and which no module of irtlib imports. The package's own
``irtlib/__init__.py`` (the top-level API) and ``irtlib/__main__.py`` are facades over the units
and follow no rank, but load no lazy unit (``_LAZY``) at import time.

``tests/test_layers.py`` computes the import graph from the source (module-level and lazy
imports inside functions) and checks it against this table, and checks that the "Layer rule"
paragraph of each subpackage's docstring names exactly the units listed here.
"""

from __future__ import annotations

__all__ = ["FOUNDATION", "MAY_IMPORT", "allowed", "unit_of"]

#: The modules of the foundation unit (``irtlib.<name>``): importable from everywhere.
FOUNDATION: frozenset[str] = frozenset({"errors", "_typing", "_version", "_layers"})

#: For each unit, the units directly below it (what its docstring's "Layer rule" names).
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "foundation": (),
    "core": ("foundation",),
    "io": ("core",),
    "calibration": ("io",),
    "fit": ("calibration",),
    "selection": ("calibration",),
    "extended": ("selection",),
    "protocol": ("fit", "selection"),
    "bank": ("fit", "selection"),
    "datasets": ("extended", "protocol", "bank"),
    "viz": ("extended", "protocol", "bank"),
    "cli": ("datasets", "viz"),
    "book": ("cli",),
}


def allowed(unit: str) -> frozenset[str]:
    """The units a module of ``unit`` may import from: itself and everything below it.

    Parameters
    ----------
    unit : str
        A key of :data:`MAY_IMPORT`.

    Returns
    -------
    frozenset of str
        ``unit`` and the transitive closure of :data:`MAY_IMPORT` from it.
    """
    seen = {unit}
    todo = [unit]
    while todo:
        for below in MAY_IMPORT[todo.pop()]:
            if below not in seen:
                seen.add(below)
                todo.append(below)
    return frozenset(seen)


def unit_of(module: str) -> str | None:
    """The unit of a dotted module name (``"irtlib.core.kernels"`` -> ``"core"``; irtbook's: ``"book"``).

    Returns None for the package itself (``"irtlib"``) and ``"irtlib.__main__"``, which are
    facades, and for names outside irtlib.
    """
    parts = module.split(".")
    if parts[0] == "irtbook":
        return "book"
    if parts[0] != "irtlib" or len(parts) == 1 or parts[1] == "__main__":
        return None
    return "foundation" if parts[1] in FOUNDATION else parts[1]
