"""Benchmark: how long the book takes to execute, chapter by chapter, against the issue's budgets.

Runs ``make executed`` (every chapter through papermill, ``JOBS`` in parallel) into a scratch
build directory, with an empty result cache (``--cold``, the default: what a fresh clone with a
warm virtual environment pays) or with the cache left from a first run (``--warm``, what a
rerun pays), and prints each chapter's papermill duration, the wall time of the whole run, and
the ratio of that wall time to the budget (issue 17: the full book in at most 120 s, a QUICK
build in at most 60 s). A ``python -c pass`` kernel start is timed in the same run as the
baseline each chapter pays at least once. Run from the repository root::

    .venv/bin/python benchmarks/bench_book.py [--quick] [--jobs 2] [--warm]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {"full": 120.0, "quick": 60.0}


def _durations(executed: Path) -> dict[str, float]:
    out = {}
    for nb in sorted(executed.glob("*.ipynb")):
        meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
        out[nb.stem] = float(meta.get("duration") or float("nan"))
    return out


def _run(build: Path, *, quick: bool, jobs: int) -> float:
    env = dict(os.environ, PYTHONHASHSEED="0")
    cmd = ["make", "--no-print-directory", f"-j{jobs}", "executed", f"BUILD={build}", f"EXEC_DIR={build}/executed",
           "MANAGE_VENV=0", f"QUICK={'1' if quick else ''}"]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="QUICK=1 (reduced settings)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters in parallel (make -j)")
    parser.add_argument("--warm", action="store_true", help="time a second run that reuses the result cache")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    baseline = time.perf_counter() - start

    with tempfile.TemporaryDirectory(prefix="bench-book-") as tmp:
        build = Path(tmp)
        cache = ROOT / "_build" / "cache"
        saved = None
        if cache.exists():       # the chapters cache under _build/cache: set it aside, restore it after
            saved = build / "cache-saved"
            shutil.move(str(cache), saved)
        try:
            wall = _run(build, quick=args.quick, jobs=args.jobs)
            if args.warm:
                shutil.rmtree(build / "executed")
                wall = _run(build, quick=args.quick, jobs=args.jobs)
            durations = _durations(build / "executed")
        finally:
            if cache.exists():
                shutil.rmtree(cache)
            if saved is not None:
                shutil.move(str(saved), cache)

    mode = "quick" if args.quick else "full"
    print(f"book execution ({mode}, {'warm' if args.warm else 'cold'} cache, -j{args.jobs}); "
          f"baseline python start {baseline:.2f} s")
    for name, s in sorted(durations.items(), key=lambda kv: -kv[1]):
        print(f"  {name:24s} {s:7.1f} s")
    print(f"  {'sum of chapters':24s} {sum(durations.values()):7.1f} s")
    print(f"wall {wall:.1f} s; budget {BUDGET_S[mode]:.0f} s; ratio {wall / BUDGET_S[mode]:.2f} "
          f"({'within' if wall <= BUDGET_S[mode] else 'over'} budget)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
