"""The 3PL's Fisher scoring with its cell tables in C against numpy's, on chapter 04b's model comparison.

Runs :func:`irtlib.calibration.models.compare_models` as the chapter "Does the 2PL fit?" does for its
multiple-choice benchmarks (the 3PL on the responses and on the reversed responses, five folds, seed 0,
every item), once with ``IRTLIB_THREEPL_KERNEL=0`` (numpy's tables: the code before the kernel, but for the
safe cells' flat indices, which both sides take) and once with the kernel, alternating, in one process;
prints the CPU seconds of each, their ratio and whether the result frames are equal (``DataFrame.equals``,
the measured ``seconds`` column left out).

Run from the repository root with the real data (``IRTLIB_REAL_DATA``)::

    .venv/bin/python benchmarks/bench_threepl_kernel.py [--rounds 2] [--benchmarks safetybench wmdp-bio]
"""

from __future__ import annotations

import argparse
import os
import time

import pandas as pd

from irtbook.pipeline import load_benchmark
from irtlib.calibration import threepl_kernel
from irtlib.calibration.models import compare_models
from irtlib.core.responses import ResponseMatrix


def comparison(m: ResponseMatrix) -> pd.DataFrame:
    """The 3PL rows of the chapter's comparison: on the responses, and on the reversed responses."""
    flipped = ResponseMatrix(1.0 - m.values, m.models, m.items, source=m.source + " (reversed)")
    rows = [compare_models(m, models=("3pl",), folds=5, seed=0),
            compare_models(flipped, models=("3pl",), folds=5, seed=0).assign(model="3pl-top")]
    return pd.concat(rows, ignore_index=True).drop(columns="seconds")


def timed(m: ResponseMatrix, kernel: bool) -> tuple[float, pd.DataFrame]:
    os.environ[threepl_kernel.SWITCH] = "1" if kernel else "0"
    start = time.process_time()
    out = comparison(m)
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--benchmarks", nargs="+", default=["safetybench", "wmdp-bio"])
    args = parser.parse_args()
    assert threepl_kernel.load() is not None, "the kernel did not load"
    total = {False: 0.0, True: 0.0}
    for name in args.benchmarks:
        m = load_benchmark(name).filtered
        best = {False: float("inf"), True: float("inf")}
        frames = {}
        for r in range(args.rounds):
            for kernel in ((False, True) if r % 2 == 0 else (True, False)):
                seconds, frames[kernel] = timed(m, kernel)
                best[kernel] = min(best[kernel], seconds)
        total[False] += best[False]
        total[True] += best[True]
        print(f"{name:20s} {m.shape}  numpy {best[False]:6.2f}  kernel {best[True]:6.2f}  "
              f"ratio {best[False] / best[True]:5.2f}  same: {frames[False].equals(frames[True])}", flush=True)
    print(f"{'total':20s}  numpy {total[False]:6.2f}  kernel {total[True]:6.2f}  "
          f"ratio {total[False] / total[True]:5.2f}; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
