"""Chapter 05's three exact cuts of issue 26 (`h05`), each against its old form in this process, in CPU seconds.

1. FasterPAM (the authors' Anchor Points) on a column-major distance matrix against the row-major one:
   the same loss, medoids and labels.
2. The warm-started Anchor Points path (SafetyBench's and AIR-Bench's) with incremental cluster sums
   against the alternating k-medoids that sums every cluster at every iteration (the test's copy of the
   old function): the same subsets.
3. Fluid's MLE kernel built for AVX-512 (eight cells per vector) against the default build (four with
   AVX2): the same items and estimates (skipped without AVX-512).

Simulated inputs of the chapter's sizes (WMDP-Bio's 23 x 1,090 training block and budgets for 1;
SafetyBench's 23 x 11,395 and budgets for 2; 60 test models, a 3,000-item test for 3), one BLAS thread
as the protocol runs; forms alternated ``--rounds`` times::

    .venv/bin/python benchmarks/bench_c05_anchor_mle.py --rounds 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "selection"), str(ROOT / "tests")]     # the old path: the tests' copy


def _responses(rng, n_models, n_items):
    ability = rng.normal(size=(n_models, 1))
    p = 1.0 / (1.0 + np.exp(rng.normal(size=(1, n_items)) - ability))
    return (rng.random((n_models, n_items)) < p).astype(float)


def _clock(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def fasterpam_layout(rng, rounds):
    from irtlib.selection import fasterpam
    from irtlib.selection.static import correlation_distances

    diss = correlation_distances(_responses(rng, 23, 1090))
    ks = [1, 2, 4, 9, 18, 38, 78, 162, 336, 695, 1000]
    forms = {"row-major (before)": np.ascontiguousarray(diss), "column-major (now)": np.asfortranarray(diss)}
    runs = {name: [] for name in forms}
    results = {}
    for _ in range(rounds):
        for name, d in forms.items():
            cpu, res = _clock(lambda d=d: [fasterpam.random_fasterpam(d, k, seed=42) for k in ks])
            runs[name].append(cpu)
            results[name] = res
    same = all(a[0] == b[0] and np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
               for a, b in zip(*results.values(), strict=True))
    return runs, same


def anchor_path(rng, rounds):
    from test_subsets import _alternate_recomputing_every_sum

    from irtlib.selection import static

    x = _responses(rng, 23, 11395)
    ks = [1, 2, 5, 13, 44, 157, 556, 1292, 3000]
    now = static._alternate
    runs = {"every cluster summed (before)": [], "incremental sums (now)": []}
    results = {}
    for _ in range(rounds):
        for name, fn in zip(runs, (_alternate_recomputing_every_sum, now), strict=True):
            static._alternate = fn
            try:
                cpu, res = _clock(lambda: static.anchor_points_path(x, ks, seed=0, solver="alternate"))
            finally:
                static._alternate = now
            runs[name].append(cpu)
            results[name] = res
    a, b = results.values()
    same = all(np.array_equal(a[k].items, b[k].items) and np.array_equal(a[k].weights, b[k].weights) for k in ks)
    return runs, same


def mle_builds(rng, rounds):
    from irtlib.calibration.fused_kernel import compiled, cpu_flags
    from irtlib.selection import score_kernel
    from irtlib.selection.adaptive import MleEstimator, run_adaptive

    if "avx512f" not in cpu_flags() or score_kernel.load() is None:
        return None, None
    libs = {"default build (before)": compiled(score_kernel.SOURCE, score_kernel._bind, switch="IRTLIB_SCORE_KERNEL"),
            "AVX-512 build (now)": compiled(score_kernel.SOURCE, score_kernel._bind, switch="IRTLIB_SCORE_KERNEL",
                                            extra_flags=score_kernel.AVX512_FLAGS)}
    n_models, n_items = 60, 11395
    a = np.exp(rng.normal(0.0, 0.5, (n_models, n_items)))
    b = rng.normal(size=(n_models, n_items))
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (rng.normal(size=(n_models, 1)) - b)))).astype(float)
    runs = {name: [] for name in libs}
    results = {}
    saved = score_kernel._LOADED.get("lib")
    for _ in range(rounds):
        for name, lib in libs.items():
            score_kernel._LOADED["lib"] = lib
            try:
                cpu, res = _clock(lambda: run_adaptive(x, a, b, budget=3000, estimator=MleEstimator(), theta0=0.3))
            finally:
                score_kernel._LOADED["lib"] = saved
            runs[name].append(cpu)
            results[name] = res
    a_run, b_run = results.values()
    return runs, bool(np.array_equal(a_run.items, b_run.items) and np.array_equal(a_run.estimate, b_run.estimate))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    import os

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        for title, bench in (("FasterPAM, WMDP-Bio-sized, 11 budgets", fasterpam_layout),
                             ("Anchor Points' warm-started path, SafetyBench-sized, 9 budgets", anchor_path),
                             ("Fluid with the MLE, 60 models x 3,000 items", mle_builds)):
            runs, same = bench(np.random.default_rng(0), args.rounds)
            if runs is None:
                print(f"{title}: skipped (no AVX-512 or no kernel)")
                continue
            (old, t_old), (new, t_new) = runs.items()
            ratio = sum(t_new) / sum(t_old)
            print(f"{title}: {old} {', '.join(f'{t:.2f}' for t in t_old)} CPU s; {new} "
                  f"{', '.join(f'{t:.2f}' for t in t_new)}; ratio {ratio:.2f}; results equal: {same}")
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
