"""Chapters 05 and 06's protocol runs, this tree against another, alternated, in CPU seconds.

Each round runs, in a fresh process per tree (``PYTHONPATH`` set to the tree), one run of
``--run`` on each benchmark (:func:`benchmarks.profile_protocol.run_one`: ``paper`` is 06's
comparison protocol, ``alt`` 06's ``alt_runs``, ``authors`` 05's runs), and prints the process's
CPU seconds and a digest of the result rows (split, method, k, agreement to the last bit), so
equal digests mean equal results. The split calibrations are read from ``--cache-dir``'s
``splits`` (a copy of the stage's cache), the protocol results are never cached.

    .venv/bin/python benchmarks/bench_full_protocol.py --tree /tmp/base --run paper --max-splits 20 \\
        --cache-dir /tmp/cache --rounds 2 airbench2024 safetybench
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(args) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_protocol import run_one

    from irtbook.pipeline import load_benchmark

    out = {}
    for name in args.benchmarks:
        bench = load_benchmark(name)
        cpu = time.process_time()
        df = run_one(bench, args.run, max_splits=args.max_splits, cache_dir=args.cache_dir)
        cpu = time.process_time() - cpu
        rows = df[["split", "method", "k", "agreement"]].to_numpy(dtype=object)
        digest = hashlib.sha256(repr([tuple(r[:3]) + (float(r[3]).hex(),) for r in rows]).encode()).hexdigest()[:16]
        out[name] = {"cpu": round(cpu, 2), "digest": digest, "rows": len(df)}
    print(json.dumps(out))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--tree", required=True, help="the other tree (a checkout with irtlib/ and bookkit/)")
    parser.add_argument("--run", choices=["paper", "alt", "authors"], required=True)
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    trees = {"other": Path(args.tree).resolve(), "this": ROOT}
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_full_protocol.py"), *args.benchmarks, "--tree", "-",
           "--run", args.run, "--cache-dir", args.cache_dir, "--child"]
    if args.max_splits is not None:
        cmd += ["--max-splits", str(args.max_splits)]
    for r in range(args.rounds):
        for label in (("other", "this") if r % 2 == 0 else ("this", "other")):
            tree = trees[label]
            env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'bookkit'}")
            load = os.getloadavg()[0]
            res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
            got = json.loads(res.stdout.strip().splitlines()[-1])
            total = sum(v["cpu"] for v in got.values())
            print(f"round {r + 1} {label:5s} load {load:.1f}->{os.getloadavg()[0]:.1f} cpu {total:.1f} s  "
                  + "  ".join(f"{b}: {v['cpu']} s {v['digest']}" for b, v in got.items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
