"""Benchmark: the bank's standard errors (observed information) on one thread and on every core, in one process.

Simulates a ``--models`` x ``--items`` 2PL matrix (theta ~ N(0, 1), log a ~ N(0, 0.7), b ~ N(0, 1)), fits it
with the MAP engine, then computes :func:`irtlib.calibration.standard_errors.item_standard_errors` in turn with
``n_threads=1`` and with the default (every core this process may use), ``--repeats`` times each, alternating,
and prints the wall and CPU seconds of each, the ratio one thread / all cores, and whether the two results are
identical bit for bit (they must be: the blocks of items are combined in block order)::

    .venv/bin/python benchmarks/bench_standard_errors.py --models 1000 --items 20000

On a shared machine the wall ratio depends on what else runs: print the load with it.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main(argv=None) -> None:
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
    times: dict[str, list] = {"1 thread": [], "all cores": []}
    results = {}
    for _ in range(args.repeats):
        for label, n_threads in (("1 thread", 1), ("all cores", None)):
            wall, cpu = time.perf_counter(), time.process_time()
            results[label] = item_standard_errors(x, a_hat, b_hat, t_hat, n_threads=n_threads)
            times[label].append((time.perf_counter() - wall, time.process_time() - cpu))
    for label, runs in times.items():
        print(f"  {label:9}: best {min(w for w, _ in runs):6.2f} s wall, {min(c for _, c in runs):6.2f} s CPU")
    one, every = (min(w for w, _ in times[k]) for k in ("1 thread", "all cores"))
    same = np.array_equal(results["1 thread"].to_numpy(), results["all cores"].to_numpy())
    print(f"  1 thread / all cores: {one / every:.2f}x wall; identical results: {same}; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
