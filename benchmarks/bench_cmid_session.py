"""Benchmark: a one-model ``AdaptiveSession``'s stopping checks (chapter 07's held-out replays).

Chapter 07's :func:`irtbook.own_benchmark.held_out_coverage` replays each of the held-out models through an
:class:`irtlib.AdaptiveSession`, one item at a time, to 100 items; each step asked the test's stopping status
twice (:meth:`AdaptiveSession.propose` in :meth:`run`'s loop, then again in :meth:`record`, the same state), and
each status went through ``np.select``. The new path (``irtlib.selection.stopping._first_reason``; the session's
``_open`` flag) asks once and without ``np.select``. The baseline is the old code put back by hand
(:func:`old_paths`): ``np.select`` in :meth:`StoppingRule.reasons`, and a :meth:`propose` that always reads
:attr:`done`. Both are timed in this process, alternated (ABBA, CPU seconds), on the chapter's first held-out
group (its bank calibrated as the chapter does), and every result the chapter keeps (each budget's three
:meth:`AdaptiveSession.result`, all fields) is checked equal.

Run from the repository root (``IRTLIB_PAPER_DATA`` set for the paper's HarmBench, as the book's build)::

    .venv/bin/python benchmarks/bench_cmid_session.py [--groups 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
import warnings

import numpy as np
import pandas as pd

from irtlib import datasets
from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession
from irtlib.selection import stopping
from irtbook import own_benchmark as ob

BUDGETS = [5, 10, 20, 30, 50, 100]


def _old_reasons(self, *, n_items, left, se=None, best_information=None, decided=None):
    """:meth:`StoppingRule.reasons` as it was (``np.select``)."""
    n_items = np.asarray(n_items)
    never = np.zeros(n_items.shape, dtype=bool)
    conditions = [
        never if self.decision is None else np.asarray(decided) != 0,
        never if self.target_se is None else (n_items > 0) & (np.asarray(se) <= self.target_se),
        never if self.max_items is None else n_items >= self.max_items,
        np.asarray(left) == 0,
        never if self.min_information is None else np.asarray(best_information) < self.min_information,
    ]
    return np.select(conditions, np.arange(len(stopping.STOP_REASONS)), -1)


def _old_propose(self):
    """:meth:`AdaptiveSession.propose` as it was (the stopping status read at every call)."""
    if self.done:
        return None
    if self._pending is None:
        self._pending = int(self._test.propose()[0])
    return str(self._index[self._pending])


@contextlib.contextmanager
def old_paths():
    """The baseline: the old ``reasons`` and ``propose`` put back for the duration."""
    reasons, propose = stopping.StoppingRule.reasons, AdaptiveSession.propose
    stopping.StoppingRule.reasons, AdaptiveSession.propose = _old_reasons, _old_propose
    try:
        yield
    finally:
        stopping.StoppingRule.reasons, AdaptiveSession.propose = reasons, propose


def _flat(out: dict) -> list:
    return [(k, [None if r is None else dataclasses.asdict(r) for r in rs]) for k, rs in sorted(out.items())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2, help="held-out groups replayed (the chapter: 11)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    matrix = datasets.load("harmbench")
    rng = np.random.default_rng(0)
    work = []
    for members in np.array_split(rng.permutation(matrix.shape[0]), 11)[:args.groups]:
        held = set(matrix.models[members])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bank = calibrate_bank(matrix.subset(models=[m for m in matrix.models if m not in held]), seed=0)
        for m in matrix.models[members]:
            work.append((bank, pd.Series(matrix.values[matrix.models.get_loc(m)],
                                         index=matrix.items.astype(str)).dropna(), m))

    def replay():
        return [_flat(ob._replay(bank, row, BUDGETS, m)) for bank, row, m in work]

    times = {"old": [], "new": []}
    results = {}
    for order in ["old", "new", "new", "old"] * args.repeats:
        with old_paths() if order == "old" else contextlib.nullcontext():
            start = time.process_time()
            results[order] = replay()
            times[order].append(time.process_time() - start)
    assert results["old"] == results["new"], "the replays differ"
    old, new = min(times["old"]), min(times["new"])
    print(f"{len(work)} held-out replays to {BUDGETS[-1]} items: old {old:.3f} CPU s, new {new:.3f} CPU s "
          f"({old / new:.2f}x), every result equal")


if __name__ == "__main__":
    main()
