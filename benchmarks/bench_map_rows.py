"""The MAP ability's Newton steps in C (``solve``) against the numpy loop on the C sums, on captured protocol scores.

Runs chapter 06's paper-text protocol (:func:`benchmarks.profile_protocol.run_one`, ``--run paper``) on each
benchmark for ``--max-splits`` splits and keeps every :func:`irtlib.selection.static.score_blocks_map` call it
makes (the static subsets' and Random IRT's MAP scores, section "Evaluation"). Then scores those calls again,
alternately with the kernel's row steps (:mod:`irtlib.selection.ability_kernel`'s ``solve``: each row's Newton
steps and bisection in one C call) and without them (``map_ability``'s numpy loop over the same C sums, the
code before), rounds A B A B ...; prints the CPU seconds of each, the ratio, and whether every score equals the
captured one bit for bit. Split calibrations are read from ``--cache-dir``'s ``splits``.

    .venv/bin/python benchmarks/bench_map_rows.py --cache-dir /tmp/cache --max-splits 10 safetybench airbench2024
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--max-splits", type=int, default=10)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_protocol import run_one

    import irtlib.protocol.agreement as agreement
    import irtlib.selection.static as static
    from irtbook.pipeline import load_benchmark
    from irtlib.core import ability

    calls = []
    real = static.score_blocks_map

    def keep(blocks, **kw):
        out = real(blocks, **kw)
        calls.append((blocks, kw, out))
        return out

    agreement.score_blocks_map = keep
    for name in args.benchmarks:
        run_one(load_benchmark(name), "paper", max_splits=args.max_splits, cache_dir=args.cache_dir)
    agreement.score_blocks_map = real
    print(f"{len(calls)} score_blocks_map calls, {sum(len(c[0]) for c in calls)} blocks")

    with_solve = ability._posterior_sums

    def without_solve(*a, **kw):            # the same C sums, no ``solve``: map_ability's numpy loop
        posterior = with_solve(*a, **kw)
        return lambda rows, theta: posterior(rows, theta)

    def score(posterior_sums):
        ability._posterior_sums = posterior_sums
        start, same = time.process_time(), True
        for blocks, kw, out in calls:
            got = static.score_blocks_map(blocks, **kw)
            same &= all(np.array_equal(g, o) and np.array_equal(np.signbit(g), np.signbit(o))
                        for g, o in zip(got, out, strict=True))
        ability._posterior_sums = with_solve
        return time.process_time() - start, same

    score(with_solve)                       # warm: the kernel's load check
    for r in range(args.rounds):
        old, new = score(without_solve), score(with_solve)
        print(f"round {r + 1}: numpy loop {old[0]:.3f} s, C row steps {new[0]:.3f} s, ratio {old[0] / new[0]:.2f}; "
              f"every score equal: {old[1] and new[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
