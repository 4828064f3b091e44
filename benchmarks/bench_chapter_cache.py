"""Benchmark: what the chapters' content-keyed cache (:func:`irtbook.cache.cached_call`) saves a warm build.

For each computation a chapter now reads through ``cached_call`` (the primer's leave-one-out
tests, chapter 07's held-out coverage and growing-bank cycle, chapter 10's bank audit), it times
in the same process: the direct call (what every build paid before), the first ``cached_call``
(the direct call plus hashing the arguments and writing the entry: a cold build's cost) and the
second (hashing and reading the entry: a warm build's cost). It prints the seconds and the ratio
direct / warm, checks that the warm result equals the direct one, and removes its scratch cache.
Settings are the chapters' QUICK ones unless ``--full``. Run from the repository root::

    .venv/bin/python benchmarks/bench_chapter_cache.py [--full]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

import numpy as np
import pandas as pd

from irtbook.bank_checks import audit_benchmark
from irtbook.cache import cached_call
from irtbook.growing_bank import grow_cycle
from irtbook.own_benchmark import held_out_coverage
from irtbook.pipeline import load_benchmark
from irtbook.primer import leave_one_out_tests
from irtlib import datasets


def _timed(func, *args, **kwargs):
    start = time.perf_counter()
    value = func(*args, **kwargs)
    return time.perf_counter() - start, value


def equal(x, y) -> bool:
    """Whether two results hold the same values (frames and arrays element by element, NaN equal to NaN)."""
    if isinstance(x, (pd.DataFrame, pd.Series)):
        return type(x) is type(y) and x.equals(y) and bool(np.all(x.dtypes == y.dtypes) if x.ndim == 2 else
                                                         x.dtype == y.dtype)
    if isinstance(x, np.ndarray):
        return isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(equal(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(equal(a, b) for a, b in zip(x, y, strict=True))
    if dataclasses.is_dataclass(x):
        return type(x) is type(y) and equal(vars(x), vars(y))
    return bool(x == y) or (x != x and y != y)


def cases(full: bool) -> list[tuple[str, object, tuple, dict]]:
    """``(label, function, args, kwargs)`` as the chapters call them."""
    airbench = load_benchmark("airbench2024")
    harmbench = datasets.load("harmbench")
    return [
        ("00_primer leave_one_out_tests", leave_one_out_tests, (airbench.filtered,), {"budget": 20}),
        ("07 held_out_coverage", held_out_coverage, (harmbench,),
         {"budgets": [5, 10, 20, 30, 50, 100], "n_groups": 11, "seed": 0, "groups_run": 11 if full else 3}),
        ("07 grow_cycle", grow_cycle, (harmbench,), {"seed": 0}),
        ("10 audit_benchmark", audit_benchmark, (load_benchmark("harmbench").full,),
         {"n_replications": 5, "seed": 0}),
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the full build's settings (default: QUICK's)")
    args = parser.parse_args(argv)
    print(f"{'computation':34s} {'direct':>8s} {'cold':>8s} {'warm':>8s} {'direct/warm':>12s}")
    with tempfile.TemporaryDirectory(prefix="bench-chapter-cache-") as cache_dir:
        for label, func, fargs, kwargs in cases(args.full):
            direct_s, direct = _timed(func, *fargs, **kwargs)
            cold_s, _ = _timed(cached_call, func, *fargs, cache_dir=cache_dir, **kwargs)
            warm_s, warm = _timed(cached_call, func, *fargs, cache_dir=cache_dir, **kwargs)
            same = equal(warm, direct)
            print(f"{label:34s} {direct_s:7.2f}s {cold_s:7.2f}s {warm_s:7.3f}s {direct_s / warm_s:11.0f}x"
                  f"{'' if same else '   WARM RESULT DIFFERS'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
