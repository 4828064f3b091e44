"""Fluid with the MAP estimate (06's paper-text runs): this tree's selector kernel and MAP push against REV's.

Replays the ``run_adaptive`` calls that ``benchmarks/capture_adaptive.py`` pickled from a build job, keeping
those with :class:`~irtlib.selection.MaxInformation` and ``--estimator`` (default
:class:`~irtlib.selection.MapEstimator`: Fluid as chapter 06's comparison job runs it), each twice, alternating
(ABBA) this tree's :mod:`irtlib.selection.maxinfo_kernel` library and the one compiled from ``REV``'s
``_maxinfo_kernel.c`` (with the same flags; its step is ``maxinfo_step``, as there), and the MAP estimator's push
in C (:func:`irtlib.selection.map_kernel.push`) and its numpy path (``REV``'s push, kept verbatim beside it);
``--old kernel`` or ``--old push`` makes only that part old. Everything else is this tree's. Asserts that every
step's items, every estimate and the final abilities equal the captured ones (old and new), and prints the CPU
seconds of each (shape, budget) group and the full passes::

    .venv/bin/python benchmarks/bench_maxinfo_ranked.py /tmp/cap-06 [--rev main] [--limit 3]

``--limit N`` replays at most N calls of each group (the shapes' first calls).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from capture_adaptive import same_trajectory

ROOT = Path(__file__).resolve().parents[1]

#: The old library's functions, bound with this tree's argument types.
_OLD_FUNCTIONS = ("best_candidates4", "maxinfo_full", "maxinfo_step", "maxinfo_vector_width")


def old_library(rev: str, new: ctypes.CDLL) -> ctypes.CDLL:
    """``REV``'s ``_maxinfo_kernel.c`` (and the header it includes) compiled with the flags of ``new``'s build."""
    from irtlib.calibration.fused_kernel import compile_kernel
    from irtlib.selection import maxinfo_kernel

    directory = Path(tempfile.mkdtemp(prefix="maxinfo-old-"))
    for name in ("_maxinfo_kernel.c", "_exact_information.h"):
        text = subprocess.run(["git", "show", f"{rev}:irtlib/selection/{name}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        (directory / name).write_text(text)
    flags = maxinfo_kernel.AVX512_FLAGS if new.maxinfo_vector_width() == 8 else ()
    lib = ctypes.CDLL(str(compile_kernel(source=directory / "_maxinfo_kernel.c", directory=directory,
                                         extra_flags=flags)))
    for name in _OLD_FUNCTIONS:
        getattr(lib, name).argtypes = getattr(new, name).argtypes
        getattr(lib, name).restype = getattr(new, name).restype
    assert lib.maxinfo_vector_width() == new.maxinfo_vector_width()
    return lib


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", help="directories written by capture_adaptive.py")
    parser.add_argument("--rev", default="main", help="the old kernel's git revision (default main)")
    parser.add_argument("--estimator", default="MapEstimator", help="the estimator class replayed")
    parser.add_argument("--limit", type=int, default=None, help="at most this many calls of each group")
    parser.add_argument("--old", choices=("both", "kernel", "push"), default="both", help="what the old runs take "
                        "from REV: the maximum-information kernel, the numpy push, or both (default)")
    args = parser.parse_args(argv)
    from irtlib.selection import estimators, maxinfo_kernel, selectors
    from irtlib.selection.adaptive import run_adaptive

    new = maxinfo_kernel.load()
    if new is None:
        print("the maximum-information kernel is not available here", file=sys.stderr)
        return 2
    libs = (old_library(args.rev, new) if args.old != "push" else new, new)
    contiguous = estimators._MapRun._contiguous
    original = selectors._MaxInfoRun.__init__

    def counted(self, *a, **k):
        original(self, *a, **k)
        runs.append(self)

    runs: list = []
    selectors._MaxInfoRun.__init__ = counted
    total = collections.defaultdict(lambda: [0.0, 0.0, 0, 0, 0])
    calls = collections.Counter()
    load0 = os.getloadavg()
    try:
        for directory in args.captures:
            for path in sorted(Path(directory).glob("*.pkl")):
                with open(path, "rb") as fh:
                    call = pickle.load(fh)
                kw = call["kwargs"]
                if (type(kw.get("selector")).__name__ != "MaxInformation"
                        or type(kw.get("estimator")).__name__ != args.estimator):
                    continue
                x = np.asarray(call["args"][0])
                group = (Path(directory).name, f"{x.shape[0]}x{x.shape[1]}", kw["budget"])
                if args.limit is not None and calls[group] >= args.limit:
                    continue
                calls[group] += 1
                for value in (*call["args"], *kw.values()):          # touched before the clock: page faults
                    if isinstance(value, np.ndarray):
                        value.sum()
                for which in ((0, 1) if calls[group] % 2 else (1, 0)):
                    maxinfo_kernel._LOADED["lib"] = libs[which]
                    numpy_push = which == 0 and args.old != "kernel"     # False here sends the push to numpy
                    estimators._MapRun._contiguous = (lambda self: False) if numpy_push else contiguous
                    runs.clear()
                    t = time.process_time()
                    traj = run_adaptive(*call["args"], **kw)
                    total[group][which] += time.process_time() - t
                    total[group][2 + which] += sum(r.full_passes for r in runs)
                    if not same_trajectory(traj, call["result"]):
                        print(f"DIFFERENT: {path} ({'old' if which == 0 else 'new'})", file=sys.stderr)
                        return 1
                total[group][4] += 1
    finally:
        maxinfo_kernel._LOADED["lib"] = new
        estimators._MapRun._contiguous = contiguous
        selectors._MaxInfoRun.__init__ = original
    print(f"{sum(v[4] for v in total.values())} captured calls (MaxInformation + {args.estimator}) replayed, old "
          f"({args.rev}'s {args.old}) and new alternating: every item, estimate and ability equal to the captured "
          f"ones. Load {load0} -> {os.getloadavg()}")
    print(f"{'job':<12} {'shape':>10} {'budget':>6} {'calls':>5} {'old s':>7} {'new s':>7} {'ratio':>6} "
          f"{'old passes':>10} {'new passes':>10}")
    sums = [0.0, 0.0, 0, 0]
    for g, (t_old, t_new, p_old, p_new, n) in sorted(total.items(), key=lambda kv: str(kv[0])):
        print(f"{g[0]:<12} {g[1]:>10} {g[2]:>6} {n:>5} {t_old:7.2f} {t_new:7.2f} {t_old / max(t_new, 1e-9):6.2f} "
              f"{p_old:>10} {p_new:>10}")
        sums = [sums[0] + t_old, sums[1] + t_new, sums[2] + p_old, sums[3] + p_new]
    print(f"total: old {sums[0]:.2f} s, new {sums[1]:.2f} s CPU, ratio {sums[0] / max(sums[1], 1e-9):.3f}; "
          f"full passes {sums[2]} -> {sums[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
