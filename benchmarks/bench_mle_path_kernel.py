"""The authors' Fluid path (maximum information + bounded MLE, one C call): this tree's C and ``REV``'s, one process.

Reads the ``run_adaptive`` calls that ``benchmarks/capture_adaptive.py`` pickled (chapter 05's cells with
``N_JOBS 1``), keeps those that :mod:`irtlib.selection.fluid_path` runs (``MaxInformation`` with
``MleEstimator``), and replays each through :func:`irtlib.selection.adaptive.run_adaptive` twice, alternating
the order: once with this tree's ``_fluid_path_kernel.c`` (and the ``_mle_kernel.c``, ``_maxinfo_kernel.c``
and headers it includes) and once with ``REV``'s, built from ``git show REV:...`` into a temporary directory
with the same compiler flags (the AVX-512 build where the processor has it, as
:func:`irtlib.selection.fluid_path.load` prefers) and called through ``REV``'s ``fluid_path.py`` (its
argument list), imported beside this tree's; the rest of ``run_adaptive`` is this tree's in both. Asserts
that both give the captured items, estimates and final abilities bit for bit and prints the CPU seconds of
each, by shape and budget, and the ratio ``REV`` / this tree::

    .venv/bin/python benchmarks/bench_mle_path_kernel.py /tmp/cap-05 [--rev main] [--rounds 1]

The paper's protocol (section "Adaptive selection (Algorithm 1)", with the authors' released MLE in
[-8, 8]) is what chapter 05 runs; nothing here changes a run's settings.
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from capture_adaptive import same_trajectory

ROOT = Path(__file__).resolve().parents[1]
KERNEL_DIR = "irtlib/selection"


def _sources(rev: str, name: str, into: Path, seen: set) -> None:
    """``KERNEL_DIR/name`` at ``rev`` and every local file it includes, written into ``into``."""
    if name in seen:
        return
    seen.add(name)
    text = subprocess.run(["git", "show", f"{rev}:{KERNEL_DIR}/{name}"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    (into / name).write_text(text)
    for included in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, flags=re.MULTILINE):
        _sources(rev, included, into, seen)


def old_module(rev: str):
    """``irtlib/selection/fluid_path.py`` at ``rev``, imported as ``irtlib.selection._old_fluid_path``."""
    import importlib.util

    source = subprocess.run(["git", "show", f"{rev}:{KERNEL_DIR}/fluid_path.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    full = "irtlib.selection._old_fluid_path"
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(full, loader=None))
    module.__package__ = "irtlib.selection"
    module.__file__ = str(ROOT / KERNEL_DIR / "fluid_path.py")
    sys.modules[full] = module
    exec(compile(source, f"<{rev}:fluid_path.py>", "exec"), module.__dict__)
    return module


def old_library(rev: str, directory: Path, module):
    """``REV``'s fluid-path library, compiled as :func:`irtlib.selection.fluid_path.load` compiles this tree's,
    bound by ``REV``'s module."""
    from irtlib.calibration.fused_kernel import compile_kernel, cpu_flags
    from irtlib.selection import maxinfo_kernel

    src = directory / "src"
    src.mkdir()
    _sources(rev, "_fluid_path_kernel.c", src, set())
    wide = {"avx512f", "avx512dq"} <= cpu_flags() and os.environ.get("IRTLIB_MAXINFO_KERNEL_AVX512", "1") != "0"
    path = compile_kernel(source=src / "_fluid_path_kernel.c", directory=directory,
                          extra_flags=maxinfo_kernel.AVX512_FLAGS if wide else ())
    return module._bind(path)


def fluid_calls(directory: Path):
    """``(path, call)`` for every captured call with ``MaxInformation`` and ``MleEstimator``."""
    for path in sorted(directory.glob("*.pkl")):
        with open(path, "rb") as fh:
            call = pickle.load(fh)
        kw = call["kwargs"]
        if (type(kw.get("selector")).__name__, type(kw.get("estimator")).__name__) == ("MaxInformation",
                                                                                          "MleEstimator"):
            yield path, call


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", help="directories written by capture_adaptive.py")
    parser.add_argument("--rev", default="main", help="the old C's git revision (default main)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    from irtlib.selection import adaptive, fluid_path
    from irtlib.selection.adaptive import run_adaptive

    new = fluid_path.load()                   # compiled and checked against the class-based loop
    if new is None:
        print("this tree's fluid path does not load (no compiler, switched off, or unlike the loop)", file=sys.stderr)
        return 1
    old = old_module(args.rev)
    with tempfile.TemporaryDirectory(prefix="flu-old-") as tmp:
        old._LOADED["lib"] = old_library(args.rev, Path(tmp), old)
        modules = (old, fluid_path)
        total = collections.defaultdict(lambda: [0.0, 0.0, 0])
        checked, load = 0, [os.getloadavg()[0]]
        for directory in args.captures:
            for i, (path, call) in enumerate(fluid_calls(Path(directory))):
                x = np.asarray(call["args"][0])
                group = (f"{x.shape[0]}x{x.shape[1]}", call["kwargs"]["budget"])
                for r in range(args.rounds):
                    for which in ((0, 1) if (i + r) % 2 else (1, 0)):
                        adaptive.fluid_path = modules[which]
                        t = time.process_time()
                        traj = run_adaptive(*call["args"], **call["kwargs"])
                        total[group][which] += time.process_time() - t
                        want = call["result"]
                        if not same_trajectory(traj, want):
                            print(f"DIFFERENT: {path} ({'old' if which == 0 else 'new'})", file=sys.stderr)
                            return 1
                total[group][2] += 1
                checked += 1
                load.append(os.getloadavg()[0])
        adaptive.fluid_path = fluid_path
    print(f"{checked} captured calls (MaxInformation + MleEstimator) replayed, {args.rounds} round(s), {args.rev}'s C "
          f"and this tree's: every item, estimate and final ability equal to the captured ones. "
          f"Load (1 min) {min(load):.1f} to {max(load):.1f}")
    print(f"{'shape':>11} {'budget':>6} {'calls':>5} {'old s':>8} {'new s':>8} {'ratio':>6}")
    t_old = t_new = 0.0
    for g, (o, n, k) in sorted(total.items(), key=lambda kv: str(kv[0])):
        print(f"{g[0]:>11} {g[1]:>6} {k:>5} {o:8.2f} {n:8.2f} {o / max(n, 1e-9):6.3f}")
        t_old, t_new = t_old + o, t_new + n
    print(f"all: run_adaptive old {t_old:.2f} s, new {t_new:.2f} s CPU, ratio {t_old / max(t_new, 1e-9):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
