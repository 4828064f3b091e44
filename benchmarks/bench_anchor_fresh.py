"""The authors' fresh Anchor Points on the chapters' own inputs: this tree against a base revision, end to end, CPU s.

Every :func:`irtlib.selection.static.anchor_points_fresh` call of a captured protocol run (:mod:`bench_anchor_path`'s
pickles, ``--inputs``; chapter 05's authors' protocol makes them) replayed two ways, in turn (ABBA), one BLAS
thread: the base revision's ``static.py`` (its distance matrix) with the base revision's FasterPAM kernel
(:func:`bench_fasterpam_kernel.base_kernel`, built as that revision built it), and this tree's with this tree's
kernel as it loads. Printed per benchmark: each form's CPU seconds, the ratio, a digest of every subset (medoids and
weights) and how many subsets differ::

    .venv/bin/python benchmarks/bench_anchor_fresh.py --inputs /tmp/anchor-inputs wmdp-bio harmbench --base main
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--inputs", default="/tmp/anchor-inputs", help="where bench_anchor_path's captures are")
    parser.add_argument("--base", default="main", help="the revision whose static.py and kernel are the old form")
    parser.add_argument("--base-flags", default="", help="the base kernel's extra compiler flags, comma-separated")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-calls", type=int, default=None, help="replay only the first calls (splits)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_anchor_path import base_module, replay, summary
    from bench_fasterpam_kernel import base_kernel
    from threadpoolctl import threadpool_limits

    from irtlib.selection import fasterpam, static

    lib = fasterpam.kernel()
    libs = {"base": base_kernel(args.base, tuple(f for f in args.base_flags.split(",") if f)), "this tree": lib}
    forms = {"base": base_module(args.base), "this tree": static}
    with threadpool_limits(limits=1):
        for name in args.benchmarks:
            calls = [c for c in pickle.loads((Path(args.inputs) / f"authors_{name}.pkl").read_bytes())
                     if c[0] == "fresh"][:args.max_calls]
            runs = {form: [] for form in forms}
            seen = {}
            for r in range(args.rounds):
                for form in (list(forms) if r % 2 == 0 else list(forms)[::-1]):
                    fasterpam._KERNEL["lib"] = libs[form]
                    cpu, digest, res = replay(forms[form], calls)
                    runs[form].append(cpu)
                    seen[form] = digest, res
            fasterpam._KERNEL["lib"] = lib
            print(summary(name, calls, runs, seen), flush=True)
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
