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
NOT_AT_IMPORT = ("irtlib.book", "irtlib.datasets", "irtlib.viz.figures", "matplotlib", "seaborn", "torch", "pyro",
                 "py_irt", "joblib", "tqdm", "kmedoids", "scipy.stats", "scipy.optimize", "inspect_ai")


def _loaded(code: str, *args: str) -> list[str]:
    probe = ("import sys, json, atexit\n"
             "atexit.register(lambda: sys.__stderr__.write('MODULES=' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
             + code)
    env = dict(os.environ, PYTHONWARNINGS="ignore")
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
    assert not {"matplotlib", "irtlib.viz.figures", "irtlib.book", "torch"} & modules


CORE = ("core.ability", "selection.adaptive", "protocol.agreement", "bank.build", "bank.format", "core.binarize",
        "calibration.joint_map", "cli", "core.responses", "fit.summaries", "errors", "bank.coverage", "bank.intervals",
        "io.tables", "io.atomic", "io.checksums", "io.download", "selection.methods", "core.kernels", "viz.report",
        "protocol.savings", "bank.session", "bank.subsets", "selection.static", "datasets", "io.helm",
        "datasets.release", "io.jsonl", "datasets.authors", "datasets.sources", "selection.cat", "core.eap",
        "extended.grm", "extended.mirt", "core.quadrature", "protocol.ceiling")


def test_the_public_api_is_typed():
    """Every public function and public method of the core has complete, resolvable type hints."""
    import importlib
    import inspect
    import typing

    assert (ROOT / "irtlib" / "py.typed").exists()
    missing = []
    for name in CORE:
        mod = importlib.import_module(f"irtlib.{name}")
        for attr in getattr(mod, "__all__", []):
            obj = getattr(mod, attr)
            if inspect.isfunction(obj):
                funcs = [(attr, obj)]
            elif inspect.isclass(obj):
                funcs = [(f"{attr}.{n}", f) for n, f in vars(obj).items()
                         if not n.startswith("_") and inspect.isfunction(getattr(f, "__func__", f))]
            else:
                funcs = []
            for label, f in funcs:
                f = getattr(f, "__func__", f)
                if getattr(f, "__module__", "").split(".")[0] != "irtlib":
                    continue
                typing.get_type_hints(f)                      # resolvable
                sig = inspect.signature(f)
                untyped = [p for p in sig.parameters.values()
                           if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
                if untyped or sig.return_annotation is inspect.Signature.empty:
                    missing.append(f"irtlib.{name}.{label}({', '.join(p.name for p in untyped)})")
    assert missing == [], missing
