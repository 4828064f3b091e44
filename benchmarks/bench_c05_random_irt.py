"""Random IRT's part of chapter 05's protocol runs, in CPU seconds, for A/B runs of two trees.

Runs :func:`irtlib.run_protocol` with ``methods=["random-irt"]`` (the authors' protocol, the chapter's
splits and budgets, ``n_jobs=1``, split calibrations read from ``--cache-dir``'s ``splits``) on each
benchmark, and prints each run's CPU seconds and a digest of its rows (split, method, k, the
agreement's bits), so two trees (``PYTHONPATH``) can be alternated and compared::

    .venv/bin/python benchmarks/bench_c05_random_irt.py --cache-dir /tmp/stage-copy
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time

BENCHMARKS = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=BENCHMARKS)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--methods", default="random-irt")
    args = parser.parse_args(argv)
    import irtlib
    from irtbook.pipeline import (
        book_protocol,
        load_benchmark,
        protocol_budgets,
        protocol_sizes,
        split_batch,
        split_cache,
    )
    from irtlib.protocol.agreement import run_protocol

    total = 0.0
    for name in args.benchmarks:
        bench = load_benchmark(name)
        proto = book_protocol(bench, "authors", fresh_anchor_max_items=2000)
        n_splits, n_test = protocol_sizes(bench, protocol=proto)
        t = time.process_time()
        df = run_protocol(bench.full, methods=args.methods.split(","), ks=protocol_budgets(bench, protocol=proto),
                          n_splits=n_splits, n_test=n_test, seed=proto.seed, engine=proto.engine, n_jobs=1,
                          variance_threshold=0.01, progress=False, protocol=proto, benchmark=name,
                          calibration_cache=split_cache(args.cache_dir), split_batch=split_batch(n_splits, 1))
        cpu = time.process_time() - t
        total += cpu
        digest = hashlib.sha256(df[["split", "k"]].to_numpy().tobytes() + df["method"].str.cat().encode()
                                + df["agreement"].to_numpy().tobytes()).hexdigest()[:16]
        print(f"{name}: {cpu:.2f} CPU s, {len(df)} rows, digest {digest}", flush=True)
    print(f"total {total:.2f} CPU s; load {os.getloadavg()}; irtlib from {os.path.dirname(irtlib.__file__)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
