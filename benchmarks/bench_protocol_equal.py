"""Protocol runs of this tree against another, alternated (ABBA), in CPU seconds, with the whole result frames compared.

Like ``bench_full_protocol.py``, but each child pickles its result frames, and the parent compares
them across trees with ``DataFrame.equals`` (every column, not only the agreement's digest). Each
round runs the trees in the order A B, the next B A. The split calibrations are read from
``--cache-dir``'s ``splits`` (a copy of the stage's cache); the protocol results are never cached.

    .venv/bin/python benchmarks/bench_protocol_equal.py --tree /tmp/base --run paper --max-splits 10 \\
        --cache-dir /tmp/cache --rounds 2 safetybench airbench2024
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(args) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_protocol import run_one

    from irtbook.pipeline import load_benchmark

    frames, cpu = {}, {}
    for name in args.benchmarks:
        bench = load_benchmark(name)
        start = time.process_time()
        frames[name] = run_one(bench, args.run, max_splits=args.max_splits, cache_dir=args.cache_dir)
        cpu[name] = time.process_time() - start
    with open(args.out, "wb") as fh:
        pickle.dump({"frames": frames, "cpu": cpu}, fh)


def run_tree(tree: Path, args, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(tree / "bookkit")]))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_protocol_equal.py"), "--child", "--out", str(out),
           "--tree", str(tree), "--run", args.run, "--cache-dir", args.cache_dir, *args.benchmarks]
    if args.max_splits is not None:
        cmd += ["--max-splits", str(args.max_splits)]
    subprocess.run(cmd, check=True, env=env, cwd=str(ROOT))
    with open(out, "rb") as fh:
        return pickle.load(fh)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--tree", required=True, help="the other tree (a checkout with irtlib/ and bookkit/)")
    parser.add_argument("--run", choices=["paper", "alt", "authors"], required=True)
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    trees = {"other": Path(args.tree).resolve(), "this": ROOT}
    results: dict = {"other": [], "this": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ["other", "this"] if r % 2 == 0 else ["this", "other"]
            for label in order:
                got = run_tree(trees[label], args, Path(tmp) / f"{label}{r}.pkl")
                results[label].append(got)
                print(f"round {r + 1} {label}: " + ", ".join(f"{k} {v:.2f}" for k, v in got["cpu"].items())
                      + f" CPU s (load {os.getloadavg()[0]:.1f})", flush=True)
    base = results["other"][0]["frames"]
    for label, runs in results.items():
        for got in runs:
            for name, df in got["frames"].items():
                if not df.equals(base[name]):
                    print(f"DIFFERENT: {label} {name}")
                    return 1
    print("every result frame equal (DataFrame.equals) across trees and rounds")
    for name in args.benchmarks:
        mean = {label: sum(g["cpu"][name] for g in runs) / len(runs) for label, runs in results.items()}
        print(f"{name}: other {mean['other']:.2f}, this {mean['this']:.2f} CPU s (this/other "
              f"{mean['this'] / mean['other']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
