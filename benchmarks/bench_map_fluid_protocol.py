"""Fluid with the MAP estimate as 06's paper-text protocol runs it: the C Newton against numpy's, one process.

Runs the protocol (:func:`benchmarks.profile_protocol.run_one`, ``--run paper``) once per benchmark to
capture the inputs it gives :func:`irtlib.run_adaptive` for Fluid (maximum information with
:class:`~irtlib.selection.MapEstimator`: the test models of every split as one batch), then replays
them ``--rounds`` times, alternating the estimator's numpy Newton (``_MapRun._kernel`` None) and the
C one (:mod:`irtlib.selection.map_kernel`), and prints the CPU seconds of each, the ratio, and
whether the items and estimates of every step are equal. Split calibrations are read from
``--cache-dir`` (a copy of the stage's cache).

    .venv/bin/python benchmarks/bench_map_fluid_protocol.py --cache-dir /tmp/cache --max-splits 10 \\
        safetybench airbench2024

(Its ``--products`` option, which measured the powers by repeated products before they were adopted in
both paths, is gone: both paths now use them; ``bench_full_protocol.py`` compares trees.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_protocol import run_one  # noqa: E402

from irtbook.pipeline import load_benchmark  # noqa: E402
from irtlib.protocol import agreement  # noqa: E402
from irtlib.selection import estimators, map_kernel  # noqa: E402
from irtlib.selection.adaptive import run_adaptive  # noqa: E402
from irtlib.selection.estimators import MapEstimator  # noqa: E402


def capture(name, *, max_splits, cache_dir):
    """The arguments of every Fluid (maximum information + MAP) call of ``run_adaptive`` in the paper protocol."""
    calls = []

    def spy(*args, **kwargs):
        sel, est = kwargs.get("selector"), kwargs.get("estimator")
        if getattr(sel, "adaptive", False) and isinstance(est, MapEstimator):
            calls.append((args, dict(kwargs)))
        return run_adaptive(*args, **kwargs)

    agreement.run_adaptive = spy
    try:
        run_one(load_benchmark(name), "paper", max_splits=max_splits, cache_dir=cache_dir)
    finally:
        agreement.run_adaptive = run_adaptive
    return calls


def replay(calls, *, kernel):
    """CPU seconds of the captured calls, and their trajectories, with or without the C Newton."""
    original = estimators._MapRun.__init__
    lib = map_kernel.load(estimators.map_kernel_matches)

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._kernel = lib if kernel else None

    estimators._MapRun.__init__ = init
    try:
        start = time.process_time()
        out = [run_adaptive(*args, **kwargs) for args, kwargs in calls]
        return time.process_time() - start, out
    finally:
        estimators._MapRun.__init__ = original


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--max-splits", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if map_kernel.load(estimators.map_kernel_matches) is None:
        print("the MAP kernel is not available here: nothing to compare")
        return 0
    for name in args.benchmarks:
        calls = capture(name, max_splits=args.max_splits, cache_dir=args.cache_dir)
        cpu = {"numpy": [], "C": []}
        same = True
        for r in range(args.rounds):
            out = {}
            for label in (("numpy", "C") if r % 2 == 0 else ("C", "numpy")):
                seconds, out[label] = replay(calls, kernel=label == "C")
                cpu[label].append(seconds)
            same &= all(np.array_equal(p.items, q.items) and np.array_equal(p.estimate, q.estimate, equal_nan=True)
                        for p, q in zip(out["numpy"], out["C"], strict=True))
        mean = {k: float(np.mean(v)) for k, v in cpu.items()}
        print(f"{name}: {len(calls)} Fluid run(s); numpy {', '.join(f'{v:.2f}' for v in cpu['numpy'])} s, "
              f"C {', '.join(f'{v:.2f}' for v in cpu['C'])} s; ratio C / numpy {mean['C'] / mean['numpy']:.2f}; "
              f"items and estimates of every step equal: {same}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
