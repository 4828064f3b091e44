"""Benchmark: the bank's cross-fitted interval check against the fit it checks, in one process.

Simulates a ``--models`` x ``--items`` matrix (``--data coin``: coin flips, the flat posterior that is
the fit's hardest case; ``--data 2pl``: theta ~ N(0, 1), log a ~ N(0, 0.7), b ~ N(0, 1)), fits it with
the MAP engine as :func:`irtlib.calibrate_bank` does, then runs :func:`irtlib.bank.coverage.interval_check`
started from that fit, and prints the CPU seconds of each and their ratio check / fit (the deliverable:
the check costs a fraction of the fit), with the check's inflation factors. CPU seconds and the ratio
hold on a shared machine; wall seconds are printed with the load. With ``--tree PATH`` the same
measurement also runs on another checkout (e.g. an export of ``main``) in a child process, so the
before and after ratios come from one session::

    .venv/bin/python benchmarks/bench_interval_check.py --data coin --items 5000 --tree /tmp/main-export
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def simulate(kind: str, n_models: int, n_items: int, seed: int) -> np.ndarray:
    """The responses, models x items, as floats."""
    rng = np.random.default_rng(seed)
    if kind == "coin":
        return rng.integers(0, 2, (n_models, n_items)).astype(float)
    theta, b = rng.normal(size=n_models), rng.normal(size=n_items)
    a = np.exp(rng.normal(0.0, 0.7, size=n_items))
    return (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)


def measure(kind: str, n_models: int, n_items: int, seed: int) -> None:
    from irtlib.bank.coverage import interval_check
    from irtlib.calibration.joint_map import fit_2pl
    from irtlib.core.responses import ResponseMatrix

    x = simulate(kind, n_models, n_items, seed)
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(n_models)], [f"i{j}" for j in range(n_items)])
    kept = matrix.filter_variance(0.01)
    rates = matrix.item_safe_rates()
    filtered_sum = float(rates[~rates.index.isin(kept.items)].sum())
    began, cpu = time.perf_counter(), time.process_time()
    fit = fit_2pl(kept, engine="map")
    fit_wall, fit_cpu = time.perf_counter() - began, time.process_time() - cpu
    began, cpu = time.perf_counter(), time.process_time()
    marks = []
    check = interval_check(matrix, kept.items, filtered_sum, fit=fit,
                           progress=lambda done, total: marks.append(time.process_time() - cpu))
    check_wall, check_cpu = time.perf_counter() - began, time.process_time() - cpu
    refits = marks[len(marks) // 2 - 1]
    print(f"  fit:   {fit_cpu:7.1f} CPU s {fit_wall:7.1f} wall s ({fit.diagnostics['iterations']} iterations)")
    print(f"  check: {check_cpu:7.1f} CPU s {check_wall:7.1f} wall s; check / fit {check_cpu / fit_cpu:.2f}x CPU "
          f"(load {os.getloadavg()[0]:.1f})")
    print(f"    of which the folds' refits {refits:.1f} CPU s, the replays {check_cpu - refits:.1f} CPU s")
    print(f"  inflation at k = {check['k']}: {check['inflation']} ({check['n_replayed']} models replayed)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("coin", "2pl"), default="coin")
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tree", type=Path, help="another checkout to measure too, in a child process")
    parser.add_argument("--here", action="store_true", help=argparse.SUPPRESS)   # the child's own run
    args = parser.parse_args(argv)
    if args.here:
        measure(args.data, args.models, args.items, args.seed)
        return
    print(f"{args.data} data, {args.models} x {args.items}; load {os.getloadavg()[0]:.1f}")
    for label, tree in [("this tree", ROOT)] + ([("baseline " + str(args.tree), args.tree)] if args.tree else []):
        print(f"{label}:", flush=True)
        subprocess.run([sys.executable, __file__, "--here", "--data", args.data, "--models", str(args.models),
                        "--items", str(args.items), "--seed", str(args.seed)],
                       env={**os.environ, "PYTHONPATH": str(tree)}, check=True, cwd=tree)


if __name__ == "__main__":
    main()
