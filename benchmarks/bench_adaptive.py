"""Vectorised adaptive loop (irtlib.selection.adaptive.run_adaptive) against the plain one-model loop.

Inputs are what the agreement protocol runs: a benchmark of the simulated release, the 2PL
calibrated (MAP engine) on the training models of a split, Fluid Benchmarking (maximum
information + MAP) to the protocol's largest budget for

- the 10 test models of one split (shared item parameters), and
- the test models of ``--batch`` splits together, each with its own split's parameters, as
  ``run_protocol`` runs them (``split_batch``).

The reference (:func:`irtlib.selection.adaptive.run_adaptive_reference`) runs one model and one step at a
time: information of every item, argmax, :func:`irtlib.map_ability` on the items so far, either
from its default start (the straightforward loop) or warm-started from the previous estimate.
Models are independent in it, so it is timed on ``--reference-models`` models and scaled to
the full input; those models' items must equal the vectorised run's exactly. Times are CPU
seconds of this process.

    .venv/bin/python benchmarks/bench_adaptive.py [--benchmarks airbench2024 safetybench]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # single-threaded, like a protocol worker

import numpy as np  # noqa: E402

from irtlib import datasets  # noqa: E402
from irtlib.protocol.agreement import budget_grid, calibrate_split, split_models  # noqa: E402
from irtlib.selection.adaptive import run_adaptive, run_adaptive_reference  # noqa: E402


def _inputs(name: str, n_splits: int, seed: int = 0):
    values = datasets.load(name, source="simulated").filter_variance().values
    xs, as_, bs = [], [], []
    for split in range(n_splits):
        train, test = split_models(values.shape[0], 10, seed, split)
        a, b, _ = calibrate_split(values[train])
        xs.append(values[test])
        as_.append(np.broadcast_to(a, (test.size, a.size)))
        bs.append(np.broadcast_to(b, (test.size, b.size)))
    return np.vstack(xs), np.vstack(as_), np.vstack(bs), budget_grid(values.shape[1])[-1]


def _timed(fn):
    """Result and CPU seconds of this process (single-threaded BLAS: other processes on a shared
    machine slow the wall clock of both loops unevenly, less so their CPU time)."""
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def compare(name: str, *, batch: int = 10, reference_models: int = 2, seed: int = 0) -> dict:
    """Time both loops on one benchmark; returns the figures (and prints them)."""
    x, a, b, budget = _inputs(name, batch, seed)
    n_items = x.shape[1]
    print(f"\n{name}: {n_items} items, budget {budget} (the protocol's largest k)")
    one, t_one = _timed(lambda: run_adaptive(x[:10], a[0], b[0], budget=budget))
    many, t_many = _timed(lambda: run_adaptive(x, a, b, budget=budget))
    r = min(reference_models, 10)
    cold, t_cold = _timed(lambda: run_adaptive_reference(x[:r], a[0], b[0], budget=budget))
    warm, t_warm = _timed(lambda: run_adaptive_reference(x[:r], a[0], b[0], budget=budget, warm_start=True))
    for ref in (cold, warm):
        assert np.array_equal(ref.items, one.items[:r]), "reference and vectorised loops chose different items"
        assert np.array_equal(many.items[:10], one.items), "batching changed the result"
    diff = float(np.nanmax(np.abs(cold.estimate - one.estimate[:r])))
    per_cold, per_warm = t_cold / r, t_warm / r                  # seconds per model, reference
    rows = [("1 split (10 models, shared a, b)", 10, t_one), (f"{batch} splits ({x.shape[0]} models, per-model a, b)",
                                                              x.shape[0], t_many)]
    print(f"  reference loop: {per_cold:.2f} s CPU per model from the default start, {per_warm:.2f} s warm-started "
          f"({per_cold / budget * 1e6:.0f} / {per_warm / budget * 1e6:.0f} us per model-step; "
          f"timed on {r} models, same items, estimates within {diff:.1e})")
    out = {"benchmark": name, "n_items": n_items, "budget": budget, "reference_cold_s_per_model": per_cold,
           "reference_warm_s_per_model": per_warm}
    for label, n, t in rows:
        us = t / n / budget * 1e6
        print(f"  vectorised, {label}: {t:.2f} s CPU ({us:.1f} us per model-step): "
              f"{per_cold * n / t:.0f}x faster than the straightforward loop, {per_warm * n / t:.0f}x than the "
              f"warm-started one")
        out[label] = {"seconds": t, "speedup_cold": per_cold * n / t, "speedup_warm": per_warm * n / t}
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["airbench2024", "safetybench"])
    parser.add_argument("--batch", type=int, default=10, help="splits whose test models run together")
    parser.add_argument("--reference-models", type=int, default=2)
    args = parser.parse_args(argv)
    for name in args.benchmarks:
        compare(name, batch=args.batch, reference_models=args.reference_models)


if __name__ == "__main__":
    main()
