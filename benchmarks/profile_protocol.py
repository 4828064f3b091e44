"""Profile protocol runs of chapters 05 and 06 in this process (n_jobs=1) under cProfile.

Each run is :func:`irtlib.run_protocol` as :func:`irtbook.pipeline.protocol_benchmark` calls it, without its
result cache (the split calibrations are read from ``--cache-dir``'s ``splits`` where present). Prints each
run's CPU and wall seconds and the protocol's own clock, then cProfile's top functions by internal and
cumulative time; writes the profile to ``--out``.

    .venv/bin/python benchmarks/profile_protocol.py --run paper --max-splits 10 --cache-dir /tmp/cache
    .venv/bin/python benchmarks/profile_protocol.py --run alt --cache-dir /tmp/cache
    .venv/bin/python benchmarks/profile_protocol.py --run authors --cache-dir /tmp/cache wmdp-bio
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from irtbook.pipeline import book_protocol, load_benchmark, protocol_budgets, protocol_sizes, split_cache

ALL = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


def run_one(bench, run: str, *, max_splits, cache_dir, profile=None):
    """One run of chapter 06's ``other`` (``paper``), ``alt_runs`` (``alt``) or 05's and 06's ``runs`` (``authors``)."""
    from irtbook.pipeline import split_batch
    from irtlib.protocol.agreement import run_protocol

    name = "paper" if run == "paper" else "authors"
    proto = book_protocol(bench, name, fresh_anchor_max_items=2000)
    methods = ["fluid", "total-fisher"] if run == "alt" else None
    engine = "map" if run == "alt" else proto.engine
    n_splits, n_test = protocol_sizes(bench, protocol=proto, max_splits=max_splits)
    ks = protocol_budgets(bench, protocol=proto)
    if profile is not None:
        profile.enable()
    try:
        return run_protocol(bench.full, methods=methods, ks=ks, n_splits=n_splits, n_test=n_test, seed=proto.seed,
                            engine=engine, n_jobs=1, variance_threshold=0.01, progress=False, protocol=proto,
                            benchmark=bench.name, calibration_cache=split_cache(cache_dir),
                            split_batch=split_batch(n_splits, 1))
    finally:
        if profile is not None:
            profile.disable()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=None)
    parser.add_argument("--run", choices=["paper", "alt", "authors"], required=True)
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--out", default="/tmp/protocol.prof")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    names = args.benchmarks or (ALL if args.run != "alt" else [b for b in ALL if b != "safetybench"])
    pr = cProfile.Profile(time.process_time)      # CPU seconds: the machine is shared
    for name in names:
        bench = load_benchmark(name)
        cpu, wall = time.process_time(), time.perf_counter()
        df = run_one(bench, args.run, max_splits=args.max_splits, cache_dir=args.cache_dir, profile=pr)
        clock = {k: round(v, 1) for k, v in df.attrs.get("seconds", {}).items()}
        print(f"{name}: cpu {time.process_time() - cpu:.1f} wall {time.perf_counter() - wall:.1f} rows {len(df)} "
              f"clock {clock}", flush=True)
    pr.dump_stats(args.out)
    pstats.Stats(pr).sort_stats("tottime").print_stats(args.top)
    pstats.Stats(pr).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
