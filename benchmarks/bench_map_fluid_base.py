"""Fluid with the MAP estimate and Random IRT (``MapEstimator(order=0)``), a base ``irtlib`` against this tree's.

The comparison job's adaptive runs as :func:`irtlib.protocol.agreement._prepare_split` makes them (per-model banks of
10 splits run together for Fluid, one split's 10 test models for Random IRT), on simulated banks, with the base
revision's package (:mod:`base_package`) and this tree's, alternately A B B A in one process; every trajectory
compared bit for bit; CPU seconds and the ratio printed::

    PYTHONPATH=/work/wt/bookkit:/work/wt .venv/bin/python benchmarks/bench_map_fluid_base.py --base main
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import base_package  # noqa: E402


def bank(rng, n_models, n_items, splits):
    a = np.repeat(rng.lognormal(0.0, 0.6, (splits, n_items)), n_models // splits, axis=0)
    b = np.repeat(rng.normal(0.0, 1.5, (splits, n_items)), n_models // splits, axis=0)
    theta = rng.normal(0.0, 1.2, n_models)
    x = (rng.random((n_models, n_items)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.02] = np.nan
    return x, a, b


def fluid(pkg, x, a, b, budget):
    sel = pkg.selection
    return sel.run_adaptive(x, a, b, budget=budget, selector=sel.MaxInformation(), estimator=sel.MapEstimator(),
                            theta0=0.0)


def random_irt(pkg, x, a, b, record):
    sel = pkg.selection
    return sel.run_adaptive(x, a[0], b[0], budget=max(record), selector=sel.RandomSelection(),
                            estimator=sel.MapEstimator(order=0), seed=3, record=record)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--budget", type=int, default=100)
    args = parser.parse_args(argv)
    import irtlib

    base = base_package.load(args.base)
    rng = np.random.default_rng(0)
    x, a, b = bank(rng, 100, args.items, 10)
    record = [5, 10, 20, 30, 50, 75, 100, 150, 200]
    work = {"fluid (100 models, 10 banks)": lambda pkg: [fluid(pkg, x, a, b, args.budget)],
            "random-irt (10 models) x 20": lambda pkg: [random_irt(pkg, x[10 * i:10 * i + 10], a, b, record)
                                                       for i in range(10) for _ in range(2)]}
    for label, job in work.items():
        job(base)
        job(irtlib)
        times, outs = {"base": 0.0, "new": 0.0}, {}
        for who in ("base", "new", "new", "base"):
            t0 = time.process_time()
            outs[who] = job(base if who == "base" else irtlib)
            times[who] += time.process_time() - t0
        same = all(np.array_equal(u.items, v.items) and np.array_equal(u.estimate.view(np.int64),
                                                                       v.estimate.view(np.int64))
                   for u, v in zip(outs["base"], outs["new"], strict=True))
        print(f"{label:30s} base {times['base']:6.2f} s  new {times['new']:6.2f} s  old/new "
              f"{times['base'] / times['new']:.3f}  same trajectories: {same}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
