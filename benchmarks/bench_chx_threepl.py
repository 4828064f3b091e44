"""Benchmark: the 3PL's step tables from the kernel on a Fortran-ordered matrix, against numpy's passes, in one process.

Chapter 04b's cross-validation (``compare_models`` with the 1PL, 2PL and 3PL, then the 3PL on the reversed
responses, 5 folds, seed 0) fits the 3PL of each multiple-choice benchmark, whose values (and so every
fold's training cells) are Fortran-ordered: before, every step of those fits took numpy's step tables (the
kernel takes C tables only). :class:`irtlib.calibration.models._StepTables` now takes numpy's tables at a
fit's first step and the kernel's, in numpy's layouts, at the later ones. "previous" swaps the previous
form (``threepl_kernel.step_tables`` of x as it is, every step) back in for the run. Order previous,
current, current, previous; the faster CPU seconds of each pair, their ratio, the load and whether the
result frames are equal (``DataFrame.equals`` without the measured ``seconds``)::

    .venv/bin/python benchmarks/bench_chx_threepl.py [--only safetybench wmdp-bio]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_b10_arrow import comparison  # noqa: E402


class PreviousTables:
    """The previous form: ``threepl_kernel.step_tables`` of the fit's x and mask as they are, at every step."""

    def __init__(self, x, mask):
        self.x, self.mask = x, mask

    def __call__(self, z, s, p, a, c):
        from irtlib.calibration import threepl_kernel

        return threepl_kernel.step_tables(self.x, self.mask, z, s, p, a, c)


@contextlib.contextmanager
def previous_layout():
    """The previous form of the 3PL's step tables for the duration."""
    from irtlib.calibration import models

    saved = models._StepTables
    models._StepTables = PreviousTables
    try:
        yield
    finally:
        models._StepTables = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["safetybench", "wmdp-bio"])
    args = parser.parse_args()
    for name in args.only:
        run = comparison(name)
        times, frames = {"previous": [], "current": []}, {}
        for which in ("previous", "current", "current", "previous"):
            with previous_layout() if which == "previous" else contextlib.nullcontext():
                t0 = time.process_time()
                frames[which] = run()
                times[which].append(time.process_time() - t0)
        old, new = min(times["previous"]), min(times["current"])
        print(f"{name:12s} previous {old:6.2f}  current {new:6.2f}  ratio {old / new:5.2f}  "
              f"same: {frames['previous'].equals(frames['current'])}  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
