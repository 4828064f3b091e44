"""Benchmark: the GRM and M2PL engines beside the 2PL MAP engine, on the largest real set.

The largest real matrix the project reads is AIR-Bench 2024 from HELM (22 models x 5,694 items,
graded 0 / 0.5 / 1; ``IRTLIB_REAL_DATA`` or ``--data-dir``). Times, in one process, and prints as
ratios against the 2PL baseline (a busy machine slows every engine alike):

- ``fit_map`` (the 2PL joint-MAP engine) on the strict-binarized matrix: the baseline;
- ``fit_grm(method="jmap")`` and ``fit_grm(method="mml")`` on the graded matrix;
- ``fit_mirt(n_dims=2)`` (the exploratory M2PL) on the binarized matrix.

Peak memory is tracemalloc's peak of Python and numpy allocations during each fit. Run with::

    IRTLIB_REAL_DATA=../shared/realdata/airbench2024_helm22 .venv/bin/python benchmarks/bench_new_engines.py
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from irtbook.beyond import binarize, wide
from irtlib import datasets
from irtlib.calibration.joint_map import fit_map
from irtlib.extended import grm
from irtlib.extended.mirt import fit_mirt


def _measure(fn):
    tracemalloc.start()
    start = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, seconds, peak / 2**20


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--items", type=int, default=None, help="use the first N items only")
    parser.add_argument("--skip-mml", action="store_true", help="skip the GRM's marginal-ML engine")
    args = parser.parse_args(argv)

    raw = datasets.load_raw("airbench2024-real", data_dir=args.data_dir)
    cats, _ = grm.to_categories(wide(raw).to_numpy())
    if args.items:
        cats = cats[:, : args.items]
    binary = binarize(cats, int(np.nanmax(cats)))
    print(f"data: AIR-Bench 2024 (HELM), {cats.shape[0]} models x {cats.shape[1]} items, graded 0/0.5/1")
    rows = []
    (_, _, _, info), base_s, base_mb = _measure(lambda: fit_map(binary))
    rows.append(("2PL fit_map (binarized)", base_s, base_mb, f"{info['iterations']} iterations"))
    runs = [("GRM fit_grm jmap (graded)", lambda: grm.fit_grm(cats, method="jmap"))]
    if not args.skip_mml:
        runs.append(("GRM fit_grm mml (graded)", lambda: grm.fit_grm(cats, method="mml")))
    runs.append(("M2PL fit_mirt 2-D exploratory", lambda: fit_mirt(binary, n_dims=2)))
    for name, fn in runs:
        fit, s, mb = _measure(fn)
        rows.append((name, s, mb, f"{fit.diagnostics['iterations']} iterations, converged "
                                  f"{fit.diagnostics['converged']}"))
    print(f"{'engine':<34} {'seconds':>8} {'x 2PL':>7} {'peak MiB':>9} {'x 2PL':>7}  notes")
    for name, s, mb, note in rows:
        print(f"{name:<34} {s:>8.2f} {s / base_s:>7.1f} {mb:>9.1f} {mb / base_mb:>7.1f}  {note}")


if __name__ == "__main__":
    main()
