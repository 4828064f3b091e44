"""Benchmark: chapter 07's held-out replays (one-model ``AdaptiveSession``) and its many small banks.

1. Chapter 07's :func:`irtbook.own_benchmark.held_out_coverage` replays each of the held-out models through an
:class:`irtlib.AdaptiveSession`, one item at a time, to 100 items; each step asked the test's stopping status
twice (:meth:`AdaptiveSession.propose` in :meth:`run`'s loop, then again in :meth:`record`, the same state),
each status went through ``np.select``, and each item id came from a pandas ``Index`` look-up (every proposal,
every item of every result). The new path (``irtlib.selection.stopping._first_reason``; the session's
``_open`` flag) asks once and without ``np.select``. The baseline is the old code put back by hand
(:func:`old_paths`): ``np.select`` in :meth:`StoppingRule.reasons`, a :meth:`propose` that always reads
:attr:`done`, ``str(index[i])`` for the item ids, and the bank's body made by pandas for every session's checksum
(now kept by the bank while its table is the same). Every result the chapter keeps (each budget's three
:meth:`AdaptiveSession.result`, all fields) is checked equal.
2. :func:`irtlib.calibrate_bank` held BLAS to one thread twice a bank (its stages, then the standard errors)
with ``threadpoolctl.threadpool_limits``, which walks every library the process has loaded each time (about
2 ms in a chapter's kernel); :func:`irtlib.calibration.blas.single_threaded_blas` (the MAP engine's) finds
them once. Timed on the banks of ``calibration_size`` (32 banks of 10 to 60 HarmBench models), every bank's
items and header checked equal.

3. ``calibration_size`` predicted each test model's full-benchmark score with
:meth:`irtlib.ItemBank.predicted_full_score`, one model at a time (a Series and an index look-up each):
``own_benchmark._predicted_full_scores`` does the 17 models of a bank at once, the same numbers bit for bit.

4. :attr:`irtlib.ItemBank.checksum` (each session's, each written bank's) formatted the body through pandas; it
is now written by the csv writer pandas calls, from the same fields (``irtlib.bank.format._csv_body``):
timed on the first held-out group's bank and on one of AIR-Bench 2024's size, the texts checked equal.

All are timed in this process, alternated (ABBA, CPU seconds) on the chapter's data.

Run from the repository root (``IRTLIB_PAPER_DATA`` set for the paper's HarmBench, as the book's build)::

    .venv/bin/python benchmarks/bench_cmid.py [--groups 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
import warnings

import numpy as np
import pandas as pd

from irtbook import own_benchmark as ob
from irtlib import datasets
from irtlib.bank import build
from irtlib.bank import format as bank_format
from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession
from irtlib.calibration import standard_errors
from irtlib.selection import stopping

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


class _OldNames:
    """The item ids as the old code read them: ``str(index[i])``, a pandas look-up each."""

    def __init__(self, index):
        self.index = index

    def __getitem__(self, i):
        return str(self.index[i])


@contextlib.contextmanager
def old_paths():
    """The baseline: the old ``reasons``, ``propose``, item-id look-ups and bank body (pandas', made every time)."""
    reasons, propose, names = stopping.StoppingRule.reasons, AdaptiveSession.propose, AdaptiveSession.__dict__["_names"]
    body = build.ItemBank._body
    stopping.StoppingRule.reasons, AdaptiveSession.propose = _old_reasons, _old_propose
    AdaptiveSession._names = property(lambda self: _OldNames(self._index))
    build.ItemBank._body = build.ItemBank._pandas_body
    try:
        yield
    finally:
        stopping.StoppingRule.reasons, AdaptiveSession.propose, AdaptiveSession._names = reasons, propose, names
        build.ItemBank._body = body


@contextlib.contextmanager
def old_blas_limits():
    """The baseline of the banks: ``threadpool_limits`` (the libraries walked at every call) in both places."""
    from threadpoolctl import threadpool_limits

    def walked():
        return threadpool_limits(limits=1, user_api="blas")

    kept = build.single_threaded_blas, standard_errors.single_threaded_blas
    build.single_threaded_blas = standard_errors.single_threaded_blas = walked
    try:
        yield
    finally:
        build.single_threaded_blas, standard_errors.single_threaded_blas = kept


def bench_banks(matrix, repeats: int) -> None:
    rng = np.random.default_rng(0)
    pool = np.setdiff1d(np.arange(matrix.shape[0]), rng.choice(matrix.shape[0], size=17, replace=False))
    draws = [rng.choice(pool, size=n, replace=False) for n in (10, 20, 40) for _ in range(10)] + [pool, pool]

    def banks():
        out = []
        for rows in draws:
            bank = calibrate_bank(matrix.subset(models=matrix.models[rows]), interval_check=False, seed=0)
            meta = {k: v for k, v in bank.meta.items() if k != "created"}          # the clock's
            meta["diagnostics"] = {k: v for k, v in meta["diagnostics"].items() if k != "fit_seconds"}
            out.append((bank.items, meta))
        return out

    times = {"old": [], "new": []}
    results = {}
    for order in ["old", "new", "new", "old"] * repeats:
        with old_blas_limits() if order == "old" else contextlib.nullcontext():
            start = time.process_time()
            results[order] = banks()
            times[order].append(time.process_time() - start)
    for (items_old, meta_old), (items_new, meta_new) in zip(results["old"], results["new"], strict=True):
        pd.testing.assert_frame_equal(items_old, items_new, check_exact=True)
        assert repr(meta_old) == repr(meta_new), "the bank headers differ"
    old, new = min(times["old"]), min(times["new"])
    print(f"{len(draws)} banks of calibration_size: old {old:.3f} CPU s, new {new:.3f} CPU s ({old / new:.2f}x), "
          "every bank equal")
    bench_predictions(matrix, draws, repeats)


def bench_predictions(matrix, draws, repeats: int) -> None:
    from irtlib.selection.adaptive import run_adaptive

    rng = np.random.default_rng(0)
    test = rng.choice(matrix.shape[0], size=17, replace=False)
    x_test = pd.DataFrame(matrix.values[test], columns=matrix.items.astype(str))
    cases = []
    for rows in draws:
        bank = calibrate_bank(matrix.subset(models=matrix.models[rows]), interval_check=False, seed=0)
        x = x_test[bank.item_ids].to_numpy()
        path = run_adaptive(x, bank.a, bank.b, budget=30)
        cases.append((bank, path.at(30), x, path.items[:, :30]))

    def old():
        return [np.array([bank.predicted_full_score(theta[i], known=pd.Series(x[i, given[i]], index=bank.item_ids[
            given[i]])) for i in range(len(theta))]) for bank, theta, x, given in cases]

    def new():
        return [ob._predicted_full_scores(bank, theta, x, given) for bank, theta, x, given in cases]

    times = {"old": [], "new": []}
    results = {}
    for order in ["old", "new", "new", "old"] * repeats:
        start = time.process_time()
        results[order] = (old if order == "old" else new)()
        times[order].append(time.process_time() - start)
    assert all(np.array_equal(o, n) for o, n in zip(results["old"], results["new"], strict=True))
    t_old, t_new = min(times["old"]), min(times["new"])
    print(f"calibration_size's predictions, {len(cases)} banks x 17 models: old {t_old:.3f} CPU s, new {t_new:.4f} "
          f"CPU s ({t_old / t_new:.0f}x), bit for bit equal")


def bench_body(bank, repeats: int) -> None:
    rng = np.random.default_rng(1)
    n = 4906
    big = build.ItemBank(pd.DataFrame({"a": np.exp(rng.normal(size=n)), "b": rng.normal(size=n),
                                       "safe_rate": rng.random(n), "n_models": rng.integers(1, 80, n),
                                       "se_a": rng.random(n), "se_b": rng.random(n),
                                       "prompt": [f"prompt {j}, with \"quotes\"" for j in range(n)]},
                                      index=[f"i{j}" for j in range(n)]))
    for name, b in ((f"held-out bank ({len(bank)} items)", bank), (f"{n}-item bank with prompts", big)):
        assert b._body() == b._pandas_body()
        times = {"old": [], "new": []}
        for order in ["old", "new", "new", "old"] * repeats:
            start = time.process_time()
            for _ in range(10):
                b._pandas_body() if order == "old" else bank_format._csv_body(b.items)    # made each time
            times[order].append((time.process_time() - start) / 10)
        old, new = min(times["old"]), min(times["new"])
        print(f"checksum body, {name}: old {1e3 * old:.2f} ms, new {1e3 * new:.2f} ms ({old / new:.2f}x), same text")


def _flat(out: dict) -> list:
    return [(k, [None if r is None else dataclasses.asdict(r) for r in rs]) for k, rs in sorted(out.items())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=2, help="held-out groups replayed (the chapter: 11)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    matrix = datasets.load("harmbench")
    bench_banks(matrix, args.repeats)
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

    bench_body(work[0][0], args.repeats)

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
