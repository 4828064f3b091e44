"""The primer's Sympson-Hetter calibration (00_primer: AIR-Bench 2024's MAP calibration, 1,000 simulees, 20 items,
maximum exposure 0.3): this tree against another, each in its own process, alternated; results compared.

Each process runs :func:`irtlib.selection.cat.sympson_hetter` with the primer's settings on the whole-benchmark
calibration (read from ``--cache-dir``, a copy of the stage's cache) and prints its CPU seconds and a digest of
the parameters ``K`` and exposures it returns (every bit). ``--reference`` also runs it in this tree with the
selection's whole-bank ranking (:func:`irtlib.selection.selectors.choose_items`, no candidate cells), the
definition the cells reproduce.

    .venv/bin/python benchmarks/bench_sympson_hetter.py --tree /tmp/base --cache-dir /tmp/cache --rounds 2
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(cache_dir: str, reference: bool) -> None:
    """One calibration in this process: prints CPU seconds and the digest."""
    import numpy as np

    from irtbook.pipeline import calibrate_benchmark, load_benchmark
    from irtlib.selection import selectors
    from irtlib.selection.cat import TwoPLItems, sympson_hetter

    bench = load_benchmark("airbench2024", rule="strict")
    cal = calibrate_benchmark(bench, engine="map", cache_dir=cache_dir)
    items = TwoPLItems(cal.a.to_numpy(), cal.b.to_numpy())
    if reference:
        selectors.sympson_hetter_candidates = lambda items: None
    start = time.process_time()
    k, exposure = sympson_hetter(items, max_exposure=0.3, max_items=20, n_simulees=1000, seed=0)
    seconds = time.process_time() - start
    digest = hashlib.sha256(np.ascontiguousarray(k).tobytes() + np.ascontiguousarray(exposure).tobytes()).hexdigest()
    print(f"{seconds:.2f} {digest[:16]}")


def run(tree: Path, cache_dir: str, reference: bool = False) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_sympson_hetter.py"), "--child", "--cache-dir", cache_dir]
    if reference:
        cmd.append("--reference")
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True).stdout.split()
    return float(out[-2]), out[-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", help="the other tree")
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.cache_dir, args.reference)
        return 0
    trees = {"this": ROOT} | ({"other": Path(args.tree)} if args.tree else {})
    digests = set()
    for r in range(args.rounds):
        for label in (list(trees) if r % 2 else list(trees)[::-1]):
            seconds, digest = run(trees[label], args.cache_dir)
            digests.add(digest)
            print(f"round {r + 1} {label}: {seconds:.2f} CPU s, digest {digest}", flush=True)
    if args.reference:
        seconds, digest = run(ROOT, args.cache_dir, reference=True)
        digests.add(digest)
        print(f"this tree, whole-bank ranking: {seconds:.2f} CPU s, digest {digest}")
    print(f"every digest equal: {len(digests) == 1}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
