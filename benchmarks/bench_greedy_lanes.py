"""Benchmark: Marginal Fisher's lazy greedy kernel, this tree's ``_greedy_kernel.c`` against another's, in one process.

Both sources are compiled with the library's flags (:func:`irtlib.calibration.fused_kernel.compile_kernel`)
and bound alike; each round runs the plain greedy (:func:`irtlib.selection.greedy_kernel.lazy_picks`)
and the constrained b-quartile greedy (``binned_lazy_picks``) to every item with each library,
alternating which goes first, checks that the picks are the same, and prints CPU seconds (best of the
rounds) and the ratio.

    .venv/bin/python benchmarks/bench_greedy_lanes.py --old /tmp/base/irtlib/selection/_greedy_kernel.c
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from irtlib.calibration.fused_kernel import compile_kernel
from irtlib.selection import greedy_kernel
from irtlib.selection.static import _greedy_picks, b_quartile_bins, information_matrix


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the other tree's _greedy_kernel.c")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--items", type=int, default=4906)
    parser.add_argument("--models", type=int, default=90)
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}")
    libs = {name: greedy_kernel._bind(compile_kernel(source=Path(src)))
            for name, src in (("old", args.old), ("new", greedy_kernel.SOURCE))}
    rng = np.random.default_rng(1)
    a, b = np.exp(rng.normal(0.0, 0.6, args.items)), rng.normal(0.0, 1.5, args.items)
    info = information_matrix(a, b, rng.normal(0.0, 1.0, args.models))
    bins = b_quartile_bins(b)
    times: dict = {(kind, name): [] for kind in ("plain", "binned") for name in libs}
    for r in range(args.rounds):
        order = list(libs) if r % 2 == 0 else list(libs)[::-1]
        for kind in ("plain", "binned"):
            picks = {}
            for name in order:
                greedy_kernel._LOADED["lib"] = libs[name]
                gen = _greedy_picks(info, bins=bins if kind == "binned" else None, kernel=True)
                t, picks[name] = _cpu(lambda gen=gen: list(gen))
                times[kind, name].append(t)
            assert picks["old"] == picks["new"], kind
    greedy_kernel._LOADED.clear()
    for kind in ("plain", "binned"):
        old, new = min(times[kind, "old"]), min(times[kind, "new"])
        print(f"{kind} greedy, every one of {args.items:,} items x {args.models} models: old {old:.3f}, "
              f"new {new:.3f} CPU s (new/old {new / old:.3f}), same picks")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
