"""Benchmark: the authors' calibration at fewer epochs against its 1,000, on the book's six benchmarks.

A QUICK build runs the authors' calibration (py-irt's hierarchical 2PL, learning rate 0.1 decayed by
0.9999 per epoch, the epoch with the lowest loss; paper, Section 3 and appendix B) for
:data:`irtbook.pipeline.QUICK_AUTHORS_EPOCHS` epochs instead of 1,000. For each benchmark's whole
fit (every model, :func:`irtbook.pipeline.calibrate_matrix`, uncached) at each epoch count this prints
its CPU seconds as a ratio of the 1,000-epoch fit's (the same process), the best epoch, and how
close the parameters come to the 1,000-epoch fit's: Pearson r of a and of b, Spearman rho of theta.
Run from the repository root::

    .venv/bin/python benchmarks/bench_quick_epochs.py [--epochs 100 200 300 500] [--data auto]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import pearsonr, spearmanr


def main(argv=None) -> int:
    """Print one row per benchmark and epoch count."""
    from irtbook.authors_engine import authors_epochs
    from irtbook.pipeline import QUICK_AUTHORS_EPOCHS, calibrate_matrix
    from irtbook.split_stage import load_benchmarks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, nargs="+", default=[100, 200, QUICK_AUTHORS_EPOCHS, 500])
    parser.add_argument("--data", default=None, help="auto, real or simulated (default: $IRTLIB_DATA or auto)")
    args = parser.parse_args(argv)
    full = authors_epochs()
    print(f"the authors' calibration at fewer epochs against {full:,} (QUICK: {QUICK_AUTHORS_EPOCHS})")
    print(f"{'benchmark':20s} {'shape':>12s} {'epochs':>6s} {'CPU ratio':>9s} {'best':>5s} "
          f"{'r(a)':>7s} {'r(b)':>7s} {'rho(θ)':>7s}")
    for name, bench in load_benchmarks(data=args.data).items():
        start = time.process_time()
        ref = calibrate_matrix(bench.filtered, engine="pyirt-authors", epochs=full)
        ref_cpu = time.process_time() - start
        for epochs in sorted(set(args.epochs)):
            start = time.process_time()
            cal = calibrate_matrix(bench.filtered, engine="pyirt-authors", epochs=epochs)
            cpu = time.process_time() - start
            shape = "x".join(map(str, bench.filtered.shape))
            print(f"{name:20s} {shape:>12s} {epochs:6d} {cpu / ref_cpu:9.2f} {cal.diagnostics['best_epoch']:5d} "
                  f"{pearsonr(ref.a, cal.a)[0]:7.4f} {pearsonr(ref.b, cal.b)[0]:7.4f} "
                  f"{spearmanr(ref.theta, cal.theta)[0]:7.4f}", flush=True)
        print(f"{name:20s} {'':>12s} {full:6d} {1.0:9.2f} {ref.diagnostics['best_epoch']:5d} "
              f"{1.0:7.4f} {1.0:7.4f} {1.0:7.4f}  ({ref_cpu:.2f} CPU s)")
    return 0 if np.isfinite(ref_cpu) else 1


if __name__ == "__main__":
    raise SystemExit(main())
