"""CPU seconds of the authors' agreement protocol per benchmark, this tree against a baseline tree, A/B alternated.

What chapters 05 and 06 run (:func:`irtbook.pipeline.protocol_benchmark` with the ``"authors"``
protocol, ``fresh_anchor_max_items=2000``, one job), on the split calibrations of an existing
split-stage cache (``python -m irtbook.split_stage --cache-dir DIR``), with the protocol's own results
recomputed every run (each run gets a new cache directory holding only a link to the splits). Each
benchmark runs in a fresh process per tree, the trees alternating (baseline first), ``--repeat`` times;
the script prints every run's CPU and wall seconds, the baseline / this tree ratio of the CPU seconds,
and whether the two trees' result DataFrames are equal (``pandas.DataFrame.equals``: every number
bit for bit).

    git worktree add /tmp/static-base main
    .venv/bin/python benchmarks/bench_static.py --base /tmp/static-base --splits /tmp/static/cache/splits \\
        --benchmarks wmdp-bio airbench2024 [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_CHILD = r"""
import os, pickle, sys, tempfile, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from irtbook.pipeline import book_protocol, load_benchmark, protocol_benchmark
name, splits, out = sys.argv[1:4]
bench = load_benchmark(name)
proto = book_protocol(bench, "authors", fresh_anchor_max_items=2000)
with tempfile.TemporaryDirectory() as d:
    os.symlink(splits, os.path.join(d, "splits"))
    t, w = time.process_time(), time.perf_counter()
    df = protocol_benchmark(bench, protocol=proto, cache_dir=d, n_jobs=1)
    cpu, wall = time.process_time() - t, time.perf_counter() - w
with open(out, "wb") as fh:
    pickle.dump({"df": df, "cpu": cpu, "wall": wall, "seconds": df.attrs.get("seconds")}, fh)
"""


def _run(tree: Path, name: str, splits: str, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'bookkit'}", OPENBLAS_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", _CHILD, name, splits, out], check=True, env=env, cwd=tree)
    with open(out, "rb") as fh:
        return pickle.load(fh)


def _load() -> str:
    return os.getloadavg()[0].__format__(".1f")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the baseline tree (a checkout of main)")
    parser.add_argument("--splits", required=True, help="a split-stage cache's splits directory")
    parser.add_argument("--benchmarks", nargs="+", default=["wmdp-bio", "airbench2024"])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    trees = {"baseline": args.base.resolve(), "this tree": HERE}
    print(f"authors' protocol, one job; baseline {trees['baseline']}, this tree {HERE}")
    total = {label: 0.0 for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.benchmarks:
            cpu = {label: [] for label in trees}
            frames = {}
            for r in range(args.repeat):
                for label, tree in trees.items():
                    load = _load()
                    res = _run(tree, name, args.splits, os.path.join(tmp, f"{label}-{name}-{r}.pkl"))
                    cpu[label].append(res["cpu"])
                    frames[label] = res["df"]
                    stages = res["seconds"] or {}
                    shown = ", ".join(f"{k} {v:.1f}" for k, v in stages.items() if k != "total")
                    print(f"{name:20s} {label:9s} run {r + 1}: {res['cpu']:7.1f} CPU s, {res['wall']:7.1f} s wall "
                          f"(load {load} before)  [stage wall s: {shown}]", flush=True)
            best = {label: min(v) for label, v in cpu.items()}
            for label in trees:
                total[label] += best[label]
            equal = frames["baseline"].equals(frames["this tree"])
            print(f"{name:20s} best CPU s: baseline {best['baseline']:.1f}, this tree {best['this tree']:.1f}, "
                  f"ratio {best['baseline'] / best['this tree']:.2f}x; DataFrames equal: {equal}", flush=True)
    print(f"total best CPU s: baseline {total['baseline']:.1f}, this tree {total['this tree']:.1f}, "
          f"ratio {total['baseline'] / total['this tree']:.2f}x")


if __name__ == "__main__":
    main()
