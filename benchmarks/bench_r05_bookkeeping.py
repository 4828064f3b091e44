"""Chapter 05's Fluid MLE bookkeeping and the fresh FasterPAM's initial medoids: old forms against new, one process.

Two exact cuts of helper ``r05`` (``benchmarks/RESULTS.md``), each timed against its old form in this
process, alternated (old, new, new, old per round), results compared:

- **the authors' FasterPAM's random initial medoids**: ``RandomState(42).choice(n, k, replace=False)``
  per budget (old) against :func:`irtlib.selection.fasterpam.random_medoids` (one kept permutation per
  split), on ``--splits`` splits of ``--items`` items and the authors' 19 budgets of WMDP-Bio's size;
- **the MLE run's per-step bookkeeping**: :class:`irtlib.selection.estimators.MleEstimator`'s ``push``
  through ``TwoPLItems.at`` and ``RowTerms.estimate`` taking every address at every call (old) against
  the direct lookup and the kept addresses (new), ``--models`` models with per-model banks for
  ``--steps`` steps (pushes and estimates only: no selection).

    .venv/bin/python benchmarks/bench_r05_bookkeeping.py --rounds 2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from irtlib.selection import fasterpam, score_kernel
from irtlib.selection.estimators import MleEstimator, _MleRun
from irtlib.selection.items import TwoPLItems


def old_medoids(n, k, seed):
    return np.random.RandomState(int(seed)).choice(n, int(k), False).astype(np.uintp)


def medoids(fn, *, splits, items, budgets):
    out = []
    for _ in range(splits):
        fasterpam._permutation.cache_clear()                  # a new split: its permutation drawn again
        out.extend(fn(items, k, 42) for k in budgets)
    return out


class _OldRowTerms(score_kernel.RowTerms):
    def estimate(self, theta, x, a, b, t, *, tol, bounds, max_newton, max_halvings, max_bisection):
        self._fit(a.shape)
        lo, hi = bounds
        self.evaluated += self.lib.mle_estimate(
            theta.size, int(t), a.shape[1], x.ctypes.data, a.ctypes.data, b.ctypes.data, theta.ctypes.data,
            self.g.ctypes.data, self.h.ctypes.data, self.at.ctypes.data, self.upto.ctypes.data, float(tol),
            float(lo), float(hi), int(max_newton), int(max_halvings), int(max_bisection))


class _OldMleRun(_MleRun):
    def __init__(self, *args):
        super().__init__(*args)
        self._terms = _OldRowTerms(self._terms.lib)

    def push(self, j, x):
        a, b, _ = self.items.at(j)
        obs = (j >= 0) & ~np.isnan(x)
        if self.t + 1 > self.A.shape[1]:
            from irtlib.selection.estimators import _grow
            self.A, self.B, self.X = _grow((self.A, self.B, self.X), self.t + 1)
        t = self.t
        self.A[:, t] = np.where(obs, a, 0.0)
        self.B[:, t] = np.where(obs, b, 0.0)
        self.X[:, t] = np.where(obs, x, 0.0)
        self.t += 1


def mle_steps(old, *, models, steps, seed=0):
    rng = np.random.default_rng(seed)
    n_items = steps + 50
    a, b = np.exp(rng.normal(0, 0.5, (models, n_items))), rng.normal(0, 1, (models, n_items))
    ability = rng.normal(0, 1, models)
    x = (rng.random((models, n_items)) < 1 / (1 + np.exp(-a * (ability[:, None] - b)))).astype(float)
    order = np.argsort(rng.random((models, n_items)), axis=1)[:, :steps]
    items = TwoPLItems(a, b)
    est = MleEstimator()
    run = _OldMleRun(est, items, models, steps, 0.0) if old else _MleRun(est, items, models, steps, 0.0)
    rows = np.arange(models)
    out = np.empty((models, steps))
    start = time.process_time()
    for t in range(steps):
        j = order[:, t]
        run.push(j, x[rows, j])
        out[:, t] = run.estimate()[0]
    return time.process_time() - start, out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--splits", type=int, default=70)
    parser.add_argument("--items", type=int, default=1090)
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)
    if score_kernel.load() is None:
        raise SystemExit("the MLE kernel does not load here")
    budgets = [1, 2, 3, 4, 6, 8, 11, 15, 20, 27, 37, 50, 68, 92, 125, 170, 231, 314, 327]
    times = {"medoids": {"old": [], "new": []}, "mle": {"old": [], "new": []}}
    same = True
    for r in range(args.rounds):
        for label in ("old", "new", "new", "old"):
            t = time.process_time()
            got = medoids(old_medoids if label == "old" else fasterpam.random_medoids, splits=args.splits,
                          items=args.items, budgets=budgets)
            times["medoids"][label].append(time.process_time() - t)
            ref = medoids(old_medoids, splits=1, items=args.items, budgets=budgets)
            same &= all(np.array_equal(g, q) for g, q in zip(got[:len(budgets)], ref, strict=True))
            seconds, est = mle_steps(label == "old", models=args.models, steps=args.steps)
            times["mle"][label].append(seconds)
            if label == "old" and r == 0:
                first = est
            same &= np.array_equal(est, first)
    load = os.getloadavg()[0]
    for part, got in times.items():
        old, new = np.mean(got["old"]), np.mean(got["new"])
        print(f"{part}: old {old:.3f} CPU s, new {new:.3f} CPU s, new / old {new / old:.2f} "
              f"(old {', '.join(f'{v:.3f}' for v in got['old'])}; new {', '.join(f'{v:.3f}' for v in got['new'])})")
    print(f"results equal: {same}; load {load:.1f}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
