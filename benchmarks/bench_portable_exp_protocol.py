"""Chapter 05's protocol runs with the MLE's portable exp against a tree with the C library's: CPU, estimates, results.

Runs chapter 05's protocol run (``profile_protocol.run_one``, ``--run authors``, ``n_jobs=1``) of each benchmark
in a fresh process per tree (``PYTHONPATH`` set to the tree; ``--old`` a checkout from before
:mod:`irtlib.selection.portable_exp`, e.g. extracted with ``git archive``), alternated over ``--rounds`` (ABBA),
and prints each process's CPU seconds; then, per benchmark, how far Fluid's MLE estimates moved (every estimate
of every step of every split, in call order: the largest absolute difference and how many differ) and how the
result rows compare (every column; exactly equal rows, and rows equal when rounded to 4 decimals, the
chapter's printed precision).

    .venv/bin/python benchmarks/bench_portable_exp_protocol.py --old /tmp/old --max-splits 10 \\
        --cache-dir /tmp/cache --rounds 2 safetybench airbench2024
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
    tree = Path(args.tree)
    sys.path.insert(0, str(tree / "benchmarks"))
    from profile_protocol import run_one

    from irtbook.pipeline import load_benchmark
    from irtlib.selection import estimators

    thetas = []
    estimate = estimators._MleRun.estimate

    def recording(run):
        out = estimate(run)
        thetas.append(np.array(out[0], copy=True))
        return out

    estimators._MleRun.estimate = recording
    bench = load_benchmark(args.benchmark)
    cpu = time.process_time()
    df = run_one(bench, "authors", max_splits=args.max_splits, cache_dir=args.cache_dir)
    cpu = time.process_time() - cpu
    with open(args.out, "wb") as fh:
        pickle.dump({"frame": df.reset_index(drop=True), "thetas": thetas}, fh)
    print(json.dumps({"cpu": round(cpu, 2), "estimates": len(thetas)}))


def compare(old: dict, new: dict) -> str:
    """The estimates' largest move and the result rows' equality, old tree against new."""
    a, b = old["frame"], new["frame"]
    ta, tb = old["thetas"], new["thetas"]
    if len(ta) == len(tb) and all(x.shape == y.shape for x, y in zip(ta, tb, strict=True)):
        xa, xb = (np.concatenate(t) if t else np.empty(0) for t in (ta, tb))
        both_nan = np.isnan(xa) & np.isnan(xb)
        moved = (xa != xb) & ~both_nan
        estimates = (f"estimates {xa.size}: {int(moved.sum())} differ, largest |diff| "
                     f"{(np.abs(xa - xb)[~both_nan].max() if xa.size else 0.0):.3g}")
    else:
        estimates = f"estimates: different call sequences ({len(ta)} against {len(tb)} calls)"
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return f"{estimates}; result frames of different shapes {a.shape} {b.shape}"
    exact = np.ones(len(a), dtype=bool)
    rounded = np.ones(len(a), dtype=bool)
    for col in a.columns:
        x, y = a[col], b[col]
        if np.issubdtype(x.dtype, np.floating):
            xv, yv = x.to_numpy(), y.to_numpy()
            nan = np.isnan(xv) & np.isnan(yv)
            exact &= (xv == yv) | nan
            rounded &= (np.round(xv, 4) == np.round(yv, 4)) | nan
        else:
            same = (x.astype(object).to_numpy() == y.astype(object).to_numpy())
            exact &= same
            rounded &= same
    return (f"{estimates}; result rows {len(a)}: {int(exact.sum())} exactly equal, {int(rounded.sum())} equal at "
            f"4 decimals; frames equal (DataFrame.equals): {a.equals(b)}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--old", required=True, help="a tree from before the portable exp")
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--benchmark", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="portable-exp-"))
    trees = {"old": Path(args.old).resolve(), "new": ROOT}
    for name in args.benchmarks:
        results, cpu = {}, {"old": [], "new": []}
        for r in range(args.rounds):
            for label in (("old", "new") if r % 2 == 0 else ("new", "old")):
                out = tmp / f"{name}-{label}.pkl"
                tree = trees[label]
                cmd = [sys.executable, str(Path(__file__).resolve()), "x", "--old", args.old, "--cache-dir",
                       args.cache_dir, "--child", "--tree", str(tree), "--benchmark", name, "--out", str(out)]
                if args.max_splits is not None:
                    cmd += ["--max-splits", str(args.max_splits)]
                env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'bookkit'}")
                load = os.getloadavg()[0]
                res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=tree)
                got = json.loads(res.stdout.strip().splitlines()[-1])
                cpu[label].append(got["cpu"])
                print(f"round {r + 1} {label} load {load:.1f}->{os.getloadavg()[0]:.1f} {name}: cpu {got['cpu']} s, "
                      f"{got['estimates']} estimate calls", flush=True)
                if label not in results:
                    with open(out, "rb") as fh:
                        results[label] = pickle.load(fh)
        ratio = sum(cpu["new"]) / sum(cpu["old"])
        print(f"{name}: cpu old {sum(cpu['old']):.1f} s, new {sum(cpu['new']):.1f} s (new/old {ratio:.3f}); "
              f"{compare(results['old'], results['new'])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
