"""Fluid with the MAP estimate: the Newton in C (``map_kernel``) against numpy's, alternated in one process.

Runs :func:`irtlib.run_adaptive` (maximum information and :class:`~irtlib.selection.MapEstimator`)
on a simulated bank with per-model item parameters (as the protocol batches several splits), once
with the estimator's C Newton and once with its numpy path (``_MapRun._kernel`` set to None),
``--rounds`` times alternated, and prints the CPU seconds of each, their ratio, and whether the
items and estimates of every step are equal.

    .venv/bin/python benchmarks/bench_map_kernel.py --models 100 --items 3000 --budget 1000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit

from irtlib.selection import estimators, map_kernel
from irtlib.selection.adaptive import run_adaptive


def _run(x, a, b, budget, *, kernel):
    original = estimators._MapRun.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if not kernel:
            self._kernel = None

    estimators._MapRun.__init__ = init
    try:
        start = time.process_time()
        traj = run_adaptive(x, a, b, budget=budget)
        return time.process_time() - start, traj
    finally:
        estimators._MapRun.__init__ = original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if map_kernel.load(estimators.map_kernel_matches) is None:
        print("the MAP kernel is not available here: nothing to compare")
        return 0
    rng = np.random.default_rng(7)
    a = rng.lognormal(0.0, 0.5, (args.models, args.items))
    b = rng.normal(0.0, 1.5, (args.models, args.items))
    theta = rng.normal(0.0, 1.0, args.models)
    x = (rng.random((args.models, args.items)) < expit(a * (theta[:, None] - b))).astype(float)
    cpu = {"numpy": [], "C": []}
    same = True
    for r in range(args.rounds):
        order = ["numpy", "C"] if r % 2 == 0 else ["C", "numpy"]
        out = {}
        for name in order:
            seconds, out[name] = _run(x, a, b, args.budget, kernel=name == "C")
            cpu[name].append(seconds)
        same &= np.array_equal(out["C"].items, out["numpy"].items) and \
            np.array_equal(out["C"].estimate, out["numpy"].estimate, equal_nan=True)
        print(f"round {r + 1}: numpy {cpu['numpy'][-1]:.2f} s, C {cpu['C'][-1]:.2f} s", flush=True)
    mean = {k: float(np.mean(v)) for k, v in cpu.items()}
    print(f"mean CPU s: numpy {mean['numpy']:.2f}, C {mean['C']:.2f}, ratio C / numpy {mean['C'] / mean['numpy']:.2f}; "
          f"items and estimates of every step equal: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
