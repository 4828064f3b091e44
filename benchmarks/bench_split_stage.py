"""Benchmark: the book's calibration stage cold, this tree against a baseline tree, runs alternated.

The stage (``python -m irtbook.split_stage --cache-dir <empty> --workers 2``, issue 26's budget 100 s cold)
is run as a subprocess from each tree's root with that tree's packages first on ``PYTHONPATH`` (the same
venv), each run into a fresh cache, the trees alternated (A B, then B A, ...), so that both see the same
mix of machine load. For every run: wall seconds, CPU seconds of the stage and every process it waited
for (user + sys), the 1-minute load before and after, and each job's line (the jobs' own seconds). Then
the two trees' caches of their first runs are compared entry by entry: every split fit (``a``, ``b``)
and every whole-benchmark fit (``a``, ``b``, ``theta``, the engine's diagnostics but not its seconds)
must be equal bit for bit; the entries' file names (keys) differ between trees whose code differs, so
the comparison is by content.

Usage (from the repository root)::

    python benchmarks/bench_split_stage.py --tree /tmp/stage-base [--rounds 2] [--workers 2] [--quick]
    python benchmarks/bench_split_stage.py --compare DIR_A DIR_B        # two caches only
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import pickle
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def run_stage(tree: Path, cache_dir: Path, *, workers: int, quick: bool) -> dict:
    """One cold stage of ``tree`` into ``cache_dir``: wall, CPU (children), loads and the log lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "bookkit")])}
    command = [sys.executable, "-m", "irtbook.split_stage", "--cache-dir", str(cache_dir), "--workers", str(workers),
               *(["--quick"] if quick else [])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the stage of {tree} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in done.stderr.splitlines() if line.startswith("[split stage]")]
    return {"wall": wall, "cpu": cpu, "load": (load_before, os.getloadavg()[0]), "lines": lines}


def job_seconds(lines: list[str]) -> dict:
    """Each job's own seconds from its log line (``label: ..., 12.3 s``)."""
    out = {}
    for line in lines:
        found = re.match(r"\[split stage\] (.*?): .*?([\d.]+) s(?: \[|$)", line)
        if found and "split calibrations" not in line:
            out[found.group(1)] = float(found.group(2))
    return out


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a))
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()


def cache_contents(directory: Path) -> tuple[Counter, Counter]:
    """The multisets of split fits (digest of a and b) and of whole fits (a, b, theta, engine, diagnostics)."""
    splits = Counter()
    for path in glob.glob(str(directory / "splits" / "*.npz")):
        with np.load(path) as entry:
            splits[_digest(entry["a"], entry["b"])] += 1
    whole = Counter()
    for path in glob.glob(str(directory / "*.pkl")):
        with open(path, "rb") as fh:
            fit = pickle.load(fh)       # noqa: S301 - the caches this script itself had written
        diagnostics = {k: v for k, v in (getattr(fit, "diagnostics", None) or {}).items() if "second" not in k}
        theta = getattr(fit, "theta", None)
        whole[_digest(fit.a, fit.b, np.asarray([] if theta is None else theta, dtype=float)) + str(fit.engine)
              + repr(sorted(diagnostics.items()))] += 1
    return splits, whole


def compare(a: Path, b: Path) -> bool:
    """Print whether the two caches hold the same fits bit for bit; True if they do."""
    (split_a, whole_a), (split_b, whole_b) = cache_contents(a), cache_contents(b)
    same_split, same_whole = split_a == split_b, whole_a == whole_b
    print(f"split fits: {sum(split_a.values())} and {sum(split_b.values())}, "
          f"{'all equal bit for bit' if same_split else f'{sum((split_a - split_b).values())} differ'}; "
          f"whole fits: {sum(whole_a.values())} and {sum(whole_b.values())}, "
          f"{'all equal bit for bit' if same_whole else f'{sum((whole_a - whole_b).values())} differ'}")
    return same_split and same_whole


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="the baseline tree (a checkout or worktree of another commit)")
    parser.add_argument("--rounds", type=int, default=2, help="A/B pairs, alternated (default %(default)s)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="the QUICK stage")
    parser.add_argument("--work", type=Path, default=None, help="where the caches go (default: a temporary dir)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar="DIR", help="compare two caches and stop")
    args = parser.parse_args(argv)
    if args.compare:
        return 0 if compare(*args.compare) else 1
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_stage-"))
    trees = {"this": ROOT} | ({"base": args.tree.resolve()} if args.tree else {})
    runs: dict = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in order:
            cache = work / f"{name}-{r}"
            out = run_stage(trees[name], cache, workers=args.workers, quick=args.quick)
            out["cache"] = cache
            runs[name].append(out)
            print(f"round {r + 1} {name:4s}: wall {out['wall']:6.1f} s  CPU {out['cpu']:6.1f} s  "
                  f"load {out['load'][0]:.1f} -> {out['load'][1]:.1f}", flush=True)
            for line in out["lines"][-2:]:
                print(f"    {line}")
    for name, done in runs.items():
        print(f"\n{name} ({trees[name]}): median wall {statistics.median(o['wall'] for o in done):.1f} s, "
              f"median CPU {statistics.median(o['cpu'] for o in done):.1f} s")
        jobs = [job_seconds(o["lines"]) for o in done]
        for label in jobs[0]:
            print(f"    {label:60s} " + "  ".join(f"{j.get(label, float('nan')):6.1f}" for j in jobs))
    if "base" in runs:
        for r in range(args.rounds):
            a, b = runs["this"][r], runs["base"][r]
            print(f"round {r + 1}: this/base wall {a['wall'] / b['wall']:.2f}, CPU {a['cpu'] / b['cpu']:.2f}")
        return 0 if compare(runs["this"][0]["cache"], runs["base"][0]["cache"]) else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
