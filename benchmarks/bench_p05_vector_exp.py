"""The opt-in vector-exp MLE prototype (``IRTLIB_MLE_VECTOR_EXP=1``) against the default kernel: CPU and differences.

Runs chapter 05's protocol run (``profile_protocol.run_one``, ``--run authors``) on each benchmark in a fresh
process per setting, alternated over ``--rounds``, and prints each process's CPU seconds and, once, how the
result rows differ (rows whose agreement is not bit-for-bit equal, the largest absolute difference, and the
largest difference of the per-method, per-budget mean agreement the chapter plots).

    .venv/bin/python benchmarks/bench_p05_vector_exp.py --max-splits 10 --cache-dir /tmp/cache safetybench
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def child(args) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_protocol import run_one

    from irtbook.pipeline import load_benchmark

    bench = load_benchmark(args.benchmark)
    cpu = time.process_time()
    df = run_one(bench, "authors", max_splits=args.max_splits, cache_dir=args.cache_dir)
    cpu = time.process_time() - cpu
    with open(args.out, "wb") as fh:
        pickle.dump(df[["split", "method", "k", "agreement"]].reset_index(drop=True), fh)
    print(json.dumps({"cpu": round(cpu, 2)}))


def compare(a, b) -> str:
    same = (a["agreement"].to_numpy() == b["agreement"].to_numpy()) | (a["agreement"].isna() & b["agreement"].isna())
    diff = np.abs(a["agreement"].to_numpy() - b["agreement"].to_numpy())
    ma = a.groupby(["method", "k"])["agreement"].mean()
    mb = b.groupby(["method", "k"])["agreement"].mean()
    by_method = (a.assign(d=diff)[~same].groupby("method").size().to_dict())
    return (f"rows differing {int((~same).sum())} of {len(a)} ({by_method}); largest |diff| {np.nanmax(diff):.3g}; "
            f"largest |diff| of a mean curve point {np.nanmax(np.abs(ma - mb)):.3g}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark")
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="p05-vexp-"))
    frames = {}
    for r in range(args.rounds):
        for label in (("default", "vector") if r % 2 == 0 else ("vector", "default")):
            out = tmp / f"{label}.pkl"
            cmd = [sys.executable, str(Path(__file__).resolve()), args.benchmark, "--cache-dir", args.cache_dir,
                   "--child", "--out", str(out)]
            if args.max_splits is not None:
                cmd += ["--max-splits", str(args.max_splits)]
            env = dict(os.environ, IRTLIB_MLE_VECTOR_EXP="1" if label == "vector" else "0",
                       PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'bookkit'}")
            load = os.getloadavg()[0]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
            got = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"round {r + 1} {label:7s} load {load:.1f}->{os.getloadavg()[0]:.1f} {args.benchmark}: "
                  f"cpu {got['cpu']} s", flush=True)
            with open(out, "rb") as fh:
                frames[label] = pickle.load(fh)
    print(args.benchmark, compare(frames["default"], frames["vector"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
