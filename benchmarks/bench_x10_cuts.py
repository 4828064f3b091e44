"""Chapters 10 and 04b: this tree's exact cuts against the code before them, in one process (CPU seconds).

Each part runs the chapter's computation with its full-build settings on the chapter's data twice
each way, in the order before, after, after, before (the faster of each pair printed, with the
ratio), and compares the results (every number and frame the same). "Before" is the previous code
path, put back for the run:

- ``cert``: the certification study on the authors' HarmBench matrix (``irtbook.certification.study``,
  4,000 simulees per cut, every model left out). Before: each rule's posterior evaluates its own grid
  log-likelihoods and the cut's normal tail at every step (``_shared_grid`` off, ``beyond`` uncached).
- ``tables``: chapter 10's M2PL question (``bench_beyond_tables.mirt_question``). Before: the logistic
  kernel without the copy of a cell whose ``z`` repeats the row above.
- ``fluid``: chapter 04b's Fluid runs with 2PL and 3PL banks on WMDP-Bio (20 splits of 10 test models,
  15 budgets to 200). Before: one calibration and one Fluid run per split, as ``split_agreements``'
  loop ran them.
- ``reach``: the bank audit's Fluid runs on SimpleSafetyTests (nothing flagged): all items, then the
  flagged items dropped. Before: both runs made.

Needs the real data (``../shared/realdata``). Run from
the repository root::

    .venv/bin/python benchmarks/bench_x10_cuts.py [cert tables fluid reach]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

PARTS = ("cert", "tables", "fluid", "reach")


# ---------------------------------------------------------------------------- the computations
def cert_part():
    from irtbook import certification as cert
    from irtlib import datasets

    r = cert.study(datasets.load("harmbench"), confidence=0.95, budget=100, indifference=0.01, n_simulees=4000,
                   loo_every=1, seed=0)
    return [r["simulation"], r["loo"], r["above"]]


def tables_part():
    from bench_beyond_tables import mirt_question

    return mirt_question()


def fluid_part():
    from irtbook.pipeline import load_benchmark
    from irtlib.protocol.agreement import budget_grid
    from irtlib.protocol.model_agreement import fluid_agreement

    bench = load_benchmark("wmdp-bio")
    ks = budget_grid(bench.filtered.shape[1], max_k=200, n_points=15)
    return [fluid_agreement(bench.full, model=m, ks=ks, n_splits=20, n_test=10, seed=0) for m in ("2pl", "3pl")]


def reach_part():
    from irtbook import bank_checks
    from irtbook.pipeline import load_benchmark

    bank_checks._REACHED.clear()
    m = load_benchmark("simplesafetytests").full
    full = bank_checks.fluid_first_reach(m, n_splits=10, seed=0)
    dropped = bank_checks.fluid_first_reach(m, drop=[], n_splits=10, seed=0)
    return [full["curve"], dropped["curve"], full["rounded"], dropped["rounded"]]


# ---------------------------------------------------------------------------- the code before
@contextlib.contextmanager
def before(part):
    """The code path before this tree's cut of ``part``, for the duration of the block."""
    patches = []

    def patch(owner, name, value):
        patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    if part == "cert":
        from irtbook import certification
        from irtlib.selection import certify

        patch(certification, "_shared_grid", lambda runs: None)

        def beyond(self, cut):
            self._beyond = None
            return unpatched_beyond(self, cut)

        unpatched_beyond = certify._Posterior.beyond
        patch(certify._Posterior, "beyond", beyond)
    elif part == "tables":
        from irtlib.extended import logistic_kernel, mirt

        lib = logistic_kernel.load()
        patch(mirt, "logistic_tables", lambda z, sigmoid=False, sigmoid_neg=False: logistic_kernel._kernel_tables(
            lib, z, sigmoid, sigmoid_neg, reuse=False))
    elif part == "fluid":
        from irtlib.calibration.models import fit_irt_values
        from irtlib.protocol import model_agreement

        def per_split(values, splits, *, model, n_test, seed, budget, prior_c):
            from irtlib.protocol.agreement import split_models

            out = {}
            for split in splits:
                train, test = split_models(values.shape[0], n_test, seed, split)
                fit = fit_irt_values(values[train], model=model, prior_c=prior_c)
                out[split] = model_agreement.fluid_irt(values[test], fit["a"], fit["b"], fit["c"], budget=budget)
            return out

        patch(model_agreement, "_fluid_splits", per_split)
    elif part == "reach":
        from irtbook import bank_checks

        patch(bank_checks, "_REACHED_KEPT", 0)       # nothing kept: every run made
    try:
        yield
    finally:
        for owner, name, value in reversed(patches):
            setattr(owner, name, value)


def _same(old, new) -> bool:
    for o, n in zip(old, new, strict=True):
        if isinstance(o, pd.DataFrame):
            if not o.equals(n):
                return False
        elif isinstance(o, dict):
            if o != n:
                return False
        elif not np.array_equal(o, n):
            return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", help=f"any of {', '.join(PARTS)} (default: all)")
    args = parser.parse_args(argv)
    parts = args.parts or list(PARTS)
    if set(parts) - set(PARTS):
        parser.error(f"parts must be among {PARTS}, got {parts}")
    compute = {"cert": cert_part, "tables": tables_part, "fluid": fluid_part, "reach": reach_part}
    total = [0.0, 0.0]
    for part in parts:
        times, results = {True: [], False: []}, {}
        for old in (True, False, False, True):
            with before(part) if old else contextlib.nullcontext():
                start = time.process_time()
                results[old] = compute[part]()
                times[old].append(time.process_time() - start)
        b, a = min(times[True]), min(times[False])
        total[0], total[1] = total[0] + b, total[1] + a
        same = _same(results[True], results[False])
        print(f"{part:<8} before {b:7.2f}  after {a:7.2f}  ratio {b / a:5.2f}  same: {same}", flush=True)
    print(f"{'total':<8} before {total[0]:7.2f}  after {total[1]:7.2f}  ratio {total[0] / total[1]:5.2f}; "
          f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
