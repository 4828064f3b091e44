"""The MLE kernel's CPU per cell with the portable exp against the C library's exp, in one process.

Compiles ``_mle_kernel.c`` as it is (``portable_exp_pair``, four cells at a time) and with ``MLE_LIBM_EXP``
(the C library's ``exp`` twice per cell, as before :mod:`irtlib.selection.portable_exp`), by the same
compiler driver and flags, and times ``mle_terms`` over a SafetyBench-sized block (60 models x 3,000
administered items, ``a`` log-normal, ``b`` and ability normal), alternating the two libraries; prints CPU
nanoseconds per cell and the ratio. Also one exponential alone: ``portable_exp`` over an array (C, and
its numpy twin), numpy's ``exp`` and ``math.exp``. And maximum information's kernel
(``_maxinfo_kernel.c``'s ``best_candidates4``, on :func:`irtlib.selection.maxinfo_kernel.random_case` rows of
3,000 candidates): as it is, and built with ``portable_exp`` in place of the C library's ``exp`` in its exact
evaluations (``_exact_information.h``; for this measurement only, its choices would then no longer be numpy's).

    .venv/bin/python benchmarks/bench_portable_exp_kernel.py --rounds 5
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from irtlib.calibration.fused_kernel import compile_kernel
from irtlib.selection import maxinfo_kernel, portable_exp, score_kernel


def _libm_kernel(directory: Path):
    wrapper = directory / "mle_kernel_libm_exp.c"
    wrapper.write_text(f'#define MLE_LIBM_EXP 1\n#include "{score_kernel.SOURCE}"\n')
    return score_kernel._bind(compile_kernel(source=wrapper, directory=directory))


def _accuracy() -> None:
    """The largest error in units in the last place, against long double's exp and the C library's (numpy's)."""
    rng = np.random.default_rng(1)
    x = np.concatenate([np.linspace(-708.39, 709.78, 2_000_001), rng.uniform(-40.0, 40.0, 1_000_000),
                        rng.normal(0.0, 8.0, 1_000_000)])
    y = portable_exp.portable_exp(x)
    if np.finfo(np.longdouble).nmant >= 63:
        exact = np.exp(x.astype(np.longdouble))
        ulp = np.spacing(exact.astype(np.float64)).astype(np.longdouble)
        err = np.abs((y.astype(np.longdouble) - exact) / ulp).astype(float)
        ref = np.abs((np.exp(x).astype(np.longdouble) - exact) / ulp).astype(float)
        print(f"portable_exp on {x.size} arguments in [-708.39, 709.78]: largest error {err.max():.3f} ulp, "
              f"mean {err.mean():.3f} (numpy's exp: {ref.max():.3f}, {ref.mean():.3f})")
    steps = np.abs(y.view(np.int64) - np.exp(x).view(np.int64))
    print(f"against numpy's exp: {(steps != 0).mean():.1%} differ, by at most {steps.max()} ulp")


def _maxinfo_portable(directory: Path):
    """``_maxinfo_kernel.c`` with its exact evaluations' ``exp`` replaced by ``portable_exp`` (a measurement only)."""
    wrapper = directory / "maxinfo_kernel_portable_exp.c"
    wrapper.write_text(f'#include <math.h>\n#include "{portable_exp.C_SOURCE.with_suffix(".h")}"\n'
                       f'#define exp(x) portable_exp(x)\n#include "{maxinfo_kernel.SOURCE}"\n')
    return maxinfo_kernel._bind(compile_kernel(source=wrapper, directory=directory))


def _maxinfo(directory: Path, rounds: int) -> None:
    libs = {"libm": maxinfo_kernel.load(), "portable": _maxinfo_portable(directory)}
    if libs["libm"] is None:
        print("maximum information's kernel cannot be built here")
        return
    rng = np.random.default_rng(3)
    theta, ca, cb, used = maxinfo_kernel.random_case(rng, 60, 3000, wild=False)
    sums = dict.fromkeys(libs, 0.0)
    for r in range(rounds):
        for label in (("libm", "portable") if r % 2 == 0 else ("portable", "libm")):
            t0 = time.process_time()
            for _ in range(50):
                maxinfo_kernel.best_candidates(libs[label], theta, ca, cb, used)
            sums[label] += (time.process_time() - t0) / (50 * ca.size) * 1e9
    print(f"maximum information's kernel per candidate: C library's exp in the exact evaluations "
          f"{sums['libm'] / rounds:.3f} ns, portable exp {sums['portable'] / rounds:.3f} ns "
          f"(portable/libm {sums['portable'] / sums['libm']:.3f})")


def _cpu_per_cell(lib, args, n_cells: int, reps: int) -> float:
    t = time.process_time()
    for _ in range(reps):
        lib.mle_terms(*args)
    return (time.process_time() - t) / (reps * n_cells) * 1e9


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(20261204)
    n, t = 60, 3000
    a = np.exp(rng.normal(0.0, 0.6, (n, t)))
    b = rng.normal(0.0, 1.5, (n, t))
    theta = rng.normal(0.0, 1.5, n)
    x = (rng.random((n, t)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    g, h = np.empty((n, t)), np.empty((n, t))
    rows, start = np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    call = (n, t, t, rows.ctypes.data, theta.ctypes.data, start.ctypes.data, x.ctypes.data, a.ctypes.data,
            b.ctypes.data, g.ctypes.data, h.ctypes.data)
    new = score_kernel.load()
    with tempfile.TemporaryDirectory() as tmp:
        old = _libm_kernel(Path(tmp))
        old.mle_terms(*call)
        new.mle_terms(*call)
        sums = {"old": 0.0, "new": 0.0}
        for r in range(args.rounds):
            for label, lib in ((("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))):
                ns = _cpu_per_cell(lib, call, n * t, args.reps)
                sums[label] += ns
                print(f"round {r + 1} {label}: {ns:.2f} ns per cell")
        _maxinfo(Path(tmp), args.rounds)
    print(f"MLE kernel per cell: C library's exp {sums['old'] / args.rounds:.2f} ns, portable exp "
          f"{sums['new'] / args.rounds:.2f} ns: new/old {sums['new'] / sums['old']:.3f} "
          f"({sums['old'] / sums['new']:.2f}x faster)")
    _accuracy()
    z = (a * (theta[:, None] - b)).ravel()
    clib = portable_exp.load_c()
    out, neg = np.empty_like(z), np.empty_like(z)          # written once before timing: no first-touch faults
    clib.portable_exp_pair_array(z.size, z.ctypes.data, out.ctypes.data, neg.ctypes.data)
    timings = {
        "portable_exp (C, vectorised)": lambda: clib.portable_exp_array(z.size, z.ctypes.data, out.ctypes.data),
        "portable_exp_pair (C, exp(z) and exp(-z))": lambda: clib.portable_exp_pair_array(
            z.size, z.ctypes.data, out.ctypes.data, neg.ctypes.data),
        "portable_exp (numpy twin)": lambda: portable_exp.portable_exp(z),
        "numpy's exp": lambda: np.exp(z, out=out),
    }
    for label, fn in timings.items():
        t0 = time.process_time()
        for _ in range(5):
            fn()
        print(f"{label}: {(time.process_time() - t0) / (5 * z.size) * 1e9:.2f} ns per element")
    zs = z[:200_000].tolist()
    t0 = time.process_time()
    for v in zs:
        math.exp(v)
    print(f"math.exp (the C library's, with Python's call): {(time.process_time() - t0) / len(zs) * 1e9:.1f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
