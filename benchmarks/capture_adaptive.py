"""Capture every :func:`irtlib.run_adaptive` call of a build job, with its result, for a replay.

Runs chapter 06's comparison job (``comparison``: :func:`irtbook.comparison_runs.main`) or a chapter's
code cells in process (any other name: ``benchmarks/profile_chapter.py``'s cells, so pass ``-p N_JOBS
1`` to keep the protocol's runs in this process), with :func:`~irtlib.selection.adaptive.run_adaptive`
wrapped: each call's arguments and the :class:`~irtlib.selection.adaptive.Trajectory` it returned are
pickled to ``OUT/NNNNN.pkl``. ``benchmarks/bench_fluid_path.py`` replays them (the new code against the
captured results, and against the old path in the same process)::

    .venv/bin/python benchmarks/capture_adaptive.py comparison /tmp/cap-06 --cache-dir /tmp/cache-copy
    .venv/bin/python benchmarks/capture_adaptive.py 05_selection /tmp/cap-05 --cache-dir /tmp/cache-copy \\
        -p N_JOBS 1

The cache directory receives the job's protocol results: give a fresh copy of the stage's cache.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: The modules that import ``run_adaptive`` by name and call it in the protocol's runs.
MODULES = ("irtlib.selection.adaptive", "irtlib.protocol.agreement", "irtlib.protocol.model_agreement",
           "irtlib.selection")


def same_trajectory(t, u) -> bool:
    """Whether two :class:`~irtlib.selection.adaptive.Trajectory` objects have the same items, estimates and
    final abilities, bit for bit (what a replay of the captured calls compares)."""
    import numpy as np

    ok = np.array_equal(t.items, u.items) and np.array_equal(t.estimate, u.estimate, equal_nan=True)
    if t.ability is not None or u.ability is not None:
        ok = ok and np.array_equal(t.ability, u.ability, equal_nan=True)
    return ok


def install(out: Path) -> None:
    """Wrap ``run_adaptive`` in :data:`MODULES` so that each call is pickled to ``out``."""
    import importlib

    from irtlib.selection import adaptive

    original = adaptive.run_adaptive
    out.mkdir(parents=True, exist_ok=True)
    count = [0]

    def spy(*args, **kwargs):
        traj = original(*args, **kwargs)
        with open(out / f"{count[0]:05d}.pkl", "wb") as fh:
            pickle.dump({"args": args, "kwargs": kwargs, "result": traj}, fh, protocol=pickle.HIGHEST_PROTOCOL)
        count[0] += 1
        return traj

    for name in MODULES:
        module = importlib.import_module(name)
        if getattr(module, "run_adaptive", None) is original:
            module.run_adaptive = spy


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    job, out, rest = argv[0], Path(argv[1]), argv[2:]
    os.chdir(ROOT)
    install(out)
    if job == "comparison":
        from irtbook.comparison_runs import main as run_job

        return run_job(rest)
    import profile_chapter

    return profile_chapter.main([job, *rest, "--top", "5", "--out", str(out / "profile.prof")])


if __name__ == "__main__":
    sys.exit(main())
