"""Maximum information's full passes in C against numpy's, one process, on the protocol's own Fluid runs.

Runs the protocol (:func:`benchmarks.profile_protocol.run_one`) once per ``RUN:BENCHMARK`` to capture the
arguments it gives :func:`irtlib.run_adaptive` with :class:`~irtlib.selection.MaxInformation` (Fluid: the
test models of every split as one batch; ``paper``: the MAP estimate, ``authors``: the MLE), then replays
them ``--rounds`` times, alternating the selector's numpy full pass (``IRTLIB_MAXINFO_FULL=0``) and the C
one (:class:`irtlib.selection.maxinfo_kernel.FullPass`), and prints each one's CPU seconds, the ratio, the
model-steps that needed a full pass, and whether the items and estimates of every step are equal.
Split calibrations are read from ``--cache-dir`` (a copy of the stage's cache).

    .venv/bin/python benchmarks/bench_maxinfo_full.py --cache-dir /tmp/cache --max-splits 10 \\
        paper:safetybench paper:airbench2024 authors:wmdp-bio
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profile_protocol import run_one  # noqa: E402

from irtbook.pipeline import load_benchmark  # noqa: E402
from irtlib.protocol import agreement  # noqa: E402
from irtlib.selection import selectors  # noqa: E402
from irtlib.selection.adaptive import run_adaptive  # noqa: E402
from irtlib.selection.selectors import MaxInformation  # noqa: E402


def capture(run, name, *, max_splits, cache_dir):
    """The arguments of every ``run_adaptive`` call with :class:`MaxInformation` in one protocol run."""
    calls = []

    def spy(*args, **kwargs):
        if isinstance(kwargs.get("selector"), MaxInformation):
            calls.append((args, dict(kwargs)))
        return run_adaptive(*args, **kwargs)

    agreement.run_adaptive = spy
    try:
        run_one(load_benchmark(name), run, max_splits=max_splits, cache_dir=cache_dir)
    finally:
        agreement.run_adaptive = run_adaptive
    return calls


def replay(calls, *, fused):
    """CPU seconds of the captured calls, their trajectories and the model-steps in full passes."""
    os.environ["IRTLIB_MAXINFO_FULL"] = "1" if fused else "0"
    passes = []
    original = selectors._MaxInfoRun.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        passes.append(self)

    selectors._MaxInfoRun.__init__ = init
    try:
        start = time.process_time()
        out = [run_adaptive(*args, **kwargs) for args, kwargs in calls]
        seconds = time.process_time() - start
    finally:
        selectors._MaxInfoRun.__init__ = original
        os.environ.pop("IRTLIB_MAXINFO_FULL")
    if fused and not all(run.fused is not None for run in passes):
        raise RuntimeError("the C full pass did not load here")
    return seconds, out, sum(run.full_passes for run in passes)


def equal(p, q):
    """Items and estimates of every step, bit for bit."""
    return np.array_equal(p.items, q.items) and np.array_equal(p.estimate, q.estimate, equal_nan=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="RUN:BENCHMARK, RUN one of paper, authors, alt")
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--max-splits", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    total = {"numpy": 0.0, "C": 0.0}
    for spec in args.runs:
        run, name = spec.split(":")
        calls = capture(run, name, max_splits=args.max_splits, cache_dir=args.cache_dir)
        cpu = {"numpy": [], "C": []}
        same, steps = True, {}
        for r in range(args.rounds):
            out = {}
            for label in (("numpy", "C") if r % 2 == 0 else ("C", "numpy")):
                seconds, out[label], steps[label] = replay(calls, fused=label == "C")
                cpu[label].append(seconds)
            same &= all(equal(p, q) for p, q in zip(out["numpy"], out["C"], strict=True))
        mean = {k: float(np.mean(v)) for k, v in cpu.items()}
        for k in total:
            total[k] += mean[k]
        n_steps = sum(int((t.items >= 0).sum()) for t in out["C"])
        print(f"{spec}: {len(calls)} run(s), {n_steps} model-steps; full passes numpy {steps['numpy']}, "
              f"C {steps['C']} model-steps; CPU s numpy {', '.join(f'{v:.2f}' for v in cpu['numpy'])}, "
              f"C {', '.join(f'{v:.2f}' for v in cpu['C'])}; ratio C / numpy {mean['C'] / mean['numpy']:.2f}; "
              f"items and estimates of every step equal: {same}", flush=True)
        if not same:
            return 1
    print(f"all: numpy {total['numpy']:.2f} s, C {total['C']:.2f} s, ratio {total['C'] / total['numpy']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
