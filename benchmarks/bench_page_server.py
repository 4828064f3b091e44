"""Benchmark: a page run by a runner forked from the page server against a runner process of its own.

Runs a one-cell page (``1``, the page server's own warm-up page) ``--pages`` times in a row through
``tools/run_chapter.py``, with the page server (``tools/page_server.py``) and without it
(``IRTBOOK_PAGE_SERVER=0``), alternating the two in ``--rounds`` rounds, each round in a fresh build
folder whose servers end with the round. It prints, per side, the median over rounds of the wall
seconds per page and of the CPU seconds per page (the runners', the kernels' and the servers', as
``benchmarks/bench_book.py`` counts them), and their ratios. Both sides fork their kernels from the
kernel server, as the book does; the first page of a round starts the servers (the page server's
side runs that page itself), as the first pages of a build do. Run from the repository root::

    .venv/bin/python benchmarks/bench_page_server.py [--pages 8] [--rounds 3]
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
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_book import COVERAGE_HOOKS, kernel_server_cpu  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from page_server import WARM_UP_PAGE as PAGE  # noqa: E402  (a one-cell page: the cell is `1`)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_round(*, pages: int, server: bool) -> tuple[float, float]:
    """Wall and CPU seconds per page of ``pages`` pages run in a row; the servers end before it returns."""
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as tmp:
        tree = Path(tmp)
        (tree / "page.md").write_text(PAGE)
        env = {k: v for k, v in os.environ.items() if k not in COVERAGE_HOOKS}
        env.update(IRTBOOK_PAGE_SERVER="1" if server else "0", IRTBOOK_FORK_KERNEL_IDLE="5", PYTHONHASHSEED="0")
        # the servers' owner is the runners' parent: a shell that outlives the pages, then ends
        script = "; ".join(f"{sys.executable} {ROOT / 'tools' / 'run_chapter.py'} page.md "
                           f"_build/executed/page{i}.ipynb --cwd {tree} > /dev/null 2>&1" for i in range(pages))
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run(["bash", "-c", script + "; true"], cwd=tree, env=env, check=True)
        wall = time.perf_counter() - start
        missing = [i for i in range(pages) if not (tree / "_build" / "executed" / f"page{i}.ipynb").exists()]
        if missing:
            raise RuntimeError(f"pages {missing} were not executed")
        cpu = _children_cpu() - cpu + kernel_server_cpu(tree)
    return wall / pages, cpu / pages


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=8, help="pages run in a row per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side, alternated")
    args = parser.parse_args(argv)
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(args.rounds):
        for server in (False, True):
            results[server].append(one_round(pages=args.pages, server=server))
    med = {side: (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
           for side, rows in results.items()}
    print(f"{args.pages} one-cell pages in a row, {args.rounds} rounds alternated; load {os.getloadavg()[0]:.1f}")
    for side, label in ((False, "a runner process per page"), (True, "runners forked from the page server")):
        wall, cpu = med[side]
        print(f"  {label:36s} wall {wall:5.2f} s/page   cpu {cpu:5.2f} s/page")
    print(f"  ratio (page server / own process)   wall {med[True][0] / med[False][0]:5.2f}          "
          f"cpu {med[True][1] / med[False][1]:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
