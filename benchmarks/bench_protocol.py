"""Wall time of the full agreement protocol on the six simulated benchmarks.

The paper's protocol in full: 100 splits of 10 test models, all eight methods, the default
budget sweep (:func:`irtlib.protocol.agreement.budget_grid`: log-spaced up to 30% of the items and at
least 100, past every budget the paper reports), the 2PL recalibrated on each split's training
models (MAP engine). Prints the wall time per benchmark and in total, the per-stage times summed
over splits (inside the workers), and the Table 2 budgets found; then runs
``bench_adaptive.py`` (vectorised adaptive loop against the plain loop).

    .venv/bin/python benchmarks/bench_protocol.py [--n-splits 100] [--n-jobs 2] [--no-adaptive]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

from irtlib import datasets  # noqa: E402
from irtlib.protocol.agreement import run_protocol, summarise_table2  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=list(datasets.names()))
    parser.add_argument("--n-splits", type=int, default=100)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-adaptive", action="store_true", help="skip the adaptive-loop comparison")
    parser.add_argument("--save", metavar="CSV", help="write the stacked protocol results here")
    args = parser.parse_args(argv)

    print(f"agreement protocol: {args.n_splits} splits x 8 methods, default budgets, per-split MAP "
          f"calibration, n_jobs={args.n_jobs}, {os.cpu_count()} CPUs")
    results, total = [], 0.0
    for name in args.benchmarks:
        matrix = datasets.load(name, source="simulated")
        start = time.perf_counter()
        res = run_protocol(matrix, n_splits=args.n_splits, n_jobs=args.n_jobs, seed=args.seed, progress=False)
        wall = time.perf_counter() - start
        total += wall
        stages = ", ".join(f"{k} {v:.0f}" for k, v in res.attrs["seconds"].items() if k != "total")
        ks = res.attrs["ks"]
        print(f"{name:20s} {matrix.shape[0]:3d} x {matrix.shape[1]:5d} ({res.attrs['n_items_filtered']} kept), "
              f"{len(ks)} budgets 1..{ks[-1]}: {wall:6.1f} s wall  [summed stage seconds: {stages}]", flush=True)
        results.append(res.assign(benchmark=name))
    print(f"{'total':20s} {total:.1f} s wall ({total / 60:.1f} min)")

    stacked = pd.concat(results, ignore_index=True)
    n_items = {name: datasets.load(name, source="simulated").shape[1] for name in args.benchmarks}
    table = summarise_table2(stacked, n_items)
    wide = table.pivot_table(index=["benchmark", "column", "k", "status"], columns="method", values="mean")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print("\nTable 2 budgets and mean agreement (simulated data):")
        print(wide.round(2).to_string())
    if args.save:
        stacked.to_csv(args.save, index=False)

    if not args.no_adaptive:
        import bench_adaptive

        print("\nadaptive loop, vectorised vs one model at a time:")
        bench_adaptive.main([])


if __name__ == "__main__":
    main()
