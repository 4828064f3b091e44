"""Benchmark: the arrow step's ``(C B^-1)_u`` in one buffer against Python's ``sum`` of new arrays, in one process.

:func:`irtlib.calibration.newton.arrow_step` (the 1PL's and 3PL's Fisher scoring, :mod:`irtlib.calibration.models`)
forms ``sum(cross[v] * binv[v][u] for v)`` for each item parameter ``u``: on SafetyBench's 29 x 11,395 cells
the 3PL's three terms made six full tables a step. ``newton._cross_sum`` adds them into the first term's buffer
(the same terms in the same order); "generator" swaps Python's ``sum`` back in for the run.

The computation is chapter 04b's cross-validation rows of the multiple-choice benchmarks (``compare_models``
with the 1PL, 2PL and 3PL, then the 3PL on the reversed responses, 5 folds, seed 0), in the order generator,
in place, in place, generator; the faster CPU seconds of each pair, their ratio, the load and whether the
result frames are equal (``DataFrame.equals`` without the measured ``seconds``) are printed::

    .venv/bin/python benchmarks/bench_b10_arrow.py [--only safetybench wmdp-bio]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import pandas as pd


@contextlib.contextmanager
def generator_sum():
    """Python's ``sum`` of the terms in place of ``newton._cross_sum`` for the duration."""
    from irtlib.calibration import newton

    saved = newton._cross_sum
    newton._cross_sum = lambda cross, coefficients: sum(c * w for c, w in zip(cross, coefficients, strict=True))
    try:
        yield
    finally:
        newton._cross_sum = saved


def comparison(name):
    from irtbook.pipeline import load_benchmark
    from irtlib.calibration.models import compare_models
    from irtlib.core.responses import ResponseMatrix

    m = load_benchmark(name).filtered
    flipped = ResponseMatrix(1.0 - m.values, m.models, m.items, source=m.source + " (reversed)")

    def run():
        t = compare_models(m, models=("1pl", "2pl", "3pl"), folds=5, seed=0)
        top = compare_models(flipped, models=("3pl",), folds=5, seed=0)
        return pd.concat([t, top.assign(model="3pl-top")], ignore_index=True).drop(columns="seconds")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["safetybench", "wmdp-bio"])
    args = parser.parse_args()
    for name in args.only:
        run = comparison(name)
        times, outs = {"generator": [], "in place": []}, {}
        for side in ("generator", "in place", "in place", "generator"):
            with generator_sum() if side == "generator" else contextlib.nullcontext():
                start = time.process_time()
                out = run()
                times[side].append(time.process_time() - start)
            outs.setdefault(side, out)
        old, new = min(times["generator"]), min(times["in place"])
        print(f"{name:12s} generator {old:6.2f}  in place {new:6.2f}  ratio {old / new:5.2f}  "
              f"same: {outs['generator'].equals(outs['in place'])}  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
