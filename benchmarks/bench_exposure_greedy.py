"""Benchmark: the primer's Sympson-Hetter calibration and the paper protocol's constrained b-quartile greedy.

Two exact speed-ups, each timed against its baseline in the same process (CPU seconds, the
baseline and the fast path alternated), with the results checked equal:

1. :func:`irtlib.selection.cat.sympson_hetter` on a bank of AIR-Bench 2024's size (4,906 items, 20
   items per test, exposure 0.3), with each ability cell's candidates
   (:class:`irtlib.selection.selectors.SympsonHetterCandidates`) against every item ranked at every
   step (the candidates switched off);
2. the b-quartile Marginal Fisher greedy constrained to cycle over the quartiles (the paper's text's
   rule, every paper-protocol split) from the C kernel, one heap per bin
   (:func:`irtlib.selection.greedy_kernel.binned_lazy_picks`), against the numpy path.

Run from the repository root (``--simulees`` sets the calibration's size; the primer's is 1,000)::

    .venv/bin/python benchmarks/bench_exposure_greedy.py [--simulees 200] [--repeats 2]
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

import numpy as np

from irtlib.selection import selectors
from irtlib.selection.cat import TwoPLItems, sympson_hetter
from irtlib.selection.static import _greedy_picks, b_quartile_bins, information_matrix


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def bench_sympson_hetter(n_simulees: int, repeats: int) -> None:
    rng = np.random.default_rng(0)
    a, b = np.exp(rng.normal(0.0, 0.5, 4906)), rng.normal(-0.5, 1.5, 4906)
    settings = dict(max_exposure=0.3, max_items=20, n_simulees=n_simulees, seed=0)
    full_ranking = selectors.sympson_hetter_candidates
    times = {"cells": [], "every item": []}
    for _ in range(repeats):
        t, fast = _cpu(lambda: sympson_hetter(TwoPLItems(a, b), **settings))
        times["cells"].append(t)
        selectors.sympson_hetter_candidates = lambda items: None
        try:
            t, slow = _cpu(lambda: sympson_hetter(TwoPLItems(a, b), **settings))
        finally:
            selectors.sympson_hetter_candidates = full_ranking
        times["every item"].append(t)
        assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])
    best = {k: min(v) for k, v in times.items()}
    print(f"Sympson-Hetter, {n_simulees} simulees x 4,906 items: every item ranked {best['every item']:.1f} CPU s, "
          f"candidate cells {best['cells']:.1f} CPU s ({best['every item'] / best['cells']:.1f}x), same K and exposure")


def bench_binned_greedy(repeats: int) -> None:
    rng = np.random.default_rng(1)
    a, b = np.exp(rng.normal(0.0, 0.6, 4906)), rng.normal(0.0, 1.5, 4906)
    info = information_matrix(a, b, rng.normal(0.0, 1.0, 90))
    bins = b_quartile_bins(b)
    k = 1472                                   # AIR-Bench's largest budget under the paper's protocol
    times = {True: [], False: []}
    for _ in range(repeats):
        for kernel in (True, False):
            order = _greedy_picks(info, bins=bins, kernel=kernel)
            t, picks = _cpu(lambda order=order: list(itertools.islice(order, k)))
            times[kernel].append(t)
            if kernel:
                first = picks
            else:
                assert picks == first
    c, n = min(times[True]), min(times[False])
    print(f"b-quartile greedy (constrained), {k} picks of 4,906 items x 90 models: numpy {n:.3f} CPU s, "
          f"C heaps {c:.3f} CPU s ({n / c:.1f}x), same picks")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulees", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}")
    bench_binned_greedy(args.repeats)
    bench_sympson_hetter(args.simulees, args.repeats)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
