"""Benchmark: a page's cost with its kernel forked from the kernel server, against an ordinary kernel.

Runs ``tools/run_chapter.py`` on the given pages (``-p QUICK True``; the collectors with ``-p EXECUTED_DIR
_build/executed``, so a build must have run), alternating the two kinds of kernel page by page
(``IRTBOOK_FORK_KERNEL=0`` for the ordinary one; the order flips every round), and prints each page's
median wall and CPU seconds both ways and their differences. CPU is the runner's (with every process it
waited for, so an ordinary kernel is in it) plus, for a forked kernel, the kernel's own CPU as its
server logged it when it reaped it (``_build/kernel-server/*.log``). This process owns the server (the
runner's parent), so one server serves every forked page, as in ``make executed``; its start (its
imports) is printed apart, once: a build pays it once, or twice when two pages start together.

The pages' notebooks go to a scratch folder; the chapters' cache (``_build/cache``) is used as it is
(warm after a build). Run from the repository root after ``make executed QUICK=1``::

    .venv/bin/python benchmarks/bench_kernel_server.py [--rounds 3] [PAGE ...]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from bench_book import COVERAGE_HOOKS, DATA_BESIDE, _data_setting  # noqa: E402

PAGES = ("intro", "01_data", "03_ceiling", "results", "00_primer")
COLLECTORS = ("results", "scorecard", "teaching", "reproducibility")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _server_log(state: Path) -> str:
    return "".join(log.read_text(errors="replace") for log in sorted(state.glob("*.log")))


def run_page(page: str, *, forked: bool, out: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """One page by tools/run_chapter.py: wall s, CPU s (the forked kernel's included) and how its kernel started."""
    state = out / "kernel-server"
    before = _server_log(state) if state.exists() else ""
    args = ["-p", "QUICK", "True"] + (["-p", "EXECUTED_DIR", "_build/executed"] if page in COLLECTORS else [])
    cpu, start = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "tools/run_chapter.py", f"book/{page}.md",
                           str(out / "executed" / f"{page}.ipynb"), "--cwd", str(ROOT), "--", *args],
                          cwd=ROOT, env={**env, "IRTBOOK_FORK_KERNEL": "1" if forked else "0"},
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{page} failed:\n{done.stderr[-3000:]}")
    launch = re.search(r"\((.*) kernel\) ->", done.stdout).group(1)
    if forked:
        new = _server_log(state)[len(before):]
        kernel_cpu = [float(x) for x in re.findall(r"kernel \d+ exited with -?\d+; cpu ([\d.]+) s", new)]
        cpu += sum(kernel_cpu)
    return wall, cpu, launch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", default=list(PAGES), help=f"pages of book/ (default: {' '.join(PAGES)})")
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds (each page both ways per round)")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in COVERAGE_HOOKS} | {"PYTHONHASHSEED": "0"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["IRTBOOK_FORK_KERNEL_IDLE"] = "900"  # one server for the whole run, however long an ordinary page takes
    for var in DATA_BESIDE:  # what the Makefile exports
        if env.get(var) is None and (found := _data_setting(var)):
            env[var] = found
    results: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench-kernel-server-") as tmp:
        out = Path(tmp)
        # the server's start, once (its log has its own CPU at exit): a first forked page, not counted
        run_page(args.pages[0], forked=True, out=out, env=env)
        for r in range(args.rounds):
            for page in args.pages:
                for forked in ((True, False) if r % 2 == 0 else (False, True)):
                    wall, cpu, launch = run_page(page, forked=forked, out=out, env=env)
                    assert (launch == "forked") == forked, launch
                    results.setdefault((page, forked), []).append((wall, cpu))
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} done, load {loads[-1]:.1f}", flush=True)
        for sock in (out / "kernel-server").glob("*.sock"):
            subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tools'); "
                            "import fork_provisioner as f; r, a = f.request(sys.argv[1], {'op': 'stop'}); "
                            "r.sock.close()", str(sock)], cwd=ROOT)
        deadline = time.monotonic() + 10
        while list((out / "kernel-server").glob("*.sock")) and time.monotonic() < deadline:
            time.sleep(0.1)
        log = _server_log(out / "kernel-server")
    server_cpu = [float(x) for x in re.findall(r"server cpu ([\d.]+) s", log)]
    preload = [float(x) for x in re.findall(r"preloaded \d+ modules in ([\d.]+) CPU s", log)]
    print(f"pages by tools/run_chapter.py, QUICK, {args.rounds} alternating rounds; medians; "
          f"1-minute load {min(loads):.1f} to {max(loads):.1f}")
    print(f"  {'page':16s} {'ordinary wall':>13s} {'forked wall':>11s} {'ordinary cpu':>12s} {'forked cpu':>10s}"
          f" {'saved wall':>10s} {'saved cpu':>9s}")
    total = [0.0, 0.0, 0.0, 0.0]
    for page in args.pages:
        ow, oc = (statistics.median(x[i] for x in results[(page, False)]) for i in (0, 1))
        fw, fc = (statistics.median(x[i] for x in results[(page, True)]) for i in (0, 1))
        total = [total[0] + ow, total[1] + fw, total[2] + oc, total[3] + fc]
        print(f"  {page:16s} {ow:13.2f} {fw:11.2f} {oc:12.2f} {fc:10.2f} {ow - fw:10.2f} {oc - fc:9.2f}")
    print(f"  {'all':16s} {total[0]:13.2f} {total[1]:11.2f} {total[2]:12.2f} {total[3]:10.2f}"
          f" {total[0] - total[1]:10.2f} {total[2] - total[3]:9.2f}")
    print(f"the server: its imports {', '.join(f'{p:.2f}' for p in preload)} CPU s; its whole life "
          f"{', '.join(f'{c:.2f}' for c in server_cpu)} CPU s (paid once per build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
