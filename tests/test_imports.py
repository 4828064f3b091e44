"""What ``import irtlib`` and ``irtlib --help`` load: the core, not the book, plots or torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Never loaded by ``import irtlib`` or ``irtlib --help``.
NOT_AT_IMPORT = ("irtbook", "irtlib.datasets", "irtlib.viz.figures", "matplotlib", "seaborn", "torch", "pyro",
                 "py_irt", "joblib", "tqdm", "kmedoids", "scipy.stats", "scipy.optimize", "inspect_ai",
                 "irtlib.bank.inspect_adaptive")


def _loaded(code: str, *args: str) -> list[str]:
    probe = ("import sys, json, atexit\n"
             "atexit.register(lambda: sys.__stderr__.write('MODULES=' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
             + code)
    # without COVERAGE_*: coverage started in the probe (make test-all's subprocess hook) would add its own
    # modules to what a user's interpreter loads, and doubles the cost of the imports (the lines they run are
    # measured in the test process and by the real-process CLI tests)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    env["PYTHONWARNINGS"] = "ignore"
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    line = next(text for text in proc.stderr.splitlines() if text.startswith("MODULES="))
    return json.loads(line[len("MODULES="):])


@pytest.mark.parametrize("code, args", [
    ("import irtlib", ()),
    ("import sys, runpy; sys.argv[0] = 'irtlib'; runpy.run_module('irtlib', run_name='__main__')", ("--help",)),
], ids=["import irtlib", "irtlib --help"])
def test_the_core_loads_nothing_it_does_not_need(code, args):
    modules = set(_loaded(code, *args))
    assert "irtlib" in modules
    heavy = [m for m in NOT_AT_IMPORT if m in modules]
    assert heavy == [], heavy


def test_inspect_ai_is_loaded_only_by_the_inspect_integration():
    """The bank, its sessions and the log readers work without Inspect; only the live integration imports it."""
    modules = set(_loaded("import irtlib.bank, irtlib.bank.session, irtlib.io.formats.inspect_logs, irtlib.cli"))
    assert not {"inspect_ai", "irtlib.bank.inspect_adaptive"} & modules
    modules = set(_loaded("import irtlib.bank.inspect_adaptive"))
    assert {"inspect_ai", "irtlib.bank.inspect_adaptive"} <= modules


def test_without_inspect_the_integration_names_the_extra():
    code = ("import sys; sys.modules['inspect_ai'] = None\n"
            "from irtlib.errors import MissingDependencyError\n"
            "try:\n    import irtlib.bank.inspect_adaptive\n"
            "except MissingDependencyError as exc:\n    print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() == ("irtlib.bank.inspect_adaptive runs adaptive tests inside Inspect AI and needs the "
                                   "optional inspect_ai package: pip install 'irtlib[inspect]'"), proc.stderr


def test_lazy_subpackages_still_import():
    import irtlib
    from irtlib import datasets
    assert irtlib.datasets is datasets and callable(datasets.load)
    import irtlib.viz.figures

    assert irtlib.viz.figures.METHOD_STYLE
    assert "datasets" in dir(irtlib)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        irtlib.nope  # noqa: B018


def test_the_calibrate_command_loads_no_plotting(tmp_path):
    rows = "".join(f"m{i},q{j},{(i * 7 + j * 3) % 5 > 1:d}\n" for i in range(12) for j in range(10))
    (tmp_path / "r.csv").write_text("model,item,score\n" + rows)
    code = ("import sys; from irtlib.cli import main; "
            f"main(['calibrate', {str(tmp_path / 'r.csv')!r}, '-o', {str(tmp_path / 'b.csv')!r}, '-q', "
            "'--no-interval-check'])")
    modules = set(_loaded(code))
    assert (tmp_path / "b.csv").exists()
    assert not {"matplotlib", "irtlib.viz.figures", "irtbook", "torch"} & modules


def public_modules() -> list[str]:
    """Every public module of irtlib, found by walking the package (no ``_private`` module; not the book).

    :mod:`irtbook` is left out: it is the chapters' plumbing (a leaf nothing else imports, whose
    signatures follow the chapters), not an API a practitioner's code calls.
    """
    import pkgutil

    import irtlib

    names = ["irtlib"]
    for info in pkgutil.walk_packages(irtlib.__path__, "irtlib."):
        parts = info.name.split(".")
        if parts[1] == "book" or any(p.startswith("_") for p in parts[1:]):
            continue
        names.append(info.name)
    return sorted(names)


def test_the_walk_finds_every_layer():
    found = set(public_modules())
    assert {"irtlib.core.kernels", "irtlib.calibration.models", "irtlib.calibration.pyirt", "irtlib.fit.checks",
            "irtlib.viz.fit_figures", "irtlib.cli", "irtlib.datasets.real", "irtlib.extended.grm"} <= found
    assert not any(n.startswith("irtbook") or n.startswith("irtlib._") for n in found)
    files = [p.relative_to(ROOT / "irtlib") for p in (ROOT / "irtlib").rglob("*.py")]
    public = [p for p in files if p.parts[0] != "book" and (p.name == "__init__.py" or not p.name.startswith("_"))]
    assert len(found) == len(public)          # one module per public file: nothing skipped by the walk


def test_the_public_api_is_typed():
    """Every public function, method and property of every public module has complete, resolvable type hints.

    The public names of a module are its ``__all__`` (else the public names it defines); a name
    re-exported from another module is checked where it is defined.
    """
    import importlib
    import inspect
    import typing

    assert (ROOT / "irtlib" / "py.typed").exists()
    missing, checked = [], 0
    for name in public_modules():
        mod = importlib.import_module(name)
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n, o in vars(mod).items()
                     if not n.startswith("_") and getattr(o, "__module__", None) == name]
        for attr in names:
            obj = getattr(mod, attr)
            if inspect.isfunction(obj):
                funcs = [(attr, obj)]
            elif inspect.isclass(obj) and obj.__module__ == name:
                funcs = [(f"{attr}.{n}", f) for n, f in vars(obj).items()
                         if not n.startswith("_") and inspect.isfunction(getattr(f, "__func__", f))]
                funcs += [(f"{attr}.{n}", f.fget) for n, f in vars(obj).items()
                          if not n.startswith("_") and isinstance(f, property)]
            else:
                funcs = []
            for label, f in funcs:
                f = getattr(f, "__func__", f)
                if getattr(f, "__module__", "") != name:      # re-exported: checked where it is defined
                    continue
                checked += 1
                typing.get_type_hints(f)                      # resolvable
                sig = inspect.signature(f)
                untyped = [p for p in sig.parameters.values()
                           if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
                if untyped or sig.return_annotation is inspect.Signature.empty:
                    missing.append(f"{name}.{label}({', '.join(p.name for p in untyped)})")
    assert missing == [], missing
    assert checked > 300, checked                             # the walk looked at the whole API
