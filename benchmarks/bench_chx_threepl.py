"""Benchmark: the 3PL's step tables from the kernel on a Fortran-ordered matrix, against numpy's passes, in one process.

Chapter 04b's cross-validation (``compare_models``) fits the 3PL of each whole multiple-choice benchmark and of its
reversed responses (``1 - x``), whose values are Fortran-ordered: before, every step of those two fits took numpy's
step tables (the kernel takes C tables only; the folds' training cells are C-ordered and took the kernel already).
:class:`irtlib.calibration.models._StepTables` now takes numpy's tables at a fit's first step and the kernel's, in
numpy's layouts, at the later ones. This times those two fits (``fit_irt_values(..., model="3pl")`` from the 2PL's
mode, as ``compare_models`` starts them), "previous" with the previous form (``threepl_kernel.step_tables`` of x as
it is, every step) swapped in. Order previous, current, repeated ``--repeats`` times; the fastest CPU seconds of
each, their ratio, the load, and whether every fitted array and the fits' information are equal bit for bit::

    .venv/bin/python benchmarks/bench_chx_threepl.py [--only safetybench wmdp-bio] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time


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


def full_fits(name):
    """The two whole-matrix 3PL fits of ``compare_models`` in chapter 04b: the benchmark's and its reversal's."""
    from irtbook.pipeline import load_benchmark
    from irtlib.calibration.joint_map import fit_map
    from irtlib.calibration.models import fit_irt_values

    matrices = [load_benchmark(name).filtered.values]
    matrices.append(1.0 - matrices[0])
    starts = []
    for x in matrices:
        theta, a, b, _ = fit_map(x)
        starts.append({"theta": theta, "a": a, "b": b})

    def run():
        return [fit_irt_values(x, model="3pl", start=start) for x, start in zip(matrices, starts, strict=True)]

    return run


def same(old, new) -> bool:
    import numpy as np

    return all(o["info"] == n["info"] and all(np.array_equal(o[k], n[k]) for k in ("theta", "a", "b", "c"))
               for o, n in zip(old, new, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=["safetybench", "wmdp-bio"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for name in args.only:
        run = full_fits(name)
        times, fits = {"previous": [], "current": []}, {}
        for which in ("previous", "current") * args.repeats:
            with previous_layout() if which == "previous" else contextlib.nullcontext():
                t0 = time.process_time()
                fits[which] = run()
                times[which].append(time.process_time() - t0)
        old, new = min(times["previous"]), min(times["current"])
        print(f"{name:12s} previous {old:6.2f}  current {new:6.2f}  ratio {old / new:5.2f}  "
              f"same: {same(fits['previous'], fits['current'])}  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
