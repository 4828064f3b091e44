"""Benchmark: reading a response file (``irtlib.io.load_responses``), long and wide CSV, against a baseline tree.

Writes coin-flip matrices of ``--models`` x each of ``--items`` as a long CSV (model, item, score; model by
model) and a wide CSV (one row per model), then reads each file ``--repeat`` times in a child process of this
tree and, with ``--baseline TREE`` (e.g. a ``git archive`` of ``main``), of that tree, alternating, and prints
the best wall and CPU seconds (CPU of the child: every thread) and the ratio baseline / this tree. The children
also check that both trees read the same matrix (values, models, items). With ``--fit`` each child of this tree
also fits the matrix it read (``fit_2pl(engine="map")``) and the ratio read / fit CPU is printed (the issue's
"reading costs a fraction of fitting"). Run with::

    .venv/bin/python benchmarks/bench_read.py --items 5000 20000 --baseline /tmp/base [--fit]

Timing is noisy on a shared machine: compare the CPU seconds, measured in one run (the load is printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, resource, sys, time, warnings
from irtlib.io import load_responses
warnings.simplefilter("ignore")
began, cpu = time.perf_counter(), time.process_time()
m = load_responses(sys.argv[1]).matrix
wall, cpu = time.perf_counter() - began, time.process_time() - cpu
digest = hashlib.sha256(m.values.tobytes() + "\x1f".join(map(str, m.models)).encode()
                        + "\x1f".join(map(str, m.items)).encode()).hexdigest()[:16]
fit_cpu = 0.0
if sys.argv[2] == "fit":
    from irtlib.calibration.joint_map import fit_2pl
    fit_cpu = time.process_time()
    fit_2pl(m, engine="map")
    fit_cpu = time.process_time() - fit_cpu
print(wall, cpu, digest, fit_cpu)
"""


def write_files(folder: Path, n_models: int, n_items: int, seed: int) -> tuple[Path, Path]:
    """A long and a wide CSV of the same coin-flip matrix."""
    x = np.random.default_rng(seed).integers(0, 2, (n_models, n_items), dtype=np.int8)
    models = np.char.add("m", np.arange(n_models).astype(str))
    items = np.char.add("i", np.arange(n_items).astype(str))
    long, wide = folder / f"long_{n_models}x{n_items}.csv", folder / f"wide_{n_models}x{n_items}.csv"
    with open(long, "w") as f:
        f.write("model,item,score\n")
        for m in range(n_models):
            f.write("\n".join(np.char.add(np.char.add(models[m] + ",", items), np.char.add(",", x[m].astype(str))))
                    + "\n")
    with open(wide, "w") as f:
        f.write("model," + ",".join(items) + "\n")
        for m in range(n_models):
            f.write(f"{models[m]}," + ",".join(x[m].astype(str)) + "\n")
    return long, wide


def read_in_child(tree: Path, path: Path, *, fit: bool = False) -> tuple[float, float, str, float]:
    """Wall and CPU seconds of the read, the matrix's digest, and the MAP fit's CPU seconds (0 without ``fit``)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), "fit" if fit else "-"], env=env, check=True,
                         cwd=tree, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), out[2], float(out[3])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="another checkout to read the same files with")
    parser.add_argument("--fit", action="store_true", help="also fit each matrix read by this tree (MAP engine)")
    parser.add_argument("--layouts", nargs="+", choices=("long", "wide"), default=["long", "wide"])
    args = parser.parse_args(argv)
    trees = [("this tree", ROOT)] + ([("baseline", args.baseline)] if args.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        for n_items in args.items:
            for layout, path in zip(("long", "wide"), write_files(Path(tmp), args.models, n_items, args.seed),
                                    strict=True):
                if layout not in args.layouts:
                    continue
                best: dict[str, tuple[float, float]] = {}
                digests, fits = set(), []
                for _ in range(args.repeat):
                    for name, tree in trees:
                        wall, cpu, digest, fit_cpu = read_in_child(tree, path, fit=args.fit and name == "this tree")
                        digests.add(digest)
                        old = best.get(name, (np.inf, np.inf))
                        best[name] = (min(old[0], wall), min(old[1], cpu))
                        if fit_cpu:
                            fits.append((cpu, fit_cpu))
                line = ", ".join(f"{name} {w:6.2f} s wall {c:6.2f} s CPU" for name, (w, c) in best.items())
                if fits:
                    ratios = [c / f for c, f in fits]
                    line += (f"; fit {min(f for _, f in fits):6.2f} s CPU, read / fit CPU {min(ratios):.2f} to "
                             f"{max(ratios):.2f}")
                if args.baseline:
                    (w0, c0), (w1, c1) = best["this tree"], best["baseline"]
                    line += f"; baseline / this tree {w1 / w0:.2f}x wall, {c1 / c0:.2f}x CPU"
                    line += "; same matrix" if len(digests) == 1 else "; MATRICES DIFFER"
                print(f"{path.name} ({path.stat().st_size / 1e6:.0f} MB): {line}; load {os.getloadavg()[0]:.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
