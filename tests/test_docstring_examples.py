"""Every example in the docstrings of irtlib and of the book's package runs and prints what it shows.

The modules are found by their source holding an example (``>>>``) that is run, so a module without
one is not imported here; examples that need data or a model the repository does not hold say
``# doctest: +SKIP``.
"""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"irtlib": ROOT / "irtlib", "irtbook": ROOT / "bookkit" / "irtbook"}


def _modules_with_examples() -> list[str]:
    names = []
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            if any(line.lstrip().startswith(">>>") and "doctest: +SKIP" not in line for line in lines):
                parts = path.relative_to(folder).with_suffix("").parts
                parts = parts[:-1] if parts[-1] == "__init__" else parts
                names.append(".".join((package, *parts)))
    return names


MODULES = _modules_with_examples()


def test_the_examples_are_found_in_both_packages():
    assert any(m.startswith("irtlib.") for m in MODULES) and any(m.startswith("irtbook.") for m in MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_as_shown(name):
    module = importlib.import_module(name)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    for test in tests:
        runner.run(test, out=out.write)
    assert runner.summarize(verbose=False).failed == 0, out.getvalue()
