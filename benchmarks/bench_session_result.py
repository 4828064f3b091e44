"""Benchmark: an adaptive session that reports its result at every step, bank checksum once per session or per call.

Chapter 07's held-out coverage study replays each held-out model's adaptive test with
:class:`irtlib.AdaptiveSession` and asks for ``result()`` at every budget. Each result carries the
bank's checksum (the SHA-256 of the item table written as CSV); the session now computes it once.
This script calibrates a bank on a simulated benchmark (``--benchmark``, the simulated release),
replays ``--models`` models for ``--items`` items with a result at every step, once as the session
does now and once with the checksum recomputed at every call (the former behaviour, patched in the
same process), checks both give the same results, and prints the CPU seconds and their ratio::

    .venv/bin/python benchmarks/bench_session_result.py [--benchmark harmbench] [--models 5] [--items 30]
"""

from __future__ import annotations

import argparse
import time

from irtlib import datasets
from irtlib.bank import session as session_module
from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession


def replay(bank, matrix, n_models: int, n_items: int) -> tuple[float, list]:
    """CPU seconds of the replays, and every result."""
    results = []
    start = time.process_time()
    for i in range(n_models):
        answers = dict(zip(matrix.items.astype(str), matrix.values[i], strict=True))
        session = AdaptiveSession(bank, max_items=n_items, model=str(matrix.models[i]))
        session.run(lambda item, answers=answers: answers.get(item), on_step=lambda s: results.append(s.result()))
    return time.process_time() - start, results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="harmbench")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--items", type=int, default=30)
    args = parser.parse_args(argv)

    matrix = datasets.load(args.benchmark, source="simulated")
    bank = calibrate_bank(matrix, interval_check=False)
    print(f"bank: {args.benchmark} (simulated), {len(bank)} items; {args.models} models x {args.items} steps")
    now, new = replay(bank, matrix, args.models, args.items)
    cached = session_module.AdaptiveSession._bank_sha256
    try:     # the former behaviour: the checksum recomputed at every result()
        session_module.AdaptiveSession._bank_sha256 = property(lambda self: self.bank.checksum)
        before, old = replay(bank, matrix, args.models, args.items)
    finally:
        session_module.AdaptiveSession._bank_sha256 = cached
    assert old == new, "the results differ"
    print(f"{len(new)} results, identical; CPU seconds: checksum per call {before:.2f}, once per session "
          f"{now:.2f}; ratio {before / now:.1f}x")


if __name__ == "__main__":
    main()
