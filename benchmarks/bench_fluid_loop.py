"""The build's own adaptive runs, replayed: this tree's selectors against ``main``'s, in one process.

Reads the ``run_adaptive`` calls that ``benchmarks/capture_adaptive.py`` pickled from a build job (chapter
06's comparison job, chapter 05's cells), with the trajectories ``main`` returned for them, and replays
each call with this tree's code and with ``main``'s ``irtlib/selection/selectors.py`` (read with ``git
show REV:...`` and imported beside it as a private module, so both run on the same inputs in this
process), alternating old and new. Asserts that every step's items, every estimate and the final
abilities equal the captured ones (new) and each other (old), and prints each group's CPU seconds (by
selector, estimator and shape) and the ratio::

    .venv/bin/python benchmarks/bench_fluid_loop.py /tmp/cap-06 /tmp/cap-05 [--rev main] [--rounds 1]
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

ROOT = Path(__file__).resolve().parents[1]

#: The modules whose old versions replay the old path, imported as ``irtlib.selection._old_<name>``.
CHANGED = ("selectors",)


def old_module(name: str, rev: str):
    """``irtlib/selection/<name>.py`` at ``rev``, imported as a private module of :mod:`irtlib.selection`."""
    source = subprocess.run(["git", "show", f"{rev}:irtlib/selection/{name}.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    full = f"irtlib.selection._old_{name}"
    spec = importlib.util.spec_from_loader(full, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "irtlib.selection"
    module.__file__ = f"<{rev}:{name}>"
    sys.modules[full] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def as_old(selector, old):
    """The old module's selector configured as ``selector``."""
    cls = type(selector).__name__
    if cls == "MaxInformation":
        return old.MaxInformation(cache_size=selector.cache_size, radii=selector.radii, screen=selector.screen)
    if cls == "RandomSelection":
        return old.RandomSelection()
    raise ValueError(f"no old form for {selector!r}")


def same(t, u) -> bool:
    """Whether two trajectories have the same items, estimates and final abilities, bit for bit."""
    ok = np.array_equal(t.items, u.items) and np.array_equal(t.estimate, u.estimate, equal_nan=True)
    if t.ability is not None or u.ability is not None:
        ok = ok and np.array_equal(t.ability, u.ability, equal_nan=True)
    return ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", help="directories written by capture_adaptive.py")
    parser.add_argument("--rev", default="main", help="the old code's git revision (default main)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    from irtlib.selection.adaptive import run_adaptive

    old = old_module(CHANGED[0], args.rev)
    total = collections.defaultdict(lambda: [0.0, 0.0, 0])
    checked = 0
    for directory in args.captures:
        files = sorted(Path(directory).glob("*.pkl"))
        for i, path in enumerate(files):
            with open(path, "rb") as fh:
                call = pickle.load(fh)
            kw = dict(call["kwargs"])
            sel = kw.get("selector")
            if sel is None or type(sel).__name__ not in ("MaxInformation", "RandomSelection"):
                continue
            x = np.asarray(call["args"][0])
            group = (Path(directory).name, type(sel).__name__, type(kw.get("estimator")).__name__,
                     f"{x.shape[0]}x{x.shape[1]}", kw["budget"])
            for r in range(args.rounds):
                for which in ((0, 1) if (i + r) % 2 else (1, 0)):
                    run_kw = dict(kw, selector=as_old(sel, old) if which == 0 else sel)
                    t = time.process_time()
                    traj = run_adaptive(*call["args"], **run_kw)
                    total[group][which] += time.process_time() - t
                    if not same(traj, call["result"]):
                        print(f"DIFFERENT: {path} ({'old' if which == 0 else 'new'})", file=sys.stderr)
                        return 1
            total[group][2] += 1
            checked += 1
    print(f"{checked} captured run_adaptive calls replayed, {args.rounds} round(s) each, old ({args.rev}) and new: "
          f"every item and estimate equal to the captured results. Load {os.getloadavg()}")
    print(f"{'job':<10} {'selector':<16} {'estimator':<19} {'shape':>10} {'budget':>6} {'calls':>5} "
          f"{'old s':>7} {'new s':>7} {'ratio':>6}")
    sums = collections.defaultdict(lambda: [0.0, 0.0])
    for g, (t_old, t_new, n) in sorted(total.items(), key=lambda kv: str(kv[0])):
        print(f"{g[0]:<10} {g[1]:<16} {g[2]:<19} {g[3]:>10} {g[4]:>6} {n:>5} {t_old:7.2f} {t_new:7.2f} "
              f"{t_old / max(t_new, 1e-9):6.2f}")
        sums[g[0]][0] += t_old
        sums[g[0]][1] += t_new
    for job, (t_old, t_new) in sums.items():
        print(f"{job}: old {t_old:.2f} s, new {t_new:.2f} s CPU, ratio {t_old / max(t_new, 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
