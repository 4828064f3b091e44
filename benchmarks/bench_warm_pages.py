"""Benchmark: chapters re-executed warm (the shared cache present), their pages at two commits, A/B alternated.

Each chapter is executed by ``tools/run_chapter.py`` (papermill, QUICK by default) with the repository
root as working directory, so it reads this checkout's ``_build/cache``: once from its source at
``--before`` (``git show REF:book/<chapter>.md``, written to a scratch folder) and once from the working
tree, alternately, ``--rounds`` times. The library is this checkout's in both, so only what the pages'
cells do differs. It prints, per run, the wall seconds and the CPU seconds of the run and every process
it waited for (the kernel and what the kernel waited for: chapter 7's command lines), the load average
beside it, and per chapter the median ratio after / before. Run the "after" pages once before timing,
so that what they store (rendered figures) exists, as it does in a warm build. Run from the repository
root::

    .venv/bin/python benchmarks/bench_warm_pages.py --before HEAD~1 [--rounds 2] [--full] CHAPTER ...
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(source: Path, *, quick: bool, out: Path) -> tuple[float, float]:
    """Execute one chapter source; wall and CPU seconds (every process waited for)."""
    args = [sys.executable, "tools/run_chapter.py", str(source), str(out), "--cwd", str(ROOT), "--",
            "-p", "QUICK", "True" if quick else "False"]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    for var, sub in (("IRTLIB_REAL_DATA", "airbench2024_helm22"), ("IRTLIB_PANDAGUARD_DATA", "pandaguard_jbb")):
        if not env.get(var) and (ROOT.parent / "shared" / "realdata" / sub).is_dir():
            env[var] = str(ROOT.parent / "shared" / "realdata" / sub)
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(args, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="+")
    parser.add_argument("--before", required=True, help="git ref of the pages to compare against")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--full", action="store_true", help="the full settings instead of QUICK")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        tmp = Path(tmp)
        (tmp / "before").mkdir()
        results = {}
        for chapter in opts.chapters:
            old = subprocess.run(["git", "show", f"{opts.before}:book/{chapter}.md"], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout
            before = tmp / "before" / f"{chapter}.md"
            before.write_text(old)
            sources = {"before": before, "after": ROOT / "book" / f"{chapter}.md"}
            for r in range(opts.rounds):
                for label in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    wall, cpu = run(sources[label], quick=not opts.full, out=tmp / f"{label}-{chapter}.ipynb")
                    load = os.getloadavg()[0]
                    results.setdefault((chapter, label), []).append((wall, cpu))
                    print(f"{chapter:22s} {label:6s} wall {wall:6.1f} s  CPU {cpu:6.1f} s  (load {load:.1f})",
                          flush=True)
        print("\nmedians: chapter, before wall / CPU, after wall / CPU, CPU ratio after/before")
        for chapter in opts.chapters:
            b = [statistics.median(x) for x in zip(*results[(chapter, "before")], strict=True)]
            a = [statistics.median(x) for x in zip(*results[(chapter, "after")], strict=True)]
            print(f"{chapter:22s} {b[0]:6.1f} / {b[1]:5.1f}   {a[0]:6.1f} / {a[1]:5.1f}   {a[1] / b[1]:.2f}")


if __name__ == "__main__":
    main()
