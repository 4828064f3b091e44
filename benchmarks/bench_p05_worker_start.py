"""What a fresh protocol worker pays before its first Anchor Points: this tree against another, alternated, CPU s.

Each round starts one fresh process per tree (``PYTHONPATH`` set to the tree) that imports the protocol
(``irtlib.protocol.agreement``) and runs the authors' Anchor Points (``anchor_points_fresh``) on a small
simulated training matrix, as a joblib worker of chapter 05 does on its first task, and prints the whole
process's CPU seconds (user + system, from the parent's ``getrusage``) and whether it loaded scikit-learn.

    .venv/bin/python benchmarks/bench_p05_worker_start.py --tree /tmp/base --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("import sys, numpy as np\n"
        "import irtlib.protocol.agreement\n"
        "from irtlib.selection.static import anchor_points_fresh\n"
        "x = (np.random.default_rng(0).random((30, 200)) < 0.6).astype(float)\n"
        "anchor_points_fresh(x, [5, 20])\n"
        "print('sklearn' in sys.modules)\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    trees = {"other": Path(args.tree).resolve(), "this": ROOT}
    totals = {"other": [], "this": []}
    for r in range(args.rounds):
        for label in (("other", "this") if r % 2 == 0 else ("this", "other")):
            env = dict(os.environ, PYTHONPATH=f"{trees[label]}{os.pathsep}{trees[label] / 'bookkit'}")
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True,
                                 cwd=trees[label])     # "-c" puts the working directory first on sys.path
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            totals[label].append(cpu)
            print(f"round {r + 1} {label:5s} load {load:.1f} cpu {cpu:.2f} s sklearn loaded: {out.stdout.strip()}",
                  flush=True)
    for label, v in totals.items():
        print(f"{label}: median {sorted(v)[len(v) // 2]:.2f} s, min {min(v):.2f} s over {len(v)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
