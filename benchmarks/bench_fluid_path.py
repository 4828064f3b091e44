"""The build's adaptive runs replayed through this tree's ``run_adaptive`` and ``main``'s, in one process.

Reads the ``run_adaptive`` calls that ``benchmarks/capture_adaptive.py`` pickled from build jobs (chapter
06's comparison job, chapter 05's cells) with the trajectories ``main`` returned, and replays each call with
this tree's :func:`irtlib.selection.adaptive.run_adaptive` and with ``main``'s: ``main``'s
``irtlib/selection/{selectors,estimators,engine,adaptive}.py`` read with ``git show REV:...`` and imported
beside them as private modules (each old module importing the other old ones), alternating old and new.
Asserts that every step's items, every estimate and the final abilities equal the captured ones (both
paths), and prints the CPU seconds of each group (job, selector, estimator, shape, budget) and the ratio
old / new::

    .venv/bin/python benchmarks/bench_fluid_path.py /tmp/cap-06 /tmp/cap-05 [--rev main] [--rounds 1]

``--modules selectors`` makes only the selectors old (the earlier ``bench_fluid_loop.py``'s comparison: this
tree's selectors against ``REV``'s, the rest of the loop this tree's).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from capture_adaptive import same_trajectory

ROOT = Path(__file__).resolve().parents[1]

#: The modules whose old versions make the old path, in import order.
CHANGED = ("selectors", "estimators", "engine", "adaptive")


def old_modules(rev: str, names=CHANGED) -> dict:
    """``irtlib/selection/<name>.py`` at ``rev`` for each of ``names`` (of :data:`CHANGED`), as ``_old_<name>``."""
    out = {}
    for name in names:
        source = subprocess.run(["git", "show", f"{rev}:irtlib/selection/{name}.py"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout
        for other in names:
            source = source.replace(f"from .{other} import", f"from ._old_{other} import")
        full = f"irtlib.selection._old_{name}"
        spec = importlib.util.spec_from_loader(full, loader=None)
        module = importlib.util.module_from_spec(spec)
        module.__package__ = "irtlib.selection"
        module.__file__ = f"<{rev}:{name}>"
        sys.modules[full] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        out[name] = module
    return out


def as_old(obj, old: dict):
    """The old modules' selector or estimator configured as ``obj`` (None stays None)."""
    if obj is None:
        return None
    name = type(obj).__name__
    for module in (old[m] for m in ("selectors", "estimators") if m in old):
        cls = getattr(module, name, None)
        if cls is not None:
            clone = cls.__new__(cls)
            clone.__dict__.update(obj.__dict__)
            return clone
    return obj          # a selector of another module (the protocol's replayed items)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", help="directories written by capture_adaptive.py")
    parser.add_argument("--rev", default="main", help="the old code's git revision (default main)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--estimator", default=None, help="replay only the calls with this estimator class")
    parser.add_argument("--modules", nargs="+", choices=CHANGED, default=list(CHANGED),
                        help="the modules taken from REV (default all four)")
    args = parser.parse_args(argv)
    from irtlib.selection import fluid_path
    from irtlib.selection.adaptive import run_adaptive

    fluid_path.load()                     # compiled and checked before any timing
    old = old_modules(args.rev, [m for m in CHANGED if m in args.modules])
    runs = (old["adaptive"].run_adaptive if "adaptive" in old else run_adaptive, run_adaptive)
    total = collections.defaultdict(lambda: [0.0, 0.0, 0])
    checked = 0
    for directory in args.captures:
        for i, path in enumerate(sorted(Path(directory).glob("*.pkl"))):
            with open(path, "rb") as fh:
                call = pickle.load(fh)
            kw = dict(call["kwargs"])
            if args.estimator is not None and type(kw.get("estimator")).__name__ != args.estimator:
                continue
            x = np.asarray(call["args"][0])
            group = (Path(directory).name, type(kw.get("selector")).__name__, type(kw.get("estimator")).__name__,
                     f"{x.shape[0]}x{x.shape[1]}", kw["budget"])
            for r in range(args.rounds):
                for which in ((0, 1) if (i + r) % 2 else (1, 0)):
                    run_kw = dict(kw)
                    if which == 0:
                        run_kw.update(selector=as_old(kw.get("selector"), old),
                                      estimator=as_old(kw.get("estimator"), old))
                    t = time.process_time()
                    traj = runs[which](*call["args"], **run_kw)
                    total[group][which] += time.process_time() - t
                    if not same_trajectory(traj, call["result"]):
                        print(f"DIFFERENT: {path} ({'old' if which == 0 else 'new'})", file=sys.stderr)
                        return 1
            total[group][2] += 1
            checked += 1
    print(f"{checked} captured run_adaptive calls replayed, {args.rounds} round(s) each, old ({args.rev}) and new: "
          f"every item and estimate equal to the captured results. Load {os.getloadavg()}")
    print(f"{'job':<10} {'selector':<16} {'estimator':<19} {'shape':>11} {'budget':>6} {'calls':>5} "
          f"{'old s':>7} {'new s':>7} {'ratio':>6}")
    sums = collections.defaultdict(lambda: [0.0, 0.0])
    for g, (t_old, t_new, n) in sorted(total.items(), key=lambda kv: str(kv[0])):
        print(f"{g[0]:<10} {g[1]:<16} {g[2]:<19} {g[3]:>11} {g[4]:>6} {n:>5} {t_old:7.2f} {t_new:7.2f} "
              f"{t_old / max(t_new, 1e-9):6.2f}")
        sums[g[0]][0] += t_old
        sums[g[0]][1] += t_new
    for job, (t_old, t_new) in sums.items():
        print(f"{job}: run_adaptive old {t_old:.2f} s, new {t_new:.2f} s CPU, ratio {t_old / max(t_new, 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
