"""Benchmark: the bank's standard errors (observed information) as on ``main`` and now, in one process.

Simulates a ``--models`` x ``--items`` 2PL matrix (theta ~ N(0, 1), log a ~ N(0, 0.7), b ~ N(0, 1)), fits it
with the MAP engine, then computes :func:`irtlib.calibration.standard_errors.item_standard_errors` in turn
as before this change (one thread, each block's products computed again in the second pass:
``KEEP_BYTES = 0``), on one thread with the products kept, and on every core, ``--repeats`` times each,
alternating, and prints the wall and CPU seconds of each, the ratios against the first, and whether the
results are identical bit for bit (they must be: the blocks are combined in block order)::

    .venv/bin/python benchmarks/bench_standard_errors.py --models 1000 --items 20000

On a shared machine the wall ratio depends on what else runs: print the load with it.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main(argv=None) -> None:
    import irtlib.calibration.standard_errors as module
    from irtlib.calibration.cells import available_cores
    from irtlib.calibration.joint_map import fit_map
    from irtlib.calibration.standard_errors import item_standard_errors

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    theta, b = rng.normal(size=args.models), rng.normal(size=args.items)
    a = np.exp(rng.normal(0.0, 0.7, size=args.items))
    x = (rng.random((args.models, args.items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    t_hat, a_hat, b_hat, _ = fit_map(x)
    print(f"{args.models} x {args.items}, {available_cores()} cores; load {os.getloadavg()[0]:.1f}")
    runs = (("before: 1 thread, recomputed", 1, 0), ("1 thread, kept", 1, module.KEEP_BYTES),
            ("all cores, kept", None, module.KEEP_BYTES))
    times: dict[str, list] = {label: [] for label, _, _ in runs}
    results = {}
    keep_bytes = module.KEEP_BYTES
    for _ in range(args.repeats):
        for label, n_threads, keep in runs:
            module.KEEP_BYTES = keep
            wall, cpu = time.perf_counter(), time.process_time()
            results[label] = item_standard_errors(x, a_hat, b_hat, t_hat, n_threads=n_threads).to_numpy()
            times[label].append((time.perf_counter() - wall, time.process_time() - cpu))
    module.KEEP_BYTES = keep_bytes
    first = runs[0][0]
    best = {label: (min(w for w, _ in t), min(c for _, c in t)) for label, t in times.items()}
    for label, (wall, cpu) in best.items():
        same = np.array_equal(results[label], results[first])
        print(f"  {label:28}: best {wall:6.2f} s wall, {cpu:6.2f} s CPU; before / this: {best[first][0] / wall:.2f}x "
              f"wall, {best[first][1] / cpu:.2f}x CPU; identical to before: {same}")
    print(f"  load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
