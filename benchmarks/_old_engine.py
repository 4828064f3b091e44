"""The MAP engine as it was before this branch, loaded beside the working tree's for old-versus-new comparisons.

:func:`old_modules` reads ``irtlib/calibration/{newton,joint_map}.py`` at a git revision (default: where
this branch left ``main``, ``git merge-base HEAD main``) and imports them as private modules of
:mod:`irtlib.calibration`, the old ``joint_map`` bound to the old ``newton``, so one process can run both
engines on the same inputs.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, source: str) -> types.ModuleType:
    spec = importlib.util.spec_from_loader(f"irtlib.calibration.{name}", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "irtlib.calibration"
    module.__file__ = f"<{name}>"
    sys.modules[spec.name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def old_modules(rev: str | None = None) -> tuple[types.ModuleType, types.ModuleType]:
    """``(joint_map, newton)`` as at ``rev`` (default: the merge base of ``HEAD`` and ``main``)."""
    if rev is None:
        rev = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.strip()

    def show(path):
        return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout

    newton = _load("_old_newton", show("irtlib/calibration/newton.py"))
    source = show("irtlib/calibration/joint_map.py").replace("from .newton import", "from ._old_newton import")
    return _load("_old_joint_map", source), newton
