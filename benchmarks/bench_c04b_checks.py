"""Benchmark: chapter 04b's model-fit checks, the previous forms against the current ones, in one process.

Issue 26 ``c04b``. The previous forms are the modules as they are at the merge base of this branch and
``main`` (``git show``, loaded beside the working tree's as private modules of their packages), run on the
same inputs as the chapter (the six benchmarks' filtered matrices, with the reversed responses of the two
multiple-choice ones for the 3PL with its asymptote at the top):

- ``cmp``: :func:`irtlib.calibration.models.compare_models` (the chapter's 1PL/2PL/3PL cross-validation);
- ``dims``: :func:`irtlib.fit.checks.dimensionality` (parallel analysis: 20 replications, 8 eigenvalues) on
  the MAP engine's fit of each benchmark (the chapter's ``refit_fits``, read from ``--cache-dir`` or fitted).

Previous then current, then current then previous, and so on for ``--repeats`` rounds (ABBA); prints the fastest CPU
seconds of each, their ratio, the 1-minute load, and whether the results are equal (frames with ``DataFrame.equals``
and their ``attrs``, bit for bit)::

    .venv/bin/python benchmarks/bench_c04b_checks.py [--only cmp dims] [--repeats 2] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ("airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio")
MULTIPLE_CHOICE = ("safetybench", "wmdp-bio")


def previous_module(path: str, name: str, rev: str | None = None) -> types.ModuleType:
    """The module at ``path`` (``irtlib/calibration/models.py``) as at ``rev`` (default: the merge base with main)."""
    if rev is None:
        rev = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True, capture_output=True,
                             text=True).stdout.strip()
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout
    package = ".".join(Path(path).with_suffix("").parts[:-1])
    spec = importlib.util.spec_from_loader(f"{package}.{name}", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    module.__file__ = f"<{name}>"
    sys.modules[spec.name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def same_frame(a, b) -> bool:
    drop = [c for c in ("seconds",) if c in a.columns]
    return bool(a.drop(columns=drop).equals(b.drop(columns=drop)) and repr(a.attrs) == repr(b.attrs))


def cmp_cases():
    """``(label, call)`` per compare_models call of the chapter: each benchmark, and the reversed 3PL."""
    from irtbook.pipeline import load_benchmark
    from irtlib.core.responses import ResponseMatrix

    cases = []
    for name in BENCHMARKS:
        m = load_benchmark(name).filtered
        mc = name in MULTIPLE_CHOICE
        cases.append((name, m, ("1pl", "2pl", "3pl") if mc else ("1pl", "2pl")))
        if mc:
            cases.append((name + " (3pl-top)", ResponseMatrix(1.0 - m.values, m.models, m.items, source="reversed"),
                          ("3pl",)))
    return cases


def dims_cases(cache_dir):
    from irtbook.pipeline import calibrate_benchmark, load_benchmark

    cases = []
    for name in BENCHMARKS:
        bench = load_benchmark(name)
        cases.append((name, bench.filtered, calibrate_benchmark(bench, engine="map", cache_dir=cache_dir)))
    return cases


def timed(call):
    start = time.process_time()
    out = call()
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["cmp", "dims"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args()
    from irtlib.calibration import models
    from irtlib.fit import checks

    jobs = []
    if "cmp" in args.only:
        old_models = previous_module("irtlib/calibration/models.py", "_previous_models")
        for label, m, which in cmp_cases():
            jobs.append((f"compare_models {label}",
                         lambda m=m, w=which: old_models.compare_models(m, models=w, folds=5, seed=0),
                         lambda m=m, w=which: models.compare_models(m, models=w, folds=5, seed=0)))
    if "dims" in args.only:
        old_checks = previous_module("irtlib/fit/checks.py", "_previous_checks")
        for label, m, cal in dims_cases(args.cache_dir):
            jobs.append((f"dimensionality {label}",
                         lambda m=m, c=cal: old_checks.dimensionality(m, c, n=8, n_replications=20, seed=0),
                         lambda m=m, c=cal: checks.dimensionality(m, c, n=8, n_replications=20, seed=0)))
    totals = [0.0, 0.0]
    for label, previous, current in jobs:
        best = [float("inf"), float("inf")]
        same = True
        for r in range(args.repeats):
            if r % 2 == 0:                         # ABBA: previous first in even rounds, current first in odd ones
                t_old, want = timed(previous)
                t_new, got = timed(current)
            else:
                t_new, got = timed(current)
                t_old, want = timed(previous)
            best = [min(best[0], t_old), min(best[1], t_new)]
            same = same and same_frame(want, got)
        totals = [totals[0] + best[0], totals[1] + best[1]]
        print(f"{label:42s} previous {best[0]:6.2f}  current {best[1]:6.2f}  ratio {best[0] / best[1]:5.2f}  "
              f"same: {same}  load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{'total':42s} previous {totals[0]:6.2f}  current {totals[1]:6.2f}  ratio {totals[0] / totals[1]:5.2f}")


if __name__ == "__main__":
    main()
