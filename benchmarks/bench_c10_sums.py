"""Benchmark: S-X2's exact path and the GRM's sums, previous forms against current ones, in one process.

- ``sx2``: :func:`irtlib.fit.checks.item_fit` (S-X2, 201 nodes) of the six benchmarks' main fits (chapter
  04b; chapter 10's bank audit calls it on four of them): the current exact path (the leave-one-out table
  cleaned in place and not gathered when every rest score is distinct) or the previous one
  (``tests/fit_previous_forms.py``'s ``sx2_expected_exact``: ``nan_to_num``, ``clip`` and the gather);
- ``grm``: chapter 10's GRM questions on AIR-Bench 2024 (graded, strict rule): the held-out fit and the three
  splits of the agreement question (``irtbook.beyond.severity_heldout`` and ``severity_agreement``, full
  settings), with the current ``grm._expected_loglik`` or its previous form (``tests/grm_previous_forms.py``).

Each computation runs previous, current, current, previous; the CPU seconds (``process_time``) of the faster of
each pair, their ratio, the 1-minute load and whether the results are equal are printed. Run from the
repository root with the real data (``IRTLIB_REAL_DATA``) and a copy of the stage's cache::

    .venv/bin/python benchmarks/bench_c10_sums.py --cache-dir /tmp/cache [--only sx2 grm]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

NAMES = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


@contextlib.contextmanager
def previous_forms():
    """The previous forms swapped into irtlib for the duration."""
    import fit_previous_forms
    import grm_previous_forms

    from irtlib.extended import grm
    from irtlib.fit import checks

    current_sx2 = checks.sx2_expected

    def sx2_expected(p_nodes, weights, scores, *, exact=True, chunk=256):
        if exact:
            return fit_previous_forms.sx2_expected_exact(p_nodes, weights, scores)
        return current_sx2(p_nodes, weights, scores, exact=False, chunk=chunk)

    swaps = [(checks, "sx2_expected", sx2_expected), (grm, "_expected_loglik", grm_previous_forms.expected_loglik)]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    try:
        for module, name, value in swaps:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def sx2_inputs(cache_dir):
    from irtbook.pipeline import calibrate_benchmark, load_benchmark

    out = {}
    for b in NAMES:
        bench = load_benchmark(b, rule="strict")
        out[b] = (bench.filtered, calibrate_benchmark(bench, engine="pyirt-authors", epochs=1000, cache_dir=cache_dir))
    return out


def run_sx2(inputs):
    from irtlib.fit.checks import item_fit

    return {b: item_fit(m, cal, alpha=0.05) for b, (m, cal) in inputs.items()}


def grm_inputs():
    from irtbook import beyond as bz
    from irtlib import datasets
    from irtlib.extended import grm

    raw = datasets.load_raw("airbench2024-real")
    cats, _ = grm.to_categories(bz.wide(raw).to_numpy())
    p = np.nanmean(bz.binarize(cats, 2), axis=0)
    cats = cats[:, p * (1 - p) > 0.01]
    return cats, np.nanmean(bz.binarize(cats, 2), axis=1)


def run_grm(inputs):
    from irtbook import beyond as bz

    cats, reference = inputs
    held = bz.severity_heldout(cats, safe_from=2, seed=0, tol=1e-5)
    runs = bz.severity_agreement(cats, reference, safe_from=2, ks=[1, 2, 3, 5, 8, 12, 20, 30, 50], n_splits=3,
                                 n_test=10, seed=0, tol=1e-5)
    return {k: v for k, v in held.items() if k != "grm_seconds"}, runs


def same(x, y) -> bool:
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, tuple):
        return len(x) == len(y) and all(same(u, v) for u, v in zip(x, y, strict=True))
    if isinstance(x, pd.DataFrame):
        return x.equals(y)
    return x == y


def timed(run, inputs, previous):
    with previous_forms() if previous else contextlib.nullcontext():
        start = time.process_time()
        out = run(inputs)
        return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--only", nargs="+", default=["sx2", "grm"])
    args = parser.parse_args()
    cases = {"sx2": (run_sx2, lambda: sx2_inputs(args.cache_dir)), "grm": (run_grm, grm_inputs)}
    for name in args.only:
        run, make = cases[name]
        inputs = make()
        run(inputs)                                    # imports and first-call costs out of the timings
        best, results = {True: np.inf, False: np.inf}, {}
        for previous in (True, False, False, True):
            seconds, results[previous] = timed(run, inputs, previous)
            best[previous] = min(best[previous], seconds)
        print(f"{name:<5} previous {best[True]:7.2f}  current {best[False]:7.2f}  ratio {best[True] / best[False]:5.2f}"
              f"  same: {same(results[True], results[False])}  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
