"""Benchmark: the fast MAP engine against py-irt on an AIR-Bench-sized matrix.

Fits one simulated 82 x 5,694 matrix (the size of AIR-Bench 2024) with both engines at the
paper's settings, prints the seconds of each, the speed ratio, and how well the two agree
(Spearman of a, b and theta). Run with::

    .venv/bin/python benchmarks/bench_calibrate.py [--epochs 1000] [--repeats 3]

Timing is a ratio measured in one process on the same data, so a busy machine slows both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import simulate_2pl  # noqa: E402

from irtlib import ResponseMatrix, fit_2pl  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=82)
    parser.add_argument("--items", type=int, default=5694)
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="MAP fits to time (the best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    values, theta, a, b = simulate_2pl(args.models, args.items, seed=args.seed, missing=0.002)
    matrix = ResponseMatrix(values, [f"m{i}" for i in range(args.models)],
                            [f"i{j}" for j in range(args.items)]).filter_variance()
    print(f"data: {matrix.shape[0]} models x {matrix.shape[1]} items (after the variance filter)")

    fast = min((fit_2pl(matrix, engine="map") for _ in range(args.repeats)), key=lambda c: c.seconds)
    slow = fit_2pl(matrix, engine="pyirt", epochs=args.epochs, seed=args.seed)
    print(f"py-irt ({args.epochs} epochs): {slow.seconds:8.2f} s")
    print(f"MAP engine ({fast.diagnostics['iterations']} iterations): {fast.seconds:8.3f} s")
    print(f"speed ratio: {slow.seconds / fast.seconds:.0f}x")
    for name in ("theta", "a", "b"):
        rho = spearmanr(getattr(fast, name), getattr(slow, name))[0]
        print(f"Spearman(MAP, py-irt) {name:>5}: {rho:.4f}")
    keep = matrix.items.map(lambda s: int(s[1:])).to_numpy()
    for name, truth, est in (("theta", theta, fast.theta), ("a", a[keep], fast.a), ("b", b[keep], fast.b)):
        print(f"recovery, MAP engine  {name:>5}: r = {np.corrcoef(truth, est)[0, 1]:.4f}")


if __name__ == "__main__":
    main()
