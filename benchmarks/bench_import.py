"""Benchmark: how long ``import irtlib`` and ``irtlib --help`` take, as whole processes.

Each command runs ``--repeats`` times in a fresh interpreter (whole-process wall time, the
interpreter's own start-up included); the script prints the median of each and its ratio to
``python -c pass`` measured in the same run, so a busy machine slows the baseline too. It also
lists which heavy modules ``import irtlib`` loads. Run with::

    .venv/bin/python benchmarks/bench_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import irtlib": [sys.executable, "-c", "import irtlib"],
    "irtlib --help": [sys.executable, "-m", "irtlib", "--help"],
}

#: Modules whose presence after ``import irtlib`` is reported.
HEAVY = ("matplotlib", "seaborn", "torch", "pyro", "py_irt", "joblib", "tqdm", "kmedoids", "pyarrow",
         "irtlib.datasets", "irtbook", "irtlib.viz.figures", "irtlib.cli", "scipy.optimize", "pandas")


def _time(command: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def loaded_modules(env: dict) -> list[str]:
    """The :data:`HEAVY` modules present in ``sys.modules`` after ``import irtlib``."""
    code = f"import sys, irtlib; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for command in COMMANDS.values():          # warm the file system cache
        _time(command, env)
    times = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):               # interleaved, so load drifts hit every command alike
        for name, command in COMMANDS.items():
            times[name].append(_time(command, env))
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["python -c pass"]
    print(f"median of {args.repeats} runs (whole process, seconds; ratio to `python -c pass`):")
    for name, seconds in medians.items():
        print(f"  {name:<16} {seconds:7.3f} s  x{seconds / base:5.1f}  (import cost {seconds - base:6.3f} s)")
    loaded = loaded_modules(env)
    print(f"heavy modules loaded by `import irtlib`: {', '.join(loaded) or 'none'}")
    return {"medians": medians, "loaded": loaded}


if __name__ == "__main__":
    main()
