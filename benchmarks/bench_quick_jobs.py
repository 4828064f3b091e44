"""Benchmark: a QUICK build's protocol runs in one process against two joblib workers, in CPU seconds.

Chapter 06's paper's-text protocol runs (the six benchmarks, every method, the MAP engine, the QUICK split
count :data:`irtbook.split_stage.QUICK_MAX_SPLITS`, no cache) are run in a fresh Python process per
setting, ``n_jobs=1`` and ``n_jobs=2`` alternated ``--rounds`` times, and each process's CPU seconds
(its own and its reaped children's: the loky workers end with it) and wall seconds are printed with the
ratio of the means and the load average. Both settings give the same rows (checked on the first round).
This is why a QUICK build caps ``N_JOBS`` at :data:`irtbook.split_stage.QUICK_N_JOBS`.

Run from the repository root::

    .venv/bin/python benchmarks/bench_quick_jobs.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, resource, sys, time
start = time.perf_counter()
from irtbook.pipeline import book_protocol, load_benchmark, protocol_benchmark
from irtbook.split_stage import BOOK_BENCHMARKS, FRESH_ANCHOR_MAX_ITEMS, QUICK_MAX_SPLITS

digest = hashlib.sha256()
for name in BOOK_BENCHMARKS:
    bench = load_benchmark(name, rule="strict")
    proto = book_protocol(bench, "paper", fresh_anchor_max_items=FRESH_ANCHOR_MAX_ITEMS)
    df = protocol_benchmark(bench, protocol=proto, n_jobs=int(sys.argv[1]), cache_dir=None, max_splits=QUICK_MAX_SPLITS)
    digest.update(df.drop(columns=[c for c in df.columns if "second" in c]).to_csv(index=False).encode())
wall = time.perf_counter() - start
import joblib.externals.loky as loky
loky.get_reusable_executor().shutdown(wait=True)      # the workers end, and are reaped, before the CPU is read
self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime,
                  "rows": digest.hexdigest()}))
"""


def run(n_jobs: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(n_jobs)], cwd=ROOT, check=True, capture_output=True,
                         text=True, env={**os.environ, "MPLBACKEND": "Agg"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    times = {1: [], 2: []}
    rows = {}
    for r in range(args.rounds):
        for n_jobs in (1, 2) if r % 2 == 0 else (2, 1):
            res = run(n_jobs)
            times[n_jobs].append(res)
            rows.setdefault(n_jobs, res["rows"])
            print(f"round {r + 1}, n_jobs={n_jobs}: {res['cpu']:.1f} CPU s, {res['wall']:.1f} s wall; "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    if rows[1] != rows[2]:
        print("the two settings gave different rows", file=sys.stderr)
        return 1
    mean = {n: sum(t["cpu"] for t in times[n]) / len(times[n]) for n in times}
    print(f"same rows; mean CPU s: one process {mean[1]:.1f}, two workers {mean[2]:.1f}; "
          f"ratio {mean[1] / mean[2]:.2f}; load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
