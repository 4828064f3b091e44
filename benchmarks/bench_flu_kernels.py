"""Old against new selection kernels in one process: the same numbers, and the CPU ratio (helper ``flu``).

Each kernel changed by branch ``flu`` is compiled twice with the flags its loader uses: from a base
commit's sources (``git show BASE:path``, default ``main``) into a temporary directory, and from this
tree. Both run on the same inputs, alternated ABAB; every output is compared bit for bit and the CPU
seconds (``time.process_time``) of each build are printed with their ratio.

- ``mle``: Fluid's MLE (``score_kernel.RowTerms.estimate``, the whole Newton iteration) along an adaptive
  path: ``--models`` models, ``--steps`` steps, a new item each step, abilities and every estimate compared.
- ``maxinfo``: maximum information's full pass and steps (``maxinfo_kernel.FullPass``) over a bank, the
  picks compared (the base's build, this tree's AVX2 build and, where the processor has it, its AVX-512 build).
- ``random-irt``: Random IRT's exact-pass MAP estimate (``MapEstimator(order=0)``) with numpy's pass (the base's
  path, ``estimators.map_row_sums`` set to None) and with the C row sums; every estimate compared.

Run from the repository root::

    .venv/bin/python benchmarks/bench_flu_kernels.py [--base main] [--only mle maxinfo] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from irtlib.calibration.fused_kernel import compile_kernel, cpu_flags  # noqa: E402
from irtlib.selection import maxinfo_kernel, score_kernel  # noqa: E402

SELECTION = ROOT / "irtlib" / "selection"


def _old_tree(base: str, directory: Path, names: list[str]) -> Path:
    """``irtlib/selection/<name>`` of commit ``base`` written into ``directory`` (sources and their headers)."""
    for name in names:
        text = subprocess.run(["git", "show", f"{base}:irtlib/selection/{name}"], cwd=ROOT, capture_output=True,
                              check=True).stdout
        (directory / name).write_bytes(text)
    return directory


def _headers() -> list[str]:
    return [p.name for p in SELECTION.glob("*.h")]


def _build(source: Path, bind, flags: tuple[str, ...], directory: Path):
    return bind(compile_kernel(source=source, extra_flags=flags, directory=directory))


def _mle_case(rng, n_models: int, n_steps: int):
    a = np.exp(rng.normal(0.0, 0.5, (n_models, n_steps)))
    b = rng.normal(0.0, 1.5, (n_models, n_steps))
    theta_true = rng.normal(0.0, 1.0, n_models)
    p = 1.0 / (1.0 + np.exp(-a * (theta_true[:, None] - b)))
    x = (rng.random((n_models, n_steps)) < p).astype(float)
    return x, a, b


def _run_mle(lib, case) -> tuple[np.ndarray, float]:
    """Every step's estimates of an adaptive path (a new item each step) and the CPU seconds."""
    x_all, a_all, b_all = case
    n, steps = x_all.shape
    x, a, b = np.zeros_like(x_all), np.zeros_like(a_all), np.zeros_like(b_all)
    terms = score_kernel.RowTerms(lib)
    theta = np.zeros(n)
    out = np.empty((n, steps))
    c0 = time.process_time()
    for t in range(steps):
        x[:, t], a[:, t], b[:, t] = x_all[:, t], a_all[:, t], b_all[:, t]
        terms.estimate(theta, x, a, b, t + 1, tol=1e-6, bounds=(-8.0, 8.0), max_newton=50, max_halvings=30,
                       max_bisection=82)
        out[:, t] = theta
    return out, time.process_time() - c0


def bench_mle(base: str, tmp: Path, *, models: int, steps: int, rounds: int) -> None:
    flags = score_kernel.AVX512_FLAGS if "avx512f" in cpu_flags() else ()
    old_dir = _old_tree(base, tmp / "old", ["_mle_kernel.c", *_headers()])
    old = _build(old_dir / "_mle_kernel.c", score_kernel._bind, flags, tmp / "old")
    new = _build(score_kernel.SOURCE, score_kernel._bind, flags, tmp / "new")
    for lib, label in ((old, "old"), (new, "new")):
        if not score_kernel._matches_numpy(lib):
            raise SystemExit(f"the {label} MLE kernel fails its load check")
    case = _mle_case(np.random.default_rng(7), models, steps)
    times = {"old": [], "new": []}
    ref = None
    for _ in range(rounds):
        for label, lib in (("old", old), ("new", new)):
            est, sec = _run_mle(lib, case)
            times[label].append(sec)
            if ref is None:
                ref = est
            elif not np.array_equal(est.view(np.int64), ref.view(np.int64)):
                raise SystemExit(f"MLE estimates differ ({label})")
    # far cells: |z| beyond the fast range in some blocks (the old path there), still the same bits
    wild = _mle_case(np.random.default_rng(8), 16, 200)
    wild[1][:, ::7] *= 300.0
    e_old, _ = _run_mle(old, wild)
    e_new, _ = _run_mle(new, wild)
    same_wild = np.array_equal(e_old.view(np.int64), e_new.view(np.int64))
    _report("MLE estimate", f"{flags or 'default'} build, {models} models x {steps} steps", times,
            f"every estimate equal ({models * steps * rounds * 2} per build), far cells too: {same_wild}")


def _maxinfo_case(rng, n_models: int, n_items: int):
    a = np.exp(rng.normal(0.0, 0.5, n_items))
    b = rng.normal(0.0, 1.5, n_items)
    theta_path = np.cumsum(rng.normal(0.0, 0.05, (n_models, n_items)), axis=1) + rng.normal(0.0, 1.0, (n_models, 1))
    return a, b, theta_path


def _run_maxinfo(lib, case, *, steps: int, cache: int = 256) -> tuple[np.ndarray, float]:
    """Picks along given abilities: a step where the candidates decide, a full pass where they do not."""
    a, b, path = case
    n = path.shape[0]
    unused = np.ones((n, a.size), dtype=bool)
    radii = np.array([0.01, 0.03, 0.1, 0.3, 0.6])
    state = {"left": np.full(n, a.size, dtype=np.int64), "items": np.zeros((n, cache), dtype=np.int64),
             "ca": np.zeros((n, cache)), "cb": np.zeros((n, cache)), "used": np.zeros((n, cache), dtype=bool),
             "guard": np.zeros((n, cache), dtype=bool), "theta_c": np.zeros(n),
             "bound": np.full((n, radii.size + 1), np.inf)}
    c0 = time.process_time()
    full = maxinfo_kernel.FullPass(lib, a, b, unused, radii, cache=cache, state=state)
    picks = np.empty((n, steps), dtype=np.int64)
    live = np.ones(n, dtype=bool)
    first, _ = full(np.arange(n), path[:, 0], mark=True)
    picks[:, 0] = first
    for t in range(1, steps):
        out, pending = full.step(path[:, t], live)
        if pending.size:
            got, wild = full(pending, path[pending, t], mark=True)
            if wild.any():
                raise SystemExit("a wild row in the benchmark's bank")
            out[pending] = got
        picks[:, t] = out
    return picks, time.process_time() - c0


def bench_maxinfo(base: str, tmp: Path, *, models: int, items: int, steps: int, rounds: int) -> None:
    old_dir = _old_tree(base, tmp / "old", ["_maxinfo_kernel.c", *_headers()])
    old = _build(old_dir / "_maxinfo_kernel.c", maxinfo_kernel._bind, (), tmp / "old")
    builds = [("old", old), ("new", _build(maxinfo_kernel.SOURCE, maxinfo_kernel._bind, (), tmp / "new"))]
    wide = getattr(maxinfo_kernel, "AVX512_FLAGS", None)
    if wide and "avx512f" in cpu_flags():
        builds.append(("new avx512", _build(maxinfo_kernel.SOURCE, maxinfo_kernel._bind, wide, tmp / "new512")))
    for label, lib in builds:
        if not maxinfo_kernel._matches_vector(lib):
            raise SystemExit(f"the {label} maximum-information kernel fails its load check")
    case = _maxinfo_case(np.random.default_rng(9), models, items)
    times = {label: [] for label, _ in builds}
    ref = None
    for _ in range(rounds):
        for label, lib in builds:
            picks, sec = _run_maxinfo(lib, case, steps=steps)
            times[label].append(sec)
            if ref is None:
                ref = picks
            elif not np.array_equal(picks, ref):
                raise SystemExit(f"maximum information's picks differ ({label})")
    _report("maximum information", f"{models} models, {items} items, {steps} steps", times,
            f"every pick equal ({models * steps} per build and round)")


def bench_random_irt(*, rounds: int) -> None:
    """Random IRT's exact-pass MAP (``MapEstimator(order=0)``): numpy's pass (old) against the C row sums (new)."""
    from irtlib.protocol.agreement import budget_grid
    from irtlib.selection import estimators
    from irtlib.selection.adaptive import MapEstimator, RandomSelection, run_adaptive

    rng = np.random.default_rng(10)
    n, m = 10, 4906
    a, b = np.exp(rng.normal(0.0, 0.5, m)), rng.normal(0.0, 1.5, m)
    x = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(-a * (rng.normal(0.0, 1.0, n)[:, None] - b)))).astype(float)
    ks = budget_grid(m)
    real = estimators.map_row_sums
    times = {"old": [], "new": []}
    ref = None
    for _ in range(rounds):
        for label, sums in (("old", lambda: None), ("new", real)):
            estimators.map_row_sums = sums
            c0 = time.process_time()
            for seed in range(10):
                traj = run_adaptive(x, a, b, budget=ks[-1], selector=RandomSelection(), estimator=MapEstimator(order=0),
                                    seed=seed, record=ks)
            times[label].append(time.process_time() - c0)
            if ref is None:
                ref = traj.estimate
            elif not np.array_equal(traj.estimate.view(np.int64), ref.view(np.int64), equal_nan=False):
                raise SystemExit(f"Random IRT's estimates differ ({label})")
    estimators.map_row_sums = real
    _report("Random IRT's MAP", f"10 splits x {n} models, {m} items, {len(ks)} budgets to {ks[-1]}", times,
            "every estimate equal")


def _report(what: str, size: str, times: dict, same: str) -> None:
    old = min(times["old"])
    print(f"{what} ({size}); load {os.getloadavg()[0]:.1f}")
    for label, secs in times.items():
        print(f"  {label:>11}: CPU s {', '.join(f'{s:.3f}' for s in secs)}  (best {min(secs):.3f}, "
              f"ratio to old {min(secs) / old:.3f})")
    print(f"  {same}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the commit whose kernels are 'old' (default main)")
    parser.add_argument("--only", nargs="*", default=["mle", "maxinfo", "random-irt"],
                        choices=["mle", "maxinfo", "random-irt"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-flu-") as tmp:
        tmp = Path(tmp)
        for sub in ("old", "new", "new512"):
            (tmp / sub).mkdir()
        if "mle" in args.only:
            bench_mle(args.base, tmp, models=args.models, steps=args.steps, rounds=args.rounds)
        if "maxinfo" in args.only:
            bench_maxinfo(args.base, tmp, models=100, items=4906, steps=1000, rounds=args.rounds)
        if "random-irt" in args.only:
            bench_random_irt(rounds=args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
