"""Chapters 05 and 06's protocol runs, this tree against another, alternated, in CPU seconds, results compared.

Each round runs, in a fresh process per tree (``PYTHONPATH`` set to the tree), one run of
``--run`` on each benchmark (:func:`benchmarks.profile_protocol.run_one`: ``paper`` is 06's
comparison protocol, ``alt`` 06's ``alt_runs``, ``authors`` 05's runs); round one runs the other
tree first, round two this one (A B, B A, ...). Each round prints the process's CPU seconds and a
digest of the result rows (split, method, k, agreement to the last bit); at the end the whole result
frames of every round and tree are compared with ``DataFrame.equals`` (every column) and each
benchmark's mean CPU seconds are printed with the ratio this / other. The split calibrations are
read from ``--cache-dir``'s ``splits`` (a copy of the stage's cache); the protocol results are never
cached.

    .venv/bin/python benchmarks/bench_full_protocol.py --tree /tmp/base --run paper --max-splits 20 \\
        --cache-dir /tmp/cache --rounds 2 airbench2024 safetybench
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(args) -> None:
    """Run every benchmark once in this process; pickle each one's result frame and CPU seconds to ``--out``."""
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


def digest(df) -> str:
    """SHA-256 (16 hex digits) of the rows' split, method, k and agreement, the agreement to the last bit."""
    rows = df[["split", "method", "k", "agreement"]].to_numpy(dtype=object)
    return hashlib.sha256(repr([tuple(r[:3]) + (float(r[3]).hex(),) for r in rows]).encode()).hexdigest()[:16]


def describe(old, new) -> str:
    """Where two result frames differ: the shapes, or the rows and columns that differ and by how much."""
    if old.shape != new.shape or list(old.columns) != list(new.columns):
        return f"shapes {old.shape} and {new.shape}, columns {list(old.columns)} and {list(new.columns)}"
    parts = []
    for col in old.columns:
        a, b = old[col].reset_index(drop=True), new[col].reset_index(drop=True)
        same = (a == b) | (a.isna() & b.isna())
        if not same.all():
            rows = list(same.index[~same])
            try:
                gap = (a[rows].astype(float) - b[rows].astype(float)).abs().max()
                size = f", largest |difference| {float(gap):.3g}"
            except (TypeError, ValueError):
                size = ""
            parts.append(f"{col}: {len(rows)} row(s) {rows[:10]}{size}")
    return "; ".join(parts) or "the same values (dtypes or index differ)"


def run_tree(tree: Path, args, out: Path) -> dict:
    """One child process on ``tree``'s code: ``{"frames": {benchmark: DataFrame}, "cpu": {benchmark: s}}``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(tree / "bookkit")]))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_full_protocol.py"), "--child", "--out", str(out),
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
            for label in (("other", "this") if r % 2 == 0 else ("this", "other")):
                load = os.getloadavg()[0]
                got = run_tree(trees[label], args, Path(tmp) / f"{label}{r}.pkl")
                results[label].append(got)
                print(f"round {r + 1} {label:5s} load {load:.1f}->{os.getloadavg()[0]:.1f}  "
                      + "  ".join(f"{b}: {got['cpu'][b]:.2f} s {digest(df)}" for b, df in got["frames"].items()),
                      flush=True)
    base = results["other"][0]["frames"]
    different = False
    for label, runs in results.items():
        for r, got in enumerate(runs):
            for name, df in got["frames"].items():
                if not df.equals(base[name]):
                    different = True
                    print(f"DIFFERENT: {label} round {r + 1} {name}: {describe(base[name], df)}")
    if different:
        return 1
    print("every result frame equal (DataFrame.equals) across trees and rounds")
    for name in args.benchmarks:
        mean = {label: sum(g["cpu"][name] for g in runs) / len(runs) for label, runs in results.items()}
        print(f"{name}: other {mean['other']:.2f}, this {mean['this']:.2f} CPU s (this/other "
              f"{mean['this'] / mean['other']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
