"""Benchmark: Marginal Fisher's lazy greedy kernel, this tree against another, each in its own process, alternated.

Each round runs, in a fresh process per tree (``PYTHONPATH`` set to the tree: its ``greedy_kernel``
module and its ``_greedy_kernel.c``), the plain greedy and the constrained b-quartile greedy
(:func:`irtlib.selection.static._greedy_picks`, C kernel) to every item of a random bank, and prints
the CPU seconds of each (best of ``--repeats`` in the process); the parent checks that both trees give
the same picks and prints the ratio of the best times.

    .venv/bin/python benchmarks/bench_greedy_lanes.py --tree /tmp/base --models 19 --items 11395
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(args) -> None:
    import numpy as np

    from irtlib.selection import greedy_kernel
    from irtlib.selection.static import _greedy_picks, b_quartile_bins, information_matrix

    assert greedy_kernel.load() is not None, "the greedy kernel did not load"
    rng = np.random.default_rng(1)
    a, b = np.exp(rng.normal(0.0, 0.6, args.items)), rng.normal(0.0, 1.5, args.items)
    info = information_matrix(a, b, rng.normal(0.0, 1.0, args.models))
    bins = b_quartile_bins(b)
    out = {}
    for kind in ("plain", "binned"):
        best = np.inf
        for _ in range(args.repeats):
            gen = _greedy_picks(info, bins=bins if kind == "binned" else None, kernel=True)
            start = time.process_time()
            picks = list(gen)
            best = min(best, time.process_time() - start)
        out[kind] = {"cpu": best, "picks": picks}
    print(json.dumps(out))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, help="the other tree (a checkout with irtlib/)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--items", type=int, default=4906)
    parser.add_argument("--models", type=int, default=90)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    trees = {"other": Path(args.tree).resolve(), "this": ROOT}
    times: dict = {}
    picks: dict = {}
    for r in range(args.rounds):
        for label in (["other", "this"] if r % 2 == 0 else ["this", "other"]):
            cmd = [sys.executable, __file__, "--child", "--tree", args.tree, "--items", str(args.items),
                   "--models", str(args.models), "--repeats", str(args.repeats)]
            env = dict(os.environ, PYTHONPATH=str(trees[label]))
            got = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                                            cwd=str(ROOT)).stdout.splitlines()[-1])
            for kind, res in got.items():
                times.setdefault((kind, label), []).append(res["cpu"])
                assert picks.setdefault(kind, res["picks"]) == res["picks"], f"{kind}: different picks"
    for kind in ("plain", "binned"):
        old, new = min(times[kind, "other"]), min(times[kind, "this"])
        print(f"{kind} greedy, every one of {args.items:,} items x {args.models} models: other {old:.4f}, "
              f"this {new:.4f} CPU s (this/other {new / old:.3f}), same picks (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
