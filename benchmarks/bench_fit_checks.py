"""Benchmark: compare_models (1PL, 2PL, 3PL, 5 folds) on an AIR-Bench-sized matrix.

Runs :func:`irtlib.compare_models` on the simulated release's AIR-Bench 2024 matrix (82 models x
5,694 items, unfiltered, as the issue asks) and prints its wall time, the seconds of each model,
and the ratio against one ``fit_2pl(engine="map")`` fit of the same matrix in the same process
(a busy machine slows both). Also times the fit checks of the chapter (S-X2, Q3 summary,
dimensionality with 10 replications). Run with::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_fit_checks.py [--benchmark airbench2024] [--folds 5]

The target: compare_models within 60 seconds on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from irtlib import compare_models, datasets, fit_2pl
from irtlib.fit.checks import dimensionality, item_fit, q3_summary


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="airbench2024")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checks", action="store_true", help="also time item_fit, q3_summary, dimensionality")
    args = parser.parse_args(argv)

    matrix = datasets.load(args.benchmark, source="simulated")
    print(f"data: {args.benchmark}, {matrix.shape[0]} models x {matrix.shape[1]} items "
          f"({matrix.n_observations} responses)")
    start = time.perf_counter()
    base = fit_2pl(matrix, engine="map")
    baseline = time.perf_counter() - start
    print(f"baseline fit_2pl(engine='map'): {baseline:.2f} s ({base.diagnostics['iterations']} iterations)")
    start = time.perf_counter()
    table = compare_models(matrix, folds=args.folds, seed=args.seed)
    total = time.perf_counter() - start
    with pd.option_context("display.width", 120, "display.precision", 4):
        print(table)
    print(f"compare_models ({args.folds} folds, 1PL/2PL/3PL): {total:.1f} s = {total / baseline:.0f} x one 2PL fit"
          f" [{'within' if total <= 60 else 'OVER'} the 60 s target]")
    if args.checks:
        items = datasets.load_items(args.benchmark, source="simulated").set_index("item")
        for name, call in (
            ("item_fit (S-X2)", lambda: item_fit(matrix, base)),
            ("q3_summary (clusters)", lambda: q3_summary(matrix, base, items["cluster"])),
            ("dimensionality (10 replications)", lambda: dimensionality(matrix, base, n_replications=10)),
        ):
            start = time.perf_counter()
            call()
            print(f"{name}: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
