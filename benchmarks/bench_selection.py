"""Chapters 05 and 06's protocol runs: the three costs this pass removed, each against its old form.

Inputs are what the book runs (:func:`irtbook.pipeline.load_benchmark`: the real data where
found, else the simulated release; the authors' protocol, their calibration read from the split
cache when ``make stage`` has filled it). For each, the old computation (kept here as the
baseline) and the library's, in this process, on the same inputs; the results must be equal
(exactly), and the ratio of CPU seconds is printed:

1. Marginal Fisher and the authors' interleaved b-quartile rule on one split: before, two
   greedy runs, Marginal Fisher's to the largest budget and the b-quartile rule's through every
   item of the bank; now one run (:class:`irtlib.selection.static.MarginalFisherOrder`), as far
   as the interleaving's first ``k`` items need (:func:`irtlib.selection.static.interleave_quota`).
2. Fluid's maximum-likelihood ability (:class:`irtlib.selection.estimators.MleEstimator`) along
   the protocol's adaptive run of ``--splits`` splits: before, each Newton step evaluated the
   score again at the point its acceptance check had just evaluated, and a model stuck on a bound
   (every model with only safe answers so far) ran all 15 halving checks at that same point on
   every item; now the step reuses the check's score and a step that cannot move runs no check.
3. :func:`irtlib.protocol.agreement.agreement_curves` on those runs: before, a pandas Series per
   group (and a deep copy of the results' ``attrs`` into each) for the quantiles.
4. Fluid's MLE score terms (``--kernel``): numpy's dozen passes over the copied rows
   (``_MleRun._score`` without :mod:`irtlib.selection.score_kernel`) against the C kernel's one
   pass over the rows in place, along the protocol's Fluid run of ``--splits`` splits, alternated
   twice in this process (the best of each); every item and ability of every step must be equal.

    .venv/bin/python benchmarks/bench_selection.py [--static safetybench airbench2024] [--fluid wmdp-bio] [--splits 10]
        [--kernel safetybench wmdp-bio]   (``--static --fluid --kernel safetybench``: only the kernel's A/B)
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # single-threaded, like a protocol worker

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from irtbook.pipeline import book_protocol, load_benchmark, protocol_budgets, split_cache  # noqa: E402
from irtlib.core.ability import map_ability  # noqa: E402
from irtlib.protocol import agreement as ag  # noqa: E402
from irtlib.selection import estimators, score_kernel  # noqa: E402
from irtlib.selection import static as st  # noqa: E402
from irtlib.selection.methods import REGISTRY, Training  # noqa: E402


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def _protocol_inputs(name: str, cache_dir: str):
    bench = load_benchmark(name)
    proto = book_protocol(bench, "authors", fresh_anchor_max_items=2000)
    filtered, ref, _ = ag.protocol_data(bench.full, variance_threshold=0.01, reference=proto.reference, groups=None,
                                        n_test=proto.n_test, seed=proto.seed, n_test_groups=1,
                                        variance_rule=proto.variance_rule, split_rule=proto.split_rule)
    return bench, proto, np.ascontiguousarray(filtered.values), ref, protocol_budgets(bench, protocol=proto)


# ---------------------------------------------------------------------------- 1. Marginal Fisher
def bench_static(name: str, *, cache_dir: str) -> float:
    bench, proto, values, _, ks = _protocol_inputs(name, cache_dir)
    train, _ = ag.split_models(values.shape[0], proto.n_test, proto.seed, 0, rule=proto.split_rule)
    (a, b), = ag.calibrate_splits(values, [train], engine=proto.engine,
                                  seed=ag.calibration_seeds(proto.seed, [0], protocol=proto),
                                  cache_dir=split_cache(cache_dir))
    pool = np.flatnonzero(np.isfinite(a))
    a, b, x = a[pool], b[pool], values[train][:, pool]
    theta = np.asarray(map_ability(x, a, b).theta)
    ks = [k for k in ks if k <= pool.size]
    kmax = ks[-1]

    def before():          # two greedy runs: to the largest budget, and through every item
        mf = st.marginal_fisher(a, b, theta, kmax).items
        full = st.marginal_fisher(a, b, theta, a.size).items
        return mf, st.interleave_bins(full, st.b_quantile_bins(b, 4))[:kmax]

    def after():
        training = Training(a=a, b=b, theta=theta, values=x, bquartile_rule="interleave")
        return (REGISTRY["marginal-fisher"].select(training, ks)[kmax].items,
                REGISTRY["marginal-fisher-bq"].select(training, ks)[kmax].items)

    (old_mf, old_bq), t_old = _cpu(before)
    (new_mf, new_bq), t_new = _cpu(after)
    assert np.array_equal(old_mf, new_mf) and np.array_equal(old_bq, new_bq), "the subsets differ"
    print(f"  {bench.display_name}, split 0 ({a.size} items, k up to {kmax}): "
          f"{t_old:.2f} s -> {t_new:.2f} s CPU, {t_old / t_new:.1f}x, subsets identical")
    return t_old / t_new


# ---------------------------------------------------------------------------- 2. Fluid's MLE
class _OldMleRun(estimators._MleRun):
    """The Newton iteration before this pass: the score evaluated again where the check had evaluated it."""

    def estimate(self):
        e = self.e
        lo, hi = e.bounds
        theta = self.theta.copy()
        active = np.arange(theta.size)
        fallback = []
        for _ in range(e.max_newton):
            if not active.size:
                break
            th = theta[active]
            T, dT = self._score(active, th, slope=True)
            done = np.abs(T) < e.tol
            broken = ~done & (~np.isfinite(dT) | (dT == 0.0))
            go = ~done & ~broken
            fallback.append(active[broken])
            rows, th, T, dT = active[go], th[go], T[go], dT[go]
            new = np.clip(th - T / dT, lo, hi)
            absT = np.abs(T)
            pending = np.arange(rows.size)
            for _h in range(e.max_halvings):
                if not pending.size:
                    break
                Tn = self._score(rows[pending], new[pending])
                pending = pending[~((np.abs(Tn) < absT[pending]) | ~np.isfinite(Tn))]
                new[pending] = 0.5 * (new[pending] + th[pending])
            stuck = new == th
            theta[rows] = new
            fallback.append(rows[stuck])
            active = rows[~stuck]
        fallback.append(active)
        rows = np.concatenate(fallback) if fallback else np.empty(0, dtype=np.intp)
        if rows.size:
            theta[rows] = self._fallback(rows)
        self.theta = theta
        return theta.copy(), theta


def bench_fluid(name: str, *, splits: int, cache_dir: str) -> tuple[float, pd.DataFrame]:
    bench, proto, values, ref, ks = _protocol_inputs(name, cache_dir)
    captured = []
    real = ag.run_adaptive

    def spy(*args, **kwargs):
        traj = real(*args, **kwargs)
        captured.append(traj.estimate.copy())
        return traj

    def run():
        return ag.run_splits(values, ref, list(range(splits)), ks=ks, methods=("fluid",), n_test=proto.n_test,
                             seed=proto.seed, protocol=proto, calibration_cache=split_cache(cache_dir))

    ag.run_adaptive = spy
    new_run = estimators._MleRun
    try:
        estimators._MleRun = _OldMleRun
        old, t_old = _cpu(run)
        estimators._MleRun = new_run
        new, t_new = _cpu(run)
    finally:
        estimators._MleRun = new_run
        ag.run_adaptive = real
    assert np.array_equal(captured[0], captured[1], equal_nan=True), "the ability paths differ"
    assert np.array_equal(np.array(old["rows"], dtype=object)[:, :3], np.array(new["rows"], dtype=object)[:, :3])
    print(f"  {bench.display_name}, {splits} splits, Fluid to k = {ks[-1]}: the run {t_old:.1f} s -> {t_new:.1f} s "
          f"CPU, {t_old / t_new:.2f}x; every ability of every step identical")
    rows = pd.DataFrame(new["rows"], columns=["split", "method", "k", "agreement"])
    return t_old / t_new, rows


# ---------------------------------------------------------------------------- 3. agreement_curves
def _old_curves(results: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """agreement_curves' aggregation before this pass (a Series per group for the quantiles)."""
    data = results.assign(value=results["agreement"].fillna(0.0))
    q = (1.0 - level) / 2.0
    return data.groupby(["method", "k"], sort=False)["value"].agg(
        mean="mean", sd="std", lo=lambda s: s.quantile(q), hi=lambda s: s.quantile(1 - q),
        n=lambda s: s.notna().sum(), n_splits="size")


def bench_curves(rows: pd.DataFrame) -> float:
    many = pd.concat([rows.assign(method=f"{m}-{i}") for i in range(8) for m in ("fluid",)], ignore_index=True)
    many.attrs.update({"nan_policy": "zero", "band": "sd", "seconds": {str(i): float(i) for i in range(50)},
                       "protocol_settings": {str(i): str(i) for i in range(50)}})
    old, t_old = _cpu(lambda: _old_curves(many))
    new, t_new = _cpu(lambda: ag.agreement_curves(many))
    for col in ("mean", "sd", "lo", "hi", "n_splits"):
        assert np.array_equal(old[col].to_numpy(), new[col].to_numpy()), col
    print(f"  {len(many)} rows, {len(new)} curve points: {t_old:.2f} s -> {t_new:.2f} s CPU, "
          f"{t_old / t_new:.1f}x, identical")
    return t_old / t_new


# ---------------------------------------------------------------------------- 4. the MLE's C kernel
def bench_kernel(name: str, *, splits: int, cache_dir: str) -> float:
    bench, proto, values, ref, ks = _protocol_inputs(name, cache_dir)
    lib = score_kernel.load()
    if lib is None:
        print(f"  {bench.display_name}: the kernel cannot be built here; nothing to compare")
        return float("nan")
    trajectories, times = {"numpy": [], "kernel": []}, {"numpy": [], "kernel": []}
    real = ag.run_adaptive

    def run(which):
        def spy(*args, **kwargs):
            traj = real(*args, **kwargs)
            trajectories[which].append(traj)
            return traj

        ag.run_adaptive = spy
        score_kernel._LOADED["lib"] = None if which == "numpy" else lib
        try:
            return ag.run_splits(values, ref, list(range(splits)), ks=ks, methods=("fluid",), n_test=proto.n_test,
                                 seed=proto.seed, protocol=proto, calibration_cache=split_cache(cache_dir))
        finally:
            ag.run_adaptive = real
            score_kernel._LOADED["lib"] = lib

    for _ in range(2):
        for which in ("numpy", "kernel"):
            times[which].append(_cpu(lambda w=which: run(w))[1])
    first = trajectories["numpy"][0]
    for traj in trajectories["numpy"][1:] + trajectories["kernel"]:
        assert np.array_equal(traj.items, first.items), "the items given differ"
        assert np.array_equal(traj.estimate, first.estimate, equal_nan=True), "the ability paths differ"
    t_old, t_new = min(times["numpy"]), min(times["kernel"])
    print(f"  {bench.display_name}, {splits} splits x {proto.n_test} test models, Fluid to k = {ks[-1]}: "
          f"the run {t_old:.1f} s -> {t_new:.1f} s CPU (best of 2, alternated), {t_old / t_new:.2f}x; "
          "every item and ability of every step identical")
    return t_old / t_new


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", nargs="*", default=["safetybench", "airbench2024"])
    parser.add_argument("--fluid", nargs="*", default=["wmdp-bio"])
    parser.add_argument("--kernel", nargs="*", default=["safetybench", "wmdp-bio"])
    parser.add_argument("--splits", type=int, default=10, help="splits of the Fluid runs (a QUICK build's 10)")
    parser.add_argument("--cache-dir", default="_build/cache")
    args = parser.parse_args(argv)
    print("1. Marginal Fisher and the interleaved b-quartile rule (one split):")
    for name in args.static:
        bench_static(name, cache_dir=args.cache_dir)
    print(f"2. Fluid's MLE along the protocol's adaptive runs ({args.splits} splits):")
    rows = None
    for name in args.fluid:
        _, rows = bench_fluid(name, splits=args.splits, cache_dir=args.cache_dir)
    if rows is not None:
        print("3. agreement_curves (the Fluid rows above, relabelled as 8 methods, with attrs as a run records them):")
        bench_curves(rows)
    print(f"4. Fluid's MLE score terms, numpy against the C kernel ({args.splits} splits):")
    for name in args.kernel:
        bench_kernel(name, splits=args.splits, cache_dir=args.cache_dir)


if __name__ == "__main__":
    main()
