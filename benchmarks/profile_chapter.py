"""Profile one chapter: its code cells run in an in-process IPython shell, under cProfile, cell by cell.

Not a timing of the build (papermill, the kernel and the notebook's JSON are left out): where a
chapter's own time goes. Prints each code cell's wall and CPU seconds (this process's, and that of
the worker processes it waited for; joblib's reusable workers are waited for only at the end, so their
CPU appears in the total alone), then cProfile's top functions by cumulative time, and writes
the profile to ``--out`` (``python -m pstats`` reads it).

Run from the repository root, with the cache the chapter should find (e.g. a copy of the stage's)::

    .venv/bin/python benchmarks/profile_chapter.py 06_table2 --cache-dir /tmp/cache [-p KEY VALUE ...]
"""

from __future__ import annotations

import argparse
import ast
import cProfile
import os
import pstats
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap_workers() -> None:
    """Shut joblib's reusable loky workers down and wait for them, so that their CPU counts as the children's.

    A worker's CPU reaches ``RUSAGE_CHILDREN`` only once it has exited and been waited for; loky
    keeps its workers for the next call, so without this a chapter's parallel runs would show 0.
    """
    try:
        from joblib.externals.loky import reusable_executor
    except ImportError:      # pragma: no cover - joblib comes with the scientific stack
        return
    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)


def code_cells(chapter: str) -> list[tuple[list[str], str]]:
    """``(tags, source)`` of every code cell of ``book/<chapter>.md``."""
    import jupytext

    nb = jupytext.read(ROOT / "book" / f"{chapter}.md")
    return [(list(c.metadata.get("tags", [])), c.source) for c in nb.cells if c.cell_type == "code"]


def chapter_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every in-process chapter runner takes: the chapter, its ``--cache-dir`` and ``-p`` parameters."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("chapter")
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                        help="a parameter, as papermill's -p (the value is a Python literal or a string)")
    return parser


def runnable_cells(args: argparse.Namespace) -> list[str]:
    """The chapter's code cells as an in-process shell runs them: ``%matplotlib`` lines dropped (no GUI:
    figures go to the Agg backend), the parameters cell followed by ``CACHE_DIR`` and the ``-p`` values."""
    params = {"CACHE_DIR": args.cache_dir}
    for key, value in args.p:
        try:
            params[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[key] = value
    cells = []
    for tags, source in code_cells(args.chapter):
        source = "\n".join(line for line in source.splitlines() if not line.startswith("%matplotlib"))
        if "parameters" in tags:
            source += "\n" + "\n".join(f"{k} = {v!r}" for k, v in params.items())
        cells.append(source)
    return cells


def main(argv=None) -> int:
    parser = chapter_parser(__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="where to write the profile (default /tmp/<chapter>.prof)")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--timer", choices=["wall", "cpu"], default="wall",
                        help="cProfile's clock: wall seconds, or this process's CPU seconds (a shared machine)")
    args = parser.parse_args(argv)

    os.chdir(ROOT)
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    profile = cProfile.Profile(time.process_time) if args.timer == "cpu" else cProfile.Profile()
    rows = []
    start_wall, start_cpu, start_children = time.perf_counter(), time.process_time(), _children_cpu()
    for i, source in enumerate(runnable_cells(args)):
        w, c, ch = time.perf_counter(), time.process_time(), _children_cpu()
        profile.enable()
        result = shell.run_cell(source, store_history=False, silent=True)
        profile.disable()
        rows.append((i, time.perf_counter() - w, time.process_time() - c, _children_cpu() - ch,
                     source.strip().splitlines()[0][:70] if source.strip() else ""))
        if not result.success:
            print(f"cell {i} failed: {result.error_in_exec or result.error_before_exec!r}", file=sys.stderr)
            return 1
    _reap_workers()
    total = (time.perf_counter() - start_wall, time.process_time() - start_cpu, _children_cpu() - start_children)
    print(f"{'cell':>4} {'wall s':>8} {'cpu s':>8} {'child s':>8}  first line")
    for i, wall, cpu, child, first in sorted(rows, key=lambda r: -r[1])[:25]:
        print(f"{i:>4} {wall:8.2f} {cpu:8.2f} {child:8.2f}  {first}")
    print(f"total wall {total[0]:.1f} s, cpu {total[1]:.1f} s, workers' cpu {total[2]:.1f} s; load {os.getloadavg()}")
    out = args.out or f"/tmp/{args.chapter}.prof"
    profile.dump_stats(out)
    pstats.Stats(out).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
