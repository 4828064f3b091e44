"""CPU seconds of the authors' agreement protocol per benchmark, this tree against a baseline tree, A/B alternated.

What chapters 05 and 06 run (:func:`irtbook.pipeline.protocol_benchmark` with the ``"authors"``
protocol, ``fresh_anchor_max_items=2000``, one job), on the split calibrations of an existing
split-stage cache (``python -m irtbook.split_stage --cache-dir DIR``), with the protocol's own results
recomputed every run (each run gets a new cache directory holding only a link to the splits). Each
benchmark runs in a fresh process per tree, the trees alternating (baseline first), ``--repeat`` times;
the script prints every run's CPU and wall seconds, the baseline / this tree ratio of the CPU seconds,
and whether the two trees' result DataFrames are equal (``pandas.DataFrame.equals``: every number
bit for bit).

    git worktree add /tmp/static-base main
    .venv/bin/python benchmarks/bench_static.py --base /tmp/static-base --splits /tmp/static/cache/splits \\
        --benchmarks wmdp-bio airbench2024 [--repeat 1]

``--components NAME ...`` instead times, in this process on split 0 of each benchmark (its calibration
read from ``--cache-dir``'s split cache), the two pieces this tree changed against their old form,
alternated twice (the best of each), and checks the results are equal:

1. Marginal Fisher's greedy order as far as the authors' Marginal Fisher and interleaved b-quartile rule
   read it: numpy's lazy greedy (``greedy_kernel`` switched off) against the C kernel.
2. The static MAP methods' scoring of the test models at every budget: one ``score_subset`` per method
   and budget against one ``score_subsets_map`` per budget.

    .venv/bin/python benchmarks/bench_static.py --components airbench2024 safetybench --cache-dir /tmp/static/cache
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_CHILD = r"""
import os, pickle, sys, tempfile, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from irtbook.pipeline import book_protocol, load_benchmark, protocol_benchmark
name, splits, out = sys.argv[1:4]
bench = load_benchmark(name)
proto = book_protocol(bench, "authors", fresh_anchor_max_items=2000)
with tempfile.TemporaryDirectory() as d:
    os.symlink(splits, os.path.join(d, "splits"))
    t, w = time.process_time(), time.perf_counter()
    df = protocol_benchmark(bench, protocol=proto, cache_dir=d, n_jobs=1)
    cpu, wall = time.process_time() - t, time.perf_counter() - w
with open(out, "wb") as fh:
    pickle.dump({"df": df, "cpu": cpu, "wall": wall, "seconds": df.attrs.get("seconds")}, fh)
"""


def _run(tree: Path, name: str, splits: str, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{tree / 'bookkit'}", OPENBLAS_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", _CHILD, name, splits, out], check=True, env=env, cwd=tree)
    with open(out, "rb") as fh:
        return pickle.load(fh)


def _load() -> str:
    return os.getloadavg()[0].__format__(".1f")


def _cpu(fn, repeat=2):
    import time

    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return out, best


def components(name: str, cache_dir: str) -> None:
    """Split 0 of ``name``: the greedy order and the MAP scoring, old form against new (see the module docstring)."""
    import numpy as np

    from irtbook.pipeline import book_protocol, load_benchmark, protocol_budgets, split_cache
    from irtlib.core.ability import map_ability
    from irtlib.protocol import agreement as ag
    from irtlib.selection import greedy_kernel
    from irtlib.selection.methods import REGISTRY, Training
    from irtlib.selection.static import score_subset, score_subsets_map

    bench = load_benchmark(name)
    proto = book_protocol(bench, "authors", fresh_anchor_max_items=2000)
    filtered, _, _ = ag.protocol_data(bench.full, variance_threshold=0.01, reference=proto.reference, groups=None,
                                      n_test=proto.n_test, seed=proto.seed, n_test_groups=1,
                                      variance_rule=proto.variance_rule, split_rule=proto.split_rule)
    values = np.ascontiguousarray(filtered.values)
    train, test = ag.split_models(values.shape[0], proto.n_test, proto.seed, 0, rule=proto.split_rule)
    (a, b), = ag.calibrate_splits(values, [train], engine=proto.engine,
                                  seed=ag.calibration_seeds(proto.seed, [0], protocol=proto),
                                  cache_dir=split_cache(cache_dir))
    pool = np.flatnonzero(np.isfinite(a))
    a, b, x, x_test = a[pool], b[pool], values[train][:, pool], values[np.ix_(test, pool)]
    theta = np.asarray(map_ability(x, a, b).theta)
    ks = [k for k in protocol_budgets(bench, protocol=proto) if k <= pool.size]
    methods = ("total-fisher", "marginal-fisher", "marginal-fisher-bq")

    def select():
        training = Training(a=a, b=b, theta=theta, values=x, bquartile_rule="interleave")
        return {m: REGISTRY[m].select(training, ks) for m in methods}

    saved = greedy_kernel._LOADED.get("lib", greedy_kernel.load())
    rows = {}
    for _ in range(2):                       # alternated: numpy, kernel, numpy, kernel
        greedy_kernel._LOADED["lib"] = None
        old, t_old = _cpu(select, 1)
        greedy_kernel._LOADED["lib"] = saved
        new, t_new = _cpu(select, 1)
        rows.setdefault("old", []).append(t_old)
        rows.setdefault("new", []).append(t_new)
    same = all(np.array_equal(old[m][k].items, new[m][k].items) for m in methods for k in ks)
    t_old, t_new = min(rows["old"]), min(rows["new"])
    print(f"{name}: split 0, {a.size} items, {x.shape[0]} training models, k up to {ks[-1]}")
    print(f"  static selection of {', '.join(methods)}: numpy greedy {t_old:.2f} CPU s, kernel {t_new:.2f} "
          f"({t_old / t_new:.1f}x), subsets identical: {same}  (kernel loaded: {saved is not None})")

    def per_method():
        out = {}
        for m in methods:
            prev, out[m] = None, []
            for k in ks:
                prev = score_subset(x_test, new[m][k], how="map", a=a, b=b, theta0=prev)
                out[m].append(prev)
        return out

    def batched():
        out = {m: [] for m in methods}
        for k in ks:
            start = [out[m][-1] if out[m] else None for m in methods]
            for m, th in zip(methods, score_subsets_map(x_test, [new[m][k] for m in methods], a=a, b=b,
                                                        theta0=start), strict=True):
                out[m].append(th)
        return out

    times = {"per method": [], "batched": []}
    for _ in range(2):
        s_old, t = _cpu(per_method, 1)
        times["per method"].append(t)
        s_new, t = _cpu(batched, 1)
        times["batched"].append(t)
    same = all(np.array_equal(p, q) for m in methods for p, q in zip(s_old[m], s_new[m], strict=True))
    t_old, t_new = min(times["per method"]), min(times["batched"])
    print(f"  MAP scoring of {x_test.shape[0]} test models at {len(ks)} budgets: per method {t_old:.3f} CPU s, "
          f"batched {t_new:.3f} ({t_old / t_new:.1f}x), abilities identical: {same}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--components", nargs="+", metavar="NAME", help="time the changed pieces instead")
    parser.add_argument("--cache-dir", default="_build/cache", help="split cache of --components")
    parser.add_argument("--base", type=Path, help="the baseline tree (a checkout of main)")
    parser.add_argument("--splits", help="a split-stage cache's splits directory")
    parser.add_argument("--benchmarks", nargs="+", default=["wmdp-bio", "airbench2024"])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    if args.components:
        print(f"load {_load()}")
        for name in args.components:
            components(name, args.cache_dir)
        return
    if args.base is None or args.splits is None:
        parser.error("--base and --splits are needed (or --components)")
    trees = {"baseline": args.base.resolve(), "this tree": HERE}
    print(f"authors' protocol, one job; baseline {trees['baseline']}, this tree {HERE}")
    total = {label: 0.0 for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.benchmarks:
            cpu = {label: [] for label in trees}
            frames = {}
            for r in range(args.repeat):
                for label, tree in trees.items():
                    load = _load()
                    res = _run(tree, name, args.splits, os.path.join(tmp, f"{label}-{name}-{r}.pkl"))
                    cpu[label].append(res["cpu"])
                    frames[label] = res["df"]
                    stages = res["seconds"] or {}
                    shown = ", ".join(f"{k} {v:.1f}" for k, v in stages.items() if k != "total")
                    print(f"{name:20s} {label:9s} run {r + 1}: {res['cpu']:7.1f} CPU s, {res['wall']:7.1f} s wall "
                          f"(load {load} before)  [stage wall s: {shown}]", flush=True)
            best = {label: min(v) for label, v in cpu.items()}
            for label in trees:
                total[label] += best[label]
            equal = frames["baseline"].equals(frames["this tree"])
            print(f"{name:20s} best CPU s: baseline {best['baseline']:.1f}, this tree {best['this tree']:.1f}, "
                  f"ratio {best['baseline'] / best['this tree']:.2f}x; DataFrames equal: {equal}", flush=True)
    print(f"total best CPU s: baseline {total['baseline']:.1f}, this tree {total['this tree']:.1f}, "
          f"ratio {total['baseline'] / total['this tree']:.2f}x")


if __name__ == "__main__":
    main()
