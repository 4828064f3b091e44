"""Random IRT's exact-pass MAP (``MapEstimator(order=0)``): the C Newton against the Python loop, same process, ABBA.

Without ``ability_kernel.newton_library`` (replaced by ``None`` here, as ``IRTLIB_EXACT_NEWTON_KERNEL=0`` does) the
estimator keeps the Python loop on the C row sums (the path before ``ability_kernel.newton_rows``). Runs
:func:`irtlib.run_adaptive` with :class:`RandomSelection` as the protocol runs it
(``irtlib.protocol.agreement._prepare_split``: one split's 10 test models, its bank, the budgets recorded; 40
splits' worth), alternately A B B A, checks the trajectories equal bit for bit, and prints CPU seconds per path and
the ratio::

    PYTHONPATH=/work/wt/bookkit:/work/wt .venv/bin/python benchmarks/bench_exact_newton.py
"""

from __future__ import annotations

import time

import numpy as np

from irtlib.selection import ability_kernel
from irtlib.selection.adaptive import MapEstimator, RandomSelection, run_adaptive

NEWTON_LIBRARY = ability_kernel.newton_library


def case(n_models=10, n_items=2000, seed=0):
    rng = np.random.default_rng(seed)
    a, b = rng.lognormal(0.0, 0.6, n_items), rng.normal(0.0, 1.5, n_items)
    theta = rng.normal(0.0, 1.2, n_models)
    x = (rng.random((n_models, n_items)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.02] = np.nan
    return x, a, b


def run(x, a, b, *, kernel: bool, record, reps=40):
    ability_kernel.newton_library = NEWTON_LIBRARY if kernel else (lambda check: None)
    t0 = time.process_time()
    for r in range(reps):
        out = run_adaptive(x, a, b, budget=max(record), selector=RandomSelection(), estimator=MapEstimator(order=0),
                           seed=r, record=record)
    return time.process_time() - t0, out


def main():
    record = [5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 400, 500]
    for n_items in (400, 2000):
        x, a, b = case(n_items=n_items)
        run(x, a, b, kernel=True, record=[r for r in record if r <= n_items], reps=1)      # warm (compile, checks)
        times = {True: 0.0, False: 0.0}
        outs = {}
        for kernel in (False, True, True, False):
            dt, outs[kernel] = run(x, a, b, kernel=kernel, record=[r for r in record if r <= n_items])
            times[kernel] += dt
        same = np.array_equal(outs[True].estimate.view(np.int64), outs[False].estimate.view(np.int64))
        print(f"{n_items} items: loop {times[False]:.3f} s, C Newton {times[True]:.3f} s, "
              f"old/new {times[False] / times[True]:.2f}; same trajectories: {same}")


if __name__ == "__main__":
    main()
