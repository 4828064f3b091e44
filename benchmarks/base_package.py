"""A base revision's whole ``irtlib``, importable beside this tree's as ``irtlib_base``: old and new in one process.

``git archive REV irtlib`` into a temporary folder, every module name ``irtlib.`` / ``irtlib`` (imports,
lazy-import tables) in its Python sources renamed to ``irtlib_base``, and the folder put first on ``sys.path``.
The base's C kernels compile from its own sources (the kernels' cache is keyed by the source), so a change of a
kernel is measured too. For the benchmarks that time a path against its old form in the same process
(:mod:`bench_static_path`)::

    base = base_package.load("main")
    base.protocol.agreement.static_selections(...)
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "irtlib_base"


def load(rev: str):
    """The revision's ``irtlib`` as the package ``irtlib_base`` (imported; its submodules on demand)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    folder = Path(tempfile.mkdtemp(prefix="irtlib-base-"))
    archive = subprocess.run(["git", "archive", rev, "irtlib"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "irtlib").rename(folder / NAME)
    word = re.compile(r"\birtlib(?=[.\s])")
    for path in (folder / NAME).rglob("*.py"):
        path.write_text(word.sub(NAME, path.read_text()))
    sys.path.insert(0, str(folder))
    return importlib.import_module(NAME)
