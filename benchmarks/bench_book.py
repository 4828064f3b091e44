"""Benchmark: how long the book takes to build, stage by stage and chapter by chapter, against the budgets.

From a fresh clone of the committed tree (``git clone`` of HEAD into a scratch directory, the
virtual environment of this checkout, the data this checkout finds), with an empty result cache:

1. the shared calibration stage (``make stage``: every split calibration and whole-benchmark fit
   the chapters read, :mod:`irtbook.split_stage`), cold;
2. every chapter (``make executed``, ``--jobs`` in parallel), cold: what a first build pays;
3. the render (``make html``: the executed notebooks checked, the build tree with the wheels and the
   source archive, Jupyter Book's HTML); the full book cold is 1 + 2 + 3;
4. every chapter again with the cache left by 1 and 2 (the executed notebooks removed), and the
   render again: warm.

It prints each chapter's papermill duration cold and warm, the wall and CPU seconds of each step
(CPU of every process the step waited for) and of the whole build, and the same figures divided
by a fixed CPU workload (numpy and pure Python, about a second) timed in the same run, so the
ratios mean the same on another machine. The workload is timed again after each step and the load
average printed, so a machine that slowed down during the run shows. Coverage's subprocess hook
(``COVERAGE_PROCESS_START`` or ``COVERAGE_PROCESS_CONFIG`` in the environment, as pytest-cov's
subprocess measurement sets it: the venv's ``a1_coverage.pth`` then traces irtlib in every Python
process, about 1.6x the CPU of a chapter) is removed from the build's environment and reported.
Kernels forked by the kernel server (``tools/kernel_forkserver.py``) are not make's descendants: their
CPU seconds and the server's own, which the server logs in ``_build/kernel-server/*.log``, are added to
the step's, and likewise the page runners the page server forks (``tools/page_server.py``, its log in
``_build/page-server/``); ``--no-kernel-server`` runs the pages in ordinary kernels (``IRTBOOK_FORK_KERNEL=0``),
``--no-page-server`` each page in its own runner process (``IRTBOOK_PAGE_SERVER=0``).
The budgets are issue 26's: the calibration stage 100 s; every chapter 30 s warm; the full book 180 s
cold and 60 s warm; a QUICK build 45 s cold.
Run from the repository root::

    .venv/bin/python benchmarks/bench_book.py [--quick] [--jobs 2] [--no-warm] [--in-place] [--one-make]
        [--no-kernel-server] [--no-page-server]

``--in-place`` times this checkout instead of a clone (its ``_build/cache`` set aside and restored).
``--one-make`` runs ``make book`` itself, cold and then warm, and times it whole, as a reader's command
is timed: the paper data's check, the stage and chapters (the kernel server then starts beside the stage, the
Makefile's ``EARLY_KERNEL_SERVER``, which separate makes cannot show) and the render. The stage's wall time is
read off its stamp and the render's from the newest executed notebook; their CPU is not separated.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {"stage": 100.0, "chapter warm": 30.0, "full cold": 180.0, "full warm": 60.0, "quick cold": 45.0}


def cpu_workload() -> float:
    """CPU seconds of a fixed workload: numpy kernels the chapters lean on, and an interpreted loop."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2000))
    start = time.process_time()
    for _ in range(20):
        z = 1.0 / (1.0 + np.exp(-x))
        np.sort(z, axis=1)
        z.T @ z[:, :400]
    total = 0
    for i in range(1_000_000):
        total += i % 7
    return time.process_time() - start


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: Environment variables that make every Python process of the build start coverage (``a1_coverage.pth``).
COVERAGE_HOOKS = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")


def kernel_server_cpu(tree: Path, *, wait: float = 10.0) -> float:
    """CPU seconds the kernel and page servers of ``tree`` logged so far: their forked children's and their own.

    Waits up to ``wait`` seconds for running servers to end first (they end within a second of the
    ``make`` that started them), so that their own CPU is logged.
    """
    import re

    states = [tree / "_build" / "kernel-server", tree / "_build" / "page-server"]
    deadline = time.monotonic() + wait
    while any(list(state.glob("*.sock")) for state in states) and time.monotonic() < deadline:
        time.sleep(0.1)
    total = 0.0
    for log in (log for state in states for log in state.glob("*.log")):
        text = log.read_text(errors="replace")
        total += sum(float(x) for x in re.findall(r"; (?:server )?cpu ([\d.]+) s", text))
    return total


def _make(tree: Path, target: str, *, quick: bool, jobs: int, venv: Path,
          kernel_server: bool = True, page_server: bool = True) -> tuple[float, float]:
    """Run ``make target`` in ``tree``; wall and CPU seconds (every process make waited for, forked kernels)."""
    env = {k: v for k, v in os.environ.items() if k not in COVERAGE_HOOKS} | {"PYTHONHASHSEED": "0"}
    if not kernel_server:
        env["IRTBOOK_FORK_KERNEL"] = "0"
    if not page_server:
        env["IRTBOOK_PAGE_SERVER"] = "0"
    for var in ("IRTLIB_REAL_DATA", "IRTLIB_PANDAGUARD_DATA", "IRTLIB_PAPER_DATA"):
        if env.get(var) is None and (found := _data_setting(var)):
            env[var] = found
    cmd = ["make", "--no-print-directory", f"-j{jobs}", target, "MANAGE_VENV=0", f"VENV={venv}", f"JOBS={jobs}",
           f"QUICK={'1' if quick else ''}"]
    cpu, forked, start = _children_cpu(), kernel_server_cpu(tree), time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    return wall, _children_cpu() - cpu + kernel_server_cpu(tree) - forked


#: Where the Makefile looks for the data sets beside the repository (a clone elsewhere is given them explicitly).
DATA_BESIDE = {"IRTLIB_REAL_DATA": "airbench2024_helm22", "IRTLIB_PANDAGUARD_DATA": "pandaguard_jbb",
               "IRTLIB_PAPER_DATA": "paper"}


def _data_setting(var: str) -> str | None:
    """The data set this checkout finds beside it (``../shared/realdata/...``), if any."""
    path = ROOT.parent / "shared" / "realdata" / DATA_BESIDE[var]
    return str(path) if path.is_dir() else None


def _durations(executed: Path) -> dict[str, float]:
    out = {}
    for nb in sorted(executed.glob("*.ipynb")):
        meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
        out[nb.stem] = float(meta.get("duration") or float("nan"))
    return out


def _tree(in_place: bool, scratch: Path) -> Path:
    if in_place:
        return ROOT
    tree = scratch / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(tree)], check=True)
    return tree


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="QUICK=1 (reduced settings)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters in parallel (make -j), workers of the stage")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm rerun")
    parser.add_argument("--in-place", action="store_true", help="time this checkout, not a fresh clone of HEAD")
    parser.add_argument("--one-make", action="store_true",
                        help="the cold stage and chapters in one `make executed`, as `make book` runs them")
    parser.add_argument("--no-kernel-server", action="store_true",
                        help="ordinary kernels, none forked from the kernel server (IRTBOOK_FORK_KERNEL=0)")
    parser.add_argument("--no-page-server", action="store_true",
                        help="every page in its own runner process, none forked (IRTBOOK_PAGE_SERVER=0)")
    parser.add_argument("--keep-executed", metavar="DIR",
                        help="copy the cold run's executed notebooks to DIR (to compare their glued values)")
    args = parser.parse_args(argv)
    venv = ROOT / ".venv"

    hooks = [k for k in COVERAGE_HOOKS if k in os.environ]
    if hooks:
        print(f"{', '.join(hooks)} set in this environment: removed for the build (coverage would trace every "
              "process)", flush=True)
    unit = min(cpu_workload() for _ in range(3))
    steps: dict[str, tuple[float, float]] = {}
    machine = [("start", unit, os.getloadavg()[0])]      # the workload again after each step, and the load

    def step(name: str, target: str) -> None:
        steps[name] = _make(tree, target, quick=args.quick, jobs=args.jobs, venv=venv,
                            kernel_server=not args.no_kernel_server, page_server=not args.no_page_server)
        machine.append((f"after {name}", cpu_workload(), os.getloadavg()[0]))
    with tempfile.TemporaryDirectory(prefix="bench-book-") as tmp:
        tree = _tree(args.in_place, Path(tmp))
        cache, saved = tree / "_build" / "cache", None
        if args.in_place and cache.exists():          # set the chapters' cache aside, restore it after
            saved = Path(tmp) / "cache-saved"
            shutil.move(str(cache), saved)
        try:
            executed = tree / "_build" / "executed"
            shutil.rmtree(executed, ignore_errors=True)
            if args.one_make:
                started = time.time()
                step("book (cold, one make)", "book")
                stamps = list((tree / "_build" / "cache").glob(".stage-*"))
                stage_wall = max(p.stat().st_mtime for p in stamps) - started if stamps else float("nan")
                ended = started + steps["book (cold, one make)"][0]
                render_wall = ended - max(p.stat().st_mtime for p in executed.glob("*.ipynb"))
            else:
                step("stage (cold)", "stage")
                step("chapters (cold)", "executed")
                step("render (cold)", "html")
                stage_wall = steps["stage (cold)"][0]
            cold = _durations(executed)
            if args.keep_executed:
                shutil.copytree(executed, args.keep_executed, dirs_exist_ok=True)
            print("cold:", ", ".join(f"{name} {s:.1f} s" for name, s in cold.items()), flush=True)
            warm = {}
            if not args.no_warm:
                shutil.rmtree(executed)
                try:
                    if args.one_make:
                        step("book (warm, one make)", "book")
                    else:
                        step("chapters (warm)", "executed")
                        step("render (warm)", "html")
                except subprocess.CalledProcessError as exc:       # report the cold run all the same
                    print(f"warm run failed ({exc}); the chapters it finished are shown", flush=True)
                warm = _durations(executed)
        finally:
            if args.in_place:
                shutil.rmtree(cache, ignore_errors=True)
                if saved is not None:
                    shutil.move(str(saved), cache)

    mode = "quick" if args.quick else "full"
    print(f"book build ({mode}, -j{args.jobs}, {'this checkout' if args.in_place else 'fresh clone of HEAD'}, "
          f"{'ordinary kernels' if args.no_kernel_server else 'kernels forked from the kernel server'}, "
          f"{'a runner process per page' if args.no_page_server else 'runners forked from the page server'}); "
          f"CPU workload {unit:.2f} s (one unit)")
    print(f"  {'chapter':24s} {'cold s':>8s} {'cold units':>10s} {'warm s':>8s} {'warm units':>10s}")
    for name in sorted(cold, key=lambda n: -cold[n]):
        w = warm.get(name, float("nan"))
        flag = "" if not warm or w <= BUDGET_S["chapter warm"] else "  over 30 s"
        print(f"  {name:24s} {cold[name]:8.1f} {cold[name] / unit:10.1f} {w:8.1f} {w / unit:10.1f}{flag}")
    print(f"  {'sum of chapters':24s} {sum(cold.values()):8.1f} {sum(warm.values()):8.1f}")
    for step, (wall, cpu) in steps.items():
        print(f"{step:18s} wall {wall:7.1f} s  cpu {cpu:7.1f} s  ({wall / unit:6.1f} / {cpu / unit:6.1f} units)")
    print("CPU workload (s) and 1-minute load: " + "; ".join(f"{when} {w:.2f} s, load {load:.1f}"
                                                          for when, w, load in machine))
    if args.one_make:
        print(f"stage (cold)       wall {stage_wall:7.1f} s  (from its stamp; CPU counted with the book's)")
        print(f"render (cold)      wall {render_wall:7.1f} s  (after the newest executed notebook; CPU counted "
              "with the book's)")
        cold_wall = steps["book (cold, one make)"][0]
        warm_wall = steps.get("book (warm, one make)", (None,))[0]
    else:
        cold_wall = steps["stage (cold)"][0] + steps["chapters (cold)"][0] + steps["render (cold)"][0]
        warm_wall = (steps["chapters (warm)"][0] + steps["render (warm)"][0]
                     if "render (warm)" in steps else None)
    checks = [("stage", stage_wall, BUDGET_S["stage"]),
              (f"{mode} cold", cold_wall, BUDGET_S[f"{mode} cold"]) if f"{mode} cold" in BUDGET_S else None]
    if warm_wall is not None and mode == "full":
        checks.append(("full warm", warm_wall, BUDGET_S["full warm"]))
    for name, wall, budget in filter(None, checks):
        print(f"{name:18s} {wall:7.1f} s; budget {budget:.0f} s; ratio {wall / budget:.2f} "
              f"({'within' if wall <= budget else 'over'} budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
