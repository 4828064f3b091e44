"""Benchmark: chapter 10's leave-one-model-out banks without a sub-matrix per model, in one process.

:func:`irtbook.certification.leave_one_out` built ``matrix.subset(models=others)`` for every left-out model only
to take its items' variance (a new :class:`~irtlib.core.responses.ResponseMatrix`: labels looked up, the values
copied and checked); :func:`irtbook.certification._variance_kept` takes it from the others' safe rates the function
computes anyway (the same numbers bit for bit). "previous" swaps the subset back in. The computation is the
chapter's: every model of the authors' Anthropic Red Team and HarmBench matrices left out in turn. Order previous,
current, repeated ``--repeats`` times; the fastest CPU seconds of each, their ratio, the load, and whether every
bank's arrays are equal::

    .venv/bin/python benchmarks/bench_chx_loo.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import numpy as np


@contextlib.contextmanager
def previous_filter():
    """The variance filter from a sub-matrix per left-out model (the previous form) for the duration."""
    from irtbook import certification

    saved = certification._variance_kept

    def subset(matrix, others, rate, threshold):     # noqa: ARG001  (the previous form did not read rate)
        training = matrix.subset(models=[matrix.models[r] for r in others])
        return (training.item_variance() > threshold).to_numpy()

    certification._variance_kept = subset
    try:
        yield
    finally:
        certification._variance_kept = saved


def main() -> None:
    from irtbook.certification import leave_one_out
    from irtlib import datasets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    matrices = [datasets.load(name) for name in ("anthropic-red-team", "harmbench")]
    times, banks = {"previous": [], "current": []}, {}
    for which in ("previous", "current") * args.repeats:
        with previous_filter() if which == "previous" else contextlib.nullcontext():
            t0 = time.process_time()
            banks[which] = [leave_one_out(m) for m in matrices]
            times[which].append(time.process_time() - t0)
    same = all(np.array_equal(getattr(o, f), getattr(n, f)) for o, n in zip(banks["previous"], banks["current"],
                                                                             strict=True)
               for f in ("a", "b", "available", "filtered_sum", "full_score", "values", "rows"))
    old, new = min(times["previous"]), min(times["current"])
    print(f"leave_one_out  previous {old:6.2f}  current {new:6.2f}  ratio {old / new:5.2f}  same: {same}  "
          f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
