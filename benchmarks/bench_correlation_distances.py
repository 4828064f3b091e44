"""The authors' distance matrix on the chapters' own inputs: this tree's against main's steps, in one process, CPU s.

:func:`irtlib.selection.static.correlation_distances` (column-major, as
:func:`~irtlib.selection.static.anchor_points_fresh` asks) against the steps it took before (``numpy.corrcoef``,
NaN to 0, ``1 - r`` written column-major, clipped to [0, 2], zero diagonal: :func:`before`), on the training
responses of every ``anchor_points_fresh`` call captured by :mod:`bench_anchor_path` (``--inputs``, the same
pickles). Every matrix is compared by its bytes; the two forms run in turn (ABBA), one BLAS thread as the
protocol runs them::

    .venv/bin/python benchmarks/bench_correlation_distances.py --inputs /tmp/anchor-inputs wmdp-bio harmbench
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np


def before(train_values) -> np.ndarray:
    """``correlation_distances(train_values, order="F")`` as main computed it."""
    x = np.asarray(train_values, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.atleast_2d(np.corrcoef(x.T))
    np.nan_to_num(corr, copy=False, nan=0.0)
    diss = np.empty_like(corr, order="F")
    np.subtract(1.0, corr, out=diss)
    np.clip(diss, 0.0, 2.0, out=diss)
    np.fill_diagonal(diss, 0.0)
    return diss


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--inputs", default="/tmp/anchor-inputs", help="where bench_anchor_path's captures are")
    parser.add_argument("--run", default="authors", choices=["authors", "paper"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from irtlib.selection.static import correlation_distances

    total = {"before": 0.0, "after": 0.0}
    with threadpool_limits(limits=1):
        for name in args.benchmarks:
            calls = pickle.loads((Path(args.inputs) / f"{args.run}_{name}.pkl").read_bytes())
            xs = [np.asarray(x, float) for kind, x, _, _ in calls if kind == "fresh"]
            differ = sum(before(x).tobytes(order="A") != correlation_distances(x, order="F").tobytes(order="A")
                         for x in xs)
            cpu = {"before": 0.0, "after": 0.0}
            for r in range(args.rounds):
                for form in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    start = time.process_time()
                    for x in xs:
                        before(x) if form == "before" else correlation_distances(x, order="F")
                    cpu[form] += time.process_time() - start
            for form in cpu:
                total[form] += cpu[form] / args.rounds
            ratio = cpu["after"] / max(cpu["before"], 1e-9)
            print(f"{name}: {len(xs)} matrices ({xs[0].shape[1] if xs else 0} items), "
                  f"before {cpu['before'] / args.rounds:.3f} CPU s, after {cpu['after'] / args.rounds:.3f} CPU s, "
                  f"ratio {ratio:.3f}; matrices differing {differ}", flush=True)
    print(f"all: before {total['before']:.3f} CPU s, after {total['after']:.3f} CPU s, "
          f"ratio {total['after'] / max(total['before'], 1e-9):.3f}; load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
