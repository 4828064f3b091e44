"""Benchmark: ``agreement_curves`` (and ``summarise_table2``, which calls it) against its former implementation.

The curves of every protocol chapter (04b, 05, 06, 08, 09, ...) summarise per-split agreements by
method and budget. The former implementation took each group's 2.5% and 97.5% quantiles and its
count with Python lambdas (``Series.quantile`` per group, which deep-copies the results' ``attrs``
each time); the current one calls ``np.percentile`` once per group on the group's non-missing
values (the call pandas makes inside ``Series.quantile``) and counts with ``count``. This script
builds protocol-shaped results (``run_protocol``'s columns and ``attrs``: ``--splits`` splits x 8
methods x 15 budgets, 5% of the agreements undefined), checks that both implementations give the
same frame to the bit under both NaN policies, and prints the CPU seconds of each and their ratio,
measured in the same process. ``--cache DIR`` adds every protocol result pickled in a chapter
cache (``_build/cache``). Run from the repository root::

    .venv/bin/python benchmarks/bench_agreement_curves.py [--splits 100] [--repeat 3] [--cache _build/cache]
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.protocol.agreement import _finish_curves, _nan_fill, _rule, agreement_curves


def former_agreement_curves(results: pd.DataFrame, *, nan_policy: str | None = None,
                            level: float = 0.95) -> pd.DataFrame:
    """The implementation before the change (per-group lambdas; the rest shared), kept here as the baseline."""
    nan_policy = _rule(results, "nan_policy", nan_policy, "zero")
    band = _rule(results, "band", None, "sd")
    keys = (["benchmark"] if "benchmark" in results.columns else []) + ["method", "k"]
    data = results.assign(value=_nan_fill(results["agreement"], nan_policy), undefined=results["agreement"].isna())
    q = (1.0 - level) / 2.0
    g = data.groupby(keys, sort=False)
    out = g["value"].agg(mean="mean", sd="std", lo=lambda s: s.quantile(q), hi=lambda s: s.quantile(1 - q),
                         n=lambda s: s.notna().sum(), n_splits="size")
    return _finish_curves(out, g, level=level, band=band, nan_policy=nan_policy)


def protocol_like(n_splits: int, *, seed: int = 0) -> pd.DataFrame:
    """Results shaped as :func:`irtlib.run_protocol`'s, with its kind of ``attrs``."""
    rng = np.random.default_rng(seed)
    methods = ["fluid", "random", "random-irt", "anchor", "tinybenchmarks", "disco", "stratified", "marginal"]
    ks = [5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500, 750, 1000]
    split, method, k = (a.ravel() for a in np.meshgrid(np.arange(n_splits), methods, ks, indexing="ij"))
    agreement = np.clip(0.6 + 0.35 * np.log(k) / np.log(1000) + rng.normal(0, 0.08, k.size), -1, 1)
    agreement[rng.random(k.size) < 0.05] = np.nan
    df = pd.DataFrame({"split": split, "method": method, "k": k, "agreement": agreement})
    df.attrs.update({"source": "simulated", "n_models": 77, "n_items": 1000, "n_items_filtered": 900, "ks": ks,
                     "methods": methods, "n_splits": n_splits, "n_test": 10, "seed": 0, "engine": "map",
                     "seconds": {"calibration": 1.0, "selection": 2.0}, "protocol": "authors",
                     "protocol_settings": {"split_rule": "authors", "variance_rule": "authors", "ks": ks},
                     "nan_policy": "omit", "band": "se"})
    return df


def cached_results(cache: Path) -> list[pd.DataFrame]:
    """Every protocol result pickled in a chapter cache."""
    found = []
    for path in sorted(cache.glob("*.pkl")):
        try:
            with path.open("rb") as fh:
                value = pickle.load(fh)
        except Exception:   # noqa: BLE001  (entries of other kinds, or another library version's classes)
            continue
        if isinstance(value, pd.DataFrame) and {"method", "k", "agreement"} <= set(value.columns):
            found.append(value)
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=None, help="also every protocol result in this cache")
    args = parser.parse_args(argv)

    frames = [protocol_like(args.splits, seed=s) for s in range(args.repeat)]
    if args.cache is not None:
        extra = cached_results(args.cache)
        print(f"{len(extra)} protocol results from {args.cache}")
        frames += extra
    cpu = {"former": 0.0, "current": 0.0}
    for frame in frames:
        for policy in ("zero", "omit"):
            start = time.process_time()
            old = former_agreement_curves(frame, nan_policy=policy)
            cpu["former"] += time.process_time() - start
            start = time.process_time()
            new = agreement_curves(frame, nan_policy=policy)
            cpu["current"] += time.process_time() - start
            pd.testing.assert_frame_equal(old, new, check_exact=True)
    print(f"{len(frames)} result frames x 2 NaN policies: identical to the bit")
    print(f"CPU seconds: former {cpu['former']:.2f}, current {cpu['current']:.2f}; "
          f"ratio {cpu['former'] / cpu['current']:.1f}x")


if __name__ == "__main__":
    main()
