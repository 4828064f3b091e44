"""The MAP ability's Newton sums in C against numpy, in one process, on chapter 06's paper-text protocol runs.

Runs :func:`benchmarks.profile_protocol.run_one` (``--run paper``: 06's ``other``; ``authors``: 05's runs)
on each benchmark, alternately with :mod:`irtlib.selection.ability_kernel` (the static subsets' MAP scores
and the training abilities summed in C) and without it (numpy's ``_score_and_information``: the kernel
set aside for the run), rounds A B B A ...; prints each run's CPU seconds, the CPU seconds spent in
:func:`irtlib.core.ability.map_ability`, the ratios kernel / numpy, and whether every result frame equals
the numpy run's (``DataFrame.equals``). Split calibrations are read from ``--cache-dir``'s ``splits``.

    .venv/bin/python benchmarks/bench_ability_kernel.py --cache-dir /tmp/cache --max-splits 10 safetybench
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--run", choices=["paper", "authors"], default="paper")
    parser.add_argument("--max-splits", type=int, default=10)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_protocol import run_one

    import irtlib.protocol.agreement as agreement
    import irtlib.selection.static as static
    from irtbook.pipeline import load_benchmark
    from irtlib.core import ability
    from irtlib.selection import ability_kernel

    lib = ability_kernel.load()
    if lib is None:
        print("the kernel does not load here: nothing to compare")
        return 1
    spent = [0.0]
    plain = ability.map_ability

    def timed(*a, **kw):
        start = time.process_time()
        try:
            return plain(*a, **kw)
        finally:
            spent[0] += time.process_time() - start

    static.map_ability = agreement.map_ability = timed
    for name in args.benchmarks:
        bench = load_benchmark(name)
        cpu, inner, frames = {"C": [], "numpy": []}, {"C": [], "numpy": []}, {}
        for r in range(args.rounds):
            for how in (("C", "numpy") if r % 2 == 0 else ("numpy", "C")):
                ability_kernel._LOADED["lib"] = lib if how == "C" else None
                spent[0] = 0.0
                start = time.process_time()
                frame = run_one(bench, args.run, max_splits=args.max_splits, cache_dir=args.cache_dir)
                cpu[how].append(time.process_time() - start)
                inner[how].append(spent[0])
                frames.setdefault(how, []).append(frame.drop(columns=[c for c in frame if c == "seconds"]))
        ability_kernel._LOADED["lib"] = lib
        same = all(f.equals(frames["numpy"][0]) for f in frames["numpy"] + frames["C"])

        def mean(v):
            return sum(v) / len(v)

        print(f"{name} ({args.run}, {args.max_splits} splits): CPU s numpy {[round(v, 2) for v in cpu['numpy']]} "
              f"C {[round(v, 2) for v in cpu['C']]} (ratio {mean(cpu['C']) / mean(cpu['numpy']):.3f}); map_ability "
              f"numpy {[round(v, 2) for v in inner['numpy']]} C {[round(v, 2) for v in inner['C']]} "
              f"(ratio {mean(inner['C']) / mean(inner['numpy']):.3f}); every result frame equal: {same}; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
