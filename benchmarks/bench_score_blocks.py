"""The protocol's MAP scoring of static subsets (:func:`irtlib.selection.static.score_blocks_map`): stacked in C order.

Each budget of a protocol task scores the three MAP methods' subsets of every split in one
:func:`irtlib.core.ability.map_ability` call with per-row item parameters. The rows used to be stacked by
concatenating gathers (a column gather of the test responses, a broadcast row of ``a`` and ``b``), which numpy lays
out in Fortran order; the C sums (:mod:`irtlib.selection.ability_kernel`) then copied every one into C order, every
call (2.6 CPU s of chapter 06's comparison job in ``_layout``). They are now written into C-ordered arrays at once,
and the scores skip the standard errors they never read (``map_ability(standard_errors=False)``: one pass of the sums
fewer). This times the old stacking (kept here) against the library's on one task's blocks of a SafetyBench-sized bank
(10 splits, 10 test models, the three MAP methods, the protocol's budget grid) and checks that every estimate is the
same bit for bit::

    .venv/bin/python benchmarks/bench_score_blocks.py
"""

from __future__ import annotations

import os
import time

import numpy as np

from irtlib.core.ability import map_ability
from irtlib.protocol.agreement import budget_grid
from irtlib.selection import ability_kernel
from irtlib.selection.static import Subset, score_blocks_map


def old_score_blocks_map(blocks, *, prior_mean=0.0, prior_sd=1.0):
    """The stacking before: concatenated gathers (Fortran order), as the library had it."""
    out = [None] * len(blocks)
    sizes = [len(block[1]) for block in blocks]
    sums = ability_kernel.map_row_sums() if blocks else None
    for size in dict.fromkeys(sizes):
        group = [i for i, z in enumerate(sizes) if z == size]
        xs, rows_a, rows_b, start, counts = [], [], [], [], []
        for i in group:
            values, subset, a, b, theta0 = blocks[i]
            items = subset.items
            x = np.asarray(values, float)[:, items]
            n = x.shape[0]
            xs.append(x)
            rows_a.append(np.broadcast_to(np.asarray(a, float)[items], (n, size)))
            rows_b.append(np.broadcast_to(np.asarray(b, float)[items], (n, size)))
            start.append(np.broadcast_to(np.asarray(prior_mean if theta0 is None else theta0, float), (n,)))
            counts.append(n)
        theta = np.asarray(map_ability(np.concatenate(xs), np.concatenate(rows_a), np.concatenate(rows_b),
                                       prior_mean=prior_mean, prior_sd=prior_sd, theta0=np.concatenate(start),
                                       row_sums=sums).theta)
        at = 0
        for i, n in zip(group, counts, strict=True):
            out[i] = theta[at:at + n]
            at += n
    return out


def task_blocks(*, n_items: int = 11000, n_splits: int = 10, n_test: int = 10, n_methods: int = 3, seed: int = 0):
    """One budget grid's blocks per split and method, budget by budget (as ``_score_static_map`` makes them)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, (n_splits, n_test))
    per_budget = {}
    for split in range(n_splits):
        a, b = rng.lognormal(0.0, 0.5, n_items), rng.normal(0.0, 1.5, n_items)
        p = 1.0 / (1.0 + np.exp(-a * (theta[split][:, None] - b)))
        x = (rng.random((n_test, n_items)) < p).astype(float)
        orders = [rng.permutation(n_items) for _ in range(n_methods)]
        for k in budget_grid(n_items):
            per_budget.setdefault(k, []).extend((x, Subset(order[:k]), a, b, None) for order in orders)
    return per_budget


def main() -> int:
    if ability_kernel.load() is None:
        print("the ability kernel did not load (no compiler?): nothing to compare")
        return 0
    per_budget = task_blocks()
    for fn in (old_score_blocks_map, score_blocks_map):     # warm-up (kernel load, caches)
        fn(per_budget[min(per_budget)])
    seconds = {}
    results = {}
    for _ in range(3):
        for name, fn in (("old", old_score_blocks_map), ("new", score_blocks_map)):
            start = time.process_time()
            results[name] = [fn(blocks) for blocks in per_budget.values()]
            seconds.setdefault(name, []).append(time.process_time() - start)
    same = all(np.array_equal(o, n) for old, new in zip(results["old"], results["new"], strict=True)
               for o, n in zip(old, new, strict=True))
    old, new = min(seconds["old"]), min(seconds["new"])
    print(f"score_blocks_map, {len(per_budget)} budgets of 30 blocks (SafetyBench-sized bank): "
          f"old stacking {old:.3f} CPU s, C order {new:.3f} CPU s, ratio {old / new:.2f}; "
          f"estimates identical: {same}; load {os.getloadavg()[0]:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
